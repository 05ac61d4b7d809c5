//! Plans kept between runs, and the paths that skip planning.
//!
//! ```text
//!  SQL text ─text_shape─▶ learned text shape? ─yes─▶ its statement shape's plan + values
//!     │ no
//!     ▼
//!  AST ─plan_cache─▶ statement shape (filter literals become $n) ─▶ shared logical plan
//!                                         └─▶ kept physical plan, bound per run (exec::bind)
//!  prepared `SELECT .. WHERE key = $1` ─lookup─▶ PointLookup: key index, no plan at all
//! ```

pub(crate) mod lookup;
pub(crate) mod mapped;
pub(crate) mod plan_cache;
pub(crate) mod text_shape;

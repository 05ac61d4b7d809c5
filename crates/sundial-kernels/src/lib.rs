//! Sundial's scan kernels: filters evaluated into selection bitmaps, and aggregates folded
//! over the selected rows, reading column values in place (slices over the mapped files).
//!
//! ```text
//!  columns of a chunk ──▶ Predicate::select ──▶ Selection (1 bit per row, 64-row words)
//!        │                 leaf tests: typed loops, 64 rows a step,        │
//!        │                 conjuncts only over blocks still passing        │
//!        └── key codes/ints ─▶ Grouper::assign ──▶ slot per row ───────────┤
//!                                                                          ▼
//!                       Accumulator::update: count / sum / min / max per slot, no rows built
//! ```
//!
//! Comparisons of 32- and 64-bit integers with constants are written with AVX2 instructions
//! (`simd`), taken when the processor has them; everything else is portable Rust the compiler
//! vectorises, compiled for AVX2 too.
//!
//! Zone maps ([`Zone`]) summarise a run of a column's values; [`Predicate::may_pass`] tells
//! from them whether any row of the run can pass, so scans skip runs that cannot.
//!
//! The crate knows Arrow arrays and nothing of SQL: the query layer compiles its filters and
//! aggregates into [`Predicate`]s and [`Accumulator`]s, and turns the states back into the
//! arrays its plans expect. Floating-point values compare as DataFusion compares them (both
//! zeros equal, NaN equal to itself and above every number, a negative NaN below) and their extremes are taken in IEEE
//! 754's total order, as DataFusion's filters and aggregates do, so answers equal its general
//! path.

mod aggregate;
mod filter;
mod group;
mod selection;
mod simd;
mod values;
mod zone;

pub use aggregate::{Accumulator, Fold, Slots};
pub use filter::{Arith, ArithOp, CmpOp, Leaf, Predicate, Test};
pub use group::{DENSE_SLOTS_MAX, GROUP_KEYS_MAX, GroupKey, Grouper, KeyKind};
pub use selection::{Selection, count_set_bits};
pub use values::{ColumnValues, Domain, Values, domain_of, from_total_key, sql_key, total_key};
pub use zone::{Zeros, Zone};

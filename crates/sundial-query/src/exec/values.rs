//! A run's parameter values, on their way into the operators that filter by them.
//!
//! A plan kept for reuse is planned once with placeholders (`$1`, ...) in its scans' filters;
//! while it is planned, the first run's values are in scope ([`plan_for_reuse`]) so that the
//! scans can read their rows for that run; each later run puts its values in with
//! [`with_values`] (see [`super::bind`]).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::Expr;
use sundial_sql::names::placeholder_index;

tokio::task_local! {
    /// The values of the run whose plan is being planned for reuse.
    static PLANNING_VALUES: Arc<[ScalarValue]>;
}

/// While a plan is planned for reuse, the values of the run it is planned for.
pub(crate) fn planning_values() -> Option<Arc<[ScalarValue]>> {
    PLANNING_VALUES.try_with(Arc::clone).ok()
}

/// Runs `planning` (the physical planner) as planning for reuse with `values`.
pub(crate) async fn plan_for_reuse<F: Future>(values: &[ScalarValue], planning: F) -> F::Output {
    PLANNING_VALUES.scope(values.into(), planning).await
}

/// `filter` with `values` in place of its placeholders (`values[0]` is `$1`), each cast to
/// its placeholder's type.
pub(crate) fn with_values(filter: &Expr, values: &[ScalarValue]) -> DfResult<Expr> {
    let bound = filter.clone().transform(|e| {
        let Expr::Placeholder(p) = &e else {
            return Ok(Transformed::no(e));
        };
        let value = placeholder_index(&p.id)
            .and_then(|i| values.get(i))
            .ok_or_else(|| DataFusionError::Plan(format!("no value for parameter {}", p.id)))?;
        let value = match &p.field {
            Some(field) if field.data_type() != &value.data_type() => {
                value.cast_to(field.data_type())?
            }
            _ => value.clone(),
        };
        Ok(Transformed::yes(Expr::Literal(value, None)))
    })?;
    Ok(bound.data)
}

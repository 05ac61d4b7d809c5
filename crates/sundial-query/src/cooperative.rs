//! Every operator's output yields to the runtime now and then, so that any statement can be
//! stopped (cancel, timeout, hang-up, shutdown) and none holds a query thread for long.
//!
//! A statement runs as one stream polled by its session's task; the statement stops when the
//! session drops the stream, which it can only do between polls. DataFusion makes its leaves
//! (scans) spend the task's cooperative budget, so an operator that keeps reading its input
//! returns `Pending` once the budget is spent. An operator that *produces* many batches from
//! few input rows does not read its input while it does so: a cross join emitting the product
//! of two buffered sides, a nested-loop join, UNNEST, a recursive query. Above such an
//! operator, the consumer's loop (`count(*)` over the join) never returns.
//!
//! ```text
//!   AggregateExec            AggregateExec
//!     CrossJoinExec   ──▶      CooperativeExec      each batch spends budget: after a
//!       scan a                   CrossJoinExec      budget's worth the stream is Pending,
//!       scan b                     ...              and the session may drop it
//! ```
//!
//! [`YieldEverywhere`] therefore wraps every operator that has inputs in a `CooperativeExec`,
//! after all other rules. Invariant: in an optimized plan, every operator with inputs, except the
//! root (whose consumer is Sundial's own loop, which yields per answer chunk), is the child of
//! a `CooperativeExec` (or is one), so no loop over batches runs without yielding.
//! The cost is one budget decrement per batch per operator.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};

/// Wraps every operator with inputs in a `CooperativeExec` (see the module docs). Applying
/// it twice changes nothing.
#[derive(Debug, Default)]
pub struct YieldEverywhere;

impl PhysicalOptimizerRule for YieldEverywhere {
    fn name(&self) -> &str {
        "sundial_yield_everywhere"
    }

    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let wrapped = plan.transform_up(|node| {
            let children = node.children();
            if !children.iter().any(|c| needs_wrapping(c)) {
                return Ok(Transformed::no(node));
            }
            let children = children
                .into_iter()
                .map(|c| match needs_wrapping(c) {
                    true => Arc::new(CooperativeExec::new(c.clone())) as Arc<dyn ExecutionPlan>,
                    false => c.clone(),
                })
                .collect();
            Ok(Transformed::yes(node.replace_children(
                children,
                ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
            )?))
        })?;
        Ok(wrapped.data)
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// An operator with inputs not yet wrapped (leaves spend budget themselves: DataFusion's
/// `EnsureCooperative` sees to it).
fn needs_wrapping(plan: &Arc<dyn ExecutionPlan>) -> bool {
    !plan.children().is_empty() && plan.downcast_ref::<CooperativeExec>().is_none()
}

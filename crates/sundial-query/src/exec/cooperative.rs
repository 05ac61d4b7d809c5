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
//! One operator does all its work for a batch within one poll, however much it is: a
//! nested-loop join (a join on a condition that is no equality) tests each probe batch
//! against every buffered row before it returns. [`SliceProbes`] therefore cuts the batches a
//! nested-loop join probes with so that each is tested against the buffered side in about
//! [`PAIRS_PER_POLL`] pairs: a few milliseconds.
//!
//! [`YieldEverywhere`] wraps every operator that has inputs in a `CooperativeExec`,
//! after all other rules. Invariant: in an optimized plan, every operator with inputs, except the
//! root (whose consumer is Sundial's own loop, which yields per answer chunk), is the child of
//! a `CooperativeExec` (or is one), so no loop over batches runs without yielding.
//! The cost is one budget decrement per batch per operator.

use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::DataFusionError;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::joins::NestedLoopJoinExec;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;

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

/// Pairs of rows a nested-loop join tests per probe batch, at most (see the module docs).
pub const PAIRS_PER_POLL: usize = 1 << 20;

/// Cuts the probe batches of nested-loop joins (see the module docs).
#[derive(Debug, Default)]
pub struct SliceProbes;

impl PhysicalOptimizerRule for SliceProbes {
    fn name(&self) -> &str {
        "sundial_slice_probes"
    }

    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let batch_rows = config.execution.batch_size.get();
        let sliced = plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<NestedLoopJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            if join.right().downcast_ref::<SliceBatches>().is_some() {
                return Ok(Transformed::no(node));
            }
            // The buffered side's rows, as far as statistics know (else a batch's worth).
            let buffered = StatisticsContext::new()
                .compute(join.left().as_ref(), &StatisticsArgs::new())
                .ok()
                .and_then(|s| s.num_rows.get_value().copied())
                .unwrap_or(batch_rows)
                .max(1);
            let rows = (PAIRS_PER_POLL / buffered).clamp(1, batch_rows);
            if rows >= batch_rows {
                return Ok(Transformed::no(node));
            }
            let probe = Arc::new(SliceBatches::new(join.right().clone(), rows));
            let children = vec![join.left().clone(), probe as Arc<dyn ExecutionPlan>];
            Ok(Transformed::yes(node.replace_children(
                children,
                ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
            )?))
        })?;
        Ok(sliced.data)
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Passes its input's batches on cut into slices of at most `rows` rows (no copy).
#[derive(Debug)]
pub struct SliceBatches {
    input: Arc<dyn ExecutionPlan>,
    rows: usize,
}

impl SliceBatches {
    fn new(input: Arc<dyn ExecutionPlan>, rows: usize) -> SliceBatches {
        SliceBatches {
            input,
            rows: rows.max(1),
        }
    }
}

impl DisplayAs for SliceBatches {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SliceBatches: rows={}", self.rows)
    }
}

impl ExecutionPlan for SliceBatches {
    fn name(&self) -> &'static str {
        "SliceBatches"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let (Some(input), true) = (children.pop(), children.is_empty()) else {
            return Err(DataFusionError::Internal(
                "SliceBatches has one child".into(),
            ));
        };
        Ok(Arc::new(SliceBatches::new(input, self.rows)))
    }

    with_new_children_recomputing!();

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let schema = input.schema();
        let rows = self.rows;
        let sliced = input.flat_map(move |batch| {
            let slices: Vec<Result<RecordBatch>> = match batch {
                Ok(batch) => (0..batch.num_rows())
                    .step_by(rows)
                    .map(|at| Ok(batch.slice(at, rows.min(batch.num_rows() - at))))
                    .collect(),
                Err(e) => vec![Err(e)],
            };
            futures::stream::iter(slices)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, sliced)))
    }
}

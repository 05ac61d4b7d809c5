//! Partitions gathered on the consumer's own task when they read little.
//!
//! DataFusion's `CoalescePartitionsExec` runs each input partition as a task of its own and
//! hands the batches over a channel. For a scan of millions of rows that is what spreads the
//! work over the cores; for a statement that reads a few thousand values (a whole-table
//! `count(*)` folded from each frame's ends, a short time range) the tasks cost more than the
//! reading: spawning them wakes a sleeping query thread, and the batches and the consumer's
//! wake-up cross between threads, tens of microseconds where the reading takes a few.
//!
//! ```text
//!  CoalescePartitionsExec          GatherExec ── at each run: reads little? ─┬─ yes: partitions
//!    ScanAggregateExec     ==>       ScanAggregateExec                       │  0, 1, .. polled
//!      SundialScanExec                 SundialScanExec                       │  one after another
//!                                                                            └─ no: as DataFusion
//! ```
//!
//! How much a run reads is known only once its plan is bound to the newest rows (a kept plan
//! serves small and large runs alike), so [`GatherExec`] decides at each execution, from the
//! values its input's scans will read ([`values_read`]). It only gathers inline over
//! operators whose partitions never wait for one another, so polling them one after another
//! ends: scans (whose partitions may share pieces, see `claims`: the first takes them all),
//! folds over them, and the row-wise operators between.

use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::ReplaceChildrenOptions;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};

use super::scan::SundialScanExec;
use super::scan_agg::ScanAggregateExec;

/// Values read (rows times columns) at or under which the partitions are gathered inline:
/// about a millisecond's reading on one core is worth more than the two threads' hand-over
/// only well under that; 2^17 eight-byte values are 1 MiB, some 50 to 100 microseconds.
pub(crate) const INLINE_VALUES_MAX: u64 = 1 << 17;

/// Replaces each `CoalescePartitionsExec` without a limit whose input [`values_read`] can
/// size with a [`GatherExec`]. Runs after the rules that look for `CoalescePartitionsExec`.
#[derive(Debug)]
pub(crate) struct GatherSmallInputs;

impl PhysicalOptimizerRule for GatherSmallInputs {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(coalesce) = node.downcast_ref::<CoalescePartitionsExec>() else {
                return Ok(Transformed::no(node));
            };
            if coalesce.fetch().is_some() || !sizes(coalesce.input()) {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(Arc::new(GatherExec {
                input: coalesce.input().clone(),
                properties: coalesce.properties().clone(),
                metrics: ExecutionPlanMetricsSet::new(),
            })))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "sundial_gather_small_inputs"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether `plan` is made only of operators [`values_read`] sizes.
fn sizes(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if plan.downcast_ref::<SundialScanExec>().is_some()
        || plan.downcast_ref::<ScanAggregateExec>().is_some()
    {
        return true;
    }
    match row_wise_input(plan) {
        Some(input) => sizes(input),
        None => false,
    }
}

/// The input of `plan` if it is a row-wise operator (its partitions read only their own
/// input partition, batch by batch, and never wait for another partition).
fn row_wise_input(plan: &Arc<dyn ExecutionPlan>) -> Option<&Arc<dyn ExecutionPlan>> {
    let row_wise = plan.downcast_ref::<CooperativeExec>().is_some()
        || plan.downcast_ref::<ProjectionExec>().is_some()
        || plan.downcast_ref::<FilterExec>().is_some()
        || plan
            .downcast_ref::<AggregateExec>()
            .is_some_and(|a| *a.mode() == AggregateMode::Partial);
    match plan.children().as_slice() {
        [input] if row_wise => Some(input),
        _ => None,
    }
}

/// About how many values the scans under `plan` read in this run; `None` if that is not
/// known (an operator [`sizes`] does not accept, or a plan kept unbound).
pub(crate) fn values_read(plan: &Arc<dyn ExecutionPlan>) -> Option<u64> {
    if let Some(scan) = plan.downcast_ref::<SundialScanExec>() {
        return scan.values_to_read();
    }
    if let Some(fold) = plan.downcast_ref::<ScanAggregateExec>() {
        return fold.values_to_read();
    }
    values_read(row_wise_input(plan)?)
}

/// One partition of its input's rows: the partitions polled one after another on the
/// consumer's task when the run reads at most [`INLINE_VALUES_MAX`] values, else each on a
/// task of its own as DataFusion's `CoalescePartitionsExec` does.
#[derive(Debug)]
pub(crate) struct GatherExec {
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
    /// `inline_runs`: executions that polled the partitions on the consumer's task.
    metrics: ExecutionPlanMetricsSet,
}

impl DisplayAs for GatherExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "GatherExec: inline up to {INLINE_VALUES_MAX} values")
    }
}

impl ExecutionPlan for GatherExec {
    fn name(&self) -> &'static str {
        "GatherExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let input = children
            .pop()
            .filter(|_| children.is_empty())
            .ok_or_else(|| DataFusionError::Internal("GatherExec has one child".into()))?;
        // One partition whatever the input's: the properties stay.
        Ok(Arc::new(GatherExec {
            input,
            properties: self.properties.clone(),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    with_new_children_recomputing!();

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "GatherExec has one partition, not {partition}"
            )));
        }
        let partitions = self.input.output_partitioning().partition_count();
        let inline = values_read(&self.input).is_some_and(|v| v <= INLINE_VALUES_MAX);
        let inline_runs = MetricBuilder::new(&self.metrics).counter("inline_runs", partition);
        if partitions == 1 || !inline {
            return CoalescePartitionsExec::new(self.input.clone()).execute(0, context);
        }
        inline_runs.add(1);
        let input = self.input.clone();
        let batches = futures::stream::iter(0..partitions)
            .map(move |p| input.execute(p, context.clone()))
            .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            batches,
        )))
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::scan::tests::{engine_with, plan_and_rows};

    /// The text of `EXPLAIN ANALYZE sql`: the plan with this run's metrics.
    async fn analyzed(engine: &crate::Engine, sql: &str) -> String {
        use datafusion::arrow::array::AsArray;
        let explained = crate::collect(
            engine
                .run(&format!("EXPLAIN ANALYZE {sql}"))
                .await
                .expect(sql),
        )
        .await
        .expect(sql);
        let mut text = String::new();
        for batch in &explained.batches {
            let texts = batch.column(1).as_string::<i32>();
            for row in 0..batch.num_rows() {
                text.push_str(texts.value(row));
            }
        }
        text
    }

    /// One kept plan gathers a small run inline and a large one from tasks, with the same
    /// answers as DataFusion's general operators.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_runs_gather_inline_and_large_ones_from_tasks() {
        let (engine, _dir) = engine_with(&[
            "CREATE TABLE g (ts TIMESTAMP, x DOUBLE, n LONG) TIMESTAMP(ts) PARTITION BY HOUR",
            "INSERT INTO g SELECT to_timestamp_seconds(1704067200 + value), value * 0.5, value \
             FROM generate_series(0, 39999)",
        ])
        .await;
        let queries = [
            ("SELECT count(*), min(ts), max(ts) FROM g", "| 40000 "),
            (
                "SELECT count(*), sum(n), max(x) FROM g WHERE x > 100",
                "| 39799 ",
            ),
        ];
        for (sql, count) in queries {
            let (plan, rows) = plan_and_rows(&engine, sql).await;
            assert!(plan.contains("GatherExec"), "{plan}");
            assert!(rows.contains(count), "{sql}: {rows}");
            let metrics = analyzed(&engine, sql).await;
            assert!(metrics.contains("inline_runs=1"), "{sql}: {metrics}");
        }
        // Far more rows: the count still reads each frame's ends only and gathers inline, the
        // filtered fold reads past the bound and gathers from tasks.
        engine
            .run(
                "INSERT INTO g SELECT to_timestamp_seconds(1704153600 + value), 1.0, 1 \
                 FROM generate_series(0, 399999)",
            )
            .await
            .unwrap();
        let (sql, _) = queries[0];
        assert!(plan_and_rows(&engine, sql).await.1.contains("| 440000 "));
        assert!(analyzed(&engine, sql).await.contains("inline_runs=1"));
        let (sql, _) = queries[1];
        let (_, rows) = plan_and_rows(&engine, sql).await;
        assert!(rows.contains("| 39799 "), "{rows}");
        let metrics = analyzed(&engine, sql).await;
        assert!(metrics.contains("inline_runs=0"), "{metrics}");
        let general = "SELECT count(*), sum(n), max(x) FROM \
                       (SELECT * FROM g LIMIT 1000000000) g WHERE x > 100";
        assert_eq!(plan_and_rows(&engine, general).await.1, rows);
    }
}

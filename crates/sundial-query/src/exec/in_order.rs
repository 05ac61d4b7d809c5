//! Scans read in one partition where their rows are wanted in timestamp order anyway.
//!
//! ```text
//!  SortPreservingMergeExec [ts]            Projection
//!    Projection                      ==>     SundialScanExec (one partition)
//!      SundialScanExec (N partitions)
//! ```
//!
//! A table's rows lie in timestamp order, so a scan in one partition yields them in that
//! order with no merge. N partitions each hold every N-th frame, and merging them back costs
//! a comparison and a copy per row on one core: more than the columns cost to read, which
//! are mapped and read without copying. Only projections (and the cooperative wrappers) may
//! stand between the merge and the scan: a filter above the scan would lose the partitions'
//! parallel evaluation. A merge with a limit keeps its partitions (the limit already stops
//! it early).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result as DfResult;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};

use super::scan::SundialScanExec;

/// Replaces a merge by timestamp over a partitioned Sundial scan with the scan in one
/// partition (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct ScanInOrder;

impl PhysicalOptimizerRule for ScanInOrder {
    fn name(&self) -> &str {
        "sundial_scan_in_order"
    }

    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let rewritten = plan.transform_up(|node| {
            let Some(merge) = node.downcast_ref::<SortPreservingMergeExec>() else {
                return Ok(Transformed::no(node));
            };
            if merge.fetch().is_some() {
                return Ok(Transformed::no(node));
            }
            let Some(serial) = serial(merge.input())? else {
                return Ok(Transformed::no(node));
            };
            let ordered = serial.output_partitioning().partition_count() == 1
                && serial
                    .equivalence_properties()
                    .ordering_satisfy(merge.expr().clone())?;
            Ok(match ordered {
                true => Transformed::yes(serial),
                false => Transformed::no(node),
            })
        })?;
        Ok(rewritten.data)
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with the scan at its bottom in one partition, if only projections stand above it.
pub(super) fn serial(plan: &Arc<dyn ExecutionPlan>) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(scan) = plan.downcast_ref::<SundialScanExec>() {
        return Ok(scan
            .in_one_partition()
            .map(|s| Arc::new(s) as Arc<dyn ExecutionPlan>));
    }
    let passes = plan.downcast_ref::<ProjectionExec>().is_some()
        || plan.downcast_ref::<CooperativeExec>().is_some();
    let [child] = plan.children()[..] else {
        return Ok(None);
    };
    if !passes {
        return Ok(None);
    }
    let Some(child) = serial(child)? else {
        return Ok(None);
    };
    Ok(Some(plan.clone().replace_children(
        vec![child],
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
    )?))
}

#[cfg(test)]
mod tests {
    use crate::exec::scan::tests::{engine_with, plan_and_rows};

    #[tokio::test]
    async fn merges_by_timestamp_over_scans_become_one_partition() {
        let (engine, _dir) = engine_with(&[
            "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY HOUR",
            "INSERT INTO t SELECT to_timestamp_seconds(1704067200 + value * 7), \
             CASE value % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' END, value * 0.5 \
             FROM generate_series(0, 19999)",
            "SET datafusion.execution.target_partitions = 4",
        ])
        .await;
        let (plan, got) = plan_and_rows(&engine, "SELECT ts, v * 2 AS w FROM t ORDER BY ts").await;
        assert!(!plan.contains("SortPreservingMergeExec"), "{plan}");
        assert!(plan.contains("SundialScanExec"), "{plan}");
        // The same rows as a sort of the rows a limit gathered.
        let (plan, want) = plan_and_rows(
            &engine,
            "SELECT ts, v * 2 AS w FROM (SELECT * FROM t LIMIT 1000000000) ORDER BY ts",
        )
        .await;
        assert!(plan.contains("Sort"), "{plan}");
        assert_eq!(got, want);
        assert_eq!(
            got.lines().count(),
            20_004,
            "20,000 rows and the table's frame"
        );
        // Both sides of a time join.
        let (plan, got) = plan_and_rows(
            &engine,
            "SELECT count(*), sum(b.v) AS s FROM t a LT JOIN t b ON (k)",
        )
        .await;
        assert!(!plan.contains("SortPreservingMergeExec"), "{plan}");
        assert!(plan.contains("AsofJoinExec"), "{plan}");
        assert!(got.contains("| 20000 "), "{got}");
        // The right side's small batches (a partition of 514 rows each) are gathered before
        // they are held: the newest earlier row of each key is the previous row of its key.
        let (_, want) = plan_and_rows(
            &engine,
            "SELECT count(*), sum(p) AS s FROM \
             (SELECT lag(v) OVER (PARTITION BY k ORDER BY ts) AS p FROM t)",
        )
        .await;
        assert_eq!(got, want);
    }
}

//! A plan narrowed at run time to the rows an operator above it can use: conditions on the
//! plan's output columns are carried down to the Sundial scan that produces those columns,
//! which then reads only the rows that pass them (`SundialScanExec::narrowed`).
//!
//! ```text
//! AsofJoinExec  left rows known ──▶ right keys ∈ {left keys}, right ts <= max left ts
//!   right: Projection ─▶ Filter ─▶ SortPreservingMerge ─▶ SundialScanExec
//!          columns mapped by name ─────────────────────▶ scan filters += conditions
//! ```
//!
//! Narrowing only removes rows, so it is sound below any node whose output rows are a
//! function of each input row alone or an order of them (projections of columns, filters,
//! merges, repartitioning, sorts without a limit): a row the conditions remove would have
//! reached the operator above failing them. Nodes that combine or count rows (aggregates,
//! joins, limits, windows) stop the narrowing: the plan is then run as it is.

use std::sync::Arc;

use datafusion::common::Result as DfResult;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;

use super::gather::GatherExec;
use super::scan::{Narrowing, SundialScanExec};

/// `plan` reading only rows that pass every condition (each on a column of its output), or
/// `None` when no scan below it can apply them all.
pub(crate) fn narrowed(
    plan: &Arc<dyn ExecutionPlan>,
    conditions: &[(usize, Narrowing)],
) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    if conditions.is_empty() {
        return Ok(None);
    }
    if let Some(scan) = plan.downcast_ref::<SundialScanExec>() {
        return Ok(scan
            .narrowed(conditions)?
            .map(|s| Arc::new(s) as Arc<dyn ExecutionPlan>));
    }
    // A limit, anywhere, counts rows the conditions would remove.
    if plan.fetch().is_some() {
        return Ok(None);
    }
    let below: Vec<(usize, Narrowing)> = if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        let mut mapped = Vec::with_capacity(conditions.len());
        for (column, condition) in conditions {
            let Some(input) = p
                .expr()
                .get(*column)
                .and_then(|e| e.expr.downcast_ref::<Column>())
            else {
                return Ok(None);
            };
            mapped.push((input.index(), condition.clone()));
        }
        mapped
    } else if let Some(f) = plan.downcast_ref::<FilterExec>() {
        match f.projection() {
            Some(projection) => {
                let mut mapped = Vec::with_capacity(conditions.len());
                for (column, condition) in conditions {
                    let Some(&input) = projection.get(*column) else {
                        return Ok(None);
                    };
                    mapped.push((input, condition.clone()));
                }
                mapped
            }
            None => conditions.to_vec(),
        }
    } else if passes_rows_through(plan) {
        conditions.to_vec()
    } else {
        return Ok(None);
    };
    let [child] = plan.children()[..] else {
        return Ok(None);
    };
    let Some(child) = narrowed(child, &below)? else {
        return Ok(None);
    };
    Ok(Some(plan.clone().replace_children(
        vec![child],
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
    )?))
}

/// Whether `plan` outputs its input's rows and columns unchanged, perhaps reordered or
/// regrouped into other batches and partitions.
fn passes_rows_through(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.downcast_ref::<CooperativeExec>().is_some()
        || plan.downcast_ref::<SortPreservingMergeExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some()
        || plan.downcast_ref::<GatherExec>().is_some()
        || plan.downcast_ref::<RepartitionExec>().is_some()
        || plan.downcast_ref::<SortExec>().is_some()
}

//! Sundial's physical operators: what runs, below planning.
//!
//! ```text
//!  bind ──────────────▶ a kept plan made ready for a run: its scans take the run's values
//!   └ values            (values) and read the newest rows; other nodes get fresh state
//!  scan ─┬─ frame      SundialScanExec: frames of partitions on all cores, ts pruning, order
//!        ├─ claims     pieces taken one at a time by the partitions of an order-free fold
//!        ├─ index_scan rows picked through symbol indexes
//!        └─ in_order   one partition where a merge by timestamp would recombine them
//!  latest              LatestExec: newest row per key, reading partitions backwards (or
//!                      from a last-value cache)
//!  distinct_keys       DistinctKeysExec: a table's distinct keys from a last-value cache
//!  bucket_agg ┐        BucketAggregateExec: time-bucket aggregates in scan order, no hash
//!  scan_agg ──┴ partial_agg  ScanAggregateExec: aggregates folded over a scan's selected
//!   └ kernel_filter    rows, grouped by SYMBOL codes; filters compiled into kernels
//!  bucket_fn           the bucket aggregate's runs of one bucket (strides, quotients)
//!  bucket_states       the bucket aggregate's states per key slot, written out
//!  asof_join           AsofJoinExec: merge of two inputs in time order
//!   ├ join_keys        key numbers: SYMBOL keys by dictionary value, others by row bytes
//!   ├ splice_join      the pairing of both sides' rows for SPLICE JOIN
//!   └ narrow           the right side narrowed to rows the left rows can match
//!  shared              SharedExec: a repeated subquery computed once per run
//!  gather              GatherExec: the partitions of a run that reads little, on one task
//!  cooperative         every operator yields; nested-loop probes in slices
//! ```
//!
//! Operators read tables only through [`crate::snapshot`]; nothing here plans or knows the
//! caches above. Rebinding a kept plan to a run's values is owned here ([`bind`]), by the
//! operators that hold values and rows, so the plan caches never look inside a plan.

use std::sync::Arc;

use datafusion::common::Result as DfResult;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::physical_expr::PhysicalExpr;

pub(crate) mod asof_join;
pub(crate) mod bind;
pub(crate) mod bucket_agg;
mod bucket_fn;
mod bucket_states;
mod claims;
pub(crate) mod cooperative;
pub(crate) mod distinct_keys;
mod frame;
pub(crate) mod gather;
pub(crate) mod in_order;
pub(crate) mod index_scan;
mod join_keys;
mod kernel_filter;
pub(crate) mod latest;
mod narrow;
mod partial_agg;
pub mod scan;
pub(crate) mod scan_agg;
pub(crate) mod shared;
mod splice_join;
pub(crate) mod values;
mod zone_skip;

/// `ExecutionPlan::apply_expressions` over a node's own expressions.
pub(crate) fn visit_each<'a>(
    exprs: impl IntoIterator<Item = &'a Arc<dyn PhysicalExpr>>,
    f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
) -> DfResult<TreeNodeRecursion> {
    for e in exprs {
        if f(e)? == TreeNodeRecursion::Stop {
            return Ok(TreeNodeRecursion::Stop);
        }
    }
    Ok(TreeNodeRecursion::Continue)
}

//! The run of `SELECT DISTINCT` keys from a last-value cache (see `crate::distinct_keys`, the
//! planner rule): the cache's rows, projected, in partition 0 (the other partitions empty), or,
//! when no cache answers at run time, the table scan planned beside it. A kept plan binds that
//! scan for each run (`bind`), so the node is kept like a scan.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties, ReplaceChildrenOptions,
};
use sundial_storage::{Table, TableMeta};

use crate::last_values::LastValues;
use crate::snapshot::newest_snapshot;

/// The cache's rows (projected) in partition 0, or the table scan planned beside it.
#[derive(Debug)]
pub(crate) struct DistinctKeysExec {
    table: Arc<Table>,
    planned: Arc<TableMeta>,
    caches: Arc<LastValues>,
    columns: Vec<u32>,
    projection: Vec<usize>,
    output: SchemaRef,
    properties: Arc<PlanProperties>,
    fallback: Arc<dyn ExecutionPlan>,
}

impl DistinctKeysExec {
    /// Reads the distinct keys `columns` (ids) of `table`, as `projection` (positions, giving
    /// `output`), from a cache of `caches` when one answers, else from `fallback`.
    pub(crate) fn new(
        (table, planned): (Arc<Table>, Arc<TableMeta>),
        caches: Arc<LastValues>,
        (columns, projection, output): (Vec<u32>, Vec<usize>, SchemaRef),
        fallback: Arc<dyn ExecutionPlan>,
    ) -> DistinctKeysExec {
        let partitions = fallback.output_partitioning().partition_count();
        DistinctKeysExec {
            table,
            planned,
            caches,
            columns,
            projection,
            properties: Arc::new(PlanProperties::new(
                EquivalenceProperties::new(output.clone()),
                Partitioning::UnknownPartitioning(partitions),
                EmissionType::Incremental,
                Boundedness::Bounded,
            )),
            output,
            fallback,
        }
    }

    /// The scan run when no cache answers.
    pub(crate) fn fallback(&self) -> &Arc<dyn ExecutionPlan> {
        &self.fallback
    }

    /// The same node over another run's `fallback` (a kept plan bound to a run's values).
    pub(crate) fn with_fallback(&self, fallback: Arc<dyn ExecutionPlan>) -> DistinctKeysExec {
        DistinctKeysExec {
            table: self.table.clone(),
            planned: self.planned.clone(),
            caches: self.caches.clone(),
            columns: self.columns.clone(),
            projection: self.projection.clone(),
            output: self.output.clone(),
            properties: self.properties.clone(),
            fallback,
        }
    }

    /// The cache's rows, projected, if a cache answers.
    fn cached_rows(&self) -> DfResult<Option<RecordBatch>> {
        let Some(slot) = self.caches.for_distinct(&self.table, &self.columns) else {
            return Ok(None);
        };
        let snapshot = newest_snapshot(&self.table, &self.planned)?;
        let Some((meta, rows)) = self
            .caches
            .rows(&slot, &self.table, &snapshot)
            .map_err(DataFusionError::from)?
        else {
            return Ok(None);
        };
        if !crate::snapshot::same_columns(&self.planned.columns, &meta.columns) {
            return Ok(None);
        }
        let columns = self
            .projection
            .iter()
            .map(|&i| rows.column(i).clone())
            .collect();
        Ok(Some(RecordBatch::try_new(self.output.clone(), columns)?))
    }
}

impl DisplayAs for DistinctKeysExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let cache = self.caches.for_distinct(&self.table, &self.columns);
        write!(
            f,
            "DistinctKeysExec: table={}, last_value_cache={}",
            self.planned.name,
            cache.as_ref().map_or("none", |s| s.name())
        )
    }
}

impl ExecutionPlan for DistinctKeysExec {
    fn name(&self) -> &'static str {
        "DistinctKeysExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        _: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    with_new_children_recomputing!();

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        match self.cached_rows()? {
            Some(rows) => {
                let rows = if partition == 0 {
                    rows
                } else {
                    RecordBatch::new_empty(self.output.clone())
                };
                Ok(Box::pin(RecordBatchStreamAdapter::new(
                    self.output.clone(),
                    futures::stream::once(async move { Ok(rows) }),
                )))
            }
            None => self.fallback.execute(partition, context),
        }
    }
}

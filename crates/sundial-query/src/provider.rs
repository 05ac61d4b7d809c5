//! DataFusion's view of the database: a schema provider listing Sundial tables, a table provider
//! per table (scan + insert), and the sink that writes INSERT results through the table sinks
//! ILP writes through (group commit: concurrent INSERTs share commits). A view is a table of
//! kind `View`: its provider is DataFusion's `ViewTable` over the plan of its query, which a
//! [`ViewSource`] (the layer above: `views`) makes.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::view::ViewTable;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::TableType;
use datafusion::datasource::sink::{DataSink, DataSinkExec};
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, LogicalPlan, TableProviderFilterPushDown};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan};
use futures::StreamExt;
use sundial_ingest::Sinks;
use sundial_storage::{Database, Snapshot, Table, TableKind, TableMeta};

use crate::error::{external, storage_error};
use crate::exec::scan::{ScanSource, SundialScanExec, is_row_filter, is_time_filter};
use crate::key_index::KeyIndexes;
use crate::last_values::LastValues;
use crate::snapshot::newest_snapshot;

/// Where INSERTs write: the table sinks shared with the ILP receivers.
#[derive(Clone)]
pub struct InsertPath {
    pub sinks: Arc<Sinks>,
    /// An INSERT waits while a table has this many rows pending commit.
    pub pending_rows_max: usize,
}

impl fmt::Debug for InsertPath {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "InsertPath(pending_rows_max={})", self.pending_rows_max)
    }
}

/// Plans a view's query when a statement reads the view.
#[async_trait]
pub(crate) trait ViewSource: Send + Sync + fmt::Debug {
    /// The plan of the query that defines `view` (a table of kind `View`).
    async fn plan(&self, view: &TableMeta) -> DfResult<LogicalPlan>;
}

/// The `public` schema: every table of the database.
#[derive(Debug)]
pub struct SundialSchema {
    db: Arc<Database>,
    inserts: InsertPath,
    indexes: Arc<KeyIndexes>,
    last_values: Arc<LastValues>,
    views: Arc<dyn ViewSource>,
}

impl SundialSchema {
    pub(crate) fn new(
        inserts: InsertPath,
        (indexes, last_values): (Arc<KeyIndexes>, Arc<LastValues>),
        views: Arc<dyn ViewSource>,
    ) -> Self {
        SundialSchema {
            db: inserts.sinks.db().clone(),
            inserts,
            indexes,
            last_values,
            views,
        }
    }
}

#[async_trait]
impl SchemaProvider for SundialSchema {
    fn table_names(&self) -> Vec<String> {
        self.db.table_names()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let Some(t) = self.db.table(name) else {
            return Ok(None);
        };
        let meta = t.meta();
        if meta.kind == TableKind::View {
            let plan = self.views.plan(&meta).await?;
            let definition = meta.definition.as_deref().map(str::to_string);
            return Ok(Some(Arc::new(SundialView {
                name: meta.name.clone(),
                view: ViewTable::new(plan, definition),
            })));
        }
        Ok(Some(Arc::new(SundialTable::new(
            t,
            self.inserts.clone(),
            (self.indexes.clone(), self.last_values.clone()),
        ))))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.db.table(name).is_some()
    }
}

/// A view as DataFusion sees it: DataFusion's view over the plan of its query, which refuses
/// writes naming the view.
#[derive(Debug)]
struct SundialView {
    name: String,
    view: ViewTable,
}

#[async_trait]
impl TableProvider for SundialView {
    fn schema(&self) -> SchemaRef {
        self.view.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn get_logical_plan(&self) -> Option<std::borrow::Cow<'_, LogicalPlan>> {
        self.view.get_logical_plan()
    }

    fn get_table_definition(&self) -> Option<&str> {
        self.view.get_table_definition()
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        self.view.supports_filters_pushdown(filters)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        self.view.scan(state, projection, filters, limit).await
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        _input: Arc<dyn ExecutionPlan>,
        _insert_op: InsertOp,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Err(external(sundial_storage::StorageError::InvalidInput(
            format!(
                "'{}' is a view: it stores no rows; write to the tables it reads",
                self.name
            ),
        )))
    }
}

/// One table as DataFusion sees it. Planning reads the schema of the snapshot current then;
/// each scan reads the table's newest snapshot, so a plan kept by a prepared statement sees
/// rows committed after it was planned (see `SundialTable::scan_snapshot`).
#[derive(Debug)]
pub struct SundialTable {
    table: Arc<Table>,
    /// The metadata planned against. Only that is kept, not the snapshot, so that a kept plan
    /// does not hold on to partition versions later commits replaced.
    planned: Arc<TableMeta>,
    schema: SchemaRef,
    inserts: InsertPath,
    /// Symbol indexes, shared with point lookups.
    indexes: Arc<KeyIndexes>,
    /// The engine's last-value caches (`LATEST ON` and `SELECT DISTINCT` read them).
    last_values: Arc<LastValues>,
}

impl SundialTable {
    pub(crate) fn new(
        table: Arc<Table>,
        inserts: InsertPath,
        (indexes, last_values): (Arc<KeyIndexes>, Arc<LastValues>),
    ) -> Self {
        let planned = table.meta();
        let schema = planned.arrow_schema();
        SundialTable {
            table,
            planned,
            schema,
            inserts,
            indexes,
            last_values,
        }
    }

    /// The engine's last-value caches.
    pub(crate) fn last_values(&self) -> &Arc<LastValues> {
        &self.last_values
    }

    pub(crate) fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// The key indexes the table's scans share.
    pub(crate) fn indexes(&self) -> &Arc<KeyIndexes> {
        &self.indexes
    }

    /// The newest snapshot, provided the table still has the columns the plan was made for
    /// (see [`newest_snapshot`]).
    pub(crate) fn scan_snapshot(&self) -> DfResult<Arc<Snapshot>> {
        newest_snapshot(&self.table, &self.planned)
    }

    /// The metadata the plan was made against.
    pub(crate) fn planned_meta(&self) -> &Arc<TableMeta> {
        &self.planned
    }

    pub(crate) fn timestamp_name(&self) -> Option<&str> {
        self.planned.timestamp_column().map(|c| c.name.as_str())
    }
}

#[async_trait]
impl TableProvider for SundialTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// The scan applies every filter it can test row by row (see `is_row_filter`), so
    /// those are Exact; a volatile one that bounds the timestamp still narrows the scan.
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        let ts = self.timestamp_name();
        Ok(filters
            .iter()
            .map(|f| match ts {
                _ if is_row_filter(f) => TableProviderFilterPushDown::Exact,
                Some(ts) if is_time_filter(f, ts) => TableProviderFilterPushDown::Inexact,
                _ => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let projection = projection
            .cloned()
            .unwrap_or_else(|| (0..self.schema.fields().len()).collect());
        // Planning a plan for reuse: the filters hold placeholders, and this run's values.
        let values = crate::exec::values::planning_values();
        let config = state.config();
        let source = Arc::new(ScanSource {
            table: self.table.clone(),
            planned: self.planned.clone(),
            schema: self.schema.clone(),
            indexes: self.indexes.clone(),
            filters: filters.to_vec(),
            props: state.execution_props().clone(),
            target_partitions: config.target_partitions(),
            session_batch_rows: config.batch_size(),
            reused: values.is_some(),
        });
        let data = source.read(&source.bound_filters(values.as_deref().unwrap_or_default())?)?;
        let schema = Arc::new(self.schema.project(&projection)?);
        Ok(Arc::new(SundialScanExec::new(
            source, data, projection, schema, limit,
        )))
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if insert_op != InsertOp::Append {
            return Err(DataFusionError::NotImplemented(format!(
                "{insert_op} is not supported; use INSERT INTO"
            )));
        }
        let sink = SundialSink {
            table: self.table.clone(),
            schema: self.schema.clone(),
            inserts: self.inserts.clone(),
        };
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), None)))
    }
}

/// Gathers the rows of an INSERT and hands them to the table's sink as one batch, so the
/// statement is atomic (all its rows or none); returns once they are committed. The rows are
/// held until then inside the query's memory pool: an `INSERT ... SELECT` larger than the
/// query memory bound fails (53200) instead of growing outside it.
#[derive(Debug)]
pub struct SundialSink {
    table: Arc<Table>,
    schema: SchemaRef,
    inserts: InsertPath,
}

impl DisplayAs for SundialSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "SundialSink: table={}", self.table.name())
    }
}

#[async_trait]
impl DataSink for SundialSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        mut data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        let reservation = MemoryConsumer::new(format!("SundialSink[{}]", self.table.name()))
            .register(context.memory_pool());
        let mut batches = Vec::new();
        let mut schema = self.schema.clone();
        while let Some(batch) = data.next().await {
            let batch = batch?;
            schema = batch.schema();
            if batch.num_rows() > 0 {
                reservation.try_grow(batch.get_array_memory_size())?;
                batches.push(batch);
            }
        }
        // The one batch the sink takes is a copy of them all.
        reservation.try_grow(reservation.size())?;
        let batch = concat_batches(&schema, &batches)?;
        drop(batches);
        if batch.num_rows() == 0 {
            return Ok(0);
        }
        let (table, inserts) = (self.table.clone(), self.inserts.clone());
        tokio::task::spawn_blocking(move || {
            inserts.sinks.write(&table, batch, inserts.pending_rows_max)
        })
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))?
        .map_err(|e| external(storage_error(e)))
    }
}

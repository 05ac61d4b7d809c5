//! `LATEST ON ts PARTITION BY <symbols>` by a backward scan that stops early.
//!
//! ```text
//!  newest partition ──▶ … ──▶ oldest            each chunk, last row first:
//!  [ … chunk k-1 | chunk k ]◀── read backwards    filter? ─▶ key unseen? ─▶ keep the row
//!  stop when every key of the symbols' dictionaries has its row
//! ```
//!
//! A LATEST clause whose keys are all SYMBOL columns becomes a [`LatestTable`] scan (see
//! `crate::latest`, the planner rule). Rows are sorted by the
//! designated timestamp, so the first row met for a key, reading backwards, is its latest.
//! A key's dictionary bounds how many distinct keys there can be, so once each has been met
//! (and the NULL key too, or no NULL remains in older rows) the scan stops: TSBS's `lastpoint`
//! reads a few hundred rows of a million. The filter is the WHERE written before LATEST and
//! is applied to each row before it counts; filters written around the query apply to the
//! result, as the provider accepts no pushed-down filters. It reads only the columns it
//! needs, compiled into a scan kernel where it can be (`kernel_filter`). When the filter names the keys
//! (`k = 'a'`, `k IN (...)`, ORs of them, among its conjuncts), only those can pass, so the
//! search stops once each has its row: three of five hundred trucks read what their newest
//! rows need, not the table. With one key column and a few of its many symbols named (as
//! `index_scan::names_few_of_many` decides for filters), no scan runs at all: each key's rows come from the key index (`key_index`, built per partition on first
//! use and shared), newest partition first, and a key takes its newest row that passes the
//! rest of the filter (tested a few rows at a time, newest first), so k keys read k rows
//! when nothing else filters; a partition too big for the indexes' budget falls back to the
//! scan. Bounds the filter puts on the designated timestamp (`ts < c`,
//! `ts IN '2016-01-01'`) bound the search by binary search: it starts at the newest row inside
//! them and never reads outside. The search may stop early only when no NULL key can still
//! turn up: neither in the rest of the partition nor in the older spans still to search.
//!
//! A chunk's passing rows are visited a 64-row word at a time, highest bit first, and a
//! row's key (its codes, NULL a digit of its own) indexes a flag per combination
//! ([`SeenKeys`]), so a row whose key was met allocates and hashes nothing. A search not done
//! after its newest [`SEQUENTIAL_ROWS`] splits what is left into one run per thread
//! ([`split_rows`]); each run searches from the keys met so far, a run that ends the search
//! (nothing older can add a key) halts the runs older than it, and their rows merge newest
//! run first, a key met by two runs keeping the newer row:
//!
//! ```text
//!  oldest ─────────────────────────────────────────────── newest
//!  [ run 1 (thread 1) ][ run 0 (this thread) ][ newest rows, read first alone ]
//! ```

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use async_trait::async_trait;
use datafusion::arrow::array::{Array, AsArray, Int32Array, RecordBatch};
use datafusion::arrow::compute::{
    concat_batches, filter_record_batch, sort_to_indices, take_record_batch,
};
use datafusion::arrow::datatypes::{Int32Type, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DFSchema, DataFusionError, Result as DfResult, ScalarValue, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, CastExpr, Column, InListExpr, Literal};
use datafusion::physical_expr::utils::{collect_columns, reassign_expr_columns};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    ReplaceChildrenOptions,
};
use sundial_kernels::{Predicate, Selection};
use sundial_storage::{Snapshot, Table, TableMeta};

use super::index_scan::names_few_of_many;
use super::kernel_filter::{FilterColumns, compile, select};
use super::scan::{Frame, TimeBounds, ranges, time_bounds};
use crate::error::external;
use crate::key_index::{IndexRows, KeyIndexes};
use crate::last_values::{LastValues, Slot};
use crate::snapshot::newest_snapshot;

/// Most rows read per step of the backward scan (the step doubles up to it, so a search that
/// stops early reads at most twice what it needed).
const CHUNK_ROWS: u64 = 32_768;
/// Most rows a key index probe tests per step.
const PROBED_ROWS_MAX: usize = 4_096;
/// Most combinations of key codes kept as a flag each (1 MiB); others are hashed.
const DENSE_KEYS_MAX: u64 = 1 << 20;
/// Fewest rows read by the first step.
const FIRST_CHUNK_ROWS: u64 = 256;
/// Rows the newest part of a search reads alone before the rest is split between threads
/// (a few hundred in tests, so that their small tables are split too).
const SEQUENTIAL_ROWS: u64 = if cfg!(test) { 300 } else { 1 << 20 };
/// Fewest rows left to search for a split between threads to pay for the threads.
const PARALLEL_ROWS_MIN: u64 = if cfg!(test) { 300 } else { 1 << 20 };
/// A probed key's rows tested by the first step (doubling up to [`PROBED_ROWS_MAX`]).
const FIRST_PROBED_ROWS: usize = 8;

/// The latest row per key of a table. Planning reads the schema of the snapshot current then;
/// each scan reads the table's newest snapshot, as
/// [`SundialTable`](crate::provider::SundialTable) does.
#[derive(Debug)]
pub(crate) struct LatestTable {
    table: Arc<Table>,
    indexes: Arc<KeyIndexes>,
    last_values: Arc<LastValues>,
    /// The metadata planned against (not the snapshot: see `SundialTable`).
    planned: Arc<TableMeta>,
    schema: SchemaRef,
    /// The WHERE before LATEST, over the table's unqualified columns.
    filter: Option<Expr>,
    keys: Vec<usize>,
}

impl LatestTable {
    /// The designated timestamp's name (a latest row keeps its table's timestamp).
    pub(crate) fn timestamp_name(&self) -> Option<&str> {
        self.planned.timestamp_column().map(|c| c.name.as_str())
    }

    /// The latest rows per `keys` (SYMBOL columns) of `table` among those `filter` keeps.
    pub(crate) fn new(
        (table, indexes, last_values): (Arc<Table>, Arc<KeyIndexes>, Arc<LastValues>),
        planned: Arc<TableMeta>,
        keys: Vec<usize>,
        filter: Option<Expr>,
    ) -> DfResult<LatestTable> {
        if planned.timestamp_index.is_none() || keys.is_empty() {
            return Err(DataFusionError::Plan(format!(
                "LATEST ON/BY: '{}' needs a designated timestamp and a key",
                planned.name
            )));
        }
        Ok(LatestTable {
            schema: planned.arrow_schema(),
            table,
            indexes,
            last_values,
            planned,
            filter,
            keys,
        })
    }

    /// The table and the metadata the plan was made against.
    pub(crate) fn planned(&self) -> (&Arc<Table>, &Arc<TableMeta>) {
        (&self.table, &self.planned)
    }
}

#[async_trait]
impl TableProvider for LatestTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let filter = match &self.filter {
            Some(expr) => {
                let df_schema = DFSchema::try_from(self.schema.clone())?;
                Some(state.create_physical_expr(expr.clone(), &df_schema)?)
            }
            None => None,
        };
        let projection = projection
            .cloned()
            .unwrap_or_else(|| (0..self.schema.fields().len()).collect());
        let output = Arc::new(self.schema.project(&projection)?);
        // Rows come oldest first: partitions in time order, each partition's rows in order.
        let mut equivalences = EquivalenceProperties::new(output.clone());
        if let Some(ordering) =
            crate::exec::scan::timestamp_ordering(&self.planned, &projection, &output, false)
        {
            equivalences.add_ordering(ordering);
        }
        // The filter's bounds on the designated timestamp bound the search by binary search.
        let bounds = match (&self.filter, self.timestamp_name()) {
            (Some(filter), Some(ts)) => time_bounds(std::slice::from_ref(filter), ts),
            _ => TimeBounds::default(),
        };
        // A row per key at most: per key column its symbols and NULL.
        let snapshot = newest_snapshot(&self.table, &self.planned)?;
        let rows_bound = self
            .keys
            .iter()
            .map(|&k| snapshot.symbols(k).map_or(0, |s| s.len()).saturating_add(1))
            .fold(1usize, usize::saturating_mul);
        // A last-value cache keyed by exactly these columns answers when the filter, if any,
        // reads only the keys: the newest row passing it is then its key's newest row.
        let cacheable = self.filter.as_ref().is_none_or(|f| {
            f.column_refs().iter().all(|c| {
                self.planned
                    .column_index(&c.name)
                    .is_some_and(|i| self.keys.contains(&i))
            })
        });
        Ok(Arc::new(LatestExec {
            table: self.table.clone(),
            indexes: self.indexes.clone(),
            last_values: cacheable.then(|| self.last_values.clone()),
            planned: self.planned.clone(),
            keys: self.keys.clone(),
            filter,
            bounds,
            projection,
            rows_bound,
            properties: Arc::new(PlanProperties::new(
                equivalences,
                Partitioning::UnknownPartitioning(1),
                EmissionType::Final,
                Boundedness::Bounded,
            )),
            output,
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }
}

/// The latest rows per key, searched in the table's newest snapshot when it runs, so that a
/// kept plan (see `reuse`) reads the rows committed since it was planned.
#[derive(Debug)]
pub(crate) struct LatestExec {
    table: Arc<Table>,
    indexes: Arc<KeyIndexes>,
    /// The caches to ask first, when one may answer (see [`LatestTable::scan`]).
    last_values: Option<Arc<LastValues>>,
    /// The metadata planned against.
    planned: Arc<TableMeta>,
    keys: Vec<usize>,
    filter: Option<Arc<dyn PhysicalExpr>>,
    /// The filter's bounds on the designated timestamp: rows outside are never read.
    bounds: TimeBounds,
    projection: Vec<usize>,
    /// The most rows it returns: one per key of the dictionaries when planned.
    rows_bound: usize,
    output: SchemaRef,
    properties: Arc<PlanProperties>,
    /// `rows_read`: the rows the search read (EXPLAIN ANALYZE shows it).
    metrics: ExecutionPlanMetricsSet,
}

impl DisplayAs for LatestExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "LatestExec: table={}, keys={:?}, filter={}",
            self.planned.name,
            self.keys,
            self.filter
                .as_ref()
                .map_or("none".to_string(), |e| e.to_string())
        )?;
        if let Some(slot) = self.cache() {
            write!(f, ", last_value_cache={}", slot.name())?;
        }
        Ok(())
    }
}

impl LatestExec {
    /// The last-value cache that may answer, if any.
    fn cache(&self) -> Option<Arc<Slot>> {
        let ids: Vec<u32> = self
            .keys
            .iter()
            .map(|&k| self.planned.columns[k].id)
            .collect();
        self.last_values.as_ref()?.for_latest(&self.table, &ids)
    }
}

impl ExecutionPlan for LatestExec {
    fn name(&self) -> &'static str {
        "LatestExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        match &self.filter {
            Some(e) => f(e),
            None => Ok(TreeNodeRecursion::Continue),
        }
    }

    fn replace_children(
        self: Arc<Self>,
        _: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    with_new_children_recomputing!();

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    /// At most a row per key, an estimate (the dictionaries may grow before it runs): a
    /// search over few keys keeps the plan above it in one partition, unrepartitioned.
    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> DfResult<Arc<Statistics>> {
        let mut statistics = Statistics::new_unknown(&self.output);
        statistics.num_rows = Precision::Inexact(self.rows_bound);
        Ok(Arc::new(statistics))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let search = Search {
            snapshot: newest_snapshot(&self.table, &self.planned)?,
            table: self.table.clone(),
            indexes: self.indexes.clone(),
            cache: self
                .cache()
                .zip(self.last_values.clone())
                .map(|(slot, all)| (all, slot, self.planned.clone())),
            keys: self.keys.clone(),
            filter: self.filter.clone(),
            bounds: self.bounds,
            projection: self.projection.clone(),
            output: self.output.clone(),
            rows_read: MetricBuilder::new(&self.metrics).counter("rows_read", partition),
            threads: context
                .session_config()
                .target_partitions()
                .min(processors())
                .max(1),
        };
        let batch = futures::stream::once(async move { search.run() });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.output.clone(),
            batch,
        )))
    }
}

/// One backward search.
struct Search {
    snapshot: Arc<Snapshot>,
    table: Arc<Table>,
    indexes: Arc<KeyIndexes>,
    /// The last-value cache to answer from, if it can, and the metadata planned against.
    cache: Option<(Arc<LastValues>, Arc<Slot>, Arc<TableMeta>)>,
    keys: Vec<usize>,
    filter: Option<Arc<dyn PhysicalExpr>>,
    bounds: TimeBounds,
    projection: Vec<usize>,
    output: SchemaRef,
    rows_read: Count,
    /// Threads a long search is split between: the session's target partitions, at most
    /// the processors there are.
    threads: usize,
}

impl Search {
    /// The answer from the last-value cache, if there is one and it holds the planned
    /// columns: its rows through the filter, oldest first, as the search returns them.
    fn cached_rows(&self) -> DfResult<Option<RecordBatch>> {
        let Some((caches, slot, planned)) = &self.cache else {
            return Ok(None);
        };
        let Some((meta, rows)) = caches
            .rows(slot, &self.table, &self.snapshot)
            .map_err(DataFusionError::from)?
        else {
            return Ok(None);
        };
        if !crate::snapshot::same_columns(&planned.columns, &meta.columns) {
            return Ok(None);
        }
        // The planned columns come first among the cache's.
        let schema = planned.arrow_schema();
        let columns = rows.columns()[..schema.fields().len()].to_vec();
        let mut batch = RecordBatch::try_new(schema, columns)?;
        if let Some(filter) = &self.filter {
            let keep = filter.evaluate(&batch)?.into_array(batch.num_rows())?;
            batch = filter_record_batch(&batch, keep.as_boolean())?;
        }
        if let Some(ts) = planned.timestamp_index {
            let order = sort_to_indices(batch.column(ts), None, None)?;
            batch = take_record_batch(&batch, &order)?;
        }
        let batch = batch.project(&self.projection)?;
        Ok(Some(RecordBatch::try_new(
            self.output.clone(),
            batch.columns().to_vec(),
        )?))
    }
}

/// A key: the SYMBOL codes of a row, `-1` for NULL.
type Key = Vec<i32>;

/// Rows found: per partition, newest partition first, its rows newest first.
type Found = Vec<(usize, Vec<u32>)>;

/// What a backward scan reads and when it is done.
struct ScanPlan {
    /// The columns read: the keys and what the filter reads, ascending.
    searched: Vec<usize>,
    filter: Option<RowFilter>,
    /// Each key column's place among `searched`.
    key_at: Vec<usize>,
    /// The keys without a NULL there can be (the product of the dictionaries, or of the
    /// symbols the filter names).
    symbol_keys: u64,
    /// Every key there can be, NULLs included.
    all_keys: u64,
    /// The key columns that may hold NULL keys (those the filter does not restrict).
    nullable: Vec<usize>,
}

/// A backward scan's progress: the keys met, the next chunk's size and the rows kept.
#[derive(Clone)]
struct Progress {
    seen: SeenKeys,
    seen_symbol_keys: u64,
    seen_keys: u64,
    chunk_rows: u64,
    found: Found,
}

/// How a backward scan ended.
enum Scanned {
    /// No older row can add a key.
    Exhausted,
    /// Every row was read.
    Done,
    /// Stopped by its budget or halted: the spans still to read, oldest first.
    Paused(Vec<Frame>),
}

/// `spans` (oldest first) cut into `pieces` runs of about equal rows, newest run first, each
/// oldest first.
fn split_rows(spans: &[Frame], pieces: usize) -> Vec<Vec<Frame>> {
    let total: u64 = spans.iter().map(Frame::len).sum();
    let per_piece = total.div_ceil(pieces.max(1) as u64).max(1);
    let mut out: Vec<Vec<Frame>> = Vec::new();
    let mut current: Vec<Frame> = Vec::new();
    let mut room = per_piece;
    for span in spans.iter().rev() {
        let mut end = span.rows.end;
        while end > span.rows.start {
            let start = end.saturating_sub(room).max(span.rows.start);
            current.push(Frame::range(span.partition, start..end));
            room -= end - start;
            end = start;
            if room == 0 {
                current.reverse();
                out.push(std::mem::take(&mut current));
                room = per_piece;
            }
        }
    }
    if !current.is_empty() {
        current.reverse();
        out.push(current);
    }
    out
}

/// The keys met so far: a flag per combination of the key columns' codes when the
/// dictionaries are small enough (each column a digit: 0 for NULL, code + 1 otherwise), the
/// keys themselves in a set otherwise. No row allocates once its key was met.
#[derive(Clone)]
struct SeenKeys {
    /// Per key column: the digit's radix (dictionary size + 1) and its place value.
    digits: Vec<(u64, u64)>,
    /// A flag per combination; `None` when there are more than [`DENSE_KEYS_MAX`].
    dense: Option<Vec<bool>>,
    /// Keys with a code past the snapshot's dictionary, or all keys without `dense`.
    sparse: HashSet<Key, foldhash::fast::RandomState>,
    /// The key being looked up (reused).
    key: Key,
}

impl SeenKeys {
    fn new(search: &Search) -> Self {
        let symbols = search
            .keys
            .iter()
            .map(|&k| search.snapshot.symbols(k).map_or(0, |s| s.len() as u64));
        Self::with_symbols(symbols, DENSE_KEYS_MAX)
    }

    /// For key columns of `symbols` symbols each, flagged densely up to `dense_max` keys.
    fn with_symbols(symbols: impl Iterator<Item = u64>, dense_max: u64) -> Self {
        let mut place = 1u64;
        let digits: Vec<(u64, u64)> = symbols
            .map(|n| {
                let radix = n + 1;
                let digit = (radix, place);
                place = place.saturating_mul(radix);
                digit
            })
            .collect();
        SeenKeys {
            digits,
            dense: (place <= dense_max).then(|| vec![false; place as usize]),
            sparse: HashSet::default(),
            key: Vec::new(),
        }
    }

    /// Records the key of `row` (its codes in `codes`, one array per key column); whether
    /// it is new, and whether it holds a NULL.
    #[inline(always)]
    fn insert(&mut self, codes: &[&Int32Array], row: usize) -> (bool, bool) {
        let mut has_null = false;
        if let Some(dense) = &mut self.dense {
            let mut slot = 0u64;
            let mut fits = true;
            for (c, &(radix, place)) in codes.iter().zip(&self.digits) {
                let digit = if c.is_null(row) {
                    has_null = true;
                    0
                } else {
                    u64::from(c.value(row) as u32) + 1
                };
                fits &= digit < radix;
                slot += digit.min(radix - 1) * place;
            }
            if fits {
                return (
                    !std::mem::replace(&mut dense[slot as usize], true),
                    has_null,
                );
            }
        }
        self.key.clear();
        self.key.extend(
            codes
                .iter()
                .map(|c| if c.is_null(row) { -1 } else { c.value(row) }),
        );
        has_null = self.key.iter().any(|&c| c < 0);
        let new = !self.sparse.contains(&self.key);
        if new {
            self.sparse.insert(self.key.clone());
        }
        (new, has_null)
    }
}

impl Search {
    fn run(&self) -> DfResult<RecordBatch> {
        if let Some(batch) = self.cached_rows()? {
            return Ok(batch);
        }
        let allowed = self.allowed_codes();
        if allowed
            .iter()
            .any(|a| a.as_ref().is_some_and(HashSet::is_empty))
        {
            // The filter names keys the table has never held: no row passes.
            return Ok(RecordBatch::new_empty(self.output.clone()));
        }
        // Every key that can pass has been met: only NULL keys can still be missing (and not
        // in a column the filter restricts, where NULL never passes).
        let symbol_keys: u64 = self
            .keys
            .iter()
            .zip(&allowed)
            .map(|(&k, allowed)| match allowed {
                Some(codes) => codes.len() as u64,
                None => self.snapshot.symbols(k).map_or(0, |s| s.len() as u64),
            })
            .fold(1u64, u64::saturating_mul);
        // Every key there can be, NULLs included (a restricted column never passes a NULL):
        // once each has its row, nothing older can add one.
        let all_keys: u64 = self
            .keys
            .iter()
            .zip(&allowed)
            .map(|(&k, allowed)| match allowed {
                Some(codes) => codes.len() as u64,
                None => self.snapshot.symbols(k).map_or(0, |s| s.len() as u64) + 1,
            })
            .fold(1u64, u64::saturating_mul);
        let nullable: Vec<usize> = self
            .keys
            .iter()
            .zip(&allowed)
            .filter(|(_, allowed)| allowed.is_none())
            .map(|(&k, _)| k)
            .collect();
        // Few keys named by the filter, of one key column: each key's rows through the key
        // index, newest first, so k keys read their own rows only.
        if let ([key], [Some(codes)]) = (self.keys.as_slice(), allowed.as_slice())
            && names_few_of_many(
                codes.len(),
                self.snapshot.symbols(*key).map_or(0, |s| s.len()),
            )
            && let Some(found) = self.probe(*key, codes)?
        {
            return self.assemble(found);
        }
        // Only the key columns and the columns the filter reads are read while searching; the
        // filter's columns are renumbered for that projection.
        let mut searched: Vec<usize> = self.keys.clone();
        if let Some(filter) = &self.filter {
            searched.extend(collect_columns(filter).iter().map(Column::index));
        }
        searched.sort_unstable();
        searched.dedup();
        let filter = match &self.filter {
            Some(filter) => {
                let projected = self.snapshot.meta().arrow_schema().project(&searched)?;
                let expr = reassign_expr_columns(filter.clone(), &projected)?;
                // Compiled into a scan kernel where it can be (see `kernel_filter`).
                let kernel = compile(
                    &expr,
                    &FilterColumns {
                        schema: &projected,
                        table_columns: &searched,
                        snapshot: &self.snapshot,
                    },
                );
                Some(RowFilter { expr, kernel })
            }
            None => None,
        };
        // The searched columns hold every key column, by construction.
        let key_at: Vec<usize> = self
            .keys
            .iter()
            .map(|k| searched.binary_search(k))
            .collect::<Result<_, _>>()
            .map_err(|_| DataFusionError::Internal("LATEST: a key column not searched".into()))?;
        let plan = ScanPlan {
            searched,
            filter,
            key_at,
            symbol_keys,
            all_keys,
            nullable,
        };
        let mut progress = Progress {
            seen: SeenKeys::new(self),
            seen_symbol_keys: 0,
            seen_keys: 0,
            // A first chunk about as large as the keys there are, doubling up to CHUNK_ROWS.
            chunk_rows: symbol_keys
                .saturating_mul(2)
                .clamp(FIRST_CHUNK_ROWS, CHUNK_ROWS),
            found: Vec::new(),
        };
        // The rows inside the filter's time bounds, by partition, oldest first.
        let spans = ranges(&self.snapshot, self.bounds).map_err(external)?;
        // The newest rows alone first: most searches end there. What a search that goes on
        // has left is split between the cores.
        let budget = if self.threads > 1 {
            SEQUENTIAL_ROWS
        } else {
            u64::MAX
        };
        if let Scanned::Paused(rest) =
            self.scan(&plan, &spans, &[], &mut progress, budget, &|| false)?
        {
            let rows: u64 = rest.iter().map(Frame::len).sum();
            if rows >= PARALLEL_ROWS_MIN {
                let found = self.scan_in_parallel(&plan, &rest, &progress)?;
                progress.found.extend(found);
            } else {
                self.scan(&plan, &rest, &[], &mut progress, u64::MAX, &|| false)?;
            }
        }
        self.assemble(progress.found)
    }

    /// Scans `spans` (oldest first, all newer than the spans `older`) from their newest row
    /// back, recording in `progress` the first passing row of each key not met before. Stops once no older row can add a key, once every row
    /// is read, once `budget` rows were read (returning the spans still to read), or when
    /// `halt` says so between chunks.
    fn scan(
        &self,
        plan: &ScanPlan,
        spans: &[Frame],
        older: &[Frame],
        progress: &mut Progress,
        budget: u64,
        halt: &dyn Fn() -> bool,
    ) -> DfResult<Scanned> {
        let mut read = 0u64;
        for (at, span) in spans.iter().enumerate().rev() {
            let (p, rows) = (span.partition, span.rows.clone());
            let mut picked: Vec<u32> = Vec::new();
            let mut end = rows.end;
            // Whether the older spans hold a NULL key, found out once it matters.
            let mut older_null: Option<bool> = None;
            while end > rows.start {
                let complete = progress.seen_symbol_keys == plan.symbol_keys;
                let exhausted = progress.seen_keys == plan.all_keys
                    || (complete && !self.null_key(&plan.nullable, p, rows.start..end)? && {
                        if older_null.is_none() {
                            older_null = Some(
                                self.older_null_key(&plan.nullable, &spans[..at])?
                                    || self.older_null_key(&plan.nullable, older)?,
                            );
                        }
                        older_null == Some(false)
                    });
                if exhausted {
                    progress.found.push((p, picked));
                    return Ok(Scanned::Exhausted);
                }
                if read >= budget || halt() {
                    progress.found.push((p, picked));
                    let mut rest = spans[..at].to_vec();
                    rest.push(Frame::range(p, rows.start..end));
                    return Ok(Scanned::Paused(rest));
                }
                let start = end.saturating_sub(progress.chunk_rows).max(rows.start);
                progress.chunk_rows = (progress.chunk_rows * 2).min(CHUNK_ROWS);
                let batch = self
                    .snapshot
                    .read_batch(p, &plan.searched, start..end)
                    .map_err(external)?;
                self.rows_read.add(batch.num_rows());
                read += batch.num_rows() as u64;
                let codes: Vec<&Int32Array> = plan
                    .key_at
                    .iter()
                    .map(|&k| batch.column(k).as_dictionary::<Int32Type>().keys())
                    .collect();
                // Once every key without a NULL was met, a chunk without NULL keys has
                // nothing new (the search goes on only for NULL keys older rows may hold).
                if complete && codes.iter().all(|c| c.null_count() == 0) {
                    end = start;
                    continue;
                }
                let words = passing_words(plan.filter.as_ref(), &batch)?;
                // The passing rows, last first: a word at a time, its highest bit first.
                for (w, &word) in words.iter().enumerate().rev() {
                    let mut bits = word;
                    while bits != 0 {
                        let bit = 63 - bits.leading_zeros() as usize;
                        bits ^= 1 << bit;
                        let row = w * 64 + bit;
                        let (new, has_null) = progress.seen.insert(&codes, row);
                        if !new {
                            continue;
                        }
                        progress.seen_keys += 1;
                        if !has_null {
                            progress.seen_symbol_keys += 1;
                        }
                        let at = u32::try_from(start + row as u64).map_err(|_| {
                            DataFusionError::ResourcesExhausted(
                                "LATEST over a partition of more than 4 Gi rows".into(),
                            )
                        })?;
                        picked.push(at);
                    }
                }
                end = start;
            }
            progress.found.push((p, picked));
        }
        Ok(Scanned::Done)
    }

    /// Scans `rest` (oldest first) in as many pieces as there are threads, each piece on its
    /// own thread from `progress` (the keys met in the newer rows), and merges what they
    /// found, newest piece first: a key found by several pieces keeps its row of the newest.
    /// A piece that finds no older row can add a key stops the pieces older than it.
    fn scan_in_parallel(
        &self,
        plan: &ScanPlan,
        rest: &[Frame],
        progress: &Progress,
    ) -> DfResult<Found> {
        let pieces = split_rows(rest, self.threads);
        // The newest piece found to have ended the search.
        let ended = AtomicUsize::new(usize::MAX);
        let run = |i: usize| -> DfResult<Found> {
            let mut mine = Progress {
                found: Vec::new(),
                chunk_rows: CHUNK_ROWS,
                ..progress.clone()
            };
            let older: Vec<Frame> = pieces[i + 1..].iter().rev().flatten().cloned().collect();
            let halt = || ended.load(AtomicOrdering::Relaxed) < i;
            if let Scanned::Exhausted =
                self.scan(plan, &pieces[i], &older, &mut mine, u64::MAX, &halt)?
            {
                ended.fetch_min(i, AtomicOrdering::Relaxed);
            }
            Ok(mine.found)
        };
        let found: Vec<DfResult<Found>> = std::thread::scope(|scope| {
            let others: Vec<_> = (1..pieces.len())
                .map(|i| scope.spawn(move || run(i)))
                .collect();
            let mut all = vec![run(0)];
            all.extend(others.into_iter().map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(DataFusionError::Internal(
                        "a LATEST scan thread panicked".into(),
                    ))
                })
            }));
            all
        });
        // Newest piece first; within a piece, partitions and rows newest first.
        let mut kept: HashSet<Key, foldhash::fast::RandomState> = HashSet::default();
        let mut merged: Found = Vec::new();
        for piece in found {
            for (p, rows) in piece? {
                if rows.is_empty() {
                    continue;
                }
                let mut ascending = rows.clone();
                ascending.sort_unstable();
                let keys = self
                    .snapshot
                    .read_batch_picked(p, &self.keys, &ascending)
                    .map_err(external)?;
                let codes: Vec<&Int32Array> = keys
                    .columns()
                    .iter()
                    .map(|c| c.as_dictionary::<Int32Type>().keys())
                    .collect();
                let mut picked = Vec::with_capacity(rows.len());
                for row in rows {
                    let i = ascending.binary_search(&row).map_err(|_| {
                        DataFusionError::Internal("LATEST: a picked row went missing".into())
                    })?;
                    let key: Key = codes
                        .iter()
                        .map(|c| if c.is_null(i) { -1 } else { c.value(i) })
                        .collect();
                    if kept.insert(key) {
                        picked.push(row);
                    }
                }
                merged.push((p, picked));
            }
        }
        Ok(merged)
    }

    /// The rows found, by partition newest first (each partition's rows newest first), read
    /// oldest first as QuestDB returns them.
    fn assemble(&self, found: Found) -> DfResult<RecordBatch> {
        let mut batches = Vec::with_capacity(found.len());
        for (p, mut rows) in found.into_iter().rev() {
            if rows.is_empty() {
                continue;
            }
            rows.reverse();
            let batch = self
                .snapshot
                .read_batch_picked(p, &self.projection, &rows)
                .map_err(external)?;
            batches.push(batch.with_schema(self.output.clone())?);
        }
        Ok(concat_batches(&self.output, &batches)?)
    }

    /// The newest passing row of each of `codes` in key column `key`, found through the key
    /// index: for each partition newest first, each code still missing takes its rows inside
    /// the time bounds from the index and tests them newest first, a block at a time, until
    /// one passes. `None` when a partition cannot be indexed (too big for the indexes'
    /// budget): the caller searches by scanning.
    fn probe(&self, key: usize, codes: &HashSet<i32>) -> DfResult<Option<Found>> {
        let mut missing: Vec<i32> = codes.iter().copied().collect();
        missing.sort_unstable();
        // A filter that only names keys is applied by the index: nothing left to test.
        let only_keys = self.filter.as_ref().is_none_or(|f| {
            conjuncts(f)
                .into_iter()
                .all(|c| named_symbols(c).is_some_and(|(column, _)| column == key))
        });
        let filter = if only_keys {
            None
        } else {
            self.filter.as_ref()
        };
        let mut searched: Vec<usize> = Vec::new();
        if let Some(filter) = filter {
            searched.extend(collect_columns(filter).iter().map(Column::index));
        }
        searched.sort_unstable();
        searched.dedup();
        let filter = match filter {
            Some(filter) => {
                let projected = self.snapshot.meta().arrow_schema().project(&searched)?;
                Some(reassign_expr_columns(filter.clone(), &projected)?)
            }
            None => None,
        };
        let spans = ranges(&self.snapshot, self.bounds).map_err(external)?;
        let mut found = Vec::new();
        for span in spans.iter().rev() {
            if missing.is_empty() {
                break;
            }
            let mut picked = Vec::new();
            let mut still = Vec::with_capacity(missing.len());
            for &code in &missing {
                let hits = match self.indexes.rows(
                    &self.table,
                    &self.snapshot,
                    u64::MAX,
                    (span.partition, key),
                    i64::from(code),
                    span.rows.clone(),
                    usize::MAX,
                )? {
                    IndexRows::Hits(hits) => hits,
                    IndexRows::Unindexed | IndexRows::Deferred => return Ok(None),
                };
                match self.newest_passing(span.partition, &hits, &searched, filter.as_ref())? {
                    Some(row) => picked.push(row),
                    None => still.push(code),
                }
            }
            missing = still;
            picked.sort_unstable_by(|a, b| b.cmp(a));
            found.push((span.partition, picked));
        }
        Ok(Some(found))
    }

    /// The newest of `rows` (ascending rows of partition `p`) that passes `filter` (over the
    /// columns `searched`), testing blocks of them newest first.
    fn newest_passing(
        &self,
        p: usize,
        rows: &[u32],
        searched: &[usize],
        filter: Option<&Arc<dyn PhysicalExpr>>,
    ) -> DfResult<Option<u32>> {
        let Some(filter) = filter else {
            return Ok(rows.last().copied());
        };
        let mut end = rows.len();
        let mut block = FIRST_PROBED_ROWS;
        while end > 0 {
            let start = end.saturating_sub(block);
            block = (block * 2).min(PROBED_ROWS_MAX);
            let batch = self
                .snapshot
                .read_batch_picked(p, searched, &rows[start..end])
                .map_err(external)?;
            self.rows_read.add(batch.num_rows());
            let mask = filter.evaluate(&batch)?.into_array(batch.num_rows())?;
            let mask = mask.as_boolean_opt().ok_or_else(|| {
                DataFusionError::Internal("LATEST filter gave no booleans".into())
            })?;
            if let Some(i) = (0..batch.num_rows())
                .rev()
                .find(|&i| mask.is_valid(i) && mask.value(i))
            {
                return Ok(Some(rows[start + i]));
            }
            end = start;
        }
        Ok(None)
    }

    /// Per key column, the codes of the symbols the filter lets through when one of its
    /// conjuncts names them (`k = 'a'`, `k IN ('a', 'b')`, or an OR of such tests of `k`);
    /// `None` when any symbol may pass. Symbols the dictionary lacks have no code.
    fn allowed_codes(&self) -> Vec<Option<HashSet<i32>>> {
        let mut allowed: Vec<Option<HashSet<i32>>> = vec![None; self.keys.len()];
        let Some(filter) = &self.filter else {
            return allowed;
        };
        for conjunct in conjuncts(filter) {
            let Some((column, values)) = named_symbols(conjunct) else {
                continue;
            };
            let Some(slot) = self.keys.iter().position(|&k| k == column) else {
                continue;
            };
            let codes: HashSet<i32> = values
                .iter()
                .filter_map(|v| crate::snapshot::symbol_code(&self.snapshot, column, v))
                .collect();
            allowed[slot] = Some(match allowed[slot].take() {
                Some(earlier) => earlier.intersection(&codes).copied().collect(),
                None => codes,
            });
        }
        allowed
    }

    /// Whether any of key columns `keys` has a NULL in rows `rows` of partition `p`.
    fn null_key(&self, keys: &[usize], p: usize, rows: std::ops::Range<u64>) -> DfResult<bool> {
        for &k in keys {
            if self
                .snapshot
                .null_count(p, k, rows.clone())
                .map_err(external)?
                > 0
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether any of key columns `keys` has a NULL in the spans `older` still to search.
    fn older_null_key(&self, keys: &[usize], older: &[Frame]) -> DfResult<bool> {
        for span in older {
            if self.null_key(keys, span.partition, span.rows.clone())? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The search's filter over the searched columns: the expression, and its kernel when it
/// compiles into one.
struct RowFilter {
    expr: Arc<dyn PhysicalExpr>,
    kernel: Option<Predicate>,
}

/// The rows of `batch` that pass `filter` (a NULL result does not; all rows without one):
/// bit `i` of word `w` is row `64 * w + i`, and no bit past the last row is set.
fn passing_words(filter: Option<&RowFilter>, batch: &RecordBatch) -> DfResult<Vec<u64>> {
    let rows = batch.num_rows();
    let Some(filter) = filter else {
        return Ok(Selection::all(rows).words().to_vec());
    };
    if let Some(selected) = filter.kernel.as_ref().and_then(|k| select(k, batch)) {
        return Ok(selected.words().to_vec());
    }
    let values = filter.expr.evaluate(batch)?.into_array(rows)?;
    let values = values
        .as_boolean_opt()
        .ok_or_else(|| DataFusionError::Internal("LATEST filter gave no booleans".into()))?;
    let mut selected = Selection::from_bits(values.values());
    selected.and_valid(values.nulls());
    Ok(selected.words().to_vec())
}

/// The conjuncts of `e` (`a AND b AND c`).
fn conjuncts(e: &Arc<dyn PhysicalExpr>) -> Vec<&Arc<dyn PhysicalExpr>> {
    match e.downcast_ref::<BinaryExpr>() {
        Some(b) if *b.op() == Operator::And => {
            let mut all = conjuncts(b.left());
            all.extend(conjuncts(b.right()));
            all
        }
        _ => vec![e],
    }
}

/// The column and the values a test names, when it passes only rows whose column holds one
/// of them: `c = v`, `c IN (v, ...)`, or an OR of such tests of one column.
fn named_symbols(e: &Arc<dyn PhysicalExpr>) -> Option<(usize, Vec<ScalarValue>)> {
    let column_of = |e: &Arc<dyn PhysicalExpr>| {
        let inner = match e.downcast_ref::<CastExpr>() {
            Some(cast) => cast.expr(),
            None => e,
        };
        inner.downcast_ref::<Column>().map(Column::index)
    };
    // A constant, or a constant cast to the column's dictionary type (how IN lists of a
    // SYMBOL are planned); the symbol lookup reads the text either way.
    let literal = |e: &Arc<dyn PhysicalExpr>| {
        let inner = match e.downcast_ref::<CastExpr>() {
            Some(cast) => cast.expr(),
            None => e,
        };
        inner
            .downcast_ref::<Literal>()
            .map(|l| l.value().clone())
            .filter(|v| !v.is_null())
    };
    if let Some(list) = e.downcast_ref::<InListExpr>() {
        if list.negated() {
            return None;
        }
        let column = column_of(list.expr())?;
        let values = list
            .list()
            .iter()
            .map(literal)
            .collect::<Option<Vec<_>>>()?;
        return Some((column, values));
    }
    let b = e.downcast_ref::<BinaryExpr>()?;
    match b.op() {
        Operator::Eq => {
            let (column, value) = match (column_of(b.left()), literal(b.right())) {
                (Some(c), Some(v)) => (c, v),
                _ => (column_of(b.right())?, literal(b.left())?),
            };
            Some((column, vec![value]))
        }
        Operator::Or => {
            let (lc, mut lv) = named_symbols(b.left())?;
            let (rc, rv) = named_symbols(b.right())?;
            (lc == rc).then(|| {
                lv.extend(rv);
                (lc, lv)
            })
        }
        _ => None,
    }
}

/// The processors this process may run on, asked once: the answer reads the scheduler's
/// affinity and the cgroup's quota, system calls a LATEST search of a few rows should not pay.
fn processors() -> usize {
    static PROCESSORS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PROCESSORS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, Int32Array};

    use super::SeenKeys;
    use crate::exec::scan::tests::{engine, plan_and_rows};

    /// Spans cut into pieces of about equal rows, newest first, that cover every row once.
    #[test]
    fn split_rows_covers_every_row_once_newest_piece_first() {
        use super::{Frame, split_rows};
        let spans = vec![
            Frame::range(0, 10..110),
            Frame::range(1, 0..7),
            Frame::range(2, 0..300),
        ];
        for pieces in 1..6 {
            let split = split_rows(&spans, pieces);
            assert!(split.len() <= pieces, "{split:?}");
            let mut rows: Vec<(usize, u64)> = Vec::new();
            for piece in split.iter().rev() {
                for f in piece {
                    rows.extend(f.rows.clone().map(|r| (f.partition, r)));
                }
            }
            let want: Vec<(usize, u64)> = spans
                .iter()
                .flat_map(|f| f.rows.clone().map(move |r| (f.partition, r)))
                .collect();
            assert_eq!(rows, want, "{pieces} pieces");
            let sizes: Vec<u64> = split
                .iter()
                .map(|p| p.iter().map(Frame::len).sum())
                .collect();
            assert!(
                sizes.iter().max().unwrap() - sizes.iter().min().unwrap()
                    <= 407 / pieces as u64 + 1,
                "{sizes:?}"
            );
        }
    }

    /// The dense flags, the set they fall back to (codes past the dictionary) and the set
    /// alone (too many combinations) tell the same new keys and NULLs.
    #[test]
    fn seen_keys_agree_dense_and_sparse() {
        let a = Int32Array::from(
            (0..3000)
                .map(|i: i32| (i % 7 != 0).then_some((i * 31) % 13))
                .collect::<Vec<_>>(),
        );
        let b = Int32Array::from(
            (0..3000)
                .map(|i: i32| Some((i * 17) % 5))
                .collect::<Vec<_>>(),
        );
        let codes = [&a, &b];
        // The first dictionary declares 10 symbols: codes 10 to 12 lie past it.
        let mut dense = SeenKeys::with_symbols([10, 5].into_iter(), u64::MAX);
        let mut sparse = SeenKeys::with_symbols([10, 5].into_iter(), 0);
        assert!(dense.dense.is_some() && sparse.dense.is_none());
        let mut want = std::collections::HashSet::new();
        for row in 0..3000 {
            let key = (a.is_valid(row).then(|| a.value(row)), b.value(row));
            let expected = (want.insert(key), key.0.is_none());
            assert_eq!(dense.insert(&codes, row), expected, "row {row}");
            assert_eq!(sparse.insert(&codes, row), expected, "row {row}");
        }
        assert_eq!(want.len(), 14 * 5);
    }

    /// The backward search against a window over every row: one key and two (with NULL
    /// keys), with and without a filter, over several partitions where some keys only
    /// appear in the oldest one, so the search grows its chunks and crosses partitions.
    #[tokio::test]
    async fn latest_rows_match_a_window_over_every_row() {
        let (engine, _dir) = engine();
        let rows = |from: u32, to: u32, hosts: u32| {
            format!(
                "INSERT INTO t SELECT to_timestamp_seconds(1704067200 + value * 29), \
                 CASE WHEN value % 13 = 0 THEN NULL ELSE 'h' || (value % {hosts}) END, \
                 CASE value % 4 WHEN 0 THEN NULL WHEN 1 THEN 'a' ELSE 'b' END, \
                 value * 0.5 FROM generate_series({from}, {to} - 1)"
            )
        };
        for sql in [
            "CREATE TABLE t (ts TIMESTAMP, h SYMBOL, k SYMBOL, v DOUBLE) TIMESTAMP(ts) \
             PARTITION BY DAY"
                .to_string(),
            rows(0, 3000, 700),
            rows(3000, 9000, 300),
        ] {
            engine.run(&sql).await.expect(&sql);
        }
        for (keys, filter) in [
            ("h", ""),
            ("h, k", ""),
            ("h", "WHERE v > 4000 "),
            ("k", ""),
            // Filters naming the keys: the search stops once those have their rows.
            ("h", "WHERE h IN ('h1', 'h250', 'h699', 'nowhere') "),
            ("h", "WHERE h = 'h5' OR h = 'h7' "),
            ("h", "WHERE h IN ('h650', 'h1', 'h299') AND v < 1400 "),
            ("h, k", "WHERE k = 'b' AND h IN ('h3', 'h7') AND v > 10 "),
        ] {
            let latest = format!("SELECT * FROM t {filter}LATEST ON ts PARTITION BY {keys}");
            let window = format!(
                "SELECT ts, h, k, v FROM (SELECT *, row_number() OVER (PARTITION BY {keys} \
                 ORDER BY ts DESC) AS rn FROM t {filter}) WHERE rn = 1 ORDER BY ts"
            );
            let (plan, got) = plan_and_rows(&engine, &latest).await;
            assert!(plan.contains("LatestExec"), "{latest}: {plan}");
            assert!(!plan.contains("SortExec"), "{latest}: {plan}");
            let (_, want) = plan_and_rows(&engine, &window).await;
            assert_eq!(got, want, "{latest}");
            let named = filter.contains(" IN (") || filter.contains(" = ");
            assert!(got.lines().count() > if named { 4 } else { 6 }, "{got}");
        }
        // A search for keys the filter names reads what their newest rows need: the newest
        // rows, not the 9,000 of the table (a chunk or two, 256 rows first).
        // So does one whose every key, the NULL key included, turns up in the newest rows,
        // though older rows hold NULL keys too.
        for (query, most) in [
            // Keys the filter names are found through the key index: their rows only, even
            // for h650, whose newest row is 6,000 rows back.
            (
                "SELECT * FROM t WHERE h IN ('h1', 'h2') LATEST ON ts PARTITION BY h",
                0.0,
            ),
            (
                "SELECT * FROM t WHERE h IN ('h650', 'h1') LATEST ON ts PARTITION BY h",
                0.0,
            ),
            (
                "SELECT * FROM t WHERE h IN ('h650', 'h1') AND v < 1400 LATEST ON ts PARTITION BY h",
                64.0,
            ),
            ("SELECT * FROM t LATEST ON ts PARTITION BY k", 512.0),
            // A time range in the filter bounds the rows searched: one hour, not the table.
            (
                "SELECT * FROM t WHERE ts IN '2024-01-01T05' LATEST ON ts PARTITION BY h",
                130.0,
            ),
        ] {
            let analyze = format!("EXPLAIN ANALYZE {query}");
            let analyzed = crate::collect(engine.run(&analyze).await.expect(query))
                .await
                .expect(query);
            let analyzed =
                datafusion::arrow::util::pretty::pretty_format_batches(&analyzed.batches)
                    .expect("format")
                    .to_string();
            // DataFusion prints counts from a thousand on as `2.05 K`, `1.20 M`.
            let read: f64 = analyzed
                .split("rows_read=")
                .nth(1)
                .and_then(|r| r.split([',', ']']).next())
                .and_then(|n| {
                    let n = n.trim();
                    let (number, scale) = match n.strip_suffix(" K") {
                        Some(k) => (k, 1e3),
                        None => match n.strip_suffix(" M") {
                            Some(m) => (m, 1e6),
                            None => (n, 1.0),
                        },
                    };
                    number.parse::<f64>().ok().map(|v| v * scale)
                })
                .unwrap_or_else(|| panic!("no rows_read in {analyzed}"));
            assert!(read <= most, "{query}: read {read} rows: {analyzed}");
        }
        // Time bounds in the filter bound the search; the window agrees.
        for filter in [
            "WHERE ts < '2024-01-02T12:00:00Z' ",
            "WHERE ts >= '2024-01-02T00:00:00Z' AND ts < '2024-01-03T00:00:00Z' AND v > 1000 ",
            "WHERE ts IN '2024-01-02T05' ",
        ] {
            let latest = format!("SELECT * FROM t {filter}LATEST ON ts PARTITION BY h");
            let window = format!(
                "SELECT ts, h, k, v FROM (SELECT *, row_number() OVER (PARTITION BY h \
                 ORDER BY ts DESC) AS rn FROM t {filter}) WHERE rn = 1 ORDER BY ts"
            );
            let (_, got) = plan_and_rows(&engine, &latest).await;
            let (_, want) = plan_and_rows(&engine, &window).await;
            assert_eq!(got, want, "{latest}");
            assert!(got.lines().count() > 6, "{got}");
        }
        // A NULL key held only by an older partition is still found once the newer
        // partitions gave every other key its row.
        for sql in [
            "CREATE TABLE n (ts TIMESTAMP, k SYMBOL, v LONG) TIMESTAMP(ts) PARTITION BY DAY",
            "INSERT INTO n VALUES ('2024-01-01T01:00:00Z', NULL, 1), ('2024-01-01T02:00:00Z', 'a', 2)",
            // More rows than the search's first chunk, none NULL.
            "INSERT INTO n SELECT to_timestamp_seconds(1704153600 + value), \
             CASE value % 2 WHEN 0 THEN 'a' ELSE 'b' END, 10 + value FROM generate_series(0, 999)",
        ] {
            engine.run(sql).await.expect(sql);
        }
        let (_, rows) = plan_and_rows(&engine, "SELECT v FROM n LATEST ON ts PARTITION BY k").await;
        assert_eq!(
            rows.lines().filter(|l| l.starts_with("| ")).count(),
            4,
            "{rows}"
        );
        assert!(rows.contains("| 1 "), "{rows}");
        // Keys the table never held: nothing passes.
        let (_, none) = plan_and_rows(
            &engine,
            "SELECT * FROM t WHERE h IN ('nowhere') LATEST ON ts PARTITION BY h",
        )
        .await;
        assert_eq!(none.lines().count(), 4, "{none}");
    }

    /// Odd names and quotes in the WHERE before LATEST reach the search as an expression; a
    /// filter written around the query applies to its result, not before the search.
    #[tokio::test]
    async fn filters_travel_as_expressions_and_outer_filters_stay_outside() {
        let (engine, _dir) = engine();
        for sql in [
            r#"CREATE TABLE "We'ird" (ts TIMESTAMP, "K 1" SYMBOL, "v'al" DOUBLE, s VARCHAR) TIMESTAMP(ts)"#,
            r#"INSERT INTO "We'ird" VALUES ('2024-01-01T00:00:00Z', 'a', 1, 'it''s'), ('2024-01-01T00:00:01Z', 'a', 2, 'no'), ('2024-01-01T00:00:02Z', 'b', 3, 'it''s'), ('2024-01-01T00:00:03Z', 'b', 0, 'it''s')"#,
        ] {
            engine.run(sql).await.expect(sql);
        }
        let latest = r#"SELECT "K 1", "v'al" FROM "We'ird" x WHERE x.s = 'it''s' LATEST ON ts PARTITION BY "K 1""#;
        let (plan, rows) = plan_and_rows(&engine, latest).await;
        assert!(plan.contains("LatestExec"), "{plan}");
        assert!(rows.contains("| a   | 1.0  |"), "{rows}");
        assert!(rows.contains("| b   | 0.0  |"), "{rows}");
        // The newest row of b has 0: filtering after the search drops b, not its older row.
        let outer = format!(r#"SELECT * FROM ({latest}) WHERE "v'al" > 0.5"#);
        let (_, rows) = plan_and_rows(&engine, &outer).await;
        assert!(rows.contains("| a   | 1.0  |"), "{rows}");
        assert!(!rows.contains("| b "), "{rows}");
    }
}

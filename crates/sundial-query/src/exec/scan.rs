//! Scanning a table snapshot: designated-timestamp pruning and a parallel, zero-copy scan.
//!
//! ```text
//! filters on ts ──▶ [lo, hi) ──▶ partitions pruned ──▶ binary search ──▶ row ranges
//! row ranges ──▶ frames (≈ equal slices) ──▶ frame i runs in output partition i % N
//!                                             (or, for order-free folds, pieces taken as
//!                                              each partition is ready: `claims`)
//!            ──▶ RecordBatches of `batch_size` rows, sliced from the mapped files
//! other filters ──▶ row filter: its columns read first ──▶ mask ──▶ only passing rows of
//!                   the projected columns gathered (or filtered, when most pass)
//! ```
//!
//! The scan applies every filter pushed into it (the provider reports them Exact), so no
//! FilterExec runs above it and a LIMIT pushed into it counts passing rows. Each output
//! partition is sorted by the designated timestamp, and says so, so ORDER BY ts merges
//! instead of sorting; ORDER BY ts DESC becomes a reverse scan that a LIMIT stops early.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray, UInt32Array};
use datafusion::arrow::compute::{
    SortOptions, filter_record_batch, prep_null_mask_filter, take_record_batch,
};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DataFusionError, Result as DfResult, ScalarValue, Statistics};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::execution_props::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{
    EquivalenceProperties, PhysicalExpr, PhysicalSortExpr, create_physical_expr, split_conjunction,
};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    ReplaceChildrenOptions, SortOrderPushdownResult,
};
use sundial_kernels::{Predicate, Selection, Zone};
use sundial_storage::{Snapshot, Table, TableMeta, ZONE_ROWS};

use super::claims::{Claims, Round};
pub use super::frame::Frame;
use super::index_scan::{pick_rows, symbol_filter, symbol_filters};
use super::kernel_filter::{FilterColumns, compile, select};
use super::zone_skip::skip_zones;
use crate::error::external;
use crate::key_index::KeyIndexes;
use crate::snapshot::newest_snapshot;

/// Bounds `[lo, hi)` on the designated timestamp implied by a conjunction of filters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeBounds {
    pub lo: Option<i64>,
    pub hi: Option<i64>,
}

impl TimeBounds {
    fn raise_lo(&mut self, v: i64) {
        self.lo = Some(self.lo.map_or(v, |lo| lo.max(v)));
    }
    fn lower_hi(&mut self, v: i64) {
        self.hi = Some(self.hi.map_or(v, |hi| hi.min(v)));
    }
    pub fn is_empty(&self) -> bool {
        matches!((self.lo, self.hi), (Some(lo), Some(hi)) if lo >= hi)
    }
}

/// Whether `expr` constrains the designated timestamp `ts_column` in a way the scan applies.
pub fn is_time_filter(expr: &Expr, ts_column: &str) -> bool {
    let mut b = TimeBounds::default();
    apply_time_filter(expr, ts_column, &mut b)
}

/// Whether the scan's bounds apply all of `expr`: every conjunct compares the designated
/// timestamp with a constant, so no row the scan returns can fail it.
pub fn is_exact_time_filter(expr: &Expr, ts_column: &str) -> bool {
    datafusion::logical_expr::utils::split_conjunction(expr)
        .into_iter()
        .all(|conjunct| {
            !matches!(
                conjunct,
                Expr::BinaryExpr(BinaryExpr {
                    op: Operator::And,
                    ..
                })
            ) && is_time_filter(conjunct, ts_column)
        })
}

/// Narrows `bounds` by every conjunct of `filters` that compares the timestamp to a constant.
pub fn time_bounds(filters: &[Expr], ts_column: &str) -> TimeBounds {
    let mut bounds = TimeBounds::default();
    for f in filters {
        for conjunct in datafusion::logical_expr::utils::split_conjunction(f) {
            apply_time_filter(conjunct, ts_column, &mut bounds);
        }
    }
    bounds
}

fn apply_time_filter(expr: &Expr, ts_column: &str, b: &mut TimeBounds) -> bool {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            if *op == Operator::And {
                let l = apply_time_filter(left, ts_column, b);
                let r = apply_time_filter(right, ts_column, b);
                return l || r;
            }
            let (op, value) = match (
                column_name(left),
                literal_ns(right),
                column_name(right),
                literal_ns(left),
            ) {
                (Some(c), Some(v), _, _) if c == ts_column => (*op, v),
                (_, _, Some(c), Some(v)) if c == ts_column => match op.swap() {
                    Some(op) => (op, v),
                    None => return false,
                },
                _ => return false,
            };
            match op {
                Operator::Gt => b.raise_lo(value.saturating_add(1)),
                Operator::GtEq => b.raise_lo(value),
                Operator::Lt => b.lower_hi(value),
                Operator::LtEq => b.lower_hi(value.saturating_add(1)),
                Operator::Eq => {
                    b.raise_lo(value);
                    b.lower_hi(value.saturating_add(1));
                }
                _ => return false,
            }
            true
        }
        Expr::Between(between) if !between.negated => {
            match (
                column_name(&between.expr),
                literal_ns(&between.low),
                literal_ns(&between.high),
            ) {
                (Some(c), Some(lo), Some(hi)) if c == ts_column => {
                    b.raise_lo(lo);
                    b.lower_hi(hi.saturating_add(1));
                    true
                }
                _ => false,
            }
        }
        _ => false,
    }
}

fn column_name(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Column(c) => Some(c.name.as_str()),
        _ => None,
    }
}

/// A constant timestamp as nanoseconds: a literal, or a literal cast to a timestamp type (a
/// filter not yet simplified, as LATEST ON's search receives it).
fn literal_ns(expr: &Expr) -> Option<i64> {
    let cast;
    let value = match expr {
        Expr::Literal(value, _) => value,
        Expr::Cast(c) if matches!(c.field.data_type(), DataType::Timestamp(..)) => {
            let Expr::Literal(value, _) = c.expr.as_ref() else {
                return None;
            };
            cast = value.cast_to(c.field.data_type()).ok()?;
            &cast
        }
        _ => return None,
    };
    match value {
        ScalarValue::TimestampNanosecond(Some(v), _) => Some(*v),
        ScalarValue::TimestampMicrosecond(Some(v), _) => v.checked_mul(1_000),
        ScalarValue::TimestampMillisecond(Some(v), _) => v.checked_mul(1_000_000),
        ScalarValue::TimestampSecond(Some(v), _) => v.checked_mul(1_000_000_000),
        _ => None,
    }
}

/// The row ranges of `snapshot` inside `bounds`, partition by partition.
pub fn ranges(snapshot: &Snapshot, bounds: TimeBounds) -> sundial_storage::Result<Vec<Frame>> {
    let mut out = Vec::new();
    if bounds.is_empty() {
        return Ok(out);
    }
    let has_ts = snapshot.meta().timestamp_index.is_some();
    for (i, p) in snapshot.partitions().iter().enumerate() {
        if p.row_count == 0 {
            continue;
        }
        if has_ts {
            if bounds.lo.is_some_and(|lo| p.max_ts < lo)
                || bounds.hi.is_some_and(|hi| p.min_ts >= hi)
            {
                continue;
            }
            let rows = snapshot.rows_in_range(i, bounds.lo, bounds.hi)?;
            if !rows.is_empty() {
                out.push(Frame::range(i, rows));
            }
        } else {
            out.push(Frame::range(i, 0..p.row_count));
        }
    }
    Ok(out)
}

/// Rows per batch the scan emits. Slicing the mapped files costs nothing per row, so large
/// batches amortise the per-batch work of the operators above (filters, aggregates): 64 Ki rows
/// scanned about 1.8x faster than DataFusion's default 8 Ki in `bench storage`.
pub const SCAN_BATCH_ROWS_MIN: usize = 65_536;

/// The scan's batch size for a session whose `batch_size` is `session_batch_rows`.
pub fn scan_batch_rows(session_batch_rows: usize) -> u64 {
    session_batch_rows.max(SCAN_BATCH_ROWS_MIN) as u64
}

/// Splits frames into frames reading at most `frame_rows` rows each: a longer frame into
/// the fewest equal pieces that fit (a 1.3M-row partition in two of 650K, not 1M and 300K,
/// so that cores given alternate frames get as many rows).
pub fn split_frames(frames: Vec<Frame>, frame_rows: u64) -> Vec<Frame> {
    let frame_rows = frame_rows.max(1);
    let mut out = Vec::new();
    for frame in frames {
        let len = frame.len();
        if len <= frame_rows {
            out.push(frame);
            continue;
        }
        let pieces = len.div_ceil(frame_rows);
        for i in 0..pieces {
            out.push(frame.slice(len * i / pieces, len * (i + 1) / pieces));
        }
    }
    out
}

/// What a scan reads: kept with the scan so that a reused plan reads the newest snapshot, with
/// the values of its run in place of the filters' placeholders (see `reuse`).
#[derive(Debug)]
pub(crate) struct ScanSource {
    pub table: Arc<Table>,
    /// The metadata planned against, which decided the filters the scan applies.
    pub planned: Arc<TableMeta>,
    /// The table's columns as planned (`planned` as Arrow).
    pub schema: SchemaRef,
    pub indexes: Arc<KeyIndexes>,
    /// The filters pushed into the scan, as planned: with placeholders in a reused plan.
    /// The scan applies all of them (see [`ScanSource::read`]).
    pub filters: Vec<Expr>,
    /// The planning session's properties, for turning filters into physical expressions.
    pub props: ExecutionProps,
    pub target_partitions: usize,
    pub session_batch_rows: usize,
    /// Planned for reuse: row counts are estimates, since later runs read other rows.
    pub reused: bool,
}

/// The rows one run of a scan reads.
#[derive(Debug, Clone)]
pub(crate) struct ScanData {
    snapshot: Arc<Snapshot>,
    /// The filters (bound) that chose the rows.
    filters: Arc<[Expr]>,
    frames: Arc<Vec<Frame>>,
    /// The filters that bounds and indexes leave, tested on each row the frames hold.
    filter: Option<RowFilter>,
    /// Rows the zone maps cut from the frames (no row of them passes the filter).
    zone_skipped_rows: u64,
    /// The pieces the partitions of this node take one at a time (see [`SundialScanExec::chunks`]);
    /// a copy of the data starts with none.
    claims: Claims,
}

/// A row filter passing at most one row in this many of a range gathers the passing rows
/// instead of filtering whole columns: a gather reads only them, while filtering reads
/// (and, for SYMBOL columns, validates) every row of the range.
const GATHER_PASSING_FRACTION_MAX: usize = 4;

/// Filters the scan tests row by row: their conjunction over the columns it reads.
#[derive(Debug, Clone)]
struct RowFilter {
    /// The table columns the predicate reads, ascending: its input batch's columns.
    columns: Vec<usize>,
    predicate: Arc<dyn PhysicalExpr>,
    /// The predicate as a kernel, when it compiles into one: tested without building a
    /// boolean array per comparison.
    kernel: Option<Arc<Predicate>>,
    /// What zone maps can test of the predicate: the kernel, or the conjunction of the
    /// predicate's conjuncts that compile into kernels (implied by the predicate).
    zone_test: Option<Arc<Predicate>>,
}

impl RowFilter {
    /// The projected columns of the rows of `frame` that pass, in table order; `None` if
    /// none does.
    fn read_passing(
        &self,
        snapshot: &Snapshot,
        frame: &Frame,
        projection: &[usize],
    ) -> DfResult<Option<RecordBatch>> {
        let tested = read_rows(snapshot, frame, &self.columns)?;
        let mask = self.mask(&tested)?;
        let passing = mask.true_count();
        if passing == 0 {
            return Ok(None);
        }
        if passing == tested.num_rows() {
            return read_rows(snapshot, frame, projection).map(Some);
        }
        let passing_rows: Vec<u32> = match &frame.picks {
            Some(picks) => mask.values().set_indices().map(|i| picks[i]).collect(),
            // Many passing rows of a range are cheaper filtered out of the mapped columns
            // (as are rows past what a pick can name).
            None if passing > tested.num_rows() / GATHER_PASSING_FRACTION_MAX
                || frame.rows.end > u64::from(u32::MAX) =>
            {
                let all = read_rows(snapshot, frame, projection)?;
                return Ok(Some(filter_record_batch(&all, &mask)?));
            }
            None => {
                let start = frame.rows.start as u32;
                mask.values()
                    .set_indices()
                    .map(|i| start + i as u32)
                    .collect()
            }
        };
        // Only the passing rows of the projected columns are read.
        snapshot
            .read_batch_picked(frame.partition, projection, &passing_rows)
            .map(Some)
            .map_err(external)
    }

    /// The rows of `tested` that pass.
    fn select(&self, tested: &RecordBatch) -> DfResult<Selection> {
        if let Some(selected) = self.kernel.as_ref().and_then(|k| select(k, tested)) {
            return Ok(selected);
        }
        Ok(Selection::from_bits(self.mask(tested)?.values()))
    }

    /// True for the rows of `tested` that pass (NULL counts as not passing).
    fn mask(&self, tested: &RecordBatch) -> DfResult<BooleanArray> {
        if self.kernel.is_some() {
            return Ok(BooleanArray::new(self.select(tested)?.into_bits(), None));
        }
        let result = self
            .predicate
            .evaluate(tested)?
            .into_array(tested.num_rows())?;
        let Some(mask) = result.as_boolean_opt() else {
            return Err(DataFusionError::Internal(format!(
                "scan filter {} gave {}, not booleans",
                self.predicate,
                result.data_type()
            )));
        };
        Ok(if mask.null_count() > 0 {
            prep_null_mask_filter(mask)
        } else {
            mask.clone()
        })
    }
}

/// Whether the scan can test `filter` on each row it reads: it must give the same answer
/// for a row whenever it is tested (not volatile) and read only the row (no subquery).
pub(crate) fn is_row_filter(filter: &Expr) -> bool {
    let reaches_out = filter
        .exists(|e| {
            Ok(matches!(
                e,
                Expr::ScalarSubquery(_)
                    | Expr::Exists(_)
                    | Expr::InSubquery(_)
                    | Expr::OuterReferenceColumn(..)
            ))
        })
        .unwrap_or(true);
    !reaches_out && !filter.is_volatile()
}

impl ScanSource {
    fn timestamp_name(&self) -> Option<&str> {
        self.planned.timestamp_column().map(|c| c.name.as_str())
    }

    /// Whether the frames alone apply `filter` in full: it only bounds the designated
    /// timestamp, or picks symbols through key indexes (`index_scan::symbol_filter`).
    fn frames_apply(&self, filter: &Expr, snapshot: &Snapshot) -> bool {
        let time = self
            .timestamp_name()
            .is_some_and(|ts| is_exact_time_filter(filter, ts));
        time || symbol_filter(filter, &self.planned, snapshot).is_some()
    }

    /// The filters with `values` in place of their placeholders (`values[0]` is `$1`).
    pub(crate) fn bound_filters(&self, values: &[ScalarValue]) -> DfResult<Vec<Expr>> {
        self.filters
            .iter()
            .map(|f| super::values::with_values(f, values))
            .collect()
    }

    /// The rows of the newest snapshot that `filters` (bound) select: frames narrowed by the
    /// timestamp bounds and symbol indexes, and a row filter for the filters they leave.
    /// Filters the scan cannot test (volatile ones, which DataFusion applies above the scan
    /// too) only narrow the frames.
    pub(crate) fn read(&self, filters: &[Expr]) -> DfResult<ScanData> {
        let snapshot = newest_snapshot(&self.table, &self.planned)?;
        self.read_at(snapshot, filters)
    }

    /// The rows of `snapshot` that `filters` (bound) select, as [`ScanSource::read`].
    fn read_at(&self, snapshot: Arc<Snapshot>, filters: &[Expr]) -> DfResult<ScanData> {
        let bounds = match self.timestamp_name() {
            Some(ts) => time_bounds(filters, ts),
            None => TimeBounds::default(),
        };
        let mut frames = ranges(&snapshot, bounds).map_err(external)?;
        let symbol_filters = symbol_filters(filters, &self.planned, &snapshot);
        if !symbol_filters.is_empty() {
            frames = pick_rows(
                &self.indexes,
                &self.table,
                &snapshot,
                &symbol_filters,
                frames,
            )?;
        }
        let filter = self.row_filter(filters, &snapshot)?;
        let mut zone_skipped_rows = 0;
        if let Some(f) = &filter
            && let Some(test) = &f.zone_test
        {
            (frames, zone_skipped_rows) = skip_zones(frames, &snapshot, test, &f.columns)?;
        }
        let total: u64 = frames.iter().map(Frame::len).sum();
        let frame_rows = frame_rows(total, self.target_partitions, self.session_batch_rows);
        Ok(ScanData {
            frames: Arc::new(split_frames(frames, frame_rows)),
            filter,
            filters: filters.into(),
            snapshot,
            zone_skipped_rows,
            claims: Claims::default(),
        })
    }

    /// The conjunction of the filters the frames leave, planned over the columns it reads.
    fn row_filter(&self, filters: &[Expr], snapshot: &Snapshot) -> DfResult<Option<RowFilter>> {
        let left = filters
            .iter()
            .filter(|f| !self.frames_apply(f, snapshot) && is_row_filter(f))
            .cloned();
        let Some(predicate) = conjunction(left) else {
            return Ok(None);
        };
        let mut columns = predicate
            .column_refs()
            .into_iter()
            .map(|c| self.schema.index_of(&c.name))
            .collect::<Result<Vec<_>, _>>()?;
        columns.sort_unstable();
        columns.dedup();
        let input = DFSchema::try_from(self.schema.project(&columns)?)?;
        let predicate = create_physical_expr(
            &predicate,
            &input,
            &self.props,
            &PhysicalPlanningContext::default(),
        )?;
        let filter_columns = FilterColumns {
            schema: input.as_arrow(),
            table_columns: &columns,
            snapshot,
        };
        let kernel = compile(&predicate, &filter_columns).map(Arc::new);
        let zone_test = kernel.clone().or_else(|| {
            let parts: Vec<Predicate> = split_conjunction(&predicate)
                .into_iter()
                .filter_map(|conjunct| compile(conjunct, &filter_columns))
                .collect();
            (!parts.is_empty()).then(|| Arc::new(Predicate::and(parts)))
        });
        Ok(Some(RowFilter {
            columns,
            predicate,
            kernel,
            zone_test,
        }))
    }
}

/// Rows per scan frame: a whole number of batches, about a quarter of each core's share so
/// that cores finishing early take more, and at most 16 batches.
fn frame_rows(total_rows: u64, target_partitions: usize, session_batch_rows: usize) -> u64 {
    let batch_rows = scan_batch_rows(session_batch_rows);
    let wanted = total_rows / (target_partitions.max(1) as u64 * 4);
    wanted.div_ceil(batch_rows).clamp(1, 16) * batch_rows
}

/// Rows past which a reused plan that scans in one partition is not used for a run that
/// could scan in several: a fresh plan costs well under a millisecond, such a scan more.
const REUSED_SERIAL_SCAN_ROWS_MAX: u64 = 1 << 17;

/// The physical scan of a Sundial table.
#[derive(Debug, Clone)]
pub struct SundialScanExec {
    source: Arc<ScanSource>,
    /// What this run reads; `None` in a plan kept for reuse, which is bound before each run.
    data: Option<ScanData>,
    projection: Vec<usize>,
    schema: SchemaRef,
    limit: Option<usize>,
    partitions: usize,
    /// Newest rows first: frames and the rows in each in descending timestamp order.
    reverse: bool,
    /// Runs in one partition because its consumer wants every row in timestamp order
    /// ([`SundialScanExec::in_one_partition`]), whatever the number of rows.
    serial_for_order: bool,
    properties: Arc<PlanProperties>,
}

impl SundialScanExec {
    pub(crate) fn new(
        source: Arc<ScanSource>,
        data: ScanData,
        projection: Vec<usize>,
        schema: SchemaRef,
        limit: Option<usize>,
    ) -> Self {
        let partitions = source.target_partitions.clamp(1, data.frames.len().max(1));
        SundialScanExec::build(
            source,
            Some(data),
            projection,
            schema,
            limit,
            partitions,
            false,
        )
    }

    fn build(
        source: Arc<ScanSource>,
        data: Option<ScanData>,
        projection: Vec<usize>,
        schema: SchemaRef,
        limit: Option<usize>,
        partitions: usize,
        reverse: bool,
    ) -> Self {
        let mut equivalences = EquivalenceProperties::new(schema.clone());
        if let Some(ordering) = timestamp_ordering(&source.planned, &projection, &schema, reverse) {
            equivalences.add_ordering(ordering);
        }
        let properties = Arc::new(PlanProperties::new(
            equivalences,
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        SundialScanExec {
            source,
            data,
            projection,
            schema,
            limit,
            partitions,
            reverse,
            serial_for_order: false,
            properties,
        }
    }

    /// The same scan with another limit or order (keeps the rows it reads).
    fn rebuilt(&self, limit: Option<usize>, partitions: usize, reverse: bool) -> Self {
        let mut exec = SundialScanExec::build(
            self.source.clone(),
            self.data.clone(),
            self.projection.clone(),
            self.schema.clone(),
            limit,
            partitions,
            reverse,
        );
        exec.serial_for_order = self.serial_for_order && partitions == 1;
        exec
    }

    /// The same scan in one partition, its rows in ascending timestamp order, for a consumer
    /// that would otherwise merge the partitions by timestamp; `None` when the scan is
    /// already one partition, reversed, or does not output the designated timestamp.
    pub(crate) fn in_one_partition(&self) -> Option<Self> {
        if self.partitions <= 1 || self.reverse || self.timestamp_output().is_none() {
            return None;
        }
        let mut exec = self.rebuilt(self.limit, 1, false);
        exec.serial_for_order = true;
        Some(exec)
    }

    /// This scan reading the newest rows with `values` for its placeholders, or, with no
    /// values, holding no rows (as a kept plan does). `None` if the plan does not suit
    /// these values: the run would scan many rows in the one partition planned for a few.
    pub(crate) fn bound(&self, values: Option<&[ScalarValue]>) -> DfResult<Option<Self>> {
        let data = match values {
            None => None,
            Some(values) => {
                let data = self.source.read(&self.source.bound_filters(values)?)?;
                let rows: u64 = data.frames.iter().map(Frame::len).sum();
                if self.partitions < self.source.target_partitions
                    && !self.reverse
                    && !self.serial_for_order
                    && self.limit.is_none()
                    && rows > REUSED_SERIAL_SCAN_ROWS_MAX
                {
                    return Ok(None);
                }
                Some(data)
            }
        };
        // Same partitioning and order: the plan above keeps its properties.
        Ok(Some(SundialScanExec {
            data,
            ..self.clone()
        }))
    }

    /// This run's scan reading only the rows, among those it reads, that also pass
    /// `narrowing` (each a condition on an output column), from the same snapshot. `None`
    /// when the scan cannot apply it: a plan kept unbound, a limit or reversed order (whose
    /// rows a narrowing would change), or a time condition on a column that is not the
    /// designated timestamp.
    pub(crate) fn narrowed(&self, narrowing: &[(usize, Narrowing)]) -> DfResult<Option<Self>> {
        let Some(data) = &self.data else {
            return Ok(None);
        };
        if self.limit.is_some() || self.reverse {
            return Ok(None);
        }
        let mut filters = data.filters.to_vec();
        for (output, condition) in narrowing {
            let Some(&table_column) = self.projection.get(*output) else {
                return Ok(None);
            };
            let column = &self.source.planned.columns[table_column];
            let column_expr = Expr::Column(datafusion::common::Column::from_name(&column.name));
            let data_type = self.source.schema.field(table_column).data_type();
            let filter = match condition {
                Narrowing::OneOf(values) => {
                    let list = values
                        .iter()
                        .map(|v| v.cast_to(data_type).map(|v| Expr::Literal(v, None)))
                        .collect::<DfResult<Vec<_>>>()?;
                    datafusion::logical_expr::in_list(column_expr, list, false)
                }
                Narrowing::Time { op, ns } => {
                    if self.timestamp_output() != Some(*output) {
                        return Ok(None);
                    }
                    let value = ScalarValue::TimestampNanosecond(Some(*ns), None);
                    let right = Expr::Literal(value.cast_to(data_type)?, None);
                    Expr::BinaryExpr(BinaryExpr::new(Box::new(column_expr), *op, Box::new(right)))
                }
            };
            filters.push(filter);
        }
        let data = self.source.read_at(data.snapshot.clone(), &filters)?;
        // Same partitioning and order: the plan above keeps its properties.
        Ok(Some(SundialScanExec {
            data: Some(data),
            ..self.clone()
        }))
    }

    /// The designated timestamp's position in the scan's output, if projected.
    pub(crate) fn timestamp_output(&self) -> Option<usize> {
        timestamp_position(&self.source.planned, &self.projection)
    }

    /// The frames this run reads (none in a plan kept unbound).
    pub fn frames(&self) -> &[Frame] {
        self.data.as_ref().map_or(&[], |d| d.frames.as_slice())
    }
}

/// A condition on a column of a scan's output that narrows the rows it reads (see
/// [`SundialScanExec::narrowed`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Narrowing {
    /// The value is one of these (of any type that casts to the column's).
    OneOf(Vec<ScalarValue>),
    /// The designated timestamp compares so (`<`, `<=`, `>=`, `>`) with this many nanoseconds.
    Time { op: Operator, ns: i64 },
}

/// Each output partition runs its frames in table order, and a table's rows are sorted by the
/// designated timestamp (partitions by range, rows within one by the merge on commit), so
/// every output partition is sorted by it: ascending, or descending when reversed.
pub(crate) fn timestamp_ordering(
    meta: &TableMeta,
    projection: &[usize],
    schema: &SchemaRef,
    reverse: bool,
) -> Option<Vec<PhysicalSortExpr>> {
    let at = timestamp_position(meta, projection)?;
    let column = Column::new(schema.field(at).name(), at);
    let options = SortOptions {
        descending: reverse,
        nulls_first: reverse,
    };
    Some(vec![PhysicalSortExpr::new(Arc::new(column), options)])
}

/// The designated timestamp's position among the projected columns, if projected.
fn timestamp_position(meta: &TableMeta, projection: &[usize]) -> Option<usize> {
    let ts = meta.timestamp_index?;
    projection.iter().position(|&c| c == ts)
}

/// `frame` in pieces reading at most `batch_rows` rows each, first to last or (when
/// `reverse`) last to first.
fn pieces(frame: Frame, batch_rows: u64, reverse: bool) -> impl Iterator<Item = Frame> {
    let (mut start, mut end) = (0, frame.len());
    std::iter::from_fn(move || {
        if start >= end {
            return None;
        }
        Some(if reverse {
            let lo = end.saturating_sub(batch_rows).max(start);
            let piece = frame.slice(lo, end);
            end = lo;
            piece
        } else {
            let hi = (start + batch_rows).min(end);
            let piece = frame.slice(start, hi);
            start = hi;
            piece
        })
    })
}

/// `frame` in pieces of at most `batch_rows` rows whose ends lie on zone boundaries (whole
/// multiples of [`ZONE_ROWS`] rows from the partition's first row, as many zones a piece as
/// `batch_rows` holds) where the frame allows, so that a piece covers whole zones, which an
/// aggregate can take from their zone maps. Rows an index picked are cut as [`pieces`] cuts.
fn zone_pieces(frame: Frame, batch_rows: u64) -> Box<dyn Iterator<Item = Frame> + Send> {
    if frame.picks.is_some() {
        return Box::new(pieces(frame, batch_rows, false));
    }
    let step = (batch_rows / ZONE_ROWS).max(1) * ZONE_ROWS;
    let (first, end) = (frame.rows.start, frame.rows.end);
    let mut at = first;
    Box::new(std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let next = ((at / step + 1) * step).min(end);
        let piece = frame.slice(at - first, next - first);
        at = next;
        Some(piece)
    }))
}

impl DisplayAs for SundialScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let frames = self.frames();
        let rows: u64 = frames.iter().map(Frame::len).sum();
        write!(
            f,
            "SundialScanExec: table={}, frames={}, rows={rows}",
            self.source.planned.name,
            frames.len(),
        )?;
        if let Some(skipped) = self.data.as_ref().map(|d| d.zone_skipped_rows)
            && skipped > 0
        {
            write!(f, ", zones_skipped_rows={skipped}")?;
        }
        write!(f, ", projection={:?}", self.projection)?;
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
        }
        if self.reverse {
            write!(f, ", reverse")?;
        }
        if frames.iter().any(|fr| fr.picks.is_some()) {
            write!(f, ", indexed")?;
        }
        if let Some(filter) = self.data.as_ref().and_then(|d| d.filter.as_ref()) {
            write!(f, ", filter={}", filter.predicate)?;
            if filter.kernel.is_some() {
                write!(f, " (kernel)")?;
            }
        }
        Ok(())
    }
}

impl ExecutionPlan for SundialScanExec {
    fn name(&self) -> &'static str {
        "SundialScanExec"
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

    /// The scan knows how many rows it returns: each partition its frames' rows, at most its
    /// limit. Small scans so get plans without repartitioning, and `count(*)` of a whole
    /// table is answered from them. With a row filter the counts are upper bounds, and in a
    /// plan planned for reuse estimates: its later runs read other rows.
    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> DfResult<Arc<Statistics>> {
        let frames = self.frames();
        let partition_rows = |partition: usize| {
            let rows: u64 = frames
                .iter()
                .skip(partition)
                .step_by(self.partitions.max(1))
                .map(Frame::len)
                .sum();
            self.limit.map_or(rows, |limit| rows.min(limit as u64))
        };
        let rows: u64 = match args.partition() {
            Some(partition) => partition_rows(partition),
            None => (0..self.partitions).map(partition_rows).sum(),
        };
        let mut statistics = Statistics::new_unknown(&self.schema);
        let rows = usize::try_from(rows).unwrap_or(usize::MAX);
        let filtered = self.data.as_ref().is_some_and(|d| d.filter.is_some());
        statistics.num_rows = if self.source.reused || filtered {
            Precision::Inexact(rows)
        } else {
            Precision::Exact(rows)
        };
        Ok(Arc::new(statistics))
    }

    /// Sorting by the designated timestamp needs no sort: ascending is the scan's order, and
    /// descending is a reverse scan, run as one partition so that a LIMIT above it stops
    /// after the newest rows.
    fn try_pushdown_sort(
        &self,
        order: &[PhysicalSortExpr],
    ) -> DfResult<SortOrderPushdownResult<Arc<dyn ExecutionPlan>>> {
        let (Some(first), Some(ts)) = (order.first(), self.timestamp_output()) else {
            return Ok(SortOrderPushdownResult::Unsupported);
        };
        let is_ts = first
            .expr
            .downcast_ref::<Column>()
            .is_some_and(|c| c.index() == ts);
        // Timestamps are never NULL, so NULLS FIRST/LAST cannot matter.
        if !is_ts || self.limit.is_some() {
            return Ok(SortOrderPushdownResult::Unsupported);
        }
        let reverse = first.options.descending;
        let partitions = if reverse { 1 } else { self.partitions };
        let exec = self.rebuilt(None, partitions, reverse);
        if partitions > 1 || order.len() > 1 {
            return Ok(SortOrderPushdownResult::Inexact {
                inner: Arc::new(exec),
            });
        }
        Ok(SortOrderPushdownResult::Exact {
            inner: Arc::new(exec),
        })
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        Some(Arc::new(self.rebuilt(limit, self.partitions, self.reverse)))
    }

    fn fetch(&self) -> Option<usize> {
        self.limit
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let Some(data) = &self.data else {
            return Err(DataFusionError::Internal(
                "a scan kept for reuse ran without being bound".into(),
            ));
        };
        let batch_rows = scan_batch_rows(context.session_config().batch_size());
        let reverse = self.reverse;
        let mut mine = self.frames_of(data, partition);
        if reverse {
            mine.reverse();
        }
        let reader = PieceReader {
            snapshot: data.snapshot.clone(),
            filter: data.filter.clone(),
            projection: self.projection.clone(),
            reverse,
            remaining: self.limit.map_or(u64::MAX, |l| l as u64),
            pieces: Box::new(
                mine.into_iter()
                    .flat_map(move |frame| pieces(frame, batch_rows, reverse)),
            ),
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            futures::stream::iter(reader),
        )))
    }
}

/// One output partition's batches: each piece's rows that pass the row filter, in scan
/// order, until the limit has been returned.
struct PieceReader {
    snapshot: Arc<Snapshot>,
    filter: Option<RowFilter>,
    projection: Vec<usize>,
    reverse: bool,
    /// Rows still to return (the limit's rest).
    remaining: u64,
    pieces: Box<dyn Iterator<Item = Frame> + Send>,
}

impl PieceReader {
    /// The rows of `piece` to return: `None` if none passes the filter.
    fn read_piece(&self, piece: Frame) -> DfResult<Option<RecordBatch>> {
        let Some(filter) = &self.filter else {
            // Without a filter every row is returned, so the limit cuts the piece before
            // it is read: the newest rows when reversed, else the oldest.
            let len = piece.len();
            let take = len.min(self.remaining);
            let piece = if self.reverse {
                piece.slice(len - take, len)
            } else {
                piece.slice(0, take)
            };
            let batch = read_rows(&self.snapshot, &piece, &self.projection)?;
            return self.in_scan_order(batch).map(Some);
        };
        let Some(batch) = filter.read_passing(&self.snapshot, &piece, &self.projection)? else {
            return Ok(None);
        };
        let batch = self.in_scan_order(batch)?;
        let rows = (batch.num_rows() as u64).min(self.remaining) as usize;
        Ok(Some(batch.slice(0, rows)))
    }

    /// `batch` (in table order) reversed when the scan reads newest rows first.
    fn in_scan_order(&self, batch: RecordBatch) -> DfResult<RecordBatch> {
        // Without columns there is nothing to reorder: only the row count matters.
        if !self.reverse || batch.num_columns() == 0 {
            return Ok(batch);
        }
        let indices = UInt32Array::from_iter_values((0..batch.num_rows() as u32).rev());
        Ok(take_record_batch(&batch, &indices)?)
    }
}

impl Iterator for PieceReader {
    type Item = DfResult<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.remaining > 0 {
            let piece = self.pieces.next()?;
            match self.read_piece(piece) {
                Ok(None) => continue,
                Ok(Some(batch)) => {
                    self.remaining -= batch.num_rows() as u64;
                    return Some(Ok(batch));
                }
                Err(e) => {
                    self.remaining = 0;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

/// A piece of a scan for operators that fold rows where they lie (see `scan_agg`): the
/// projected columns of the piece's rows, unfiltered, and which of them pass the scan's row
/// filter (all when `None`).
pub(crate) struct Chunk {
    pub batch: RecordBatch,
    pub selection: Option<Selection>,
}

impl SundialScanExec {
    /// The frames output partition `partition` reads: every `partitions`-th, so that each
    /// partition reads about as many rows (frames are split into equal pieces). Folds whose
    /// answer does not depend on it take pieces as they go instead (see [`Self::chunks`]).
    ///
    /// Kept round-robin, whatever the frames' lengths: DataFusion's final MIN/MAX of floats
    /// merges a NaN partial state by arrival order, so a change in which rows share a
    /// partition can change such an answer (docs/query.md, "Scans at memory speed").
    fn frames_of(&self, data: &ScanData, partition: usize) -> Vec<Frame> {
        data.frames
            .iter()
            .skip(partition)
            .step_by(self.partitions.max(1))
            .cloned()
            .collect()
    }

    /// The snapshot this run reads (none in a plan kept unbound).
    pub(crate) fn snapshot(&self) -> Option<&Arc<Snapshot>> {
        self.data.as_ref().map(|d| &d.snapshot)
    }

    /// The table columns the scan returns, in its output order.
    pub(crate) fn projection(&self) -> &[usize] {
        &self.projection
    }

    /// About how many values this run reads: its rows times the columns it reads (those it
    /// returns and those its row filter tests, at least one); `None` in a plan kept unbound.
    pub(crate) fn values_to_read(&self) -> Option<u64> {
        let data = self.data.as_ref()?;
        let rows: u64 = data.frames.iter().map(Frame::len).sum();
        let filter_only = data.filter.as_ref().map_or(0, |f| {
            f.columns
                .iter()
                .filter(|c| !self.projection.contains(c))
                .count()
        });
        let columns = (self.projection.len() + filter_only).max(1) as u64;
        Some(rows.saturating_mul(columns))
    }

    /// Whether a row filter tests the rows the frames hold (an unbound plan has none).
    pub(crate) fn has_row_filter(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.filter.is_some())
    }

    /// Whether every row the frames hold is returned (unless the row filter fails it): no
    /// limit cuts the scan short.
    pub(crate) fn returns_every_row(&self) -> bool {
        self.limit.is_none()
    }

    /// Output partition `partition`'s rows as chunks of at most `batch_rows` rows, in place of
    /// its batches. With `shared`, the partitions take the pieces of all frames one at a time
    /// (see `claims`), so which partition reads which rows varies from run to run: only for
    /// folds whose answer cannot depend on it. Otherwise (or past the rounds `claims` keeps
    /// open) each reads its own frames.
    pub(crate) fn chunks(
        &self,
        partition: usize,
        batch_rows: u64,
        shared: bool,
    ) -> DfResult<ChunkReader> {
        let Some(data) = &self.data else {
            return Err(DataFusionError::Internal(
                "a scan kept for reuse ran without being bound".into(),
            ));
        };
        let split = move |frame: Frame| zone_pieces(frame, batch_rows);
        let round = shared
            .then(|| {
                data.claims.join(partition, self.partitions, || {
                    data.frames.iter().cloned().flat_map(split).collect()
                })
            })
            .flatten();
        let pieces = match round {
            Some(round) => Pieces::Shared(round),
            None => Pieces::Own(
                self.frames_of(data, partition)
                    .into_iter()
                    .flat_map(split)
                    .collect(),
            ),
        };
        Ok(ChunkReader {
            data: data.clone(),
            projection: self.projection.clone(),
            pieces,
        })
    }
}

/// Where a [`ChunkReader`] takes its pieces from.
enum Pieces {
    /// Its partition's frames, in order.
    Own(std::collections::VecDeque<Frame>),
    /// A round all partitions of the node take from.
    Shared(Arc<Round>),
}

/// One output partition's rows as [`Chunk`]s, read a piece at a time by the operator above.
pub(crate) struct ChunkReader {
    data: ScanData,
    projection: Vec<usize>,
    pieces: Pieces,
}

impl ChunkReader {
    /// Whether a row filter selects among the rows.
    pub(crate) fn is_filtered(&self) -> bool {
        self.data.filter.is_some()
    }

    /// Whether testing a row may fail (`2 / x` of a row where `x` is 0): the filter is an
    /// expression, not a kernel (kernels never fail). A reader that stops before the last
    /// row must then not, or it would answer where reading every row fails.
    pub(crate) fn filter_may_fail(&self) -> bool {
        self.data
            .filter
            .as_ref()
            .is_some_and(|f| f.kernel.is_none())
    }

    /// The next piece to read, if any is left, and its index among the round's pieces when
    /// the partitions share them.
    pub(crate) fn next_piece(&mut self) -> Option<(Option<usize>, Frame)> {
        match &mut self.pieces {
            Pieces::Own(pieces) => pieces.pop_front().map(|piece| (None, piece)),
            Pieces::Shared(round) => round.take().map(|(i, piece)| (Some(i), piece)),
        }
    }

    /// The round this partition shares with the others, if it takes pieces from one.
    pub(crate) fn round(&self) -> Option<&Arc<Round>> {
        match &self.pieces {
            Pieces::Own(_) => None,
            Pieces::Shared(round) => Some(round),
        }
    }

    /// The rows of `piece`: the projected columns and which rows pass the filter.
    pub(crate) fn read(&self, piece: &Frame) -> DfResult<Chunk> {
        let batch = read_rows(&self.data.snapshot, piece, &self.projection)?;
        let selection = match &self.data.filter {
            None => None,
            Some(filter) => {
                let tested = read_rows(&self.data.snapshot, piece, &filter.columns)?;
                Some(filter.select(&tested)?)
            }
        };
        Ok(Chunk { batch, selection })
    }

    /// The zones of output column `column` in `piece`'s partition complete in the snapshot,
    /// from the partition's first (see `Snapshot::zones`).
    pub(crate) fn zones(&self, piece: &Frame, column: usize) -> DfResult<Vec<Option<Zone>>> {
        self.data
            .snapshot
            .zones(piece.partition, self.projection[column])
            .map_err(external)
    }

    /// How many of `piece`'s rows are NULL in output column `column`, from the validity bitmap
    /// alone; `None` for rows an index picked (they would have to be read).
    pub(crate) fn null_count(&self, piece: &Frame, column: usize) -> DfResult<Option<u64>> {
        if piece.picks.is_some() {
            return Ok(None);
        }
        self.data
            .snapshot
            .null_count(piece.partition, self.projection[column], piece.rows.clone())
            .map(Some)
            .map_err(external)
    }
}

/// The columns `columns` of the rows `frame` reads, in table order.
fn read_rows(snapshot: &Snapshot, frame: &Frame, columns: &[usize]) -> DfResult<RecordBatch> {
    match &frame.picks {
        Some(picks) => snapshot.read_batch_picked(frame.partition, columns, picks),
        None => snapshot.read_batch(frame.partition, columns, frame.rows.clone()),
    }
    .map_err(external)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    fn ts(v: i64) -> Expr {
        lit(ScalarValue::TimestampNanosecond(Some(v), None))
    }

    #[test]
    fn bounds_from_comparisons() {
        let f = vec![
            col("ts").gt_eq(ts(10)).and(col("ts").lt(ts(20))),
            ts(12).lt(col("ts")),
        ];
        assert_eq!(
            time_bounds(&f, "ts"),
            TimeBounds {
                lo: Some(13),
                hi: Some(20)
            }
        );
        let f = vec![col("ts").between(ts(5), ts(7))];
        assert_eq!(
            time_bounds(&f, "ts"),
            TimeBounds {
                lo: Some(5),
                hi: Some(8)
            }
        );
        let f = vec![col("other").gt(ts(5)), col("ts").eq(ts(3))];
        assert_eq!(
            time_bounds(&f, "ts"),
            TimeBounds {
                lo: Some(3),
                hi: Some(4)
            }
        );
        assert!(!is_time_filter(&col("ts").not_eq(ts(1)), "ts"));
        assert!(time_bounds(&[col("ts").gt(ts(5)).and(col("ts").lt(ts(3)))], "ts").is_empty());
    }

    #[test]
    fn frames_split_evenly() {
        let f = split_frames(
            vec![
                Frame::range(0, 0..25),
                Frame::range(1, 5..9),
                Frame {
                    partition: 2,
                    rows: 3..40,
                    picks: Some(vec![3, 5, 8, 13, 21, 34, 39].into()),
                },
            ],
            10,
        );
        let sizes: Vec<u64> = f.iter().map(|f| f.rows.end - f.rows.start).collect();
        // 25 rows in the fewest equal pieces of at most 10.
        assert_eq!(sizes, vec![8, 8, 9, 4, 37]);
        let f = split_frames(f, 3);
        let picked: Vec<_> = f[f.len() - 3..]
            .iter()
            .map(|f| (f.rows.clone(), f.picks.as_deref().unwrap().to_vec()))
            .collect();
        assert_eq!(
            picked,
            [
                (3..6, vec![3, 5]),
                (8..14, vec![8, 13]),
                (21..40, vec![21, 34, 39])
            ]
        );
    }

    /// An engine on a fresh database, and the directory to keep while it is used.
    pub(crate) fn engine() -> (crate::Engine, tempfile::TempDir) {
        use sundial_storage::{Database, Durability, StorageOptions};
        let dir = tempfile::tempdir().expect("temp dir");
        let options = StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        };
        let db = Database::open(dir.path(), options).expect("open database");
        (crate::Engine::new(db).expect("engine"), dir)
    }

    /// An engine on a fresh database after running `statements`.
    pub(crate) async fn engine_with(statements: &[&str]) -> (crate::Engine, tempfile::TempDir) {
        let (engine, dir) = engine();
        for sql in statements {
            engine.run(sql).await.expect(sql);
        }
        (engine, dir)
    }

    /// Asserts that `query` (`$t` standing for `table`) answers as DataFusion's general
    /// operators answer it over `(SELECT * FROM table LIMIT 1000000000)`, where no filter
    /// reaches the scan; returns its plan.
    pub(crate) async fn answer_as_general_path(
        engine: &crate::Engine,
        query: &str,
        table: &str,
    ) -> String {
        let above = format!("(SELECT * FROM {table} LIMIT 1000000000) {table}");
        let (plan, got) = plan_and_rows(engine, &query.replace("$t", table)).await;
        let (_, expected) = plan_and_rows(engine, &query.replace("$t", &above)).await;
        assert_eq!(got, expected, "{query}: {plan}");
        plan
    }

    /// The physical plan of `sql`, and its result as text.
    pub(crate) async fn plan_and_rows(engine: &crate::Engine, sql: &str) -> (String, String) {
        use datafusion::arrow::array::AsArray;
        use datafusion::arrow::util::pretty::pretty_format_batches;
        let explained = crate::collect(engine.run(&format!("EXPLAIN {sql}")).await.expect(sql))
            .await
            .expect(sql);
        let mut plan = String::new();
        for batch in &explained.batches {
            let (kinds, texts) = (
                batch.column(0).as_string::<i32>(),
                batch.column(1).as_string::<i32>(),
            );
            for row in 0..batch.num_rows() {
                if kinds.value(row) == "physical_plan" {
                    plan.push_str(texts.value(row));
                }
            }
        }
        let rows = crate::collect(engine.run(sql).await.expect(sql))
            .await
            .expect(sql);
        let rows = pretty_format_batches(&rows.batches)
            .expect("format")
            .to_string();
        (plan, rows)
    }

    #[tokio::test]
    async fn timestamp_order_needs_no_sort_and_descending_reads_backwards() {
        let (engine, _dir) = engine();
        for sql in [
            "CREATE TABLE t (ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY DAY",
            "INSERT INTO t VALUES ('2024-01-01T00:00:00Z', 1), ('2024-01-01T12:00:00Z', 2), \
             ('2024-01-02T00:00:00Z', 3), ('2024-01-03T00:00:00Z', 4)",
        ] {
            engine.run(sql).await.expect(sql);
        }
        let (plan, rows) =
            plan_and_rows(&engine, "SELECT ts, v FROM t ORDER BY ts DESC LIMIT 2").await;
        assert!(
            plan.contains("reverse") && !plan.contains("SortExec"),
            "{plan}"
        );
        assert!(
            rows.contains("2024-01-03T00:00:00 | 4") && rows.contains("2024-01-02T00:00:00 | 3")
        );
        assert!(
            rows.find("| 4").unwrap() < rows.find("| 3").unwrap(),
            "{rows}"
        );

        let (plan, rows) = plan_and_rows(&engine, "SELECT v FROM t ORDER BY ts").await;
        assert!(!plan.contains("SortExec"), "{plan}");
        let order: Vec<_> = ["| 1", "| 2", "| 3", "| 4"]
            .iter()
            .map(|v| rows.find(v).unwrap())
            .collect();
        assert!(order.is_sorted(), "{rows}");

        // A filter that only bounds the timestamp is the scan's; others stay a filter.
        let (plan, rows) = plan_and_rows(
            &engine,
            "SELECT v FROM t WHERE ts >= '2024-01-02T00:00:00Z'",
        )
        .await;
        assert!(!plan.contains("FilterExec"), "{plan}");
        assert!(
            rows.contains("| 3") && rows.contains("| 4") && !rows.contains("| 2"),
            "{rows}"
        );
        let (plan, _) = plan_and_rows(
            &engine,
            "SELECT v FROM t WHERE ts >= '2024-01-02T00:00:00Z' AND v > 3",
        )
        .await;
        assert!(plan.contains("filter=v@0 > 3"), "{plan}");
    }

    /// Filters that bounds and indexes leave are tested by the scan row by row: the same rows
    /// as a FilterExec gives, in the same order, with limits counting passing rows only.
    #[tokio::test]
    async fn row_filters_in_the_scan_match_a_filter_above_it() {
        let (engine, _dir) = engine();
        for sql in [
            "CREATE TABLE t (host SYMBOL INDEX, ts TIMESTAMP, v LONG, n DOUBLE) TIMESTAMP(ts) \
             PARTITION BY HOUR",
            "INSERT INTO t SELECT 'h' || (value % 3), to_timestamp_seconds(1704067200 + value), \
             value, CASE WHEN value % 4 = 0 THEN NULL ELSE value % 10 END \
             FROM generate_series(0, 19999)",
        ] {
            engine.run(sql).await.expect(sql);
        }
        // Below a LIMIT, a filter cannot be pushed into the scan: the reference.
        let above = "(SELECT * FROM t LIMIT 1000000000) t";
        for query in [
            "SELECT * FROM $t WHERE v % 7 = 3 ORDER BY ts",
            "SELECT * FROM $t WHERE v % 7 = 3 AND ts >= '2024-01-01T00:30:00Z' ORDER BY ts",
            "SELECT ts, v FROM $t WHERE host = 'h1' AND v % 5 < 2 ORDER BY ts DESC LIMIT 7",
            "SELECT ts FROM $t WHERE v % 3 = 0 AND ts < '2024-01-01T02:00:00Z' \
             ORDER BY ts DESC LIMIT 5",
            "SELECT count(*), sum(v) FROM $t WHERE v > 100",
            "SELECT count(*) FROM $t WHERE n > 7 OR host = 'h2'",
            "SELECT host, count(*) FROM $t WHERE n IS NULL GROUP BY host ORDER BY host",
            "SELECT count(*) FROM (SELECT v FROM $t WHERE v > 5 AND host IN ('h0') LIMIT 4)",
            "SELECT * FROM $t WHERE v > 20000",
        ] {
            let (plan, got) = plan_and_rows(&engine, &query.replace("$t", "t")).await;
            let (reference_plan, expected) =
                plan_and_rows(&engine, &query.replace("$t", above)).await;
            assert_eq!(got, expected, "{query}: {plan}");
            assert!(
                plan.contains("filter=") && !plan.contains("FilterExec"),
                "{query}: {plan}"
            );
            assert!(reference_plan.contains("FilterExec"), "{reference_plan}");
        }
    }

    /// Zones no row of which can pass are cut from the frames before reading: counts stay
    /// those of DataFusion's general path, and the plan says how many rows were skipped.
    #[tokio::test]
    async fn zone_maps_skip_runs_no_row_of_which_passes() {
        let (engine, _dir) = engine_with(&[
            "CREATE TABLE z (ts TIMESTAMP, v LONG, i INT, s VARCHAR) TIMESTAMP(ts) \
             PARTITION BY DAY",
            "INSERT INTO z SELECT to_timestamp_nanos(1704067200000000000 + value * 1000), \
             value, CAST(value % 7 AS INT), 'r' FROM generate_series(0, 199999)",
        ])
        .await;
        // (filter, rows the zones skip): three complete zones and a partial fourth.
        for (filter, skipped) in [
            ("v > 199990", 3 * 65_536),
            ("v BETWEEN 70000 AND 70010", 2 * 65_536),
            ("v < 65536 OR v >= 131072", 65_536),
            ("v = 3 AND s LIKE 'r%'", 2 * 65_536),
            ("i = 3", 0),
            ("CAST(v AS DOUBLE) > 140000.5", 2 * 65_536),
        ] {
            let query = format!("SELECT count(*), sum(i) FROM $t WHERE {filter}");
            let plan = answer_as_general_path(&engine, &query, "z").await;
            let said = format!("zones_skipped_rows={skipped},");
            if skipped == 0 {
                assert!(!plan.contains("zones_skipped_rows"), "{filter}: {plan}");
            } else {
                assert!(plan.contains(&said), "{filter}: wanted {said} in {plan}");
            }
        }
    }

    /// Scans report exact row counts: a query over a few rows plans in one partition, and a
    /// table's `count(*)` planned with its literals (as EXPLAIN plans) comes from them. A kept
    /// plan's scans report estimates and count by scanning (see `reuse`).
    #[tokio::test]
    async fn small_scans_plan_without_repartitioning() {
        let (engine, _dir) = engine();
        for sql in [
            "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v LONG) TIMESTAMP(ts) PARTITION BY HOUR",
            "INSERT INTO t SELECT to_timestamp_seconds(1704067200 + value), \
             'k' || (value % 3), value FROM generate_series(0, 19999)",
        ] {
            engine.run(sql).await.expect(sql);
        }
        let small = "SELECT ts, k, max(v) AS m FROM t WHERE ts < '2024-01-01T00:10:00Z' \
                     SAMPLE BY 1m ORDER BY ts, k";
        let (plan, rows) = plan_and_rows(&engine, small).await;
        assert!(!plan.contains("RepartitionExec"), "{plan}");
        assert!(
            rows.contains("| 2024-01-01T00:09:00 | k2 | 599 |"),
            "{rows}"
        );
        let (plan, rows) = plan_and_rows(&engine, "SELECT count(*) AS n FROM t").await;
        assert!(!plan.contains("SundialScanExec"), "{plan}");
        assert!(rows.contains("| 20000 |"), "{rows}");
        let (plan, _) = plan_and_rows(&engine, "SELECT k, max(v) FROM t GROUP BY k").await;
        assert!(plan.contains("RepartitionExec"), "{plan}");
    }
}

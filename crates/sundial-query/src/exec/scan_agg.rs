//! Aggregates folded into the scan: `count`, `sum`, `avg`, `min` and `max` over the rows
//! a scan's filter selects, grouped by nothing or by SYMBOL and integer columns, computed by
//! the kernels
//! of `sundial-kernels` where the rows lie: no batch of passing rows is built, no string is
//! hashed.
//!
//! ```text
//!  AggregateExec(Final)                        AggregateExec(Final)
//!    AggregateExec(Partial)            ==>       ScanAggregateExec ── per chunk: selection
//!      SundialScanExec(filter)                     SundialScanExec     (kernel or filter),
//!   (rows filtered, keys hashed as strings)   (read as chunks)       slots from key codes,
//!                                                                    folds into dense states
//! ```
//!
//! Each output partition folds its frames' chunks into states indexed by group slot (the
//! SYMBOL codes of the keys, or integer values numbered as they appear, see `Grouper`) and
//! emits one batch of partial states, exactly as DataFusion's partial aggregate would; the
//! final aggregate above merges the partitions: SYMBOL key columns carry the snapshot's
//! dictionaries, so no string is built per group. `count(DISTINCT
//! sym)` and `SELECT DISTINCT sym` are such groupings with no aggregate (DataFusion plans them
//! as a grouping below the count), so they read only the codes. Anything else (DISTINCT
//! arguments, FILTER, ordered aggregates, other keys or arguments) keeps DataFusion's hash
//! aggregate.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch,
    UInt64Array,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int32Type, SchemaRef};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::execution_plan::{
    Boundedness, EmissionType, ReplaceChildrenOptions,
};
use datafusion::physical_plan::expressions::{CastExpr, Column, Literal};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties,
};
use sundial_kernels::{
    Accumulator, ColumnValues, Domain, Fold, GROUP_KEYS_MAX, GroupKey, Grouper, KeyKind, Slots,
    Zone, domain_of, from_total_key, total_key,
};
use sundial_storage::ZONE_ROWS;

use super::claims::PieceSums;
use super::partial_agg::{final_over, fuse_partial_stage, states_at};
use super::scan::{Chunk, ChunkReader, Frame, SundialScanExec, scan_batch_rows};

/// Chunks read at their ends only (see `ScanAggregateExec::reads_ends_only`) folded between
/// two yields to the runtime: each costs a few reads, and a yield reschedules the task (and
/// may wake another thread to take it), which costs more than the chunk.
const ENDS_ONLY_CHUNKS_PER_YIELD: usize = 64;

/// Replaces partial aggregates over a Sundial scan with [`ScanAggregateExec`] (and
/// single-stage ones with a final aggregate over it).
#[derive(Debug)]
pub(crate) struct FuseScanAggregates;

impl PhysicalOptimizerRule for FuseScanAggregates {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            Ok(match fuse(aggregate)? {
                Some(fused) => Transformed::yes(fused),
                None => Transformed::no(node),
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "sundial_fuse_scan_aggregates"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

fn fuse(aggregate: &AggregateExec) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    fuse_partial_stage(
        aggregate,
        ScanAggregateExec::try_fuse,
        |fused, partial, single| final_over(partial, single, Arc::new(fused)).map(Some),
    )
}

/// One aggregate the exec folds.
#[derive(Debug, Clone)]
struct ScanAggregate {
    name: String,
    fold: Fold,
    /// The scan output column it reads; none for `count(*)`.
    column: Option<usize>,
    /// `avg`: its states are the count and the sum.
    avg: bool,
    /// The partial state's column types, as DataFusion's partial aggregate writes them.
    states: Vec<DataType>,
}

/// The partial aggregate of [`FuseScanAggregates`], folded over its scan's chunks.
#[derive(Debug)]
pub(crate) struct ScanAggregateExec {
    /// The scan read: a [`SundialScanExec`], a child so that kept plans bind it.
    scan: Arc<dyn ExecutionPlan>,
    /// The scan output columns grouped by (SYMBOL and integer columns), in group order.
    keys: Vec<usize>,
    aggregates: Vec<ScanAggregate>,
    /// Group columns, then each aggregate's state columns.
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    /// `zone_rows`: rows whose extremes came from zone maps, not read (EXPLAIN ANALYZE).
    metrics: ExecutionPlanMetricsSet,
}

impl ScanAggregateExec {
    /// Whether the partial states' merged answer is the same however the rows were shared
    /// among the partitions, so that they may take the scan's pieces as they go (see
    /// `SundialScanExec::chunks`): counts, wrapping integer sums and integer extremes are;
    /// ungrouped float sums round by the order they add in, so they are added up per piece
    /// and the pieces in scan order (see `claims`), and DataFusion's final grouped MIN/MAX
    /// of floats merges a NaN state by arrival order (docs/query.md, "Scans at memory
    /// speed").
    fn order_free(&self) -> bool {
        self.aggregates.iter().all(|a| match a.fold {
            Fold::Count | Fold::SumInt | Fold::MinInt | Fold::MaxInt => true,
            Fold::MinFloat | Fold::MaxFloat | Fold::SumFloat => self.keys.is_empty(),
        })
    }

    /// Whether each chunk is folded from its first and last rows alone: ungrouped, unfiltered
    /// counts and extremes of the designated timestamp (see `Folding::timestamp`; counting
    /// every row reads no column), so a frame is one chunk, whatever its rows.
    fn reads_ends_only(&self, scan: &SundialScanExec) -> bool {
        let timestamp = scan.timestamp_output().filter(|_| self.keys.is_empty());
        self.keys.is_empty()
            && !scan.has_row_filter()
            && self.aggregates.iter().all(|a| match a.column {
                None => a.fold == Fold::Count,
                Some(c) => Some(c) == timestamp && matches!(a.fold, Fold::MinInt | Fold::MaxInt),
            })
    }

    /// About how many values this run reads (see [`SundialScanExec::values_to_read`]): one
    /// per frame when only the ends of each are read; `None` in a plan kept unbound.
    pub(crate) fn values_to_read(&self) -> Option<u64> {
        let scan = self.scan.downcast_ref::<SundialScanExec>()?;
        scan.snapshot()?;
        if self.reads_ends_only(scan) {
            return Some(scan.frames().len() as u64);
        }
        scan.values_to_read()
    }

    /// The fused form of `partial`, if it reads a whole scan, groups by SYMBOL and integer
    /// columns only, and computes only aggregates the kernels fold.
    fn try_fuse(partial: &AggregateExec) -> DfResult<Option<Self>> {
        let group_by = partial.group_expr();
        if !group_by.is_single() || partial.filter_expr().iter().any(Option::is_some) {
            return Ok(None);
        }
        let input = scan_under(partial.input());
        let Some(scan) = input.downcast_ref::<SundialScanExec>() else {
            return Ok(None);
        };
        if !scan.returns_every_row() {
            return Ok(None);
        }
        let input_schema = input.schema();
        let mut keys = Vec::new();
        for (expr, _) in group_by.expr() {
            let Some(c) = expr.downcast_ref::<Column>() else {
                return Ok(None);
            };
            let key_type = input_schema.field(c.index()).data_type();
            let symbol = matches!(key_type,
                DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8);
            let integer = matches!(
                key_type,
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
            );
            if !symbol && !integer {
                return Ok(None);
            }
            keys.push(c.index());
        }
        if keys.len() > GROUP_KEYS_MAX {
            return Ok(None);
        }
        let schema = partial.schema();
        let mut state_at = keys.len();
        let mut aggregates = Vec::new();
        for expr in partial.aggr_expr() {
            if expr.is_distinct() || !expr.order_bys().is_empty() {
                return Ok(None);
            }
            let args = expr.expressions();
            let [arg] = args.as_slice() else {
                return Ok(None);
            };
            let Some(aggregate) = aggregate_of(expr.fun().name(), arg, &input_schema)? else {
                return Ok(None);
            };
            let aggregate = ScanAggregate {
                name: expr.name().to_string(),
                ..aggregate
            };
            let Some(next) = states_at(&schema, state_at, &aggregate.states) else {
                return Ok(None);
            };
            state_at = next;
            aggregates.push(aggregate);
        }
        if state_at != schema.fields().len() {
            return Ok(None);
        }
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            input.output_partitioning().clone(),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Ok(Some(ScanAggregateExec {
            scan: input.clone(),
            keys,
            aggregates,
            schema,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }
}

/// `input`, or the scan under it when it only spreads a one-partition scan's batches over the
/// cores (DataFusion's round-robin repartition over a scan of at most a batch): the fold
/// reads the scan's chunks itself, in that one partition, as cheaply as a repartition hands
/// out batches, and without the tasks and channels a repartition sets up.
fn scan_under(input: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
    if let Some(repartition) = input.downcast_ref::<RepartitionExec>()
        && matches!(repartition.partitioning(), Partitioning::RoundRobinBatch(_))
        && repartition
            .input()
            .downcast_ref::<SundialScanExec>()
            .is_some()
        && repartition.input().output_partitioning().partition_count() == 1
    {
        return repartition.input();
    }
    input
}

/// The fold of aggregate `name` over `arg`, if the kernels compute it: the argument must be a
/// column (or a widening cast of one) of a type they read; `count(*)` is `count` of a constant.
fn aggregate_of(
    name: &str,
    arg: &Arc<dyn PhysicalExpr>,
    input: &SchemaRef,
) -> DfResult<Option<ScanAggregate>> {
    let aggregate = |fold, column, avg, states| {
        Some(ScanAggregate {
            name: String::new(),
            fold,
            column,
            avg,
            states,
        })
    };
    if name == "count"
        && let Some(literal) = arg.downcast_ref::<Literal>()
    {
        if literal.value().is_null() {
            return Ok(None);
        }
        return Ok(aggregate(Fold::Count, None, false, vec![DataType::Int64]));
    }
    let (column, arg_type) = if let Some(c) = arg.downcast_ref::<Column>() {
        (c.index(), input.field(c.index()).data_type().clone())
    } else if let Some(cast) = arg.downcast_ref::<CastExpr>() {
        let Some(c) = cast.expr().downcast_ref::<Column>() else {
            return Ok(None);
        };
        let from = input.field(c.index()).data_type();
        let to = cast.cast_type();
        let widening = match to {
            DataType::Float64 => from.is_integer() || from.is_floating(),
            DataType::Int64 => from.is_integer(),
            _ => false,
        };
        if !widening || matches!(from, DataType::Dictionary(..)) {
            return Ok(None);
        }
        (c.index(), to.clone())
    } else {
        return Ok(None);
    };
    let source = input.field(column).data_type();
    if name == "count" {
        // Counting reads only which rows are NULL: any type the kernels read.
        let readable = domain_of(source).is_some() || source == &DataType::Boolean;
        return Ok(readable
            .then(|| aggregate(Fold::Count, Some(column), false, vec![DataType::Int64]))
            .flatten());
    }
    let Some(domain) = domain_of(&arg_type) else {
        return Ok(None);
    };
    if matches!(arg_type, DataType::Dictionary(..)) || domain_of(source).is_none() {
        return Ok(None);
    }
    let float = domain == sundial_kernels::Domain::Float;
    Ok(match (name, &arg_type) {
        ("sum", DataType::Int64) => {
            aggregate(Fold::SumInt, Some(column), false, vec![DataType::Int64])
        }
        ("sum", DataType::Float64) => {
            aggregate(Fold::SumFloat, Some(column), false, vec![DataType::Float64])
        }
        ("avg", DataType::Float64) => aggregate(
            Fold::SumFloat,
            Some(column),
            true,
            vec![DataType::UInt64, DataType::Float64],
        ),
        ("min", _) => aggregate(
            if float { Fold::MinFloat } else { Fold::MinInt },
            Some(column),
            false,
            vec![arg_type.clone()],
        ),
        ("max", _) => aggregate(
            if float { Fold::MaxFloat } else { Fold::MaxInt },
            Some(column),
            false,
            vec![arg_type.clone()],
        ),
        _ => None,
    })
}

impl DisplayAs for ScanAggregateExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names: Vec<&str> = self.aggregates.iter().map(|a| a.name.as_str()).collect();
        write!(
            f,
            "ScanAggregateExec: keys={:?}, aggr=[{}]",
            self.keys,
            names.join(", ")
        )
    }
}

impl ExecutionPlan for ScanAggregateExec {
    fn name(&self) -> &'static str {
        "ScanAggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.scan]
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
        let scan = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("ScanAggregateExec has a child".into()))?;
        Ok(Arc::new(ScanAggregateExec {
            scan,
            keys: self.keys.clone(),
            aggregates: self.aggregates.clone(),
            schema: self.schema.clone(),
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
        let Some(scan) = self.scan.downcast_ref::<SundialScanExec>() else {
            return Err(DataFusionError::Internal(
                "ScanAggregateExec reads a Sundial scan".into(),
            ));
        };
        let batch_rows = scan_batch_rows(context.session_config().batch_size());
        // Chunks of several batches: per-chunk costs (reading the mapped columns, a
        // selection) spread over more rows, while a chunk's selection stays in cache. A
        // grouping without aggregates (DISTINCT) reads one batch at a time: it may stop as
        // soon as it has met every symbol.
        let snapshot = scan.snapshot().cloned().ok_or_else(|| {
            DataFusionError::Internal("a scan kept for reuse ran without being bound".into())
        })?;
        // The dictionary of each SYMBOL key (`None` for integer keys).
        let dictionaries: Vec<Option<ArrayRef>> = self
            .keys
            .iter()
            .map(|&k| {
                let table_column = scan.projection()[k];
                Ok(match scan.schema().field(k).data_type() {
                    DataType::Dictionary(..) => Some(
                        snapshot
                            .symbols(table_column)
                            .cloned()
                            .map(|d| d as ArrayRef)
                            .ok_or_else(|| {
                                DataFusionError::Internal(format!(
                                    "no dictionary for column {table_column}"
                                ))
                            })?,
                    ),
                    _ => None,
                })
            })
            .collect::<DfResult<_>>()?;
        let kinds: Vec<KeyKind> = dictionaries
            .iter()
            .map(|d| match d {
                Some(d) => KeyKind::Symbol {
                    symbols: u32::try_from(d.len()).unwrap_or(u32::MAX),
                },
                None => KeyKind::Int,
            })
            .collect();
        let distinct_only =
            self.aggregates.is_empty() && matches!(kinds.as_slice(), [KeyKind::Symbol { .. }]);
        let chunk_rows = if distinct_only {
            batch_rows
        } else {
            batch_rows * 4
        };
        let timestamp = scan.timestamp_output().filter(|_| self.keys.is_empty());
        let ends_only = self.reads_ends_only(scan);
        let chunk_rows = if ends_only { u64::MAX / 2 } else { chunk_rows };
        // Chunks folded between yields to the runtime: a chunk of rows takes tens of
        // microseconds or more; a chunk read at its ends only, well under one.
        let chunks_per_yield = if ends_only {
            ENDS_ONLY_CHUNKS_PER_YIELD
        } else {
            1
        };
        let chunks = scan.chunks(partition, chunk_rows, self.order_free())?;
        // Sharing pieces, float sums are kept per piece (see `Folding::piece_sums`).
        let sum_floats: Vec<usize> = (0..self.aggregates.len())
            .filter(|&a| self.aggregates[a].fold == Fold::SumFloat)
            .collect();
        let piece_sums = (chunks.round().is_some() && !sum_floats.is_empty()).then(Vec::new);
        let reservation = MemoryConsumer::new(format!("ScanAggregateExec[{partition}]"))
            .register(context.memory_pool());
        let mut folding = Folding {
            reservation,
            grouper: (!self.keys.is_empty()).then(|| Grouper::new(&kinds)),
            rows: Accumulator::new(Fold::Count),
            accumulators: self
                .aggregates
                .iter()
                .map(|a| Accumulator::new(a.fold))
                .collect(),
            keys: self.keys.clone(),
            aggregates: self.aggregates.clone(),
            dictionaries,
            schema: self.schema.clone(),
            distinct_only,
            every_symbol_seen: false,
            zone_rows: MetricBuilder::new(&self.metrics).counter("zone_rows", partition),
            sum_floats,
            piece_sums,
            timestamp,
        };
        let mut folded = 0usize;
        let stream = futures::stream::unfold(Some(chunks), move |open| {
            let result = open.map(|mut chunks| match folding.step(&mut chunks) {
                Ok(true) => (None, Some(chunks)),
                Ok(false) => (Some(folding.finish(&chunks)), None),
                Err(e) => (Some(Err(e)), None),
            });
            folded += 1;
            let yields = folded.is_multiple_of(chunks_per_yield);
            async move {
                let (item, rest) = result?;
                // A few chunks per poll, yielding between them, so a long scan can be
                // cancelled.
                if item.is_none() && yields {
                    tokio::task::yield_now().await;
                }
                Some((item, rest))
            }
        });
        let stream = futures::StreamExt::filter_map(stream, |item| async move { item });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }
}

/// Folds into `accumulator` (an ungrouped `min` or `max`) the extremes of the whole zones of
/// `piece` (rows of a partition, all of them counting) that `zones` (the partition's) tell
/// exactly, and returns the runs of the piece's rows, from its first, still to be read: rows
/// outside whole zones and zones whose entry is missing or inexact. A zone's extreme is
/// exact for integers; for floating-point values unless it is a NaN (the entry keeps no
/// payload), or a zero in an entry that does not say which zeros the zone holds.
fn fold_zones(
    accumulator: &mut Accumulator,
    zones: &[Option<Zone>],
    piece: &Frame,
    zone_rows: &Count,
) -> Vec<Range<usize>> {
    let min = matches!(accumulator.fold(), Fold::MinInt | Fold::MinFloat);
    let float = matches!(accumulator.fold(), Fold::MinFloat | Fold::MaxFloat);
    let (first, end) = (piece.rows.start, piece.rows.end);
    let mut reads: Vec<Range<usize>> = Vec::new();
    let mut read = |rows: Range<u64>| {
        let rows = (rows.start - first) as usize..(rows.end - first) as usize;
        match reads.last_mut() {
            Some(last) if last.end == rows.start => last.end = rows.end,
            _ if rows.is_empty() => {}
            _ => reads.push(rows),
        }
    };
    let mut at = first;
    for z in first.div_ceil(ZONE_ROWS)..end / ZONE_ROWS {
        let rows = z * ZONE_ROWS..(z + 1) * ZONE_ROWS;
        let exact = zones.get(z as usize).copied().flatten().and_then(|zone| {
            let count = u64::from(zone.rows.saturating_sub(zone.nulls));
            if !zone.has_values() {
                return Some((0, 0));
            }
            let key = if min { zone.min } else { zone.max };
            let expected = if float { Domain::Float } else { Domain::Int };
            if zone.domain != expected {
                return None;
            }
            if !float {
                return Some((key, count));
            }
            let x = from_total_key(key);
            if x.is_nan() {
                return None;
            }
            if x != 0.0 {
                return Some((key, count));
            }
            // A zero extreme: the zero the total order prefers (-0.0 for MIN) if the zone
            // holds one, else the other, when the zone says which it holds.
            let zeros = zone.zeros?;
            let preferred = if min { zeros.negative } else { zeros.positive };
            let zero = if preferred == min { -0.0 } else { 0.0 };
            Some((total_key(zero), count))
        });
        if let Some((key, count)) = exact {
            read(at..rows.start);
            accumulator.add_extreme(key, count);
            zone_rows.add(ZONE_ROWS as usize);
            at = rows.end;
        }
    }
    read(at..end);
    reads
}

/// A column's values as the kernels read them.
fn column_values(array: &ArrayRef) -> DfResult<ColumnValues<'_>> {
    ColumnValues::of(array.as_ref()).ok_or_else(|| {
        DataFusionError::Internal(format!(
            "ScanAggregateExec cannot read a {} column",
            array.data_type()
        ))
    })
}

/// One output partition's fold: states per group slot.
struct Folding {
    /// The states' memory, counted against the query's memory limit.
    reservation: MemoryReservation,
    grouper: Option<Grouper>,
    /// Passing rows per slot: which slots hold a group.
    rows: Accumulator,
    accumulators: Vec<Accumulator>,
    keys: Vec<usize>,
    aggregates: Vec<ScanAggregate>,
    /// The dictionary of each SYMBOL key, `None` for integer keys.
    dictionaries: Vec<Option<ArrayRef>>,
    schema: SchemaRef,
    /// A grouping by one SYMBOL key without aggregates (DISTINCT).
    distinct_only: bool,
    /// A grouping by one SYMBOL key without aggregates has met every symbol of the dictionary:
    /// only NULL can still add a group.
    every_symbol_seen: bool,
    /// Rows whose extremes came from zone maps.
    zone_rows: Count,
    /// The aggregates that are float sums.
    sum_floats: Vec<usize>,
    /// Taking pieces from a round shared with the other partitions (ungrouped): the float
    /// sums of each piece read (by its index in the round), handed in to the round at the
    /// end so that the last partition adds up every piece in scan order.
    piece_sums: Option<Vec<(usize, PieceSums)>>,
    /// Ungrouped, the output column of the designated timestamp, if the scan returns it:
    /// a chunk's rows ascend by it (and it is never NULL), so its `min` is its first passing
    /// row and its `max` its last, read alone.
    timestamp: Option<usize>,
}

/// Symbols past which a grouping without aggregates does not check whether it has met them
/// all (the check costs a pass over the groups per chunk).
const SEEN_CHECK_SYMBOLS_MAX: usize = 1 << 16;

impl Folding {
    /// Folds the next chunk of `chunks`; `false` when there is nothing left to fold.
    ///
    /// `count(DISTINCT sym)` and `SELECT DISTINCT sym` (a grouping by one key with no
    /// aggregate) stop reading once every symbol has a group: the rest of the rows can only
    /// add NULL, which the validity bitmaps tell without reading the codes when no filter
    /// applies. A filter that may fail on a row (an expression, not a kernel) reads every
    /// row, so that the answer fails where the general path's does.
    fn step(&mut self, chunks: &mut ChunkReader) -> DfResult<bool> {
        let Some((index, piece)) = chunks.next_piece() else {
            return Ok(false);
        };
        let symbols = self
            .dictionaries
            .first()
            .and_then(Option::as_ref)
            .map_or(0, |d| d.len());
        if self.every_symbol_seen {
            let null_slot = symbols;
            if self.rows.count(null_slot) > 0 {
                return Ok(false);
            }
            if !chunks.is_filtered()
                && let Some(nulls) = chunks.null_count(&piece, self.keys[0])?
            {
                self.rows.add_count(null_slot, nulls);
                return Ok(true);
            }
        }
        if self.piece_sums.is_some() {
            for &a in &self.sum_floats {
                self.accumulators[a].ensure(1);
                self.accumulators[a].reset_slot(0);
            }
        }
        self.consume(chunks.read(&piece)?, &piece, chunks)?;
        if let (Some(piece_sums), Some(index)) = (&mut self.piece_sums, index) {
            let sums: PieceSums = self
                .sum_floats
                .iter()
                .map(|&a| (self.accumulators[a].float(0), self.accumulators[a].count(0)))
                .collect();
            if sums.iter().any(|&(_, n)| n > 0) {
                piece_sums.push((index, sums));
            }
        }
        if self.distinct_only
            && !self.every_symbol_seen
            && symbols <= SEEN_CHECK_SYMBOLS_MAX
            && !chunks.filter_may_fail()
        {
            self.every_symbol_seen = (0..symbols).all(|code| self.rows.count(code) > 0);
        }
        Ok(true)
    }

    fn consume(&mut self, chunk: Chunk, piece: &Frame, chunks: &ChunkReader) -> DfResult<()> {
        let len = chunk.batch.num_rows();
        let selection = chunk.selection.as_ref();
        if selection.is_some_and(|s| s.none_pass()) || len == 0 {
            return Ok(());
        }
        let column = |i: usize| column_values(chunk.batch.column(i));
        let (slots, slot_count) = match &mut self.grouper {
            None => (Slots::One, 1),
            Some(grouper) => {
                let keys = self
                    .keys
                    .iter()
                    .map(|&k| column(k))
                    .collect::<DfResult<Vec<_>>>()?;
                grouper.assign(&keys, selection, len);
                let count = grouper.slot_count();
                (Slots::PerRow(grouper.slots()), count)
            }
        };
        self.rows.ensure(slot_count);
        self.rows.update(None, selection, slots, len);
        // Ungrouped extremes of every row of whole zones come from the zones' maps.
        let from_zones =
            matches!(slots, Slots::One) && selection.is_none() && piece.picks.is_none();
        for (aggregate, accumulator) in self.aggregates.iter().zip(&mut self.accumulators) {
            accumulator.ensure(slot_count);
            if let (Some(c), Some(ts)) = (aggregate.column, self.timestamp)
                && c == ts
                && matches!(aggregate.fold, Fold::MinInt | Fold::MaxInt)
            {
                let (first, last) = match selection {
                    None => (Some(0), Some(len - 1)),
                    Some(s) => (s.first_one(), s.last_one()),
                };
                let row = if aggregate.fold == Fold::MinInt {
                    first
                } else {
                    last
                };
                if let Some(row) = row {
                    let one = chunk.batch.column(c).slice(row, 1);
                    accumulator.update(Some(&column_values(&one)?), None, Slots::One, 1);
                }
                continue;
            }
            if from_zones
                && let Some(c) = aggregate.column
                && matches!(
                    aggregate.fold,
                    Fold::MinInt | Fold::MaxInt | Fold::MinFloat | Fold::MaxFloat
                )
            {
                let zones = chunks.zones(piece, c)?;
                let array = chunk.batch.column(c);
                for read in fold_zones(accumulator, &zones, piece, &self.zone_rows) {
                    let sliced = array.slice(read.start, read.len());
                    let values = column_values(&sliced)?;
                    accumulator.update(Some(&values), None, Slots::One, read.len());
                }
                continue;
            }
            let values = aggregate.column.map(column).transpose()?;
            accumulator.update(values.as_ref(), selection, slots, len);
        }
        let bytes = self.rows.bytes()
            + self.grouper.as_ref().map_or(0, Grouper::bytes)
            + self
                .accumulators
                .iter()
                .map(Accumulator::bytes)
                .sum::<usize>();
        self.reservation.try_resize(bytes)
    }

    /// The partial states of every group that holds a row (ungrouped: the one row). Float
    /// sums kept per piece are handed in to the round: the last partition's states hold
    /// every piece's, added up in scan order, and the others' none.
    fn finish(&mut self, chunks: &ChunkReader) -> DfResult<RecordBatch> {
        if let Some(mine) = self.piece_sums.take() {
            let round = chunks.round().ok_or_else(|| {
                DataFusionError::Internal("float sums kept per piece without a round".into())
            })?;
            let every_piece = round.hand_in_sums(mine);
            for (k, &a) in self.sum_floats.iter().enumerate() {
                let accumulator = &mut self.accumulators[a];
                accumulator.ensure(1);
                accumulator.reset_slot(0);
                for sums in every_piece.iter().flatten() {
                    let (sum, count) = sums[k];
                    if count > 0 {
                        accumulator.add_float_sum(0, sum, count);
                    }
                }
            }
        }
        let emitted: Vec<usize> = match &self.grouper {
            None => vec![0],
            Some(grouper) => (0..grouper.slot_count())
                .filter(|&s| self.rows.count(s) > 0)
                .collect(),
        };
        self.rows.ensure(1);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        if let Some(grouper) = &self.grouper {
            let keys: Vec<Vec<GroupKey>> = emitted.iter().map(|&s| grouper.keys(s)).collect();
            for (k, dictionary) in self.dictionaries.iter().enumerate() {
                let code = |key: &GroupKey| match key {
                    GroupKey::Code(c) => *c,
                    GroupKey::Int(_) => None,
                };
                let int = |key: &GroupKey| match key {
                    GroupKey::Int(v) => *v,
                    GroupKey::Code(_) => None,
                };
                columns.push(match dictionary {
                    Some(dictionary) => {
                        let codes = Int32Array::from_iter(keys.iter().map(|g| code(&g[k])));
                        Arc::new(DictionaryArray::<Int32Type>::try_new(
                            codes,
                            dictionary.clone(),
                        )?)
                    }
                    // Cast to the key's type below, as every column is.
                    None => Arc::new(Int64Array::from_iter(keys.iter().map(|g| int(&g[k])))),
                });
            }
        }
        for (aggregate, accumulator) in self.aggregates.iter().zip(&mut self.accumulators) {
            accumulator.ensure(1);
            let valid = |s: usize| accumulator.count(s) > 0;
            match aggregate.fold {
                Fold::Count => columns.push(Arc::new(Int64Array::from_iter_values(
                    emitted.iter().map(|&s| accumulator.count(s) as i64),
                ))),
                Fold::SumInt | Fold::MinInt | Fold::MaxInt => {
                    let values = Int64Array::from_iter(
                        emitted
                            .iter()
                            .map(|&s| valid(s).then(|| accumulator.int(s))),
                    );
                    columns.push(cast(&values, &aggregate.states[0])?);
                }
                Fold::SumFloat | Fold::MinFloat | Fold::MaxFloat => {
                    if aggregate.avg {
                        // A group without values has NULL states, as DataFusion's: a count of
                        // 0 would mark it seen, and its average NaN.
                        columns.push(Arc::new(UInt64Array::from_iter(
                            emitted
                                .iter()
                                .map(|&s| valid(s).then(|| accumulator.count(s))),
                        )));
                    }
                    let values = Float64Array::from_iter(
                        emitted
                            .iter()
                            .map(|&s| valid(s).then(|| accumulator.float(s))),
                    );
                    let state = aggregate.states.last().expect("a state");
                    columns.push(cast(&values, state)?);
                }
            }
        }
        let mut out = Vec::with_capacity(columns.len());
        for (array, field) in columns.into_iter().zip(self.schema.fields()) {
            out.push(if array.data_type() == field.data_type() {
                array
            } else {
                cast(&array, field.data_type())?
            });
        }
        Ok(RecordBatch::try_new(self.schema.clone(), out)?)
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::scan::tests::{answer_as_general_path, engine, engine_with, plan_and_rows};

    /// A DISTINCT that has met every symbol and NULL stops reading, unless its filter may
    /// fail on a later row: then it reads on and fails as the general path does.
    #[tokio::test]
    async fn distinct_reads_every_row_when_its_filter_may_fail() {
        let (engine, _dir) = engine_with(&[
            "CREATE TABLE d (ts TIMESTAMP, s SYMBOL, x INT) TIMESTAMP(ts) PARTITION BY HOUR",
            "INSERT INTO d SELECT to_timestamp_seconds(1704067200 + value), \
             CASE value % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' END, \
             CASE WHEN value = 29999 THEN 0 ELSE 1 END FROM generate_series(0, 29999)",
        ])
        .await;
        let sql = "SELECT DISTINCT s FROM d WHERE 2 / x < 3";
        let explained = crate::collect(engine.run(&format!("EXPLAIN {sql}")).await.unwrap())
            .await
            .unwrap();
        let plan = datafusion::arrow::util::pretty::pretty_format_batches(&explained.batches)
            .unwrap()
            .to_string();
        assert!(plan.contains("ScanAggregateExec"), "{plan}");
        let failed = match engine.run(sql).await {
            Ok(stream) => crate::collect(stream).await.is_err(),
            Err(_) => true,
        };
        assert!(
            failed,
            "{sql} answered, though its last row divides by zero"
        );
        // A kernel filter cannot fail: the scan may stop once it has met every value.
        let (_, rows) =
            plan_and_rows(&engine, "SELECT DISTINCT s FROM d WHERE x > 0 ORDER BY s").await;
        assert_eq!(rows.lines().count(), 7, "{rows}");
    }

    /// Ungrouped float sums share the scan's pieces (partitions take them as they go) and
    /// answer the same every run, however the pieces fell: each piece's sum is handed in,
    /// and the last partition adds them up in scan order. The values cancel in large steps,
    /// so that adding the pieces in another order rounds differently, and runs overlap, so
    /// that the pieces fall differently.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shared_float_sums_add_up_in_scan_order() {
        let (engine, _dir) = engine_with(&[
            "CREATE TABLE f (ts TIMESTAMP, v DOUBLE, i INT) TIMESTAMP(ts) PARTITION BY HOUR",
            "INSERT INTO f SELECT to_timestamp_seconds(1704067200 + value / 20), \
             CASE WHEN value % 40000 = 0 THEN 1e17 * (1 - 2 * (value / 40000 % 2)) \
             ELSE (value % 13) * 0.001 END, \
             CAST(value AS INT) FROM generate_series(0, 399999)",
            "SET datafusion.execution.target_partitions = 3",
        ])
        .await;
        let engine = std::sync::Arc::new(engine);
        for sql in [
            "SELECT sum(v), avg(v), count(*), max(i) FROM f",
            "SELECT sum(v), min(v) FROM f WHERE i > 1000",
        ] {
            let (plan, first) = plan_and_rows(&engine, sql).await;
            assert!(plan.contains("ScanAggregateExec"), "{sql}: {plan}");
            for _ in 0..10 {
                let runs: Vec<_> = (0..3)
                    .map(|_| {
                        let engine = engine.clone();
                        tokio::spawn(async move { plan_and_rows(&engine, sql).await.1 })
                    })
                    .collect();
                for run in runs {
                    assert_eq!(run.await.unwrap(), first, "{sql}");
                }
            }
        }
    }

    /// The designated timestamp's `min` and `max` are a chunk's first and last passing rows,
    /// with the general path's answers: whole, filtered, through an index, none passing.
    #[tokio::test]
    async fn timestamp_extremes_are_the_first_and_last_passing_rows() {
        let (engine, _dir) = engine_with(&[
            "CREATE TABLE m (ts TIMESTAMP, s SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY HOUR",
            "INSERT INTO m SELECT to_timestamp_seconds(1704067200 + value / 3), \
             's' || (value % 97), (value * 7919) % 10007 FROM generate_series(0, 299999)",
        ])
        .await;
        for query in [
            "SELECT min(ts), max(ts), count(*) FROM $t",
            "SELECT max(ts), min(ts) FROM $t WHERE v > 9000",
            "SELECT min(ts), max(ts) FROM $t WHERE v > 10006.5",
            "SELECT max(ts) FROM $t WHERE s = 's5'",
            "SELECT min(ts), max(v) FROM $t WHERE s IN ('s1', 's90') AND v < 100",
            "SELECT min(ts), max(ts) FROM $t WHERE ts >= '2024-01-01T10:00:00' AND v < 5000",
        ] {
            let plan = answer_as_general_path(&engine, query, "m").await;
            assert!(plan.contains("ScanAggregateExec"), "{query}: {plan}");
        }
    }

    /// A scan of one partition's rows, at most a batch, which DataFusion spreads over the
    /// cores with a round-robin repartition, is folded directly, with the general path's
    /// answers.
    #[tokio::test]
    async fn a_one_partition_scan_under_a_round_robin_is_folded() {
        let (engine, _dir) = engine_with(&[
            "CREATE TABLE o (ts TIMESTAMP, x DOUBLE, n LONG) TIMESTAMP(ts) PARTITION BY DAY",
            "INSERT INTO o SELECT to_timestamp_seconds(1704067200 + value), value * 0.5, value \
             FROM generate_series(0, 39999)",
        ])
        .await;
        for query in [
            "SELECT count(*), avg(x) FROM $t WHERE n > 100",
            "SELECT sum(n), max(x), min(n) FROM $t WHERE x < 7000",
        ] {
            let plan = answer_as_general_path(&engine, query, "o").await;
            assert!(
                plan.contains("ScanAggregateExec") && !plan.contains("RoundRobinBatch"),
                "{query}: {plan}"
            );
        }
    }

    /// Integer keys (alone, beside SYMBOL keys, small, large, negative and NULL) fold in the
    /// scan, with the answers of DataFusion's hash aggregate.
    #[tokio::test]
    async fn integer_keys_fold_in_the_scan() {
        let (engine, _dir) = engine_with(&[
            "CREATE TABLE g (ts TIMESTAMP, s SYMBOL, b BYTE, i INT, l LONG, v DOUBLE) \
             TIMESTAMP(ts) PARTITION BY DAY",
            "INSERT INTO g SELECT to_timestamp_seconds(1704067200 + value * 7), 's' || (value % 5), \
             CAST(value % 200 - 100 AS TINYINT), CASE WHEN value % 11 = 0 THEN NULL \
             ELSE CAST(value % 13 AS INT) END, (value % 17) * 1000000000000 - 7, value \
             FROM generate_series(0, 49999)",
        ])
        .await;
        for query in [
            "SELECT i, count(*), sum(v), min(v) FROM $t GROUP BY i ORDER BY i",
            "SELECT b, max(v) FROM $t WHERE v > 100 GROUP BY b ORDER BY b",
            "SELECT l, s, avg(v) FROM $t GROUP BY l, s ORDER BY l, s",
            "SELECT s, i, b, count(*) FROM $t WHERE i <> 3 GROUP BY s, i, b ORDER BY s, i, b",
            "SELECT count(DISTINCT l) FROM $t",
            "SELECT DISTINCT i FROM $t ORDER BY i",
        ] {
            let plan = answer_as_general_path(&engine, query, "g").await;
            assert!(plan.contains("ScanAggregateExec"), "{query}: {plan}");
        }
    }

    /// Groups past the query's memory limit end the query with a clear error, not the process:
    /// every group's states are counted as the scan folds.
    #[tokio::test]
    async fn groups_beyond_the_memory_limit_fail_cleanly() {
        let (mut engine, _dir) = engine();
        for sql in [
            "CREATE TABLE g (ts TIMESTAMP, a SYMBOL, b SYMBOL, c SYMBOL, v DOUBLE) TIMESTAMP(ts) \
             PARTITION BY DAY",
            "INSERT INTO g SELECT to_timestamp_seconds(1704067200 + value), 'a' || (value % 997), \
             'b' || (value % 991), 'c' || (value % 983), value FROM generate_series(0, 199999)",
        ] {
            engine.run(sql).await.expect(sql);
        }
        // Symbol keys, and an integer key whose values are all distinct (its value codes
        // count too).
        let sql = "SELECT a, b, c, sum(v), max(v), count(*) FROM g GROUP BY a, b, c";
        let (plan, _) = plan_and_rows(&engine, &format!("{sql} LIMIT 1")).await;
        assert!(plan.contains("ScanAggregateExec"), "{plan}");
        engine
            .run("CREATE TABLE gi AS (SELECT ts, CAST(v AS BIGINT) AS k, v FROM g)")
            .await
            .expect("create gi");
        let int_sql = "SELECT k, sum(v), max(v), count(*) FROM gi GROUP BY k";
        let (plan, _) = plan_and_rows(&engine, &format!("{int_sql} LIMIT 1")).await;
        assert!(plan.contains("ScanAggregateExec"), "{plan}");
        engine.set_query_memory_bytes_max(4 << 20);
        for sql in [sql, int_sql] {
            let output = engine.run(sql).await.expect("planned");
            let error = crate::collect(output).await.expect_err("over the limit");
            assert!(
                error.to_string().contains("more memory than it may use"),
                "{sql}: {error}"
            );
            assert_eq!(error.sqlstate(), "53200", "{sql}: {error}");
        }
    }
}

//! The time join's merge. The right side is read whole and held as its input's batches (a
//! scan's arrays map the table's files, so nothing is copied), with each row's timestamp and
//! key number (`join_keys`); the left side streams past it. A cursor walks the right rows in
//! timestamp order, remembering for each key the newest row it has passed, so each left row
//! finds its match in O(1) after the cursor catches up with its timestamp: O(left + right)
//! overall, both sides read once. The matched right rows are gathered from the held batches
//! per left batch.
//!
//! The left side is read first, up to [`LEFT_BUFFER_ROWS_MAX`] rows. When that is all of it,
//! the right side is narrowed (`narrow`) to the rows those left rows can match: no later
//! than the newest left row, no older than the tolerance allows, and holding keys the left
//! rows hold. A few left rows then cost a few right keys' rows, not the right table; an empty
//! left side reads no right row.
//!
//! SPLICE JOIN reads the left side whole too, and `splice_join` pairs the rows of both.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, Int64Array, RecordBatch,
    UInt32Array, new_null_array,
};
use datafusion::arrow::buffer::ScalarBuffer;
use datafusion::arrow::compute::kernels::boolean::not;
use datafusion::arrow::compute::kernels::nullif::nullif;
use datafusion::arrow::compute::{SortOptions, interleave};
use datafusion::arrow::compute::{cast, concat_batches, take};
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef, TimeUnit};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{HashSet, ScalarValue};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::{
    EquivalenceProperties, LexRequirement, OrderingRequirements, PhysicalExpr, PhysicalSortExpr,
    PhysicalSortRequirement,
};
use datafusion::physical_plan::execution_plan::{
    Boundedness, EmissionType, ReplaceChildrenOptions,
};
use datafusion::physical_plan::expressions::Column;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use sundial_sql::names::TimeJoinKind;

use super::join_keys::{DictionaryCache, KeyNumbers};
use super::scan::Narrowing;
use super::splice_join;

/// The two sides of the join.
#[derive(Debug, Clone)]
pub(crate) struct Inputs {
    pub left: Arc<dyn ExecutionPlan>,
    pub right: Arc<dyn ExecutionPlan>,
}

/// Which right row a left row takes.
#[derive(Debug)]
pub(crate) struct Match {
    /// Equal keys: an expression over the left input and one over the right.
    pub keys: Vec<(Arc<dyn PhysicalExpr>, Arc<dyn PhysicalExpr>)>,
    pub left_time: Arc<dyn PhysicalExpr>,
    pub right_time: Arc<dyn PhysicalExpr>,
    pub kind: TimeJoinKind,
    pub tolerance_ns: Option<i64>,
}

/// Rows a join holds at most, both sides together.
const NO_ROW: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) struct AsofJoinExec {
    inputs: Inputs,
    matching: Arc<Match>,
    schema: SchemaRef,
    clause: &'static str,
    properties: Arc<PlanProperties>,
}

impl AsofJoinExec {
    pub(crate) fn try_new(
        inputs: Inputs,
        matching: Match,
        schema: SchemaRef,
        clause: &'static str,
    ) -> DfResult<Self> {
        for (side, expr, input) in [
            ("left", &matching.left_time, &inputs.left),
            ("right", &matching.right_time, &inputs.right),
        ] {
            let data_type = expr.data_type(&input.schema())?;
            if !matches!(data_type, DataType::Timestamp(..)) {
                return Err(DataFusionError::Plan(format!(
                    "{clause}: the {side} side's designated timestamp is {data_type}, not a \
                     timestamp"
                )));
            }
        }
        let mut equivalences = EquivalenceProperties::new(schema.clone());
        // Left rows keep their order, and left columns their positions; a SPLICE JOIN's rows
        // interleave both sides.
        let splice = matching.kind == TimeJoinKind::Splice;
        if let Some(c) = matching.left_time.downcast_ref::<Column>()
            && !splice
        {
            let column = Column::new(c.name(), c.index());
            equivalences.add_ordering([PhysicalSortExpr::new(Arc::new(column), ascending())]);
        }
        let properties = Arc::new(PlanProperties::new(
            equivalences,
            Partitioning::UnknownPartitioning(1),
            if splice {
                EmissionType::Final
            } else {
                EmissionType::Incremental
            },
            Boundedness::Bounded,
        ));
        Ok(AsofJoinExec {
            inputs,
            matching: Arc::new(matching),
            schema,
            clause,
            properties,
        })
    }
}

fn ascending() -> SortOptions {
    SortOptions {
        descending: false,
        nulls_first: false,
    }
}

impl DisplayAs for AsofJoinExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let m = &self.matching;
        let times = (&m.left_time, &m.right_time);
        describe(f, "AsofJoinExec", times, &m.keys, m.kind, m.tolerance_ns)
    }
}

impl ExecutionPlan for AsofJoinExec {
    fn name(&self) -> &'static str {
        "AsofJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::SinglePartition, Distribution::SinglePartition]
    }

    fn required_input_ordering(&self) -> Vec<Option<OrderingRequirements>> {
        let by_time = |e: &Arc<dyn PhysicalExpr>| {
            LexRequirement::new([PhysicalSortRequirement::new(e.clone(), Some(ascending()))])
                .map(OrderingRequirements::new)
        };
        vec![
            by_time(&self.matching.left_time),
            by_time(&self.matching.right_time),
        ]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![self.matching.kind != TimeJoinKind::Splice, false]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.inputs.left, &self.inputs.right]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        let m = &self.matching;
        let exprs = [&m.left_time, &m.right_time]
            .into_iter()
            .chain(m.keys.iter().flat_map(|(l, r)| [l, r]));
        super::visit_each(exprs, f)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let [left, right]: [Arc<dyn ExecutionPlan>; 2] = children
            .try_into()
            .map_err(|_| DataFusionError::Internal("AsofJoinExec has two children".into()))?;
        Ok(Arc::new(AsofJoinExec {
            inputs: Inputs { left, right },
            matching: self.matching.clone(),
            schema: self.schema.clone(),
            clause: self.clause,
            properties: self.properties.clone(),
        }))
    }

    with_new_children_recomputing!();

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "AsofJoinExec has one partition, asked for {partition}"
            )));
        }
        let left = self.inputs.left.execute(0, context.clone())?;
        let reservation = MemoryConsumer::new("AsofJoinExec").register(context.memory_pool());
        let matching = self.matching.clone();
        let schema = self.schema.clone();
        let clause = self.clause;
        if matching.kind == TimeJoinKind::Splice {
            let right = self.inputs.right.execute(0, context.clone())?;
            let batch_rows = context.session_config().batch_size().max(1);
            let joined = futures::stream::once(async move {
                let right = RightSide::read(right, &matching, reservation, clause).await?;
                splice(left, right, &matching, schema, clause, batch_rows).await
            })
            .try_flatten();
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                self.schema.clone(),
                joined,
            )));
        }
        let right_plan = self.inputs.right.clone();
        let left_reservation =
            MemoryConsumer::new("AsofJoinExec left").register(context.memory_pool());
        let joined = futures::stream::once(async move {
            let left = LeftStart::read(left, left_reservation).await?;
            let right_plan = match &left.rest {
                // Every left row is known: the right side need hold only rows they can match.
                None if left.rows == 0 => return Ok(futures::stream::empty().boxed()),
                None => narrowed_right(&right_plan, &left.batches, &matching)?,
                Some(_) => right_plan,
            };
            let right = right_plan.execute(0, context)?;
            let right = RightSide::read(right, &matching, reservation, clause).await?;
            let mut merge = Merge::new(right, matching, schema, clause);
            let joined = left.stream().map(move |batch| merge.join(&batch?));
            Ok::<_, DataFusionError>(joined.boxed())
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            joined,
        )))
    }
}

/// Left rows a join buffers before it reads the right side: when the whole left side fits,
/// the right side is narrowed to the rows its keys and times can match.
const LEFT_BUFFER_ROWS_MAX: usize = 1 << 18;

/// Rows of a right batch below which it is gathered with the batches beside it into one of
/// at least this many rows before it is held.
const HELD_BATCH_ROWS: usize = 4096;

/// Distinct left keys past which the right side is not narrowed by key: a list of most of
/// the right side's keys costs a test per right row and keeps nearly all of them.
const NARROWING_KEYS_MAX: usize = 64;

/// The left side's first batches, up to [`LEFT_BUFFER_ROWS_MAX`] rows, and its rest.
struct LeftStart {
    batches: Vec<RecordBatch>,
    rows: usize,
    /// The batches after them; `None` when `batches` hold every left row.
    rest: Option<SendableRecordBatchStream>,
    _reservation: MemoryReservation,
}

impl LeftStart {
    async fn read(
        mut stream: SendableRecordBatchStream,
        reservation: MemoryReservation,
    ) -> DfResult<Self> {
        let mut batches = Vec::new();
        let mut rows = 0usize;
        while rows <= LEFT_BUFFER_ROWS_MAX {
            let Some(batch) = stream.next().await else {
                return Ok(LeftStart {
                    batches,
                    rows,
                    rest: None,
                    _reservation: reservation,
                });
            };
            let batch = batch?;
            // A memory pool that refuses the buffer ends it: the join then merges as it would
            // a long left side, streaming the rest.
            let refused = reservation.try_grow(batch.get_array_memory_size()).is_err();
            rows += batch.num_rows();
            batches.push(batch);
            if refused {
                break;
            }
        }
        Ok(LeftStart {
            batches,
            rows,
            rest: Some(stream),
            _reservation: reservation,
        })
    }

    /// Every left batch, the buffered ones first (their memory is held until they are
    /// passed on).
    fn stream(self) -> futures::stream::BoxStream<'static, DfResult<RecordBatch>> {
        let LeftStart {
            batches,
            rest,
            _reservation,
            ..
        } = self;
        let buffered = futures::stream::iter(batches.into_iter().map(move |b| {
            _reservation.shrink(b.get_array_memory_size().min(_reservation.size()));
            Ok(b)
        }));
        match rest {
            Some(rest) => buffered.chain(rest).boxed(),
            None => buffered.boxed(),
        }
    }
}

/// The right plan narrowed to the rows that `left` (every left row) can match: times up to
/// the newest left row's (within the tolerance of the oldest), and, for each key compared
/// as a plain column, the values left rows hold. The plan as it is when it cannot be
/// narrowed.
fn narrowed_right(
    right: &Arc<dyn ExecutionPlan>,
    left: &[RecordBatch],
    matching: &Match,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    let mut conditions = Vec::new();
    if let Some(time) = matching.right_time.downcast_ref::<Column>() {
        let mut range: Option<(i64, i64)> = None;
        for batch in left {
            let times = nanos(
                &matching
                    .left_time
                    .evaluate(batch)?
                    .into_array(batch.num_rows())?,
            )?;
            let min = datafusion::arrow::compute::min(&times);
            let max = datafusion::arrow::compute::max(&times);
            if let (Some(min), Some(max)) = (min, max) {
                range = Some(range.map_or((min, max), |(lo, hi)| (lo.min(min), hi.max(max))));
            }
        }
        // No left row has a time, so none matches: the right side needs no row.
        let (oldest, newest) = range.unwrap_or((i64::MIN, i64::MIN));
        let op = match matching.kind {
            TimeJoinKind::Lt => Operator::Lt,
            _ => Operator::LtEq,
        };
        conditions.push((time.index(), Narrowing::Time { op, ns: newest }));
        if let Some(tolerance) = matching.tolerance_ns {
            let ns = oldest.saturating_sub(tolerance);
            conditions.push((
                time.index(),
                Narrowing::Time {
                    op: Operator::GtEq,
                    ns,
                },
            ));
        }
    }
    let right_schema = right.schema();
    for (l, r) in &matching.keys {
        let Some(column) = r.downcast_ref::<Column>() else {
            continue;
        };
        let right_type = r.data_type(&right_schema)?;
        if let Some(values) = distinct_values(l, left, &right_type)? {
            conditions.push((column.index(), Narrowing::OneOf(values)));
        }
    }
    Ok(super::narrow::narrowed(right, &conditions)?.unwrap_or_else(|| right.clone()))
}

/// The distinct values of `expr` over `batches`, cast to `to`; `None` if one is NULL (a NULL
/// key matches a NULL key, which no list can name) or there are more than
/// [`NARROWING_KEYS_MAX`].
fn distinct_values(
    expr: &Arc<dyn PhysicalExpr>,
    batches: &[RecordBatch],
    to: &DataType,
) -> DfResult<Option<Vec<ScalarValue>>> {
    let converter = RowConverter::new(vec![SortField::new(to.clone())])?;
    let mut seen: HashSet<Box<[u8]>> = HashSet::new();
    let mut values = Vec::new();
    for batch in batches {
        let array = evaluate(std::iter::once(expr), batch, std::slice::from_ref(to))?
            .pop()
            .ok_or_else(|| DataFusionError::Internal("a key evaluated to nothing".into()))?;
        if array.null_count() > 0 {
            return Ok(None);
        }
        let rows = converter.convert_columns(std::slice::from_ref(&array))?;
        for (i, row) in rows.iter().enumerate() {
            if seen.contains(row.as_ref()) {
                continue;
            }
            if seen.len() == NARROWING_KEYS_MAX {
                return Ok(None);
            }
            seen.insert(row.as_ref().into());
            values.push(ScalarValue::try_from_array(&array, i)?);
        }
    }
    Ok(Some(values))
}

/// SPLICE JOIN: reads the left side whole too, pairs the rows of both sides
/// (`splice_join::pairs`) and yields them in batches of `batch_rows`.
async fn splice(
    mut left: SendableRecordBatchStream,
    mut right: RightSide,
    matching: &Match,
    schema: SchemaRef,
    clause: &'static str,
    batch_rows: usize,
) -> DfResult<impl futures::Stream<Item = DfResult<RecordBatch>> + use<>> {
    let left_schema = left.schema();
    let mut batches = Vec::new();
    let mut rows = 0usize;
    while let Some(batch) = left.next().await {
        let batch = batch?;
        right._reservation.try_grow(batch.get_array_memory_size())?;
        rows += batch.num_rows();
        batches.push(batch);
    }
    if rows.saturating_add(right.rows) >= NO_ROW as usize {
        return Err(DataFusionError::ResourcesExhausted(format!(
            "{clause}: the two sides have {rows} and {} rows, more than the {NO_ROW} a join \
             holds",
            right.rows
        )));
    }
    let left_batch = concat_batches(&left_schema, &batches)?;
    drop(batches);
    let n = left_batch.num_rows();
    let times = nanos(&matching.left_time.evaluate(&left_batch)?.into_array(n)?)?;
    let left_times: Vec<i64> = times.iter().map(|t| t.unwrap_or(i64::MAX)).collect();
    if left_times.windows(2).any(|w| w[0] > w[1]) {
        return Err(DataFusionError::Internal(format!(
            "{clause}: left rows are out of timestamp order"
        )));
    }
    let left_keys = right.key_numbers_of(matching, &left_batch, &mut Default::default())?;
    let key_count = right.key_count();
    let right_batch = concat_batches(&right.schema, &right.batches)?;
    let right_times: Vec<i64> = right.times.iter().flat_map(|t| t.iter().copied()).collect();
    let right_keys: Option<Vec<u32>> = right
        .numbers
        .as_ref()
        .map(|_| right.key_numbers.iter().flatten().copied().collect());
    drop(right.batches);
    let (left_rows, right_rows) = splice_join::pairs(
        splice_join::Side {
            times: &left_times,
            keys: left_keys.as_deref(),
        },
        splice_join::Side {
            times: &right_times,
            keys: right_keys.as_deref(),
        },
        key_count,
    );
    let total = left_rows.len();
    let batches = (0..total).step_by(batch_rows).map(move |start| {
        let end = (start + batch_rows).min(total);
        let pick = |rows: &[Option<u32>], side: &RecordBatch| -> DfResult<Vec<ArrayRef>> {
            let indices = UInt32Array::from(rows[start..end].to_vec());
            side.columns()
                .iter()
                .map(|c| {
                    if side.num_rows() == 0 {
                        Ok(new_null_array(c.data_type(), end - start))
                    } else {
                        Ok(take(c.as_ref(), &indices, None)?)
                    }
                })
                .collect()
        };
        let mut columns = pick(&left_rows, &left_batch)?;
        columns.extend(pick(&right_rows, &right_batch)?);
        Ok(RecordBatch::try_new(schema.clone(), columns)?)
    });
    Ok(futures::stream::iter(batches))
}

/// The right side, whole, as its input's batches (a scan's map the table's files, so holding
/// them copies nothing): each batch's timestamps and key numbers beside it.
struct RightSide {
    schema: SchemaRef,
    /// The non-empty batches, in timestamp order.
    batches: Vec<RecordBatch>,
    rows: usize,
    /// Per batch, nanoseconds; NULL timestamps (which never match) count as the latest
    /// possible.
    times: Vec<ScalarBuffer<i64>>,
    /// Per batch, each row's key number (never `NO_KEY`: every right key is numbered);
    /// empty when the join has no keys.
    key_numbers: Vec<Vec<u32>>,
    /// `None` when the join has no keys.
    numbers: Option<KeyNumbers>,
    /// Holds the memory of `batches` for as long as the join runs.
    _reservation: MemoryReservation,
}

impl RightSide {
    async fn read(
        mut stream: SendableRecordBatchStream,
        matching: &Match,
        reservation: MemoryReservation,
        clause: &str,
    ) -> DfResult<Self> {
        let mut side = RightSide {
            schema: stream.schema(),
            batches: Vec::new(),
            rows: 0,
            times: Vec::new(),
            key_numbers: Vec::new(),
            numbers: None,
            _reservation: reservation,
        };
        let mut cache = DictionaryCache::default();
        // Small batches (a selective filter's) are gathered into batches of at least
        // HELD_BATCH_ROWS rows, so that the batches held, which each left batch's gather
        // visits, stay few; large ones (a scan's, over the mapped files) are held as they are.
        let mut pending: Vec<RecordBatch> = Vec::new();
        let mut pending_rows = 0usize;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let n = batch.num_rows();
            if n == 0 {
                continue;
            }
            side._reservation.try_grow(batch.get_array_memory_size())?;
            if side.rows + pending_rows + n >= NO_ROW as usize {
                return Err(DataFusionError::ResourcesExhausted(format!(
                    "{clause}: the right side has more than the {NO_ROW} rows a join holds"
                )));
            }
            if n >= HELD_BATCH_ROWS {
                side.hold_pending(&mut pending, matching, &mut cache, clause)?;
                pending_rows = 0;
                side.hold(batch, matching, &mut cache, clause)?;
                continue;
            }
            pending_rows += n;
            pending.push(batch);
            if pending_rows >= HELD_BATCH_ROWS {
                side.hold_pending(&mut pending, matching, &mut cache, clause)?;
                pending_rows = 0;
            }
        }
        side.hold_pending(&mut pending, matching, &mut cache, clause)?;
        if !matching.keys.is_empty() && side.numbers.is_none() {
            // No right row: the right keys' types are those of the expressions.
            let schema = side.schema.clone();
            let types = matching
                .keys
                .iter()
                .map(|(_, r)| r.data_type(&schema))
                .collect::<DfResult<Vec<_>>>()?;
            side.numbers = Some(KeyNumbers::new(types)?);
        }
        Ok(side)
    }

    /// Holds `pending`, concatenated into one batch, if it holds any.
    fn hold_pending(
        &mut self,
        pending: &mut Vec<RecordBatch>,
        matching: &Match,
        cache: &mut DictionaryCache,
        clause: &str,
    ) -> DfResult<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let batch = concat_batches(&self.schema, pending.iter())?;
        pending.clear();
        self.hold(batch, matching, cache, clause)
    }

    /// Holds `batch`, a non-empty batch of the right side's next rows, with its rows'
    /// timestamps and key numbers.
    fn hold(
        &mut self,
        batch: RecordBatch,
        matching: &Match,
        cache: &mut DictionaryCache,
        clause: &str,
    ) -> DfResult<()> {
        let n = batch.num_rows();
        let times = nanos(&matching.right_time.evaluate(&batch)?.into_array(n)?)?;
        let times = match times.null_count() {
            0 => times.values().clone(),
            _ => times.iter().map(|t| t.unwrap_or(i64::MAX)).collect(),
        };
        let last = self.times.last().and_then(|t| t.last().copied());
        let descending = match last.is_some_and(|last| last > times[0]) {
            true => Some(self.rows.wrapping_sub(1)),
            false => times
                .windows(2)
                .position(|w| w[0] > w[1])
                .map(|w| self.rows + w),
        };
        if let Some(w) = descending {
            return Err(DataFusionError::Internal(format!(
                "{clause}: right rows {w} and {} are out of timestamp order",
                w.wrapping_add(1)
            )));
        }
        if !matching.keys.is_empty() {
            let keys = evaluate(
                matching.keys.iter().map(|(_, r)| r),
                &batch,
                self.numbers.as_ref().map_or(&[], |k| k.types()),
            )?;
            let numbers = match &mut self.numbers {
                Some(numbers) => numbers,
                none => none.insert(KeyNumbers::new(
                    keys.iter().map(|k| k.data_type().clone()).collect(),
                )?),
            };
            self.key_numbers
                .push(numbers.number(&keys, n, true, cache)?);
        }
        self.rows += n;
        self.times.push(times);
        self.batches.push(batch);
        Ok(())
    }

    /// The key number of each row of `batch`, a batch of the left side (`NO_KEY` for keys
    /// no right row has), or `None` when the join has no keys.
    fn key_numbers_of(
        &mut self,
        matching: &Match,
        batch: &RecordBatch,
        cache: &mut DictionaryCache,
    ) -> DfResult<Option<Vec<u32>>> {
        let Some(numbers) = &mut self.numbers else {
            return Ok(None);
        };
        let keys = evaluate(matching.keys.iter().map(|(l, _)| l), batch, numbers.types())?;
        Ok(Some(numbers.number(
            &keys,
            batch.num_rows(),
            false,
            cache,
        )?))
    }

    fn key_count(&self) -> usize {
        self.numbers.as_ref().map_or(1, KeyNumbers::count)
    }
}

/// A right row: its batch and its row in the batch.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RightRow {
    batch: u32,
    row: u32,
}

/// `latest` entry of a key no right row has been passed for yet.
const NO_RIGHT_ROW: RightRow = RightRow {
    batch: NO_ROW,
    row: NO_ROW,
};

/// The merge's state between left batches.
struct Merge {
    right: RightSide,
    matching: Arc<Match>,
    schema: SchemaRef,
    clause: &'static str,
    /// Right rows before this one have been passed.
    cursor: RightRow,
    /// Per key number, the newest right row passed, or [`NO_RIGHT_ROW`].
    latest: Vec<RightRow>,
    /// The last left timestamp seen: left rows must not go back in time.
    last_left: i64,
    /// The numbers of the left side's SYMBOL key values.
    left_dictionary: DictionaryCache,
}

impl Merge {
    fn new(
        right: RightSide,
        matching: Arc<Match>,
        schema: SchemaRef,
        clause: &'static str,
    ) -> Self {
        let latest = vec![NO_RIGHT_ROW; right.key_count()];
        Merge {
            right,
            matching,
            schema,
            clause,
            cursor: RightRow { batch: 0, row: 0 },
            latest,
            last_left: i64::MIN,
            left_dictionary: DictionaryCache::default(),
        }
    }

    fn join(&mut self, left: &RecordBatch) -> DfResult<RecordBatch> {
        let n = left.num_rows();
        let times = nanos(&self.matching.left_time.evaluate(left)?.into_array(n)?)?;
        let keys = self
            .right
            .key_numbers_of(&self.matching, left, &mut self.left_dictionary)?;
        // Rows with no match take the first right row, and are made NULL after.
        let mut picks = Vec::with_capacity(n);
        let mut matched = BooleanBufferBuilder::new(n);
        for i in 0..n {
            let pick = match times.is_valid(i) {
                true => {
                    let t = times.value(i);
                    if t < self.last_left {
                        return Err(DataFusionError::Internal(format!(
                            "{}: left rows are out of timestamp order",
                            self.clause
                        )));
                    }
                    self.last_left = t;
                    self.advance(t);
                    let key = keys.as_ref().map_or(0, |k| k[i]);
                    self.pick(key, t)
                }
                false => None,
            };
            matched.append(pick.is_some());
            let at = pick.unwrap_or(RightRow { batch: 0, row: 0 });
            picks.push((at.batch as usize, at.row as usize));
        }
        let matched = BooleanArray::new(matched.finish(), None);
        let mut columns = left.columns().to_vec();
        for (c, field) in self.right.schema.fields().iter().enumerate() {
            if self.right.batches.is_empty() {
                columns.push(new_null_array(field.data_type(), n));
                continue;
            }
            let arrays: Vec<&dyn Array> = self
                .right
                .batches
                .iter()
                .map(|b| b.column(c).as_ref())
                .collect();
            let picked = interleave(&arrays, &picks)?;
            columns.push(match matched.true_count() == n {
                true => picked,
                false => nullif(&picked, &not(&matched)?)?,
            });
        }
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    /// Passes the right rows a left row at `t` may match.
    fn advance(&mut self, t: i64) {
        let strict = self.matching.kind == TimeJoinKind::Lt;
        let right = &self.right;
        while let Some(times) = right.times.get(self.cursor.batch as usize) {
            let keys = right.key_numbers.get(self.cursor.batch as usize);
            let mut row = self.cursor.row as usize;
            while row < times.len() {
                let rt = times[row];
                if rt > t || (strict && rt == t) {
                    self.cursor.row = row as u32;
                    return;
                }
                let key = keys.map_or(0, |k| k[row]);
                self.latest[key as usize] = RightRow {
                    batch: self.cursor.batch,
                    row: row as u32,
                };
                row += 1;
            }
            self.cursor = RightRow {
                batch: self.cursor.batch + 1,
                row: 0,
            };
        }
    }

    /// The right row matching a left row at `t` with key number `key`.
    fn pick(&self, key: u32, t: i64) -> Option<RightRow> {
        let row = *self.latest.get(key as usize)?;
        if row == NO_RIGHT_ROW {
            return None;
        }
        match self.matching.tolerance_ns {
            Some(ns)
                if t.saturating_sub(self.right.times[row.batch as usize][row.row as usize])
                    > ns =>
            {
                None
            }
            _ => Some(row),
        }
    }
}

/// Evaluates key expressions over `batch`, each cast to its entry of `types` if there is one.
fn evaluate<'a>(
    exprs: impl Iterator<Item = &'a Arc<dyn PhysicalExpr>>,
    batch: &RecordBatch,
    types: &[DataType],
) -> DfResult<Vec<ArrayRef>> {
    exprs
        .enumerate()
        .map(|(i, e)| {
            let array = e.evaluate(batch)?.into_array(batch.num_rows())?;
            match types.get(i) {
                Some(t) if t != array.data_type() => Ok(cast(&array, t)?),
                _ => Ok(array),
            }
        })
        .collect()
}

/// A timestamp array as nanoseconds since the epoch.
fn nanos(array: &ArrayRef) -> DfResult<Int64Array> {
    let ns = cast(array, &DataType::Timestamp(TimeUnit::Nanosecond, None))?;
    Ok(cast(&ns, &DataType::Int64)?
        .as_primitive::<Int64Type>()
        .clone())
}

/// `name: l.ts >= r.ts, l.k = r.k, tolerance=...ns`, for EXPLAIN (`splice` for a SPLICE
/// JOIN, whose rows of each side match older rows of the other).
pub(crate) fn describe<T: fmt::Display>(
    f: &mut fmt::Formatter,
    name: &str,
    (left_time, right_time): (&T, &T),
    keys: &[(T, T)],
    kind: TimeJoinKind,
    tolerance_ns: Option<i64>,
) -> fmt::Result {
    match kind {
        TimeJoinKind::Asof => write!(f, "{name}: {left_time} >= {right_time}")?,
        TimeJoinKind::Lt => write!(f, "{name}: {left_time} > {right_time}")?,
        TimeJoinKind::Splice => write!(f, "{name}: splice {left_time}, {right_time}")?,
    }
    for (l, r) in keys {
        write!(f, ", {l} = {r}")?;
    }
    if let Some(ns) = tolerance_ns {
        write!(f, ", tolerance={ns}ns")?;
    }
    Ok(())
}

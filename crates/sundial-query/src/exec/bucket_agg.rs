//! Bucketed aggregation fused onto the scan: `SAMPLE BY` (`timestamp_floor`), `date_trunc`
//! and `time_bucket` (`date_bin`) groups computed as the rows stream past in timestamp order,
//! without a hash table.
//!
//! ```text
//!  AggregateExec(Final)                       AggregateExec(Final)
//!    AggregateExec(Partial)          ==>        BucketAggregateExec  ── one bucket open at a
//!      [FilterExec] SundialScanExec               [FilterExec] SundialScanExec  time; SYMBOL
//!   (hash of bucket and keys per row)          (rows in timestamp order)        keys index slots
//! ```
//!
//! Rows arrive in timestamp order, so a bucket's rows are consecutive: the exec keeps the
//! aggregate states of the open bucket only, one slot per SYMBOL code of the key (or a single
//! slot without one), updates them over runs of rows with the same bucket, and emits the
//! bucket's partial states, exactly as DataFusion's partial aggregate would, when the next
//! bucket starts. The final aggregate above merges them as before. Rows out of order only cost
//! extra partial rows (the final aggregate merges equal groups), never wrong results.
//!
//! A stride of fixed length (`timestamp_floor` by seconds to weeks, no time zone; `date_trunc`
//! to microseconds up to days) and the
//! timestamp as an integer divided by constants (`cast(ts AS long) / 3600000000`) compute one
//! bucket per run, the run ending where a timestamp leaves it; other buckets are evaluated per
//! row. Sums, minima and maxima fold each run with the scan kernels of `sundial-kernels`
//! (vectorised, NULL-aware, a slot per key code), merged into the bucket's states when it
//! closes; counts read only validity bitmaps.
//!
//! Fused: `count`, `sum`, `avg`, `min`, `max` over DOUBLE, LONG, INT and TIMESTAMP
//! arguments, and `first_value`/`last_value` (QuestDB's `first`, `last`) of any argument
//! ordered by the input's time column (each group's first or last row as the rows arrive),
//! grouped by the bucket and up to three SYMBOL columns. Several keys combine into
//! one slot number (each key a digit: its code + 1, NULL 0), up to 2¹⁶ combinations; they
//! always emit partial states (a dictionary that grows between batches renumbers the slots,
//! closing the open bucket early). Anything else (DISTINCT, FILTER, ordered aggregates, other
//! keys) keeps DataFusion's hash aggregate.
//!
//! A grouping by at most one key expecting at most [`SERIAL_ROWS_PER_GROUP_MAX`] rows per
//! group reads its input in one partition and emits final values, in place of the partial
//! states of each partition and the final aggregate merging them (`serial_final`).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, DictionaryArray, Int32Array, Int64Builder, RecordBatch,
};
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int32Type, SchemaRef, TimestampNanosecondType};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::{
    EquivalenceProperties, PhysicalExpr, PhysicalSortExpr, ScalarFunctionExpr,
};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::execution_plan::{
    Boundedness, ChildrenPropertiesMode, EmissionType, ReplaceChildrenOptions,
};
use datafusion::physical_plan::expressions::{Column, Literal};
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
};
use futures::StreamExt;

use super::bucket_fn::{FixedBucket, date_trunc_step, time_quotient};
use super::bucket_states::{Accumulator, Aggregate, Argument, Emit, Kind, Op, Order, as_i64};
use super::partial_agg::{final_over, fuse_partial_stage, states_at};
use super::scan::{Frame, SundialScanExec};

/// Replaces partial aggregates over time buckets with [`BucketAggregateExec`] (and single-stage
/// ones with a final aggregate over it).
#[derive(Debug)]
pub(crate) struct FuseBucketAggregates;

impl PhysicalOptimizerRule for FuseBucketAggregates {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let fused = plan.transform_up(|node| {
            if let Some(sort) = node.downcast_ref::<SortExec>() {
                return Ok(match sorted_already(sort)? {
                    Some(input) => Transformed::yes(input),
                    None => Transformed::no(node),
                });
            }
            let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            Ok(match fuse(aggregate)? {
                Some(fused) => Transformed::yes(fused),
                None => Transformed::no(node),
            })
        })?;
        serial_finals(fused.data, true)
    }

    fn name(&self) -> &str {
        "sundial_fuse_bucket_aggregates"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The input of a sort that has nothing left to do: its one input partition (or each, when
/// it keeps partitions) already comes in the sort's order, as a single-stage
/// [`BucketAggregateExec`]'s buckets do; and it keeps every row.
fn sorted_already(sort: &SortExec) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    let input = sort.input();
    let one_stream =
        sort.preserve_partitioning() || input.output_partitioning().partition_count() == 1;
    let satisfied = sort.fetch().is_none()
        && one_stream
        && input
            .equivalence_properties()
            .ordering_satisfy(sort.expr().clone())?;
    Ok(satisfied.then(|| input.clone()))
}

fn fuse(aggregate: &AggregateExec) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    fuse_partial_stage(
        aggregate,
        BucketAggregateExec::try_fuse,
        |fused, partial, single| {
            // Several keys renumber their slots when a dictionary grows, closing the open
            // bucket early: only partial states may come out twice for one bucket.
            if fused.bucket_order().is_some() && fused.keys.len() <= 1 {
                return Ok(fused.into_single(single).map(|e| Arc::new(e) as _));
            }
            // Buckets may close out of order: a final aggregate merges the partial states.
            final_over(partial, single, Arc::new(fused)).map(Some)
        },
    )
}

/// Rows per expected group at or under which a final aggregate over a fused bucket
/// aggregate's partial states becomes the fused aggregate over its input in one partition,
/// emitting final values: with so few rows per group, merging the partitions' states (a hash
/// aggregate of about as many rows as groups from each, and the sort a SAMPLE BY adds) costs
/// more than folding the rows on one core. Measured on TSBS's iot data (two cores): 9 rows
/// per group (a truck's 10-minute buckets) 824 to 392 ms in one partition; 54 (hourly buckets
/// of a filter passing a fifth of the rows) 36 to 55-68 ms, so the rows are counted before
/// the filter and the bound is well below that.
const SERIAL_ROWS_PER_GROUP_MAX: u64 = 16;

/// `plan` with every final aggregate [`serial_final`] replaces replaced, where each node above
/// it takes its input in any number of partitions (`free` says so of the nodes above `plan`).
fn serial_finals(plan: Arc<dyn ExecutionPlan>, free: bool) -> DfResult<Arc<dyn ExecutionPlan>> {
    if free
        && let Some(aggregate) = plan.downcast_ref::<AggregateExec>()
        && let Some(serial) = serial_final(aggregate)?
    {
        return Ok(serial);
    }
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() {
        return Ok(plan);
    }
    let free = free && takes_any_partitioning(&plan);
    let mut changed = false;
    let mut rewritten = Vec::with_capacity(children.len());
    for child in children {
        let new = serial_finals(child.clone(), free)?;
        changed |= !Arc::ptr_eq(&new, &child);
        rewritten.push(new);
    }
    if !changed {
        return Ok(plan);
    }
    plan.replace_children(
        rewritten,
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
    )
}

/// Whether `plan` answers the same whatever the number of its input's partitions.
fn takes_any_partitioning(plan: &Arc<dyn ExecutionPlan>) -> bool {
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    use datafusion::physical_plan::filter::FilterExec;
    use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
    use datafusion::physical_plan::projection::ProjectionExec;
    use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
    plan.downcast_ref::<ProjectionExec>().is_some()
        || plan.downcast_ref::<FilterExec>().is_some()
        || plan.downcast_ref::<SortExec>().is_some()
        || plan.downcast_ref::<SortPreservingMergeExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some()
        || plan.downcast_ref::<GlobalLimitExec>().is_some()
        || plan.downcast_ref::<LocalLimitExec>().is_some()
}

/// A final aggregate over the partial states of a [`BucketAggregateExec`] expecting at most
/// [`SERIAL_ROWS_PER_GROUP_MAX`] rows per group, as the fused aggregate over its input read
/// in one partition (`in_order::serial`), emitting final values in bucket order.
fn serial_final(aggregate: &AggregateExec) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    use datafusion::physical_plan::Partitioning;
    use datafusion::physical_plan::aggregates::AggregateMode;
    use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
    use datafusion::physical_plan::repartition::RepartitionExec;
    let final_stage = matches!(
        aggregate.mode(),
        AggregateMode::Final | AggregateMode::FinalPartitioned
    );
    if !final_stage || aggregate.limit_options().is_some() {
        return Ok(None);
    }
    let mut below = aggregate.input();
    while below.downcast_ref::<RepartitionExec>().is_some()
        || below.downcast_ref::<CoalescePartitionsExec>().is_some()
    {
        let [child] = below.children()[..] else {
            return Ok(None);
        };
        below = child;
    }
    let Some(partial) = below.downcast_ref::<BucketAggregateExec>() else {
        return Ok(None);
    };
    let parallel = partial.input.output_partitioning().partition_count() > 1;
    if partial.emit != Emit::States || partial.keys.len() > 1 || !parallel {
        return Ok(None);
    }
    let (Some(options), Some((rows, groups))) = (partial.bucket_order(), partial.expected_groups())
    else {
        return Ok(None);
    };
    if rows > groups.saturating_mul(SERIAL_ROWS_PER_GROUP_MAX) {
        return Ok(None);
    }
    let schema = aggregate.schema();
    if schema.fields().len() != aggregate.group_expr().expr().len() + partial.aggregates.len() {
        return Ok(None);
    }
    let Some(input) = super::in_order::serial(&partial.input)? else {
        return Ok(None);
    };
    let at = partial.bucket.1;
    let bucket = Column::new(schema.field(at).name(), at);
    let mut equivalences = EquivalenceProperties::new(schema.clone());
    equivalences.add_ordering([PhysicalSortExpr::new(Arc::new(bucket), options)]);
    let properties = PlanProperties::new(
        equivalences,
        Partitioning::UnknownPartitioning(1),
        EmissionType::Incremental,
        Boundedness::Bounded,
    );
    Ok(Some(Arc::new(BucketAggregateExec {
        input,
        bucket: partial.bucket.clone(),
        keys: partial.keys.clone(),
        aggregates: partial.aggregates.clone(),
        emit: Emit::Values,
        schema,
        properties: Arc::new(properties),
    })))
}

/// The partial aggregate of [`FuseBucketAggregates`], computed in timestamp order.
#[derive(Debug)]
pub(crate) struct BucketAggregateExec {
    input: Arc<dyn ExecutionPlan>,
    /// The bucket expression and its position among the group columns.
    bucket: (Arc<dyn PhysicalExpr>, usize),
    /// The SYMBOL key columns (at most [`BUCKET_KEYS_MAX`]) and their positions among the
    /// group columns.
    keys: Vec<(Arc<dyn PhysicalExpr>, usize)>,
    aggregates: Vec<Aggregate>,
    emit: Emit,
    /// The output: group columns, then each aggregate's state columns ([`Emit::States`]) or
    /// value ([`Emit::Values`]).
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl BucketAggregateExec {
    /// The fused form of `partial`, if it groups by a time bucket of its input's order (and at
    /// most one SYMBOL key) and computes only aggregates the exec knows.
    fn try_fuse(partial: &AggregateExec) -> DfResult<Option<Self>> {
        let group_by = partial.group_expr();
        if !group_by.is_single() || partial.filter_expr().iter().any(Option::is_some) {
            return Ok(None);
        }
        let input = partial.input();
        let input_schema = input.schema();
        let Some(time) = ordered_time_column(input.as_ref()) else {
            return Ok(None);
        };
        let mut bucket = None;
        let mut keys = Vec::new();
        for (i, (expr, _)) in group_by.expr().iter().enumerate() {
            if bucket.is_none() && is_bucket_of(expr, time, &input_schema) {
                bucket = Some((expr.clone(), i));
            } else if keys.len() < BUCKET_KEYS_MAX && is_symbol_column(expr, &input_schema) {
                keys.push((expr.clone(), i));
            } else {
                return Ok(None);
            }
        }
        let Some(bucket) = bucket else {
            return Ok(None);
        };
        let schema = partial.schema();
        let mut state_at = group_by.expr().len();
        let mut aggregates = Vec::new();
        for expr in partial.aggr_expr() {
            if expr.is_distinct() {
                return Ok(None);
            }
            let args = expr.expressions();
            let [arg] = args.as_slice() else {
                return Ok(None);
            };
            let arg = arg.clone();
            let arg_type = arg.data_type(&input_schema)?;
            let aggregate = match expr.order_bys() {
                [] => aggregate_of(expr.fun().name(), arg, &arg_type),
                [order] => pick_of(expr, order, arg, time, input.as_ref())?,
                _ => None,
            };
            let Some(aggregate) = aggregate else {
                return Ok(None);
            };
            let Some(next) = states_at(&schema, state_at, &aggregate.state_types(&arg_type)) else {
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
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        let mut fused = BucketAggregateExec {
            input: input.clone(),
            bucket,
            keys,
            aggregates,
            emit: Emit::States,
            schema,
            properties,
        };
        // Each partition's buckets close in order (one may close twice, never out of order):
        // the nodes above may rely on it, as on DataFusion's partial aggregate in sorted mode
        // over a bucket it knows to be monotonic (`date_trunc`).
        if let Some(options) = fused.bucket_order() {
            let at = fused.bucket.1;
            let bucket = Column::new(fused.schema.field(at).name(), at);
            let mut equivalences = EquivalenceProperties::new(fused.schema.clone());
            equivalences.add_ordering([PhysicalSortExpr::new(Arc::new(bucket), options)]);
            let properties = fused.properties.as_ref().clone();
            fused.properties = Arc::new(properties.with_eq_properties(equivalences));
        }
        Ok(Some(fused))
    }

    /// This partial aggregate turned into `single`, a single-stage aggregate over the same
    /// input, for buckets that close in ascending order ([`Self::bucket_order`]): final
    /// values, `single`'s schema and properties, and ordered by bucket. `None` if the columns
    /// do not correspond.
    fn into_single(self, single: &AggregateExec) -> Option<Self> {
        let schema = single.schema();
        let groups = single.group_expr().expr().len();
        if schema.fields().len() != groups + self.aggregates.len() {
            return None;
        }
        let options = self.bucket_order()?;
        let at = self.bucket.1;
        let bucket = Column::new(schema.field(at).name(), at);
        let properties = single.properties().as_ref().clone();
        let mut equivalences = properties.equivalence_properties().clone();
        equivalences.add_ordering([PhysicalSortExpr::new(Arc::new(bucket), options)]);
        let properties = properties.with_eq_properties(equivalences);
        Some(BucketAggregateExec {
            emit: Emit::Values,
            schema,
            properties: Arc::new(properties),
            ..self
        })
    }

    /// The rows the scan below reads and the groups they may make, when both are known:
    /// buckets of a fixed width over each partition's time range, times the key's symbols
    /// (and NULL).
    fn expected_groups(&self) -> Option<(u64, u64)> {
        let width = match FixedBucket::of(&self.bucket.0, &self.input.schema())? {
            FixedBucket::Floor { step, .. } => step,
            FixedBucket::Quotient { divisor, .. } => divisor,
        };
        let mut plan = &self.input;
        let scan = loop {
            if let Some(scan) = plan.downcast_ref::<SundialScanExec>() {
                break scan;
            }
            let [child] = plan.children()[..] else {
                return None;
            };
            plan = child;
        };
        let snapshot = scan.snapshot()?;
        let frames = scan.frames();
        let rows: u64 = frames.iter().map(Frame::len).sum();
        let mut partitions: Vec<usize> = frames.iter().map(|f| f.partition).collect();
        partitions.dedup();
        let buckets: u64 = partitions
            .iter()
            .filter_map(|&p| snapshot.partitions().get(p))
            .map(|m| (m.max_ts.saturating_sub(m.min_ts) / width).unsigned_abs() + 1)
            .sum();
        let symbols = match self.keys.first() {
            None => 1,
            Some((key, _)) => {
                let name = key.downcast_ref::<Column>()?.name();
                let at = scan.schema().index_of(name).ok()?;
                snapshot.symbols(*scan.projection().get(at)?)?.len() as u64 + 1
            }
        };
        Some((rows, buckets.saturating_mul(symbols)))
    }

    /// The order buckets close in, which is their output order in a single stage: the input's
    /// time order, if the bucket function never decreases as time grows. `date_bin` and
    /// `timestamp_floor` in UTC do; in a time zone, a clock change can make a later instant's
    /// bucket start earlier.
    fn bucket_order(&self) -> Option<SortOptions> {
        let first = self.input.properties().output_ordering()?.first();
        if time_quotient(&self.bucket.0, &self.input.schema()).is_some() {
            // Divisions by positive constants never decrease.
            return Some(first.options);
        }
        let f = self.bucket.0.downcast_ref::<ScalarFunctionExpr>()?;
        let zone = f.args().get(3).and_then(|a| a.downcast_ref::<Literal>());
        let monotone = match f.name() {
            "date_bin" => true,
            // In UTC every unit's truncation never decreases; in a zone only those computed
            // from the epoch do.
            "date_trunc" => {
                date_trunc_step(&self.bucket.0, &self.input.schema()).is_some()
                    || f.args().get(1).is_some_and(|a| {
                        matches!(
                            a.data_type(&self.input.schema()),
                            Ok(DataType::Timestamp(_, None))
                        )
                    })
            }
            "timestamp_floor" => f.args().len() < 4 || zone.is_some_and(|z| z.value().is_null()),
            _ => false,
        };
        monotone.then_some(first.options)
    }
}

/// The input column the plan's rows are ordered by first (ascending), if any.
fn ordered_time_column(input: &dyn ExecutionPlan) -> Option<usize> {
    let first = input.properties().output_ordering()?.first();
    if first.options.descending {
        return None;
    }
    first.expr.downcast_ref::<Column>().map(Column::index)
}

/// Whether `expr` is `timestamp_floor(stride, time, ...)`, `date_bin(width, time, ...)`,
/// `date_trunc(unit, time)` or the time as an integer divided by constants (see [`FixedBucket::Quotient`]).
fn is_bucket_of(expr: &Arc<dyn PhysicalExpr>, time: usize, schema: &SchemaRef) -> bool {
    if let Some(FixedBucket::Quotient { column, .. }) = time_quotient(expr, schema) {
        return column == time;
    }
    let Some(f) = expr.downcast_ref::<ScalarFunctionExpr>() else {
        return false;
    };
    matches!(f.name(), "timestamp_floor" | "date_bin" | "date_trunc")
        && f.args()
            .get(1)
            .and_then(|a| a.downcast_ref::<Column>())
            .is_some_and(|c| c.index() == time)
        && f.args()
            .iter()
            .enumerate()
            .all(|(i, a)| i == 1 || a.downcast_ref::<Literal>().is_some())
}

fn is_symbol_column(expr: &Arc<dyn PhysicalExpr>, schema: &SchemaRef) -> bool {
    expr.downcast_ref::<Column>().is_some_and(|c| {
        matches!(
            schema.field(c.index()).data_type(),
            DataType::Dictionary(k, _) if **k == DataType::Int32
        )
    })
}

fn aggregate_of(name: &str, arg: Arc<dyn PhysicalExpr>, arg_type: &DataType) -> Option<Aggregate> {
    let op = match name {
        "count" => Op::Count,
        "sum" => Op::Sum,
        "avg" => Op::Avg,
        "min" => Op::Min,
        "max" => Op::Max,
        _ => return None,
    };
    let kind = match arg_type {
        // Counting reads only which rows are NULL.
        _ if op == Op::Count => Kind::I64,
        DataType::Float64 => Kind::F64,
        DataType::Int64 | DataType::Timestamp(..) if op != Op::Avg => Kind::I64,
        DataType::Int32 if matches!(op, Op::Min | Op::Max) => Kind::I64,
        _ => return None,
    };
    Some(Aggregate {
        op,
        kind,
        arg,
        order: None,
    })
}

/// `first_value(arg ORDER BY time)` or `last_value(...)` respecting NULLs, ordered by the
/// input's time column in its order or exactly against it: the first or last row of each
/// group as the rows arrive.
fn pick_of(
    expr: &AggregateFunctionExpr,
    order: &PhysicalSortExpr,
    arg: Arc<dyn PhysicalExpr>,
    time: usize,
    input: &dyn ExecutionPlan,
) -> DfResult<Option<Aggregate>> {
    let last = match expr.fun().name() {
        "first_value" => false,
        "last_value" => true,
        _ => return Ok(None),
    };
    let Some(first) = input.properties().output_ordering().map(|o| o.first()) else {
        return Ok(None);
    };
    let on_time = order
        .expr
        .downcast_ref::<Column>()
        .is_some_and(|c| c.index() == time);
    let along = order.options == first.options;
    let against = order.options == !first.options;
    if expr.ignore_nulls() || !on_time || !(along || against) {
        return Ok(None);
    }
    let schema = input.schema();
    Ok(Some(Aggregate {
        op: if last == along { Op::Last } else { Op::First },
        kind: Kind::Any,
        order: Some(Order {
            time: order.expr.clone(),
            value_type: arg.data_type(&schema)?,
            time_type: order.expr.data_type(&schema)?,
        }),
        arg,
    }))
}

impl DisplayAs for BucketAggregateExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let mode = match self.emit {
            Emit::States => "partial",
            Emit::Values => "single",
        };
        write!(
            f,
            "BucketAggregateExec: mode={mode}, bucket={}",
            self.bucket.0
        )?;
        for (key, _) in &self.keys {
            write!(f, ", key={key}")?;
        }
        let names: Vec<String> = self
            .aggregates
            .iter()
            .map(|a| format!("{:?}({})", a.op, a.arg).to_lowercase())
            .collect();
        write!(f, ", aggr=[{}]", names.join(", "))
    }
}

impl ExecutionPlan for BucketAggregateExec {
    fn name(&self) -> &'static str {
        "BucketAggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        let exprs = std::iter::once(&self.bucket.0)
            .chain(self.keys.iter().map(|(k, _)| k))
            .chain(self.aggregates.iter().map(|a| &a.arg))
            .chain(
                self.aggregates
                    .iter()
                    .filter_map(|a| a.order.as_ref().map(|o| &o.time)),
            );
        crate::exec::visit_each(exprs, f)
    }

    fn replace_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
        _: ReplaceChildrenOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let input = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("BucketAggregateExec has a child".into()))?;
        Ok(Arc::new(BucketAggregateExec {
            input,
            bucket: self.bucket.clone(),
            keys: self.keys.clone(),
            aggregates: self.aggregates.clone(),
            emit: self.emit,
            schema: self.schema.clone(),
            properties: self.properties.clone(),
        }))
    }

    with_new_children_recomputing!();

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context.clone())?;
        let state = Aggregation::new(self, context.session_config().batch_size());
        let stream = futures::stream::unfold(Some((input, state)), |open| async move {
            let (mut input, mut state) = open?;
            loop {
                let step = match input.next().await {
                    Some(Ok(batch)) => state.consume(&batch).and_then(|()| state.output(false)),
                    Some(Err(e)) => Err(e),
                    None => {
                        state.close_bucket();
                        return state.output(true).transpose().map(|out| (out, None));
                    }
                };
                match step {
                    Ok(Some(batch)) => return Some((Ok(batch), Some((input, state)))),
                    Ok(None) => continue,
                    Err(e) => return Some((Err(e), None)),
                }
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }
}

/// One partition's aggregation.
struct Aggregation {
    bucket: Arc<dyn PhysicalExpr>,
    /// The bucket when it is computed once per run of rows.
    fixed: Option<FixedBucket>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Where the bucket and each key are among the group columns.
    bucket_at: usize,
    keys_at: Vec<usize>,
    args: Vec<Arc<dyn PhysicalExpr>>,
    accumulators: Vec<Accumulator>,
    emit: Emit,
    schema: SchemaRef,
    batch_rows: usize,
    /// The open bucket (`Some(None)`: the bucket of NULL timestamps).
    open: Option<Option<i64>>,
    /// Slots the open bucket has rows for, in first-seen order.
    touched: Vec<usize>,
    is_touched: Vec<bool>,
    /// Each key's dictionary (the largest seen: SYMBOL codes only grow).
    key_values: Vec<Option<ArrayRef>>,
    /// Each key's digit count: its dictionary's symbols and NULL. A slot is the number
    /// `Σ digitᵢ · Πⱼ<ᵢ radixⱼ`, a key's digit being its code + 1, or 0 for NULL.
    radix: Vec<usize>,
    /// When the combinations of several keys outnumber [`BUCKET_SLOTS_MAX`]: the slot of
    /// each combination met, in order of first appearance.
    sparse: Option<Sparse>,
    /// Output rows built so far: their buckets and each key's codes.
    buckets: Int64Builder,
    codes: Vec<Vec<Option<i32>>>,
}

/// A row's keys' digits (code + 1, 0 for NULL), one per key, the rest 0.
type Digits = [u32; BUCKET_KEYS_MAX];

/// Slots numbered as combinations of keys first appear.
#[derive(Default)]
struct Sparse {
    slots: datafusion::common::HashMap<Digits, u32>,
    /// Each slot's combination.
    digits: Vec<Digits>,
}

/// Most SYMBOL keys a bucket aggregate groups by.
const BUCKET_KEYS_MAX: usize = 3;

/// Combinations of several keys' symbols up to which each is a slot of its own; past it,
/// slots are numbered as combinations appear.
const BUCKET_SLOTS_MAX: u64 = 1 << 16;

/// Combinations numbered as they appear past which, at the next batch, the open bucket's
/// partial states go out and the numbering starts afresh: the states held stay bounded
/// however many combinations the keys make (the final aggregate above merges the pieces).
#[cfg(not(test))]
const SPARSE_SLOTS_MAX: usize = 1 << 20;
/// Small in tests, so that the three-key test starts its numbering afresh many times.
#[cfg(test)]
const SPARSE_SLOTS_MAX: usize = 64;

impl Aggregation {
    fn new(exec: &BucketAggregateExec, batch_rows: usize) -> Self {
        Aggregation {
            bucket: exec.bucket.0.clone(),
            fixed: FixedBucket::of(&exec.bucket.0, &exec.input.schema()),
            keys: exec.keys.iter().map(|(k, _)| k.clone()).collect(),
            bucket_at: exec.bucket.1,
            keys_at: exec.keys.iter().map(|(_, at)| *at).collect(),
            args: exec.aggregates.iter().map(|a| a.arg.clone()).collect(),
            accumulators: exec.aggregates.iter().map(Accumulator::new).collect(),
            emit: exec.emit,
            schema: exec.schema.clone(),
            batch_rows,
            open: None,
            touched: Vec::new(),
            is_touched: Vec::new(),
            key_values: vec![None; exec.keys.len()],
            radix: vec![1; exec.keys.len()],
            sparse: None,
            buckets: Int64Builder::new(),
            codes: vec![Vec::new(); exec.keys.len()],
        }
    }

    fn consume(&mut self, batch: &RecordBatch) -> DfResult<()> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let runs = self.runs(batch)?;
        let mut codes = Vec::with_capacity(self.keys.len());
        for i in 0..self.keys.len() {
            let array = self.keys[i].evaluate(batch)?.into_array(n)?;
            codes.push(self.key_codes(i, array)?);
        }
        let radix: Vec<usize> = self
            .key_values
            .iter()
            .map(|v| v.as_ref().map_or(0, |v| v.len()) + 1)
            .collect();
        if radix != self.radix {
            // With several keys a dictionary that grows renumbers the slots: the open
            // bucket's states go out first (partial states, merged above).
            if self.keys.len() > 1 {
                self.close_bucket();
            }
            self.radix = radix;
            let combinations = self
                .radix
                .iter()
                .try_fold(1u64, |p, &r| p.checked_mul(r as u64));
            self.sparse = match combinations {
                Some(c) if c <= BUCKET_SLOTS_MAX || self.keys.len() <= 1 => None,
                _ => Some(Sparse::default()),
            };
        }
        if let Some(sparse) = &mut self.sparse
            && sparse.digits.len() > SPARSE_SLOTS_MAX
        {
            self.close_bucket();
            self.sparse = Some(Sparse::default());
        }
        // Each row's slot, once per batch: its keys' digits as one number, or the number of
        // their combination when numbered as they appear.
        let row_slots: Option<Vec<u32>> = if codes.is_empty() {
            None
        } else {
            let mut digits = vec![[0u32; BUCKET_KEYS_MAX]; n];
            for (k, codes) in codes.iter().enumerate() {
                let values = codes.values();
                match codes.nulls() {
                    None => {
                        for (d, &c) in digits.iter_mut().zip(values.iter()) {
                            d[k] = c as u32 + 1;
                        }
                    }
                    Some(nulls) => {
                        for ((d, &c), valid) in
                            digits.iter_mut().zip(values.iter()).zip(nulls.iter())
                        {
                            d[k] = if valid { c as u32 + 1 } else { 0 };
                        }
                    }
                }
            }
            Some(match &mut self.sparse {
                // Fewer than 2^16 combinations: the number fits.
                None => digits
                    .iter()
                    .map(|d| {
                        let mut number = 0u32;
                        for k in (0..self.radix.len()).rev() {
                            number = number * self.radix[k] as u32 + d[k];
                        }
                        number
                    })
                    .collect(),
                Some(sparse) => digits
                    .into_iter()
                    .map(|d| {
                        let next = sparse.digits.len() as u32;
                        *sparse.slots.entry(d).or_insert_with(|| {
                            sparse.digits.push(d);
                            next
                        })
                    })
                    .collect(),
            })
        };
        let slots = match (&self.sparse, &row_slots) {
            (Some(sparse), _) => sparse.digits.len().max(1),
            (None, Some(_)) => self.radix.iter().product(),
            (None, None) => 1,
        };
        self.is_touched
            .resize(slots.max(self.is_touched.len()), false);
        let args = self.arguments(batch, slots)?;
        for (bucket, rows) in runs {
            if self.open != Some(bucket) {
                if self.emit == Emit::Values
                    && self.open.is_some_and(|open| !comes_after(bucket, open))
                {
                    return Err(DataFusionError::Internal(
                        "rows reached a single-stage bucket aggregate out of timestamp order"
                            .into(),
                    ));
                }
                self.close_bucket();
                self.open = Some(bucket);
            }
            self.add_run(row_slots.as_deref(), &args, rows)?;
        }
        for accumulator in &mut self.accumulators {
            accumulator.compact()?;
        }
        Ok(())
    }

    /// The runs of consecutive rows of `batch` with one bucket. A [`FixedBucket`] over a
    /// timestamp column without NULLs computes a bucket per run: the run goes on while the
    /// timestamps stay inside that bucket's range, one comparison per row. Otherwise the
    /// bucket expression is evaluated for every row.
    fn runs(&self, batch: &RecordBatch) -> DfResult<Vec<(Option<i64>, Range<usize>)>> {
        let n = batch.num_rows();
        let mut runs = Vec::new();
        if let Some(fixed) = self.fixed
            && let Some(ts) = batch
                .column(fixed.column())
                .as_primitive_opt::<TimestampNanosecondType>()
            && ts.null_count() == 0
        {
            let ts = ts.values();
            let mut start = 0;
            while start < n {
                let Some((bucket, lo, hi)) = fixed.bucket(ts[start]) else {
                    // Out of the range a bucket can start in: the function says NULL.
                    runs.push((None, start..start + 1));
                    start += 1;
                    continue;
                };
                let end = ts[start + 1..]
                    .iter()
                    .position(|&u| u < lo || u >= hi)
                    .map_or(n, |p| start + 1 + p);
                runs.push((Some(bucket), start..end));
                start = end;
            }
            return Ok(runs);
        }
        let buckets = as_i64(self.bucket.evaluate(batch)?.into_array(n)?)?;
        let mut start = 0;
        while start < n {
            let bucket = buckets.is_valid(start).then(|| buckets.value(start));
            let mut end = start + 1;
            while end < n && buckets.is_valid(end).then(|| buckets.value(end)) == bucket {
                end += 1;
            }
            runs.push((bucket, start..end));
            start = end;
        }
        Ok(runs)
    }

    /// Key `i`'s SYMBOL codes; remembers its dictionary.
    fn key_codes(&mut self, i: usize, keys: ArrayRef) -> DfResult<Int32Array> {
        let dictionary = keys
            .as_dictionary_opt::<Int32Type>()
            .ok_or_else(|| DataFusionError::Internal("bucket key is not a SYMBOL".into()))?;
        let values = dictionary.values();
        match &self.key_values[i] {
            Some(kept) if Arc::ptr_eq(kept, values) => {}
            Some(kept) => {
                // SYMBOL codes only grow: one dictionary must begin with the other.
                let (short, long) = if kept.len() <= values.len() {
                    (kept, values)
                } else {
                    (values, kept)
                };
                if long.slice(0, short.len()).to_data() != short.to_data() {
                    return Err(DataFusionError::Internal(
                        "a bucket key's dictionaries disagree between batches".into(),
                    ));
                }
                if kept.len() < values.len() {
                    self.key_values[i] = Some(values.clone());
                }
            }
            None => self.key_values[i] = Some(values.clone()),
        }
        Ok(dictionary.keys().clone())
    }

    /// Each aggregate's argument over `batch`, with states sized for `slots`.
    fn arguments(&mut self, batch: &RecordBatch, slots: usize) -> DfResult<Vec<Argument>> {
        let mut args = Vec::with_capacity(self.args.len());
        for (arg, accumulator) in self.args.iter().zip(&mut self.accumulators) {
            accumulator.ensure(slots);
            args.push(accumulator.argument(arg.evaluate(batch)?, batch)?);
        }
        Ok(args)
    }

    /// Adds rows `rows`, all of the open bucket; `slots` holds each row's slot when keyed.
    fn add_run(
        &mut self,
        slots: Option<&[u32]>,
        args: &[Argument],
        rows: Range<usize>,
    ) -> DfResult<()> {
        match slots {
            None => self.touch(0),
            Some(slots) => {
                for &slot in &slots[rows.clone()] {
                    self.touch(slot as usize);
                }
            }
        }
        for (arg, accumulator) in args.iter().zip(&mut self.accumulators) {
            accumulator.update(arg, rows.clone(), slots)?;
        }
        Ok(())
    }

    fn touch(&mut self, slot: usize) {
        if !self.is_touched[slot] {
            self.is_touched[slot] = true;
            self.touched.push(slot);
        }
    }

    /// Writes the open bucket's states to the output and resets them.
    fn close_bucket(&mut self) {
        let Some(bucket) = self.open.take() else {
            return;
        };
        self.touched.sort_unstable();
        for &slot in &self.touched {
            self.is_touched[slot] = false;
            self.buckets.append_option(bucket);
            let mut rest = slot;
            for (k, (codes, &radix)) in self.codes.iter_mut().zip(&self.radix).enumerate() {
                let digit = match &self.sparse {
                    Some(sparse) => sparse.digits[slot][k] as usize,
                    None => {
                        let digit = rest % radix;
                        rest /= radix;
                        digit
                    }
                };
                codes.push(digit.checked_sub(1).map(|code| code as i32));
            }
            for accumulator in &mut self.accumulators {
                accumulator.emit(slot, self.emit);
            }
        }
        self.touched.clear();
    }

    /// The rows built so far as a batch, once there are enough (or any, when `all`).
    fn output(&mut self, all: bool) -> DfResult<Option<RecordBatch>> {
        let rows = self.buckets.len();
        if rows == 0 || (!all && rows < self.batch_rows) {
            return Ok(None);
        }
        // The group columns in their order: the bucket and each key at its position.
        let mut groups: Vec<(usize, ArrayRef)> = Vec::with_capacity(1 + self.keys.len());
        groups.push((self.bucket_at, Arc::new(self.buckets.finish())));
        for i in 0..self.keys.len() {
            let codes = Int32Array::from(std::mem::take(&mut self.codes[i]));
            let values = self.key_values[i].clone().ok_or_else(|| {
                DataFusionError::Internal("bucket key without a dictionary".into())
            })?;
            let keys = Arc::new(DictionaryArray::<Int32Type>::try_new(codes, values)?);
            groups.push((self.keys_at[i], keys));
        }
        groups.sort_by_key(|(at, _)| *at);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        columns.extend(groups.into_iter().map(|(_, array)| array));
        for accumulator in &mut self.accumulators {
            accumulator.finish(&mut columns, self.emit)?;
        }
        let columns = columns
            .into_iter()
            .zip(self.schema.fields())
            .map(|(array, field)| {
                if array.data_type() == field.data_type() {
                    Ok(array)
                } else {
                    cast(&array, field.data_type())
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(RecordBatch::try_new(self.schema.clone(), columns)?))
    }
}

/// Whether bucket `b` follows bucket `a` in ascending order, NULL last (the scan's order).
fn comes_after(b: Option<i64>, a: Option<i64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => b > a,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::scan::tests::{engine, plan_and_rows};

    /// Rows with NULLs in every column but the timestamp, NaNs, and SYMBOL keys, arriving out
    /// of order over several partitions.
    fn inserts() -> Vec<String> {
        let rows = |from: u32, to: u32| {
            format!(
                "INSERT INTO t SELECT to_timestamp_seconds(1704067200 + value * 97), \
                 CASE value % 5 WHEN 0 THEN NULL WHEN 1 THEN 'a' WHEN 2 THEN 'b' ELSE 'c' END, \
                 CASE WHEN value % 7 = 0 THEN NULL ELSE value * 0.25 END, \
                 CASE WHEN value % 7 = 0 THEN NULL WHEN value % 11 = 0 THEN 'NaN'::double \
                      ELSE value * 0.5 END, \
                 CASE WHEN value % 6 = 0 THEN NULL ELSE value * 3 - 5000 END, \
                 CASE WHEN value % 4 = 0 THEN NULL ELSE CAST(value % 1000 AS INT) END, \
                 CASE value % 3 WHEN 0 THEN 'x' WHEN 1 THEN 'y' END, \
                 concat('w', CAST(value % 300 AS VARCHAR)), \
                 CASE WHEN value % 13 = 0 THEN NULL ELSE concat('v', CAST(value % 257 AS VARCHAR)) END \
                 FROM generate_series({from}, {to} - 1)"
            )
        };
        vec![
            "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, d DOUBLE, e DOUBLE, l LONG, i INT, \
             g SYMBOL, w SYMBOL, v SYMBOL) \
             TIMESTAMP(ts) \
             PARTITION BY DAY"
                .to_string(),
            rows(2000, 5000),
            rows(0, 2000),
            rows(5000, 6000),
        ]
    }

    /// NaN (in `e`) makes sums NaN; DataFusion's hash `min` and `max` give NaN no fixed place
    /// (they depend on row order), so those read `d`, which has none.
    const AGGREGATES: &str = "count(*) AS n, count(e) AS ne, round(sum(d), 6) AS sd, \
        round(sum(e), 6) AS se, sum(l) AS sl, round(avg(d), 6) AS ad, round(avg(e), 6) AS ae, round(avg(l), 6) AS al, min(d) AS mind, max(d) AS maxd, \
        min(l) AS minl, max(l) AS maxl, min(i) AS mini, max(i) AS maxi, min(ts) AS mint, \
        max(ts) AS maxt";

    #[tokio::test]
    async fn fused_bucket_aggregates_match_hash_aggregates() {
        let (engine, _dir) = engine();
        for sql in inserts() {
            engine.run(&sql).await.expect(&sql);
        }
        // `ts + INTERVAL '0 seconds'` is no longer the column the scan orders by, so those
        // queries keep DataFusion's hash aggregate.
        for (fused, reference) in [
            (
                format!(
                    "SELECT timestamp_floor('1h', ts) AS b, k, {AGGREGATES} FROM t GROUP BY b, k ORDER BY b, k"
                ),
                format!(
                    "SELECT timestamp_floor('1h', ts + INTERVAL '0 seconds') AS b, k, {AGGREGATES} FROM t GROUP BY b, k ORDER BY b, k"
                ),
            ),
            (
                format!(
                    "SELECT k, date_bin(INTERVAL '15 minutes', ts) AS b, {AGGREGATES} FROM t WHERE k IN ('a', 'c') GROUP BY k, b ORDER BY b, k"
                ),
                format!(
                    "SELECT k, date_bin(INTERVAL '15 minutes', ts + INTERVAL '0 seconds') AS b, {AGGREGATES} FROM t WHERE k IN ('a', 'c') GROUP BY k, b ORDER BY b, k"
                ),
            ),
            (
                format!("SELECT ts, {AGGREGATES} FROM t WHERE ts >= '2024-01-02' SAMPLE BY 1d"),
                format!(
                    "SELECT timestamp_floor('1d', ts + INTERVAL '0 seconds') AS ts, {AGGREGATES} FROM t WHERE ts >= '2024-01-02' GROUP BY 1 ORDER BY 1"
                ),
            ),
            (
                format!(
                    "SELECT timestamp_floor('10m', ts, '2024-01-01T00:03:00Z') AS b, {AGGREGATES} FROM t GROUP BY b ORDER BY b"
                ),
                format!(
                    "SELECT timestamp_floor('10m', ts + INTERVAL '0 seconds', '2024-01-01T00:03:00Z') AS b, {AGGREGATES} FROM t GROUP BY b ORDER BY b"
                ),
            ),
            // DataFusion knows date_bin and date_trunc never decrease: an ORDER BY the bucket
            // alone relies on the fused aggregate's order.
            (
                format!(
                    "SELECT date_bin(INTERVAL '2 hours', ts) AS b, {AGGREGATES} FROM t GROUP BY b ORDER BY b"
                ),
                format!(
                    "SELECT date_bin(INTERVAL '2 hours', ts + INTERVAL '0 seconds') AS b, {AGGREGATES} FROM t GROUP BY b ORDER BY b"
                ),
            ),
            // date_trunc to a fixed unit is a floor from the epoch; to months, per row.
            (
                format!(
                    "SELECT date_trunc('hour', ts) AS b, {AGGREGATES} FROM t WHERE k <> 'b' GROUP BY b ORDER BY b"
                ),
                format!(
                    "SELECT date_trunc('hour', ts + INTERVAL '0 seconds') AS b, {AGGREGATES} FROM t WHERE k <> 'b' GROUP BY b ORDER BY b"
                ),
            ),
            (
                format!(
                    "SELECT k, date_trunc('MINUTE', ts) AS b, {AGGREGATES} FROM t GROUP BY k, b ORDER BY b, k"
                ),
                format!(
                    "SELECT k, date_trunc('MINUTE', ts + INTERVAL '0 seconds') AS b, {AGGREGATES} FROM t GROUP BY k, b ORDER BY b, k"
                ),
            ),
            (
                format!(
                    "SELECT date_trunc('day', ts) AS b, k, {AGGREGATES} FROM t GROUP BY b, k ORDER BY b, k"
                ),
                format!(
                    "SELECT date_trunc('day', ts + INTERVAL '0 seconds') AS b, k, {AGGREGATES} FROM t GROUP BY b, k ORDER BY b, k"
                ),
            ),
            (
                format!(
                    "SELECT date_trunc('month', ts) AS b, k, g, {AGGREGATES} FROM t GROUP BY b, k, g ORDER BY b, k, g"
                ),
                format!(
                    "SELECT date_trunc('month', ts + INTERVAL '0 seconds') AS b, k, g, {AGGREGATES} FROM t GROUP BY b, k, g ORDER BY b, k, g"
                ),
            ),
            // First and last values of any type, NULLs included, in time order.
            (
                format!(
                    "SELECT ts, k, first(d) AS fd, last(d) AS ld, first(l) AS fl, last(w) AS lw, last(ts) AS lt, {AGGREGATES} FROM t SAMPLE BY 1h"
                ),
                format!(
                    "SELECT timestamp_floor('1h', ts + INTERVAL '0 seconds') AS ts, k, first_value(d ORDER BY ts) AS fd, last_value(d ORDER BY ts) AS ld, first_value(l ORDER BY ts) AS fl, last_value(w ORDER BY ts) AS lw, last_value(ts ORDER BY ts) AS lt, {AGGREGATES} FROM t GROUP BY 1, 2 ORDER BY 1, 2 NULLS LAST"
                ),
            ),
            (
                format!(
                    "SELECT timestamp_floor('1h', ts) AS b, k, g, first_value(v ORDER BY ts) AS fv, last_value(i ORDER BY ts) AS li, first_value(e ORDER BY ts DESC) AS le, {AGGREGATES} FROM t GROUP BY b, k, g ORDER BY b, k, g"
                ),
                format!(
                    "SELECT timestamp_floor('1h', ts + INTERVAL '0 seconds') AS b, k, g, first_value(v ORDER BY ts) AS fv, last_value(i ORDER BY ts) AS li, first_value(e ORDER BY ts DESC) AS le, {AGGREGATES} FROM t GROUP BY b, k, g ORDER BY b, k, g"
                ),
            ),
            // Two keys: slots for each combination of their symbols.
            (
                format!(
                    "SELECT timestamp_floor('1h', ts) AS b, k, g, {AGGREGATES} FROM t GROUP BY b, k, g ORDER BY b, k, g"
                ),
                format!(
                    "SELECT timestamp_floor('1h', ts + INTERVAL '0 seconds') AS b, k, g, {AGGREGATES} FROM t GROUP BY b, k, g ORDER BY b, k, g"
                ),
            ),
            // Three keys of 3 x 301 x 258 combinations: slots numbered as they appear.
            (
                format!(
                    "SELECT g, timestamp_floor('1d', ts) AS b, w, v, {AGGREGATES} FROM t GROUP BY g, b, w, v ORDER BY b, g, w, v"
                ),
                format!(
                    "SELECT g, timestamp_floor('1d', ts + INTERVAL '0 seconds') AS b, w, v, {AGGREGATES} FROM t GROUP BY g, b, w, v ORDER BY b, g, w, v"
                ),
            ),
            // The time as an integer divided by constants: the quotient per run of rows. (The
            // dialect reads the cast of a TIMESTAMP column as microseconds, that of another
            // expression as DataFusion's nanoseconds.)
            (
                format!(
                    "SELECT cast(ts AS long) / 3600000000 AS h, k, {AGGREGATES} FROM t GROUP BY h, k ORDER BY h, k"
                ),
                format!(
                    "SELECT cast(ts + INTERVAL '0 seconds' AS long) / 1000 / 3600000000 AS h, k, {AGGREGATES} FROM t GROUP BY h, k ORDER BY h, k"
                ),
            ),
            (
                format!("SELECT ts, k, {AGGREGATES} FROM t SAMPLE BY 1w"),
                format!(
                    "SELECT timestamp_floor('1w', ts + INTERVAL '0 seconds') AS ts, k, {AGGREGATES} FROM t GROUP BY 1, 2 ORDER BY 1, 2 NULLS LAST"
                ),
            ),
        ] {
            let (plan, got) = plan_and_rows(&engine, &fused).await;
            assert!(plan.contains("BucketAggregateExec"), "{fused}: {plan}");
            let (plan, want) = plan_and_rows(&engine, &reference).await;
            assert!(!plan.contains("BucketAggregateExec"), "{reference}: {plan}");
            let differing: Vec<(&str, &str)> = got
                .lines()
                .zip(want.lines())
                .filter(|(g, w)| g != w)
                .take(3)
                .collect();
            assert!(differing.is_empty(), "{fused}: {differing:#?}");
            assert_eq!(got.lines().count(), want.lines().count(), "{fused}");
            assert!(got.lines().count() > 5, "{got}");
        }
    }

    /// A grouping expecting a few rows per group (a bucket of an hour per symbol, rows 97 s
    /// apart) folds its rows in one partition into final values: no partial states to merge.
    /// One expecting many rows per group keeps its partitions.
    #[tokio::test]
    async fn many_small_groups_aggregate_in_one_partition() {
        let (engine, _dir) = engine();
        for sql in inserts() {
            engine.run(&sql).await.expect(&sql);
        }
        engine
            .run("SET datafusion.execution.target_partitions = 3")
            .await
            .expect("SET");
        let fused = format!("SELECT ts, k, {AGGREGATES} FROM t SAMPLE BY 1h");
        let reference = format!(
            "SELECT timestamp_floor('1h', ts + INTERVAL '0 seconds') AS ts, k, {AGGREGATES} \
             FROM t GROUP BY 1, 2 ORDER BY 1, 2 NULLS LAST"
        );
        let (plan, got) = plan_and_rows(&engine, &fused).await;
        assert!(plan.contains("BucketAggregateExec: mode=single"), "{plan}");
        assert!(!plan.contains("RepartitionExec"), "{plan}");
        let (_, want) = plan_and_rows(&engine, &reference).await;
        assert_eq!(got, want, "{fused}");
        assert!(got.lines().count() > 100, "{got}");
        let (plan, _) = plan_and_rows(&engine, "SELECT ts, count(*) FROM t SAMPLE BY 1d").await;
        assert!(plan.contains("BucketAggregateExec: mode=partial"), "{plan}");
    }

    /// Integer division rounds toward zero, so the quotient 0 spans both sides of the epoch
    /// and the buckets before it end where their multiples do: the runs follow.
    #[tokio::test]
    async fn time_quotients_round_toward_zero_across_the_epoch() {
        let (engine, _dir) = engine();
        for sql in [
            "CREATE TABLE e (ts TIMESTAMP, k SYMBOL, d DOUBLE) TIMESTAMP(ts) PARTITION BY DAY",
            "INSERT INTO e SELECT to_timestamp_seconds(value * 7 - 21000), \
             CASE value % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' END, value * 0.5 \
             FROM generate_series(0, 5999)",
        ] {
            engine.run(sql).await.expect(sql);
        }
        for divisor in ["3600000000", "1000 / 600000", "7000000"] {
            let fused = format!(
                "SELECT cast(ts AS long) / {divisor} AS q, k, count(*), sum(d), min(d), max(ts) \
                 FROM e GROUP BY q, k ORDER BY q, k"
            );
            // The cast of an expression is nanoseconds, that of the column microseconds.
            let reference = fused.replace(
                "cast(ts AS long)",
                "cast(ts + INTERVAL '0 seconds' AS long) / 1000",
            );
            let (plan, got) = plan_and_rows(&engine, &fused).await;
            assert!(plan.contains("BucketAggregateExec"), "{fused}: {plan}");
            let (plan, want) = plan_and_rows(&engine, &reference).await;
            assert!(!plan.contains("BucketAggregateExec"), "{reference}: {plan}");
            assert_eq!(got, want, "{fused}");
            assert!(got.lines().count() > 5, "{got}");
        }
    }

    /// On one core the aggregate is single-stage: the fused exec computes final values, and
    /// a sort by bucket alone has nothing left to do. In a time zone, buckets may close out of
    /// order, so a final aggregate merges them.
    #[tokio::test]
    async fn single_stage_bucket_aggregates_emit_final_values_in_order() {
        let (engine, _dir) = engine();
        for sql in inserts() {
            engine.run(&sql).await.expect(&sql);
        }
        engine
            .run("SET datafusion.execution.target_partitions = 1")
            .await
            .expect("SET");
        let shifted = |sql: &str| sql.replace("ts)", "ts + INTERVAL '0 seconds')");
        for (sql, sorted) in [
            (
                format!("SELECT ts, {AGGREGATES} FROM t WHERE ts >= '2024-01-02' SAMPLE BY 1d"),
                true,
            ),
            (
                format!("SELECT ts, k, {AGGREGATES} FROM t SAMPLE BY 1h"),
                false,
            ),
            (
                format!(
                    "SELECT date_bin(INTERVAL '15 minutes', ts) AS b, {AGGREGATES} FROM t GROUP BY b ORDER BY b"
                ),
                true,
            ),
            (
                format!(
                    "SELECT date_bin(INTERVAL '15 minutes', ts) AS b, k, {AGGREGATES} FROM t GROUP BY b, k ORDER BY b, k"
                ),
                false,
            ),
        ] {
            let (plan, got) = plan_and_rows(&engine, &sql).await;
            assert!(
                plan.contains("BucketAggregateExec: mode=single"),
                "{sql}: {plan}"
            );
            assert_eq!(!plan.contains("SortExec"), sorted, "{sql}: {plan}");
            let reference = if sql.contains("SAMPLE BY") {
                let bucket = if sql.contains("1d") { "1d" } else { "1h" };
                let keys = if sql.contains(" k,") { ", k" } else { "" };
                // SAMPLE BY orders keys as SQL does (NULL last), not as ORDER BY a column.
                let columns = if keys.is_empty() {
                    "1"
                } else {
                    "1, 2 NULLS LAST"
                };
                let filter = if sql.contains("WHERE") {
                    " WHERE ts >= '2024-01-02'"
                } else {
                    ""
                };
                let group = if keys.is_empty() { "1" } else { "1, 2" };
                format!(
                    "SELECT timestamp_floor('{bucket}', ts + INTERVAL '0 seconds') AS ts{keys}, {AGGREGATES} FROM t{filter} GROUP BY {group} ORDER BY {columns}"
                )
            } else {
                shifted(&sql)
            };
            let (plan, want) = plan_and_rows(&engine, &reference).await;
            assert!(!plan.contains("BucketAggregateExec"), "{reference}: {plan}");
            assert_eq!(got, want, "{sql}");
            assert!(got.lines().count() > 5, "{got}");
        }
        // Several keys always emit partial states, merged by a final aggregate.
        let keyed = format!("SELECT ts, k, g, {AGGREGATES} FROM t SAMPLE BY 1h");
        let (plan, _) = plan_and_rows(&engine, &keyed).await;
        assert!(plan.contains("BucketAggregateExec: mode=partial"), "{plan}");
        let zoned = format!(
            "SELECT ts, {AGGREGATES} FROM t SAMPLE BY 1h ALIGN TO CALENDAR TIME ZONE 'Europe/Berlin'"
        );
        let (plan, _) = plan_and_rows(&engine, &zoned).await;
        assert!(plan.contains("BucketAggregateExec: mode=partial"), "{plan}");
        assert!(plan.contains("SortExec"), "{plan}");
    }

    #[tokio::test]
    async fn other_groupings_keep_the_hash_aggregate() {
        let (engine, _dir) = engine();
        for sql in inserts() {
            engine.run(&sql).await.expect(&sql);
        }
        for sql in [
            "SELECT timestamp_floor('1h', ts) AS b, sum(d) FILTER (WHERE l > 0) FROM t GROUP BY b",
            "SELECT timestamp_floor('1h', ts) AS b, i, count(*) FROM t GROUP BY b, i",
            "SELECT timestamp_floor('1h', ts) AS b, first_value(d ORDER BY l) FROM t GROUP BY b",
            "SELECT timestamp_floor('1h', ts) AS b, last_value(d ORDER BY ts) IGNORE NULLS FROM t GROUP BY b",
            "SELECT k, count(*) FROM t GROUP BY k",
        ] {
            let (plan, _) = plan_and_rows(&engine, sql).await;
            assert!(!plan.contains("BucketAggregateExec"), "{sql}: {plan}");
        }
    }
}

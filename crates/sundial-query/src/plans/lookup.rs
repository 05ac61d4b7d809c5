//! Point lookups: the short path for `SELECT a, b FROM t WHERE k = $1 [AND j IN ('x', $2)]
//! [AND m = ANY($3)] [AND ts >= $4 AND ts < $5] [LIMIT n]`.
//!
//! ```text
//! prepare:  optimized plan ──PointLookup::from_plan──▶ { table, keys, time bounds, projection }
//! run:      newest snapshot ─▶ an integer key: its rows from the table's key index
//!                              (table_keys), a probe per value whatever the partitions
//!                           ─▶ otherwise each partition in the time range: key index, or
//!                              key column IN values over the range's rows
//!                           ─▶ LookupRows: (partition, rows), located, not read
//!                           ─▶ read as cells (PostgreSQL's DataRows) or Arrow batches
//! ```
//!
//! Clients that look rows up by key send the same prepared statement thousands of times a
//! second. For them, DataFusion's physical planning and its executor (a task per partition,
//! channels between operators) cost more than comparing the key column, so statements of this
//! shape skip both: the comparison runs on the mapped column with Arrow's vectorised kernels,
//! and only the matching rows are read. Everything else takes the general path.

use std::cell::Cell;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Datum, RecordBatch, Scalar,
};
use datafusion::arrow::compute::kernels::boolean::{and, or};
use datafusion::arrow::compute::kernels::cmp::eq;
use datafusion::arrow::compute::{concat, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, SchemaRef, TimeUnit, TimestampNanosecondType};
use datafusion::catalog::TableProvider;
use datafusion::common::Column;
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Expr, FetchType, LogicalPlan, Operator, SkipType, TableScan,
};
use datafusion::scalar::ScalarValue;
use sundial_kernels::{CmpOp, ColumnValues, Domain, Leaf, Predicate, Test};
use sundial_storage::{ColumnType, PartRows, Snapshot, Table};

use crate::error::{QueryError, Result, internal};
use crate::key_index::{IndexRows, KeyIndexes, indexable};
use crate::plans::mapped::MappedParts;
use crate::provider::SundialTable;
use crate::snapshot::symbol_code;
use crate::table_keys::{Found, TableKeys};
use sundial_sql::names::placeholder_index;

/// A prepared statement that is a conjunction of equalities on one Sundial table.
#[derive(Debug, Clone)]
pub(crate) struct PointLookup {
    /// Always a [`SundialTable`]; kept as the provider so the plan's table is reused.
    provider: Arc<dyn TableProvider>,
    keys: Vec<Key>,
    /// Bounds on the designated timestamp, all of which a row meets.
    time: Vec<TimeBound>,
    /// The table column behind each output column.
    projection: Vec<usize>,
    schema: SchemaRef,
    fetch: Option<usize>,
    /// The optimized plan, run instead when the key finds more than [`LOOKUP_ROWS_MAX`] rows.
    plan: LogicalPlan,
}

/// The most rows a lookup returns itself, read at once; past this the general plan streams
/// them within the query memory limit.
const LOOKUP_ROWS_MAX: usize = 16_384;

/// A partition's part of a lookup.
enum Hits {
    None,
    Some(Part),
    TooMany,
}

/// What a lookup found.
#[derive(Debug)]
pub(crate) enum Lookup {
    Found(LookupRows),
    /// Finding the rows takes indexing or scanning more than allowed in one partition.
    Deferred,
    /// More than [`LOOKUP_ROWS_MAX`] rows match: the general plan is run instead.
    TooMany,
}

/// `ts op value` on the designated timestamp `ts`; `op` is `=`, `>`, `>=`, `<` or `<=`.
#[derive(Debug, Clone)]
struct TimeBound {
    op: Operator,
    value: KeyValue,
}

/// Designated timestamps `[lo, hi)`, in nanoseconds; `None`: unbounded on that side.
type TimeRange = (Option<i64>, Option<i64>);

/// `column = value`, `column IN (values)` or `column = ANY($n)`: the column holds one of
/// `values` (of the elements of an array's).
#[derive(Debug, Clone)]
struct Key {
    column: usize,
    values: Vec<KeyValue>,
}

#[derive(Debug, Clone)]
enum KeyValue {
    /// `$n`, zero-based.
    Param(usize),
    Literal(ScalarValue),
    /// The elements of array parameter `$n`, zero-based (`= ANY($n)`).
    Elements(usize),
}

impl KeyValue {
    /// The value, or the array whose elements are the values.
    fn scalar<'a>(&'a self, params: &'a [ScalarValue]) -> Result<&'a ScalarValue> {
        match self {
            KeyValue::Literal(v) => Ok(v),
            KeyValue::Param(i) | KeyValue::Elements(i) => params
                .get(*i)
                .ok_or_else(|| QueryError::Invalid(format!("no value for parameter ${}", i + 1))),
        }
    }
}

/// What one key column is compared with, resolved against a snapshot.
struct Needle {
    column: usize,
    /// The values wanted (for a SYMBOL column, their dictionary codes): distinct, at least one.
    values: Vec<Scalar<ArrayRef>>,
    is_symbol: bool,
    /// The values as keys of the column's indexes ([`KeyIndexes`], [`TableKeys`]), in the
    /// order of `values`, if the column is indexable.
    index_keys: Option<Vec<i64>>,
}

/// What lookups share: the key indexes of partitions and of tables, and mapped partitions.
pub(crate) type Lookups<'a> = (&'a KeyIndexes, &'a TableKeys, &'a Arc<MappedParts>);

/// One partition of one snapshot, with the indexes that may cover it.
struct Scope<'a> {
    indexes: &'a KeyIndexes,
    table: &'a Arc<Table>,
    snapshot: &'a Snapshot,
    partition: usize,
    /// The partition's rows inside the statement's time range.
    within: Range<u64>,
    /// The most rows one partition may index or scan before the run is deferred.
    step_rows_max: u64,
    deferred: &'a Cell<bool>,
}

/// The rows a point lookup found in one snapshot, in table order, located but not yet read:
/// a caller that serves rows one by one reads them through [`LookupRows::parts`], without
/// building Arrow arrays; others take [`LookupRows::into_batches`].
#[derive(Debug)]
pub struct LookupRows {
    schema: SchemaRef,
    /// The table column behind each output column.
    projection: Vec<usize>,
    snapshot: Arc<Snapshot>,
    parts: Vec<Part>,
    rows: usize,
    /// Where mapped partitions are kept between lookups.
    mapped: Arc<MappedParts>,
}

/// Rows (ascending) of one partition, with its projected columns mapped.
pub type MappedRows<'a> = (Arc<PartRows>, &'a [u32]);

#[derive(Debug)]
enum Part {
    /// Rows (ascending) of a partition.
    Rows(usize, Vec<u32>),
    /// Rows already read, when many matched a partition's scan.
    Batch(RecordBatch),
}

impl Part {
    fn len(&self) -> usize {
        match self {
            Part::Rows(_, rows) => rows.len(),
            Part::Batch(batch) => batch.num_rows(),
        }
    }
}

impl LookupRows {
    /// The result's columns, named and typed as the statement describes them.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// How many rows were found.
    pub fn row_count(&self) -> usize {
        self.rows
    }

    /// Each partition's rows with its projected columns mapped for single-row reads (column
    /// `i` of the [`PartRows`] is output column `i`); `None` when some rows cannot be read so
    /// (a Parquet part, or rows a scan already read), and [`LookupRows::into_batches`] must.
    pub fn parts(&self) -> Result<Option<Vec<MappedRows<'_>>>> {
        let mut parts = Vec::with_capacity(self.parts.len());
        for part in &self.parts {
            let Part::Rows(partition, rows) = part else {
                return Ok(None);
            };
            match self
                .mapped
                .get(&self.snapshot, *partition, &self.projection)?
            {
                Some(mapped) => parts.push((mapped, rows.as_slice())),
                None => return Ok(None),
            }
        }
        Ok(Some(parts))
    }

    /// The rows as record batches of [`LookupRows::schema`].
    pub fn into_batches(self) -> Result<Vec<RecordBatch>> {
        self.parts
            .into_iter()
            .map(|part| match part {
                Part::Batch(batch) => Ok(batch),
                Part::Rows(partition, rows) => {
                    let columns = self
                        .projection
                        .iter()
                        .map(|&c| gather_rows(&self.snapshot, partition, c, &rows))
                        .collect::<Result<Vec<_>>>()?;
                    Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
                }
            })
            .collect()
    }

    /// Adds `part` (if it has rows), cut to the `remaining` rows a limit leaves.
    fn keep(&mut self, remaining: &mut usize, mut part: Part) {
        let n = part.len().min(*remaining);
        if n == 0 {
            return;
        }
        match &mut part {
            Part::Rows(_, rows) => rows.truncate(n),
            Part::Batch(batch) => *batch = batch.slice(0, n),
        }
        *remaining -= n;
        self.rows += n;
        self.parts.push(part);
    }
}

impl PointLookup {
    /// Recognises `[Limit] [Projection of columns] [Limit] Filter(k = v AND ...) TableScan`
    /// over a Sundial table; `None` for any other plan.
    pub(crate) fn from_plan(plan: &LogicalPlan) -> Option<PointLookup> {
        let plan_of_lookup = plan;
        let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
        let (plan, mut fetch) = strip_limit(plan)?;
        // Sorts by the designated timestamp are kept aside: lookups return rows in its order.
        let (plan, top_sort) = strip_timestamp_sort(plan, &mut fetch);
        let mut inner_sort = None;
        let (output, filter) = match plan {
            LogicalPlan::Projection(p) => {
                // The optimizer pushes a limit below the projection.
                let (input, inner_fetch) = strip_limit(p.input.as_ref())?;
                fetch = match (fetch, inner_fetch) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                let (input, sort) = strip_timestamp_sort(input, &mut fetch);
                inner_sort = sort;
                // Ordered by a column the select list leaves out (QuestDB's table order adds
                // `ORDER BY ts` to `SELECT name FROM t WHERE ...`): the sort reads a
                // projection of plain columns, which names them as the scan does.
                let input = match input {
                    LogicalPlan::Projection(inner)
                        if sort.is_some()
                            && inner.expr.iter().all(|e| matches!(e, Expr::Column(_))) =>
                    {
                        inner.input.as_ref()
                    }
                    input => input,
                };
                let filter = filtered_scan(input)?;
                let columns = p
                    .expr
                    .iter()
                    .map(|e| match e.clone().unalias() {
                        Expr::Column(c) => Some(c),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?;
                (Some((p, columns)), filter)
            }
            plan => (None, filtered_scan(plan)?),
        };
        let (scan, terms) = filter;
        if scan.fetch.is_some() {
            return None;
        }
        let provider = source_as_provider(&scan.source).ok()?;
        let table = provider.downcast_ref::<SundialTable>()?;
        let table_schema = table.schema();
        let ts = table
            .timestamp_name()
            .and_then(|name| table_schema.index_of(name).ok());
        let top_sort_column = match (top_sort, &output) {
            (None, _) => None,
            (Some(c), Some((p, columns))) => Some(&columns[p.schema.index_of_column(c).ok()?]),
            (Some(c), None) => Some(c),
        };
        for sorted_by in [top_sort_column, inner_sort].into_iter().flatten() {
            if ts.is_none() || scan_column(scan, sorted_by) != ts {
                return None;
            }
        }
        let projection = match &output {
            Some((_, columns)) => columns
                .iter()
                .map(|c| scan_column(scan, c))
                .collect::<Option<Vec<_>>>()?,
            None => (0..scan.projected_schema.fields().len())
                .map(|i| {
                    scan.projection
                        .as_ref()
                        .map_or(Some(i), |p| p.get(i).copied())
                })
                .collect::<Option<Vec<_>>>()?,
        };
        let types_match = projection.len() == schema.fields().len()
            && projection.iter().zip(schema.fields()).all(|(c, f)| {
                table_schema
                    .fields()
                    .get(*c)
                    .is_some_and(|t| t.data_type() == f.data_type())
            });
        if !types_match {
            return None;
        }
        let (keys, time) = keys(&terms, table)?;
        Some(PointLookup {
            provider,
            keys,
            time,
            projection,
            schema,
            fetch,
            plan: plan_of_lookup.clone(),
        })
    }

    pub(crate) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The optimized plan of the statement, for runs that find too many rows.
    pub(crate) fn plan(&self) -> &LogicalPlan {
        &self.plan
    }

    /// The matching rows of the table's newest snapshot, in table order, located, not yet
    /// read; [`Lookup::Deferred`] if finding them takes indexing or scanning more than
    /// `step_rows_max` rows in one partition (so a caller that cannot block long runs it
    /// elsewhere), [`Lookup::TooMany`] past [`LOOKUP_ROWS_MAX`] rows.
    pub(crate) fn find(
        &self,
        (indexes, table_keys, mapped): Lookups<'_>,
        params: &[ScalarValue],
        step_rows_max: u64,
    ) -> Result<Lookup> {
        let table = self
            .provider
            .downcast_ref::<SundialTable>()
            .ok_or_else(|| internal("point lookup over a foreign table".into()))?;
        let snapshot = table.scan_snapshot()?;
        let mut found = LookupRows {
            schema: self.schema.clone(),
            projection: self.projection.clone(),
            snapshot: snapshot.clone(),
            parts: Vec::new(),
            rows: 0,
            mapped: mapped.clone(),
        };
        if self.too_many_values(params)? {
            return Ok(Lookup::TooMany);
        }
        let Some(needles) = self.needles(&snapshot, params)? else {
            return Ok(Lookup::Found(found));
        };
        let Some(time) = self.time_range(params)? else {
            return Ok(Lookup::Found(found));
        };
        let deferred = Cell::new(false);
        let scope = |partition| Scope {
            indexes,
            table: table.table(),
            snapshot: &snapshot,
            partition,
            within: 0..snapshot.partitions()[partition].row_count,
            step_rows_max,
            deferred: &deferred,
        };
        let mut remaining = self.fetch.unwrap_or(usize::MAX);
        // The first integer key's whole-table index: one probe per value, whatever the
        // partitions.
        if let Some((first, keys)) = needles
            .iter()
            .enumerate()
            .find_map(|(i, n)| Some((i, n.index_keys.as_ref().filter(|_| !n.is_symbol)?)))
        {
            let mut hits = Vec::new();
            let mut usable = true;
            for &key in keys {
                let found = table_keys.rows(
                    table.table(),
                    &snapshot,
                    needles[first].column,
                    key,
                    step_rows_max,
                    GATHER_ROWS_MAX,
                )?;
                match found {
                    Found::Rows(rows) if hits.len() + rows.len() <= GATHER_ROWS_MAX => {
                        hits.extend(rows)
                    }
                    Found::Deferred => return Ok(Lookup::Deferred),
                    Found::Rows(_) | Found::TooMany | Found::Unindexed => {
                        usable = false;
                        break;
                    }
                }
            }
            if usable {
                // Distinct keys find distinct rows: only their order is to be restored.
                if keys.len() > 1 {
                    hits.sort_unstable();
                }
                for group in hits.chunk_by(|a, b| a.0 == b.0) {
                    if remaining == 0 {
                        break;
                    }
                    let scope = scope(group[0].0);
                    let rows = group.iter().map(|&(_, row)| row).collect();
                    let rows = within_time(&scope, rows, time)?;
                    let rows = matching_others(&scope, &needles, first, rows)?;
                    found.keep(&mut remaining, Part::Rows(group[0].0, rows));
                }
                return Ok(Lookup::Found(found));
            }
        }
        for (partition, part) in snapshot.partitions().iter().enumerate() {
            if remaining == 0 {
                break;
            }
            let mut scope = scope(partition);
            match time {
                (None, None) => {}
                (lo, hi) => {
                    if lo.is_some_and(|lo| part.max_ts < lo)
                        || hi.is_some_and(|hi| part.min_ts >= hi)
                    {
                        continue;
                    }
                    scope.within = snapshot.rows_in_range(partition, lo, hi)?;
                }
            }
            let hits = self.hits(&scope, &needles)?;
            if deferred.get() {
                return Ok(Lookup::Deferred);
            }
            match hits {
                Hits::None => {}
                Hits::Some(hits) => found.keep(&mut remaining, hits),
                Hits::TooMany => return Ok(Lookup::TooMany),
            }
            if found.rows > LOOKUP_ROWS_MAX {
                return Ok(Lookup::TooMany);
            }
        }
        Ok(Lookup::Found(found))
    }

    /// The rows of one partition that match every needle.
    fn hits(&self, scope: &Scope<'_>, needles: &[Needle]) -> Result<Hits> {
        match indexed_rows(scope, needles)? {
            Some(rows) if rows.is_empty() => Ok(Hits::None),
            Some(rows) => Ok(Hits::Some(Part::Rows(scope.partition, rows))),
            None => {
                let rows = scope.within.clone();
                if rows.is_empty() {
                    return Ok(Hits::None);
                }
                if rows.end - rows.start > scope.step_rows_max {
                    scope.deferred.set(true);
                    return Ok(Hits::None);
                }
                // Only the time range narrows the rows: all of them match.
                if needles.is_empty() {
                    let n = rows.end - rows.start;
                    if n > LOOKUP_ROWS_MAX as u64 {
                        return Ok(Hits::TooMany);
                    }
                    if n <= GATHER_ROWS_MAX as u64 && rows.end <= u64::from(u32::MAX) {
                        let rows = (rows.start as u32..rows.end as u32).collect();
                        return Ok(Hits::Some(Part::Rows(scope.partition, rows)));
                    }
                    let batch =
                        scope
                            .snapshot
                            .read_batch(scope.partition, &self.projection, rows)?;
                    let batch =
                        RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec())?;
                    return Ok(Hits::Some(Part::Batch(batch)));
                }
                let Some(mask) = scan_matches(scope, rows.clone(), needles)? else {
                    return Ok(Hits::None);
                };
                let n = mask.true_count();
                if n > LOOKUP_ROWS_MAX {
                    return Ok(Hits::TooMany);
                }
                // A few matches are gathered (reading, and for SYMBOL columns checking, only
                // them); many are filtered out of the whole partition.
                if n <= GATHER_ROWS_MAX && rows.end <= u64::from(u32::MAX) {
                    let first = rows.start as u32;
                    let picks = mask
                        .values()
                        .set_indices()
                        .map(|i| first + i as u32)
                        .collect();
                    return Ok(Hits::Some(Part::Rows(scope.partition, picks)));
                }
                let all = scope
                    .snapshot
                    .read_batch(scope.partition, &self.projection, rows)?;
                let columns = filter_record_batch(&all, &mask)?.columns().to_vec();
                let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
                Ok(Hits::Some(Part::Batch(batch)))
            }
        }
    }

    /// The time range the statement's bounds leave; `None` when no row can match (a NULL
    /// bound, or bounds that exclude each other).
    fn time_range(&self, params: &[ScalarValue]) -> Result<Option<TimeRange>> {
        let (mut lo, mut hi): TimeRange = (None, None);
        for bound in &self.time {
            let value = bound.value.scalar(params)?;
            let nanos = match value.cast_to(&DataType::Timestamp(TimeUnit::Nanosecond, None)) {
                Ok(ScalarValue::TimestampNanosecond(Some(nanos), _)) => nanos,
                Ok(_) => return Ok(None),
                Err(e) => {
                    return Err(QueryError::Invalid(format!(
                        "value {value} is no timestamp: {e}"
                    )));
                }
            };
            let (from, to) = match bound.op {
                Operator::Eq => (Some(nanos), Some(nanos.saturating_add(1))),
                Operator::Gt => (Some(nanos.saturating_add(1)), None),
                Operator::GtEq => (Some(nanos), None),
                Operator::Lt => (None, Some(nanos)),
                _ => (None, Some(nanos.saturating_add(1))),
            };
            lo = lo.max(from);
            hi = match (hi, to) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(match (lo, hi) {
            (Some(lo), Some(hi)) if lo >= hi => None,
            range => Some(range),
        })
    }

    /// Whether an array parameter holds more values than a lookup takes (as `IN` lists longer
    /// than [`LOOKUP_VALUES_MAX`] are not lookups).
    fn too_many_values(&self, params: &[ScalarValue]) -> Result<bool> {
        for key in &self.keys {
            for value in &key.values {
                if let KeyValue::Elements(_) = value
                    && elements(value.scalar(params)?)?.is_some_and(|e| e.len() > LOOKUP_VALUES_MAX)
                {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Each key's comparison values; `None` when no row can match (only NULLs, or symbols
    /// the column has never held).
    fn needles(&self, snapshot: &Snapshot, params: &[ScalarValue]) -> Result<Option<Vec<Needle>>> {
        let mut needles = Vec::with_capacity(self.keys.len());
        for key in &self.keys {
            let column = &snapshot.meta().columns[key.column];
            let is_symbol = column.column_type == ColumnType::Symbol;
            let mut values: Vec<ScalarValue> = Vec::with_capacity(key.values.len());
            let mut add = |value: &ScalarValue| -> Result<()> {
                if value.is_null() {
                    return Ok(());
                }
                let value = if is_symbol {
                    let Some(code) = symbol_code(snapshot, key.column, value) else {
                        return Ok(());
                    };
                    ScalarValue::Int32(Some(code))
                } else {
                    let wanted = column.column_type.arrow_type();
                    value.cast_to(&wanted).map_err(|e| {
                        QueryError::Invalid(format!(
                            "value {value} does not fit column '{}' ({}): {e}",
                            column.name,
                            column.column_type.name()
                        ))
                    })?
                };
                if !values.contains(&value) {
                    values.push(value);
                }
                Ok(())
            };
            for value in &key.values {
                let scalar = value.scalar(params)?;
                match value {
                    KeyValue::Elements(_) => {
                        let Some(elements) = elements(scalar)? else {
                            continue;
                        };
                        for i in 0..elements.len() {
                            add(&ScalarValue::try_from_array(&elements, i)?)?;
                        }
                    }
                    _ => add(scalar)?,
                }
            }
            if values.is_empty() {
                return Ok(None);
            }
            let index_keys = match indexable(column.column_type) {
                true => values
                    .iter()
                    .map(|v| match v.cast_to(&DataType::Int64) {
                        Ok(ScalarValue::Int64(Some(key))) => Some(key),
                        _ => None,
                    })
                    .collect(),
                false => None,
            };
            needles.push(Needle {
                column: key.column,
                values: values
                    .iter()
                    .map(|v| Ok(Scalar::new(v.to_array()?)))
                    .collect::<Result<_>>()?,
                is_symbol,
                index_keys,
            });
        }
        Ok(Some(needles))
    }
}

fn strip_limit(plan: &LogicalPlan) -> Option<(&LogicalPlan, Option<usize>)> {
    let LogicalPlan::Limit(limit) = plan else {
        return Some((plan, None));
    };
    match (limit.get_skip_type().ok()?, limit.get_fetch_type().ok()?) {
        (SkipType::Literal(0), FetchType::Literal(fetch)) => Some((limit.input.as_ref(), fetch)),
        _ => None,
    }
}

/// `plan` without a top sort by one column ascending, and that column; the sort's fetch
/// narrows `fetch`. Other plans come back unchanged.
fn strip_timestamp_sort<'a>(
    plan: &'a LogicalPlan,
    fetch: &mut Option<usize>,
) -> (&'a LogicalPlan, Option<&'a Column>) {
    let LogicalPlan::Sort(sort) = plan else {
        return (plan, None);
    };
    let [key] = sort.expr.as_slice() else {
        return (plan, None);
    };
    let Expr::Column(column) = &key.expr else {
        return (plan, None);
    };
    if !key.asc {
        return (plan, None);
    }
    *fetch = match (*fetch, sort.fetch) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    (sort.input.as_ref(), Some(column))
}

/// The table column a column of the scan's output refers to.
fn scan_column(scan: &TableScan, column: &Column) -> Option<usize> {
    let i = scan.projected_schema.index_of_column(column).ok()?;
    match &scan.projection {
        Some(p) => p.get(i).copied(),
        None => Some(i),
    }
}

/// A scan with the conjuncts that filter it, above it or pushed into it; `None` for any
/// other plan, or a scan without filters.
fn filtered_scan(plan: &LogicalPlan) -> Option<(&TableScan, Vec<&Expr>)> {
    let (scan, mut terms) = match plan {
        LogicalPlan::Filter(filter) => match filter.input.as_ref() {
            LogicalPlan::TableScan(scan) => (scan, split_conjunction(&filter.predicate)),
            _ => return None,
        },
        LogicalPlan::TableScan(scan) => (scan, Vec::new()),
        _ => return None,
    };
    terms.extend(scan.filters.iter().flat_map(split_conjunction));
    (!terms.is_empty()).then_some((scan, terms))
}

/// The filter as `column = value` and `column IN (values)` terms and bounds on the designated
/// timestamp, or `None` if any term has another shape, or if the terms need not narrow the rows
/// to a few: neither a key term nor an equality on the designated timestamp, or SYMBOL keys
/// only with a time range or several values (tags over a range, or several tags, are slices
/// of series, which the general path streams through the symbol index). Terms name table
/// columns, which the scan need not project: filters pushed into it are its own.
fn keys(terms: &[&Expr], table: &SundialTable) -> Option<(Vec<Key>, Vec<TimeBound>)> {
    let table_schema = table.schema();
    let (mut keys, mut time) = (Vec::new(), Vec::new());
    let value_of = |value: &Expr, column_type: &DataType| match value {
        Expr::Placeholder(p) => Some(KeyValue::Param(placeholder_index(&p.id)?)),
        Expr::Literal(v, _) if literal_fits(v, column_type) => Some(KeyValue::Literal(v.clone())),
        _ => None,
    };
    for term in terms {
        if let Some(bound) = time_bound(term, table) {
            let column_type = DataType::Timestamp(TimeUnit::Nanosecond, None);
            time.push(TimeBound {
                op: bound.0,
                value: value_of(bound.1, &column_type)?,
            });
            continue;
        }
        if let Some((column, array)) = any_of(term) {
            keys.push(Key {
                column: table_schema.index_of(&column.name).ok()?,
                values: vec![KeyValue::Elements(array)],
            });
            continue;
        }
        let mut values = Vec::new();
        let column = one_of(term, &mut values)?;
        if values.len() > LOOKUP_VALUES_MAX {
            return None;
        }
        let column = table_schema.index_of(&column.name).ok()?;
        let column_type = table_schema.fields().get(column)?.data_type().clone();
        let values = values
            .into_iter()
            .map(|value| value_of(value, &column_type))
            .collect::<Option<Vec<_>>>()?;
        keys.push(Key { column, values });
    }
    let is_symbol = |k: &Key| {
        matches!(
            table_schema.fields().get(k.column).map(|f| f.data_type()),
            Some(DataType::Dictionary(..))
        )
    };
    let ranged = time.iter().any(|b: &TimeBound| b.op != Operator::Eq);
    let narrow = match keys.is_empty() {
        true => time.iter().any(|b| b.op == Operator::Eq),
        false => {
            let single = |k: &Key| {
                matches!(
                    k.values.as_slice(),
                    [KeyValue::Param(_) | KeyValue::Literal(_)]
                )
            };
            !keys.iter().all(is_symbol) || (!ranged && keys.iter().all(single))
        }
    };
    narrow.then_some((keys, time))
}

/// `ts op value` with `ts` the table's designated timestamp (a TIMESTAMP), as the operator
/// with the column on the left, and the value. (Equalities are ranges too: the timestamp is
/// sorted within each partition, so its rows are found by binary search, with no index.)
fn time_bound<'a>(term: &'a Expr, table: &SundialTable) -> Option<(Operator, &'a Expr)> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = term else {
        return None;
    };
    let ts = table.timestamp_name()?;
    let is_ts = |e: &Expr| matches!(e, Expr::Column(c) if c.name == ts);
    let (op, value) = match (is_ts(left), is_ts(right)) {
        (true, false) => (*op, right.as_ref()),
        (false, true) => (op.swap()?, left.as_ref()),
        _ => return None,
    };
    let timestamp = DataType::Timestamp(TimeUnit::Nanosecond, None);
    let field = table.schema().field_with_name(ts).ok()?.data_type().clone();
    (matches!(
        op,
        Operator::Eq | Operator::Gt | Operator::GtEq | Operator::Lt | Operator::LtEq
    ) && field == timestamp)
        .then_some((op, value))
}

/// The longest `IN` list a lookup takes; longer ones are scans.
const LOOKUP_VALUES_MAX: usize = 1024;

/// The column of `term` when it says the column holds one of some values (`c = v`,
/// `c IN (v, ...)`, or a disjunction of those on one column, which is how DataFusion
/// rewrites short `IN` lists), with the values appended to `values`.
fn one_of<'a>(term: &'a Expr, values: &mut Vec<&'a Expr>) -> Option<&'a Column> {
    match term {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) => match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), v) | (v, Expr::Column(c)) if !matches!(v, Expr::Column(_)) => {
                values.push(v);
                Some(c)
            }
            _ => None,
        },
        Expr::InList(InList {
            expr,
            list,
            negated: false,
        }) if !list.is_empty() => match expr.as_ref() {
            Expr::Column(c) => {
                values.extend(list);
                Some(c)
            }
            _ => None,
        },
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            let column = one_of(left, values)?;
            (one_of(right, values)? == column).then_some(column)
        }
        _ => None,
    }
}

/// The column and array parameter (zero-based) of `column = ANY($n)`, which DataFusion plans
/// as `array_has($n, column)`.
fn any_of(term: &Expr) -> Option<(&Column, usize)> {
    let Expr::ScalarFunction(f) = term else {
        return None;
    };
    match (f.name(), f.args.as_slice()) {
        ("array_has", [Expr::Placeholder(p), Expr::Column(c)]) => {
            Some((c, placeholder_index(&p.id)?))
        }
        _ => None,
    }
}

/// The elements of an array value (`None` for a NULL array).
fn elements(array: &ScalarValue) -> Result<Option<ArrayRef>> {
    match array {
        ScalarValue::List(list) if list.len() == 1 => Ok((!list.is_null(0)).then(|| list.value(0))),
        other => Err(QueryError::Invalid(format!(
            "= ANY() takes an array, not {other}"
        ))),
    }
}

/// Literals compare as themselves only when typed like the column (the planner has already
/// coerced them) or, for SYMBOL columns, as strings.
fn literal_fits(value: &ScalarValue, column_type: &DataType) -> bool {
    match column_type {
        DataType::Dictionary(_, values) => {
            value.data_type() == **values || value.data_type() == *column_type || value.is_null()
        }
        t => value.data_type() == *t || value.is_null(),
    }
}

/// Above this many candidate rows from an index, reading row runs one by one costs more than
/// scanning the partition.
const GATHER_ROWS_MAX: usize = 1024;

/// The rows where every needle matches, found through the first indexed needle's index;
/// `None` when no needle has one (or too many rows match it) and the partition is scanned.
fn indexed_rows(scope: &Scope<'_>, needles: &[Needle]) -> Result<Option<Vec<u32>>> {
    let Some((first, keys)) = needles
        .iter()
        .enumerate()
        .find_map(|(i, n)| Some((i, n.index_keys.as_ref()?)))
    else {
        return Ok(None);
    };
    let mut rows = Vec::new();
    for &key in keys {
        let found = scope.indexes.rows(
            scope.table,
            scope.snapshot,
            scope.step_rows_max,
            (scope.partition, needles[first].column),
            key,
            scope.within.clone(),
            GATHER_ROWS_MAX,
        )?;
        match found {
            IndexRows::Hits(hits) => rows.extend(hits),
            IndexRows::Unindexed => return Ok(None),
            IndexRows::Deferred => {
                scope.deferred.set(true);
                return Ok(Some(Vec::new()));
            }
        }
        if rows.len() > GATHER_ROWS_MAX {
            return Ok(None);
        }
    }
    // Distinct keys find distinct rows: only their order is to be restored.
    if keys.len() > 1 {
        rows.sort_unstable();
    }
    matching_others(scope, needles, first, rows).map(Some)
}

/// Those of `rows` (ascending, of the scope's partition) whose designated timestamp lies in
/// `time`.
fn within_time(scope: &Scope<'_>, rows: Vec<u32>, time: TimeRange) -> Result<Vec<u32>> {
    let part = &scope.snapshot.partitions()[scope.partition];
    let (lo, hi) = time;
    let inside = |ts: i64| lo.is_none_or(|lo| ts >= lo) && hi.is_none_or(|hi| ts < hi);
    if inside(part.min_ts) && inside(part.max_ts) {
        return Ok(rows);
    }
    let Some(ts) = scope.snapshot.meta().timestamp_index else {
        return Ok(rows);
    };
    let values = gather(scope, ts, &rows)?;
    let values = values
        .as_primitive_opt::<TimestampNanosecondType>()
        .ok_or_else(|| internal("the designated timestamp read as another type".into()))?;
    Ok(rows
        .into_iter()
        .zip(values.values().iter())
        .filter_map(|(row, &ts)| inside(ts).then_some(row))
        .collect())
}

/// Those of `rows` (ascending, of the scope's partition) where every needle but the `first`
/// (which found them) matches.
fn matching_others(
    scope: &Scope<'_>,
    needles: &[Needle],
    first: usize,
    mut rows: Vec<u32>,
) -> Result<Vec<u32>> {
    for (i, needle) in needles.iter().enumerate() {
        if i == first || rows.is_empty() {
            continue;
        }
        let values = gather(scope, needle.column, &rows)?;
        let matches = compare_needle(&values, needle)?;
        rows = rows
            .iter()
            .zip(matches.values().iter())
            .filter_map(|(row, hit)| hit.then_some(*row))
            .collect();
    }
    Ok(rows)
}

/// Rows `rows` (ascending) of one column of the scope's partition, read run by run.
fn gather(scope: &Scope<'_>, column: usize, rows: &[u32]) -> Result<ArrayRef> {
    gather_rows(scope.snapshot, scope.partition, column, rows)
}

/// Rows `rows` (ascending) of one column of a partition, read run by run.
fn gather_rows(
    snapshot: &Snapshot,
    partition: usize,
    column: usize,
    rows: &[u32],
) -> Result<ArrayRef> {
    let mut pieces: Vec<ArrayRef> = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let start = rows[i];
        let mut end = start + 1;
        i += 1;
        while i < rows.len() && rows[i] == end {
            end += 1;
            i += 1;
        }
        pieces.push(snapshot.read_column(partition, column, start as u64..end as u64)?);
    }
    match pieces.len() {
        1 => Ok(pieces.swap_remove(0)),
        _ => {
            let parts: Vec<&dyn Array> = pieces.iter().map(|p| p.as_ref()).collect();
            Ok(concat(&parts)?)
        }
    }
}

/// The mask of rows in `rows` of the scope's partition where every needle matches; `None` if
/// none does.
fn scan_matches(
    scope: &Scope<'_>,
    rows: std::ops::Range<u64>,
    needles: &[Needle],
) -> Result<Option<BooleanArray>> {
    // Integer-like keys and SYMBOL codes are compared by the scan kernels, all at once.
    let keys: Option<Vec<&Vec<i64>>> = needles.iter().map(|n| n.index_keys.as_ref()).collect();
    if let Some(keys) = keys {
        let columns = needles
            .iter()
            .map(|n| {
                scope
                    .snapshot
                    .read_column(scope.partition, n.column, rows.clone())
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let values: Option<Vec<ColumnValues>> = columns
            .iter()
            .map(|c| ColumnValues::of(c.as_ref()))
            .collect();
        if let Some(values) = values {
            let leaves = keys
                .iter()
                .enumerate()
                .map(|(column, keys)| {
                    let test = match keys.as_slice() {
                        [key] => Test::Compare {
                            op: CmpOp::Eq,
                            key: *key,
                        },
                        keys => Test::In {
                            keys: keys.iter().copied().collect(),
                            negated: false,
                        },
                    };
                    Predicate::Leaf(Leaf {
                        column,
                        domain: Domain::Int,
                        arith: None,
                        test,
                        width: 8,
                    })
                })
                .collect();
            let selection =
                Predicate::and(leaves).select(&values, (rows.end - rows.start) as usize);
            if selection.none_pass() {
                return Ok(None);
            }
            return Ok(Some(BooleanArray::new(selection.into_bits(), None)));
        }
    }
    let mut mask: Option<BooleanArray> = None;
    for needle in needles {
        let values = scope
            .snapshot
            .read_column(scope.partition, needle.column, rows.clone())?;
        let matches = compare_needle(&values, needle)?;
        let combined = match mask {
            None => matches,
            Some(previous) => and(&previous, &matches)?,
        };
        if combined.true_count() == 0 {
            return Ok(None);
        }
        mask = Some(combined);
    }
    Ok(mask)
}

/// Where `values` holds one of the needle's values.
fn compare_needle(values: &ArrayRef, needle: &Needle) -> Result<BooleanArray> {
    let values: &dyn Array = match needle.is_symbol {
        false => values.as_ref(),
        true => values
            .as_any_dictionary_opt()
            .ok_or_else(|| {
                internal(format!(
                    "SYMBOL column {} read without codes",
                    needle.column
                ))
            })?
            .keys(),
    };
    let mut matches = compare(values, &needle.values[0])?;
    for value in &needle.values[1..] {
        matches = or(&matches, &compare(values, value)?)?;
    }
    Ok(matches)
}

/// `values = needle` with NULLs as non-matches, so the mask has no nulls.
fn compare(values: &dyn Array, needle: &dyn Datum) -> Result<BooleanArray> {
    let matches = eq(&values, needle)?;
    Ok(match matches.nulls() {
        None => matches,
        Some(valid) => BooleanArray::new(matches.values() & valid.inner(), None),
    })
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use sundial_storage::{Database, Durability, StorageOptions};

    use crate::{Engine, Output, collect};

    use super::*;

    fn engine() -> (Engine, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        };
        let db = Database::open(dir.path(), options).expect("open database");
        (Engine::new(db).expect("engine"), dir)
    }

    async fn run(engine: &Engine, sql: &str) -> String {
        let collected = collect(engine.run(sql).await.expect(sql)).await.expect(sql);
        pretty_format_batches(&collected.batches)
            .expect("format")
            .to_string()
    }

    async fn run_prepared(engine: &Engine, sql: &str, params: Vec<ScalarValue>) -> String {
        let prepared = engine.prepare(sql).await.expect(sql);
        assert!(prepared.is_point_lookup(), "not a point lookup: {sql}");
        let output = engine.run_prepared(&prepared, params).await.expect(sql);
        let Output::Rows(_) = &output else {
            panic!("no rows from {sql}");
        };
        let collected = collect(output).await.expect(sql);
        pretty_format_batches(&collected.batches)
            .expect("format")
            .to_string()
    }

    async fn trades(engine: &Engine) {
        engine
            .run(
                "CREATE TABLE t (ts TIMESTAMP, sym SYMBOL, id LONG, name STRING, price DOUBLE) \
                 TIMESTAMP(ts) PARTITION BY DAY",
            )
            .await
            .expect("create");
        engine
            .run(
                "INSERT INTO t VALUES \
                 ('2024-01-01T00:00:00Z', 'a', 1, 'one', 1.5), \
                 ('2024-01-01T01:00:00Z', 'b', 2, 'two', 2.5), \
                 ('2024-01-02T00:00:00Z', 'a', 1, 'uno', 3.5), \
                 ('2024-01-02T01:00:00Z', NULL, NULL, NULL, 4.5), \
                 ('2024-01-03T00:00:00Z', 'c', 3, 'three', 5.5), \
                 ('2024-01-03T02:00:00Z', 'a', 1, 'eins', 6.5)",
            )
            .await
            .expect("insert");
    }

    /// A `BIGINT[]` parameter.
    fn longs(values: &[Option<i64>]) -> ScalarValue {
        let values: Vec<ScalarValue> = values.iter().map(|v| ScalarValue::Int64(*v)).collect();
        ScalarValue::List(ScalarValue::new_list_nullable(&values, &DataType::Int64))
    }

    fn ts(text: &str) -> ScalarValue {
        ScalarValue::Utf8(Some(text.into()))
            .cast_to(&DataType::Timestamp(TimeUnit::Nanosecond, None))
            .expect("a timestamp")
    }

    /// Every lookup answers exactly what the general path answers for the same values inlined.
    #[tokio::test]
    async fn lookups_match_the_general_path() {
        let (engine, _dir) = engine();
        trades(&engine).await;
        let cases: Vec<(&str, Vec<ScalarValue>, &str)> = vec![
            (
                "SELECT ts, sym, price FROM t WHERE id = $1",
                vec![ScalarValue::Int64(Some(1))],
                "SELECT ts, sym, price FROM t WHERE id = 1",
            ),
            (
                "SELECT * FROM t WHERE sym = $1",
                vec![ScalarValue::Utf8(Some("a".into()))],
                "SELECT * FROM t WHERE sym = 'a'",
            ),
            (
                "SELECT name FROM t WHERE sym = $1 AND id = $2",
                vec![
                    ScalarValue::Utf8(Some("b".into())),
                    ScalarValue::Int64(Some(2)),
                ],
                "SELECT name FROM t WHERE sym = 'b' AND id = 2",
            ),
            (
                "SELECT price AS p, ts FROM t WHERE $1 = id LIMIT 2",
                vec![ScalarValue::Int64(Some(1))],
                "SELECT price AS p, ts FROM t WHERE 1 = id ORDER BY ts LIMIT 2",
            ),
            (
                "SELECT id FROM t WHERE name = 'three'",
                vec![],
                "SELECT id FROM t WHERE name = 'three'",
            ),
            (
                "SELECT * FROM t WHERE sym = $1",
                vec![ScalarValue::Utf8(Some("never".into()))],
                "SELECT * FROM t WHERE sym = 'never'",
            ),
            (
                "SELECT * FROM t WHERE id = $1",
                vec![ScalarValue::Int64(None)],
                // A NULL parameter matches no row (a NULL literal, `id = NULL`, is QuestDB's
                // `id IS NULL`).
                "SELECT * FROM t WHERE id = CAST(NULL AS BIGINT)",
            ),
            (
                "SELECT * FROM t WHERE id IN ($1, $2)",
                vec![ScalarValue::Int64(Some(3)), ScalarValue::Int64(Some(1))],
                "SELECT * FROM t WHERE id IN (1, 3)",
            ),
            (
                // Repeated and NULL values find each row once.
                "SELECT ts, name FROM t WHERE id IN ($1, $2, $3)",
                vec![
                    ScalarValue::Int64(Some(2)),
                    ScalarValue::Int64(None),
                    ScalarValue::Int64(Some(2)),
                ],
                "SELECT ts, name FROM t WHERE id = 2",
            ),
            (
                "SELECT name FROM t WHERE sym IN ('a', 'c') AND id = $1",
                vec![ScalarValue::Int64(Some(1))],
                "SELECT name FROM t WHERE sym IN ('a', 'c') AND id = 1",
            ),
            (
                "SELECT * FROM t WHERE sym IN ($1, $2) AND id IN (2, 3)",
                vec![
                    ScalarValue::Utf8(Some("never".into())),
                    ScalarValue::Utf8(Some("b".into())),
                ],
                "SELECT * FROM t WHERE sym = 'b' AND id IN (2, 3)",
            ),
            (
                "SELECT * FROM t WHERE name IN ('uno', 'three', 'eins')",
                vec![],
                "SELECT * FROM t WHERE name IN ('uno', 'three', 'eins')",
            ),
            (
                "SELECT ts FROM t WHERE id IN ($1, 3, 2) LIMIT 3",
                vec![ScalarValue::Int64(Some(1))],
                "SELECT ts FROM t WHERE id IN (1, 3, 2) ORDER BY ts LIMIT 3",
            ),
            (
                "SELECT * FROM t WHERE id = $1 AND ts >= $2 AND ts < $3",
                vec![
                    ScalarValue::Int64(Some(1)),
                    ts("2024-01-01T12:00:00Z"),
                    ts("2024-01-03T00:00:00Z"),
                ],
                "SELECT * FROM t WHERE id = 1 AND ts >= '2024-01-01T12:00:00Z' \
                 AND ts < '2024-01-03T00:00:00Z'",
            ),
            (
                // Bounds on the edges of partitions and of rows, either way round.
                "SELECT name FROM t WHERE sym = 'a' AND id = $1 AND ts > $2 AND $3 >= ts",
                vec![
                    ScalarValue::Int64(Some(1)),
                    ts("2024-01-01T00:00:00Z"),
                    ts("2024-01-03T00:00:00Z"),
                ],
                "SELECT name FROM t WHERE sym = 'a' AND id = 1 AND ts > '2024-01-01T00:00:00Z' \
                 AND ts <= '2024-01-03T00:00:00Z'",
            ),
            (
                "SELECT name FROM t WHERE name IN ('one', 'eins') AND ts BETWEEN $1 AND $2",
                vec![ts("2024-01-01T00:00:00Z"), ts("2024-01-03T02:00:00Z")],
                "SELECT name FROM t WHERE name IN ('one', 'eins') \
                 AND ts BETWEEN '2024-01-01T00:00:00Z' AND '2024-01-03T02:00:00Z'",
            ),
            (
                "SELECT * FROM t WHERE id = $1 AND ts <= $2",
                vec![
                    ScalarValue::Int64(Some(1)),
                    ScalarValue::TimestampNanosecond(None, None),
                ],
                "SELECT * FROM t WHERE id = 1 AND ts <= CAST(NULL AS TIMESTAMP)",
            ),
            (
                "SELECT * FROM t WHERE id = $1 AND ts >= $2 AND ts < $3",
                vec![
                    ScalarValue::Int64(Some(1)),
                    ts("2024-01-03T00:00:00Z"),
                    ts("2024-01-02T00:00:00Z"),
                ],
                "SELECT * FROM t WHERE id = 1 AND ts >= '2024-01-03T00:00:00Z' \
                 AND ts < '2024-01-02T00:00:00Z'",
            ),
            (
                // (SYMBOL, timestamp): the timestamp by binary search in its partition.
                "SELECT name, price FROM t WHERE sym = $1 AND ts = $2",
                vec![
                    ScalarValue::Utf8(Some("a".into())),
                    ts("2024-01-02T00:00:00Z"),
                ],
                "SELECT name, price FROM t WHERE sym = 'a' AND ts = '2024-01-02T00:00:00Z'",
            ),
            (
                "SELECT ts FROM t WHERE ts = $1",
                vec![ScalarValue::TimestampNanosecond(
                    Some(1_704_070_800_000_000_000),
                    None,
                )],
                "SELECT ts FROM t WHERE ts = '2024-01-01T01:00:00Z'",
            ),
            (
                // `= ANY($1)`: an array's elements, repeated and NULL ones too.
                "SELECT * FROM t WHERE id = ANY($1)",
                vec![longs(&[Some(3), Some(1), None, Some(3)])],
                "SELECT * FROM t WHERE id IN (1, 3)",
            ),
            (
                "SELECT name FROM t WHERE id = ANY($1) AND sym = $2 AND ts < $3",
                vec![
                    longs(&[Some(1), Some(2)]),
                    ScalarValue::Utf8(Some("a".into())),
                    ts("2024-01-03T00:00:00Z"),
                ],
                "SELECT name FROM t WHERE id IN (1, 2) AND sym = 'a' \
                 AND ts < '2024-01-03T00:00:00Z'",
            ),
            (
                "SELECT * FROM t WHERE id = ANY($1)",
                vec![longs(&[])],
                "SELECT * FROM t WHERE id = -1",
            ),
            (
                "SELECT * FROM t WHERE id = ANY($1)",
                vec![ScalarValue::try_from(DataType::new_list(DataType::Int64, true)).unwrap()],
                "SELECT * FROM t WHERE id = -1",
            ),
        ];
        // The general path's parallel scan may return rows in any order.
        let sorted = |text: String| {
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            lines.sort();
            lines
        };
        for (sql, params, inlined) in cases {
            let expected = sorted(run(&engine, inlined).await);
            assert_eq!(
                sorted(run_prepared(&engine, sql, params).await),
                expected,
                "{sql}"
            );
        }
    }

    /// A lookup that must first index more rows than a session may index in place runs on
    /// the blocking pool, with the same answer.
    #[tokio::test]
    async fn large_first_lookups_index_off_the_query_threads() {
        let (engine, _dir) = engine();
        engine
            .run("CREATE TABLE big (id LONG, ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY YEAR")
            .await
            .expect("create");
        engine
            .run(
                "INSERT INTO big SELECT g, to_timestamp_seconds(1704067200 + g) \
                 FROM generate_series(1, 100000) AS s(g)",
            )
            .await
            .expect("insert");
        let prepared = engine
            .prepare("SELECT ts FROM big WHERE id = $1")
            .await
            .expect("prepare");
        let params = [ScalarValue::Int64(Some(99_999))];
        // In place, the index is too much work to build.
        let now = engine.run_lookup_now(&prepared, &params, &crate::Caller::trusted());
        assert!(now.is_none(), "indexed 100,000 rows in place");
        assert_eq!(
            run_prepared(&engine, "SELECT ts FROM big WHERE id = $1", params.to_vec()).await,
            run(&engine, "SELECT ts FROM big WHERE id = 99999").await
        );
        // Built by then: later lookups are quick.
        let now = engine.run_lookup_now(&prepared, &params, &crate::Caller::trusted());
        assert_eq!(now.expect("in place").expect("found").row_count(), 1);
    }

    /// A key with more rows than a lookup reads at once is answered by the general plan.
    #[tokio::test]
    async fn keys_with_many_rows_take_the_general_plan() {
        let (engine, _dir) = engine();
        engine
            .run("CREATE TABLE many (id LONG, ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY DAY")
            .await
            .expect("create");
        engine
            .run(
                "INSERT INTO many SELECT g % 2, to_timestamp_seconds(1704067200 + g) \
                 FROM generate_series(1, 40000) AS s(g)",
            )
            .await
            .expect("insert");
        let sql = "SELECT ts FROM many WHERE id = $1";
        let prepared = engine.prepare(sql).await.expect("prepare");
        let params = [ScalarValue::Int64(Some(1))];
        let now = engine.run_lookup_now(&prepared, &params, &crate::Caller::trusted());
        assert!(now.is_none(), "20,000 rows read in place");
        assert_eq!(
            rows_found(&engine, &prepared, params.to_vec()).await,
            20_000
        );
    }

    /// Arrays longer than an `IN` list a lookup takes are answered by the general plan; with
    /// SYMBOL keys only, an array is a slice of series the general plan streams.
    #[tokio::test]
    async fn long_arrays_and_symbol_arrays_take_the_general_plan() {
        let (engine, _dir) = engine();
        trades(&engine).await;
        let sql = "SELECT name FROM t WHERE id = ANY($1)";
        let prepared = engine.prepare(sql).await.expect("prepare");
        assert!(prepared.is_point_lookup());
        let many: Vec<Option<i64>> = (0..=LOOKUP_VALUES_MAX as i64).map(Some).collect();
        let params = [longs(&many)];
        let now = engine.run_lookup_now(&prepared, &params, &crate::Caller::trusted());
        assert!(now.is_none(), "{} values looked up", many.len());
        assert_eq!(rows_found(&engine, &prepared, params.to_vec()).await, 5);
        let sql = "SELECT name FROM t WHERE sym = ANY($1)";
        let prepared = engine.prepare(sql).await.expect("prepare");
        assert!(!prepared.is_point_lookup());
        let symbols = ["c", "never", "b"].map(|s| ScalarValue::Utf8(Some(s.into())));
        let symbols = ScalarValue::List(ScalarValue::new_list_nullable(&symbols, &DataType::Utf8));
        let output = engine
            .run_prepared(&prepared, vec![symbols])
            .await
            .expect("run");
        let text = pretty_format_batches(&collect(output).await.expect("collect").batches)
            .expect("format")
            .to_string();
        assert!(
            text.contains("two") && text.contains("three") && !text.contains("one"),
            "{text}"
        );
    }

    /// Mapped partitions are reused within a snapshot and mapped again after a commit, which
    /// the next lookup sees.
    #[tokio::test]
    async fn mapped_partitions_follow_the_snapshot() {
        let (engine, _dir) = engine();
        trades(&engine).await;
        let prepared = engine
            .prepare("SELECT name FROM t WHERE id = $1")
            .await
            .expect("prepare");
        let parts = |id: i64| {
            let found = engine
                .run_lookup_now(
                    &prepared,
                    &[ScalarValue::Int64(Some(id))],
                    &crate::Caller::trusted(),
                )
                .expect("a lookup")
                .expect("found");
            let parts = found.parts().expect("parts").expect("native");
            parts
                .iter()
                .map(|(mapped, rows)| (mapped.clone(), rows.to_vec()))
                .collect::<Vec<_>>()
        };
        let first = parts(3);
        let again = parts(3);
        assert_eq!(first.len(), 1);
        assert!(Arc::ptr_eq(&first[0].0, &again[0].0), "mapped again");
        assert_eq!(engine.mapped_parts().kept("t"), 1);
        // Appended to the same partition: a new snapshot, mapped anew with its rows.
        engine
            .run("INSERT INTO t VALUES ('2024-01-03T05:00:00Z', 'c', 3, 'drei', 8.5)")
            .await
            .expect("append");
        let after = parts(3);
        assert!(
            !Arc::ptr_eq(&first[0].0, &after[0].0),
            "a stale mapping reused"
        );
        assert_eq!(after[0].0.rows(), first[0].0.rows() + 1);
        assert_eq!(after[0].1.len(), 2);
        let cell = after[0].0.cell(0, u64::from(after[0].1[1])).expect("cell");
        assert_eq!(cell, sundial_storage::Cell::Str("drei"));
        assert_eq!(engine.mapped_parts().kept("t"), 1);
    }

    #[tokio::test]
    async fn other_shapes_take_the_general_path() {
        let (engine, _dir) = engine();
        trades(&engine).await;
        for sql in [
            "SELECT * FROM t WHERE id > $1",
            "SELECT count(*) FROM t WHERE id = $1",
            "SELECT price + 1 FROM t WHERE id = $1",
            "SELECT * FROM t WHERE id = $1 OR name = 'two'",
            "SELECT * FROM t WHERE id NOT IN ($1, 2)",
            "SELECT * FROM t WHERE ts > $1",
            "SELECT * FROM t WHERE sym = $1 AND ts > $2",
            "SELECT * FROM t WHERE sym IN ($1, 'b')",
            "SELECT * FROM t WHERE id = $1 AND price > $2",
            "SELECT * FROM t WHERE id = $1 ORDER BY price",
            "SELECT * FROM t WHERE id = $1 LIMIT 1 OFFSET 1",
        ] {
            let prepared = engine.prepare(sql).await.expect(sql);
            assert!(!prepared.is_point_lookup(), "{sql}");
        }
        // An `IN` list up to the bound is a lookup; one value more is a scan.
        let list = |n: usize| {
            let values: Vec<String> = (0..n).map(|v| v.to_string()).collect();
            format!("SELECT name FROM t WHERE id IN ({})", values.join(", "))
        };
        let at_bound = engine
            .prepare(&list(LOOKUP_VALUES_MAX))
            .await
            .expect("prepare");
        assert!(at_bound.is_point_lookup());
        let past = list(LOOKUP_VALUES_MAX + 1);
        let prepared = engine.prepare(&past).await.expect("prepare");
        assert!(!prepared.is_point_lookup());
        assert_eq!(rows_found(&engine, &prepared, Vec::new()).await, 5);
    }

    /// Prepared statements read the newest commit, not the one current when they were planned.
    #[tokio::test]
    async fn prepared_statements_see_later_commits() {
        let (engine, _dir) = engine();
        trades(&engine).await;
        let lookup = engine
            .prepare("SELECT name FROM t WHERE id = $1")
            .await
            .expect("prepare");
        let general = engine
            .prepare("SELECT count(*) AS n FROM t WHERE id = $1")
            .await
            .expect("prepare");
        assert!(lookup.is_point_lookup() && !general.is_point_lookup());
        engine
            .run("INSERT INTO t VALUES ('2024-01-04T00:00:00Z', 'd', 4, 'four', 7.5)")
            .await
            .expect("insert");
        engine
            .run("ALTER TABLE t ADD COLUMN extra INT")
            .await
            .expect("add column");
        let four = || vec![ScalarValue::Int64(Some(4))];
        let names = collect(engine.run_prepared(&lookup, four()).await.expect("run"))
            .await
            .expect("collect");
        assert_eq!(names.batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
        let counts = collect(engine.run_prepared(&general, four()).await.expect("run"))
            .await
            .expect("collect");
        let text = pretty_format_batches(&counts.batches)
            .expect("format")
            .to_string();
        assert!(text.contains("| 1 |"), "{text}");

        engine
            .run("ALTER TABLE t DROP COLUMN name")
            .await
            .expect("drop column");
        let error = match engine.run_prepared(&lookup, four()).await {
            Ok(_) => panic!("a dropped column still read"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains("prepare it again"), "{error}");
    }

    async fn row_count(engine: &Engine, prepared: &crate::Prepared, id: i64) -> usize {
        rows_found(engine, prepared, vec![ScalarValue::Int64(Some(id))]).await
    }

    /// The number of rows a prepared statement returns for `params`.
    async fn rows_found(
        engine: &Engine,
        prepared: &crate::Prepared,
        params: Vec<ScalarValue>,
    ) -> usize {
        let output = engine.run_prepared(prepared, params).await.expect("run");
        let collected = collect(output).await.expect("collect");
        collected.batches.iter().map(|b| b.num_rows()).sum()
    }

    /// An index built before an append covers the appended rows, and a table dropped and
    /// created again under the same name gets a new index.
    #[tokio::test]
    async fn indexes_follow_appends_and_recreated_tables() {
        let (engine, _dir) = engine();
        trades(&engine).await;
        let lookup = engine
            .prepare("SELECT ts FROM t WHERE id = $1")
            .await
            .expect("prepare");
        assert_eq!(row_count(&engine, &lookup, 3).await, 1);
        engine
            .run("INSERT INTO t VALUES ('2024-01-03T05:00:00Z', 'c', 3, 'drei', 8.5)")
            .await
            .expect("append");
        assert_eq!(row_count(&engine, &lookup, 3).await, 2);
        // Out of order: the partition is rewritten under a new version.
        engine
            .run("INSERT INTO t VALUES ('2024-01-03T01:00:00Z', 'c', 3, 'tres', 9.5)")
            .await
            .expect("out of order");
        assert_eq!(row_count(&engine, &lookup, 3).await, 3);

        engine.run("DROP TABLE t").await.expect("drop");
        trades(&engine).await;
        let lookup = engine
            .prepare("SELECT ts FROM t WHERE id = $1")
            .await
            .expect("prepare");
        assert_eq!(row_count(&engine, &lookup, 3).await, 1);
    }

    /// With no memory for indexes, every partition is scanned, with the same answers.
    #[test]
    fn a_full_budget_scans_instead() {
        let indexes = KeyIndexes::new(0);
        let (engine, _dir) = engine();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime.block_on(trades(&engine));
        let table = engine.db().table("t").expect("table");
        let snapshot = table.snapshot();
        let rows = indexes
            .rows(
                &table,
                &snapshot,
                u64::MAX,
                (0, 2),
                1,
                0..u64::MAX,
                usize::MAX,
            )
            .expect("rows");
        assert!(matches!(rows, IndexRows::Unindexed));
    }

    /// An index that needs more work than allowed defers; once built it answers within any
    /// allowance.
    #[tokio::test]
    async fn indexing_beyond_the_allowance_is_deferred() {
        let indexes = KeyIndexes::new(1 << 20);
        let (engine, _dir) = engine();
        trades(&engine).await;
        let table = engine.db().table("t").expect("table");
        let snapshot = table.snapshot();
        let rows = |allowed| {
            indexes.rows(
                &table,
                &snapshot,
                allowed,
                (0, 2),
                1,
                0..u64::MAX,
                usize::MAX,
            )
        };
        assert!(matches!(rows(1).expect("rows"), IndexRows::Deferred));
        assert!(matches!(rows(u64::MAX).expect("rows"), IndexRows::Hits(h) if h == [0]));
        assert!(matches!(rows(0).expect("rows"), IndexRows::Hits(h) if h == [0]));
    }

    /// A rewritten part's index replaces the old version's instead of piling up, and the parts
    /// an out-of-order merge leaves (see sundial-storage's `merge.rs`) are indexed apart.
    #[tokio::test]
    async fn rewritten_partitions_replace_their_index() {
        let indexes = KeyIndexes::new(1 << 20);
        let (engine, _dir) = engine();
        trades(&engine).await;
        let table = engine.db().table("t").expect("table");
        for hour in 0..5 {
            let snapshot = table.snapshot();
            let mut found = 0;
            // The last partition's parts.
            for part in 2..snapshot.partitions().len() {
                let hits = indexes
                    .rows(
                        &table,
                        &snapshot,
                        u64::MAX,
                        (part, 2),
                        3,
                        0..u64::MAX,
                        usize::MAX,
                    )
                    .expect("rows");
                let IndexRows::Hits(hits) = hits else {
                    panic!("{hour}: no index");
                };
                assert!(
                    hits.iter()
                        .all(|r| u64::from(*r) < snapshot.partitions()[part].row_count)
                );
                found += hits.len();
            }
            assert_eq!(found, 1 + hour, "{hour}");
            // Out of order within the last partition: a new version of its tail.
            engine
                .run(&format!(
                    "INSERT INTO t VALUES ('2024-01-03T00:{hour:02}:30Z', 'c', 3, 'x', 0.5)"
                ))
                .await
                .expect("insert");
        }
        let parts = table.snapshot().partitions().len() - 2;
        assert!(
            indexes.len() <= parts + 1,
            "{} indexes of {parts} parts",
            indexes.len()
        );
    }
}

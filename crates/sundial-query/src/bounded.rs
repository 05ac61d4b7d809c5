//! Functions whose result can be far larger than their arguments (`repeat('x', 1e9)`,
//! `range(1, 2e9)`, `lpad(s, 2e9)`) check the size of what they would build before they
//! build it.
//!
//! Operators reserve what they hold from the query's memory pool, but a scalar function's
//! result is built in one call outside it. Every other scalar function builds a result about
//! as large as its arguments, which are already bounded (batches of rows, the message size);
//! the functions here build as much as an argument's *value* says. Each is wrapped so that,
//! before the real function runs on a batch, the bytes its results would take are estimated
//! from the arguments (an upper bound where cheap, else a close estimate), and a batch over
//! the bound fails with DataFusion's resources-exhausted error (SQLSTATE 53200).
//!
//! ```text
//!  invoke(args) ──▶ estimate bytes from args ──over bound──▶ Err(ResourcesExhausted)
//!                         │ within
//!                         ▼
//!                   the real function
//! ```
//!
//! The bound is a fraction of the query memory limit ([`RESULT_SHARE_OF_QUERY_MEMORY`]),
//! since one result is copied a few times before it leaves (builders grow by doubling,
//! answers are encoded), or [`RESULT_BYTES_MAX_UNLIMITED`] when queries have no limit.
//! Constant arguments are folded at planning, so `SELECT repeat('x', 1e9)` fails before it
//! runs.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::kernels::length::length;
use datafusion::arrow::compute::{CastOptions, cast_with_options};
use datafusion::arrow::datatypes::{DataType, FieldRef, Int64Type, IntervalUnit, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature,
};

/// One result may take at most this share (1/n) of the query memory limit.
pub const RESULT_SHARE_OF_QUERY_MEMORY: usize = 8;

/// The bound on one result when queries have no memory limit: PostgreSQL's largest value.
pub const RESULT_BYTES_MAX_UNLIMITED: usize = 1 << 30;

/// The query memory limit the wrapped functions read (0: none), shared with the engine.
#[derive(Debug, Default)]
pub struct ResultBound(AtomicUsize);

impl ResultBound {
    pub fn set_query_memory_bytes_max(&self, bytes: usize) {
        self.0.store(bytes, Ordering::Relaxed);
    }

    fn bytes_max(&self) -> usize {
        match self.0.load(Ordering::Relaxed) {
            0 => RESULT_BYTES_MAX_UNLIMITED,
            limit => (limit / RESULT_SHARE_OF_QUERY_MEMORY).min(RESULT_BYTES_MAX_UNLIMITED),
        }
    }
}

/// Estimates the bytes a function's results for one batch take, from its arguments.
type Estimate = fn(&Args) -> Result<u64>;

/// A batch's arguments: constants are looked at once, not repeated per row.
struct Args<'a> {
    values: &'a [ColumnarValue],
    rows: usize,
}

impl Args<'_> {
    fn get(&self, i: usize) -> Option<&ColumnarValue> {
        self.values.get(i)
    }

    /// `f` of argument `i` for each row: computed once for a constant.
    fn per_row<T: Clone>(
        &self,
        i: usize,
        f: impl Fn(&ArrayRef) -> Result<Vec<T>>,
    ) -> Result<Option<Vec<T>>> {
        let Some(value) = self.values.get(i) else {
            return Ok(None);
        };
        Ok(Some(match value {
            ColumnarValue::Array(array) => f(array)?,
            ColumnarValue::Scalar(scalar) => {
                let one = f(&scalar.to_array_of_size(1)?)?;
                match one.into_iter().next() {
                    Some(v) => vec![v; self.rows],
                    None => Vec::new(),
                }
            }
        }))
    }
}

/// The functions wrapped, by name, with their estimate.
const BOUNDED: &[(&str, Estimate)] = &[
    ("repeat", repeat),
    ("lpad", pad),
    ("rpad", pad),
    ("replace", replace),
    ("regexp_replace", regexp_replace),
    ("range", series),
    ("generate_series", series),
    ("array_repeat", array_repeat),
    ("array_resize", array_resize),
];

/// Replaces each function of [`BOUNDED`] in `ctx` by its checked form.
pub fn install(ctx: &SessionContext, bound: Arc<ResultBound>) {
    for (name, estimate) in BOUNDED {
        let Ok(inner) = ctx.udf(name) else {
            continue;
        };
        ctx.register_udf(ScalarUDF::new_from_impl(Checked {
            inner,
            estimate: *estimate,
            bound: bound.clone(),
        }));
    }
}

/// A function that checks its results' size before building them.
#[derive(Debug)]
struct Checked {
    inner: Arc<ScalarUDF>,
    estimate: Estimate,
    bound: Arc<ResultBound>,
}

impl PartialEq for Checked {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Checked {}

impl Hash for Checked {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.name().hash(state);
    }
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn is_strict(&self) -> bool {
        self.inner.inner().is_strict()
    }

    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        let inner = self.inner.inner().with_updated_config(config)?;
        Some(ScalarUDF::new_from_impl(Checked {
            inner: Arc::new(inner),
            estimate: self.estimate,
            bound: self.bound.clone(),
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let bytes = (self.estimate)(&Args {
            values: &args.args,
            rows: args.number_rows.max(1),
        })?;
        let bytes_max = self.bound.bytes_max();
        if bytes > bytes_max as u64 {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{}() would build about {bytes} bytes, more than the {bytes_max} bytes one \
                 result may take (1/{RESULT_SHARE_OF_QUERY_MEMORY} of the query memory limit, \
                 --query-memory-bytes-max)",
                self.inner.name()
            )));
        }
        self.inner.invoke_with_args(args)
    }
}

/// Refuses plans with a constant so large that making a column of it (one copy per row of a
/// batch, as a projection does) would take more than one result may: the size check of the
/// functions above happens when they are folded into such a constant at planning, before
/// the expansion the plan would make at run time (`SELECT unnest(range(1, 100000)) FROM t`).
#[derive(Debug)]
pub struct BoundLiterals(pub Arc<ResultBound>);

impl datafusion::physical_optimizer::PhysicalOptimizerRule for BoundLiterals {
    fn name(&self) -> &str {
        "sundial_bound_literals"
    }

    fn optimize(
        &self,
        plan: Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
        use datafusion::physical_expr::expressions::Literal;

        let batch_rows = config.execution.batch_size.get() as u64;
        let bytes_max = self.0.bytes_max() as u64;
        let mut refused = None;
        plan.apply(|node| {
            let rows = if reads_one_row(node) { 1 } else { batch_rows };
            node.apply_expressions(&mut |root| {
                root.apply(|e| {
                    if let Some(literal) = e.downcast_ref::<Literal>() {
                        let bytes = (literal.value().size() as u64).saturating_mul(rows);
                        if bytes > bytes_max {
                            refused = Some(DataFusionError::ResourcesExhausted(format!(
                                "a constant of {} bytes would take about {bytes} bytes as a \
                                 column of {rows} rows, more than the {bytes_max} bytes one \
                                 result may take (1/{RESULT_SHARE_OF_QUERY_MEMORY} of the query \
                                 memory limit, --query-memory-bytes-max)",
                                literal.value().size()
                            )));
                            return Ok(TreeNodeRecursion::Stop);
                        }
                    }
                    Ok(TreeNodeRecursion::Continue)
                })
            })
        })?;
        match refused {
            Some(e) => Err(e),
            None => Ok(plan),
        }
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether every input of `node` is a single row (`SELECT` without `FROM`), so a constant
/// becomes a column of one row.
fn reads_one_row(node: &Arc<dyn datafusion::physical_plan::ExecutionPlan>) -> bool {
    use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
    let children = node.children();
    if children.is_empty() {
        return node.downcast_ref::<PlaceholderRowExec>().is_some();
    }
    children.into_iter().all(reads_one_row)
}

// ---------------------------------------------------------------------------------------------
// Estimates: upper bounds in bytes over every row of the batch. NULLs and values that do not
// convert count as 0, as the function then builds nothing (or fails by itself).
// ---------------------------------------------------------------------------------------------

/// `repeat(s, n)`: |s| * n.
fn repeat(args: &Args) -> Result<u64> {
    let (Some(s), Some(n)) = (args.per_row(0, byte_lengths)?, args.per_row(1, integers)?) else {
        return Ok(0);
    };
    Ok(sum_rows(s.len().min(n.len()), |r| {
        s[r].saturating_mul(positive(n[r]))
    }))
}

/// `lpad(s, n [, fill])`, `rpad`: n characters, up to 4 bytes each.
fn pad(args: &Args) -> Result<u64> {
    let Some(n) = args.per_row(1, integers)? else {
        return Ok(0);
    };
    Ok(sum_rows(n.len(), |r| positive(n[r]).saturating_mul(4)))
}

/// `replace(s, from, to)`: every |from| bytes of s may become |to|.
fn replace(args: &Args) -> Result<u64> {
    let (Some(s), Some(from), Some(to)) = (
        args.per_row(0, byte_lengths)?,
        args.per_row(1, byte_lengths)?,
        args.per_row(2, byte_lengths)?,
    ) else {
        return Ok(0);
    };
    Ok(sum_rows(s.len().min(from.len()).min(to.len()), |r| {
        let matches = s[r] / from[r].max(1);
        s[r].saturating_add(matches.saturating_mul(to[r]))
    }))
}

/// `regexp_replace(s, pattern, replacement [, flags])`: a match may be empty, so one at each
/// of the |s| + 1 positions, each copying the replacement.
fn regexp_replace(args: &Args) -> Result<u64> {
    let (Some(s), Some(r)) = (
        args.per_row(0, byte_lengths)?,
        args.per_row(2, byte_lengths)?,
    ) else {
        return Ok(0);
    };
    Ok(sum_rows(s.len().min(r.len()), |i| {
        s[i].saturating_add(s[i].saturating_add(1).saturating_mul(r[i]))
    }))
}

/// `range(stop)`, `range(start, stop [, step])`, `generate_series`: 8 bytes an element.
fn series(args: &Args) -> Result<u64> {
    let (start, stop, step) = match args.values.len() {
        0 => return Ok(0),
        1 => (None, args.per_row(0, instants)?, None),
        2 => (args.per_row(0, instants)?, args.per_row(1, instants)?, None),
        _ => (
            args.per_row(0, instants)?,
            args.per_row(1, instants)?,
            args.per_row(2, steps)?,
        ),
    };
    let Some(stop) = stop else {
        return Ok(0);
    };
    let rows = stop.len();
    let start = start.unwrap_or_else(|| vec![Some(0); rows]);
    // Without a step: 1 (a temporal series needs one).
    let step = step.unwrap_or_else(|| vec![Some(1); rows]);
    Ok(sum_rows(rows.min(start.len()).min(step.len()), |r| {
        let (Some(a), Some(b), Some(s)) = (start[r], stop[r], step[r]) else {
            return 0;
        };
        let span = (i128::from(b) - i128::from(a)).unsigned_abs();
        let elements = span / u128::from(s.unsigned_abs().max(1)) + 1;
        u64::try_from(elements.saturating_mul(8)).unwrap_or(u64::MAX)
    }))
}

/// `array_repeat(element, n)`: n copies of the element.
fn array_repeat(args: &Args) -> Result<u64> {
    let (Some(element), Some(n)) = (args.get(0), args.per_row(1, integers)?) else {
        return Ok(0);
    };
    let element_bytes = match element {
        ColumnarValue::Array(a) => average_bytes(a),
        ColumnarValue::Scalar(s) => (s.size() as u64).max(8),
    };
    Ok(sum_rows(n.len(), |r| {
        positive(n[r]).saturating_mul(element_bytes)
    }))
}

/// `array_resize(array, n [, value])`: n elements.
fn array_resize(args: &Args) -> Result<u64> {
    let Some(n) = args.per_row(1, integers)? else {
        return Ok(0);
    };
    Ok(sum_rows(n.len(), |r| positive(n[r]).saturating_mul(8)))
}

fn sum_rows(rows: usize, bytes: impl Fn(usize) -> u64) -> u64 {
    (0..rows).fold(0u64, |total, r| total.saturating_add(bytes(r)))
}

fn positive(n: Option<i64>) -> u64 {
    n.map_or(0, |n| n.max(0).unsigned_abs())
}

/// Bytes an element of `array` takes on average, at least 8.
fn average_bytes(array: &ArrayRef) -> u64 {
    let rows = array.len().max(1);
    ((array.get_array_memory_size() / rows) as u64).max(8)
}

/// Each row's length in bytes (strings, binaries) or elements (lists); NULL as 0.
fn byte_lengths(array: &ArrayRef) -> Result<Vec<u64>> {
    let lengths = match array.data_type() {
        DataType::Null => return Ok(vec![0; array.len()]),
        _ => match length(array.as_ref()) {
            Ok(lengths) => lengths,
            // Not a string (a number `repeat` casts itself): its text is short.
            Err(_) => return Ok(vec![24; array.len()]),
        },
    };
    let lengths = integers(&lengths)?;
    Ok(lengths.into_iter().map(positive).collect())
}

/// Each row as an integer, NULL where it is NULL or does not convert.
fn integers(array: &ArrayRef) -> Result<Vec<Option<i64>>> {
    let options = CastOptions {
        safe: true,
        ..CastOptions::default()
    };
    let Ok(cast) = cast_with_options(array, &DataType::Int64, &options) else {
        return Ok(vec![None; array.len()]);
    };
    Ok(cast.as_primitive::<Int64Type>().iter().collect())
}

/// Series bounds as integers: numbers as they are, dates and timestamps in nanoseconds.
fn instants(array: &ArrayRef) -> Result<Vec<Option<i64>>> {
    let nanos_per = match array.data_type() {
        DataType::Date32 => 86_400_000_000_000,
        DataType::Date64 => 1_000_000,
        DataType::Timestamp(unit, _) => unit_nanos(unit),
        _ => 1,
    };
    let values = integers(array)?;
    Ok(values
        .into_iter()
        .map(|v| v.map(|v| v.saturating_mul(nanos_per)))
        .collect())
}

fn unit_nanos(unit: &TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// Series steps: numbers as they are, intervals as their shortest length in nanoseconds (a
/// month as 28 days).
fn steps(array: &ArrayRef) -> Result<Vec<Option<i64>>> {
    const DAY_NANOS: i128 = 86_400_000_000_000;
    let shortest = |months: i128, days: i128, nanos: i128| {
        let total = months * 28 * DAY_NANOS + days * DAY_NANOS + nanos;
        i64::try_from(total).ok()
    };
    let rows = 0..array.len();
    let valid = |r: usize| array.is_valid(r);
    Ok(match array.data_type() {
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let a = array.as_primitive::<datafusion::arrow::datatypes::IntervalMonthDayNanoType>();
            rows.map(|r| {
                let v = a.value(r);
                valid(r)
                    .then(|| shortest(v.months.into(), v.days.into(), v.nanoseconds.into()))
                    .flatten()
            })
            .collect()
        }
        DataType::Interval(IntervalUnit::DayTime) => {
            let a = array.as_primitive::<datafusion::arrow::datatypes::IntervalDayTimeType>();
            rows.map(|r| {
                let v = a.value(r);
                valid(r)
                    .then(|| shortest(0, v.days.into(), i128::from(v.milliseconds) * 1_000_000))
                    .flatten()
            })
            .collect()
        }
        DataType::Interval(IntervalUnit::YearMonth) => {
            let a = array.as_primitive::<datafusion::arrow::datatypes::IntervalYearMonthType>();
            rows.map(|r| {
                valid(r)
                    .then(|| shortest(a.value(r).into(), 0, 0))
                    .flatten()
            })
            .collect()
        }
        _ => integers(array)?,
    })
}

#[cfg(test)]
mod tests {
    use crate::Engine;

    async fn run(engine: &Engine, sql: &str) -> crate::Result<Vec<crate::Collected>> {
        engine.execute(sql).await
    }

    #[tokio::test]
    async fn results_over_the_bound_fail_before_they_are_built() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sundial_storage::Database::open(dir.path(), Default::default()).expect("db");
        let mut engine = Engine::new(db).expect("engine");
        // 1 MiB of query memory: one result may take 128 KiB.
        engine.set_query_memory_bytes_max(1 << 20);
        for sql in [
            "SELECT repeat('x', 1000000000)",
            "SELECT lpad('x', 2000000000, 'ab')",
            "SELECT rpad('x', 200000)",
            "SELECT cardinality(range(1, 2000000000))",
            "SELECT cardinality(generate_series(1, 20000000))",
            "SELECT cardinality(range(TIMESTAMP '2000-01-01', TIMESTAMP '2100-01-01', \
             INTERVAL '1 second'))",
            "SELECT cardinality(array_repeat(1, 100000000))",
            "SELECT replace(repeat('a', 1000), 'a', repeat('b', 1000))",
            "SELECT regexp_replace(repeat('a', 1000), '', repeat('b', 1000), 'g')",
            "SELECT count(*) FROM generate_series(1, 3) t(v) WHERE \
             length(repeat('x', 100000 * v)) > 0",
            // Folded to one constant at planning, then copied for every row of a batch.
            "SELECT count(*) FROM (SELECT unnest(range(1, 100000)) FROM generate_series(1, \
             100000))",
            "SELECT repeat('x', 100000) FROM generate_series(1, 100000)",
        ] {
            let err = run(&engine, sql).await.expect_err(sql);
            assert_eq!(err.sqlstate(), "53200", "{sql}: {err}");
            assert!(
                err.to_string().contains("query memory limit"),
                "{sql}: {err}"
            );
        }
        // Results within the bound are built as before, and a large constant of one row.
        for (sql, expected) in [
            (
                "SELECT length(s) FROM (SELECT repeat('x', 100000) AS s)",
                "100000",
            ),
            ("SELECT length(repeat('ab', 1000))", "2000"),
            ("SELECT length(lpad('x', 5000, 'ab'))", "5000"),
            ("SELECT cardinality(range(1, 10000))", "9999"),
            ("SELECT length(replace('abc', 'b', 'xyz'))", "5"),
        ] {
            let out = run(&engine, sql).await.expect(sql);
            let batch = &out[0].batches[0];
            let text = datafusion::arrow::util::display::array_value_to_string(batch.column(0), 0)
                .expect("text");
            assert_eq!(text, expected, "{sql}");
        }
    }
}

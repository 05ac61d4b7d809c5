//! QuestDB's time functions, as DataFusion scalar UDFs:
//!
//! - `timestamp_floor(stride, ts [, origin [, time_zone]])`: the start of `ts`'s bucket;
//!   buckets are `origin + k * stride` (epoch-aligned by default, weeks start on Monday),
//!   computed in `time_zone`'s wall-clock time when one is given. SAMPLE BY buckets with it.
//! - `dateadd(unit, n, ts)`: `ts` moved by `n` units (`'M'` adds calendar months).
//! - `datediff(unit, a, b)`: whole units between `a` and `b`, `|b - a|`.
//! - `to_timezone(ts, tz)`: the wall-clock time in `tz` of the UTC instant `ts`;
//!   `to_utc(ts, tz)` the inverse.
//! - `sample_grid(stride, lo, hi, origin, time_zone)`: the starts of every bucket
//!   `timestamp_floor` cuts `[lo, hi)` into, as a list: the buckets SAMPLE BY ... FILL (and
//!   the gap-fill functions, `time_bucket_gapfill` & co.) fill.
//! - `timestamp_ceil(unit, ts)`: the start of the bucket after `ts`'s (QuestDB 9.3.4 moves a
//!   timestamp already on a bucket's start to the next one too); for `U` and `n`, `ts` rounded
//!   up to the unit.
//! - `to_str(ts, pattern)` prints and `to_timestamp(text, pattern)` reads a timestamp in a
//!   QuestDB pattern (`date_format`); `to_timestamp` with a chrono pattern (one holding `%`)
//!   or without one is DataFusion's.
//!
//! Timestamps are `Timestamp(Nanosecond)` (others are cast); units and time zones must be
//! constants.

use std::sync::Arc;

use chrono::DateTime;
use chrono_tz::Tz;
use std::ops::Range;

use datafusion::arrow::array::{
    Array, ArrayRef, Int64Array, ListBuilder, StringArray, StringBuilder, TimestampNanosecondArray,
    TimestampNanosecondBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, TimeUnit};
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;

use sundial_sql::questdb::stride::{Step, Stride, Unit, local_to_utc, parse_zone, utc_offset_ns};

use crate::date_format::Pattern;

const TIMESTAMP: DataType = DataType::Timestamp(TimeUnit::Nanosecond, None);

/// Registers the functions with `ctx`.
pub(crate) fn register(ctx: &SessionContext) {
    for kind in [
        Kind::TimestampFloor,
        Kind::DateAdd,
        Kind::DateDiff,
        Kind::ToTimezone,
        Kind::ToUtc,
        Kind::TimestampCeil,
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(TimeFunction::new(kind)));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(SampleGrid::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(ToStr::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(ToTimestamp::new()));
    ctx.register_udwf(crate::fill_linear::fill_linear());
}

/// Buckets one `sample_grid` call may produce: a FILL over more would hold too many rows.
pub(crate) const GRID_BUCKETS_MAX: usize = 1 << 22;

/// `sample_grid(stride, lo, hi, origin, time_zone)`: see the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SampleGrid {
    signature: Signature,
    /// The floor function whose argument handling (stride, zone) the grid shares.
    floor: TimeFunction,
}

impl SampleGrid {
    fn new() -> Self {
        SampleGrid {
            signature: Signature::exact(
                vec![
                    DataType::Utf8,
                    TIMESTAMP,
                    TIMESTAMP,
                    TIMESTAMP,
                    DataType::Utf8,
                ],
                Volatility::Immutable,
            ),
            floor: TimeFunction::new(Kind::TimestampFloor),
        }
    }

    fn item() -> Arc<Field> {
        Arc::new(Field::new("item", TIMESTAMP, true))
    }
}

impl ScalarUDFImpl for SampleGrid {
    fn name(&self) -> &str {
        "sample_grid"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::List(SampleGrid::item()))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let a = &args.args;
        let error = |m: String| DataFusionError::Plan(format!("sample_grid: {m}"));
        let stride = self.floor.stride(&a[0])?;
        let step = stride
            .step()
            .ok_or_else(|| error("stride too large".into()))?;
        let zone = self.floor.zone(&a[4])?;
        let (lo, hi, origin) = (
            timestamps(&a[1], rows)?,
            timestamps(&a[2], rows)?,
            timestamps(&a[3], rows)?,
        );
        let mut out =
            ListBuilder::new(TimestampNanosecondBuilder::new()).with_field(SampleGrid::item());
        for row in 0..rows {
            if lo.is_null(row) || hi.is_null(row) {
                out.append_null();
                continue;
            }
            let origin = match origin.is_null(row) {
                true => stride.calendar_origin(),
                false => origin.value(row),
            };
            let buckets = grid(step, origin, zone, lo.value(row)..hi.value(row))
                .ok_or_else(|| error("a bucket falls outside the timestamp range".into()))?;
            if buckets.len() > GRID_BUCKETS_MAX {
                return Err(error(format!(
                    "FILL would make more than {GRID_BUCKETS_MAX} buckets of '{}'; \
                     use a longer stride or a narrower range (SAMPLE BY's FROM ... TO, or the \
                     start and finish of time_bucket_gapfill/date_bin_gapfill)",
                    self.floor
                        .constant_text(&a[0], "stride")?
                        .unwrap_or_default()
                )));
            }
            out.values().append_slice(&buckets);
            out.append(true);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// The starts of the buckets holding `[range.start, range.end)`, at most one past
/// [`GRID_BUCKETS_MAX`]; `None` if one is not a representable instant.
fn grid(step: Step, origin: i64, zone: Option<Tz>, range: Range<i64>) -> Option<Vec<i64>> {
    let floor_one = |t: i64| match zone {
        None => step.floor(t, origin),
        Some(zone) => {
            let local = t.checked_add(utc_offset_ns(&zone, t))?;
            local_to_utc(&zone, step.floor(local, origin)?)
        }
    };
    let mut out = Vec::new();
    if range.start >= range.end {
        return Some(out);
    }
    let mut bucket = floor_one(range.start)?;
    while bucket < range.end && out.len() <= GRID_BUCKETS_MAX {
        out.push(bucket);
        // In a time zone a bucket may last up to an hour longer than its stride (a clock
        // change): probe further until the next bucket starts.
        let mut probe = step.add(bucket, 1)?;
        loop {
            let next = floor_one(probe)?;
            if next > bucket {
                bucket = next;
                break;
            }
            probe = probe.checked_add(HOUR_NS)?;
        }
    }
    Some(out)
}

const HOUR_NS: i64 = 3_600_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    TimestampFloor,
    DateAdd,
    DateDiff,
    ToTimezone,
    ToUtc,
    TimestampCeil,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::TimestampFloor => "timestamp_floor",
            Kind::DateAdd => "dateadd",
            Kind::DateDiff => "datediff",
            Kind::ToTimezone => "to_timezone",
            Kind::ToUtc => "to_utc",
            Kind::TimestampCeil => "timestamp_ceil",
        }
    }

    /// The type each argument is coerced to, and how many arguments are required.
    fn parameters(self) -> (&'static [DataType], usize) {
        const FLOOR: &[DataType] = &[DataType::Utf8, TIMESTAMP, TIMESTAMP, DataType::Utf8];
        const ADD: &[DataType] = &[DataType::Utf8, DataType::Int64, TIMESTAMP];
        const DIFF: &[DataType] = &[DataType::Utf8, TIMESTAMP, TIMESTAMP];
        const ZONE: &[DataType] = &[TIMESTAMP, DataType::Utf8];
        const CEIL: &[DataType] = &[DataType::Utf8, TIMESTAMP];
        match self {
            Kind::TimestampCeil => (CEIL, 2),
            Kind::TimestampFloor => (FLOOR, 2),
            Kind::DateAdd => (ADD, 3),
            Kind::DateDiff => (DIFF, 3),
            Kind::ToTimezone | Kind::ToUtc => (ZONE, 2),
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimeFunction {
    kind: Kind,
    signature: Signature,
}

impl TimeFunction {
    fn new(kind: Kind) -> Self {
        TimeFunction {
            kind,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    fn error(&self, message: impl std::fmt::Display) -> DataFusionError {
        DataFusionError::Plan(format!("{}: {message}", self.kind.name()))
    }
}

impl ScalarUDFImpl for TimeFunction {
    fn name(&self) -> &str {
        self.kind.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        let (types, required) = self.kind.parameters();
        if arg_types.len() < required || arg_types.len() > types.len() {
            return Err(self.error(format!(
                "takes {} arguments, {} given",
                if required == types.len() {
                    required.to_string()
                } else {
                    format!("{required} to {}", types.len())
                },
                arg_types.len()
            )));
        }
        Ok(types[..arg_types.len()].to_vec())
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(match self.kind {
            Kind::DateDiff => DataType::Int64,
            _ => TIMESTAMP,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let a = &args.args;
        let out: ArrayRef = match self.kind {
            Kind::TimestampFloor => {
                let stride = self.stride(&a[0])?;
                let step = stride
                    .step()
                    .ok_or_else(|| self.error("stride too large"))?;
                let ts = timestamps(&a[1], rows)?;
                let origin = match a.get(2) {
                    Some(v) => constant_timestamp(v).map_err(|m| self.error(m))?,
                    None => None,
                };
                let zone = match a.get(3) {
                    Some(v) => self.zone(v)?,
                    None => None,
                };
                let origin = origin.unwrap_or(stride.calendar_origin());
                Arc::new(floor(&ts, step, origin, zone))
            }
            Kind::TimestampCeil => {
                let unit = self.unit(&a[0])?;
                let ts = timestamps(&a[1], rows)?;
                Arc::new(ceil(&ts, unit))
            }
            Kind::DateAdd => {
                let unit = self.unit(&a[0])?;
                let n = a[1].clone().into_array(rows)?;
                let n = n
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .ok_or_else(|| self.error("the count must be an integer"))?;
                let ts = timestamps(&a[2], rows)?;
                let out: TimestampNanosecondArray = ts
                    .iter()
                    .zip(n.iter())
                    .map(|(t, n)| unit_step(unit)?.add(t?, n?))
                    .collect();
                Arc::new(out)
            }
            Kind::DateDiff => {
                let unit = self.unit(&a[0])?;
                let (x, y) = (timestamps(&a[1], rows)?, timestamps(&a[2], rows)?);
                let out: Int64Array = x
                    .iter()
                    .zip(y.iter())
                    .map(|(x, y)| difference(unit, x?, y?))
                    .collect();
                Arc::new(out)
            }
            Kind::ToTimezone | Kind::ToUtc => {
                let ts = timestamps(&a[0], rows)?;
                let Some(zone) = self.zone(&a[1])? else {
                    return Ok(ColumnarValue::Array(Arc::new(ts)));
                };
                let to_local = self.kind == Kind::ToTimezone;
                let out: TimestampNanosecondArray = ts
                    .iter()
                    .map(|t| {
                        let t = t?;
                        if to_local {
                            t.checked_add(utc_offset_ns(&zone, t))
                        } else {
                            local_to_utc(&zone, t)
                        }
                    })
                    .collect();
                Arc::new(out)
            }
        };
        Ok(ColumnarValue::Array(out))
    }
}

impl TimeFunction {
    fn constant_text(&self, v: &ColumnarValue, what: &str) -> DfResult<Option<String>> {
        match v {
            ColumnarValue::Scalar(
                ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s),
            ) => Ok(s.clone()),
            ColumnarValue::Scalar(s) if s.is_null() => Ok(None),
            _ => Err(self.error(format!("the {what} must be a constant string"))),
        }
    }

    fn stride(&self, v: &ColumnarValue) -> DfResult<Stride> {
        let text = self
            .constant_text(v, "stride")?
            .ok_or_else(|| self.error("the stride is NULL"))?;
        Stride::parse(&text).map_err(|m| self.error(m))
    }

    fn unit(&self, v: &ColumnarValue) -> DfResult<Unit> {
        let text = self
            .constant_text(v, "unit")?
            .ok_or_else(|| self.error("the unit is NULL"))?;
        let stride = Stride::parse(&text).map_err(|m| self.error(m))?;
        if stride.count != 1 || text.trim().len() != 1 {
            return Err(self.error(format!("'{text}' is not a unit letter such as 'd'")));
        }
        Ok(stride.unit)
    }

    fn zone(&self, v: &ColumnarValue) -> DfResult<Option<Tz>> {
        let Some(name) = self.constant_text(v, "time zone")? else {
            return Ok(None);
        };
        parse_zone(&name).map(Some).map_err(|m| self.error(m))
    }
}

fn timestamps(v: &ColumnarValue, rows: usize) -> DfResult<TimestampNanosecondArray> {
    let array = v.clone().into_array(rows)?;
    let array = if array.data_type() == &TIMESTAMP {
        array
    } else {
        datafusion::arrow::compute::cast(&array, &TIMESTAMP)?
    };
    array
        .as_any()
        .downcast_ref::<TimestampNanosecondArray>()
        .cloned()
        .ok_or_else(|| DataFusionError::Internal("timestamp cast failed".into()))
}

fn constant_timestamp(v: &ColumnarValue) -> Result<Option<i64>, String> {
    match v {
        ColumnarValue::Scalar(s) if s.is_null() => Ok(None),
        ColumnarValue::Scalar(ScalarValue::TimestampNanosecond(t, _)) => Ok(*t),
        _ => Err("the origin must be a constant timestamp".into()),
    }
}

fn unit_step(unit: Unit) -> Option<Step> {
    Stride { count: 1, unit }.step()
}

/// A physical `timestamp_floor(stride, column[, origin[, zone]])` whose stride has a fixed
/// length (not months or years), with a constant origin or none and no time zone: the
/// timestamp column's index, the step and the origin in nanoseconds, so that a row's bucket
/// is `origin + (t - origin).div_euclid(step) * step`, as the function computes it. Lets an
/// operator over rows in time order compute a bucket once per run of rows, not per row.
pub(crate) fn fixed_floor(
    expr: &Arc<dyn datafusion::physical_expr::PhysicalExpr>,
) -> Option<(usize, i64, i64)> {
    use datafusion::physical_expr::ScalarFunctionExpr;
    use datafusion::physical_expr::expressions::{Column, Literal};
    let f = expr.downcast_ref::<ScalarFunctionExpr>()?;
    if f.name() != "timestamp_floor" {
        return None;
    }
    let args = f.args();
    let literal = |i: usize| {
        args.get(i)
            .and_then(|a| a.downcast_ref::<Literal>())
            .map(Literal::value)
    };
    let stride = match literal(0)? {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Stride::parse(s.as_str()).ok()?,
        _ => return None,
    };
    let Step::Nanos(step) = stride.step()? else {
        return None;
    };
    let column = args.get(1)?.downcast_ref::<Column>()?.index();
    let origin = match args.get(2) {
        None => None,
        Some(_) => match literal(2)? {
            ScalarValue::TimestampNanosecond(t, _) => *t,
            v if v.is_null() => None,
            _ => return None,
        },
    };
    if args.len() > 4 || (args.len() == 4 && !literal(3).is_some_and(ScalarValue::is_null)) {
        return None;
    }
    (step > 0).then_some((column, step, origin.unwrap_or(stride.calendar_origin())))
}

/// Buckets `ts` by `step` from `origin`, in `zone`'s wall time.
fn floor(
    ts: &TimestampNanosecondArray,
    step: Step,
    origin: i64,
    zone: Option<Tz>,
) -> TimestampNanosecondArray {
    match (step, zone) {
        (Step::Nanos(n), None) => ts.unary_opt(|t| {
            let k = t.checked_sub(origin)?.div_euclid(n);
            origin.checked_add(k.checked_mul(n)?)
        }),
        (step, None) => ts.unary_opt(|t| step.floor(t, origin)),
        (step, Some(zone)) => ts.unary_opt(|t| {
            let local = t.checked_add(utc_offset_ns(&zone, t))?;
            local_to_utc(&zone, step.floor(local, origin)?)
        }),
    }
}

/// `timestamp_ceil`: see the module docs.
fn ceil(ts: &TimestampNanosecondArray, unit: Unit) -> TimestampNanosecondArray {
    let Some(step) = unit_step(unit) else {
        return ts.clone();
    };
    match (unit, step) {
        (Unit::Nanosecond | Unit::Microsecond, Step::Nanos(n)) => ts.unary_opt(|t| {
            let up = t.checked_add(n - 1)?;
            up.checked_sub(up.rem_euclid(n))
        }),
        (_, step) => {
            let origin = Stride { count: 1, unit }.calendar_origin();
            ts.unary_opt(|t| step.add(step.floor(t, origin)?, 1))
        }
    }
}

/// `to_str(ts, pattern)`: `ts` printed in a QuestDB pattern (`date_format`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ToStr {
    signature: Signature,
}

impl ToStr {
    fn new() -> Self {
        ToStr {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ToStr {
    fn name(&self) -> &str {
        "to_str"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        if arg_types.len() != 2 {
            return Err(DataFusionError::Plan(format!(
                "to_str: takes 2 arguments (a timestamp and a pattern), {} given",
                arg_types.len()
            )));
        }
        Ok(vec![TIMESTAMP, DataType::Utf8])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let pattern = constant_pattern("to_str", &args.args[1])?;
        let ts = timestamps(&args.args[0], args.number_rows)?;
        let mut out = StringBuilder::with_capacity(ts.len(), ts.len() * 24);
        let mut text = String::new();
        for t in ts.iter() {
            match t {
                Some(t) => {
                    text.clear();
                    pattern.format(t, &mut text);
                    out.append_value(&text);
                }
                None => out.append_null(),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// `to_timestamp`: QuestDB's when its second argument is a QuestDB pattern, otherwise
/// DataFusion's (which reads chrono patterns, `%Y-%m-%d`, or none).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ToTimestamp {
    datafusion: Arc<ScalarUDF>,
}

impl ToTimestamp {
    fn new() -> Self {
        ToTimestamp {
            datafusion: datafusion::functions::datetime::to_timestamp(&Default::default()),
        }
    }

    /// The QuestDB pattern of a call, when it has one: two arguments, the second a constant
    /// string without `%`.
    fn questdb_pattern(args: &[ColumnarValue]) -> Option<&ColumnarValue> {
        match args {
            [_, p @ ColumnarValue::Scalar(s)] => {
                let text = match s {
                    ScalarValue::Utf8(t) | ScalarValue::LargeUtf8(t) | ScalarValue::Utf8View(t) => {
                        t.as_deref()
                    }
                    _ => return None,
                };
                match text {
                    Some(t) if t.contains('%') => None,
                    _ => Some(p),
                }
            }
            _ => None,
        }
    }
}

impl ScalarUDFImpl for ToTimestamp {
    fn name(&self) -> &str {
        "to_timestamp"
    }

    fn signature(&self) -> &Signature {
        self.datafusion.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.datafusion.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.datafusion.return_type(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let Some(pattern) = Self::questdb_pattern(&args.args) else {
            return self.datafusion.invoke_with_args(args);
        };
        let pattern = constant_pattern("to_timestamp", pattern)?;
        let text = args.args[0].clone().into_array(args.number_rows)?;
        let text = datafusion::arrow::compute::cast(&text, &DataType::Utf8)?;
        let text = text
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| DataFusionError::Internal("text cast failed".into()))?;
        let out: TimestampNanosecondArray = text.iter().map(|t| pattern.parse(t?)).collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// A function's constant pattern argument, compiled.
fn constant_pattern(function: &str, v: &ColumnarValue) -> DfResult<Pattern> {
    let error = |m: &str| DataFusionError::Plan(format!("{function}: {m}"));
    let text = match v {
        ColumnarValue::Scalar(
            ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s),
        ) => s.as_deref(),
        _ => return Err(error("the pattern must be a constant string")),
    };
    let text = text.ok_or_else(|| error("the pattern is NULL"))?;
    Pattern::compile(text).map_err(|m| error(&m))
}

/// Whole `unit`s between `a` and `b`, always ≥ 0.
fn difference(unit: Unit, a: i64, b: i64) -> Option<i64> {
    let (lo, hi) = (a.min(b), a.max(b));
    match unit_step(unit)? {
        Step::Nanos(n) => Some(hi.checked_sub(lo)? / n),
        Step::Months(m) => {
            // Count whole months, then step back while one too many.
            let step = Step::Months(1);
            let (lo_dt, hi_dt) = (
                DateTime::from_timestamp_nanos(lo),
                DateTime::from_timestamp_nanos(hi),
            );
            use chrono::Datelike;
            let mut months = i64::from(hi_dt.year() - lo_dt.year()) * 12
                + i64::from(hi_dt.month0())
                - i64::from(lo_dt.month0());
            while months > 0 && step.add(lo, months)? > hi {
                months -= 1;
            }
            Some(months / i64::from(m))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nanoseconds since the epoch of an RFC 3339 instant.
    fn ns(s: &str) -> i64 {
        s.parse::<chrono::DateTime<chrono::Utc>>()
            .expect("an RFC 3339 instant")
            .timestamp_nanos_opt()
            .expect("in range")
    }

    #[test]
    fn grids_cover_the_range_bucket_by_bucket() {
        let hour = Stride::parse("1h").unwrap().step().unwrap();
        let range = ns("2024-01-01T00:30:00Z")..ns("2024-01-01T03:00:00Z");
        let buckets = grid(hour, 0, None, range).unwrap();
        let expected: Vec<i64> = ["00", "01", "02"]
            .iter()
            .map(|h| ns(&format!("2024-01-01T{h}:00:00Z")))
            .collect();
        assert_eq!(buckets, expected);
        // Days in Berlin across the October clock change: the 27th lasts 25 hours.
        let day = Stride::parse("1d").unwrap().step().unwrap();
        let berlin = parse_zone("Europe/Berlin").ok();
        let range = ns("2024-10-26T12:00:00Z")..ns("2024-10-28T12:00:00Z");
        let buckets = grid(day, 0, berlin, range).unwrap();
        let expected = [
            ns("2024-10-25T22:00:00Z"),
            ns("2024-10-26T22:00:00Z"),
            ns("2024-10-27T23:00:00Z"),
        ];
        assert_eq!(buckets, expected);
        let month = Stride::parse("1M").unwrap().step().unwrap();
        let range = ns("2024-01-15T00:00:00Z")..ns("2024-03-01T00:00:00Z");
        assert_eq!(grid(month, 0, None, range).unwrap().len(), 2);
    }

    #[test]
    fn floors_in_a_time_zone() {
        let ts = TimestampNanosecondArray::from(vec![ns("2021-03-28T00:30:00Z")]);
        let day = Stride::parse("1d").unwrap().step().unwrap();
        let berlin = parse_zone("Europe/Berlin").unwrap();
        // 00:30 UTC is 01:30 in Berlin (CET): the local day started at 23:00 UTC the day before.
        let out = floor(&ts, day, 0, Some(berlin));
        assert_eq!(out.value(0), ns("2021-03-27T23:00:00Z"));
        let hour = Stride::parse("1h").unwrap().step().unwrap();
        assert_eq!(
            floor(&ts, hour, 0, None).value(0),
            ns("2021-03-28T00:00:00Z")
        );
    }

    #[test]
    fn differences_count_whole_units() {
        let (a, b) = (ns("2020-01-31T00:00:00Z"), ns("2020-03-30T00:00:00Z"));
        assert_eq!(difference(Unit::Month, a, b), Some(1));
        assert_eq!(difference(Unit::Day, b, a), Some(59));
        assert_eq!(difference(Unit::Year, a, b), Some(0));
    }

    #[test]
    fn converts_between_utc_and_wall_time() {
        let ny = parse_zone("America/New_York").unwrap();
        let t = ns("2021-07-01T12:00:00Z");
        let local = t + utc_offset_ns(&ny, t);
        assert_eq!(local, ns("2021-07-01T08:00:00Z"));
        assert_eq!(local_to_utc(&ny, local), Some(t));
        assert!(parse_zone("Mars/Olympus").is_err());
    }
}

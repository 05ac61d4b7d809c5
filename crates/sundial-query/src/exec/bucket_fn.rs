//! Time buckets computed once per run of rows: a bucket expression whose rows, in timestamp
//! order, form runs of consecutive timestamps in one range, so the bucket aggregate compares
//! each timestamp with the range's ends instead of evaluating the expression per row.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::expressions::{Column, Literal};

/// A bucket computed once per run of rows in time order: the rows of a bucket are those whose
/// timestamps lie in one range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FixedBucket {
    /// `timestamp_floor` by a fixed-length stride (`functions::fixed_floor`), or `date_trunc`
    /// to a unit of fixed length ([`date_trunc_step`]): the bucket is the start of the stride
    /// holding the timestamp.
    Floor {
        column: usize,
        step: i64,
        origin: i64,
    },
    /// The timestamp cast to an integer (nanoseconds) and divided by positive integer
    /// constants, as `cast(ts AS long) / 3600000000` groups by hour: the bucket is the
    /// quotient, rounded toward zero as integer division rounds (so the bucket 0 spans both
    /// sides of the epoch).
    Quotient { column: usize, divisor: i64 },
}

impl FixedBucket {
    pub(super) fn of(expr: &Arc<dyn PhysicalExpr>, schema: &SchemaRef) -> Option<Self> {
        if let Some((column, step, origin)) = crate::functions::fixed_floor(expr) {
            return Some(FixedBucket::Floor {
                column,
                step,
                origin,
            });
        }
        if let Some((column, step)) = date_trunc_step(expr, schema) {
            return Some(FixedBucket::Floor {
                column,
                step,
                origin: 0,
            });
        }
        time_quotient(expr, schema)
    }

    pub(super) fn column(self) -> usize {
        match self {
            FixedBucket::Floor { column, .. } | FixedBucket::Quotient { column, .. } => column,
        }
    }

    /// The bucket of the timestamp `t` (nanoseconds) and the timestamps `[lo, hi)` in it;
    /// `None` when the bucket is NULL (a stride start out of range).
    pub(super) fn bucket(self, t: i64) -> Option<(i64, i64, i64)> {
        match self {
            FixedBucket::Floor { step, origin, .. } => {
                let lo = t
                    .checked_sub(origin)
                    .and_then(|d| d.div_euclid(step).checked_mul(step))
                    .and_then(|d| d.checked_add(origin))?;
                Some((lo, lo, lo.saturating_add(step)))
            }
            FixedBucket::Quotient { divisor: d, .. } => {
                let q = t / d;
                // |q · d| <= |t|, so the products at q are exact.
                let (lo, hi) = match q.cmp(&0) {
                    std::cmp::Ordering::Greater => (q * d, (q + 1).saturating_mul(d)),
                    std::cmp::Ordering::Less => {
                        ((q - 1).saturating_mul(d).saturating_add(1), q * d + 1)
                    }
                    std::cmp::Ordering::Equal => (1 - d, d),
                };
                Some((q, lo, hi))
            }
        }
    }
}

/// `date_trunc(unit, ts)`, `ts` a nanosecond timestamp column, truncating to a unit of fixed
/// length: the column and the unit in nanoseconds. DataFusion truncates such units as
/// `t - t.rem_euclid(unit)`, a floor from the epoch: microseconds to minutes in any time zone
/// (zones' offsets are whole minutes), hours and days only without one.
pub(super) fn date_trunc_step(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &SchemaRef,
) -> Option<(usize, i64)> {
    use datafusion::physical_expr::ScalarFunctionExpr;
    let f = expr.downcast_ref::<ScalarFunctionExpr>()?;
    let [unit, column] = f.args() else {
        return None;
    };
    if f.name() != "date_trunc" {
        return None;
    }
    let unit = match unit.downcast_ref::<Literal>()?.value() {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => s.to_ascii_lowercase(),
        _ => return None,
    };
    let column = column.downcast_ref::<Column>()?.index();
    let DataType::Timestamp(TimeUnit::Nanosecond, zone) = schema.field(column).data_type() else {
        return None;
    };
    const SECOND_NS: i64 = 1_000_000_000;
    let step = match unit.as_str() {
        "microsecond" => 1_000,
        "millisecond" => 1_000_000,
        "second" => SECOND_NS,
        "minute" => 60 * SECOND_NS,
        "hour" if zone.is_none() => 3_600 * SECOND_NS,
        "day" if zone.is_none() => 86_400 * SECOND_NS,
        _ => return None,
    };
    Some((column, step))
}

/// `expr` as a [`FixedBucket::Quotient`]: `CAST(ts AS Int64)`, `ts` a nanosecond timestamp
/// column, divided by one or more positive integer constants whose product fits 64 bits.
pub(super) fn time_quotient(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &SchemaRef,
) -> Option<FixedBucket> {
    use datafusion::logical_expr::Operator;
    use datafusion::physical_plan::expressions::{BinaryExpr, CastExpr};
    let mut divisor = 1i64;
    let mut e = expr;
    while let Some(b) = e.downcast_ref::<BinaryExpr>() {
        if *b.op() != Operator::Divide || b.left().data_type(schema).ok()? != DataType::Int64 {
            return None;
        }
        let d = match b.right().downcast_ref::<Literal>()?.value() {
            ScalarValue::Int64(Some(d)) => *d,
            _ => return None,
        };
        if d <= 0 {
            return None;
        }
        divisor = divisor.checked_mul(d)?;
        e = b.left();
    }
    let cast = e.downcast_ref::<CastExpr>()?;
    let column = cast.expr().downcast_ref::<Column>()?;
    let nanos = matches!(
        schema.field(column.index()).data_type(),
        DataType::Timestamp(TimeUnit::Nanosecond, _)
    );
    (nanos && *cast.cast_type() == DataType::Int64).then_some(FixedBucket::Quotient {
        column: column.index(),
        divisor,
    })
}

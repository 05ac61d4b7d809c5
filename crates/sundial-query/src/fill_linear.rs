//! `SAMPLE BY ... FILL(LINEAR)`'s values, as QuestDB 9.3.4 computes them: a window function
//! over one key's buckets in time order, `__sundial_fill_linear(value, present, bucket_ns)`.
//!
//! A bucket with rows keeps its value (NULL included). An empty bucket between two buckets
//! with rows lies on the line through them; before a key's first bucket with rows, on the line
//! through its first two; after its last, each bucket continues the step between the two
//! buckets before it (so integers keep the step they were rounded to: QuestDB's rule). A line
//! through a NULL, or missing an end, gives NULL.
//!
//! The result has the value's type: integers are computed as DOUBLE and cut toward zero, as
//! QuestDB cuts them; other types than numbers are not filled.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type, Int64Type};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::function::{PartitionEvaluatorArgs, WindowUDFFieldArgs};
use datafusion::logical_expr::{
    PartitionEvaluator, Signature, Volatility, WindowUDF, WindowUDFImpl,
};

/// The window function, to register with the session.
pub(crate) fn fill_linear() -> WindowUDF {
    WindowUDF::new_from_impl(FillLinear {
        signature: Signature::any(3, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FillLinear {
    signature: Signature,
}

impl WindowUDFImpl for FillLinear {
    fn name(&self) -> &str {
        sundial_sql::names::FILL_LINEAR_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn partition_evaluator(
        &self,
        _: PartitionEvaluatorArgs,
    ) -> DfResult<Box<dyn PartitionEvaluator>> {
        Ok(Box::new(Evaluator))
    }

    fn field(&self, field_args: WindowUDFFieldArgs) -> DfResult<FieldRef> {
        let value = field_args.input_fields().first().ok_or_else(|| {
            DataFusionError::Internal("fill_linear takes (value, present, bucket)".into())
        })?;
        Ok(Arc::new(Field::new(
            field_args.name(),
            value.data_type().clone(),
            true,
        )))
    }
}

#[derive(Debug)]
struct Evaluator;

impl PartitionEvaluator for Evaluator {
    fn evaluate_all(&mut self, values: &[ArrayRef], num_rows: usize) -> DfResult<ArrayRef> {
        let [value, present, bucket] = values else {
            return Err(DataFusionError::Internal(
                "fill_linear takes (value, present, bucket)".into(),
            ));
        };
        let data_type = value.data_type().clone();
        let integer = data_type.is_integer() || matches!(data_type, DataType::Timestamp(..));
        if !(integer || data_type.is_floating()) {
            return Ok(value.clone());
        }
        let as_f64 = match &data_type {
            DataType::Timestamp(..) => cast(&cast(value, &DataType::Int64)?, &DataType::Float64)?,
            _ => cast(value, &DataType::Float64)?,
        };
        let v = as_f64.as_primitive::<Float64Type>();
        let present: &BooleanArray = present.as_boolean();
        let t = cast(bucket, &DataType::Int64)?;
        let t = t.as_primitive::<Int64Type>();
        let filled = fill(v, present, t, integer, num_rows);
        Ok(match &data_type {
            DataType::Timestamp(..) => cast(&cast(&filled, &DataType::Int64)?, &data_type)?,
            _ => cast(&filled, &data_type)?,
        })
    }
}

/// The filled values (see the module docs); rows are one key's buckets in time order.
fn fill(
    v: &Float64Array,
    present: &BooleanArray,
    t: &datafusion::arrow::array::Int64Array,
    integer: bool,
    rows: usize,
) -> Float64Array {
    let is_present = |r: usize| present.is_valid(r) && present.value(r);
    let value = |r: usize| v.is_valid(r).then(|| v.value(r));
    let time = |r: usize| t.value(r) as f64;
    let cut = |x: f64| if integer { x.trunc() } else { x };
    // The line through two rows, at the time of row `r`.
    let line = |a: usize, b: usize, r: usize| -> Option<f64> {
        let (va, vb) = (value(a)?, value(b)?);
        let span = time(b) - time(a);
        if span == 0.0 {
            return None;
        }
        Some(cut(va + (vb - va) * (time(r) - time(a)) / span))
    };
    let anchors: Vec<usize> = (0..rows).filter(|&r| is_present(r)).collect();
    let mut out: Vec<Option<f64>> = vec![None; rows];
    let mut next = 0usize; // index into `anchors` of the first anchor at or after r
    for r in 0..rows {
        while next < anchors.len() && anchors[next] < r {
            next += 1;
        }
        out[r] = if anchors.get(next) == Some(&r) {
            value(r)
        } else if next > 0 && next < anchors.len() {
            line(anchors[next - 1], anchors[next], r)
        } else if next == 0 {
            match (anchors.first(), anchors.get(1)) {
                (Some(&a), Some(&b)) => line(a, b, r),
                _ => None,
            }
        } else if r >= 2 {
            match (out[r - 1], out[r - 2]) {
                (Some(a), Some(b)) => Some(cut(2.0 * a - b)),
                _ => None,
            }
        } else {
            None
        };
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;

    fn run(values: &[Option<f64>], present: &[bool], integer: bool) -> Vec<Option<f64>> {
        let n = values.len();
        let v = Float64Array::from(values.to_vec());
        let p = BooleanArray::from(present.to_vec());
        let t = Int64Array::from((1..=n as i64).collect::<Vec<_>>());
        fill(&v, &p, &t, integer, n).iter().collect()
    }

    // Expected values are QuestDB 9.3.4's answers over the same buckets (1 s apart).
    #[test]
    fn integers_fill_as_questdb() {
        // Rows at 1 s, 2 s and 5 s (0, 10, 11); QuestDB continues past 5 s by its last step.
        let got = run(
            &[
                Some(0.0),
                Some(10.0),
                None,
                None,
                Some(11.0),
                None,
                None,
                None,
                None,
            ],
            &[true, true, false, false, true, false, false, false, false],
            true,
        );
        let want = [0.0, 10.0, 10.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0];
        assert_eq!(got, want.map(Some));
        // Rows at 4 s, 6 s and 9 s (-3, 4, 7): before the first, the first two's line.
        let got = run(
            &[
                None,
                None,
                None,
                Some(-3.0),
                None,
                Some(4.0),
                None,
                None,
                Some(7.0),
            ],
            &[false, false, false, true, false, true, false, false, true],
            true,
        );
        let want = [-13.0, -10.0, -6.0, -3.0, 0.0, 4.0, 5.0, 6.0, 7.0];
        assert_eq!(got, want.map(Some));
    }

    #[test]
    fn doubles_and_nulls() {
        let got = run(
            &[Some(0.0), Some(10.0), None, None, Some(11.0), None],
            &[true, true, false, false, true, false],
            false,
        );
        let third = 10.0 + 1.0 / 3.0;
        assert_eq!(got[2], Some(third));
        assert!((got[5].unwrap() - (11.0 + 1.0 / 3.0)).abs() < 1e-9);
        // A present NULL is an end: lines through it are NULL; one row gives no line.
        let got = run(
            &[None, None, Some(2.0), Some(3.0), None, None, None],
            &[true, false, true, true, false, false, true],
            false,
        );
        assert_eq!(got, [None, None, Some(2.0), Some(3.0), None, None, None]);
        let got = run(&[None, Some(5.0), None], &[false, true, false], false);
        assert_eq!(got, [None, Some(5.0), None]);
    }
}

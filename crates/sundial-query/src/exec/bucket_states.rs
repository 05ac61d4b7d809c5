//! The states of [`super::bucket_agg::BucketAggregateExec`]: which aggregates it computes
//! (`count`, `sum`, `avg`, `min`, `max` of DOUBLE or integer arguments), their states per key
//! slot for the open bucket, folded by the scan kernels over runs of rows, and how a closed
//! bucket's states are written out: as DataFusion's partial aggregate writes them
//! ([`Emit::States`]), or as final values ([`Emit::Values`]).

use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Builder, Int64Array, Int64Builder, UInt64Builder,
};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ColumnarValue;
use sundial_kernels::ColumnValues;
use sundial_kernels::{Accumulator as Kernel, Fold, Slots as KernelSlots};

/// An aggregate function the exec computes, and the kind of its argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    F64,
    I64,
}

#[derive(Debug, Clone)]
pub(super) struct Aggregate {
    pub(super) op: Op,
    pub(super) kind: Kind,
    pub(super) arg: Arc<dyn PhysicalExpr>,
}

impl Aggregate {
    /// The partial state's column types, as DataFusion's partial aggregate writes them.
    pub(super) fn state_types(&self, arg_type: &DataType) -> Vec<DataType> {
        match (self.op, self.kind) {
            (Op::Count, _) => vec![DataType::Int64],
            (Op::Sum, Kind::F64) => vec![DataType::Float64],
            (Op::Sum, Kind::I64) => vec![DataType::Int64],
            (Op::Avg, _) => vec![DataType::UInt64, DataType::Float64],
            (Op::Min | Op::Max, _) => vec![arg_type.clone()],
        }
    }
}

/// What a closed bucket's row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Emit {
    /// Partial states, for a final aggregate above to merge: rows out of timestamp order only
    /// cost extra rows.
    States,
    /// Final values, replacing a single-stage aggregate: each bucket is emitted once, in
    /// ascending order, so rows out of timestamp order are an error.
    Values,
}

/// Number types the states hold.
pub(super) trait Native: Copy + Default {
    /// The scan kernels' fold computing `op` over values of this type.
    fn fold(op: Op) -> Fold;
    /// The value of `slot` of a kernel accumulator of this type.
    fn of_kernel(kernel: &Kernel, slot: usize) -> Self;
}

impl Native for f64 {
    fn fold(op: Op) -> Fold {
        match op {
            Op::Min => Fold::MinFloat,
            Op::Max => Fold::MaxFloat,
            Op::Count => Fold::Count,
            Op::Sum | Op::Avg => Fold::SumFloat,
        }
    }
    fn of_kernel(kernel: &Kernel, slot: usize) -> Self {
        kernel.float(slot)
    }
}

impl Native for i64 {
    fn fold(op: Op) -> Fold {
        match op {
            Op::Min => Fold::MinInt,
            Op::Max => Fold::MaxInt,
            Op::Count => Fold::Count,
            Op::Sum | Op::Avg => Fold::SumInt,
        }
    }
    fn of_kernel(kernel: &Kernel, slot: usize) -> Self {
        kernel.int(slot)
    }
}

/// One aggregate's states, a slot per key.
pub(super) struct Slots<T> {
    op: Op,
    values: Vec<T>,
    /// Values seen (rows, for `count`).
    counts: Vec<u64>,
    /// The scan kernels' states (vectorised and NULL-aware), merged into `values` when the
    /// bucket closes.
    kernel: Option<Kernel>,
}

impl<T: Native> Slots<T> {
    fn new(op: Op) -> Self {
        Slots {
            op,
            values: Vec::new(),
            counts: Vec::new(),
            kernel: None,
        }
    }

    /// Folds rows `rows` of `array` with the scan kernels, into slot 0 or each row's slot of
    /// `row_slots`.
    fn update(
        &mut self,
        array: &dyn Array,
        rows: Range<usize>,
        row_slots: Option<&[u32]>,
    ) -> DfResult<()> {
        let part = array.slice(rows.start, rows.len());
        let values = ColumnValues::of(part.as_ref()).ok_or_else(|| {
            DataFusionError::Internal(format!(
                "BucketAggregateExec cannot fold a {} column",
                part.data_type()
            ))
        })?;
        let slot_count = self.counts.len().max(1);
        let kernel = self
            .kernel
            .get_or_insert_with(|| Kernel::new(T::fold(self.op)));
        kernel.ensure(slot_count);
        let slots = match row_slots {
            None => KernelSlots::One,
            Some(slots) => KernelSlots::PerRow(&slots[rows.clone()]),
        };
        kernel.update(Some(&values), None, slots, rows.len());
        Ok(())
    }

    /// Moves the kernel's state of `slot` into the slots and resets it there.
    fn absorb_kernel(&mut self, slot: usize) {
        let Some(kernel) = &mut self.kernel else {
            return;
        };
        let n = kernel.count(slot);
        if n > 0 {
            // Values reach a slot only through the kernel, which it leaves empty on emit.
            debug_assert_eq!(self.counts[slot], 0);
            self.values[slot] = T::of_kernel(kernel, slot);
            self.counts[slot] = n;
            kernel.reset_slot(slot);
        }
    }

    fn ensure(&mut self, slots: usize) {
        if self.counts.len() < slots {
            self.values.resize(slots, T::default());
            self.counts.resize(slots, 0);
        }
    }

    /// Counts the valid rows of `rows` (all without `nulls`), each in the slot `slot_of`
    /// gives (`None`: all in slot 0).
    fn count_rows(
        &mut self,
        nulls: Option<&NullBuffer>,
        rows: Range<usize>,
        slot_of: Option<impl Fn(usize) -> usize>,
    ) {
        let nulls = nulls.filter(|n| n.null_count() > 0);
        let Some(slot_of) = slot_of else {
            self.counts[0] += match nulls {
                None => rows.len() as u64,
                Some(n) => (rows.len() - n.slice(rows.start, rows.len()).null_count()) as u64,
            };
            return;
        };
        for row in rows {
            if nulls.is_none_or(|n| n.is_valid(row)) {
                self.counts[slot_of(row)] += 1;
            }
        }
    }

    /// The slot's value, or `None` if it saw none; and resets the slot.
    fn take(&mut self, slot: usize) -> (Option<T>, u64) {
        self.absorb_kernel(slot);
        let count = std::mem::take(&mut self.counts[slot]);
        let value = std::mem::take(&mut self.values[slot]);
        ((count > 0).then_some(value), count)
    }
}

/// One aggregate's states and the output columns they are written to, in DataFusion's
/// partial-state layout.
pub(super) enum Accumulator {
    Count {
        slots: Slots<i64>,
        counts: Int64Builder,
    },
    /// `sum`, `min` or `max` of DOUBLE.
    F64 {
        slots: Slots<f64>,
        out: Float64Builder,
    },
    /// `sum`, `min` or `max` of integers and timestamps.
    I64 {
        slots: Slots<i64>,
        out: Int64Builder,
    },
    Avg {
        slots: Slots<f64>,
        counts: UInt64Builder,
        sums: Float64Builder,
    },
}

impl Accumulator {
    pub(super) fn new(a: &Aggregate) -> Self {
        match (a.op, a.kind) {
            (Op::Count, _) => Accumulator::Count {
                slots: Slots::new(a.op),
                counts: Int64Builder::new(),
            },
            (Op::Avg, _) => Accumulator::Avg {
                slots: Slots::new(a.op),
                counts: UInt64Builder::new(),
                sums: Float64Builder::new(),
            },
            (_, Kind::F64) => Accumulator::F64 {
                slots: Slots::new(a.op),
                out: Float64Builder::new(),
            },
            (_, Kind::I64) => Accumulator::I64 {
                slots: Slots::new(a.op),
                out: Int64Builder::new(),
            },
        }
    }

    pub(super) fn ensure(&mut self, slots: usize) {
        match self {
            Accumulator::Count { slots: s, .. } | Accumulator::I64 { slots: s, .. } => {
                s.ensure(slots)
            }
            Accumulator::F64 { slots: s, .. } | Accumulator::Avg { slots: s, .. } => {
                s.ensure(slots)
            }
        }
    }

    /// The argument's values over `batch`, in the form this accumulator reads.
    pub(super) fn argument(&self, value: ColumnarValue, rows: usize) -> DfResult<Argument> {
        Ok(match (self, value) {
            (Accumulator::Count { .. }, ColumnarValue::Scalar(s)) => {
                Argument::Rows { all: !s.is_null() }
            }
            (Accumulator::Count { .. }, ColumnarValue::Array(array)) => {
                Argument::Valid(array.logical_nulls())
            }
            (Accumulator::F64 { .. } | Accumulator::Avg { .. }, value) => Argument::F64(
                value
                    .into_array(rows)?
                    .as_primitive::<Float64Type>()
                    .clone(),
            ),
            (Accumulator::I64 { .. }, value) => Argument::I64(as_i64(value.into_array(rows)?)?),
        })
    }

    pub(super) fn update(
        &mut self,
        arg: &Argument,
        rows: Range<usize>,
        row_slots: Option<&[u32]>,
    ) -> DfResult<()> {
        let slot_of = row_slots.map(|slots| move |row: usize| slots[row] as usize);
        match (self, arg) {
            (Accumulator::Count { slots, .. }, Argument::Rows { all: true }) => {
                slots.count_rows(None, rows, slot_of)
            }
            (Accumulator::Count { slots, .. }, Argument::Valid(nulls)) => {
                slots.count_rows(nulls.as_ref(), rows, slot_of)
            }
            (Accumulator::F64 { slots, .. } | Accumulator::Avg { slots, .. }, Argument::F64(a)) => {
                return slots.update(a, rows, row_slots);
            }
            (Accumulator::I64 { slots, .. }, Argument::I64(a)) => {
                return slots.update(a, rows, row_slots);
            }
            // A NULL constant counts nothing; `argument` builds no other pairs.
            _ => {}
        }
        Ok(())
    }

    /// Appends the slot's states (or value) to the output and resets the slot. Without values,
    /// sums, extremes, avg and avg's count and sum are NULL, as DataFusion has them.
    pub(super) fn emit(&mut self, slot: usize, emit: Emit) {
        match self {
            Accumulator::Count { slots, counts } => counts.append_value(slots.take(slot).1 as i64),
            Accumulator::F64 { slots, out } => out.append_option(slots.take(slot).0),
            Accumulator::I64 { slots, out } => out.append_option(slots.take(slot).0),
            Accumulator::Avg {
                slots,
                counts,
                sums,
            } => {
                let (sum, count) = slots.take(slot);
                match emit {
                    Emit::States => {
                        counts.append_option((count > 0).then_some(count));
                        sums.append_option(sum);
                    }
                    Emit::Values => sums.append_option(sum.map(|sum| sum / count as f64)),
                }
            }
        }
    }

    /// The state (or value) columns built so far.
    pub(super) fn finish(&mut self, columns: &mut Vec<ArrayRef>, emit: Emit) {
        match self {
            Accumulator::Count { counts, .. } => columns.push(Arc::new(counts.finish())),
            Accumulator::F64 { out, .. } => columns.push(Arc::new(out.finish())),
            Accumulator::I64 { out, .. } => columns.push(Arc::new(out.finish())),
            Accumulator::Avg { counts, sums, .. } => {
                if emit == Emit::States {
                    columns.push(Arc::new(counts.finish()));
                }
                columns.push(Arc::new(sums.finish()));
            }
        }
    }
}

/// An aggregate's argument over one batch.
pub(super) enum Argument {
    /// A constant (`count(*)`): every row counts if it is not NULL.
    Rows {
        all: bool,
    },
    /// `count(x)`: the rows where `x` is not NULL.
    Valid(Option<NullBuffer>),
    F64(datafusion::arrow::array::Float64Array),
    I64(Int64Array),
}

/// Integers and timestamps as `i64`.
pub(super) fn as_i64(array: ArrayRef) -> DfResult<Int64Array> {
    let array = match array.data_type() {
        DataType::Int64 => array,
        DataType::Timestamp(unit, _) => cast(
            &cast(&array, &DataType::Timestamp(*unit, None))?,
            &DataType::Int64,
        )?,
        _ => cast(&array, &DataType::Int64)?,
    };
    Ok(array.as_primitive::<Int64Type>().clone())
}

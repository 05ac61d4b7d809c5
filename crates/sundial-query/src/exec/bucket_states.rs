//! The states of [`super::bucket_agg::BucketAggregateExec`]: which aggregates it computes
//! (`count`, `sum`, `avg`, `min`, `max` of DOUBLE or integer arguments, and `first_value` or
//! `last_value` of any argument in the input's time order), their states per key slot for the
//! open bucket, folded by the scan kernels over runs of rows (or, for first and last values,
//! a pointer to each slot's row), and how a closed bucket's states are written out: as
//! DataFusion's partial aggregate writes them ([`Emit::States`]), or as final values
//! ([`Emit::Values`]).

use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Builder, Int64Array, Int64Builder, RecordBatch,
    UInt64Builder, new_empty_array,
};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::compute::{concat, interleave};
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
    /// `first_value` in the input's time order (or `last_value` against it).
    First,
    /// `last_value` in the input's time order (or `first_value` against it).
    Last,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    F64,
    I64,
    /// Any type: first and last values are picked, not folded.
    Any,
}

#[derive(Debug, Clone)]
pub(super) struct Aggregate {
    pub(super) op: Op,
    pub(super) kind: Kind,
    pub(super) arg: Arc<dyn PhysicalExpr>,
    /// For [`Op::First`] and [`Op::Last`]: the time column the input's rows are ordered by.
    pub(super) order: Option<Order>,
}

/// The ordering a first or last value is taken in: the input's time column (the rows' order),
/// with the argument's and the column's types.
#[derive(Debug, Clone)]
pub(super) struct Order {
    pub(super) time: Arc<dyn PhysicalExpr>,
    pub(super) value_type: DataType,
    pub(super) time_type: DataType,
}

impl Aggregate {
    /// The partial state's column types, as DataFusion's partial aggregate writes them.
    pub(super) fn state_types(&self, arg_type: &DataType) -> Vec<DataType> {
        match self.op {
            Op::First | Op::Last => match &self.order {
                // The value, the ordering value, whether it is set.
                Some(order) => vec![
                    order.value_type.clone(),
                    order.time_type.clone(),
                    DataType::Boolean,
                ],
                None => Vec::new(),
            },
            Op::Count => vec![DataType::Int64],
            Op::Sum if self.kind == Kind::F64 => vec![DataType::Float64],
            Op::Sum => vec![DataType::Int64],
            Op::Avg => vec![DataType::UInt64, DataType::Float64],
            Op::Min | Op::Max => vec![arg_type.clone()],
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
            // Picked by `Picks`, never folded.
            Op::First | Op::Last => Fold::Count,
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
            // Picked by `Picks`, never folded.
            Op::First | Op::Last => Fold::Count,
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
    /// `first_value` or `last_value`.
    Pick(Picks),
}

impl Accumulator {
    pub(super) fn new(a: &Aggregate) -> Self {
        if let (Op::First | Op::Last, Some(order)) = (a.op, &a.order) {
            return Accumulator::Pick(Picks::new(a.op == Op::Last, order.clone()));
        }
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
            // Integers (a pick without an order is never built).
            (_, Kind::I64 | Kind::Any) => Accumulator::I64 {
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
            Accumulator::Pick(picks) => picks.ensure(slots),
        }
    }

    /// The argument's values over `batch`, in the form this accumulator reads.
    pub(super) fn argument(
        &mut self,
        value: ColumnarValue,
        batch: &RecordBatch,
    ) -> DfResult<Argument> {
        let rows = batch.num_rows();
        Ok(match (self, value) {
            (Accumulator::Pick(picks), value) => {
                Argument::Pick(picks.source(value.into_array(rows)?, batch)?)
            }
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
            (Accumulator::Pick(picks), Argument::Pick(source)) => {
                picks.update(*source, rows, row_slots)
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
            Accumulator::Pick(picks) => picks.emit(slot),
        }
    }

    /// Lets go of what the batches consumed so far hold that no open slot needs (first and
    /// last values keep pointers into their batches).
    pub(super) fn compact(&mut self) -> DfResult<()> {
        match self {
            Accumulator::Pick(picks) => picks.compact(),
            _ => Ok(()),
        }
    }

    /// The state (or value) columns built so far.
    pub(super) fn finish(&mut self, columns: &mut Vec<ArrayRef>, emit: Emit) -> DfResult<()> {
        match self {
            Accumulator::Pick(picks) => picks.finish(columns, emit)?,
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
        Ok(())
    }
}

/// First or last values per slot of the open bucket. Rows arrive in the order the values are
/// taken in (the input's time order), so a slot's first value is that of its first row and
/// its last value that of its last row, NULL or not, as DataFusion's `first_value` and
/// `last_value` respect NULLs; ties in time go to the earlier or later row as they arrive.
/// A slot keeps a pointer to its row, so any type is picked the same way; the batches
/// pointed into are kept until their rows are written out.
pub(super) struct Picks {
    last: bool,
    order: Order,
    /// Each slot's row in the open bucket: its source and row number.
    rows: Vec<Option<(u32, u32)>>,
    /// The slots whose row is set (and, after a bucket closed, some that were).
    set: Vec<u32>,
    /// The argument's and the time column's arrays of the batches rows point into.
    sources: Vec<[ArrayRef; 2]>,
    /// The rows of slots written out since the last compaction.
    emitted: Vec<(usize, usize)>,
    /// Values and times written out, materialised at each compaction.
    values: Vec<ArrayRef>,
    times: Vec<ArrayRef>,
}

impl Picks {
    fn new(last: bool, order: Order) -> Self {
        Picks {
            last,
            order,
            rows: Vec::new(),
            set: Vec::new(),
            sources: Vec::new(),
            emitted: Vec::new(),
            values: Vec::new(),
            times: Vec::new(),
        }
    }

    fn ensure(&mut self, slots: usize) {
        if self.rows.len() < slots {
            self.rows.resize(slots, None);
        }
    }

    /// Keeps a batch's argument and time arrays as a source rows can point into.
    fn source(&mut self, value: ArrayRef, batch: &RecordBatch) -> DfResult<u32> {
        let time = self
            .order
            .time
            .evaluate(batch)?
            .into_array(batch.num_rows())?;
        let at = u32::try_from(self.sources.len())
            .map_err(|_| DataFusionError::Internal("too many first/last sources".into()))?;
        self.sources.push([value, time]);
        Ok(at)
    }

    fn update(&mut self, source: u32, rows: Range<usize>, row_slots: Option<&[u32]>) {
        if rows.is_empty() {
            return;
        }
        let mut pick = |slot: usize, row: usize| {
            let kept = &mut self.rows[slot];
            if kept.is_none() {
                self.set.push(slot as u32);
            } else if !self.last {
                return;
            }
            *kept = Some((source, row as u32));
        };
        match row_slots {
            None if self.last => pick(0, rows.end - 1),
            None => pick(0, rows.start),
            Some(slots) => {
                for row in rows {
                    pick(slots[row] as usize, row);
                }
            }
        }
    }

    fn emit(&mut self, slot: usize) {
        // A touched slot always has a row: NULL values are picked like any other.
        if let Some((source, row)) = self.rows[slot].take() {
            self.emitted.push((source as usize, row as usize));
        }
    }

    /// Materialises the rows written out, then keeps only the sources the open slots point
    /// into.
    fn compact(&mut self) -> DfResult<()> {
        if !self.emitted.is_empty() {
            let values: Vec<&dyn Array> = self.sources.iter().map(|s| s[0].as_ref()).collect();
            let times: Vec<&dyn Array> = self.sources.iter().map(|s| s[1].as_ref()).collect();
            self.values.push(interleave(&values, &self.emitted)?);
            self.times.push(interleave(&times, &self.emitted)?);
            self.emitted.clear();
        }
        // A slot set again after its bucket closed may be listed twice.
        let rows = &self.rows;
        self.set.retain(|&slot| rows[slot as usize].is_some());
        self.set.sort_unstable();
        self.set.dedup();
        let mut renumbered = vec![u32::MAX; self.sources.len()];
        let mut kept = Vec::new();
        for &slot in &self.set {
            if let Some((source, _)) = &mut self.rows[slot as usize] {
                let new = &mut renumbered[*source as usize];
                if *new == u32::MAX {
                    *new = kept.len() as u32;
                    kept.push(self.sources[*source as usize].clone());
                }
                *source = *new;
            }
        }
        self.sources = kept;
        Ok(())
    }

    fn finish(&mut self, columns: &mut Vec<ArrayRef>, emit: Emit) -> DfResult<()> {
        self.compact()?;
        let joined = |parts: &mut Vec<ArrayRef>, data_type: &DataType| -> DfResult<ArrayRef> {
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            let array = match refs.as_slice() {
                [] => new_empty_array(data_type),
                [one] => one.slice(0, one.len()),
                _ => concat(&refs)?,
            };
            parts.clear();
            Ok(array)
        };
        let values = joined(&mut self.values, &self.order.value_type)?;
        let times = joined(&mut self.times, &self.order.time_type)?;
        let rows = values.len();
        columns.push(values);
        if emit == Emit::States {
            columns.push(times);
            columns.push(Arc::new(BooleanArray::from(vec![true; rows])));
        }
        Ok(())
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
    /// First and last values: the batch's source among the accumulator's.
    Pick(u32),
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

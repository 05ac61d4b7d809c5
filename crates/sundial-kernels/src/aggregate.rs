//! Aggregates over the rows a [`Selection`] passes, without materialising them: per group
//! slot, a count of the valid rows and a sum or extreme, in dense arrays.
//!
//! Ungrouped, a block of 64 rows that all pass is folded in eight independent lanes the
//! compiler vectorises; other blocks visit their passing rows. Grouped, each passing row
//! updates the state of its slot (see [`crate::group`]).

use arrow_buffer::NullBuffer;

use crate::selection::Selection;
use crate::values::{
    ColumnValues, Native, PREFETCH_AHEAD_BYTES, from_total_key, prefetch, total_key, with_slice,
};

/// What an accumulator folds of each valid passing value. Every fold also counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// Only the count: `count(*)` (no column) or `count(col)`.
    Count,
    /// Integer sum, wrapping on overflow as DataFusion's `sum` does.
    SumInt,
    SumFloat,
    MinInt,
    MaxInt,
    /// Extremes of floating-point values in IEEE 754's total order (NaN is the largest).
    MinFloat,
    MaxFloat,
}

/// Where each row's state lives: all in slot 0, or row `i` in `slots[i]`.
#[derive(Debug, Clone, Copy)]
pub enum Slots<'a> {
    One,
    PerRow(&'a [u32]),
}

/// One aggregate's states, one per group slot.
#[derive(Debug, Clone)]
pub struct Accumulator {
    fold: Fold,
    counts: Vec<u64>,
    ints: Vec<i64>,
    floats: Vec<f64>,
}

/// Lanes of an ungrouped fold of a full block.
const LANES: usize = 8;

/// Passing rows from which a grouped fold takes a block's 64 rows without branching.
const DENSE_BLOCK_ROWS_MIN: u32 = 40;
/// Passing rows of a 64-row block from which an ungrouped fold takes all 64 values, masked
/// (a masked block costs about what visiting a dozen single rows does).
const MASKED_BLOCK_ROWS_MIN: u32 = 12;

/// For each byte of a selection word, a mask per bit: all ones where the row passes.
static BYTE_MASKS: [[u64; 8]; 256] = byte_masks();

const fn byte_masks() -> [[u64; 8]; 256] {
    let mut table = [[0u64; 8]; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut bit = 0;
        while bit < 8 {
            if (byte >> bit) & 1 == 1 {
                table[byte][bit] = u64::MAX;
            }
            bit += 1;
        }
        byte += 1;
    }
    table
}

/// A fold's value kept where its mask is all ones, else replaced by `identity`: bit
/// operations, so masked blocks vectorise.
trait Masked: Copy {
    fn masked(self, mask: u64, identity: Self) -> Self;
}

impl Masked for i64 {
    #[inline(always)]
    fn masked(self, mask: u64, identity: i64) -> i64 {
        (self & mask as i64) | (identity & !mask as i64)
    }
}

impl Masked for f64 {
    #[inline(always)]
    fn masked(self, mask: u64, identity: f64) -> f64 {
        f64::from_bits((self.to_bits() & mask) | (identity.to_bits() & !mask))
    }
}

impl Accumulator {
    pub fn new(fold: Fold) -> Accumulator {
        Accumulator {
            fold,
            counts: Vec::new(),
            ints: Vec::new(),
            floats: Vec::new(),
        }
    }

    pub fn fold(&self) -> Fold {
        self.fold
    }

    /// Makes room for slots `0..slots`.
    pub fn ensure(&mut self, slots: usize) {
        if self.counts.len() >= slots {
            return;
        }
        self.counts.resize(slots, 0);
        match self.fold {
            Fold::Count => {}
            Fold::SumInt => self.ints.resize(slots, 0),
            Fold::SumFloat => self.floats.resize(slots, 0.0),
            Fold::MinInt | Fold::MinFloat => self.ints.resize(slots, i64::MAX),
            Fold::MaxInt | Fold::MaxFloat => self.ints.resize(slots, i64::MIN),
        }
    }

    /// `slot` (ensured) back to no values.
    pub fn reset_slot(&mut self, slot: usize) {
        self.counts[slot] = 0;
        match self.fold {
            Fold::Count => {}
            Fold::SumInt => self.ints[slot] = 0,
            Fold::SumFloat => self.floats[slot] = 0.0,
            Fold::MinInt | Fold::MinFloat => self.ints[slot] = i64::MAX,
            Fold::MaxInt | Fold::MaxFloat => self.ints[slot] = i64::MIN,
        }
    }

    /// Bytes the states hold.
    pub fn bytes(&self) -> usize {
        self.counts.capacity() * 8 + self.ints.capacity() * 8 + self.floats.capacity() * 8
    }

    /// Valid values folded into `slot`.
    pub fn count(&self, slot: usize) -> u64 {
        self.counts.get(slot).copied().unwrap_or(0)
    }

    /// Folds into slot 0 (ensured) `count` values known without reading them (a zone map's)
    /// whose extreme is `key`: the value for an integer fold, its [`total_key`] for a
    /// floating-point one. Only for `min` and `max` folds.
    pub fn add_extreme(&mut self, key: i64, count: u64) {
        self.counts[0] += count;
        if count == 0 {
            return;
        }
        match self.fold {
            Fold::MinInt | Fold::MinFloat => self.ints[0] = self.ints[0].min(key),
            Fold::MaxInt | Fold::MaxFloat => self.ints[0] = self.ints[0].max(key),
            Fold::Count | Fold::SumInt | Fold::SumFloat => {
                debug_assert!(false, "{:?} takes no extreme", self.fold)
            }
        }
    }

    /// Counts `n` more values in `slot` (ensured), found without folding them.
    pub fn add_count(&mut self, slot: usize, n: u64) {
        self.counts[slot] += n;
    }

    /// Adds to `slot` (ensured) of a float sum `count` values that sum to `sum`, folded
    /// elsewhere.
    pub fn add_float_sum(&mut self, slot: usize, sum: f64, count: u64) {
        debug_assert_eq!(self.fold, Fold::SumFloat, "only float sums add sums");
        self.floats[slot] += sum;
        self.counts[slot] += count;
    }

    /// An integer fold's value for `slot` (meaningful when [`Self::count`] is not zero).
    pub fn int(&self, slot: usize) -> i64 {
        self.ints[slot]
    }

    /// A floating-point fold's value for `slot` (meaningful when [`Self::count`] is not zero).
    pub fn float(&self, slot: usize) -> f64 {
        match self.fold {
            Fold::MinFloat | Fold::MaxFloat => from_total_key(self.ints[slot]),
            _ => self.floats[slot],
        }
    }

    /// Folds the valid values of `column` in the rows `selection` passes (all `len` rows
    /// without one) into their slots; `count(*)` has no column. Slots must be ensured.
    pub fn update(
        &mut self,
        column: Option<&ColumnValues>,
        selection: Option<&Selection>,
        slots: Slots,
        len: usize,
    ) {
        let Some(column) = column else {
            let counts = &mut self.counts;
            match slots {
                Slots::One => {
                    counts[0] += selection.map_or(len, Selection::count) as u64;
                }
                Slots::PerRow(slots) => for_each_block(len, selection, None, |base, bits| {
                    if bits == u64::MAX {
                        for &slot in &slots[base..base + 64] {
                            counts[slot as usize] += 1;
                        }
                    } else {
                        let mut bits = bits;
                        while bits != 0 {
                            counts[slots[base + bits.trailing_zeros() as usize] as usize] += 1;
                            bits &= bits - 1;
                        }
                    }
                }),
            }
            return;
        };
        debug_assert!(column.len() >= len);
        let nulls = column.nulls;
        with_slice!(column.values,
        v => self.update_values(&v[..len], nulls, selection, slots),
        _b => {
            // BOOLEAN values are only counted.
            debug_assert_eq!(self.fold, Fold::Count);
            let counts = &mut self.counts;
            match slots {
                Slots::One => for_each_block(len, selection, nulls, |_, bits| {
                    counts[0] += u64::from(bits.count_ones())
                }),
                Slots::PerRow(slots) => for_each_row(len, selection, nulls, |row| {
                    counts[slots[row] as usize] += 1
                }),
            }
        })
    }

    /// Compiled for AVX2 too, and that version taken when the processor has it.
    fn update_values<T: Native>(
        &mut self,
        values: &[T],
        nulls: Option<&NullBuffer>,
        selection: Option<&Selection>,
        slots: Slots,
    ) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // Ungrouped folds of 64-bit values the compiler vectorises poorly: the
            // hand-written kernels.
            if let Slots::One = slots {
                let rows = || blocks(values.len(), selection, nulls);
                let (ints, floats, counts) = (&mut self.ints, &mut self.floats, &mut self.counts);
                // SAFETY (every call below): the processor supports AVX2, checked above.
                let done = match (self.fold, T::as_i64s(values), T::as_f64s(values)) {
                    (Fold::MinInt, Some(v), _) => {
                        Some(unsafe { crate::simd::extreme_i64::<false>(v, rows()) })
                    }
                    (Fold::MaxInt, Some(v), _) => {
                        Some(unsafe { crate::simd::extreme_i64::<true>(v, rows()) })
                    }
                    (Fold::MinFloat, _, Some(v)) => {
                        Some(unsafe { crate::simd::extreme_f64::<false>(v, rows()) })
                    }
                    (Fold::MaxFloat, _, Some(v)) => {
                        Some(unsafe { crate::simd::extreme_f64::<true>(v, rows()) })
                    }
                    (Fold::SumFloat, Some(v), _) => {
                        let (sum, n) = unsafe { crate::simd::float_sum_i64(v, rows()) };
                        floats[0] += sum;
                        counts[0] += n;
                        return;
                    }
                    _ => None,
                };
                if let Some((key, n)) = done {
                    ints[0] = match self.fold {
                        Fold::MinInt | Fold::MinFloat => ints[0].min(key),
                        _ => ints[0].max(key),
                    };
                    counts[0] += n;
                    return;
                }
            }
            // SAFETY: the processor supports AVX2, checked just above.
            unsafe { self.update_values_avx2(values, nulls, selection, slots) };
            return;
        }
        self.update_values_any(values, nulls, selection, slots);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn update_values_avx2<T: Native>(
        &mut self,
        values: &[T],
        nulls: Option<&NullBuffer>,
        selection: Option<&Selection>,
        slots: Slots,
    ) {
        self.update_values_any(values, nulls, selection, slots);
    }

    #[inline(always)]
    fn update_values_any<T: Native>(
        &mut self,
        values: &[T],
        nulls: Option<&NullBuffer>,
        selection: Option<&Selection>,
        slots: Slots,
    ) {
        let len = values.len();
        let (counts, ints, floats) = (&mut self.counts, &mut self.ints, &mut self.floats);
        if let Slots::PerRow(slots) = slots {
            // A block where most rows pass folds all 64 without branching, the others'
            // values replaced by the fold's identity; sparse blocks visit their rows.
            macro_rules! grouped {
                ($update:expr, $identity:expr) => {
                    for_each_block(len, selection, nulls, |base, bits| {
                        // Every cache line of the block a page ahead (see `prefetch`).
                        let ahead = base + PREFETCH_AHEAD_BYTES / std::mem::size_of::<T>();
                        for line in (0..64).step_by(64 / std::mem::size_of::<T>()) {
                            prefetch(values, ahead + line);
                        }
                        if bits.count_ones() >= DENSE_BLOCK_ROWS_MIN && base + 64 <= len {
                            let block: &[T; 64] = values[base..base + 64].try_into().expect("64");
                            let block_slots: &[u32; 64] =
                                slots[base..base + 64].try_into().expect("64");
                            for j in 0..64 {
                                let take = (bits >> j) & 1;
                                let slot = block_slots[j] as usize;
                                counts[slot] += take;
                                $update(slot, block[j], take == 1, $identity);
                            }
                        } else {
                            let mut bits = bits;
                            while bits != 0 {
                                let row = base + bits.trailing_zeros() as usize;
                                bits &= bits - 1;
                                let slot = slots[row] as usize;
                                counts[slot] += 1;
                                $update(slot, values[row], true, $identity);
                            }
                        }
                    })
                };
            }
            match self.fold {
                Fold::Count => grouped!(|_, _, _, _: ()| {}, ()),
                Fold::SumInt => grouped!(
                    |s: usize, v: T, take: bool, zero: i64| {
                        ints[s] = ints[s].wrapping_add(if take { v.to_i64() } else { zero })
                    },
                    0
                ),
                Fold::SumFloat => grouped!(
                    |s: usize, v: T, take: bool, zero: f64| {
                        floats[s] += if take { v.to_f64() } else { zero }
                    },
                    0.0
                ),
                Fold::MinInt => grouped!(
                    |s: usize, v: T, take: bool, top: i64| {
                        ints[s] = ints[s].min(if take { v.to_i64() } else { top })
                    },
                    i64::MAX
                ),
                Fold::MaxInt => grouped!(
                    |s: usize, v: T, take: bool, bottom: i64| {
                        ints[s] = ints[s].max(if take { v.to_i64() } else { bottom })
                    },
                    i64::MIN
                ),
                Fold::MinFloat => grouped!(
                    |s: usize, v: T, take: bool, top: i64| {
                        ints[s] = ints[s].min(if take { total_key(v.to_f64()) } else { top })
                    },
                    i64::MAX
                ),
                Fold::MaxFloat => grouped!(
                    |s: usize, v: T, take: bool, bottom: i64| {
                        ints[s] = ints[s].max(if take { total_key(v.to_f64()) } else { bottom })
                    },
                    i64::MIN
                ),
            }
            return;
        }
        macro_rules! ungrouped {
            ($init:expr; $key:expr; $combine:expr; $out:expr) => {{
                let mut lanes = [$init; LANES];
                let mut rest = $init;
                let mut n = 0u64;
                // A loop over `blocks`, not `for_each_block`'s closure: the lanes stay in
                // registers and the loop is compiled for AVX2 with its caller.
                for (base, bits) in blocks(len, selection, nulls) {
                    prefetch(
                        values,
                        base + PREFETCH_AHEAD_BYTES / std::mem::size_of::<T>(),
                    );
                    if bits == u64::MAX {
                        let block: &[T; 64] = values[base..base + 64].try_into().expect("64");
                        for chunk in block.chunks_exact(LANES) {
                            for l in 0..LANES {
                                lanes[l] = $combine(lanes[l], $key(chunk[l]));
                            }
                        }
                        n += 64;
                    } else if bits.count_ones() >= MASKED_BLOCK_ROWS_MIN && base + 64 <= len {
                        // Enough rows pass (a few NULLs or filtered rows): fold all 64, each
                        // row that does not pass replaced by the fold's identity through a
                        // mask of its bit, so the loop vectorises as the full one does.
                        let block: &[T; 64] = values[base..base + 64].try_into().expect("64");
                        for (c, chunk) in block.chunks_exact(LANES).enumerate() {
                            let masks = &BYTE_MASKS[((bits >> (c * LANES)) & 0xff) as usize];
                            for l in 0..LANES {
                                let key = $key(chunk[l]).masked(masks[l], $init);
                                lanes[l] = $combine(lanes[l], key);
                            }
                        }
                        n += u64::from(bits.count_ones());
                    } else {
                        let mut bits = bits;
                        n += u64::from(bits.count_ones());
                        while bits != 0 {
                            let row = base + bits.trailing_zeros() as usize;
                            bits &= bits - 1;
                            rest = $combine(rest, $key(values[row]));
                        }
                    }
                }
                counts[0] += n;
                $out(lanes.into_iter().fold(rest, $combine));
            }};
        }
        match self.fold {
            Fold::Count => {
                let mut n = 0u64;
                for_each_block(len, selection, nulls, |_, bits| {
                    n += u64::from(bits.count_ones())
                });
                counts[0] += n;
            }
            Fold::SumInt => ungrouped!(
                0i64;
                |v: T| v.to_i64();
                i64::wrapping_add;
                |s: i64| ints[0] = ints[0].wrapping_add(s)
            ),
            Fold::SumFloat if T::INT => {
                let (sum, n) = int_float_sum(values, selection, nulls);
                floats[0] += sum;
                counts[0] += n;
            }
            Fold::SumFloat => ungrouped!(
                0f64;
                |v: T| v.to_f64();
                |a: f64, b: f64| a + b;
                |s: f64| floats[0] += s
            ),
            Fold::MinInt => ungrouped!(
                i64::MAX;
                |v: T| v.to_i64();
                i64::min;
                |s: i64| ints[0] = ints[0].min(s)
            ),
            Fold::MaxInt => ungrouped!(
                i64::MIN;
                |v: T| v.to_i64();
                i64::max;
                |s: i64| ints[0] = ints[0].max(s)
            ),
            Fold::MinFloat => {
                let (key, n) = float_extreme::<T, false>(values, selection, nulls);
                ints[0] = ints[0].min(key);
                counts[0] += n;
            }
            Fold::MaxFloat => {
                let (key, n) = float_extreme::<T, true>(values, selection, nulls);
                ints[0] = ints[0].max(key);
                counts[0] += n;
            }
        }
    }
}

/// The [`total_key`] of the largest (`MAX`) or smallest value of the rows that pass and are
/// valid, in IEEE 754's total order, and how many there are (the key is the fold's identity
/// when none is).
///
/// Blocks are folded into eight lanes with IEEE comparisons of the floats themselves, which
/// vectorise; they agree with the total order except on NaN and on the two zeros. So a block
/// holding a NaN is reduced by keys instead, and the lanes note whether a zero of the sign
/// the total order prefers (-0.0 for MIN) passed, which decides an extreme that is a zero.
/// Rows that do not pass are replaced by the identity (an infinity) through their bit's mask.
#[inline(always)]
fn float_extreme<T: Native, const MAX: bool>(
    values: &[T],
    selection: Option<&Selection>,
    nulls: Option<&NullBuffer>,
) -> (i64, u64) {
    let len = values.len();
    let better = |a: i64, b: i64| if MAX { a.max(b) } else { a.min(b) };
    let identity = if MAX {
        f64::NEG_INFINITY
    } else {
        f64::INFINITY
    };
    let mut best = if MAX { i64::MIN } else { i64::MAX };
    // The lanes of every block folded without NaN; whether any was.
    let mut lanes = [identity; LANES];
    let mut preferred_zero = [false; LANES];
    let mut folded = false;
    let mut n = 0u64;
    for (base, bits) in blocks(len, selection, nulls) {
        prefetch(
            values,
            base + PREFETCH_AHEAD_BYTES / std::mem::size_of::<T>(),
        );
        let passing = bits.count_ones();
        n += u64::from(passing);
        if passing >= MASKED_BLOCK_ROWS_MIN && base + 64 <= len {
            let block: &[T; 64] = values[base..base + 64].try_into().expect("64");
            let mut block_lanes = [identity; LANES];
            let mut unordered = [false; LANES];
            let mut zero = [false; LANES];
            for (c, chunk) in block.chunks_exact(LANES).enumerate() {
                let masks = &BYTE_MASKS[((bits >> (c * LANES)) & 0xff) as usize];
                for l in 0..LANES {
                    let x = chunk[l].to_f64().masked(masks[l], identity);
                    unordered[l] |= x.is_nan();
                    // The masked rows are infinities, never zeros.
                    zero[l] |= x == 0.0 && x.is_sign_negative() != MAX;
                    let wins = if MAX {
                        x > block_lanes[l]
                    } else {
                        x < block_lanes[l]
                    };
                    block_lanes[l] = if wins { x } else { block_lanes[l] };
                }
            }
            if !unordered.contains(&true) {
                for l in 0..LANES {
                    let wins = if MAX {
                        block_lanes[l] > lanes[l]
                    } else {
                        block_lanes[l] < lanes[l]
                    };
                    lanes[l] = if wins { block_lanes[l] } else { lanes[l] };
                    preferred_zero[l] |= zero[l];
                }
                folded = true;
                continue;
            }
        }
        let mut bits = bits;
        while bits != 0 {
            let row = base + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            best = better(best, total_key(values[row].to_f64()));
        }
    }
    if folded {
        let extreme =
            lanes.into_iter().fold(
                identity,
                |a, b| if (b > a) == MAX && b != a { b } else { a },
            );
        // An extreme that is a zero is the zero of the preferred sign if one passed, else
        // the other: IEEE comparisons cannot tell the two apart.
        let extreme = if extreme != 0.0 {
            extreme
        } else if preferred_zero.contains(&true) == MAX {
            0.0
        } else {
            -0.0
        };
        best = better(best, total_key(extreme));
    }
    (best, n)
}

/// The sum, as a float, of the integer values of the rows that pass and are valid, and how
/// many there are (`avg` of an integer column).
///
/// Each block's values are summed exactly as integers and the block's sum added as a float:
/// one conversion per block, where AVX2 has none for 64-bit lanes and a conversion per value
/// would be scalar, and no rounding inside a block. A block holding a value beyond 2^56 in
/// magnitude, whose 64 values could overflow `i64`, adds them one at a time as floats.
#[inline(always)]
fn int_float_sum<T: Native>(
    values: &[T],
    selection: Option<&Selection>,
    nulls: Option<&NullBuffer>,
) -> (f64, u64) {
    let len = values.len();
    let mut total = 0f64;
    let mut n = 0u64;
    for (base, bits) in blocks(len, selection, nulls) {
        prefetch(
            values,
            base + PREFETCH_AHEAD_BYTES / std::mem::size_of::<T>(),
        );
        let passing = bits.count_ones();
        n += u64::from(passing);
        if passing >= MASKED_BLOCK_ROWS_MIN && base + 64 <= len {
            let block: &[T; 64] = values[base..base + 64].try_into().expect("64");
            let mut sums = [0i64; LANES];
            // Nonzero once a value lies outside [-2^56, 2^56).
            let mut wide = [0u64; LANES];
            for (c, chunk) in block.chunks_exact(LANES).enumerate() {
                let masks = &BYTE_MASKS[((bits >> (c * LANES)) & 0xff) as usize];
                for l in 0..LANES {
                    let v = chunk[l].to_i64().masked(masks[l], 0);
                    sums[l] = sums[l].wrapping_add(v);
                    wide[l] |= (v.wrapping_add(1 << 56) as u64) >> 57;
                }
            }
            if wide == [0; LANES] {
                // At most 64 values below 2^56 in magnitude: the sum is below 2^62.
                total += sums.iter().sum::<i64>() as f64;
                continue;
            }
        }
        let mut bits = bits;
        while bits != 0 {
            total += values[base + bits.trailing_zeros() as usize].to_f64();
            bits &= bits - 1;
        }
    }
    (total, n)
}

/// Calls `f(first_row, bits)` for each 64-row block of `len` rows with the bits of the rows
/// that pass `selection` (all without one) and are valid in `nulls`; blocks with none are
/// skipped.
#[inline(always)]
pub(crate) fn for_each_block(
    len: usize,
    selection: Option<&Selection>,
    nulls: Option<&NullBuffer>,
    mut f: impl FnMut(usize, u64),
) {
    for (base, bits) in blocks(len, selection, nulls) {
        f(base, bits);
    }
}

/// The 64-row blocks of `len` rows with a row that passes `selection` (all without one) and is
/// valid in `nulls`: each block's first row and the bits of those rows. The bits are computed
/// first, a word per block, so that the loop over them is a plain loop over a slice.
#[inline(always)]
pub(crate) fn blocks(
    len: usize,
    selection: Option<&Selection>,
    nulls: Option<&NullBuffer>,
) -> impl Iterator<Item = (usize, u64)> {
    let words = len.div_ceil(64);
    let mut bits: Vec<u64> = match selection {
        Some(s) => s.words()[..words].to_vec(),
        None => vec![u64::MAX; words],
    };
    if let Some(last) = bits.last_mut()
        && !len.is_multiple_of(64)
    {
        *last &= (1u64 << (len % 64)) - 1;
    }
    // The validity of the column's rows from its first; bits past `len` were cut above.
    if let Some(nulls) = nulls {
        let chunks = nulls.inner().bit_chunks();
        let remainder = (chunks.remainder_len() > 0).then(|| chunks.remainder_bits());
        let mut valid = chunks.iter().chain(remainder);
        for word in &mut bits {
            *word &= valid.next().unwrap_or(0);
        }
    }
    bits.into_iter()
        .enumerate()
        .filter(|&(_, b)| b != 0)
        .map(|(w, b)| (w * 64, b))
}

/// Calls `f(row)` for each row that passes `selection` and is valid in `nulls`, ascending.
#[inline(always)]
pub(crate) fn for_each_row(
    len: usize,
    selection: Option<&Selection>,
    nulls: Option<&NullBuffer>,
    mut f: impl FnMut(usize),
) {
    for_each_block(len, selection, nulls, |base, bits| {
        if bits == u64::MAX {
            for row in base..base + 64 {
                f(row);
            }
        } else {
            let mut bits = bits;
            while bits != 0 {
                f(base + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, ArrayRef, Float64Array, Int16Array, Int64Array};
    use rand::{Rng, SeedableRng};

    use super::*;

    /// Every fold, grouped and not, against a row-at-a-time reference.
    #[test]
    fn folds_match_a_row_at_a_time_reference() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        // Lengths, and whether NaNs occur (blocks without them take the floats' own
        // comparisons); zeros of both signs and infinities always may.
        // A third kind: no infinities and nothing above zero, so that extremes are zeros.
        // Many single blocks of that kind: one block's wrong zero is not hidden by another's.
        let cases = [
            (0, true, 0),
            (5, true, 0),
            (64, true, 0),
            (130, true, 0),
            (1000, true, 0),
            (1000, false, 0),
            (4000, false, 0),
            (4000, false, 1),
        ];
        for (len, nans, kind) in cases.into_iter().chain([(64, false, 1); 200]) {
            let floats: Vec<Option<f64>> = (0..len)
                .map(|_| {
                    rng.random_bool(0.8).then(|| match rng.random_range(0..40) {
                        0 | 1 if nans => f64::NAN,
                        2 | 6 | 7 if kind == 1 => -0.0,
                        3 | 8 | 9 if kind == 1 => 0.0,
                        2 => -0.0,
                        3 => 0.0,
                        4 if kind == 0 => f64::INFINITY,
                        5 if kind == 0 => f64::NEG_INFINITY,
                        _ if kind == 1 => -(rng.random_range(1..100) as f64),
                        _ => rng.random_range(-100..100) as f64 + 0.25,
                    })
                })
                .collect();
            let shorts: Vec<Option<i16>> = (0..len)
                .map(|_| rng.random_bool(0.8).then(|| rng.random_range(-300..300)))
                .collect();
            let wide_blocks = rng.random_bool(0.3);
            let longs: Vec<Option<i64>> = (0..len)
                .map(|i| {
                    rng.random_bool(0.8).then(|| match rng.random_range(0..50) {
                        0 if wide_blocks && i % 64 < 8 => i64::MAX - rng.random_range(0..9),
                        1 if wide_blocks => i64::MIN + rng.random_range(0..9),
                        2 => (1 << 56) - rng.random_range(0..2),
                        3 => -(1 << 56) - rng.random_range(0..2),
                        _ => rng.random_range(-1_000_000..1_000_000),
                    })
                })
                .collect();
            let l: ArrayRef = Arc::new(Int64Array::from(longs.clone()));
            let f: ArrayRef = Arc::new(Float64Array::from(floats.clone()));
            let s: ArrayRef = Arc::new(Int16Array::from(shorts.clone()));
            let selection = (len > 0).then(|| {
                let mut sel = Selection::all(len);
                for (i, w) in sel.words_mut().iter_mut().enumerate() {
                    *w &= if i % 3 == 0 { u64::MAX } else { rng.random() };
                }
                sel
            });
            let passes = |i: usize| {
                selection
                    .as_ref()
                    .is_none_or(|s| s.words()[i / 64] >> (i % 64) & 1 == 1)
            };
            let slots: Vec<u32> = (0..len).map(|i| (i % 3) as u32).collect();
            for grouped in [false, true] {
                let slot_of = |i: usize| if grouped { slots[i] as usize } else { 0 };
                let slots = if grouped {
                    Slots::PerRow(&slots)
                } else {
                    Slots::One
                };
                let fc = ColumnValues::of(f.as_ref()).unwrap();
                let sc = ColumnValues::of(s.as_ref()).unwrap();
                for fold in [
                    Fold::Count,
                    Fold::SumInt,
                    Fold::SumFloat,
                    Fold::MinInt,
                    Fold::MaxInt,
                    Fold::MinFloat,
                    Fold::MaxFloat,
                ] {
                    let mut acc = Accumulator::new(fold);
                    acc.ensure(3);
                    let column = if matches!(fold, Fold::SumFloat | Fold::MinFloat | Fold::MaxFloat)
                    {
                        fc
                    } else {
                        sc
                    };
                    acc.update(Some(&column), selection.as_ref(), slots, len);
                    for slot in 0..3 {
                        let rows: Vec<usize> = (0..len)
                            .filter(|&i| passes(i) && slot_of(i) == slot)
                            .collect();
                        let fs: Vec<f64> = rows.iter().filter_map(|&i| floats[i]).collect();
                        let ss: Vec<i64> = rows
                            .iter()
                            .filter_map(|&i| shorts[i].map(i64::from))
                            .collect();
                        match fold {
                            Fold::Count | Fold::SumInt | Fold::MinInt | Fold::MaxInt => {
                                assert_eq!(acc.count(slot), ss.len() as u64, "{fold:?}")
                            }
                            _ => assert_eq!(acc.count(slot), fs.len() as u64, "{fold:?}"),
                        }
                        match fold {
                            Fold::SumInt => assert_eq!(acc.int(slot), ss.iter().sum::<i64>()),
                            Fold::MinInt if !ss.is_empty() => {
                                assert_eq!(acc.int(slot), *ss.iter().min().unwrap())
                            }
                            Fold::MaxInt if !ss.is_empty() => {
                                assert_eq!(acc.int(slot), *ss.iter().max().unwrap())
                            }
                            Fold::SumFloat => {
                                let want: f64 = fs.iter().sum();
                                let got = acc.float(slot);
                                assert!(
                                    want.is_nan() && got.is_nan() || want == got,
                                    "{want} {got}"
                                );
                            }
                            Fold::MinFloat if !fs.is_empty() => assert_eq!(
                                acc.float(slot).to_bits(),
                                fs.iter().copied().min_by(f64::total_cmp).unwrap().to_bits()
                            ),
                            Fold::MaxFloat if !fs.is_empty() => assert_eq!(
                                acc.float(slot).to_bits(),
                                fs.iter().copied().max_by(f64::total_cmp).unwrap().to_bits()
                            ),
                            _ => {}
                        }
                    }
                    // 64-bit integers: the hand-written extremes, and sums as floats (`avg`),
                    // exact per block unless a block holds values too wide for that.
                    if matches!(fold, Fold::MinInt | Fold::MaxInt | Fold::SumFloat) {
                        let lc = ColumnValues::of(l.as_ref()).unwrap();
                        let mut acc = Accumulator::new(fold);
                        acc.ensure(3);
                        acc.update(Some(&lc), selection.as_ref(), slots, len);
                        for slot in 0..3 {
                            let ls: Vec<i64> = (0..len)
                                .filter(|&i| passes(i) && slot_of(i) == slot)
                                .filter_map(|i| longs[i])
                                .collect();
                            assert_eq!(acc.count(slot), ls.len() as u64, "{fold:?}");
                            match fold {
                                Fold::MinInt if !ls.is_empty() => {
                                    assert_eq!(acc.int(slot), *ls.iter().min().unwrap())
                                }
                                Fold::MaxInt if !ls.is_empty() => {
                                    assert_eq!(acc.int(slot), *ls.iter().max().unwrap())
                                }
                                Fold::SumFloat => {
                                    let exact: i128 = ls.iter().map(|&v| i128::from(v)).sum();
                                    let magnitude: f64 = ls.iter().map(|&v| (v as f64).abs()).sum();
                                    let got = acc.float(slot);
                                    assert!(
                                        (got - exact as f64).abs() <= magnitude * 1e-12,
                                        "{exact} {got}"
                                    );
                                }
                                _ => {}
                            }
                        }
                    }
                    // The portable folds, which AVX2 machines take only for other types
                    // (FLOAT, narrower integers), against the same reference.
                    if !grouped && fold == Fold::Count {
                        let passing: Vec<usize> = (0..len).filter(|&i| passes(i)).collect();
                        let fa = f.as_any().downcast_ref::<Float64Array>().unwrap();
                        let fs: Vec<f64> = passing.iter().filter_map(|&i| floats[i]).collect();
                        let (min, n) = float_extreme::<f64, false>(
                            fa.values(),
                            selection.as_ref(),
                            fa.nulls(),
                        );
                        let (max, _) =
                            float_extreme::<f64, true>(fa.values(), selection.as_ref(), fa.nulls());
                        assert_eq!(n, fs.len() as u64);
                        if let (Some(lo), Some(hi)) = (
                            fs.iter().copied().min_by(f64::total_cmp),
                            fs.iter().copied().max_by(f64::total_cmp),
                        ) {
                            assert_eq!(from_total_key(min).to_bits(), lo.to_bits());
                            assert_eq!(from_total_key(max).to_bits(), hi.to_bits());
                        }
                        let la = l.as_any().downcast_ref::<Int64Array>().unwrap();
                        let ls: Vec<i64> = passing.iter().filter_map(|&i| longs[i]).collect();
                        let (sum, n) = int_float_sum(la.values(), selection.as_ref(), la.nulls());
                        assert_eq!(n, ls.len() as u64);
                        let exact: i128 = ls.iter().map(|&v| i128::from(v)).sum();
                        let magnitude: f64 = ls.iter().map(|&v| (v as f64).abs()).sum();
                        assert!(
                            (sum - exact as f64).abs() <= magnitude * 1e-12,
                            "{exact} {sum}"
                        );
                    }
                    // count(*) counts passing rows, NULL or not.
                    let mut star = Accumulator::new(Fold::Count);
                    star.ensure(3);
                    star.update(None, selection.as_ref(), slots, len);
                    let total: u64 = (0..3).map(|s| star.count(s)).sum();
                    assert_eq!(total, (0..len).filter(|&i| passes(i)).count() as u64);
                }
            }
        }
    }
}

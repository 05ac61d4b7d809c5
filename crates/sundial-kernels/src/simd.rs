//! Comparisons of 32- and 64-bit integers (SYMBOL codes, INT, LONG, TIMESTAMP) with a
//! constant, written with AVX2 instructions: each compare yields 8 (or 4) lanes whose signs
//! one `movemask` packs into bits, where the compiler's vectorisation of the portable loop
//! widens every lane to 64 bits and assembles the word with shifts.
//!
//! Every function here is compiled for AVX2 and called only after the processor was found to
//! have it (`filter::compare`, `filter::in_list`, `aggregate`). The comparisons fill `words`
//! as the portable loop does: `words[w] &=` the rows of block `w` that pass, skipping words
//! already zero and prefetching ahead.
//!
//! The ungrouped folds of 64-bit values are here too, where the compiler's vectorisation of
//! the portable lanes falls short: [`extreme_i64`] (AVX2 has no 64-bit integer minimum, and
//! the portable lanes fold one `cmov` at a time), [`extreme_f64`] (a NaN test, a zero test
//! and a minimum per register, the block's lanes merged only when it held no NaN) and
//! [`float_sum_i64`] (`avg` of a LONG: exact integer sums per block, as AVX2 converts no
//! 64-bit integer to a float).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::{
    __m256d, __m256i, _CMP_EQ_OQ, _CMP_UNORD_Q, _mm256_add_epi64, _mm256_and_pd, _mm256_andnot_pd,
    _mm256_blendv_epi8, _mm256_blendv_pd, _mm256_castsi256_pd, _mm256_castsi256_ps, _mm256_cmp_pd,
    _mm256_cmpeq_epi32, _mm256_cmpeq_epi64, _mm256_cmpgt_epi32, _mm256_cmpgt_epi64,
    _mm256_loadu_pd, _mm256_loadu_si256, _mm256_max_pd, _mm256_min_pd, _mm256_movemask_pd,
    _mm256_movemask_ps, _mm256_or_pd, _mm256_or_si256, _mm256_set1_epi32, _mm256_set1_epi64x,
    _mm256_set1_pd, _mm256_setzero_pd, _mm256_setzero_si256, _mm256_srli_epi64, _mm256_storeu_pd,
    _mm256_storeu_si256, _mm256_testz_si256,
};

use crate::values::total_key;

use crate::values::{PREFETCH_AHEAD_BYTES, prefetch};

/// What a lane compares: the value equal to the constant, above it, or below it. `<>`, `<=`
/// and `>=` are the negations of `=`, `>` and `<`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaneTest {
    Eq,
    Gt,
    Lt,
}

/// A lane type: how to load, broadcast, compare and pack 256 bits of it.
pub(crate) trait Lanes: Copy {
    /// Values per 256-bit register.
    const PER_REGISTER: usize;
    /// `v` in every lane.
    fn splat(v: Self) -> __m256i;
    fn eq(a: __m256i, b: __m256i) -> __m256i;
    fn gt(a: __m256i, b: __m256i) -> __m256i;
    /// One bit per lane, the lane's sign.
    fn bits(m: __m256i) -> u64;
}

impl Lanes for i32 {
    const PER_REGISTER: usize = 8;
    #[inline(always)]
    fn splat(v: i32) -> __m256i {
        // SAFETY: AVX is implied by AVX2, which every caller has checked.
        unsafe { _mm256_set1_epi32(v) }
    }
    #[inline(always)]
    fn eq(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: as in `splat`.
        unsafe { _mm256_cmpeq_epi32(a, b) }
    }
    #[inline(always)]
    fn gt(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: as in `splat`.
        unsafe { _mm256_cmpgt_epi32(a, b) }
    }
    #[inline(always)]
    fn bits(m: __m256i) -> u64 {
        // SAFETY: as in `splat`.
        u64::from(unsafe { _mm256_movemask_ps(_mm256_castsi256_ps(m)) } as u8)
    }
}

impl Lanes for i64 {
    const PER_REGISTER: usize = 4;
    #[inline(always)]
    fn splat(v: i64) -> __m256i {
        // SAFETY: as for i32.
        unsafe { _mm256_set1_epi64x(v) }
    }
    #[inline(always)]
    fn eq(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: as for i32.
        unsafe { _mm256_cmpeq_epi64(a, b) }
    }
    #[inline(always)]
    fn gt(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: as for i32.
        unsafe { _mm256_cmpgt_epi64(a, b) }
    }
    #[inline(always)]
    fn bits(m: __m256i) -> u64 {
        // SAFETY: as for i32.
        u64::from(unsafe { _mm256_movemask_pd(_mm256_castsi256_pd(m)) } as u8 & 0xf)
    }
}

/// `words[w] &= ` the bits `block` computes for each 64-value block of `values` (for a
/// shorter last block, the values padded with copies of its first, their bits cut off).
#[inline(always)]
fn run<T: Lanes>(values: &[T], words: &mut [u64], block: impl Fn(&[T; 64]) -> u64) {
    let mut blocks = values.chunks_exact(64);
    for (w, (word, b)) in words.iter_mut().zip(&mut blocks).enumerate() {
        prefetch(
            values,
            w * 64 + PREFETCH_AHEAD_BYTES / std::mem::size_of::<T>(),
        );
        if *word == 0 {
            continue;
        }
        *word &= block(b.try_into().expect("64 values"));
    }
    let rest = blocks.remainder();
    if let Some(&first) = rest.first() {
        let mut padded = [first; 64];
        padded[..rest.len()].copy_from_slice(rest);
        words[values.len() / 64] &= block(&padded) & ((1u64 << rest.len()) - 1);
    }
}

/// The bits of `block` whose lanes `test` sets (all ones for passing lanes).
#[inline(always)]
fn block_bits<T: Lanes>(block: &[T; 64], test: impl Fn(__m256i) -> __m256i) -> u64 {
    let mut bits = 0u64;
    let step = T::PER_REGISTER;
    for r in 0..64 / step {
        // SAFETY: `block` holds 64 values, so the 32 bytes at value `r * step` lie inside it;
        // the load is unaligned.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(r * step).cast::<__m256i>()) };
        bits |= T::bits(test(v)) << (r * step);
    }
    bits
}

/// `words[w] &=` the rows of block `w` whose value passes `test` against `key` (or, with
/// `negated`, fails it).
#[target_feature(enable = "avx2")]
pub(crate) fn compare<T: Lanes>(
    values: &[T],
    words: &mut [u64],
    test: LaneTest,
    negated: bool,
    key: T,
) {
    let k = T::splat(key);
    let flip = if negated { u64::MAX } else { 0 };
    match test {
        LaneTest::Eq => run(values, words, |b| block_bits(b, |v| T::eq(v, k)) ^ flip),
        LaneTest::Gt => run(values, words, |b| block_bits(b, |v| T::gt(v, k)) ^ flip),
        LaneTest::Lt => run(values, words, |b| block_bits(b, |v| T::gt(k, v)) ^ flip),
    }
}

/// `words[w] &=` the rows of block `w` whose value lies in `lo..=hi`.
#[target_feature(enable = "avx2")]
pub(crate) fn range<T: Lanes>(values: &[T], words: &mut [u64], lo: T, hi: T) {
    let (lo, hi) = (T::splat(lo), T::splat(hi));
    // Outside: below `lo` or above `hi`.
    run(values, words, |b| {
        !block_bits(b, |v| _mm256_or_si256(T::gt(lo, v), T::gt(v, hi)))
    });
}

/// `words[w] &=` the rows of block `w` whose value is one of `keys` (1 to 8 of them), or with
/// `negated`, none of them.
#[target_feature(enable = "avx2")]
pub(crate) fn in_list<T: Lanes>(values: &[T], words: &mut [u64], keys: &[T], negated: bool) {
    match keys.len() {
        1 => in_fixed::<T, 1>(values, words, keys, negated),
        2 => in_fixed::<T, 2>(values, words, keys, negated),
        3 | 4 => in_fixed::<T, 4>(values, words, keys, negated),
        _ => in_fixed::<T, 8>(values, words, keys, negated),
    }
}

/// [`in_list`] over `N` keys: the list padded with its first, so the compares unroll and the
/// keys stay in registers.
#[target_feature(enable = "avx2")]
fn in_fixed<T: Lanes, const N: usize>(values: &[T], words: &mut [u64], keys: &[T], negated: bool) {
    assert!(!keys.is_empty() && keys.len() <= N, "1 to {N} keys");
    let mut splats = [T::splat(keys[0]); N];
    for (s, &k) in splats.iter_mut().zip(keys) {
        *s = T::splat(k);
    }
    let member = |v: __m256i| {
        let mut any = T::eq(v, splats[0]);
        for &k in &splats[1..] {
            any = _mm256_or_si256(any, T::eq(v, k));
        }
        any
    };
    if negated {
        run(values, words, |b| !block_bits(b, member));
    } else {
        run(values, words, |b| block_bits(b, member));
    }
}

/// Passing rows of a 64-row block from which [`extreme_i64`] blends all 64 values with the
/// identity rather than visiting the passing ones.
const BLENDED_BLOCK_ROWS_MIN: u32 = 12;

/// For each 4 bits of a selection word, a lane mask per bit: all ones where the row passes.
static NIBBLE_MASKS: [[i64; 4]; 16] = nibble_masks();

const fn nibble_masks() -> [[i64; 4]; 16] {
    let mut table = [[0i64; 4]; 16];
    let mut nibble = 0;
    while nibble < 16 {
        let mut bit = 0;
        while bit < 4 {
            if (nibble >> bit) & 1 == 1 {
                table[nibble][bit] = -1;
            }
            bit += 1;
        }
        nibble += 1;
    }
    table
}

/// The lane masks of rows `4 * r..4 * r + 4` of a block whose passing rows are `bits`.
#[inline(always)]
fn nibble_mask(bits: u64, r: usize) -> __m256i {
    // SAFETY: a row of `NIBBLE_MASKS` holds 32 bytes; the load is unaligned.
    unsafe {
        _mm256_loadu_si256(
            NIBBLE_MASKS[((bits >> (4 * r)) & 0xf) as usize]
                .as_ptr()
                .cast::<__m256i>(),
        )
    }
}

/// The largest (`MAX`) or smallest of `values` in the rows of `blocks` (each block's first row
/// and the bits of its rows that count, as `aggregate::blocks` yields them), and how many
/// rows that is; the fold's identity (`i64::MIN` or `i64::MAX`) when none.
#[target_feature(enable = "avx2")]
pub(crate) fn extreme_i64<const MAX: bool>(
    values: &[i64],
    blocks: impl Iterator<Item = (usize, u64)>,
) -> (i64, u64) {
    let identity = if MAX { i64::MIN } else { i64::MAX };
    let better = |a: i64, b: i64| if MAX { a.max(b) } else { a.min(b) };
    let id = _mm256_set1_epi64x(identity);
    // Four registers, so that consecutive compares do not wait on each other.
    let mut acc = [id; 4];
    let mut rest = identity;
    let mut n = 0u64;
    for (base, bits) in blocks {
        prefetch(values, base + PREFETCH_AHEAD_BYTES / 8);
        let passing = bits.count_ones();
        n += u64::from(passing);
        if passing >= BLENDED_BLOCK_ROWS_MIN && base + 64 <= values.len() {
            let block = &values[base..base + 64];
            // Four registers of four values a step, each folded into its own register (a
            // constant index, so the registers stay registers).
            for q in 0..4 {
                for (j, a) in acc.iter_mut().enumerate() {
                    let r = 4 * q + j;
                    // SAFETY: `block` holds 64 values, so the 32 bytes at value `4 * r` lie
                    // inside it; the load is unaligned.
                    let v =
                        unsafe { _mm256_loadu_si256(block.as_ptr().add(4 * r).cast::<__m256i>()) };
                    let v = if bits == u64::MAX {
                        v
                    } else {
                        _mm256_blendv_epi8(id, v, nibble_mask(bits, r))
                    };
                    let wins = if MAX {
                        _mm256_cmpgt_epi64(v, *a)
                    } else {
                        _mm256_cmpgt_epi64(*a, v)
                    };
                    *a = _mm256_blendv_epi8(*a, v, wins);
                }
            }
        } else {
            let mut bits = bits;
            while bits != 0 {
                rest = better(rest, values[base + bits.trailing_zeros() as usize]);
                bits &= bits - 1;
            }
        }
    }
    let mut lanes = [0i64; 16];
    for (r, a) in acc.iter().enumerate() {
        // SAFETY: `lanes` holds 16 values, so the 32 bytes at value `4 * r` lie inside it.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().add(4 * r).cast::<__m256i>(), *a) };
    }
    (lanes.into_iter().fold(rest, better), n)
}

/// The [`total_key`] of the largest (`MAX`) or smallest of `values` in the rows of `blocks`
/// (as for [`extreme_i64`]) in IEEE 754's total order, and how many rows that is; the fold's
/// identity (`i64::MIN` or `i64::MAX`) when none.
///
/// A block is folded into its own registers, which join the running ones only when no value
/// of it is a NaN (a block with one is reduced by keys); each register also notes whether a
/// zero of the sign the total order prefers (-0.0 for MIN) passed, which decides an extreme
/// that IEEE comparisons found to be a zero.
#[target_feature(enable = "avx2")]
pub(crate) fn extreme_f64<const MAX: bool>(
    values: &[f64],
    blocks: impl Iterator<Item = (usize, u64)>,
) -> (i64, u64) {
    let better = |a: i64, b: i64| if MAX { a.max(b) } else { a.min(b) };
    let identity = if MAX {
        f64::NEG_INFINITY
    } else {
        f64::INFINITY
    };
    let fold = |a: __m256d, b: __m256d| {
        if MAX {
            _mm256_max_pd(a, b)
        } else {
            _mm256_min_pd(a, b)
        }
    };
    let id = _mm256_set1_pd(identity);
    let zero = _mm256_setzero_pd();
    let mut acc = [id; 4];
    // The sign bit set in a lane where a preferred zero passed.
    let mut preferred_zero = zero;
    let mut folded = false;
    let mut best = if MAX { i64::MIN } else { i64::MAX };
    let mut n = 0u64;
    for (base, bits) in blocks {
        prefetch(values, base + PREFETCH_AHEAD_BYTES / 8);
        let passing = bits.count_ones();
        n += u64::from(passing);
        if passing >= BLENDED_BLOCK_ROWS_MIN && base + 64 <= values.len() {
            let block = &values[base..base + 64];
            let mut local = [id; 4];
            let mut unordered = zero;
            let mut zeros = zero;
            for q in 0..4 {
                for (j, l) in local.iter_mut().enumerate() {
                    let r = 4 * q + j;
                    // SAFETY: `block` holds 64 values, so the 32 bytes at value `4 * r` lie
                    // inside it; the load is unaligned.
                    let v = unsafe { _mm256_loadu_pd(block.as_ptr().add(4 * r)) };
                    let v = if bits == u64::MAX {
                        v
                    } else {
                        _mm256_blendv_pd(id, v, _mm256_castsi256_pd(nibble_mask(bits, r)))
                    };
                    unordered = _mm256_or_pd(unordered, _mm256_cmp_pd::<_CMP_UNORD_Q>(v, v));
                    // Equal to zero, and the sign bit is the preferred one's: for MIN the
                    // value's own sign bit (set for -0.0), for MAX its complement (set for 0.0).
                    let is_zero = _mm256_cmp_pd::<_CMP_EQ_OQ>(v, zero);
                    zeros = _mm256_or_pd(
                        zeros,
                        if MAX {
                            _mm256_andnot_pd(v, is_zero)
                        } else {
                            _mm256_and_pd(v, is_zero)
                        },
                    );
                    *l = fold(*l, v);
                }
            }
            if _mm256_movemask_pd(unordered) == 0 {
                for (a, l) in acc.iter_mut().zip(local) {
                    *a = fold(*a, l);
                }
                preferred_zero = _mm256_or_pd(preferred_zero, zeros);
                folded = true;
                continue;
            }
        }
        let mut bits = bits;
        while bits != 0 {
            best = better(
                best,
                total_key(values[base + bits.trailing_zeros() as usize]),
            );
            bits &= bits - 1;
        }
    }
    if folded {
        let mut lanes = [0f64; 16];
        for (r, a) in acc.iter().enumerate() {
            // SAFETY: `lanes` holds 16 values, so the 32 bytes at value `4 * r` lie inside it.
            unsafe { _mm256_storeu_pd(lanes.as_mut_ptr().add(4 * r), *a) };
        }
        let extreme = lanes
            .into_iter()
            .fold(identity, |a, b| if (b > a) == MAX { b } else { a });
        // IEEE comparisons cannot tell the zeros apart: a zero extreme is the preferred
        // zero if one passed, else the other.
        let extreme = if extreme != 0.0 {
            extreme
        } else if (_mm256_movemask_pd(preferred_zero) != 0) == MAX {
            0.0
        } else {
            -0.0
        };
        best = better(best, total_key(extreme));
    }
    (best, n)
}

/// The sum as a float of `values` in the rows of `blocks` (as for [`extreme_i64`]), and how
/// many rows that is: `avg` of a 64-bit integer column.
///
/// Each block is summed exactly in 64-bit integers and its sum converted once: no rounding
/// inside a block, and no conversion per value (AVX2 has none for 64-bit integers). A block
/// holding a value outside [-2^56, 2^56), whose 64 values could overflow, adds its values one
/// at a time as floats.
#[target_feature(enable = "avx2")]
pub(crate) fn float_sum_i64(
    values: &[i64],
    blocks: impl Iterator<Item = (usize, u64)>,
) -> (f64, u64) {
    let bias = _mm256_set1_epi64x(1 << 56);
    let mut total = 0f64;
    let mut n = 0u64;
    for (base, bits) in blocks {
        prefetch(values, base + PREFETCH_AHEAD_BYTES / 8);
        let passing = bits.count_ones();
        n += u64::from(passing);
        if passing >= BLENDED_BLOCK_ROWS_MIN && base + 64 <= values.len() {
            let block = &values[base..base + 64];
            let mut sums = [_mm256_setzero_si256(); 2];
            let mut wide = _mm256_setzero_si256();
            for q in 0..8 {
                for (j, sum) in sums.iter_mut().enumerate() {
                    let r = 2 * q + j;
                    // SAFETY: `block` holds 64 values, so the 32 bytes at value `4 * r` lie
                    // inside it; the load is unaligned.
                    let v =
                        unsafe { _mm256_loadu_si256(block.as_ptr().add(4 * r).cast::<__m256i>()) };
                    let v = if bits == u64::MAX {
                        v
                    } else {
                        _mm256_blendv_epi8(_mm256_setzero_si256(), v, nibble_mask(bits, r))
                    };
                    // Nonzero where v + 2^56 is at least 2^57 unsigned: v outside the range.
                    wide =
                        _mm256_or_si256(wide, _mm256_srli_epi64::<57>(_mm256_add_epi64(v, bias)));
                    *sum = _mm256_add_epi64(*sum, v);
                }
            }
            if _mm256_testz_si256(wide, wide) == 1 {
                let mut lanes = [0i64; 4];
                let sum = _mm256_add_epi64(sums[0], sums[1]);
                // SAFETY: `lanes` holds 4 values, 32 bytes; the store is unaligned.
                unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast::<__m256i>(), sum) };
                // At most 64 values below 2^56 in magnitude: the sum is below 2^62.
                total += lanes.iter().sum::<i64>() as f64;
                continue;
            }
        }
        let mut bits = bits;
        while bits != 0 {
            total += values[base + bits.trailing_zeros() as usize] as f64;
            bits &= bits - 1;
        }
    }
    (total, n)
}

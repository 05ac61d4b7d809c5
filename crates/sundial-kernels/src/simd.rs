//! Comparisons of 32- and 64-bit integers (SYMBOL codes, INT, LONG, TIMESTAMP) with a
//! constant, written with AVX2 instructions: each compare yields 8 (or 4) lanes whose signs
//! one `movemask` packs into bits, where the compiler's vectorisation of the portable loop
//! widens every lane to 64 bits and assembles the word with shifts.
//!
//! Every function here is compiled for AVX2 and called only after the processor was found to
//! have it (`filter::compare`, `filter::in_list`). Each fills `words` as the portable loop
//! does: `words[w] &=` the rows of block `w` that pass, skipping words already zero and
//! prefetching ahead.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::{
    __m256i, _mm256_castsi256_pd, _mm256_castsi256_ps, _mm256_cmpeq_epi32, _mm256_cmpeq_epi64,
    _mm256_cmpgt_epi32, _mm256_cmpgt_epi64, _mm256_loadu_si256, _mm256_movemask_pd,
    _mm256_movemask_ps, _mm256_or_si256, _mm256_set1_epi32, _mm256_set1_epi64x,
};

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

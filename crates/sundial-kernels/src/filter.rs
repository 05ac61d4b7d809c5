//! Filters as trees of column-versus-constant tests, evaluated into a [`Selection`] by
//! type-specialised loops over the column's values.
//!
//! Each test computes 64 rows into one word per step, in a loop over a fixed-size block that
//! the compiler vectorises; a word whose rows all failed an earlier conjunct is skipped, so
//! each conjunct reads only blocks that still hold passing rows. A row whose tested value is
//! NULL fails every test but `IS NULL` (SQL's three-valued logic, where only TRUE passes).

use std::sync::Arc;

use crate::selection::{Selection, and_bits, and_not_bits};
use crate::values::{
    ColumnValues, Domain, Native, PREFETCH_AHEAD_BYTES, Values, from_total_key, prefetch, sql_key,
    with_slice,
};

/// A comparison of a value with a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

impl CmpOp {
    /// The operator with its operands swapped: `c < x` is `x > c`.
    pub fn swap(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::LtEq => CmpOp::GtEq,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::GtEq => CmpOp::LtEq,
            other => other,
        }
    }
}

/// What a leaf tests of each row's value. Constants are keys in the leaf's [`Domain`]: the
/// integer itself, or [`sql_key`] of a floating-point number.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    Compare {
        op: CmpOp,
        key: i64,
    },
    /// The value is one of `keys` (or, negated, none of them).
    In {
        keys: Arc<[i64]>,
        negated: bool,
    },
    /// The value's key lies in `lower..=upper` (both inclusive: in the integer keys, `x > 5`
    /// is `x >= 6`): a conjunction of a lower and an upper bound on one column, one pass.
    Range {
        lower: i64,
        upper: i64,
    },
    IsNull,
    IsNotNull,
    /// A BOOLEAN column's value is this.
    IsBool(bool),
}

/// Arithmetic with a constant, applied to a floating-point value before it is compared
/// (`velocity * 2 > 150`): IEEE 754 double arithmetic, as DataFusion computes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arith {
    pub op: ArithOp,
    pub constant: f64,
    /// `constant op value` rather than `value op constant`.
    pub constant_first: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl Arith {
    #[inline(always)]
    fn apply(self, v: f64) -> f64 {
        let (a, b) = if self.constant_first {
            (self.constant, v)
        } else {
            (v, self.constant)
        };
        match self.op {
            ArithOp::Add => a + b,
            ArithOp::Sub => a - b,
            ArithOp::Mul => a * b,
            ArithOp::Div => a / b,
        }
    }
}

/// A test of one column.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    /// The column's position among the columns the filter is evaluated over.
    pub column: usize,
    pub domain: Domain,
    /// Arithmetic applied to each value before the test (the domain is then [`Domain::Float`]).
    pub arith: Option<Arith>,
    pub test: Test,
    /// Bytes the test reads per row, which orders conjuncts: cheaper first.
    pub width: usize,
}

/// A filter: conjunctions and disjunctions of leaf tests.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    Const(bool),
    Leaf(Leaf),
    And(Vec<Predicate>),
    Or(Vec<Predicate>),
}

/// How a leaf turns each value into the key it compares: its domain and arithmetic.
type Key = (Domain, Option<Arith>);

/// IN lists up to this long are tested by comparing with each value; longer ones by a bitmap
/// of small keys or a binary search.
const IN_LINEAR_MAX: usize = 8;

/// Keys below this are tested against an IN list's bitmap (SYMBOL codes, small integers).
const IN_BITMAP_KEYS_MAX: i64 = 1 << 16;

impl Predicate {
    /// The conjunction of `parts`, cheapest test first. A lower and an upper bound on one
    /// column (its domain and arithmetic alike) merge into one range test, read in one pass:
    /// `a >= 1 AND a < 5` is `a` in `1..=4`, NULLs failing both alike.
    pub fn and(parts: Vec<Predicate>) -> Predicate {
        let mut parts = merge_bounds(parts);
        parts.sort_by_key(Predicate::cost);
        match parts.len() {
            0 => Predicate::Const(true),
            1 => parts.pop().expect("one part"),
            _ => Predicate::And(parts),
        }
    }

    /// The disjunction of `parts`. Equalities and IN lists of one column (its domain and
    /// arithmetic alike) merge into one IN list, tested in one pass over the column: `a = 1
    /// OR a = 2` is `a IN (1, 2)`, NULLs failing both alike.
    pub fn or(parts: Vec<Predicate>) -> Predicate {
        let mut parts = merge_equalities(parts);
        match parts.len() {
            0 => Predicate::Const(false),
            1 => parts.pop().expect("one part"),
            _ => Predicate::Or(parts),
        }
    }

    /// An estimate of the bytes read per row.
    fn cost(&self) -> usize {
        match self {
            Predicate::Const(_) => 0,
            Predicate::Leaf(leaf) => match &leaf.test {
                Test::IsNull | Test::IsNotNull | Test::IsBool(_) => 1,
                Test::In { keys, .. } => leaf.width + keys.len().min(IN_LINEAR_MAX),
                Test::Compare { .. } | Test::Range { .. } => leaf.width,
            },
            Predicate::And(parts) | Predicate::Or(parts) => parts.iter().map(Self::cost).sum(),
        }
    }

    /// The rows of `len` that pass, reading `columns` (each at least `len` rows).
    pub fn select(&self, columns: &[ColumnValues], len: usize) -> Selection {
        let mut selection = Selection::all(len);
        self.narrow(columns, &mut selection);
        selection
    }

    /// Keeps in `selection` only the rows that also pass this predicate.
    pub fn narrow(&self, columns: &[ColumnValues], selection: &mut Selection) {
        match self {
            Predicate::Const(true) => {}
            Predicate::Const(false) => selection.words_mut().fill(0),
            Predicate::Leaf(leaf) => leaf.narrow(&columns[leaf.column], selection),
            Predicate::And(parts) => {
                for part in parts {
                    if selection.none_pass() {
                        return;
                    }
                    part.narrow(columns, selection);
                }
            }
            Predicate::Or(parts) => {
                let mut passing = Selection::none(selection.len());
                for part in parts {
                    let mut tried = selection.clone();
                    part.narrow(columns, &mut tried);
                    passing.or(&tried);
                }
                *selection = passing;
            }
        }
    }
}

/// The inclusive bounds in key space a comparison sets: `(lower, upper)`, one of them the
/// whole range. `None` for other tests; `Some(None)` for a bound no key meets (`x > MAX`).
fn bounds_of(test: &Test) -> Option<Option<(i64, i64)>> {
    let Test::Compare { op, key } = *test else {
        return None;
    };
    Some(match op {
        CmpOp::Gt => key.checked_add(1).map(|k| (k, i64::MAX)),
        CmpOp::GtEq => Some((key, i64::MAX)),
        CmpOp::Lt => key.checked_sub(1).map(|k| (i64::MIN, k)),
        CmpOp::LtEq => Some((i64::MIN, key)),
        CmpOp::Eq | CmpOp::NotEq => return None,
    })
}

/// `parts` with the order comparisons of each column merged into one range test, at the
/// place of the column's first; a column compared once keeps its comparison.
fn merge_bounds(parts: Vec<Predicate>) -> Vec<Predicate> {
    // Per column compared: the position of its first comparison, the bounds so far, and how
    // many comparisons met them.
    let mut ranges: Vec<(usize, (i64, i64), usize)> = Vec::new();
    let mut absorbed = vec![false; parts.len()];
    for (i, part) in parts.iter().enumerate() {
        let Predicate::Leaf(leaf) = part else {
            continue;
        };
        let Some(bounds) = bounds_of(&leaf.test) else {
            continue;
        };
        // A bound no key meets: an empty range.
        let (lo, hi) = bounds.unwrap_or((1, 0));
        let same_operand = |at: usize| {
            matches!(&parts[at], Predicate::Leaf(l) if l.column == leaf.column
                && l.domain == leaf.domain && l.arith == leaf.arith)
        };
        match ranges.iter_mut().find(|(at, _, _)| same_operand(*at)) {
            Some((_, (l, h), count)) => {
                *l = (*l).max(lo);
                *h = (*h).min(hi);
                *count += 1;
                absorbed[i] = true;
            }
            None => ranges.push((i, (lo, hi), 1)),
        }
    }
    let mut range_at: Vec<Option<(i64, i64)>> = vec![None; parts.len()];
    for (at, bounds, count) in ranges {
        if count > 1 {
            range_at[at] = Some(bounds);
        }
    }
    let mut merged = Vec::with_capacity(parts.len());
    for (i, part) in parts.into_iter().enumerate() {
        match (absorbed[i], range_at[i], part) {
            (true, _, _) => {}
            (false, Some((lower, upper)), Predicate::Leaf(mut leaf)) => {
                leaf.test = Test::Range { lower, upper };
                merged.push(Predicate::Leaf(leaf));
            }
            (false, _, part) => merged.push(part),
        }
    }
    merged
}

/// `parts` with the equality and plain IN tests of each column merged into one IN test, at the
/// place of the column's first.
fn merge_equalities(parts: Vec<Predicate>) -> Vec<Predicate> {
    fn keys_of(leaf: &Leaf) -> Option<&[i64]> {
        match &leaf.test {
            Test::Compare { op: CmpOp::Eq, key } => Some(std::slice::from_ref(key)),
            Test::In {
                keys,
                negated: false,
            } => Some(keys),
            _ => None,
        }
    }
    let mut merged: Vec<Predicate> = Vec::with_capacity(parts.len());
    // Per merged IN: its position in `merged` and its keys so far.
    let mut lists: Vec<(usize, Vec<i64>)> = Vec::new();
    for part in parts {
        let Predicate::Leaf(leaf) = &part else {
            merged.push(part);
            continue;
        };
        let Some(keys) = keys_of(leaf) else {
            merged.push(part);
            continue;
        };
        let same_operand = |p: &Predicate| {
            matches!(p, Predicate::Leaf(l) if l.column == leaf.column
                && l.domain == leaf.domain && l.arith == leaf.arith)
        };
        match lists.iter_mut().find(|(at, _)| same_operand(&merged[*at])) {
            Some((_, list)) => list.extend_from_slice(keys),
            None => {
                lists.push((merged.len(), keys.to_vec()));
                merged.push(part);
            }
        }
    }
    for (at, mut keys) in lists {
        keys.sort_unstable();
        keys.dedup();
        if let Predicate::Leaf(leaf) = &mut merged[at]
            && keys.len() > 1
        {
            leaf.test = Test::In {
                keys: keys.into(),
                negated: false,
            };
        }
    }
    merged
}

impl Leaf {
    fn narrow(&self, column: &ColumnValues, selection: &mut Selection) {
        let len = selection.len();
        debug_assert!(
            column.len() >= len,
            "a filter column shorter than the chunk"
        );
        let words = selection.words_mut();
        match &self.test {
            Test::IsNull => {
                match column.nulls {
                    Some(nulls) => and_not_bits(words, &nulls.inner().slice(0, len), len),
                    None => words.fill(0),
                }
                return;
            }
            Test::IsNotNull => {}
            Test::IsBool(value) => {
                if let Values::Bool(bits) = column.values {
                    let bits = bits.slice(0, len);
                    if *value {
                        and_bits(words, &bits);
                    } else {
                        and_not_bits(words, &bits, len);
                    }
                } else {
                    words.fill(0);
                }
            }
            Test::Compare { op, key } => with_slice!(column.values,
                v => compare(&v[..len], words, (self.domain, self.arith), *op, *key),
                _b => words.fill(0)),
            Test::In { keys, negated } => with_slice!(column.values,
                v => in_list(&v[..len], words, (self.domain, self.arith), keys, *negated),
                _b => words.fill(0)),
            Test::Range { lower, upper } => with_slice!(column.values,
                v => range(&v[..len], words, (self.domain, self.arith), *lower, *upper),
                _b => words.fill(0)),
        }
        if let Some(nulls) = column.nulls {
            and_bits(words, &nulls.inner().slice(0, len));
        }
    }
}

/// `words[w] &= ` the rows of block `w` of `values` that pass `test`, for the blocks that still
/// hold a passing row.
#[inline(always)]
fn run<T: Native>(values: &[T], words: &mut [u64], test: impl Fn(T) -> bool + Copy) {
    let mut blocks = values.chunks_exact(64);
    for (w, (word, block)) in words.iter_mut().zip(&mut blocks).enumerate() {
        prefetch(
            values,
            w * 64 + PREFETCH_AHEAD_BYTES / std::mem::size_of::<T>(),
        );
        if *word == 0 {
            continue;
        }
        let block: &[T; 64] = block.try_into().expect("64 values");
        let mut mask = 0u64;
        for (j, &v) in block.iter().enumerate() {
            mask |= u64::from(test(v)) << j;
        }
        *word &= mask;
    }
    let rest = blocks.remainder();
    if !rest.is_empty() {
        let word = &mut words[values.len() / 64];
        let mut mask = 0u64;
        for (j, &v) in rest.iter().enumerate() {
            mask |= u64::from(test(v)) << j;
        }
        *word &= mask;
    }
}

/// [`run`] with `fast`, a test that agrees with `exact` on every value that is not NaN: a
/// block holding a NaN is tested again with `exact`.
#[inline(always)]
fn run_checked<T: Native>(
    values: &[T],
    words: &mut [u64],
    fast: impl Fn(T) -> bool + Copy,
    exact: impl Fn(T) -> bool + Copy,
) {
    let test_block = |block: &[T], word: &mut u64| {
        let mut mask = 0u64;
        let mut unordered = false;
        for (j, &v) in block.iter().enumerate() {
            mask |= u64::from(fast(v)) << j;
            unordered |= v.to_f64().is_nan();
        }
        if unordered {
            mask = 0;
            for (j, &v) in block.iter().enumerate() {
                mask |= u64::from(exact(v)) << j;
            }
        }
        *word &= mask;
    };
    let mut blocks = values.chunks_exact(64);
    for (w, (word, block)) in words.iter_mut().zip(&mut blocks).enumerate() {
        prefetch(
            values,
            w * 64 + PREFETCH_AHEAD_BYTES / std::mem::size_of::<T>(),
        );
        if *word != 0 {
            test_block(block, word);
        }
    }
    let rest = blocks.remainder();
    if !rest.is_empty() {
        test_block(rest, &mut words[values.len() / 64]);
    }
}

/// The comparison of each value's key (see [`Domain`]) with `key`: compiled for AVX2 too,
/// and that version taken when the processor has it.
fn compare<T: Native>(values: &[T], words: &mut [u64], domain: Key, op: CmpOp, key: i64) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // 32- and 64-bit integers compared with a key of their type: the hand-written kernel.
        if domain == (Domain::Int, None) {
            use crate::simd::LaneTest;
            let (test, negated) = match op {
                CmpOp::Eq => (LaneTest::Eq, false),
                CmpOp::NotEq => (LaneTest::Eq, true),
                CmpOp::Gt => (LaneTest::Gt, false),
                CmpOp::LtEq => (LaneTest::Gt, true),
                CmpOp::Lt => (LaneTest::Lt, false),
                CmpOp::GtEq => (LaneTest::Lt, true),
            };
            if let (Some(v), Ok(k)) = (T::as_i32s(values), i32::try_from(key)) {
                // SAFETY: the processor supports AVX2, checked just above.
                unsafe { crate::simd::compare(v, words, test, negated, k) };
                return;
            }
            if let Some(v) = T::as_i64s(values) {
                // SAFETY: as above.
                unsafe { crate::simd::compare(v, words, test, negated, key) };
                return;
            }
        }
        // SAFETY: the processor supports AVX2, checked just above.
        unsafe { compare_avx2(values, words, domain, op, key) };
        return;
    }
    compare_any(values, words, domain, op, key);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn compare_avx2<T: Native>(values: &[T], words: &mut [u64], domain: Key, op: CmpOp, key: i64) {
    compare_any(values, words, domain, op, key);
}

#[inline(always)]
fn compare_any<T: Native>(values: &[T], words: &mut [u64], domain: Key, op: CmpOp, key: i64) {
    macro_rules! by_op {
        ($k:expr) => {
            match op {
                CmpOp::Eq => run(values, words, |v: T| $k(v) == key),
                CmpOp::NotEq => run(values, words, |v: T| $k(v) != key),
                CmpOp::Lt => run(values, words, |v: T| $k(v) < key),
                CmpOp::LtEq => run(values, words, |v: T| $k(v) <= key),
                CmpOp::Gt => run(values, words, |v: T| $k(v) > key),
                CmpOp::GtEq => run(values, words, |v: T| $k(v) >= key),
            }
        };
    }
    if domain.0 == Domain::Int {
        match T::from_key(key) {
            // The key is a value of the column's type: compared at its width.
            Ok(native) => {
                match op {
                    CmpOp::Eq => run(values, words, |v: T| v == native),
                    CmpOp::NotEq => run(values, words, |v: T| v != native),
                    CmpOp::Lt => run(values, words, |v: T| v < native),
                    CmpOp::LtEq => run(values, words, |v: T| v <= native),
                    CmpOp::Gt => run(values, words, |v: T| v > native),
                    CmpOp::GtEq => run(values, words, |v: T| v >= native),
                }
                return;
            }
            // Beyond every value of the type: each passes or none does.
            Err(side @ (std::cmp::Ordering::Less | std::cmp::Ordering::Greater)) => {
                let key_below = side == std::cmp::Ordering::Less;
                let all_pass = match op {
                    CmpOp::Eq => false,
                    CmpOp::NotEq => true,
                    CmpOp::Lt | CmpOp::LtEq => !key_below,
                    CmpOp::Gt | CmpOp::GtEq => key_below,
                };
                if !all_pass {
                    words.fill(0);
                }
                return;
            }
            Err(std::cmp::Ordering::Equal) => {}
        }
    }
    if domain == (Domain::Float, None) {
        let constant = from_total_key(key);
        if !constant.is_nan() {
            // A number: IEEE comparisons agree with the keys' order on every value but NaN
            // (both zeros are equal in both), so blocks without a NaN take them.
            macro_rules! checked {
                ($cmp:expr) => {
                    run_checked(
                        values,
                        words,
                        |v: T| $cmp(v.to_f64(), constant),
                        |v: T| $cmp(sql_key(v.to_f64()), key),
                    )
                };
            }
            match op {
                CmpOp::Eq => checked!(|a, b| a == b),
                CmpOp::NotEq => checked!(|a, b| a != b),
                CmpOp::Lt => checked!(|a, b| a < b),
                CmpOp::LtEq => checked!(|a, b| a <= b),
                CmpOp::Gt => checked!(|a, b| a > b),
                CmpOp::GtEq => checked!(|a, b| a >= b),
            }
            return;
        }
    }
    match domain {
        (Domain::Int, _) => by_op!(|v: T| v.to_i64()),
        (Domain::Float, None) => by_op!(|v: T| sql_key(v.to_f64())),
        (Domain::Float, Some(arith)) => by_op!(|v: T| sql_key(arith.apply(v.to_f64()))),
    }
}

/// Whether each value's key lies in `lower..=upper` (compiled for AVX2 too, as [`compare`]).
fn range<T: Native>(values: &[T], words: &mut [u64], domain: Key, lower: i64, upper: i64) {
    if lower > upper {
        words.fill(0);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // 32- and 64-bit integers: the hand-written kernel, the bounds at the values' width
        // (a bound beyond the type's values is no bound; both beyond on one side, none pass).
        if domain == (Domain::Int, None)
            && (T::as_i32s(values).is_some() || T::as_i64s(values).is_some())
        {
            use std::cmp::Ordering::{Greater, Less};
            let lo = match T::from_key(lower) {
                Ok(n) => Some(n),
                Err(Less) => None,
                Err(_) => return words.fill(0),
            };
            let hi = match T::from_key(upper) {
                Ok(n) => Some(n),
                Err(Greater) => None,
                Err(_) => return words.fill(0),
            };
            match (lo, hi) {
                (Some(lo), Some(hi)) => {
                    if let (Some(v), Some(b)) = (T::as_i32s(values), T::as_i32s(&[lo, hi])) {
                        // SAFETY: the processor supports AVX2, checked just above.
                        unsafe { crate::simd::range(v, words, b[0], b[1]) };
                    } else if let (Some(v), Some(b)) = (T::as_i64s(values), T::as_i64s(&[lo, hi])) {
                        // SAFETY: as above.
                        unsafe { crate::simd::range(v, words, b[0], b[1]) };
                    }
                }
                (Some(_), None) => compare(values, words, domain, CmpOp::GtEq, lower),
                (None, Some(_)) => compare(values, words, domain, CmpOp::LtEq, upper),
                (None, None) => {}
            }
            return;
        }
        // SAFETY: the processor supports AVX2, checked just above.
        unsafe { range_avx2(values, words, domain, lower, upper) };
        return;
    }
    range_any(values, words, domain, lower, upper);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn range_avx2<T: Native>(values: &[T], words: &mut [u64], domain: Key, lower: i64, upper: i64) {
    range_any(values, words, domain, lower, upper);
}

#[inline(always)]
fn range_any<T: Native>(values: &[T], words: &mut [u64], domain: Key, lower: i64, upper: i64) {
    let within = |k: i64| lower <= k && k <= upper;
    match domain {
        (Domain::Int, _) => run(values, words, |v: T| within(v.to_i64())),
        (Domain::Float, None) => {
            // Bounds that are numbers' keys: IEEE comparisons agree with the keys' order on
            // every value but NaN (both zeros are equal in both), so blocks without a NaN
            // take them. A missing bound is an infinity, which every number meets.
            let number = |key: i64, missing: i64, infinity: f64| {
                if key == missing {
                    return Some(infinity);
                }
                let v = from_total_key(key);
                (!v.is_nan() && sql_key(v) == key).then_some(v)
            };
            match (
                number(lower, i64::MIN, f64::NEG_INFINITY),
                number(upper, i64::MAX, f64::INFINITY),
            ) {
                (Some(lo), Some(hi)) => run_checked(
                    values,
                    words,
                    |v: T| {
                        let v = v.to_f64();
                        lo <= v && v <= hi
                    },
                    |v: T| within(sql_key(v.to_f64())),
                ),
                _ => run(values, words, |v: T| within(sql_key(v.to_f64()))),
            }
        }
        (Domain::Float, Some(arith)) => run(values, words, |v: T| {
            within(sql_key(arith.apply(v.to_f64())))
        }),
    }
}

/// Whether each value's key is one of `keys` (sorted), or with `negated`, none of them
/// (compiled for AVX2 too, as [`compare`]).
fn in_list<T: Native>(values: &[T], words: &mut [u64], domain: Key, keys: &[i64], negated: bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor supports AVX2, checked just above.
        unsafe { in_list_avx2(values, words, domain, keys, negated) };
        return;
    }
    in_list_any(values, words, domain, keys, negated);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn in_list_avx2<T: Native>(
    values: &[T],
    words: &mut [u64],
    domain: Key,
    keys: &[i64],
    negated: bool,
) {
    in_list_any(values, words, domain, keys, negated);
}

#[inline(always)]
fn in_list_any<T: Native>(
    values: &[T],
    words: &mut [u64],
    domain: Key,
    keys: &[i64],
    negated: bool,
) {
    let key = |v: T| match domain {
        (Domain::Int, _) => v.to_i64(),
        (Domain::Float, None) => sql_key(v.to_f64()),
        (Domain::Float, Some(arith)) => sql_key(arith.apply(v.to_f64())),
    };
    if keys.is_empty() {
        if !negated {
            words.fill(0);
        }
        return;
    }
    if keys.len() <= IN_LINEAR_MAX {
        // Compared with a fixed number of keys (the list padded with its first), without an
        // early exit, so that the loop vectorises.
        fn padded<K: Copy, const N: usize>(keys: &[K]) -> [K; N] {
            let mut out = [keys[0]; N];
            out[..keys.len()].copy_from_slice(keys);
            out
        }
        macro_rules! with_list {
            ($list:expr, $n:literal, $key:expr) => {{
                let list = padded::<_, $n>($list);
                run(values, words, |v: T| {
                    let k = $key(v);
                    list.iter().fold(false, |found, &l| found | (k == l)) != negated
                })
            }};
        }
        macro_rules! by_length {
            ($list:expr, $key:expr) => {
                match $list.len() {
                    1 => with_list!($list, 1, $key),
                    2 => with_list!($list, 2, $key),
                    3 | 4 => with_list!($list, 4, $key),
                    _ => with_list!($list, 8, $key),
                }
            };
        }
        if domain.0 == Domain::Int && T::from_key(0).is_ok() {
            // Integers compare at their width; keys no value of the type equals are dropped.
            let natives: Vec<T> = keys.iter().filter_map(|&k| T::from_key(k).ok()).collect();
            if natives.is_empty() {
                if !negated {
                    words.fill(0);
                }
                return;
            }
            #[cfg(target_arch = "x86_64")]
            if domain.1.is_none() && std::arch::is_x86_feature_detected!("avx2") {
                if let Some(v) = T::as_i32s(values) {
                    let keys = T::as_i32s(&natives).expect("the values' type");
                    // SAFETY: the processor supports AVX2, checked just above.
                    unsafe { crate::simd::in_list(v, words, keys, negated) };
                    return;
                }
                if let Some(v) = T::as_i64s(values) {
                    let keys = T::as_i64s(&natives).expect("the values' type");
                    // SAFETY: as above.
                    unsafe { crate::simd::in_list(v, words, keys, negated) };
                    return;
                }
            }
            by_length!(&natives, |v: T| v);
        } else {
            by_length!(keys, key);
        }
        return;
    }
    let (lo, hi) = (keys[0], keys[keys.len() - 1]);
    if lo >= 0 && hi < IN_BITMAP_KEYS_MAX {
        let mut bitmap = vec![0u64; (hi as usize) / 64 + 1];
        for &k in keys {
            bitmap[k as usize / 64] |= 1 << (k % 64);
        }
        run(values, words, |v: T| {
            let k = key(v);
            let member = (0..=hi).contains(&k) && bitmap[k as usize / 64] >> (k % 64) & 1 == 1;
            member != negated
        });
        return;
    }
    run(values, words, |v: T| {
        keys.binary_search(&key(v)).is_ok() != negated
    });
}

#[cfg(test)]
mod tests {
    use arrow_array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array};
    use rand::{Rng, SeedableRng};

    use super::*;

    fn leaf(column: usize, domain: Domain, test: Test) -> Predicate {
        Predicate::Leaf(Leaf {
            column,
            domain,
            arith: None,
            test,
            width: 8,
        })
    }

    fn rows(p: &Predicate, arrays: &[ArrayRef], len: usize) -> Vec<usize> {
        let columns: Vec<ColumnValues> = arrays
            .iter()
            .map(|a| ColumnValues::of(a.as_ref()).expect("readable"))
            .collect();
        p.select(&columns, len).ones().collect()
    }

    /// Every operator on random values with NULLs, against the same test written row by row.
    #[test]
    fn kernels_match_a_row_at_a_time_reference() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for len in [0, 1, 63, 64, 65, 200, 1000] {
            let ints: Vec<Option<i64>> = (0..len)
                .map(|_| rng.random_bool(0.9).then(|| rng.random_range(-5..5)))
                .collect();
            let floats: Vec<Option<f64>> = (0..len)
                .map(|_| {
                    // NaNs only at odd lengths: the even ones test the blocks without.
                    rng.random_bool(0.9).then(|| match rng.random_range(0..10) {
                        0 if len % 2 == 1 => f64::NAN,
                        0 | 1 => -0.0,
                        _ => rng.random_range(-5..5) as f64 / 2.0,
                    })
                })
                .collect();
            let arrays: Vec<ArrayRef> = vec![
                std::sync::Arc::new(Int64Array::from(ints.clone())),
                std::sync::Arc::new(Float64Array::from(floats.clone())),
                std::sync::Arc::new(Int32Array::from(
                    ints.iter().map(|v| v.map(|v| v as i32)).collect::<Vec<_>>(),
                )),
            ];
            for op in [
                CmpOp::Eq,
                CmpOp::NotEq,
                CmpOp::Lt,
                CmpOp::LtEq,
                CmpOp::Gt,
                CmpOp::GtEq,
            ] {
                let holds = |o: std::cmp::Ordering| match op {
                    CmpOp::Eq => o.is_eq(),
                    CmpOp::NotEq => o.is_ne(),
                    CmpOp::Lt => o.is_lt(),
                    CmpOp::LtEq => o.is_le(),
                    CmpOp::Gt => o.is_gt(),
                    CmpOp::GtEq => o.is_ge(),
                };
                for c in [-6i64, -1, 0, 2, 7] {
                    let expected: Vec<usize> = (0..len)
                        .filter(|&i| ints[i].is_some_and(|v| holds(v.cmp(&c))))
                        .collect();
                    let test = Test::Compare { op, key: c };
                    assert_eq!(
                        rows(&leaf(0, Domain::Int, test.clone()), &arrays, len),
                        expected
                    );
                    assert_eq!(rows(&leaf(2, Domain::Int, test), &arrays, len), expected);
                }
                for c in [-0.0, 0.0, 1.5, f64::NAN, f64::INFINITY] {
                    // DataFusion's order: zeros equal, NaN equal to itself and above all.
                    let sql_cmp = |a: f64, b: f64| match a.partial_cmp(&b) {
                        Some(order) => order,
                        None => a.total_cmp(&b),
                    };
                    let expected: Vec<usize> = (0..len)
                        .filter(|&i| floats[i].is_some_and(|v| holds(sql_cmp(v, c))))
                        .collect();
                    let test = Test::Compare {
                        op,
                        key: sql_key(c),
                    };
                    assert_eq!(rows(&leaf(1, Domain::Float, test), &arrays, len), expected);
                }
            }
            for n in [0usize, 1, 3, 20] {
                let mut keys: Vec<i64> = (0..n as i64).map(|i| i * 3 - 4).collect();
                keys.sort_unstable();
                for negated in [false, true] {
                    let expected: Vec<usize> = (0..len)
                        .filter(|&i| ints[i].is_some_and(|v| keys.contains(&v) != negated))
                        .collect();
                    let test = Test::In {
                        keys: keys.clone().into(),
                        negated,
                    };
                    assert_eq!(rows(&leaf(0, Domain::Int, test), &arrays, len), expected);
                }
            }
            let nulls: Vec<usize> = (0..len).filter(|&i| ints[i].is_none()).collect();
            assert_eq!(
                rows(&leaf(0, Domain::Int, Test::IsNull), &arrays, len),
                nulls
            );
            let valid = (0..len).filter(|&i| ints[i].is_some()).count();
            assert_eq!(
                rows(&leaf(0, Domain::Int, Test::IsNotNull), &arrays, len).len(),
                valid
            );
            // (a > 0 AND b < 1) OR a IS NULL
            let p = Predicate::or(vec![
                Predicate::and(vec![
                    leaf(
                        0,
                        Domain::Int,
                        Test::Compare {
                            op: CmpOp::Gt,
                            key: 0,
                        },
                    ),
                    leaf(
                        1,
                        Domain::Float,
                        Test::Compare {
                            op: CmpOp::Lt,
                            key: sql_key(1.0),
                        },
                    ),
                ]),
                leaf(0, Domain::Int, Test::IsNull),
            ]);
            let expected: Vec<usize> = (0..len)
                .filter(|&i| {
                    ints[i].is_none()
                        || (ints[i].is_some_and(|v| v > 0) && floats[i].is_some_and(|f| f < 1.0))
                })
                .collect();
            assert_eq!(rows(&p, &arrays, len), expected);
            assert_eq!(arrays[0].len(), len);
        }
    }

    /// A lower and an upper bound on one column merge into one range test, which passes the
    /// rows both comparisons pass, whatever the bounds: beyond the type, crossed, equal,
    /// zeros, infinities, NaN; with arithmetic too.
    #[test]
    fn bounds_on_one_column_merge_into_a_range_with_the_same_rows() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let cmp = |op, key| Test::Compare { op, key };
        for len in [1, 64, 130, 1000] {
            let ints: Vec<Option<i64>> = (0..len)
                .map(|_| {
                    rng.random_bool(0.9).then(|| match rng.random_range(0..20) {
                        0 => i64::MIN,
                        1 => i64::MAX,
                        _ => rng.random_range(-5..5),
                    })
                })
                .collect();
            let specials = [f64::NAN, -0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY];
            let floats: Vec<Option<f64>> = (0..len)
                .map(|_| {
                    rng.random_bool(0.9).then(|| match rng.random_range(0..10) {
                        0 | 1 => specials[rng.random_range(0..specials.len())],
                        _ => rng.random_range(-5..5) as f64 / 2.0,
                    })
                })
                .collect();
            let arrays: Vec<ArrayRef> = vec![
                std::sync::Arc::new(Int64Array::from(ints.clone())),
                std::sync::Arc::new(Float64Array::from(floats)),
                std::sync::Arc::new(Int32Array::from(
                    ints.iter()
                        .map(|v| v.map(|v| v.clamp(-9, 9) as i32))
                        .collect::<Vec<_>>(),
                )),
                std::sync::Arc::new(arrow_array::Int8Array::from(
                    ints.iter()
                        .map(|v| v.map(|v| v.clamp(-9, 9) as i8))
                        .collect::<Vec<_>>(),
                )),
            ];
            let int_bounds = [-6, -1, 0, 2, 300, i64::MIN, i64::MAX];
            let float_bounds: Vec<i64> = [-0.0, 0.0, 1.5, -2.0, f64::NAN, f64::INFINITY]
                .into_iter()
                .chain([f64::NEG_INFINITY])
                .map(sql_key)
                .collect();
            for lower_op in [CmpOp::Gt, CmpOp::GtEq] {
                for upper_op in [CmpOp::Lt, CmpOp::LtEq] {
                    let mut cases: Vec<(usize, Domain, Option<Arith>, i64, i64)> = Vec::new();
                    for &a in &int_bounds {
                        for &b in &int_bounds {
                            for column in [0, 2, 3] {
                                cases.push((column, Domain::Int, None, a, b));
                            }
                        }
                    }
                    let doubled = Arith {
                        op: ArithOp::Mul,
                        constant: 2.0,
                        constant_first: false,
                    };
                    for &a in &float_bounds {
                        for &b in &float_bounds {
                            cases.push((1, Domain::Float, None, a, b));
                            cases.push((1, Domain::Float, Some(doubled), a, b));
                        }
                    }
                    for (column, domain, arith, a, b) in cases {
                        let part = |test| {
                            Predicate::Leaf(Leaf {
                                column,
                                domain,
                                arith,
                                test,
                                width: 8,
                            })
                        };
                        let (lower, upper) = (part(cmp(lower_op, a)), part(cmp(upper_op, b)));
                        let merged = Predicate::and(vec![lower.clone(), upper.clone()]);
                        assert!(
                            matches!(
                                &merged,
                                Predicate::Leaf(Leaf {
                                    test: Test::Range { .. },
                                    ..
                                })
                            ),
                            "{merged:?}"
                        );
                        let apart = Predicate::And(vec![lower, upper]);
                        assert_eq!(
                            rows(&merged, &arrays, len),
                            rows(&apart, &arrays, len),
                            "{merged:?}"
                        );
                    }
                }
            }
        }
        // Bounds on two columns, or one bound per column, stay comparisons.
        let a = leaf(0, Domain::Int, cmp(CmpOp::Gt, 1));
        let b = leaf(2, Domain::Int, cmp(CmpOp::Lt, 5));
        assert_eq!(
            Predicate::and(vec![a.clone(), b.clone()]),
            Predicate::And(vec![a, b])
        );
    }

    #[test]
    fn narrow_integers_compare_with_keys_beyond_their_type() {
        let values: Vec<i8> = (-128..=127).collect();
        let len = values.len();
        let narrow: ArrayRef = std::sync::Arc::new(arrow_array::Int8Array::from(values.clone()));
        let ops = [
            CmpOp::Eq,
            CmpOp::NotEq,
            CmpOp::Lt,
            CmpOp::LtEq,
            CmpOp::Gt,
            CmpOp::GtEq,
        ];
        for key in [-1000i64, -129, -128, -1, 0, 127, 128, 1 << 40] {
            for op in ops {
                let holds = |v: i64| match op {
                    CmpOp::Eq => v == key,
                    CmpOp::NotEq => v != key,
                    CmpOp::Lt => v < key,
                    CmpOp::LtEq => v <= key,
                    CmpOp::Gt => v > key,
                    CmpOp::GtEq => v >= key,
                };
                let expected: Vec<usize> = (0..len).filter(|&i| holds(values[i].into())).collect();
                let test = Test::Compare { op, key };
                let p = leaf(0, Domain::Int, test);
                assert_eq!(
                    rows(&p, std::slice::from_ref(&narrow), len),
                    expected,
                    "{op:?} {key}"
                );
            }
        }
        for keys in [vec![-300i64, 5, 300], vec![-300, 300], vec![-128, 127]] {
            for negated in [false, true] {
                let expected: Vec<usize> = (0..len)
                    .filter(|&i| keys.contains(&values[i].into()) != negated)
                    .collect();
                let test = Test::In {
                    keys: keys.clone().into(),
                    negated,
                };
                let p = leaf(0, Domain::Int, test);
                assert_eq!(
                    rows(&p, std::slice::from_ref(&narrow), len),
                    expected,
                    "{keys:?}"
                );
            }
        }
    }

    #[test]
    fn equalities_of_one_column_in_a_disjunction_merge_into_one_list() {
        let ints: ArrayRef = std::sync::Arc::new(Int64Array::from(
            (0..500)
                .map(|i| (i % 7 != 0).then_some(i % 13))
                .collect::<Vec<_>>(),
        ));
        let eq = |column, key| leaf(column, Domain::Int, Test::Compare { op: CmpOp::Eq, key });
        let listed = |keys: &[i64]| {
            leaf(
                0,
                Domain::Int,
                Test::In {
                    keys: keys.into(),
                    negated: false,
                },
            )
        };
        // a = 3 OR b = 5 OR a IN (4, 9) OR a = 3 OR a > 11, with b the same column read again.
        let p = Predicate::or(vec![
            eq(0, 3),
            eq(1, 5),
            listed(&[4, 9]),
            eq(0, 3),
            leaf(
                0,
                Domain::Int,
                Test::Compare {
                    op: CmpOp::Gt,
                    key: 11,
                },
            ),
        ]);
        let Predicate::Or(parts) = &p else {
            panic!("{p:?}")
        };
        assert_eq!(parts.len(), 3, "{parts:?}");
        assert_eq!(parts[0], listed(&[3, 4, 9]));
        let arrays = [ints.clone(), ints];
        let expected: Vec<usize> = (0..500)
            .filter(|&i| i % 7 != 0 && [3, 4, 5, 9, 12].contains(&(i % 13)))
            .collect();
        assert_eq!(rows(&p, &arrays, 500), expected);
        let narrow: ArrayRef = std::sync::Arc::new(Int32Array::from(
            (0..500)
                .map(|i| (i % 7 != 0).then_some(i % 13))
                .collect::<Vec<_>>(),
        ));
        for n in 1..=8 {
            let keys: Vec<i64> = (0..n).map(|k| k * 2).collect();
            for negated in [false, true] {
                let expected: Vec<usize> = (0..500)
                    .filter(|&i| i % 7 != 0 && keys.contains(&(i as i64 % 13)) != negated)
                    .collect();
                let p = leaf(
                    0,
                    Domain::Int,
                    Test::In {
                        keys: keys.clone().into(),
                        negated,
                    },
                );
                assert_eq!(rows(&p, &arrays, 500), expected, "{n} keys");
                let narrow = std::slice::from_ref(&narrow);
                assert_eq!(rows(&p, narrow, 500), expected, "{n} keys of INT");
            }
        }
    }

    #[test]
    fn sliced_columns_read_from_their_offset() {
        let a: ArrayRef = std::sync::Arc::new(Int64Array::from(
            (0..300)
                .map(|i| (i % 5 != 0).then_some(i))
                .collect::<Vec<_>>(),
        ));
        let sliced = a.slice(37, 200);
        let p = leaf(
            0,
            Domain::Int,
            Test::Compare {
                op: CmpOp::GtEq,
                key: 100,
            },
        );
        let expected: Vec<usize> = (0..200)
            .filter(|&i| (i + 37) % 5 != 0 && i + 37 >= 100)
            .collect();
        assert_eq!(rows(&p, &[sliced], 200), expected);
    }
}

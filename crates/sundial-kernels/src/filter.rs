//! Filters as trees of column-versus-constant tests, evaluated into a [`Selection`] by
//! type-specialised loops over the column's values.
//!
//! Each test computes 64 rows into one word per step, in a loop over a fixed-size block that
//! the compiler vectorises; a word whose rows all failed an earlier conjunct is skipped, so
//! each conjunct reads only blocks that still hold passing rows. A row whose tested value is
//! NULL fails every test but `IS NULL` (SQL's three-valued logic, where only TRUE passes).

use std::sync::Arc;

use crate::selection::{Selection, and_bits, and_not_bits};
use crate::values::{ColumnValues, Domain, Native, Values, sql_key, with_slice};

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
    /// The conjunction of `parts`, cheapest test first.
    pub fn and(mut parts: Vec<Predicate>) -> Predicate {
        parts.sort_by_key(Predicate::cost);
        match parts.len() {
            0 => Predicate::Const(true),
            1 => parts.pop().expect("one part"),
            _ => Predicate::And(parts),
        }
    }

    /// The disjunction of `parts`.
    pub fn or(mut parts: Vec<Predicate>) -> Predicate {
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
                Test::Compare { .. } => leaf.width,
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
        }
        if let Some(nulls) = column.nulls {
            and_bits(words, &nulls.inner().slice(0, len));
        }
    }
}

/// How far ahead of the block being tested its column is fetched into cache. Mapped files
/// live in 4 KiB pages, at whose edges the processor's own prefetcher stops.
const PREFETCH_AHEAD_BYTES: usize = 4096;

/// Asks the processor to fetch `values[at]` into cache, if it exists.
#[inline(always)]
pub(crate) fn prefetch<T>(values: &[T], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < values.len() {
        // SAFETY: a prefetch reads nothing a program sees, and `at` is in bounds.
        unsafe {
            std::arch::x86_64::_mm_prefetch(
                values.as_ptr().add(at).cast::<i8>(),
                std::arch::x86_64::_MM_HINT_T0,
            )
        };
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

/// The comparison of each value's key (see [`Domain`]) with `key`: compiled for AVX2 too,
/// and that version taken when the processor has it.
fn compare<T: Native>(values: &[T], words: &mut [u64], domain: Key, op: CmpOp, key: i64) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
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
    match domain {
        (Domain::Int, _) => by_op!(|v: T| v.to_i64()),
        (Domain::Float, None) => by_op!(|v: T| sql_key(v.to_f64())),
        (Domain::Float, Some(arith)) => by_op!(|v: T| sql_key(arith.apply(v.to_f64()))),
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
        run(values, words, |v: T| {
            let k = key(v);
            keys.contains(&k) != negated
        });
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
                    rng.random_bool(0.9).then(|| match rng.random_range(0..10) {
                        0 => f64::NAN,
                        1 => -0.0,
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

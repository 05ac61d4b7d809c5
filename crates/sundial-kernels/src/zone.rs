//! Zone maps: the range of a column's values over a run of rows, and whether a filter can
//! pass any row of a run given the ranges of the columns it tests.
//!
//! A zone's bounds are keys in its column's [`Domain`], the keys filters compare: the integer
//! itself, or [`sql_key`] of a floating-point number (so a NaN is the top of a range, a
//! negative NaN the bottom, and both zeros are one key). A run whose rows are all NULL has
//! `min > max`.

use crate::filter::{CmpOp, Leaf, Predicate, Test};
use crate::values::{ColumnValues, Domain, Native, sql_key, with_slice};

/// The values of one column over a run of rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone {
    pub domain: Domain,
    /// Smallest and largest key of a non-NULL value; `min > max` when every row is NULL.
    pub min: i64,
    pub max: i64,
    pub nulls: u32,
    /// Rows the zone covers, NULL or not.
    pub rows: u32,
    /// Which zeros a floating-point zone's valid values hold, which its keys (one for -0.0
    /// and 0.0) cannot tell; `None` when unknown (integer zones, and entries that predate
    /// it).
    pub zeros: Option<Zeros>,
}

/// Which zeros a run of floating-point values holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Zeros {
    pub negative: bool,
    pub positive: bool,
}

impl Zone {
    /// Whether some row of the run holds a value.
    pub fn has_values(&self) -> bool {
        self.min <= self.max
    }

    /// The zone of `column`'s values, compared in `domain`; `None` for BOOLEAN columns and
    /// runs longer than `u32::MAX` rows.
    pub fn of(column: &ColumnValues, domain: Domain) -> Option<Zone> {
        let rows = u32::try_from(column.len()).ok()?;
        let (min, max) = with_slice!(column.values,
            v => match domain {
                Domain::Int => bounds(v, column, |x| x.to_i64()),
                Domain::Float => bounds(v, column, |x| sql_key(x.to_f64())),
            },
            _b => return None
        );
        let nulls = column.nulls.map_or(0, |n| n.null_count()) as u32;
        let zeros = match domain {
            Domain::Int => None,
            Domain::Float => with_slice!(column.values,
                v => Some(zeros(v, column)),
                _b => None
            ),
        };
        Some(Zone {
            domain,
            min,
            max,
            nulls,
            rows,
            zeros,
        })
    }

    /// The zone with its bounds in `domain`: integers widened to floating point keep their
    /// order (the conversion never decreases), so the widened bounds still hold every value.
    fn in_domain(self, domain: Domain) -> Option<Zone> {
        match (self.domain, domain) {
            (a, b) if a == b => Some(self),
            (Domain::Int, Domain::Float) if self.has_values() => Some(Zone {
                domain,
                min: sql_key(self.min as f64),
                max: sql_key(self.max as f64),
                zeros: None,
                ..self
            }),
            (Domain::Int, Domain::Float) => Some(Zone { domain, ..self }),
            _ => None,
        }
    }
}

/// Which zeros the valid values of `v` hold.
fn zeros<T: Native>(v: &[T], column: &ColumnValues) -> Zeros {
    let mut zeros = Zeros::default();
    let mut note = |x: f64| {
        if x == 0.0 {
            if x.is_sign_negative() {
                zeros.negative = true;
            } else {
                zeros.positive = true;
            }
        }
    };
    match column.nulls {
        Some(nulls) if nulls.null_count() > 0 => {
            nulls.valid_indices().for_each(|i| note(v[i].to_f64()))
        }
        _ => v.iter().for_each(|x| note(x.to_f64())),
    }
    zeros
}

/// The smallest and largest key of the valid values of `v` (`(i64::MAX, i64::MIN)` if none).
fn bounds<T: Native>(v: &[T], column: &ColumnValues, key: impl Fn(T) -> i64) -> (i64, i64) {
    let (mut min, mut max) = (i64::MAX, i64::MIN);
    match column.nulls {
        Some(nulls) if nulls.null_count() > 0 => {
            for i in nulls.valid_indices() {
                let k = key(v[i]);
                min = min.min(k);
                max = max.max(k);
            }
        }
        _ => {
            for x in v {
                let k = key(*x);
                min = min.min(k);
                max = max.max(k);
            }
        }
    }
    (min, max)
}

impl Predicate {
    /// Whether any row of a run can pass, knowing the zone of some of the columns tested
    /// (`zone(column)`, `None` where unknown). `false` only when no row can.
    pub fn may_pass(&self, zone: &mut dyn FnMut(usize) -> Option<Zone>) -> bool {
        match self {
            Predicate::Const(v) => *v,
            Predicate::Leaf(leaf) => match zone(leaf.column) {
                Some(z) => leaf_may_pass(leaf, z),
                None => true,
            },
            Predicate::And(parts) => parts.iter().all(|p| p.may_pass(zone)),
            Predicate::Or(parts) => parts.iter().any(|p| p.may_pass(zone)),
        }
    }
}

fn leaf_may_pass(leaf: &Leaf, zone: Zone) -> bool {
    match &leaf.test {
        Test::IsNull => return zone.nulls > 0,
        Test::IsNotNull => return zone.nulls < zone.rows,
        Test::IsBool(_) => return true,
        _ => {}
    }
    // Arithmetic moves values in ways bounds do not follow simply (overflow, NaN): unknown.
    if leaf.arith.is_some() {
        return true;
    }
    let Some(z) = zone.in_domain(leaf.domain) else {
        return true;
    };
    // Every remaining test fails on NULL.
    if !z.has_values() {
        return false;
    }
    let (min, max) = (z.min, z.max);
    match &leaf.test {
        Test::Compare { op, key } => {
            let key = *key;
            match op {
                CmpOp::Eq => min <= key && key <= max,
                CmpOp::NotEq => !(min == key && max == key),
                CmpOp::Lt => min < key,
                CmpOp::LtEq => min <= key,
                CmpOp::Gt => max > key,
                CmpOp::GtEq => max >= key,
            }
        }
        Test::In {
            keys,
            negated: false,
        } => keys.iter().any(|k| min <= *k && *k <= max),
        Test::Range { lower, upper } => min <= *upper && *lower <= max,
        Test::In {
            keys,
            negated: true,
        } => !(min == max && keys.contains(&min)),
        Test::IsNull | Test::IsNotNull | Test::IsBool(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::{Arith, ArithOp};
    use arrow_array::{Float64Array, Int32Array};
    use rand::{Rng, SeedableRng};

    fn leaf(test: Test, domain: Domain) -> Predicate {
        Predicate::Leaf(Leaf {
            column: 0,
            domain,
            arith: None,
            test,
            width: 8,
        })
    }

    fn cmp(op: CmpOp, key: i64) -> Test {
        Test::Compare { op, key }
    }

    #[test]
    fn zones_hold_the_extremes_of_valid_values() {
        let a = Int32Array::from(vec![Some(5), None, Some(-3), Some(9), None]);
        let z = Zone::of(&ColumnValues::of(&a).unwrap(), Domain::Int).unwrap();
        assert_eq!((z.min, z.max, z.nulls, z.rows), (-3, 9, 2, 5));
        let nulls = Int32Array::from(vec![None, None]);
        let z = Zone::of(&ColumnValues::of(&nulls).unwrap(), Domain::Int).unwrap();
        assert!(!z.has_values());
        assert_eq!(z.nulls, 2);
        let f = Float64Array::from(vec![-0.0, 2.5, f64::NAN]);
        let z = Zone::of(&ColumnValues::of(&f).unwrap(), Domain::Float).unwrap();
        assert_eq!(z.min, sql_key(0.0));
        assert_eq!(z.max, sql_key(f64::NAN));
        let zeros = |z: Zone| z.zeros.map(|z| (z.negative, z.positive));
        assert_eq!(zeros(z), Some((true, false)));
        let f = Float64Array::from(vec![Some(0.0), None, Some(-1.0)]);
        let z = Zone::of(&ColumnValues::of(&f).unwrap(), Domain::Float).unwrap();
        assert_eq!(zeros(z), Some((false, true)));
        assert_eq!(
            zeros(Zone::of(&ColumnValues::of(&a).unwrap(), Domain::Int).unwrap()),
            None
        );
    }

    /// Whatever the values, a zone never rules out a run that has a passing row.
    #[test]
    fn a_zone_never_rules_out_a_passing_row() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let specials = [f64::NAN, -f64::NAN, -0.0, 0.0, f64::INFINITY, 1.5, -2.0];
        for _ in 0..2000 {
            let n = rng.random_range(0..6);
            let values: Vec<Option<f64>> = (0..n)
                .map(|_| match rng.random_range(0..4) {
                    0 => None,
                    1 => Some(specials[rng.random_range(0..specials.len())]),
                    _ => Some(f64::from(rng.random_range(-4..5))),
                })
                .collect();
            let array = Float64Array::from(values.clone());
            let column = ColumnValues::of(&array).unwrap();
            let zone = Zone::of(&column, Domain::Float).unwrap();
            let constant = specials
                .get(rng.random_range(0..specials.len() + 4))
                .copied()
                .unwrap_or_else(|| f64::from(rng.random_range(-4..5)));
            let key = sql_key(constant);
            let tests = [
                cmp(CmpOp::Eq, key),
                cmp(CmpOp::NotEq, key),
                cmp(CmpOp::Lt, key),
                cmp(CmpOp::LtEq, key),
                cmp(CmpOp::Gt, key),
                cmp(CmpOp::GtEq, key),
                Test::In {
                    keys: vec![key, sql_key(1.0)].into(),
                    negated: false,
                },
                Test::In {
                    keys: vec![key].into(),
                    negated: true,
                },
                Test::Range {
                    lower: key,
                    upper: sql_key(2.0),
                },
                Test::Range {
                    lower: sql_key(-1.0),
                    upper: key,
                },
                Test::IsNull,
                Test::IsNotNull,
            ];
            for test in tests {
                let p = leaf(test.clone(), Domain::Float);
                let passing = p.select(&[column], array.len()).count();
                if passing > 0 {
                    assert!(
                        p.may_pass(&mut |_| Some(zone)),
                        "{test:?} passes {passing} of {values:?} but the zone {zone:?} rules it out"
                    );
                }
            }
        }
    }

    #[test]
    fn filters_outside_a_zone_cannot_pass() {
        let z = Zone {
            domain: Domain::Int,
            min: 10,
            max: 20,
            nulls: 0,
            rows: 100,
            zeros: None,
        };
        let may = |p: Predicate| p.may_pass(&mut |_| Some(z));
        assert!(!may(leaf(cmp(CmpOp::Gt, 20), Domain::Int)));
        assert!(may(leaf(cmp(CmpOp::GtEq, 20), Domain::Int)));
        assert!(!may(leaf(cmp(CmpOp::Lt, 10), Domain::Int)));
        assert!(!may(leaf(cmp(CmpOp::Eq, 21), Domain::Int)));
        assert!(!may(leaf(Test::IsNull, Domain::Int)));
        let between = Predicate::and(vec![
            leaf(cmp(CmpOp::GtEq, 30), Domain::Int),
            leaf(cmp(CmpOp::LtEq, 40), Domain::Int),
        ]);
        assert!(!may(between.clone()));
        assert!(may(Predicate::or(vec![
            between,
            leaf(cmp(CmpOp::Eq, 15), Domain::Int)
        ])));
        // An integer column compared as DOUBLE (a cast): bounds widen.
        assert!(!may(leaf(cmp(CmpOp::Gt, sql_key(20.5)), Domain::Float)));
        assert!(may(leaf(cmp(CmpOp::Gt, sql_key(19.5)), Domain::Float)));
        // Arithmetic is not followed: unknown.
        let mut arith = leaf(cmp(CmpOp::Gt, sql_key(1e9)), Domain::Float);
        if let Predicate::Leaf(l) = &mut arith {
            l.arith = Some(Arith {
                op: ArithOp::Mul,
                constant: 2.0,
                constant_first: false,
            });
        }
        assert!(may(arith));
        // Unknown zones rule nothing out.
        assert!(leaf(cmp(CmpOp::Gt, 20), Domain::Int).may_pass(&mut |_| None));
    }
}

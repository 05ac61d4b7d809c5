//! SPLICE JOIN's pairing: the rows of both sides in timestamp order, each with the newest row
//! of the other side (among rows with its key) that is at or before it.
//!
//! One merge walks both sides. The side whose next row is older goes first; a left and a
//! right row at the same timestamp with the same key come out as one pair (QuestDB's rows at
//! equal timestamps advance together); at the same timestamp with different keys the left
//! row goes first. O(left + right), with one entry per key for each side.
//!
//! QuestDB 9.3.4 keys its answer the same way without keys. With keys it pairs a row with
//! the second newest of the other side's rows when the row read ahead on that side has
//! another key, and drops the right row of an equal-timestamp pair whose keys differ;
//! `docs/query.md` lists this as a deliberate difference.

/// One side of the join: its rows' timestamps, ascending (NULL read as `i64::MAX`), and key
/// numbers (`None` when the join has no keys: every row then has key 0).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Side<'a> {
    pub times: &'a [i64],
    pub keys: Option<&'a [u32]>,
}

impl Side<'_> {
    fn key(&self, row: usize) -> u32 {
        self.keys.map_or(0, |k| k[row])
    }
}

/// No row yet, in a per-key table.
const NONE: u32 = u32::MAX;

/// The output rows as (left row, right row) index columns, `None` for the missing side.
/// Keys numbered `key_count` or more (left keys no right row has) match nothing.
/// Both sides together hold fewer than `u32::MAX` rows (the caller checks).
pub(crate) fn pairs(
    left: Side<'_>,
    right: Side<'_>,
    key_count: usize,
) -> (Vec<Option<u32>>, Vec<Option<u32>>) {
    let (nl, nr) = (left.times.len(), right.times.len());
    debug_assert!(nl + nr < u32::MAX as usize);
    let mut newest_left = vec![NONE; key_count];
    let mut newest_right = vec![NONE; key_count];
    let some = |r: u32| (r != NONE).then_some(r);
    let newest = |table: &[u32], key: u32| table.get(key as usize).copied().and_then(some);
    let mut out_left = Vec::with_capacity(nl + nr);
    let mut out_right = Vec::with_capacity(nl + nr);
    let (mut i, mut j) = (0usize, 0usize);
    while i < nl || j < nr {
        let lt = left.times.get(i).copied();
        let rt = right.times.get(j).copied();
        let paired = match (lt, rt) {
            (Some(a), Some(b)) if a == b => {
                let k = left.key(i);
                k == right.key(j) && (k as usize) < key_count
            }
            _ => false,
        };
        let left_first = match (lt, rt) {
            (Some(a), Some(b)) => a <= b,
            (Some(_), None) => true,
            _ => false,
        };
        if paired {
            let k = left.key(i) as usize;
            newest_left[k] = i as u32;
            newest_right[k] = j as u32;
            out_left.push(Some(i as u32));
            out_right.push(Some(j as u32));
            i += 1;
            j += 1;
        } else if left_first {
            let k = left.key(i);
            if let Some(slot) = newest_left.get_mut(k as usize) {
                *slot = i as u32;
            }
            out_left.push(Some(i as u32));
            out_right.push(newest(&newest_right, k));
            i += 1;
        } else {
            let k = right.key(j);
            newest_right[k as usize] = j as u32;
            out_left.push(newest(&newest_left, k));
            out_right.push(Some(j as u32));
            j += 1;
        }
    }
    (out_left, out_right)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pairs by brute force: every row of both sides, in (time, left first) order, with
    /// the newest row of the other side with its key at or before it; a left and a right row
    /// at one time with one key are one pair when they are the k-th of that time and key on
    /// each side.
    fn model(left: &[(i64, u32)], right: &[(i64, u32)]) -> Vec<(Option<u32>, Option<u32>)> {
        let newest = |side: &[(i64, u32)], upto: usize, key: u32| {
            (0..upto)
                .rev()
                .find(|&r| side[r].1 == key)
                .map(|r| r as u32)
        };
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < left.len() || j < right.len() {
            match (left.get(i), right.get(j)) {
                (Some(l), Some(r)) if l.0 == r.0 && l.1 == r.1 => {
                    out.push((Some(i as u32), Some(j as u32)));
                    i += 1;
                    j += 1;
                }
                (Some(l), r) if r.is_none_or(|r| l.0 <= r.0) => {
                    out.push((Some(i as u32), newest(right, j, l.1)));
                    i += 1;
                }
                (_, Some(r)) => {
                    out.push((newest(left, i, r.1), Some(j as u32)));
                    j += 1;
                }
                _ => unreachable!(),
            }
        }
        out
    }

    fn run(
        left: &[(i64, u32)],
        right: &[(i64, u32)],
        keyed: bool,
    ) -> Vec<(Option<u32>, Option<u32>)> {
        let lt: Vec<i64> = left.iter().map(|r| r.0).collect();
        let lk: Vec<u32> = left.iter().map(|r| r.1).collect();
        let rt: Vec<i64> = right.iter().map(|r| r.0).collect();
        let rk: Vec<u32> = right.iter().map(|r| r.1).collect();
        let keys = if keyed { 4 } else { 1 };
        let (l, r) = pairs(
            Side {
                times: &lt,
                keys: keyed.then_some(lk.as_slice()),
            },
            Side {
                times: &rt,
                keys: keyed.then_some(rk.as_slice()),
            },
            keys,
        );
        l.into_iter().zip(r).collect()
    }

    #[test]
    fn unkeyed_rows_advance_together_at_equal_times() {
        // QuestDB 9.3.4's answer to the same rows (left 1 3 5 5 7 9, right 0 3 4 5 5 8 10).
        let left = [(1, 0), (3, 0), (5, 0), (5, 0), (7, 0), (9, 0)];
        let right = [(0, 0), (3, 0), (4, 0), (5, 0), (5, 0), (8, 0), (10, 0)];
        let want = [
            (None, Some(0)),
            (Some(0), Some(0)),
            (Some(1), Some(1)),
            (Some(1), Some(2)),
            (Some(2), Some(3)),
            (Some(3), Some(4)),
            (Some(4), Some(4)),
            (Some(4), Some(5)),
            (Some(5), Some(5)),
            (Some(5), Some(6)),
        ];
        assert_eq!(run(&left, &right, false), want);
    }

    #[test]
    fn keyed_pairs_match_a_brute_force_model() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..300 {
            let mut side = |len: u64| {
                let mut t = 0i64;
                (0..next(len))
                    .map(|_| {
                        t += next(3) as i64;
                        (t, next(3) as u32)
                    })
                    .collect::<Vec<_>>()
            };
            let (left, right) = (side(12), side(12));
            assert_eq!(
                run(&left, &right, true),
                model(&left, &right),
                "{left:?} {right:?}"
            );
        }
    }

    #[test]
    fn left_keys_without_right_rows_match_nothing() {
        // Key 7 is beyond the key count: no right row has it.
        let lt = [1, 2];
        let lk = [7, 0];
        let rt = [1];
        let rk = [0];
        let (l, r) = pairs(
            Side {
                times: &lt,
                keys: Some(&lk),
            },
            Side {
                times: &rt,
                keys: Some(&rk),
            },
            1,
        );
        assert_eq!(l, [Some(0), None, Some(1)]);
        assert_eq!(r, [None, Some(0), Some(0)]);
    }
}

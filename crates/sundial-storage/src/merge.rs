//! Out-of-order merges that rewrite only a partition's tail.
//!
//! ```text
//!   partition 2016-01-01 before:  [ part v3: rows 0..N                           ]
//!   out-of-order rows from t:                          ^ first row after t = s
//!   after the commit:             [ part v3: rows 0..s ][ part v9: rows s..N + new, merged ]
//! ```
//!
//! A partition is one or more *parts*: runs of rows in timestamp order that do not overlap in
//! time (each part's first timestamp is at or after the previous part's last), listed in the
//! transaction like partitions, sharing the partition's key. Rows arriving out of order are
//! merged with the existing rows from the first one after them to the end of the partition, into
//! one new part; the rows before keep their directory, now committed with fewer rows (the bytes
//! after them are never read, and never written again: only the last part takes appends).
//!
//! Invariants:
//! * Parts of a key ascend in time, and only the last one takes in-order appends.
//! * A kept prefix is at least as long as the rows the merge rewrites, and a kept earlier part
//!   longer: part sizes shrink geometrically towards the tail, so a row is rewritten
//!   O(log rows) times, however the out-of-order rows fall.
//! * A partition has at most [`PARTS_PER_PARTITION_MAX`] parts; a merge that would exceed it
//!   takes in earlier parts.

/// The most parts (see the module docs) one partition may have.
pub(crate) const PARTS_PER_PARTITION_MAX: usize = 16;

/// Where a merge starts: rows from `row` of part `part` onwards are rewritten, `rewritten` of
/// them plus the incoming rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MergeStart {
    pub part: usize,
    pub row: u64,
    pub rewritten: u64,
}

/// Moves the start of a merge back from the first affected row (`row` of part `part`; `rows`
/// are the parts' row counts) until the parts kept satisfy the module's invariants.
pub(crate) fn plan(rows: &[u64], part: usize, row: u64, incoming: u64) -> MergeStart {
    debug_assert!(
        part < rows.len() && row <= rows[part],
        "merge start inside the parts"
    );
    let mut start = MergeStart {
        part,
        row,
        rewritten: rows[part] - row + rows[part + 1..].iter().sum::<u64>() + incoming,
    };
    loop {
        let parts_after = start.part + usize::from(start.row > 0) + 1;
        let too_many = parts_after > PARTS_PER_PARTITION_MAX;
        if start.row > 0 && (start.row < start.rewritten || too_many) {
            start.rewritten += start.row;
            start.row = 0;
        } else if start.row == 0
            && start.part > 0
            && (rows[start.part - 1] <= start.rewritten || too_many)
        {
            start.part -= 1;
            start.rewritten += rows[start.part];
        } else {
            return start;
        }
    }
}

/// The first of `rows` little-endian `i64` timestamps in `bytes` (ascending) that is after
/// `bound`, or at it too when `inclusive`.
pub(crate) fn first_row_from(bytes: &[u8], rows: u64, bound: i64, inclusive: bool) -> u64 {
    let at = |i: u64| {
        let i = i as usize * 8;
        bytes
            .get(i..i + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(i64::MAX, i64::from_le_bytes)
    };
    let (mut lo, mut hi) = (0u64, rows);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let t = at(mid);
        let before = if inclusive { t < bound } else { t <= bound };
        if before {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Row order merging sorted `existing` timestamps with out-of-order rows (`extra`, visited in
/// `extra_order`): indices into the concatenation `existing ++ extra`. Existing rows come first
/// among equal timestamps.
pub(crate) fn merge_order(existing: &[i64], extra: &[i64], extra_order: &[u32]) -> Vec<u32> {
    let e = existing.len();
    let mut out = Vec::with_capacity(e + extra.len());
    let (mut i, mut j) = (0, 0);
    while i < e && j < extra_order.len() {
        let k = extra_order[j] as usize;
        if existing[i] <= extra[k] {
            out.push(i as u32);
            i += 1;
        } else {
            out.push((e + k) as u32);
            j += 1;
        }
    }
    out.extend((i..e).map(|i| i as u32));
    out.extend(extra_order[j..].iter().map(|k| (e + *k as usize) as u32));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_is_stable_and_complete() {
        let existing = [1, 3, 3, 7];
        let extra = [3, 0, 9, 3];
        let order = [1, 0, 3, 2];
        let merged = merge_order(&existing, &extra, &order);
        assert_eq!(merged, vec![5, 0, 1, 2, 4, 7, 3, 6]);
    }

    #[test]
    fn a_small_tail_keeps_the_prefix() {
        let start = plan(&[1_000_000], 0, 999_000, 500);
        assert_eq!(
            start,
            MergeStart {
                part: 0,
                row: 999_000,
                rewritten: 1_500
            }
        );
    }

    #[test]
    fn a_short_prefix_is_rewritten_with_the_tail() {
        assert_eq!(plan(&[1_000], 0, 400, 500).row, 0);
        // The first part is longer than everything rewritten: kept whole.
        let start = plan(&[1_000_000, 1_000], 1, 10, 500);
        assert_eq!((start.part, start.row, start.rewritten), (1, 0, 1_500));
        // An earlier part no longer than the rewrite is taken in too.
        let start = plan(&[5_000, 1_000, 1_000], 2, 10, 4_000);
        assert_eq!((start.part, start.row), (0, 0));
        assert_eq!(start.rewritten, 11_000);
    }

    #[test]
    fn parts_stay_bounded_and_shrink_towards_the_tail() {
        // Repeated merges of small batches just before the end of the newest part.
        let mut parts: Vec<u64> = vec![10_000_000];
        for round in 0..10_000u64 {
            let last = parts.len() - 1;
            let incoming = 100 + round % 7 * 50;
            let row = parts[last].saturating_sub(30);
            let start = plan(&parts, last, row, incoming);
            parts.truncate(start.part + 1);
            if start.row > 0 {
                parts[start.part] = start.row;
                parts.push(start.rewritten);
            } else {
                parts[start.part] = start.rewritten;
            }
            assert!(parts.len() <= PARTS_PER_PARTITION_MAX, "{parts:?}");
            assert!(parts.windows(2).all(|w| w[0] >= w[1] / 2), "{parts:?}");
        }
        let total: u64 = parts.iter().sum();
        assert_eq!(
            total,
            10_000_000 + (0..10_000u64).map(|r| 100 + r % 7 * 50).sum::<u64>()
        );
    }

    #[test]
    fn finds_the_first_row_after_a_bound() {
        let ts: Vec<u8> = [1i64, 3, 3, 7]
            .iter()
            .flat_map(|t| t.to_le_bytes())
            .collect();
        assert_eq!(first_row_from(&ts, 4, 3, false), 3);
        assert_eq!(first_row_from(&ts, 4, 3, true), 1);
        assert_eq!(first_row_from(&ts, 4, 0, false), 0);
        assert_eq!(first_row_from(&ts, 4, 9, true), 4);
    }
}

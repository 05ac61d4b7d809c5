//! `DEDUP UPSERT KEYS`: of rows equal in the designated timestamp and the key columns, the last
//! to arrive replaces the others.
//!
//! ```text
//!   rows in timestamp order, arrival order among equal timestamps
//!   ts:   10   10   10   20   20
//!   key:  a    b    a    a    a        (a run: rows of one timestamp)
//!   kept:      x    x         x        (the last row of each key in its run)
//! ```
//!
//! Where it applies (`table.rs`): within each appended batch, and in every out-of-order merge,
//! whose existing rows precede the incoming ones among equal timestamps. Rows at or before a
//! partition's newest timestamp take the merge path in a deduplicating table, so an incoming row
//! always meets the rows it may replace. Rows already stored are never compared with each other
//! again unless a merge rewrites them.
//!
//! A run of a few rows compares them pairwise; a longer one (a timestamp shared by many series)
//! sorts the rows by a hash of their keys (seeded at random per call, so colliding keys cannot
//! be chosen) and compares only rows of equal hash, so the cost is O(n log r) for runs of r
//! rows, with no allocation per row.

use std::hash::{BuildHasher, Hasher};

use crate::column::ColumnBuf;
use crate::error::{Result, StorageError};
use crate::txn::ColumnMeta;

/// Runs up to this many rows are compared pairwise.
const PAIRWISE_ROWS_MAX: usize = 8;

/// Row identity under the table's keys: rows index into each of `keys` (columns of equal
/// length, the designated timestamp excluded: the caller groups by it).
pub(crate) struct Keys<'a> {
    pub keys: &'a [&'a ColumnBuf],
}

impl Keys<'_> {
    fn equal(&self, a: u32, b: u32) -> bool {
        self.keys
            .iter()
            .all(|k| k.rows_equal(a as usize, b as usize))
    }

    fn hash(&self, state: &impl BuildHasher, row: u32) -> u64 {
        let mut hasher = state.build_hasher();
        for key in self.keys {
            key.hash_row(row as usize, &mut hasher);
        }
        hasher.finish()
    }
}

/// The rows of `order` (ascending by timestamp `ts`, in arrival order among equal timestamps)
/// that no later row of the same timestamp and keys replaces, in the same order.
pub(crate) fn keep_last(order: &[u32], ts: impl Fn(u32) -> i64, keys: &Keys<'_>) -> Vec<u32> {
    let mut out = Vec::with_capacity(order.len());
    // Keyed with a random seed, so that no input can be made to collide on purpose: rows of
    // equal hash are compared with each other.
    let state = foldhash::quality::RandomState::default();
    let mut hashed: Vec<(u64, u32)> = Vec::new();
    let mut replaced: Vec<bool> = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let t = ts(order[start]);
        let mut end = start + 1;
        while end < order.len() && ts(order[end]) == t {
            end += 1;
        }
        let run = &order[start..end];
        if run.len() == 1 || keys.keys.is_empty() {
            // One row, or no keys besides the timestamp: the last row of the run stands.
            out.push(run[run.len() - 1]);
        } else if run.len() <= PAIRWISE_ROWS_MAX {
            for (i, &row) in run.iter().enumerate() {
                if !run[i + 1..].iter().any(|&later| keys.equal(row, later)) {
                    out.push(row);
                }
            }
        } else {
            hashed.clear();
            hashed.extend(
                run.iter()
                    .enumerate()
                    .map(|(i, &row)| (keys.hash(&state, row), i as u32)),
            );
            hashed.sort_unstable();
            replaced.clear();
            replaced.resize(run.len(), false);
            for group in hashed.chunk_by(|a, b| a.0 == b.0) {
                // In arrival order within the group: a row is replaced by any later equal one.
                for (g, &(_, i)) in group.iter().enumerate() {
                    let row = run[i as usize];
                    if group[g + 1..]
                        .iter()
                        .any(|&(_, j)| keys.equal(row, run[j as usize]))
                    {
                        replaced[i as usize] = true;
                    }
                }
            }
            out.extend(
                run.iter()
                    .zip(&replaced)
                    .filter(|(_, r)| !**r)
                    .map(|(row, _)| *row),
            );
        }
        start = end;
    }
    out
}

/// Marks `keys` (column names) as the table's `DEDUP UPSERT KEYS`, or clears them when empty.
/// The designated timestamp must be among them.
pub(crate) fn set_dedup_keys(
    columns: &mut [ColumnMeta],
    timestamp_index: Option<usize>,
    keys: &[String],
) -> Result<()> {
    let mut marked = vec![false; columns.len()];
    for name in keys {
        let i = columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                StorageError::InvalidInput(format!(
                    "deduplication key '{name}' is not a column of the table"
                ))
            })?;
        if marked[i] {
            return Err(StorageError::InvalidInput(format!(
                "deduplication key '{name}' is listed twice"
            )));
        }
        marked[i] = true;
    }
    if !keys.is_empty() {
        let Some(ts) = timestamp_index else {
            return Err(StorageError::InvalidInput(
                "DEDUP UPSERT KEYS needs a designated timestamp: add TIMESTAMP(column)".into(),
            ));
        };
        if !marked[ts] {
            return Err(StorageError::InvalidInput(format!(
                "DEDUP UPSERT KEYS must include the designated timestamp '{}'",
                columns[ts].name
            )));
        }
    }
    for (c, key) in columns.iter_mut().zip(marked) {
        c.dedup_key = key;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::Values;

    fn longs(values: &[Option<i64>]) -> ColumnBuf {
        let mut buf = ColumnBuf::nulls(crate::types::ColumnType::Long, values.len());
        let mut bytes = Vec::new();
        let validity = buf.validity.as_mut().expect("nulls have validity");
        for (i, v) in values.iter().enumerate() {
            bytes.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
            if v.is_some() {
                crate::bits::set(validity, i, true);
            }
        }
        buf.values = Values::Fixed { width: 8, bytes };
        buf
    }

    /// The model: for each (ts, key), the last row in arrival order.
    fn model(ts: &[i64], key: &[Option<i64>]) -> Vec<u32> {
        let mut order: Vec<u32> = (0..ts.len() as u32).collect();
        order.sort_by_key(|i| ts[*i as usize]);
        order
            .iter()
            .copied()
            .filter(|&i| {
                !order.iter().any(|&j| {
                    j > i && ts[j as usize] == ts[i as usize] && key[j as usize] == key[i as usize]
                })
            })
            .collect()
    }

    #[test]
    fn the_last_row_of_each_key_stands() {
        let ts = [10, 10, 10, 20, 20, 30];
        let key = [Some(1), Some(2), Some(1), Some(1), Some(1), None];
        let column = longs(&key);
        let keys = Keys { keys: &[&column] };
        let order: Vec<u32> = (0..6).collect();
        let kept = keep_last(&order, |i| ts[i as usize], &keys);
        assert_eq!(kept, vec![1, 2, 4, 5]);
    }

    #[test]
    fn long_runs_match_the_model() {
        let mut state = 7u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..50 {
            let n = 1 + (next() % 400) as usize;
            let ts: Vec<i64> = (0..n).map(|_| (next() % 4) as i64).collect();
            let key: Vec<Option<i64>> = (0..n)
                .map(|_| (next() % 10 != 0).then(|| (next() % (1 + round)) as i64))
                .collect();
            let column = longs(&key);
            let keys = Keys { keys: &[&column] };
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.sort_by_key(|i| ts[*i as usize]);
            let kept = keep_last(&order, |i| ts[i as usize], &keys);
            assert_eq!(kept, model(&ts, &key), "round {round}");
        }
    }

    #[test]
    fn keys_must_name_columns_and_include_the_timestamp() {
        let column = |id: u32, name: &str| ColumnMeta {
            id,
            name: name.into(),
            column_type: crate::types::ColumnType::Long,
            indexed: false,
            dedup_key: false,
        };
        let mut columns = vec![column(0, "ts"), column(1, "k"), column(2, "v")];
        let keys = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert!(set_dedup_keys(&mut columns, Some(0), &keys(&["k"])).is_err());
        assert!(set_dedup_keys(&mut columns, Some(0), &keys(&["ts", "nope"])).is_err());
        assert!(set_dedup_keys(&mut columns, Some(0), &keys(&["ts", "k", "K"])).is_err());
        assert!(set_dedup_keys(&mut columns, None, &keys(&["ts"])).is_err());
        assert!(
            columns.iter().all(|c| !c.dedup_key),
            "a failed change marks nothing"
        );
        set_dedup_keys(&mut columns, Some(0), &keys(&["K", "ts"])).expect("keys");
        let marked: Vec<bool> = columns.iter().map(|c| c.dedup_key).collect();
        assert_eq!(marked, vec![true, true, false]);
        set_dedup_keys(&mut columns, Some(0), &[]).expect("disable");
        assert!(columns.iter().all(|c| !c.dedup_key));
    }
}

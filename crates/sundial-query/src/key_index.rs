//! In-memory key indexes, built on first use and shared by every session: point lookups use
//! them for their key columns, and scans for filters on indexed SYMBOL columns.
//!
//! ```text
//! (table, column, partition key, first timestamp) ──▶ KeyIndex of one part's version
//!   integer keys:  heads: key ──▶ newest row with it     next: row ──▶ previous row, same key
//!   SYMBOL codes:  lists: code ──▶ its rows, ascending
//! ```
//!
//! A partition is one or more parts (sundial-storage's `merge.rs`). A part only grows by
//! appends until it is rewritten (an out-of-order commit, a compaction), which gets a new
//! version, or cut short when a merge rewrites its end into a new part, which leaves its first
//! rows as they were. So an index stays right for the rows it covers (it is never asked about
//! rows past the part's count) and extends itself when a newer snapshot has more. A lookup
//! in a newer version replaces the index of the older one (a reader still on the older
//! snapshot then builds its own, unshared, and drops it after use). Integer-like columns
//! (integers, timestamps, dates) and SYMBOL codes are indexed; other types are scanned. The total size is bounded: past
//! `bytes_max` the least recently used indexes are dropped, and a partition too big for the
//! budget is scanned instead.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::HashMap;
use sundial_storage::{ColumnType, Snapshot, Table};

use crate::error::Result;

/// Ends a chain in [`KeyIndex::next`].
const NO_ROW: u32 = u32::MAX;

/// Bytes one indexed row costs at most: a chain link plus a map entry with its overhead.
const ROW_BYTES: usize = 4 + 24;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct IndexId {
    table: String,
    column_id: u32,
    /// The part's partition key and first timestamp: parts of one partition (see
    /// sundial-storage's `merge.rs`) are indexed apart, successive versions of one together.
    part: (i64, i64),
}

/// What an index answers for one key.
pub(crate) enum IndexRows {
    /// The rows holding the key, ascending.
    Hits(Vec<u32>),
    /// The partition is too big for the memory budget: scan it.
    Unindexed,
    /// Answering needs more indexing work than the caller allowed.
    Deferred,
}

/// Every key index of a database, bounded in memory.
#[derive(Debug)]
pub(crate) struct KeyIndexes {
    entries: Mutex<HashMap<IndexId, Arc<Mutex<KeyIndex>>>>,
    bytes_max: usize,
    clock: AtomicU64,
}

#[derive(Debug)]
struct KeyIndex {
    /// The table the index was built for: a table dropped and created again under the same
    /// name is another table.
    table: Weak<Table>,
    partition_version: u64,
    entries: Entries,
    /// The partition's first `rows` rows are indexed.
    rows: u64,
    last_used: u64,
}

#[derive(Debug)]
enum Entries {
    /// Integer keys: the newest row of each key, and each row's previous row with its key.
    Chains {
        heads: HashMap<i64, u32>,
        next: Vec<u32>,
    },
    /// SYMBOL codes (dense from 0): each code's rows, ascending. `bytes` is their footprint.
    Postings { lists: Vec<Vec<u32>>, bytes: usize },
}

impl KeyIndex {
    fn bytes(&self) -> usize {
        match &self.entries {
            Entries::Chains { heads, next } => next.capacity() * 4 + heads.capacity() * 24,
            Entries::Postings { bytes, .. } => *bytes,
        }
    }

    /// The indexed rows in `within` holding `key`, ascending.
    /// The rows `within` holding `key`, ascending; past `hits_max` of them, some `hits_max + 1`
    /// (the caller only learns that there are too many).
    fn hits(&self, key: i64, within: Range<u64>, hits_max: usize) -> Vec<u32> {
        match &self.entries {
            Entries::Chains { heads, next } => {
                let mut hits = Vec::new();
                let mut row = heads.get(&key).copied().unwrap_or(NO_ROW);
                // Chains run from the newest row to the oldest.
                while row != NO_ROW && (row as u64) >= within.start && hits.len() <= hits_max {
                    if (row as u64) < within.end {
                        hits.push(row);
                    }
                    row = next[row as usize];
                }
                hits.reverse();
                hits
            }
            Entries::Postings { lists, .. } => {
                let Some(list) = usize::try_from(key).ok().and_then(|code| lists.get(code)) else {
                    return Vec::new();
                };
                let from = list.partition_point(|r| (*r as u64) < within.start);
                let to = list.partition_point(|r| (*r as u64) < within.end);
                list[from..to.max(from)].to_vec()
            }
        }
    }
}

/// Whether a column's values can be indexed as 64-bit integers.
pub(crate) fn indexable(column_type: ColumnType) -> bool {
    matches!(
        column_type,
        ColumnType::Byte
            | ColumnType::Short
            | ColumnType::Int
            | ColumnType::Long
            | ColumnType::Timestamp
            | ColumnType::Date
            | ColumnType::Symbol
    )
}

impl KeyIndexes {
    pub(crate) fn new(bytes_max: usize) -> KeyIndexes {
        KeyIndexes {
            entries: Mutex::new(HashMap::default()),
            bytes_max,
            clock: AtomicU64::new(0),
        }
    }

    /// Rows `within` of `partition` (in table order) whose column `column` holds `key` (for a
    /// SYMBOL column, its code), at most `hits_max + 1` of them (more means too many to
    /// gather). Indexing more than `index_rows_max` rows to answer is left to the caller
    /// ([`IndexRows::Deferred`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rows(
        &self,
        table: &Arc<Table>,
        snapshot: &Snapshot,
        index_rows_max: u64,
        (partition, column): (usize, usize),
        key: i64,
        within: Range<u64>,
        hits_max: usize,
    ) -> Result<IndexRows> {
        let part = &snapshot.partitions()[partition];
        let rows = part.row_count;
        // A part cut short by a merge shares the index of its longer self.
        let within = within.start..within.end.min(rows);
        if rows as usize > self.bytes_max / ROW_BYTES || rows >= NO_ROW as u64 {
            return Ok(IndexRows::Unindexed);
        }
        let column_meta = &snapshot.meta().columns[column];
        let id = IndexId {
            table: snapshot.meta().name.clone(),
            column_id: column_meta.id,
            part: (part.key, part.min_ts),
        };
        let symbols = column_meta.column_type == ColumnType::Symbol;
        let entry = self.entry(id, table, part.version, symbols);
        let mut index = entry.lock().unwrap_or_else(|e| e.into_inner());
        index.last_used = self.clock.fetch_add(1, Ordering::Relaxed);
        let indexed = index.rows;
        if rows.saturating_sub(indexed) > index_rows_max {
            return Ok(IndexRows::Deferred);
        }
        if indexed < rows {
            let values = snapshot.read_column(partition, column, indexed..rows)?;
            let bytes_before = index.bytes();
            extend(&mut index, &values)?;
            let bytes = index.bytes();
            // Sizes are capacities: they change only when the index reallocates, so appends
            // that fit leave the total as it was and need no eviction pass.
            if bytes > bytes_before {
                drop(index);
                self.evict_beyond_budget(bytes);
                index = entry.lock().unwrap_or_else(|e| e.into_inner());
            }
        }
        let within = within.start..within.end.min(rows);
        Ok(IndexRows::Hits(index.hits(key, within, hits_max)))
    }

    /// The shared index for `id` at `version`. An index of an older version is replaced; a
    /// reader of an older version than the one shared gets a private index.
    fn entry(
        &self,
        id: IndexId,
        table: &Arc<Table>,
        version: u64,
        symbols: bool,
    ) -> Arc<Mutex<KeyIndex>> {
        let fresh = || {
            let entries = if symbols {
                Entries::Postings {
                    lists: Vec::new(),
                    bytes: 0,
                }
            } else {
                Entries::Chains {
                    heads: HashMap::default(),
                    next: Vec::new(),
                }
            };
            Arc::new(Mutex::new(KeyIndex {
                table: Arc::downgrade(table),
                partition_version: version,
                entries,
                rows: 0,
                last_used: 0,
            }))
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = entries.get(&id) {
            let (same_table, shared_version) = {
                let index = existing.lock().unwrap_or_else(|e| e.into_inner());
                let same_table = index
                    .table
                    .upgrade()
                    .is_some_and(|t| Arc::ptr_eq(&t, table));
                (same_table, index.partition_version)
            };
            if same_table && shared_version == version {
                return existing.clone();
            }
            if same_table && shared_version > version {
                return fresh();
            }
        }
        let index = fresh();
        entries.insert(id, index.clone());
        index
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Drops least recently used indexes until the total fits `bytes_max`, keeping the one
    /// just used (whose size is `keep_bytes`).
    fn evict_beyond_budget(&self, keep_bytes: usize) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut sizes: Vec<(IndexId, usize, u64)> = entries
            .iter()
            .filter_map(|(id, entry)| {
                let index = entry.try_lock().ok()?;
                Some((id.clone(), index.bytes(), index.last_used))
            })
            .collect();
        let mut total: usize = sizes
            .iter()
            .map(|(_, b, _)| b)
            .sum::<usize>()
            .max(keep_bytes);
        if total <= self.bytes_max {
            return;
        }
        sizes.sort_by_key(|(_, _, used)| *used);
        for (id, bytes, _) in sizes {
            if total <= self.bytes_max {
                break;
            }
            entries.remove(&id);
            total -= bytes;
        }
    }
}

/// Indexes `values`, the rows following those already indexed.
fn extend(index: &mut KeyIndex, values: &ArrayRef) -> Result<()> {
    let keys = match values.as_any_dictionary_opt() {
        Some(dictionary) => cast(dictionary.keys(), &DataType::Int64)?,
        None => cast(values, &DataType::Int64)?,
    };
    let keys = keys.as_primitive::<Int64Type>();
    // The caller indexes only partitions of fewer than NO_ROW rows.
    let first_row = index.rows as u32;
    match &mut index.entries {
        Entries::Chains { heads, next } => {
            next.reserve(keys.len());
            heads.reserve(keys.len().min(1 << 16));
            for (row, key) in (first_row..).zip(keys.iter()) {
                let previous = match key {
                    Some(key) => heads.insert(key, row).unwrap_or(NO_ROW),
                    None => NO_ROW,
                };
                next.push(previous);
            }
        }
        Entries::Postings { lists, bytes } => {
            for (row, key) in (first_row..).zip(keys.iter()) {
                // NULL has no code; a negative code would be a corrupt column.
                let Some(code) = key.and_then(|k| usize::try_from(k).ok()) else {
                    continue;
                };
                if code >= lists.len() {
                    lists.resize_with(code + 1, Vec::new);
                }
                lists[code].push(row);
            }
            *bytes = lists.capacity() * 24 + lists.iter().map(|l| l.capacity() * 4).sum::<usize>();
        }
    }
    index.rows += keys.len() as u64;
    Ok(())
}

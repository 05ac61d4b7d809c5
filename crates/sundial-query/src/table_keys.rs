//! Whole-table key indexes for point lookups: an integer key to its rows in every partition
//! with one hash probe, whatever the number of partitions.
//!
//! ```text
//! (table, column) ──▶ TableKeyIndex
//!   heads: key ──▶ Loc of the row indexed last with it        Loc = part number << 32 | row
//!   parts: part number ──▶ (partition key, first timestamp, version, rows indexed,
//!                           links: row ──▶ Loc indexed before it with its key (only once a
//!                           key repeats in the part; a table of unique keys keeps none))
//!   view:  the newest snapshot's part numbers ──▶ (its partition ordinal, its rows)
//! ```
//!
//! `key_index` keeps an index per partition, so a lookup probes every partition: 579 probes
//! for 50M rows in daily partitions. Here a lookup probes once and walks the key's chain of
//! locations, keeping those the snapshot holds (a part of the view, a row under the part's
//! row count there); a chain may pass through parts no longer live.
//!
//! Invariants:
//! * A part is identified as in `key_index`: (partition key, first timestamp). It grows only by
//!   appends at its version; a rewrite is a new version, indexed as a new part number, and the
//!   old number is dead (its locations stay in chains until the next rebuild, and no view maps
//!   it). A part cut short by a merge keeps its version: the view's row count hides the rest.
//! * The index follows the newest snapshot it has seen (`seq`): a reader of an older snapshot is
//!   answered `Unindexed` and looks per partition instead, so the index never goes back.
//! * Dead locations are at most half of all once a rebuild is possible: past that, the index
//!   is built again from the live parts.
//! * No lookup waits on the index's lock: while one lookup indexes (a first build of a large
//!   table takes seconds), the others are answered `Unindexed` and look per partition.
//! * Memory: about `ROW_BYTES` per live row, checked against the budget before indexing; past
//!   the budget the least recently used tables' indexes are dropped, and a table too big for it
//!   is looked up per partition.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, TryLockError, Weak};

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::HashMap;
use sundial_storage::{ColumnType, Snapshot, Table};

use crate::error::Result;
use crate::key_index::indexable;

/// A row of a part: part number in the high 32 bits, row in the low ones.
type Loc = u64;

/// Ends a chain.
const NO_LOC: Loc = u64::MAX;

/// Bytes one indexed row costs, about: a head entry (key, location, control byte) at
/// hashbrown's load factor, with room for its growth.
const ROW_BYTES: usize = 24;

fn loc(part: u32, row: u32) -> Loc {
    (u64::from(part) << 32) | u64::from(row)
}

fn split(loc: Loc) -> (u32, u32) {
    ((loc >> 32) as u32, loc as u32)
}

/// What the index answers for one key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Every row of the snapshot holding the key, as (partition ordinal, row), ascending.
    Rows(Vec<(usize, u32)>),
    /// More than the caller's `hits_max` rows hold it.
    TooMany,
    /// Not answered here: a table too big for the budget, a column that is not an integer, a
    /// partition of 2³² rows or more, or a snapshot older than the index's.
    Unindexed,
    /// Answering needs more indexing work than the caller allowed.
    Deferred,
}

/// The whole-table key indexes of a database, bounded in memory.
#[derive(Debug)]
pub(crate) struct TableKeys {
    /// By table name, then column id.
    entries: Mutex<HashMap<String, HashMap<u32, Arc<Entry>>>>,
    bytes_max: usize,
    clock: AtomicU64,
}

#[derive(Debug)]
struct Entry {
    /// The table it was built for: a table dropped and created again is another table.
    table: Weak<Table>,
    index: RwLock<TableKeyIndex>,
}

#[derive(Debug)]
struct TableKeyIndex {
    heads: HashMap<i64, Loc>,
    parts: Vec<Part>,
    /// The live part number of each (partition key, first timestamp).
    by_id: HashMap<(i64, i64), u32>,
    view: View,
    live_rows: u64,
    dead_rows: u64,
    last_used: AtomicU64,
}

#[derive(Debug)]
struct Part {
    version: u64,
    /// The first `rows` rows are indexed.
    rows: u64,
    /// Each row's link to the location indexed before it with its key; empty until a key
    /// repeats within the part (links to other parts live in `older`).
    links: Vec<Loc>,
    /// For each key whose previous location lies in another part, that location, by the first
    /// row of the key in this part.
    older: HashMap<u32, Loc>,
    live: bool,
}

/// The snapshot the index last caught up with.
#[derive(Debug, Default)]
struct View {
    seq: Option<u64>,
    /// By part number: the partition's ordinal in that snapshot and its row count there.
    parts: Vec<Option<(usize, u64)>>,
}

impl TableKeyIndex {
    fn new() -> TableKeyIndex {
        TableKeyIndex {
            heads: HashMap::default(),
            parts: Vec::new(),
            by_id: HashMap::default(),
            view: View::default(),
            live_rows: 0,
            dead_rows: 0,
            last_used: AtomicU64::new(0),
        }
    }

    fn bytes(&self) -> usize {
        self.heads.capacity() * ROW_BYTES
            + self
                .parts
                .iter()
                .map(|p| p.links.capacity() * 8 + p.older.capacity() * 16)
                .sum::<usize>()
    }

    /// The rows indexing must read to catch up with `snapshot`, or `None` if the snapshot is
    /// older than the index's view.
    fn rows_behind(&self, snapshot: &Snapshot) -> Option<u64> {
        if self.view.seq.is_some_and(|seq| snapshot.seq() < seq) {
            return None;
        }
        let mut behind = 0;
        for meta in snapshot.partitions() {
            behind += match self.by_id.get(&(meta.key, meta.min_ts)) {
                Some(&p) if self.parts[p as usize].version == meta.version => {
                    meta.row_count.saturating_sub(self.parts[p as usize].rows)
                }
                Some(&p) if self.parts[p as usize].version > meta.version => return None,
                _ => meta.row_count,
            };
        }
        Some(behind)
    }

    /// Indexes what `snapshot` holds beyond what is indexed, and makes it the view. The
    /// caller checked [`Self::rows_behind`].
    fn catch_up(&mut self, snapshot: &Snapshot, column: usize, behind: u64) -> Result<()> {
        // Room for every row at once: growing part by part rehashes the heads again and again.
        self.heads
            .reserve(usize::try_from(behind).unwrap_or(usize::MAX));
        let mut seen = vec![false; self.parts.len()];
        let mut view = Vec::with_capacity(self.parts.len());
        for (ordinal, meta) in snapshot.partitions().iter().enumerate() {
            let id = (meta.key, meta.min_ts);
            let number = match self.by_id.get(&id) {
                Some(&p) if self.parts[p as usize].version == meta.version => p,
                existing => {
                    if let Some(&old) = existing {
                        self.kill(old);
                    }
                    let number = u32::try_from(self.parts.len()).expect("part numbers fit u32");
                    self.parts.push(Part {
                        version: meta.version,
                        rows: 0,
                        links: Vec::new(),
                        older: HashMap::default(),
                        live: true,
                    });
                    seen.push(false);
                    self.by_id.insert(id, number);
                    number
                }
            };
            seen[number as usize] = true;
            let indexed = self.parts[number as usize].rows;
            if indexed < meta.row_count {
                let values = snapshot.read_column(ordinal, column, indexed..meta.row_count)?;
                self.extend(number, &values)?;
            }
            if view.len() <= number as usize {
                view.resize(number as usize + 1, None);
            }
            view[number as usize] = Some((ordinal, meta.row_count));
        }
        // Parts the newest snapshot does not hold were dropped or replaced.
        for (number, seen) in seen.into_iter().enumerate() {
            if !seen && self.parts[number].live {
                self.kill(number as u32);
            }
        }
        self.view = View {
            seq: Some(snapshot.seq()),
            parts: view,
        };
        Ok(())
    }

    fn kill(&mut self, number: u32) {
        let part = &mut self.parts[number as usize];
        if part.live {
            part.live = false;
            self.live_rows -= part.rows;
            self.dead_rows += part.rows;
            self.by_id.retain(|_, p| *p != number);
        }
    }

    /// Indexes `values`, the rows of part `number` following those already indexed.
    fn extend(&mut self, number: u32, values: &ArrayRef) -> Result<()> {
        let keys = cast(values, &DataType::Int64)?;
        let keys = keys.as_primitive::<Int64Type>();
        let part = &mut self.parts[number as usize];
        let first = part.rows as u32;
        for (row, key) in (first..).zip(keys.iter()) {
            let Some(key) = key else {
                if !part.links.is_empty() {
                    part.links.push(NO_LOC);
                }
                continue;
            };
            let previous = self.heads.insert(key, loc(number, row)).unwrap_or(NO_LOC);
            let same_part = previous != NO_LOC && split(previous).0 == number;
            if same_part && part.links.is_empty() {
                // The first repeat within the part: links for every row from here on.
                part.links.resize(row as usize, NO_LOC);
            }
            if !part.links.is_empty() {
                part.links.push(if same_part { previous } else { NO_LOC });
            }
            if previous != NO_LOC && !same_part {
                part.older.insert(row, previous);
            }
        }
        part.rows += keys.len() as u64;
        self.live_rows += keys.len() as u64;
        Ok(())
    }

    /// The location indexed before `at` with its key.
    fn previous(&self, at: Loc) -> Loc {
        let (number, row) = split(at);
        let part = &self.parts[number as usize];
        if let Some(&link) = part.links.get(row as usize)
            && link != NO_LOC
        {
            return link;
        }
        part.older.get(&row).copied().unwrap_or(NO_LOC)
    }

    /// The view's rows holding `key`, ascending; more than `hits_max` is [`Found::TooMany`].
    fn probe(&self, key: i64, hits_max: usize) -> Found {
        let mut hits = Vec::new();
        let mut at = self.heads.get(&key).copied().unwrap_or(NO_LOC);
        while at != NO_LOC {
            let (number, row) = split(at);
            if let Some(Some((ordinal, rows))) = self.view.parts.get(number as usize)
                && u64::from(row) < *rows
            {
                if hits.len() == hits_max {
                    return Found::TooMany;
                }
                hits.push((*ordinal, row));
            }
            at = self.previous(at);
        }
        hits.sort_unstable();
        Found::Rows(hits)
    }
}

impl TableKeys {
    pub(crate) fn new(bytes_max: usize) -> TableKeys {
        TableKeys {
            entries: Mutex::new(HashMap::default()),
            bytes_max,
            clock: AtomicU64::new(0),
        }
    }

    /// The rows of `snapshot` whose integer column `column` holds `key`, through the table's
    /// index, built or caught up first if that reads at most `index_rows_max` rows.
    pub(crate) fn rows(
        &self,
        table: &Arc<Table>,
        snapshot: &Snapshot,
        column: usize,
        key: i64,
        index_rows_max: u64,
        hits_max: usize,
    ) -> Result<Found> {
        let meta = &snapshot.meta().columns[column];
        // SYMBOL codes are per-partition postings' business (`key_index`).
        let integer = indexable(meta.column_type) && meta.column_type != ColumnType::Symbol;
        let parts = snapshot.partitions();
        let total: u64 = parts.iter().map(|p| p.row_count).sum();
        if !integer
            || total.saturating_mul(ROW_BYTES as u64) > self.bytes_max as u64
            || parts.iter().any(|p| p.row_count >= u64::from(u32::MAX))
        {
            return Ok(Found::Unindexed);
        }
        let entry = self.entry(table, snapshot, meta.id);
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        // No lookup waits for another's indexing (a first build of a large table takes
        // seconds): while the index is being written, lookups go per partition.
        {
            let index = match entry.index.try_read() {
                Ok(index) => index,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => return Ok(Found::Unindexed),
            };
            index.last_used.store(used, Ordering::Relaxed);
            if index.view.seq == Some(snapshot.seq()) {
                return Ok(index.probe(key, hits_max));
            }
        }
        let mut index = match entry.index.try_write() {
            Ok(index) => index,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(Found::Unindexed),
        };
        if index.view.seq != Some(snapshot.seq()) {
            let rebuild = index.dead_rows > index.live_rows && total <= index_rows_max;
            if rebuild {
                *index = TableKeyIndex::new();
            }
            let Some(behind) = index.rows_behind(snapshot) else {
                return Ok(Found::Unindexed);
            };
            if behind > index_rows_max {
                return Ok(Found::Deferred);
            }
            let before = index.bytes();
            index.catch_up(snapshot, column, behind)?;
            let after = index.bytes();
            if after > before {
                drop(index);
                self.evict_beyond_budget(&entry);
                index = match entry.index.try_write() {
                    Ok(index) => index,
                    Err(TryLockError::Poisoned(e)) => e.into_inner(),
                    Err(TryLockError::WouldBlock) => return Ok(Found::Unindexed),
                };
                if index.view.seq != Some(snapshot.seq()) {
                    // Caught up by another reader with a newer snapshot meanwhile.
                    return Ok(Found::Unindexed);
                }
            }
        }
        Ok(index.probe(key, hits_max))
    }

    /// The shared index of `column` of `table`; a table created again under the same name
    /// gets a new one.
    fn entry(&self, table: &Arc<Table>, snapshot: &Snapshot, column_id: u32) -> Arc<Entry> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let name = snapshot.meta().name.as_str();
        if let Some(existing) = entries
            .get(name)
            .and_then(|columns| columns.get(&column_id))
            && existing
                .table
                .upgrade()
                .is_some_and(|t| Arc::ptr_eq(&t, table))
        {
            return existing.clone();
        }
        let entry = Arc::new(Entry {
            table: Arc::downgrade(table),
            index: RwLock::new(TableKeyIndex::new()),
        });
        entries
            .entry_ref(name)
            .or_default()
            .insert(column_id, entry.clone());
        entry
    }

    /// Drops least recently used indexes until the total fits `bytes_max`, keeping `keep`.
    fn evict_beyond_budget(&self, keep: &Arc<Entry>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut sizes: Vec<((String, u32), usize, u64)> = entries
            .iter()
            .flat_map(|(name, columns)| columns.iter().map(move |(c, e)| (name, *c, e)))
            .filter_map(|(name, column, entry)| {
                let index = entry.index.try_read().ok()?;
                let used = if Arc::ptr_eq(entry, keep) {
                    u64::MAX
                } else {
                    index.last_used.load(Ordering::Relaxed)
                };
                Some(((name.clone(), column), index.bytes(), used))
            })
            .collect();
        let mut total: usize = sizes.iter().map(|(_, b, _)| b).sum();
        if total <= self.bytes_max {
            return;
        }
        sizes.sort_by_key(|(_, _, used)| *used);
        for (id, bytes, used) in sizes {
            if total <= self.bytes_max || used == u64::MAX {
                break;
            }
            let (name, column) = id;
            if let Some(columns) = entries.get_mut(&name) {
                columns.remove(&column);
                if columns.is_empty() {
                    entries.remove(&name);
                }
            }
            total -= bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;

    use super::*;
    use crate::exec::scan::tests::engine;

    /// Every (partition ordinal, row) of `snapshot` whose column `column` holds `key`, read
    /// from the columns: the model the index must agree with.
    fn model(snapshot: &Snapshot, column: usize, key: i64) -> Vec<(usize, u32)> {
        let mut rows = Vec::new();
        for (ordinal, part) in snapshot.partitions().iter().enumerate() {
            let values = snapshot
                .read_column(ordinal, column, 0..part.row_count)
                .expect("read");
            let values = cast(&values, &DataType::Int64).expect("cast");
            for (row, value) in values.as_primitive::<Int64Type>().iter().enumerate() {
                if value == Some(key) {
                    rows.push((ordinal, row as u32));
                }
            }
        }
        rows
    }

    /// Asserts the index answers as the model for every key in `keys`.
    fn agrees(keys: &TableKeys, table: &Arc<Table>, keys_checked: std::ops::Range<i64>) {
        let snapshot = table.snapshot();
        for key in keys_checked {
            let found = keys
                .rows(table, &snapshot, 1, key, u64::MAX, usize::MAX)
                .expect("rows");
            assert_eq!(
                found,
                Found::Rows(model(&snapshot, 1, key)),
                "key {key} at commit {}",
                snapshot.seq()
            );
        }
    }

    /// The index follows appends, keys repeated within and across partitions, out-of-order
    /// rewrites of earlier partitions, and dropped partitions, answering as the columns do.
    #[tokio::test]
    async fn lookups_answer_as_the_columns_through_every_change() {
        let (engine, _dir) = engine();
        let run = |sql: String| {
            let engine = &engine;
            async move { engine.run(&sql).await.expect(&sql) }
        };
        run(
            "CREATE TABLE k (ts TIMESTAMP, id LONG, v LONG) TIMESTAMP(ts) PARTITION BY HOUR".into(),
        )
        .await;
        let table = engine.db().table("k").expect("table");
        let keys = TableKeys::new(1 << 30);
        // Three hours of unique ids, one a minute.
        run(
            "INSERT INTO k SELECT to_timestamp_seconds(1704067200 + value * 60), value, 0 \
             FROM generate_series(0, 179)"
                .into(),
        )
        .await;
        agrees(&keys, &table, -1..181);
        // Appends repeating ids 0..19, within the last hour and into a new one.
        run(
            "INSERT INTO k SELECT to_timestamp_seconds(1704078000 + value * 30), value % 20, 1 \
             FROM generate_series(0, 199)"
                .into(),
        )
        .await;
        agrees(&keys, &table, -1..25);
        // Out of order into the first hour: a new version of that partition.
        run(
            "INSERT INTO k VALUES ('2024-01-01T00:30:30Z', 7, 2), ('2024-01-01T00:00:10Z', 500, 2)"
                .into(),
        )
        .await;
        agrees(&keys, &table, 0..25);
        agrees(&keys, &table, 498..502);
        // The first hour dropped: its rows are gone from every answer.
        run("ALTER TABLE k DROP PARTITION LIST '2024-01-01T00'".into()).await;
        agrees(&keys, &table, 0..25);
        agrees(&keys, &table, 498..502);
        agrees(&keys, &table, 170..181);
    }

    /// A reader of a snapshot older than the index's is sent per partition; indexing more than
    /// allowed defers; a table too big for the budget is not indexed; many rewrites rebuild.
    #[tokio::test]
    async fn stale_readers_allowances_budgets_and_rebuilds() {
        let (engine, _dir) = engine();
        engine
            .run("CREATE TABLE k (ts TIMESTAMP, id LONG) TIMESTAMP(ts) PARTITION BY HOUR")
            .await
            .expect("create");
        engine
            .run(
                "INSERT INTO k SELECT to_timestamp_seconds(1704067200 + value), value \
                 FROM generate_series(0, 999)",
            )
            .await
            .expect("insert");
        let table = engine.db().table("k").expect("table");
        let old = table.snapshot();
        let keys = TableKeys::new(1 << 30);
        assert_eq!(
            keys.rows(&table, &old, 1, 5, 10, usize::MAX).expect("rows"),
            Found::Deferred
        );
        assert_eq!(
            keys.rows(&table, &old, 1, 5, u64::MAX, usize::MAX)
                .expect("rows"),
            Found::Rows(vec![(0, 5)])
        );
        // Caught up, it answers within any allowance.
        assert_eq!(
            keys.rows(&table, &old, 1, 5, 0, usize::MAX).expect("rows"),
            Found::Rows(vec![(0, 5)])
        );
        engine
            .run("INSERT INTO k VALUES ('2024-01-01T00:59:00Z', 5)")
            .await
            .expect("insert");
        let new = table.snapshot();
        assert_eq!(
            keys.rows(&table, &new, 1, 5, u64::MAX, 1).expect("rows"),
            Found::TooMany
        );
        assert_eq!(
            keys.rows(&table, &new, 1, 5, u64::MAX, 2).expect("rows"),
            Found::Rows(vec![(0, 5), (0, 1000)])
        );
        assert_eq!(
            keys.rows(&table, &old, 1, 5, u64::MAX, usize::MAX)
                .expect("rows"),
            Found::Unindexed
        );
        assert_eq!(
            TableKeys::new(1000)
                .rows(&table, &new, 1, 5, u64::MAX, usize::MAX)
                .expect("rows"),
            Found::Unindexed
        );
        // Rewrite the partition again and again: dead rows pile up, then a rebuild drops them.
        for second in 0..4 {
            engine
                .run(&format!(
                    "INSERT INTO k VALUES ('2024-01-01T00:00:0{second}.5Z', {})",
                    2000 + second
                ))
                .await
                .expect("insert");
            let snapshot = table.snapshot();
            assert_eq!(
                keys.rows(&table, &snapshot, 1, 2000 + second, u64::MAX, usize::MAX)
                    .expect("rows"),
                Found::Rows(model(&snapshot, 1, 2000 + second))
            );
        }
        let entries = keys.entries.lock().expect("lock");
        let index = entries["k"][&1].index.read().expect("lock");
        assert!(
            index.dead_rows <= index.live_rows,
            "{} dead rows, {} live",
            index.dead_rows,
            index.live_rows
        );
    }
}

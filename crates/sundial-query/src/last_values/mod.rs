//! Last-value caches: per table and key, the newest row (or, with `IGNORE NULLS`, each
//! column's newest non-NULL value) held in memory, so that `LATEST ON` and `SELECT DISTINCT
//! key` read no rows of the table.
//!
//! ```text
//!  CREATE LAST VALUE CACHE c ON t (k, ..)   the definition, in t's transaction (storage)
//!        │
//!  Slot (per table and cache) ── Cached { seq, key codes ─▶ row, rows: one per key }
//!        │ catch up to a snapshot of t:
//!        │   changes since seq only added rows in [lo, hi] ─▶ read those rows, newest wins
//!        │   anything else (TRUNCATE, TTL, schema, no log) ─▶ rebuild, newest partition first
//!        ▼
//!  LatestExec (exec::latest), DistinctKeys (crate::distinct_keys), last_cache() (functions.rs)
//! ```
//!
//! The background task that refreshes materialized views also catches every cache up to its
//! table's newest commit ([`LastValues::upkeep`], every 50 ms), so a query usually finds its
//! cache current; a query that finds it behind catches it up first, reading only the rows
//! the commits since wrote, so its answer is always that of a commit at least as new as the
//! snapshot it asked about. A cache never goes back: a query whose snapshot is older than the
//! cache gets the cache's newer rows, as a scan started a moment later would.
//!
//! Rows are merged by timestamp: a row takes its key's place when its timestamp is at least
//! the cached one's, and rows are read oldest first within a rebuild pass or a catch-up, so
//! among rows with equal timestamps the one stored last wins, as `LATEST ON` picks it. A
//! rebuild reads partitions newest first, each oldest row first; an older partition only
//! fills keys (or, with `IGNORE NULLS`, columns) still empty, and the rebuild stops early once
//! every key the dictionaries allow has its row.
//!
//! Memory is bounded twice: a cache holds at most [`KEYS_PER_CACHE_MAX`] keys, and all caches
//! together at most the engine's budget. A cache past either is dropped and marked failed (the
//! listing says why); queries then read the table as without it.

pub(crate) mod functions;
mod merge;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use datafusion::arrow::array::RecordBatch;
use sundial_storage::{Database, LastValueCacheDef, Snapshot, Table, TableMeta};

use crate::error::{QueryError, Result};
use merge::{Cached, Fault};

/// The most keys one cache holds.
pub(crate) const KEYS_PER_CACHE_MAX: usize = 1_000_000;
/// How often the background task catches the caches up with their tables' commits.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_millis(50);
/// Rows read from the table at a time while a cache is built or caught up.
const READ_ROWS: u64 = 64 * 1024;

/// Every last-value cache of an engine's database.
#[derive(Debug)]
pub(crate) struct LastValues {
    slots: Mutex<HashMap<(u64, String), Arc<Slot>>>,
    /// Memory all caches may hold together.
    bytes_max: usize,
    /// Memory they hold.
    bytes: AtomicUsize,
}

/// One cache of one table.
#[derive(Debug)]
pub(crate) struct Slot {
    def: LastValueCacheDef,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
enum State {
    /// Not built yet, or dropped to be rebuilt.
    #[default]
    Empty,
    Ready(Box<Cached>),
    /// Over a bound: queries read the table instead until the cache is created again.
    Failed(String),
}

/// What the listing shows of a cache.
pub(crate) struct SlotInfo {
    pub table: String,
    pub name: String,
    pub key_columns: Vec<String>,
    pub ignore_nulls: bool,
    pub keys: usize,
    pub bytes: usize,
    pub seq: Option<u64>,
    pub failed: Option<String>,
}

impl LastValues {
    pub(crate) fn new(bytes_max: usize) -> LastValues {
        LastValues {
            slots: Mutex::default(),
            bytes_max,
            bytes: AtomicUsize::new(0),
        }
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<(u64, String), Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The slot of `def`, a cache of `table` (a new one if the cache was dropped and created
    /// again with another definition).
    fn slot(&self, table: &Table, def: &LastValueCacheDef) -> Arc<Slot> {
        let id = (table.id(), def.name.to_ascii_lowercase());
        let mut slots = self.slots();
        if let Some(slot) = slots.get(&id)
            && slot.def == *def
        {
            return slot.clone();
        }
        let slot = Arc::new(Slot {
            def: def.clone(),
            state: Mutex::default(),
        });
        if let Some(old) = slots.insert(id, slot.clone()) {
            self.release(&mut old.lock());
        }
        slot
    }

    /// A cache of `table` whose keys are exactly the columns with ids `keys` (in any order)
    /// and that keeps whole rows: it answers `LATEST ON` those keys.
    pub(crate) fn for_latest(&self, table: &Table, keys: &[u32]) -> Option<Arc<Slot>> {
        let meta = table.meta();
        let def = meta.last_value_caches.iter().find(|c| {
            !c.ignore_nulls && c.keys.len() == keys.len() && keys.iter().all(|k| c.keys.contains(k))
        })?;
        Some(self.slot(table, def))
    }

    /// A cache of `table` keyed by (at least) the columns with ids `columns`: its keys are
    /// every distinct combination of them the table holds.
    pub(crate) fn for_distinct(&self, table: &Table, columns: &[u32]) -> Option<Arc<Slot>> {
        let meta = table.meta();
        let def = meta
            .last_value_caches
            .iter()
            .filter(|c| columns.iter().all(|k| c.keys.contains(k)))
            .min_by_key(|c| c.keys.len())?;
        Some(self.slot(table, def))
    }

    /// The cache named `name` of `table` (its only one if `name` is `None`).
    pub(crate) fn named(&self, table: &Table, name: Option<&str>) -> Result<Arc<Slot>> {
        let meta = table.meta();
        let caches = &meta.last_value_caches;
        let def = match name {
            Some(name) => caches.iter().find(|c| c.name.eq_ignore_ascii_case(name)),
            None if caches.len() == 1 => caches.first(),
            None => {
                return Err(QueryError::Invalid(format!(
                    "'{}' has {} last value caches: name one, as last_cache('{}', 'name')",
                    meta.name,
                    caches.len(),
                    meta.name
                )));
            }
        };
        let def = def.ok_or_else(|| {
            QueryError::Invalid(format!(
                "'{}' has no last value cache{}",
                meta.name,
                name.map_or(String::new(), |n| format!(" named '{n}'"))
            ))
        })?;
        Ok(self.slot(table, def))
    }

    /// The cache's rows (the table's columns as of `snapshot` or newer, one row per key),
    /// caught up to `snapshot` first; `None` if the cache failed (the caller reads the table).
    pub(crate) fn rows(
        &self,
        slot: &Slot,
        table: &Table,
        snapshot: &Snapshot,
    ) -> Result<Option<(Arc<TableMeta>, RecordBatch)>> {
        let mut state = slot.lock();
        self.catch_up(slot, &mut state, table, snapshot)?;
        let answer = match &mut *state {
            State::Ready(cached) => {
                let rows = cached.rows()?;
                Some((cached.meta().clone(), rows))
            }
            _ => None,
        };
        sundial_metrics::metrics().last_value_lookup(answer.is_some());
        Ok(answer)
    }

    /// Brings `state` to `snapshot` (or leaves it newer).
    fn catch_up(
        &self,
        slot: &Slot,
        state: &mut State,
        table: &Table,
        snapshot: &Snapshot,
    ) -> Result<()> {
        // Some(rows written since, if any) when the cache can follow the commits in place.
        let follow = match &*state {
            State::Failed(_) => return Ok(()),
            State::Ready(cached) if cached.seq() >= snapshot.seq() => return Ok(()),
            State::Ready(cached)
                if cached.same_columns(snapshot.meta())
                    && follows_in_place(snapshot, &slot.def) =>
            {
                match table.changes_since(cached.seq()) {
                    Some(c) if c.removed.is_none() && c.schema.is_none() && !c.expired => {
                        Some(c.rows)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let built = match (follow, std::mem::take(state)) {
            (Some(rows), State::Ready(mut cached)) => {
                self.bytes.fetch_sub(cached.counted, Ordering::Relaxed);
                let result = match rows {
                    Some((lo, hi)) => cached.read_range(snapshot, lo, hi),
                    None => Ok(()),
                };
                result.map(|()| {
                    cached.set_seq(snapshot.seq());
                    *cached
                })
            }
            _ => Cached::build(&slot.def, snapshot),
        };
        match built {
            Ok(cached) => {
                *state = self.admit(cached);
                Ok(())
            }
            Err(Fault::OverBound(why)) => {
                tracing::warn!(
                    "last value cache '{}' of '{}': {why}; queries read the table instead",
                    slot.def.name,
                    table.name()
                );
                *state = State::Failed(why);
                Ok(())
            }
            // Left empty: the next query or upkeep builds it again.
            Err(Fault::Read(e)) => Err(e),
        }
    }

    /// `cached` if it fits the budget (counted), else the failure saying why.
    fn admit(&self, mut cached: Cached) -> State {
        let bytes = cached.bytes();
        cached.counted = bytes;
        let total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if total > self.bytes_max {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            return State::Failed(format!(
                "{bytes} bytes would put the last value caches over their budget of {} bytes",
                self.bytes_max
            ));
        }
        State::Ready(Box::new(cached))
    }

    /// Uncounts what `state` held, leaving it empty.
    fn release(&self, state: &mut State) {
        if let State::Ready(cached) = std::mem::take(state) {
            self.bytes.fetch_sub(cached.counted, Ordering::Relaxed);
        }
    }

    /// Catches every cache up to its table's newest commit and forgets caches that are no
    /// longer defined; sets the caches' gauges.
    pub(crate) fn upkeep(&self, db: &Database) {
        let mut live = Vec::new();
        for table in db.tables() {
            let meta = table.meta();
            for def in &meta.last_value_caches {
                let slot = self.slot(&table, def);
                let snapshot = table.snapshot();
                let mut state = slot.lock();
                if let Err(e) = self.catch_up(&slot, &mut state, &table, &snapshot) {
                    tracing::warn!("last value cache '{}': {e}", def.name);
                }
                live.push((table.id(), def.name.to_ascii_lowercase()));
            }
        }
        let mut slots = self.slots();
        slots.retain(|id, slot| {
            let keep = live.contains(id);
            if !keep {
                self.release(&mut slot.lock());
            }
            keep
        });
        let keys: usize = slots
            .values()
            .map(|s| match &*s.lock() {
                State::Ready(c) => c.keys(),
                _ => 0,
            })
            .sum();
        let metrics = sundial_metrics::metrics();
        metrics.last_value_keys.set(keys as i64);
        metrics
            .last_value_bytes
            .set(self.bytes.load(Ordering::Relaxed) as i64);
    }

    /// Every cache of `db`'s tables, as `last_value_caches()` lists them.
    pub(crate) fn listing(&self, db: &Database) -> Vec<SlotInfo> {
        let mut out = Vec::new();
        for table in db.tables() {
            let meta = table.meta();
            for def in &meta.last_value_caches {
                let slot = self.slot(&table, def);
                let key_columns = def
                    .keys
                    .iter()
                    .map(|id| {
                        meta.columns
                            .iter()
                            .find(|c| c.id == *id)
                            .map_or_else(|| format!("#{id}"), |c| c.name.clone())
                    })
                    .collect();
                let mut info = SlotInfo {
                    table: meta.name.clone(),
                    name: def.name.clone(),
                    key_columns,
                    ignore_nulls: def.ignore_nulls,
                    keys: 0,
                    bytes: 0,
                    seq: None,
                    failed: None,
                };
                match &*slot.lock() {
                    State::Ready(c) => {
                        info.keys = c.keys();
                        info.bytes = c.bytes();
                        info.seq = Some(c.seq());
                    }
                    State::Failed(why) => info.failed = Some(why.clone()),
                    State::Empty => {}
                }
                out.push(info);
            }
        }
        out.sort_by(|a, b| (&a.table, &a.name).cmp(&(&b.table, &b.name)));
        out
    }
}

/// Whether the rows commits add can be merged into the cache, rather than rebuilding it:
/// commits then only add rows, or replace a row by one with the same timestamp and key
/// (every cache key among the table's DEDUP UPSERT KEYS, so an upsert keeps the key). A
/// materialized view's refresh replaces whole ranges, which may drop keys, so a cache of one
/// is rebuilt.
fn follows_in_place(snapshot: &Snapshot, def: &LastValueCacheDef) -> bool {
    let meta = snapshot.meta();
    if meta.kind != sundial_storage::TableKind::Table {
        return false;
    }
    let dedup: Vec<u32> = meta
        .columns
        .iter()
        .filter(|c| c.dedup_key)
        .map(|c| c.id)
        .collect();
    dedup.is_empty() || def.keys.iter().all(|id| dedup.contains(id))
}

/// Keeps every cache caught up ([`LastValues::upkeep`]) every [`UPKEEP_EVERY`] until `stop`
/// turns true or `caches` answers `None` (the engine is gone).
pub(crate) async fn keep_up(
    caches: impl Fn() -> Option<(Arc<Database>, Arc<LastValues>)>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(UPKEEP_EVERY) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            return;
        }
        let Some((db, caches)) = caches() else {
            return;
        };
        // Reads table files: off the async threads.
        if tokio::task::spawn_blocking(move || caches.upkeep(&db))
            .await
            .is_err()
        {
            tracing::error!("last value caches' upkeep panicked");
        }
    }
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic mid-update may have left the rows half merged: start over.
        self.state.lock().unwrap_or_else(|p| {
            let mut state = p.into_inner();
            *state = State::Empty;
            state
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.def.name
    }
}

#[cfg(test)]
mod tests {
    use sundial_storage::{Durability, StorageOptions};

    use super::*;
    use crate::Engine;

    /// A table `t` with rows of three hosts over two days, and a cache `c` by host.
    async fn table() -> (tempfile::TempDir, Arc<Database>) {
        let dir = tempfile::tempdir().unwrap();
        let options = StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        };
        let db = Database::open(dir.path(), options).unwrap();
        let engine = Engine::new(db.clone()).unwrap();
        for sql in [
            "CREATE TABLE t (ts TIMESTAMP, host SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY",
            "INSERT INTO t VALUES ('2024-01-01T00:00:00Z', 'a', 1), ('2024-01-01T01:00:00Z', 'b', 2), \
             ('2024-01-02T00:00:00Z', 'a', 3), ('2024-01-02T00:00:01Z', NULL, 4)",
            "CREATE LAST VALUE CACHE c ON t (host)",
        ] {
            engine.run(sql).await.unwrap();
        }
        (dir, db)
    }

    #[tokio::test]
    async fn a_cache_past_the_budget_is_given_up() {
        let (_dir, db) = table().await;
        let t = db.table("t").unwrap();
        let id = t.meta().columns[1].id;
        let caches = LastValues::new(64);
        let slot = caches.for_latest(&t, &[id]).unwrap();
        assert!(caches.rows(&slot, &t, &t.snapshot()).unwrap().is_none());
        assert_eq!(caches.bytes.load(Ordering::Relaxed), 0);
        let listed = caches.listing(&db);
        assert!(
            listed[0]
                .failed
                .as_deref()
                .is_some_and(|f| f.contains("over their budget of 64 bytes")),
            "{:?}",
            listed[0].failed
        );
        // Within the budget, the same cache holds a row per key, NULL included, and counts it.
        let caches = LastValues::new(1 << 30);
        let slot = caches.for_latest(&t, &[id]).unwrap();
        let (_, rows) = caches.rows(&slot, &t, &t.snapshot()).unwrap().unwrap();
        assert_eq!(rows.num_rows(), 3);
        let held = caches.bytes.load(Ordering::Relaxed);
        assert!(held > 0);
        // A cache no longer defined is forgotten, its memory uncounted.
        t.writer().unwrap().drop_last_value_cache("c").unwrap();
        caches.upkeep(&db);
        assert_eq!(caches.bytes.load(Ordering::Relaxed), 0);
        assert!(caches.listing(&db).is_empty());
    }
}

//! Partitions' columns mapped for single-row reads, kept for the snapshot they belong to.
//!
//! Mapping a partition's projected columns (`Snapshot::part_rows`) looks up each column's files
//! in the storage's shared file cache: with a formatted file name, under its lock, for every
//! column of every lookup. Point lookups on one table hit the same few partitions of the same
//! snapshot thousands of times a second, so [`MappedParts`] keeps the mapped columns of the
//! partitions used last, per table, for the newest snapshot a lookup read.
//!
//! Invariants: an entry is used only for the very snapshot it was mapped from (the same `Arc`,
//! compared through a `Weak` that keeps the allocation, so the address is never reused while
//! kept); a lookup on a newer snapshot replaces the table's entries. What is kept is bounded:
//! [`PARTS_KEPT`] partitions per table, [`TABLES_KEPT`] tables. A lookup never waits for the
//! cache: when another thread holds it, it maps the columns itself. Kept mappings hold their
//! files' pages (and a deleted part's disk space) until the table's next lookup after a commit
//! replaces them, as a reader holding that snapshot would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use sundial_storage::{PartRows, Snapshot};

use crate::error::Result;

/// Partitions kept per table.
const PARTS_KEPT: usize = 64;

/// Tables kept; past this, every table's entries are dropped.
const TABLES_KEPT: usize = 256;

/// Mapped partitions, per table, of the newest snapshot a lookup read.
#[derive(Default)]
pub(crate) struct MappedParts {
    tables: Mutex<HashMap<String, Kept>>,
}

impl std::fmt::Debug for MappedParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedParts").finish_non_exhaustive()
    }
}

struct Kept {
    snapshot: Weak<Snapshot>,
    /// (partition, projection, its mapped columns), oldest first.
    parts: Vec<(usize, Vec<usize>, Arc<PartRows>)>,
}

impl MappedParts {
    /// Columns `projection` of `partition` of `snapshot`, mapped (see `Snapshot::part_rows`);
    /// `None` for a Parquet part.
    pub(crate) fn get(
        &self,
        snapshot: &Arc<Snapshot>,
        partition: usize,
        projection: &[usize],
    ) -> Result<Option<Arc<PartRows>>> {
        let table = &snapshot.meta().name;
        if let Ok(tables) = self.tables.try_lock()
            && let Some(kept) = tables.get(table)
            && Weak::ptr_eq(&kept.snapshot, &Arc::downgrade(snapshot))
            && let Some((.., mapped)) = kept
                .parts
                .iter()
                .find(|(p, columns, _)| *p == partition && columns == projection)
        {
            return Ok(Some(mapped.clone()));
        }
        let Some(mapped) = snapshot.part_rows(partition, projection)? else {
            return Ok(None);
        };
        let mapped = Arc::new(mapped);
        if let Ok(mut tables) = self.tables.try_lock() {
            if tables.len() >= TABLES_KEPT && !tables.contains_key(table) {
                tables.clear();
            }
            let kept = tables.entry(table.clone()).or_insert_with(|| Kept {
                snapshot: Weak::new(),
                parts: Vec::new(),
            });
            if !Weak::ptr_eq(&kept.snapshot, &Arc::downgrade(snapshot)) {
                kept.snapshot = Arc::downgrade(snapshot);
                kept.parts.clear();
            }
            if kept.parts.len() >= PARTS_KEPT {
                kept.parts.remove(0);
            }
            kept.parts
                .push((partition, projection.to_vec(), mapped.clone()));
            debug_assert!(kept.parts.len() <= PARTS_KEPT && tables.len() <= TABLES_KEPT);
        }
        Ok(Some(mapped))
    }

    /// Partitions kept for `table`, for tests.
    #[cfg(test)]
    pub(crate) fn kept(&self, table: &str) -> usize {
        self.tables
            .lock()
            .map_or(0, |t| t.get(table).map_or(0, |k| k.parts.len()))
    }
}

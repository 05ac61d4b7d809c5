//! One cache's rows and how table rows merge into them.
//!
//! ```text
//!  index: key codes ──▶ slot          cells[slot · width + c] ──▶ (segment, row) of the value
//!  segments: [ materialized: one row per slot | picked rows of batch 1 | picked rows of 2 ... ]
//! ```
//!
//! A batch of table rows (oldest first) is merged in one pass: each row's key (its SYMBOL
//! codes, NULL as -1) finds its slot, and the row takes the slot when its timestamp is at
//! least the slot's (with `IGNORE NULLS`, each non-NULL value takes its column's cell the same
//! way). Only the rows picked are kept, as a new segment; the cells point into it. Reading
//! the rows first gathers every cell into one materialized segment (Arrow's `interleave`), as
//! does a merge once the segments hold more rows than twice the slots, so the memory held
//! stays within a small multiple of one row per key, and merging a batch costs its own rows
//! only, whatever the number of keys.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, RecordBatch, UInt32Array, new_null_array,
};
use datafusion::arrow::compute::{interleave, take_record_batch};
use datafusion::arrow::datatypes::{Int32Type, TimestampNanosecondType};
use sundial_storage::{LAST_VALUE_CACHE_KEYS_MAX, LastValueCacheDef, Snapshot, TableMeta};

use super::{KEYS_PER_CACHE_MAX, READ_ROWS};
use crate::error::QueryError;

/// A key: the codes of its SYMBOL columns (NULL is -1; unused places [`UNUSED`]).
type Key = [i32; LAST_VALUE_CACHE_KEYS_MAX];
const UNUSED: i32 = i32::MIN;
const NULL_CODE: i32 = -1;
/// A cell with no value yet (with `IGNORE NULLS`: only NULLs seen so far).
const NO_CELL: (u32, u32) = (u32::MAX, u32::MAX);
/// The stamp of an empty cell: older than any designated timestamp.
const NO_STAMP: i64 = i64::MIN;
/// Rows of a batch picked (ascending), and per cell taken the place of its row among them.
type Picks = (Vec<u32>, Vec<(usize, u32)>);
/// Merges past this many segments gather them into one.
const SEGMENTS_MAX: usize = 64;

/// Why a cache could not be built or caught up.
#[derive(Debug)]
pub(crate) enum Fault {
    /// Over a bound on its memory: the cache is given up.
    OverBound(String),
    /// Reading the table failed.
    Read(QueryError),
}

impl From<sundial_storage::StorageError> for Fault {
    fn from(e: sundial_storage::StorageError) -> Fault {
        Fault::Read(e.into())
    }
}

impl From<datafusion::arrow::error::ArrowError> for Fault {
    fn from(e: datafusion::arrow::error::ArrowError) -> Fault {
        Fault::Read(datafusion::error::DataFusionError::from(e).into())
    }
}

impl From<Fault> for QueryError {
    fn from(f: Fault) -> QueryError {
        match f {
            Fault::OverBound(why) => QueryError::Invalid(why),
            Fault::Read(e) => e,
        }
    }
}

/// A cache's rows, as of commit `seq` of its table.
#[derive(Debug)]
pub(crate) struct Cached {
    seq: u64,
    /// The table's columns the rows have.
    meta: Arc<TableMeta>,
    /// Positions of the key columns in `meta`.
    keys: Vec<usize>,
    /// Position of the designated timestamp.
    ts: usize,
    ignore_nulls: bool,
    index: HashMap<Key, u32>,
    /// Keys in `index` with no NULL among their codes.
    keys_without_null: usize,
    /// Per slot, 1 (whole rows) or a cell per column (`IGNORE NULLS`).
    width: usize,
    cells: Vec<(u32, u32)>,
    /// The timestamp of each cell's value.
    stamps: Vec<i64>,
    segments: Vec<RecordBatch>,
    /// A one-row batch of NULLs, the source of cells with no value.
    nulls: RecordBatch,
    bytes: usize,
    /// Whether `segments` is one segment of a row per slot that every cell points into.
    gathered: bool,
    /// The bytes the registry counts for it (`LastValues::admit`).
    pub(super) counted: usize,
}

impl Cached {
    /// Builds the cache `def` from `snapshot`: partitions newest first, until every key the
    /// dictionaries allow has its row.
    pub(crate) fn build(def: &LastValueCacheDef, snapshot: &Snapshot) -> Result<Cached, Fault> {
        let meta = snapshot.meta().clone();
        let keys = def
            .keys
            .iter()
            .map(|id| meta.columns.iter().position(|c| c.id == *id))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Fault::Read(QueryError::Invalid("a key column is gone".into())))?;
        let ts = meta.timestamp_index.ok_or_else(|| {
            Fault::Read(QueryError::Invalid(format!(
                "'{}' has no designated timestamp",
                meta.name
            )))
        })?;
        let schema = meta.arrow_schema();
        let width = if def.ignore_nulls {
            meta.columns.len()
        } else {
            1
        };
        let nulls = RecordBatch::try_new(
            schema.clone(),
            schema
                .fields()
                .iter()
                .map(|f| new_null_array(f.data_type(), 1))
                .collect(),
        )?;
        let mut cached = Cached {
            seq: snapshot.seq(),
            meta,
            keys,
            ts,
            ignore_nulls: def.ignore_nulls,
            index: HashMap::new(),
            keys_without_null: 0,
            width,
            cells: Vec::new(),
            stamps: Vec::new(),
            segments: Vec::new(),
            nulls,
            bytes: 0,
            gathered: false,
            counted: 0,
        };
        let parts = snapshot.partitions();
        let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            match groups.last_mut() {
                Some(g) if parts[g.start].key == part.key => g.end = i + 1,
                _ => groups.push(i..i + 1),
            }
        }
        for (done, group) in groups.iter().enumerate().rev() {
            for p in group.clone() {
                cached.read_part(snapshot, p, 0..parts[p].row_count)?;
            }
            if cached.complete(snapshot, &groups[..done])? {
                break;
            }
        }
        cached.gather()?;
        Ok(cached)
    }

    /// Whether no older rows can change the cache: every key the dictionaries allow has its
    /// row (NULL keys too, unless the older partitions `older` hold no NULL key), and with
    /// `IGNORE NULLS` every cell its value.
    fn complete(
        &self,
        snapshot: &Snapshot,
        older: &[std::ops::Range<usize>],
    ) -> Result<bool, Fault> {
        if self.ignore_nulls && self.cells.contains(&NO_CELL) {
            return Ok(false);
        }
        let symbols = |k: usize| snapshot.symbols(k).map_or(0, |s| s.len());
        let without_null = self
            .keys
            .iter()
            .map(|&k| symbols(k))
            .fold(1usize, usize::saturating_mul);
        if self.keys_without_null < without_null {
            return Ok(false);
        }
        let with_null = self
            .keys
            .iter()
            .map(|&k| symbols(k) + 1)
            .fold(1usize, usize::saturating_mul);
        if self.index.len() >= with_null {
            return Ok(true);
        }
        for p in older.iter().flat_map(|g| g.clone()) {
            let rows = snapshot.partitions()[p].row_count;
            for &k in &self.keys {
                if snapshot.null_count(p, k, 0..rows)? > 0 {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Merges the rows of `snapshot` with timestamps in `[lo, hi]` (what commits since `seq`
    /// wrote, among older rows), oldest first.
    pub(crate) fn read_range(
        &mut self,
        snapshot: &Snapshot,
        lo: i64,
        hi: i64,
    ) -> Result<(), Fault> {
        for (p, part) in snapshot.partitions().iter().enumerate() {
            if part.max_ts < lo || part.min_ts > hi {
                continue;
            }
            let rows = snapshot.rows_in_range(p, Some(lo), hi.checked_add(1))?;
            self.read_part(snapshot, p, rows)?;
        }
        Ok(())
    }

    /// Merges rows `rows` of partition `p`, [`READ_ROWS`] at a time. Whole rows are picked by
    /// their keys and timestamps alone, and only the rows picked are read whole; per-column
    /// values (`IGNORE NULLS`) need every column's NULLs, so every column is read.
    fn read_part(
        &mut self,
        snapshot: &Snapshot,
        p: usize,
        rows: std::ops::Range<u64>,
    ) -> Result<(), Fault> {
        let all: Vec<usize> = (0..self.meta.columns.len()).collect();
        let read: Vec<usize> = if self.ignore_nulls {
            all.clone()
        } else {
            let mut read = self.keys.clone();
            read.push(self.ts);
            read.sort_unstable();
            read.dedup();
            read
        };
        let mut start = rows.start;
        while start < rows.end {
            let end = rows.end.min(start + READ_ROWS);
            let batch = snapshot.read_batch(p, &read, start..end)?;
            let (picked, picks) = self.pick(&batch, &read)?;
            if !picked.is_empty() {
                let segment = if self.ignore_nulls {
                    take_record_batch(&batch, &UInt32Array::from(picked))?
                } else {
                    let rows = picked
                        .iter()
                        .map(|&i| u32::try_from(start + u64::from(i)))
                        .collect::<Result<Vec<u32>, _>>()
                        .map_err(|_| {
                            Fault::Read(QueryError::Invalid(
                                "a partition of more than 2^32 rows".into(),
                            ))
                        })?;
                    snapshot.read_batch_picked(p, &all, &rows)?
                };
                self.add_segment(segment, picks)?;
            }
            start = end;
        }
        Ok(())
    }

    /// The column of `batch` (whose columns are the table's `read`) that is table column `c`.
    fn column<'a>(
        &self,
        batch: &'a RecordBatch,
        read: &[usize],
        c: usize,
    ) -> Result<&'a ArrayRef, Fault> {
        read.iter()
            .position(|&r| r == c)
            .map(|at| batch.column(at))
            .ok_or_else(|| Fault::Read(QueryError::Invalid(format!("column {c} was not read"))))
    }

    /// Picks, from `batch` (oldest row first; its columns are the table's `read`), the rows
    /// whose values take a cell: the rows (ascending), and per cell taken the place of its row
    /// among them.
    fn pick(&mut self, batch: &RecordBatch, read: &[usize]) -> Result<Picks, Fault> {
        let codes = self
            .keys
            .iter()
            .map(|&k| {
                self.column(batch, read, k)?
                    .as_dictionary_opt::<Int32Type>()
                    .ok_or_else(|| {
                        Fault::Read(QueryError::Invalid(format!(
                            "column '{}' is not read as SYMBOL codes",
                            self.meta.columns[k].name
                        )))
                    })
            })
            .collect::<Result<Vec<_>, Fault>>()?;
        let ts = self
            .column(batch, read, self.ts)?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or_else(|| {
                Fault::Read(QueryError::Invalid("timestamps are not timestamps".into()))
            })?
            .values();
        let mut picked: Vec<u32> = Vec::new();
        let mut picks: Vec<(usize, u32)> = Vec::new();
        // With IGNORE NULLS every column was read, in order.
        let columns: Vec<&ArrayRef> = batch.columns().iter().collect();
        for (i, &t) in ts.iter().enumerate() {
            let mut key: Key = [UNUSED; LAST_VALUE_CACHE_KEYS_MAX];
            for (place, c) in key.iter_mut().zip(&codes) {
                *place = if c.is_null(i) {
                    NULL_CODE
                } else {
                    c.keys().value(i)
                };
            }
            let next = self.index.len() as u32;
            let slot = *self.index.entry(key).or_insert(next) as usize;
            if slot == next as usize {
                if self.index.len() > KEYS_PER_CACHE_MAX {
                    return Err(Fault::OverBound(format!(
                        "more than {KEYS_PER_CACHE_MAX} keys, the most a cache holds"
                    )));
                }
                if !key.contains(&NULL_CODE) {
                    self.keys_without_null += 1;
                }
                self.cells.extend(std::iter::repeat_n(NO_CELL, self.width));
                self.stamps
                    .extend(std::iter::repeat_n(NO_STAMP, self.width));
            }
            let base = slot * self.width;
            let mut took = false;
            for (c, column) in columns.iter().take(self.width).enumerate() {
                let cell = base + c;
                if t >= self.stamps[cell] && (!self.ignore_nulls || column.is_valid(i)) {
                    self.stamps[cell] = t;
                    picks.push((cell, picked.len() as u32));
                    took = true;
                }
            }
            if took {
                picked.push(i as u32);
            }
        }
        Ok((picked, picks))
    }

    /// Adds `segment` (the table's columns), whose rows `picks` point cells at.
    fn add_segment(&mut self, segment: RecordBatch, picks: Vec<(usize, u32)>) -> Result<(), Fault> {
        let at = self.segments.len() as u32;
        self.segments.push(segment);
        self.gathered = false;
        for (cell, row) in picks {
            self.cells[cell] = (at, row);
        }
        let held: usize = self.segments.iter().map(RecordBatch::num_rows).sum();
        if self.segments.len() > SEGMENTS_MAX || held > 2 * self.index.len() + 1024 {
            self.gather()?;
        } else {
            self.count_bytes();
        }
        Ok(())
    }

    /// Gathers every cell's value into one segment of a row per slot.
    fn gather(&mut self) -> Result<(), Fault> {
        let slots = self.index.len();
        if !self.gathered {
            let nulls_at = self.segments.len();
            let mut columns = Vec::with_capacity(self.meta.columns.len());
            for c in 0..self.meta.columns.len() {
                let mut sources: Vec<&dyn Array> =
                    self.segments.iter().map(|s| s.column(c).as_ref()).collect();
                sources.push(self.nulls.column(c).as_ref());
                let indices: Vec<(usize, usize)> = (0..slots)
                    .map(|s| {
                        let cell = if self.ignore_nulls {
                            self.cells[s * self.width + c]
                        } else {
                            self.cells[s]
                        };
                        if cell == NO_CELL {
                            (nulls_at, 0)
                        } else {
                            (cell.0 as usize, cell.1 as usize)
                        }
                    })
                    .collect();
                columns.push(interleave(&sources, &indices)?);
            }
            let rows = RecordBatch::try_new(self.nulls.schema(), columns)?;
            self.segments = vec![rows];
            for s in 0..slots {
                for c in 0..self.width {
                    let cell = &mut self.cells[s * self.width + c];
                    if *cell != NO_CELL {
                        *cell = (0, s as u32);
                    }
                }
            }
        }
        if self.segments.is_empty() {
            self.segments.push(self.nulls.slice(0, 0));
        }
        self.gathered = true;
        self.count_bytes();
        Ok(())
    }

    fn count_bytes(&mut self) {
        let rows: usize = self
            .segments
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum();
        // A map entry: the key, the slot and about as much again of the map's own.
        let index = self.index.capacity() * 2 * (size_of::<Key>() + 4);
        let cells = self.cells.capacity() * (size_of::<(u32, u32)>() + size_of::<i64>());
        self.bytes = rows + index + cells;
    }

    /// The rows, one per key, in the table's columns as of [`Cached::meta`].
    pub(crate) fn rows(&mut self) -> Result<RecordBatch, Fault> {
        self.gather()?;
        Ok(self.segments[0].clone())
    }

    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    pub(crate) fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }

    pub(crate) fn meta(&self) -> &Arc<TableMeta> {
        &self.meta
    }

    pub(crate) fn keys(&self) -> usize {
        self.index.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether `meta` has the columns the rows have (ids and types, in order).
    pub(crate) fn same_columns(&self, meta: &TableMeta) -> bool {
        meta.columns.len() == self.meta.columns.len()
            && meta
                .columns
                .iter()
                .zip(&self.meta.columns)
                .all(|(a, b)| a.id == b.id && a.column_type == b.column_type)
    }
}

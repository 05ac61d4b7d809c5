//! What must hold of a transaction before it is published. Checked in debug builds only (every
//! test runs them; release builds compile the check away), just before the slot is written.
//!
//! ```text
//!  commit / schema change ─▶ next TxnState ─▶ encode ─▶ check_publishable ─▶ _txn.{seq % 2}
//!                                                       (debug builds)
//! ```
//!
//! * **Partitions** ascend strictly by key and each holds rows. With a designated timestamp,
//!   `min_ts <= max_ts` and both lie in the partition's own range `[key, next(key))` (one
//!   partition keyed 0 for NONE), so no two partitions overlap in time. Without one, the table
//!   has one partition, keyed 0, with `min_ts = max_ts = 0`. Column tops name distinct columns
//!   of the table and are at most the partition's rows.
//! * **Files** of every partition the transaction wrote, for each column with `rows` rows past
//!   its top: fixed width `<col>.d` holds `rows x width` bytes, BOOLEAN `<col>.d` and `<col>.v`
//!   (when present) `ceil(rows / 8)`, variable length `<col>.o` `(rows + 1) x 8` and `<col>.d`
//!   the end offset of row `rows - 1`. A file may be longer (bytes of rolled-back appends past
//!   the committed rows) except in a partition directory this transaction created, where each
//!   file is exactly that long. Each dictionary holds its committed symbols the same way
//!   (`_sym/<col>.o` and `.d`, possibly longer).
//!   A Parquet part's `data.parquet` holds exactly the bytes the transaction records.
//! * **Symbol counts** name distinct SYMBOL columns of the table.
//! * **The slot** decodes to the state it was encoded from.

use std::path::{Path, PathBuf};

use crate::files::{
    PARQUET_FILE, data_file, offsets_file, partition_dir_name, read_offset, validity_file,
};
use crate::merge::PARTS_PER_PARTITION_MAX;
use crate::partition::PartitionBy;
use crate::symbols::SYMBOL_DIR;
use crate::txn::{ColumnMeta, PartFormat, PartitionMeta, TableMeta, TxnState};
use crate::types::{ColumnType, Layout};

/// A partition the transaction being published wrote, and whether its directory is new.
pub(crate) struct Written {
    pub key: i64,
    pub version: u64,
    pub fresh: bool,
}

/// Panics (debug builds only) unless `state`, encoded as `slot`, may be published in the table
/// directory `dir` after writing the partitions `written`.
pub(crate) fn debug_check_publishable(
    dir: &Path,
    state: &TxnState,
    slot: &[u8],
    written: &[Written],
) {
    if !cfg!(debug_assertions) {
        return;
    }
    let checked = check_state(state)
        .and_then(|()| check_round_trip(state, slot))
        .and_then(|()| check_files(dir, state, written));
    if let Err(why) = checked {
        panic!(
            "{}: transaction {} must not be published: {why}",
            dir.display(),
            state.seq
        );
    }
}

/// The invariants of the transaction itself: partitions, tops, symbol counts.
pub(crate) fn check_state(state: &TxnState) -> Result<(), String> {
    let meta = &state.meta;
    let mut previous: Option<&PartitionMeta> = None;
    let mut parts_of_key = 0;
    for part in &state.partitions {
        parts_of_key = match previous {
            Some(p) if p.key == part.key => parts_of_key + 1,
            _ => 1,
        };
        // Parts of one partition (see `merge.rs`) follow each other in time.
        let in_order = previous
            .is_none_or(|p| p.key < part.key || (p.key == part.key && p.max_ts <= part.min_ts));
        if !in_order || previous.is_some_and(|p| p.version == part.version && p.key == part.key) {
            return Err(format!(
                "partitions do not ascend: {} (version {}) after {previous:?}",
                part.key, part.version
            ));
        }
        if parts_of_key > PARTS_PER_PARTITION_MAX {
            return Err(format!("partition {} has too many parts", part.key));
        }
        previous = Some(part);
        check_partition(meta, part).map_err(|why| format!("partition {}: {why}", part.key))?;
    }
    check_symbol_counts(meta, &state.symbol_counts)
}

fn check_partition(meta: &TableMeta, part: &PartitionMeta) -> Result<(), String> {
    if part.row_count == 0 {
        return Err("no rows".into());
    }
    check_time_range(meta, part)?;
    let mut seen = Vec::with_capacity(part.tops.len());
    for (id, top) in &part.tops {
        if seen.contains(id) || !meta.columns.iter().any(|c| c.id == *id) {
            return Err(format!("top of column {id}: no such column, or twice"));
        }
        if *top > part.row_count {
            return Err(format!(
                "top {top} of column {id} beyond {} rows",
                part.row_count
            ));
        }
        seen.push(*id);
    }
    Ok(())
}

/// The partition's timestamps lie in its own range, so partitions never overlap in time.
fn check_time_range(meta: &TableMeta, part: &PartitionMeta) -> Result<(), String> {
    let (min, max) = (part.min_ts, part.max_ts);
    if meta.timestamp_index.is_none() {
        if part.key != 0 || min != 0 || max != 0 || meta.partition_by != PartitionBy::None {
            return Err("a table without a designated timestamp has one partition, 0".into());
        }
        return Ok(());
    }
    if min > max {
        return Err(format!("min_ts {min} > max_ts {max}"));
    }
    let by = meta.partition_by;
    let inside = match by {
        PartitionBy::None => part.key == 0,
        _ => by.floor(min) == part.key && max < by.next(part.key),
    };
    if inside {
        Ok(())
    } else {
        Err(format!(
            "timestamps {min}..={max} outside the partition's range"
        ))
    }
}

fn check_symbol_counts(meta: &TableMeta, counts: &[(u32, u32)]) -> Result<(), String> {
    for (i, (id, _)) in counts.iter().enumerate() {
        let symbol = meta
            .columns
            .iter()
            .any(|c| c.id == *id && c.column_type == ColumnType::Symbol);
        if !symbol || counts[..i].iter().any(|(other, _)| other == id) {
            return Err(format!(
                "symbol count of column {id}: not a SYMBOL column, or twice"
            ));
        }
    }
    Ok(())
}

/// The slot's bytes decode to `state`.
pub(crate) fn check_round_trip(state: &TxnState, slot: &[u8]) -> Result<(), String> {
    match TxnState::decode(slot, Path::new("<slot being published>")) {
        Ok(decoded) if decoded == *state => Ok(()),
        Ok(decoded) => Err(format!("the slot decodes to {decoded:?}, not {state:?}")),
        Err(e) => Err(format!("the slot does not decode: {e}")),
    }
}

/// The files of the partitions `written`, and every dictionary, hold the committed rows and
/// symbols (exactly, in directories this transaction created).
pub(crate) fn check_files(dir: &Path, state: &TxnState, written: &[Written]) -> Result<(), String> {
    for w in written {
        let part = state
            .partitions
            .iter()
            .find(|p| p.key == w.key && p.version == w.version)
            .ok_or_else(|| format!("written partition {} is not in the transaction", w.key))?;
        let by = state.meta.partition_by;
        let pdir = dir.join(partition_dir_name(&by.dir_name(part.key), part.version));
        if let PartFormat::Parquet { file_bytes, remote } = part.format {
            // Written whole, fsynced and never changed: exactly its committed length (a remote
            // part's local copy only when just written: later it may have been evicted).
            if !remote || w.fresh {
                check_len(&pdir.join(PARQUET_FILE), file_bytes, true)?;
            }
            continue;
        }
        for c in &state.meta.columns {
            let rows = part.row_count - part.column_top(c.id);
            for (path, need) in column_extents(&pdir, c, rows)? {
                check_len(&path, need, w.fresh)?;
            }
        }
    }
    let sym = dir.join(SYMBOL_DIR);
    for (id, count) in &state.symbol_counts {
        if *count > 0 {
            let offsets = sym.join(offsets_file(*id));
            check_len(&offsets, (u64::from(*count) + 1) * 8, false)?;
            check_len(
                &sym.join(data_file(*id)),
                end_offset(&offsets, u64::from(*count))?,
                false,
            )?;
        }
    }
    Ok(())
}

/// The files of column `c` holding `rows` rows, and the bytes those rows take in each.
fn column_extents(pdir: &Path, c: &ColumnMeta, rows: u64) -> Result<Vec<(PathBuf, u64)>, String> {
    if rows == 0 {
        return Ok(Vec::new());
    }
    let data = pdir.join(data_file(c.id));
    let mut extents = match c.column_type.layout() {
        Layout::Fixed { width } => vec![(data, rows * width as u64)],
        Layout::Bits => vec![(data, rows.div_ceil(8))],
        Layout::Var => {
            let offsets = pdir.join(offsets_file(c.id));
            let end = end_offset(&offsets, rows)?;
            vec![(offsets, (rows + 1) * 8), (data, end)]
        }
    };
    let validity = pdir.join(validity_file(c.id));
    if validity.exists() {
        extents.push((validity, rows.div_ceil(8)));
    }
    Ok(extents)
}

/// [`read_offset`], its error as text.
fn end_offset(offsets: &Path, index: u64) -> Result<u64, String> {
    read_offset(offsets, index).map_err(|e| e.to_string())
}

/// `path` holds at least `need` bytes, and exactly that many when `exact`.
fn check_len(path: &Path, need: u64, exact: bool) -> Result<(), String> {
    let len = std::fs::metadata(path).map_or(0, |m| m.len());
    if len < need || (exact && len != need) {
        let wanted = if exact { "exactly" } else { "at least" };
        return Err(format!(
            "{} has {len} bytes, {wanted} {need} committed",
            path.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const DAY_NS: i64 = 86_400_000_000_000;

    fn column(id: u32, name: &str, column_type: ColumnType) -> ColumnMeta {
        ColumnMeta {
            id,
            name: name.into(),
            column_type,
            indexed: false,
            dedup_key: false,
        }
    }

    fn partition(key: i64, rows: u64, min_ts: i64, max_ts: i64) -> PartitionMeta {
        PartitionMeta {
            key,
            version: 1,
            row_count: rows,
            min_ts,
            max_ts,
            tops: Vec::new(),
            format: PartFormat::Native,
        }
    }

    /// Two DAY partitions with a LONG and a VARCHAR column.
    fn state() -> TxnState {
        TxnState {
            seq: 3,
            meta: Arc::new(TableMeta {
                name: "t".into(),
                columns: vec![
                    column(0, "ts", ColumnType::Timestamp),
                    column(1, "v", ColumnType::Long),
                    column(2, "s", ColumnType::Varchar),
                    column(3, "k", ColumnType::Symbol),
                ],
                timestamp_index: Some(0),
                partition_by: PartitionBy::Day,
                next_column_id: 4,
                ttl: None,
                cold_after: None,
                kind: crate::txn::TableKind::Table,
                definition: None,
                last_value_caches: Vec::new(),
            }),
            partitions: vec![
                partition(0, 2, 5, DAY_NS - 1),
                partition(DAY_NS, 1, DAY_NS, DAY_NS),
            ],
            symbol_counts: vec![(3, 2)],
            dropped: false,
            refresh: None,
        }
    }

    #[test]
    fn a_good_transaction_passes() {
        let s = state();
        assert_eq!(check_state(&s), Ok(()));
        assert_eq!(check_round_trip(&s, &s.encode()), Ok(()));
    }

    #[test]
    fn unsorted_or_overlapping_partitions_are_caught() {
        let mut unsorted = state();
        unsorted.partitions.swap(0, 1);
        let e = check_state(&unsorted).unwrap_err();
        assert!(e.contains("do not ascend"), "{e}");
        let mut overlapping = state();
        overlapping.partitions[0].max_ts = DAY_NS;
        let e = check_state(&overlapping).unwrap_err();
        assert!(e.contains("outside the partition's range"), "{e}");
        let mut twice = state();
        twice.partitions[1].key = 0;
        assert!(check_state(&twice).is_err());
    }

    #[test]
    fn parts_of_a_partition_follow_each_other_in_time() {
        let mut parts = state();
        parts.partitions = vec![partition(0, 2, 5, 9), partition(0, 3, 9, 20)];
        parts.partitions[1].version = 2;
        assert_eq!(check_state(&parts), Ok(()));
        assert_eq!(check_round_trip(&parts, &parts.encode()), Ok(()));
        let mut overlapping = parts.clone();
        overlapping.partitions[1].min_ts = 8;
        assert!(
            check_state(&overlapping)
                .unwrap_err()
                .contains("do not ascend")
        );
        assert!(TxnState::decode(&overlapping.encode(), Path::new("t")).is_err());
        let mut same_version = parts.clone();
        same_version.partitions[1].version = 1;
        assert!(check_state(&same_version).is_err());
        let mut many = parts.clone();
        many.partitions = (0..=PARTS_PER_PARTITION_MAX as u64)
            .map(|i| {
                let mut p = partition(0, 1, i as i64, i as i64);
                p.version = i + 1;
                p
            })
            .collect();
        assert!(check_state(&many).unwrap_err().contains("too many parts"));
    }

    #[test]
    fn bad_tops_rows_and_symbol_counts_are_caught() {
        let mut top = state();
        top.partitions[0].tops.push((1, 3));
        assert!(check_state(&top).unwrap_err().contains("beyond"));
        let mut empty = state();
        empty.partitions[1].row_count = 0;
        assert!(check_state(&empty).unwrap_err().contains("no rows"));
        let mut symbols = state();
        symbols.symbol_counts.push((1, 4));
        assert!(check_state(&symbols).unwrap_err().contains("SYMBOL"));
    }

    #[test]
    fn a_slot_that_does_not_decode_to_its_state_is_caught() {
        let s = state();
        let mut other = s.clone();
        other.seq += 1;
        assert!(
            check_round_trip(&s, &other.encode())
                .unwrap_err()
                .contains("decodes to")
        );
        // A name longer than the format's u16 length cannot round-trip.
        let mut long = s.clone();
        let mut meta = (*long.meta).clone();
        meta.name = "x".repeat(70_000);
        long.meta = Arc::new(meta);
        assert!(check_round_trip(&long, &long.encode()).is_err());
    }

    /// Writes partition 0's files for `state()` (2 rows), the VARCHAR data `extra` bytes longer
    /// than its rows need, and the dictionary.
    fn write_partition(dir: &Path, extra: usize) {
        let pdir = dir.join(partition_dir_name(&PartitionBy::Day.dir_name(0), 1));
        std::fs::create_dir_all(&pdir).unwrap();
        std::fs::write(pdir.join("0.d"), [0u8; 16]).unwrap();
        std::fs::write(pdir.join("1.d"), [0u8; 16]).unwrap();
        let offsets: Vec<u8> = [0u64, 2, 5].iter().flat_map(|o| o.to_le_bytes()).collect();
        std::fs::write(pdir.join("2.o"), offsets).unwrap();
        std::fs::write(pdir.join("2.d"), vec![b'a'; 5 + extra]).unwrap();
        std::fs::write(pdir.join("3.d"), [0u8; 8]).unwrap();
        let sym = dir.join(SYMBOL_DIR);
        std::fs::create_dir_all(&sym).unwrap();
        let offsets: Vec<u8> = [0u64, 1, 2].iter().flat_map(|o| o.to_le_bytes()).collect();
        std::fs::write(sym.join("3.o"), offsets).unwrap();
        std::fs::write(sym.join("3.d"), b"ab").unwrap();
    }

    #[test]
    fn files_shorter_than_the_committed_rows_are_caught() {
        let dir = tempfile::tempdir().unwrap();
        let written = [Written {
            key: 0,
            version: 1,
            fresh: true,
        }];
        write_partition(dir.path(), 0);
        assert_eq!(check_files(dir.path(), &state(), &written), Ok(()));
        let pdir = dir
            .path()
            .join(partition_dir_name(&PartitionBy::Day.dir_name(0), 1));
        std::fs::write(pdir.join("1.d"), [0u8; 15]).unwrap();
        let e = check_files(dir.path(), &state(), &written).unwrap_err();
        assert!(e.contains("1.d has 15 bytes, exactly 16"), "{e}");
        std::fs::write(pdir.join("1.d"), [0u8; 16]).unwrap();
        std::fs::write(dir.path().join(SYMBOL_DIR).join("3.d"), b"a").unwrap();
        assert!(check_files(dir.path(), &state(), &written).is_err());
    }

    #[test]
    fn only_a_new_directory_must_be_exact() {
        let dir = tempfile::tempdir().unwrap();
        write_partition(dir.path(), 3);
        let appended = [Written {
            key: 0,
            version: 1,
            fresh: false,
        }];
        assert_eq!(check_files(dir.path(), &state(), &appended), Ok(()));
        let fresh = [Written {
            key: 0,
            version: 1,
            fresh: true,
        }];
        let e = check_files(dir.path(), &state(), &fresh).unwrap_err();
        assert!(e.contains("2.d has 8 bytes, exactly 5"), "{e}");
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "must not be published")]
    fn publishing_an_unsorted_transaction_panics_in_debug_builds() {
        let mut unsorted = state();
        unsorted.partitions.swap(0, 1);
        let slot = unsorted.encode();
        debug_check_publishable(Path::new("t~1"), &unsorted, &slot, &[]);
    }
}

//! Zone maps: per column of a partition version, the range of values and the NULL count of
//! each *zone*, a run of [`ZONE_ROWS`] rows, so a scan skips zones a filter cannot pass.
//!
//! ```text
//!  <partition>.<version>/<col>.z   entry k (24 bytes) describes rows [k * ZONE_ROWS, (k + 1) * ZONE_ROWS)
//!  ┌──────────┬──────────┬───────────┬───────────┐
//!  │ min i64  │ max i64  │ nulls u32 │ crc32 u32 │   keys as the kernels compare them
//!  └──────────┴──────────┴───────────┴───────────┘
//! ```
//!
//! Invariants:
//! * Only complete zones have entries: entry `k` is written by the commit whose rows complete
//!   zone `k` (or, in a version written whole, by the commit creating it), before its
//!   transaction slot, and never changes once a transaction counts those rows. A reader uses
//!   entries only of zones complete under its snapshot's row count.
//! * Zone maps are derived data: an entry that is missing or fails its CRC (a crash, a torn
//!   write) makes its zone unknown, and an unknown zone is scanned. A zone map never decides
//!   a commit's validity.

use std::ops::Range;
use std::sync::Arc;

pub use sundial_kernels::Zone;
use sundial_kernels::{ColumnValues, Domain, Zeros};

use crate::dir_sync::UnsyncedDirs;
use crate::error::{IoContext, Result};
use crate::files::PartitionDir;
use crate::read::read_array;
use crate::txn::{ColumnMeta, PartitionMeta};
use crate::types::ColumnType;

/// Rows per zone, counted from the partition's first row (rows below a column's top included).
pub const ZONE_ROWS: u64 = 1 << 16;

/// Bytes of one entry of a zone file.
const ENTRY_BYTES: usize = 24;

/// Zone entries one read or write handles at most (bounds the buffer: 24 KiB).
const ENTRIES_PER_IO_MAX: usize = 1024;

pub(crate) fn zone_file(id: u32) -> String {
    format!("{id}.z")
}

/// The domain a column's zones are kept in; `None` for columns without zones.
pub(crate) fn zone_domain(column_type: ColumnType) -> Option<Domain> {
    match column_type {
        ColumnType::Byte
        | ColumnType::Short
        | ColumnType::Int
        | ColumnType::Long
        | ColumnType::Timestamp
        | ColumnType::Date => Some(Domain::Int),
        ColumnType::Float | ColumnType::Double => Some(Domain::Float),
        _ => None,
    }
}

/// Zones complete in a partition of `rows` rows.
pub(crate) fn complete_zones(rows: u64) -> u64 {
    rows / ZONE_ROWS
}

/// Bits of an entry's count word below which the NULL count lies (at most `ZONE_ROWS`).
const NULLS_BITS: u32 = 17;
/// The count word's flags: which zeros a floating-point zone holds, and that it says so.
const ZEROS_KNOWN: u32 = 1 << 31;
const NEGATIVE_ZERO: u32 = 1 << 30;
const POSITIVE_ZERO: u32 = 1 << 29;

fn encode(zone: &Zone) -> [u8; ENTRY_BYTES] {
    debug_assert!(u64::from(zone.nulls) <= ZONE_ROWS, "a zone's NULLs");
    let mut entry = [0u8; ENTRY_BYTES];
    entry[0..8].copy_from_slice(&zone.min.to_le_bytes());
    entry[8..16].copy_from_slice(&zone.max.to_le_bytes());
    let zeros = zone.zeros.map_or(0, |z| {
        ZEROS_KNOWN
            | if z.negative { NEGATIVE_ZERO } else { 0 }
            | if z.positive { POSITIVE_ZERO } else { 0 }
    });
    entry[16..20].copy_from_slice(&(zone.nulls | zeros).to_le_bytes());
    let crc = crc32fast::hash(&entry[0..20]);
    entry[20..24].copy_from_slice(&crc.to_le_bytes());
    entry
}

fn decode(entry: &[u8], domain: Domain) -> Option<Zone> {
    let word = |at: usize| u64::from_le_bytes(entry[at..at + 8].try_into().unwrap_or([0; 8]));
    let half = |at: usize| u32::from_le_bytes(entry[at..at + 4].try_into().unwrap_or([0; 4]));
    if entry.len() != ENTRY_BYTES || crc32fast::hash(&entry[0..20]) != half(20) {
        return None;
    }
    let counts = half(16);
    let nulls = counts & ((1 << NULLS_BITS) - 1);
    let flags = ZEROS_KNOWN | NEGATIVE_ZERO | POSITIVE_ZERO;
    if u64::from(nulls) > ZONE_ROWS || counts & !flags & !((1 << NULLS_BITS) - 1) != 0 {
        return None;
    }
    let zeros = (counts & ZEROS_KNOWN != 0).then_some(Zeros {
        negative: counts & NEGATIVE_ZERO != 0,
        positive: counts & POSITIVE_ZERO != 0,
    });
    Some(Zone {
        domain,
        min: word(0) as i64,
        max: word(8) as i64,
        nulls,
        rows: ZONE_ROWS as u32,
        zeros,
    })
}

/// Writes the entries of zones `zones` of every zoned column of a partition version whose
/// files hold `part`'s rows. A zone file created here records `dir` in `unsynced`.
pub(crate) fn write_zones(
    dir: &PartitionDir,
    columns: &[ColumnMeta],
    part: &PartitionMeta,
    zones: Range<u64>,
    sync: bool,
    unsynced: &mut UnsyncedDirs,
) -> Result<()> {
    debug_assert!(
        zones.end <= complete_zones(part.row_count),
        "only complete zones are written"
    );
    if zones.is_empty() {
        return Ok(());
    }
    let mut bytes = Vec::with_capacity(ENTRIES_PER_IO_MAX * ENTRY_BYTES);
    for c in columns {
        let Some(domain) = zone_domain(c.column_type) else {
            continue;
        };
        let path = dir.path.join(zone_file(c.id));
        if !path.exists() {
            unsynced.add(&dir.path);
        }
        let file = dir.cache().file(&path, true)?;
        let top = part.column_top(c.id);
        let mut start = zones.start;
        while start < zones.end {
            let end = zones.end.min(start + ENTRIES_PER_IO_MAX as u64);
            bytes.clear();
            for k in start..end {
                let rows = k * ZONE_ROWS..(k + 1) * ZONE_ROWS;
                let array = read_array(dir, c, top, rows.start, rows.end, None)?;
                let zone = ColumnValues::of(array.as_ref())
                    .and_then(|v| Zone::of(&v, domain))
                    .ok_or_else(|| {
                        crate::StorageError::Internal(format!(
                            "column '{}' has no zone for {}",
                            c.name,
                            array.data_type()
                        ))
                    })?;
                debug_assert_eq!(u64::from(zone.rows), ZONE_ROWS, "a complete zone");
                bytes.extend_from_slice(&encode(&zone));
            }
            use std::os::unix::fs::FileExt;
            file.write_all_at(&bytes, start * ENTRY_BYTES as u64)
                .at(&path)?;
            start = end;
        }
        if sync {
            file.sync_data().at(&path)?;
        }
    }
    Ok(())
}

/// The zones of the first `zones` zones of `column` in `dir`, whose rows start at `top`:
/// `None` for each entry missing or damaged. Zones wholly below the top need no entry (every
/// row is NULL); the entries of a column added after its first zones were complete start
/// at the first zone it has rows in.
pub(crate) fn read_zones(
    dir: &PartitionDir,
    column: &ColumnMeta,
    top: u64,
    zones: u64,
) -> Result<Arc<[Option<Zone>]>> {
    let Some(domain) = zone_domain(column.column_type) else {
        return Ok(vec![None; zones as usize].into());
    };
    let path = dir.path.join(zone_file(column.id));
    // Only the entries asked for are read, whatever the file's length.
    let mut bytes = Vec::new();
    match std::fs::File::open(&path) {
        Ok(file) => {
            use std::io::Read;
            file.take(zones * ENTRY_BYTES as u64)
                .read_to_end(&mut bytes)
                .at(&path)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(crate::StorageError::io(path, e)),
    }
    let null_zone = Zone {
        domain,
        min: i64::MAX,
        max: i64::MIN,
        nulls: ZONE_ROWS as u32,
        rows: ZONE_ROWS as u32,
        // Every row NULL: no zero either.
        zeros: (domain == Domain::Float).then(Zeros::default),
    };
    Ok((0..zones as usize)
        .map(|k| {
            if (k as u64 + 1) * ZONE_ROWS <= top {
                return Some(null_zone);
            }
            bytes
                .get(k * ENTRY_BYTES..(k + 1) * ENTRY_BYTES)
                .and_then(|e| decode(e, domain))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_damage_is_detected() {
        let zone = Zone {
            domain: Domain::Float,
            min: -5,
            max: 1 << 40,
            nulls: ZONE_ROWS as u32,
            rows: ZONE_ROWS as u32,
            zeros: None,
        };
        // The zeros a float zone holds travel with its NULL count, unknown in older entries.
        for zeros in [
            None,
            Some(Zeros::default()),
            Some(Zeros {
                negative: true,
                positive: false,
            }),
            Some(Zeros {
                negative: true,
                positive: true,
            }),
        ] {
            let zone = Zone { zeros, ..zone };
            assert_eq!(decode(&encode(&zone), Domain::Float), Some(zone));
        }
        let zone = Zone { nulls: 17, ..zone };
        let mut entry = encode(&zone);
        assert_eq!(decode(&entry, Domain::Float), Some(zone));
        // A count word with bits no writer sets, under a matching CRC, is no entry.
        let mut stray = entry;
        stray[16..20].copy_from_slice(&(17u32 | 1 << 20).to_le_bytes());
        let crc = crc32fast::hash(&stray[0..20]);
        stray[20..24].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&stray, Domain::Float), None);
        entry[3] ^= 1;
        assert_eq!(decode(&entry, Domain::Float), None);
        assert_eq!(decode(&[0u8; ENTRY_BYTES], Domain::Int), None);
        assert_eq!(decode(&entry[..10], Domain::Int), None);
    }
}

//! What a receiver remembers of the series it has seen, so that a line of a known series costs
//! one hash lookup for its measurement and tags instead of parsing, unescaping and looking up
//! each tag.
//!
//! ```text
//!  line bytes: cpu,hostname=host_0,region=eu-west-1 usage_user=58i,usage_idle=24i 1451606400000000000
//!              └──────────── series key ───────────┘└──── parsed on every line ─────────────────┘
//!                            │ SeriesCache::get
//!                            ▼
//!  Series { table slot, epoch, [(column, symbol code), ...] } ─▶ TableBatch::add_known_row
//! ```
//!
//! The key is the line's bytes up to the space before its fields, as `sundial_ilp::series_len`
//! delimits them (lines with escapes there are never remembered). Equal bytes mean the same
//! measurement and tags, so the remembered table and codes apply unchanged. A series is valid
//! only while its table batch is in the epoch it was resolved in: adding a column or starting
//! a dictionary again moves the epoch, and the next line of the series is resolved again.

use foldhash::HashMap;

use crate::batch::TagCodes;

/// Series a receiver remembers at most...
const SERIES_MAX: usize = 100_000;
/// ...and bytes of their keys and tag codes at most; past either, it forgets them all and
/// starts again. Every receiver (each ILP connection) has its own cache, so this bounds what
/// one connection can make the server hold: a few tens of thousands of typical series.
const SERIES_BYTES_MAX: usize = 8 << 20;

/// Bytes a series takes towards [`SERIES_BYTES_MAX`].
fn series_bytes(key: &[u8], tags: &TagCodes) -> usize {
    key.len() + std::mem::size_of_val(tags.as_slice())
}

/// A series as its first line resolved it.
pub(crate) struct Series {
    /// The receiver's table batch the series' rows go to.
    pub table: usize,
    /// The batch's epoch when the series was resolved.
    pub epoch: u64,
    pub tags: TagCodes,
}

#[derive(Default)]
pub(crate) struct SeriesCache {
    map: HashMap<Box<[u8]>, Series>,
    /// What the remembered series take, by [`series_bytes`].
    bytes: usize,
}

impl SeriesCache {
    pub fn get(&self, key: &[u8]) -> Option<&Series> {
        self.map.get(key)
    }

    /// Remembers (or updates) the series with bytes `key`.
    pub fn insert(&mut self, key: &[u8], table: usize, epoch: u64, tags: &TagCodes) {
        if let Some(series) = self.map.get_mut(key) {
            self.bytes = self.bytes - series_bytes(key, &series.tags) + series_bytes(key, tags);
            series.table = table;
            series.epoch = epoch;
            series.tags.clone_from(tags);
            return;
        }
        let bytes = series_bytes(key, tags);
        if self.map.len() >= SERIES_MAX || self.bytes + bytes > SERIES_BYTES_MAX {
            self.map.clear();
            self.bytes = 0;
        }
        self.bytes += bytes;
        let tags = tags.clone();
        self.map.insert(key.into(), Series { table, epoch, tags });
    }

    /// Forgets every series (their table slots changed).
    pub fn clear(&mut self) {
        self.map.clear();
        self.bytes = 0;
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_updates_and_forgets_everything_when_full() {
        let mut cache = SeriesCache::default();
        cache.insert(b"cpu,host=a", 0, 1, &vec![(1, 0)]);
        cache.insert(b"cpu,host=a", 2, 3, &vec![(1, 5)]);
        let series = cache.get(b"cpu,host=a").unwrap();
        assert_eq!(
            (series.table, series.epoch, series.tags.clone()),
            (2, 3, vec![(1, 5)])
        );
        assert!(cache.get(b"cpu,host=b").is_none());
        for i in 0..SERIES_MAX {
            cache.insert(format!("m,k={i}").as_bytes(), 0, 0, &Vec::new());
        }
        assert!(cache.len() <= SERIES_MAX);
        assert!(cache.get(b"cpu,host=a").is_none());
        let long = vec![b'x'; SERIES_BYTES_MAX / 2 + 1];
        cache.insert(&long, 0, 0, &Vec::new());
        let mut other = long.clone();
        other[0] = b'y';
        cache.insert(&other, 0, 0, &Vec::new());
        assert_eq!(cache.len(), 1);
        assert!(cache.bytes <= SERIES_BYTES_MAX);
    }
}

//! Bounded caches of operating-system resources, shared by every table of a database: open
//! column files (descriptors, for writing) and memory mappings of column files (for reading).
//!
//! Invariants:
//! * At most `open_files_max` descriptors are cached, at most `mapped_files_max` mappings and
//!   at most `decoded_cache_bytes` of decoded Parquet column chunks;
//!   inserting past a bound evicts the least recently used entries (a sixteenth of the
//!   bound at once). Lookups share the lock and only stamp their entry. So the number of tables,
//!   partitions and columns is not limited by `RLIMIT_NOFILE` or `vm.max_map_count`.
//! * An evicted entry is only the cache's reference: a writer or a query still using the
//!   `Arc<File>` or the mapped `Buffer` keeps it until it is done (a descriptor is closed, a
//!   mapping unmapped, when its last user drops it). Descriptors beyond the bound are therefore
//!   only those of operations in progress (a few per running append or commit).
//! * A mapping never needs its descriptor: files are closed right after `mmap`.
//! * Entries of a directory are forgotten when the directory is deleted (no descriptor or
//!   mapping keeps a deleted partition's disk space), and a deleted path is never reused while
//!   the database is open (partition versions and table ids only grow).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use arrow_array::{Array, ArrayRef};
use arrow_buffer::Buffer;

use crate::error::{IoContext, Result, StorageError};

/// Least-recently-used map with a bound on the total weight of its entries (their number,
/// when each weighs 1). Ordered by key, so that the entries of one directory (a key range) are
/// forgotten without visiting the others.
///
/// A lookup only stamps its entry with the next tick (`&self`: readers share the cache's lock);
/// inserting past the bound evicts the entries with the oldest stamps, a sixteenth of the
/// bound at once, so that sorting the stamps is paid once per many inserts.
struct Lru<K, V> {
    max: usize,
    entries: BTreeMap<K, Entry<V>>,
    tick: AtomicU64,
    weight: usize,
}

struct Entry<V> {
    value: V,
    used: AtomicU64,
    weight: usize,
}

impl<K: Ord + Clone, V> Lru<K, V> {
    fn new(max: usize) -> Self {
        Lru {
            max: max.max(1),
            entries: BTreeMap::new(),
            tick: AtomicU64::new(0),
            weight: 0,
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry of `key`, marked as just used.
    fn get(&self, key: &K) -> Option<&V> {
        let entry = self.entries.get(key)?;
        let tick = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
        entry.used.store(tick, Ordering::Relaxed);
        Some(&entry.value)
    }

    /// Inserts or replaces `key` (weight 1).
    fn insert(&mut self, key: K, value: V) {
        self.insert_weighted(key, value, 1);
    }

    /// Inserts or replaces `key`; past the bound, evicts the least recently used entries
    /// until the total weight is a sixteenth of the bound under it (the entry just inserted
    /// last: one heavier than the bound is not kept).
    fn insert_weighted(&mut self, key: K, value: V, weight: usize) {
        let tick = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = Entry {
            value,
            used: AtomicU64::new(tick),
            weight,
        };
        if let Some(old) = self.entries.insert(key, entry) {
            self.weight -= old.weight;
        }
        self.weight += weight;
        if self.weight <= self.max {
            return;
        }
        let target = self.max - self.max / 16;
        let mut by_age: Vec<(u64, &K, usize)> = self
            .entries
            .iter()
            .map(|(k, e)| (e.used.load(Ordering::Relaxed), k, e.weight))
            .collect();
        by_age.sort_unstable_by_key(|(used, _, _)| *used);
        let mut weight = self.weight;
        let mut evicted = Vec::new();
        for (_, key, entry_weight) in by_age {
            if weight <= target {
                break;
            }
            weight -= entry_weight;
            evicted.push(key.clone());
        }
        for key in &evicted {
            self.remove(key);
        }
        debug_assert!(self.weight <= self.max, "LRU over its bound");
    }

    fn remove(&mut self, key: &K) {
        if let Some(old) = self.entries.remove(key) {
            self.weight -= old.weight;
        }
    }

    /// Removes the entries from `start` on (in key order) while `inside` holds.
    fn remove_run(&mut self, start: Bound<&K>, inside: impl Fn(&K) -> bool) {
        let keys: Vec<K> = self
            .entries
            .range((start, Bound::Unbounded))
            .map(|(k, _)| k)
            .take_while(|k| inside(k))
            .cloned()
            .collect();
        for k in &keys {
            self.remove(k);
        }
    }
}

/// A cached mapping. `Missing` remembers that the file did not exist when `checked` (bytes, or
/// rows for validity bitmaps) were asked for: rows committed then had no NULLs, so the answer
/// holds for requests that reach no further.
#[derive(Debug, Clone)]
pub(crate) enum Mapped {
    Missing { checked: usize },
    Present(Buffer),
}

/// Bytes of a file name kept inline in a [`MapKey`]: column files (`14.d`, `14.z`) fit.
const NAME_INLINE_BYTES: usize = 22;

/// A mapping's key: a partition directory's id and a file name in it. Short names (every
/// column file's) are kept inline, so that looking one up allocates nothing; keys order by
/// directory, then name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MapKey {
    Inline {
        dir: u64,
        len: u8,
        name: [u8; NAME_INLINE_BYTES],
    },
    Long {
        dir: u64,
        name: Box<str>,
    },
}

impl MapKey {
    fn new(dir: u64, name: &str) -> MapKey {
        let bytes = name.as_bytes();
        if bytes.len() > NAME_INLINE_BYTES {
            return MapKey::Long {
                dir,
                name: name.into(),
            };
        }
        let mut inline = [0; NAME_INLINE_BYTES];
        inline[..bytes.len()].copy_from_slice(bytes);
        MapKey::Inline {
            dir,
            len: bytes.len() as u8,
            name: inline,
        }
    }

    fn dir(&self) -> u64 {
        match self {
            MapKey::Inline { dir, .. } | MapKey::Long { dir, .. } => *dir,
        }
    }

    fn name(&self) -> &[u8] {
        match self {
            MapKey::Inline { len, name, .. } => &name[..usize::from(*len)],
            MapKey::Long { name, .. } => name.as_bytes(),
        }
    }
}

impl Ord for MapKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.dir(), self.name()).cmp(&(other.dir(), other.name()))
    }
}

impl PartialOrd for MapKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A decoded column chunk of a Parquet part: partition directory id, column id, row group.
pub(crate) type ChunkKey = (u64, u32, u32);

/// The database's caches of open files, mappings and decoded Parquet column chunks (see the
/// module docs).
pub(crate) struct FileCache {
    files: RwLock<Lru<PathBuf, Arc<File>>>,
    /// Keyed by partition directory (its process-unique id) and file name.
    maps: RwLock<Lru<MapKey, Mapped>>,
    /// Weighed in bytes of the arrays (see `parquet_read.rs`).
    chunks: RwLock<Lru<ChunkKey, ArrayRef>>,
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache").finish_non_exhaustive()
    }
}

fn read<'a, T>(m: &'a RwLock<T>, what: &str) -> Result<RwLockReadGuard<'a, T>> {
    m.read()
        .map_err(|_| StorageError::Internal(format!("{what} cache poisoned")))
}

fn write<'a, T>(m: &'a RwLock<T>, what: &str) -> Result<RwLockWriteGuard<'a, T>> {
    m.write()
        .map_err(|_| StorageError::Internal(format!("{what} cache poisoned")))
}

impl FileCache {
    pub fn new(
        open_files_max: usize,
        mapped_files_max: usize,
        chunk_bytes_max: usize,
    ) -> FileCache {
        FileCache {
            files: RwLock::new(Lru::new(open_files_max)),
            maps: RwLock::new(Lru::new(mapped_files_max)),
            chunks: RwLock::new(Lru::new(chunk_bytes_max)),
        }
    }

    /// A decoded column chunk, if it is cached.
    pub fn chunk(&self, key: ChunkKey) -> Option<ArrayRef> {
        self.chunks.read().ok()?.get(&key).cloned()
    }

    /// Keeps a decoded column chunk, weighed by the bytes its buffers hold.
    pub fn keep_chunk(&self, key: ChunkKey, array: ArrayRef) {
        let bytes = array.get_array_memory_size();
        if let Ok(mut chunks) = self.chunks.write() {
            chunks.insert_weighted(key, array, bytes);
        }
    }

    /// `path` opened for reading and writing (created if `create`), from the cache if it is
    /// there. The descriptor stays valid while the returned `Arc` lives, evicted or not.
    pub fn file(&self, path: &Path, create: bool) -> Result<Arc<File>> {
        if let Some(f) = read(&self.files, "open file")?.get(&path.to_path_buf()) {
            return Ok(f.clone());
        }
        // Opened outside the lock: other tables' writers need not wait for this one's I/O.
        let file = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .open(path)
                .at(path)?,
        );
        write(&self.files, "open file")?.insert(path.to_path_buf(), file.clone());
        Ok(file)
    }

    /// Forgets every open file under `dir` (before or after it is deleted).
    pub fn forget_files_under(&self, dir: &Path) {
        if let Ok(mut files) = self.files.write() {
            // Paths order by component, so those under `dir` directly follow it.
            files.remove_run(Bound::Excluded(&dir.to_path_buf()), |p| p.starts_with(dir));
        }
    }

    pub fn mapping(&self, dir_id: u64, name: &str) -> Result<Option<Mapped>> {
        Ok(read(&self.maps, "mapping")?
            .get(&MapKey::new(dir_id, name))
            .cloned())
    }

    pub fn set_mapping(&self, dir_id: u64, name: &str, mapped: Mapped) -> Result<()> {
        write(&self.maps, "mapping")?.insert(MapKey::new(dir_id, name), mapped);
        Ok(())
    }

    pub fn forget_mapping(&self, dir_id: u64, name: &str) {
        if let Ok(mut maps) = self.maps.write() {
            maps.remove(&MapKey::new(dir_id, name));
        }
    }

    /// Forgets every mapping and decoded chunk of a partition directory.
    pub fn forget_mappings_of(&self, dir_id: u64) {
        if let Ok(mut maps) = self.maps.write() {
            maps.remove_run(Bound::Included(&MapKey::new(dir_id, "")), |key| {
                key.dir() == dir_id
            });
        }
        if let Ok(mut chunks) = self.chunks.write() {
            chunks.remove_run(Bound::Included(&(dir_id, 0, 0)), |(id, _, _)| *id == dir_id);
        }
    }

    /// Descriptors and mappings cached now.
    pub fn counts(&self) -> (usize, usize) {
        let files = self.files.read().map_or(0, |f| f.len());
        let maps = self.maps.read().map_or(0, |m| m.len());
        (files, maps)
    }
}

/// Raises the soft limit on open files (`RLIMIT_NOFILE`) to the hard limit and returns the new
/// soft limit. A server calls it once at start: the default limit (often 1024) is far below
/// what many tables, partitions and connections need, while the hard limit usually is not.
pub fn raise_open_files_limit() -> Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a valid, exclusive pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(StorageError::io(
            "RLIMIT_NOFILE",
            std::io::Error::last_os_error(),
        ));
    }
    // An unlimited hard limit is not a valid soft one: the kernel's cap (`fs.nr_open`) is.
    let target = match std::fs::read_to_string("/proc/sys/fs/nr_open") {
        Ok(cap) if limit.rlim_max == libc::RLIM_INFINITY => {
            cap.trim().parse().unwrap_or(limit.rlim_cur)
        }
        _ => limit.rlim_max,
    };
    if limit.rlim_cur < target {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit through a valid pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(StorageError::io(
                "RLIMIT_NOFILE",
                std::io::Error::last_os_error(),
            ));
        }
        limit = raised;
    }
    Ok(limit.rlim_cur)
}

/// The current soft limit on open files, if the OS reports one.
pub(crate) fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a valid, exclusive pointer.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit.rlim_cur)
}

/// The kernel's bound on memory mappings per process (`vm.max_map_count`), if readable.
pub(crate) fn mappings_limit() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_keys_order_by_directory_then_name_whatever_their_length() {
        let long = "a-file-name-longer-than-the-inline-bytes.d";
        let mut keys = [
            MapKey::new(2, "1.d"),
            MapKey::new(1, long),
            MapKey::new(1, "10.d"),
            MapKey::new(1, ""),
            MapKey::new(1, "1.z"),
            MapKey::new(1, "b"),
        ];
        keys.sort();
        let names: Vec<(u64, &[u8])> = keys.iter().map(|k| (k.dir(), k.name())).collect();
        let mut expected: [(u64, &[u8]); 6] = [
            (1, b""),
            (1, b"10.d"),
            (1, b"1.z"),
            (1, long.as_bytes()),
            (1, b"b"),
            (2, b"1.d"),
        ];
        expected.sort();
        assert_eq!(names, expected);
        assert!(matches!(MapKey::new(1, long), MapKey::Long { .. }));
        assert_eq!(MapKey::new(1, "1.z"), MapKey::new(1, "1.z"));
        let cache = FileCache::new(8, 8, 8);
        for (dir, name) in [(1, "1.d"), (1, long), (2, "1.d")] {
            cache
                .set_mapping(dir, name, Mapped::Missing { checked: 1 })
                .unwrap();
        }
        assert!(cache.mapping(1, long).unwrap().is_some());
        cache.forget_mappings_of(1);
        assert!(cache.mapping(1, "1.d").unwrap().is_none());
        assert!(cache.mapping(1, long).unwrap().is_none());
        assert!(cache.mapping(2, "1.d").unwrap().is_some());
    }

    #[test]
    fn open_files_limit_is_raised_to_at_least_what_it_was() {
        let before = open_files_limit().unwrap();
        let after = raise_open_files_limit().unwrap();
        assert!(after >= before);
        assert_eq!(open_files_limit(), Some(after));
    }

    #[test]
    fn lru_evicts_the_least_recently_used_past_its_bound() {
        let mut lru = Lru::new(3);
        for k in 0..3 {
            lru.insert(k, k * 10);
        }
        assert_eq!(lru.get(&0), Some(&0));
        lru.insert(3, 30);
        assert_eq!(lru.len(), 3);
        assert!(lru.get(&1).is_none(), "1 was the least recently used");
        lru.insert(2, 21);
        lru.insert(4, 40);
        assert!(lru.get(&0).is_none() && lru.get(&3).is_some());
        assert_eq!(lru.get(&2), Some(&21));
        lru.remove_run(Bound::Included(&2), |k| *k < 3);
        lru.remove(&4);
        assert_eq!(lru.len(), 1);
        assert_eq!(lru.weight, 1);
    }

    /// Past a larger bound a sixteenth goes at once, the least recently used, whichever
    /// were inserted first.
    #[test]
    fn lru_evicts_in_batches_by_last_use() {
        let mut lru = Lru::new(32);
        for k in 0..32 {
            lru.insert(k, k);
        }
        for k in 0..8 {
            assert!(lru.get(&k).is_some());
        }
        lru.insert(32, 32);
        // 33 over a bound of 32: down to 30, so the three used longest ago go.
        assert_eq!(lru.len(), 30);
        assert!(
            (8..11).all(|k| lru.get(&k).is_none()),
            "8, 9 and 10 were used last"
        );
        assert!((0..8).chain(11..33).all(|k| lru.get(&k).is_some()));
        // Weighted: an entry heavier than the bound is not kept.
        lru.insert_weighted(99, 99, 40);
        assert!(lru.get(&99).is_none() && lru.weight <= 32);
    }

    #[test]
    fn files_of_a_directory_are_forgotten_and_no_others() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(100, 100, 1 << 20);
        for sub in ["a", "a.1", "ab", "a/x"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        for f in ["a/0.d", "a/x/1.d", "a.1/0.d", "ab/0.d", "0.d"] {
            cache.file(&dir.path().join(f), true).unwrap();
        }
        cache
            .set_mapping(7, "0.d", Mapped::Missing { checked: 1 })
            .unwrap();
        cache
            .set_mapping(8, "0.d", Mapped::Missing { checked: 1 })
            .unwrap();
        cache.forget_files_under(&dir.path().join("a"));
        cache.forget_mappings_of(7);
        assert_eq!(cache.counts(), (3, 1));
        assert!(cache.mapping(8, "0.d").unwrap().is_some());
    }
}

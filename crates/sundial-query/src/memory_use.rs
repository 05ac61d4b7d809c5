//! Query memory: each query's operators reserve from a pool of their own, bounded by the
//! query's limit (`--query-memory-bytes-max`), and every such pool also reserves from the
//! server's budget (`--memory-bytes-max`), shared by all queries of the engine.
//!
//! ```text
//!  operator ─reserve─▶ QueryPool ─▶ FairSpillPool (the query's limit)      ─fails─▶ 53200
//!                          └─▶ ServerMemory (the server's budget, shared)  ─fails─▶ 53200
//!                          └─ on success: IN_USE += bytes     (shrink: IN_USE -= bytes)
//! ```
//!
//! A reservation is granted only if it fits both; a refused one leaves neither changed, so an
//! operator that can spill (sort, grouped aggregation, DataFusion's rule) spills and tries
//! again, and one that cannot fails its query with SQLSTATE 53200 naming the bound it hit.
//! Infallible growth (`grow`, which DataFusion uses for memory already allocated) is counted in
//! both even past the bound, so later reservations see it.
//!
//! Invariant: the server's reserved total and `IN_USE` change only by what a query pool
//! granted or released, so they return to their earlier values once every reservation of a
//! query is freed. One atomic add per reservation change (operators reserve per batch, not
//! per row); the server's budget is one compare-and-swap loop.
//!
//! Queries also spill into the engine's disk manager ([`spill_disk_manager`]): a directory of
//! the server's choosing, bounded in size, emptied of earlier processes' files at start.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::disk_manager::{DiskManager, DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{
    FairSpillPool, MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::SessionConfig;

static IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Bytes that running queries' operators hold from their memory pools, over all queries of the
/// process with a memory bound (`--query-memory-bytes-max` or `--memory-bytes-max`).
pub fn query_memory_in_use() -> usize {
    IN_USE.load(Ordering::Relaxed)
}

/// The memory every query of a server reserves from, together: at most `bytes_max` (0: no
/// bound, only counted).
#[derive(Debug, Default)]
pub struct ServerMemory {
    bytes_max: usize,
    reserved: AtomicUsize,
}

impl ServerMemory {
    pub fn new(bytes_max: usize) -> ServerMemory {
        ServerMemory {
            bytes_max,
            reserved: AtomicUsize::new(0),
        }
    }

    /// The bound (0: none).
    pub fn bytes_max(&self) -> usize {
        self.bytes_max
    }

    /// Bytes the engine's queries hold now.
    pub fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }

    /// Takes `bytes` if they fit; else the bytes left.
    fn try_grow(&self, bytes: usize) -> std::result::Result<(), usize> {
        if self.bytes_max == 0 {
            self.reserved.fetch_add(bytes, Ordering::Relaxed);
            return Ok(());
        }
        self.reserved
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes)
                    .filter(|&total| total <= self.bytes_max)
            })
            .map(|_| ())
            .map_err(|held| self.bytes_max.saturating_sub(held))
    }

    fn grow(&self, bytes: usize) {
        self.reserved.fetch_add(bytes, Ordering::Relaxed);
    }

    fn shrink(&self, bytes: usize) {
        self.reserved.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// The part of a query's limit its sorts' merge reserves may take together (1/8).
const SORT_MERGE_SHARE_OF_LIMIT: usize = 8;

/// How the engine bounds its queries' memory and where they spill.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryLimits {
    /// Memory one query's operators may reserve (0: no limit).
    pub(crate) query_bytes_max: usize,
    /// The budget all queries share (none: no bound beyond each query's).
    pub(crate) server: Option<Arc<ServerMemory>>,
    /// Where queries spill (none: DataFusion's default, the system's temporary directory).
    pub(crate) spill: Option<Arc<DiskManager>>,
}

impl MemoryLimits {
    /// Whether queries run in a runtime of their own ([`MemoryLimits::runtime`]) rather than
    /// the session's.
    pub(crate) fn is_bounded(&self) -> bool {
        self.query_bytes_max > 0 || self.server.is_some() || self.spill.is_some()
    }

    /// `base` with each sort's merge reserve scaled to the query's limit.
    ///
    /// A sort that may spill keeps `sort_spill_reservation_bytes` (DataFusion's default:
    /// 10 MB) reserved per partition for merging its spilled runs. Several partitions' reserves
    /// could take all of a small limit, or the rest of one that its batches filled, and the
    /// sort would fail where it should spill: so each partition's reserve is at most an
    /// eighth of the limit shared by the partitions (for two partitions, 20 MB yields 1.25 MB
    /// each; merging with less memory merges fewer runs at once, spilling more).
    pub(crate) fn config(&self, base: &SessionConfig) -> SessionConfig {
        let mut config = base.clone();
        if self.query_bytes_max == 0 {
            return config;
        }
        let partitions = config.target_partitions().max(1);
        let share = self.query_bytes_max / SORT_MERGE_SHARE_OF_LIMIT / partitions;
        let execution = &mut config.options_mut().execution;
        execution.sort_spill_reservation_bytes = execution.sort_spill_reservation_bytes.min(share);
        config
    }

    /// `base` with a memory pool for one query, and this engine's spill directory.
    pub(crate) fn runtime(&self, base: &RuntimeEnv) -> RuntimeEnv {
        RuntimeEnv {
            memory_pool: Arc::new(QueryPool::new(
                self.query_bytes_max,
                self.server.clone().unwrap_or_default(),
            )),
            disk_manager: self
                .spill
                .clone()
                .unwrap_or_else(|| base.disk_manager.clone()),
            cache_manager: base.cache_manager.clone(),
            object_store_registry: base.object_store_registry.clone(),
        }
    }
}

/// A query's memory pool: a [`FairSpillPool`] of the query's limit whose reservations also
/// come from the server's budget, and are counted in [`query_memory_in_use`].
///
/// Fair, not greedy: each operator that can spill (a sort's or an aggregation's partition, a
/// repartition) may hold at most an even share of what the operators that cannot spill
/// leave. A greedy pool let one sort partition fill the limit to the last byte, and then an
/// operator that cannot spill (a merge, another partition that had spilled everything) failed
/// the query for want of room for one batch. The share must still take a batch: a limit
/// below about (spilling operators) x (twice a batch of 65,536 rows) fails such queries.
#[derive(Debug)]
pub(crate) struct QueryPool {
    query: FairSpillPool,
    server: Arc<ServerMemory>,
}

impl QueryPool {
    /// A pool of at most `query_bytes_max` (0: no limit of its own) within `server`.
    pub(crate) fn new(query_bytes_max: usize, server: Arc<ServerMemory>) -> QueryPool {
        let bytes = if query_bytes_max == 0 {
            usize::MAX
        } else {
            query_bytes_max
        };
        QueryPool {
            query: FairSpillPool::new(bytes),
            server,
        }
    }
}

impl fmt::Display for QueryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.query, f)
    }
}

impl MemoryPool for QueryPool {
    fn name(&self) -> &str {
        self.query.name()
    }

    fn register(&self, consumer: &MemoryConsumer) {
        self.query.register(consumer);
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.query.unregister(consumer);
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.query.grow(reservation, additional);
        self.server.grow(additional);
        IN_USE.fetch_add(additional, Ordering::Relaxed);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.query.shrink(reservation, shrink);
        self.server.shrink(shrink);
        IN_USE.fetch_sub(shrink, Ordering::Relaxed);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        self.query.try_grow(reservation, additional)?;
        if let Err(left) = self.server.try_grow(additional) {
            self.query.shrink(reservation, additional);
            return Err(server_exhausted(additional, left, self.server.bytes_max));
        }
        IN_USE.fetch_add(additional, Ordering::Relaxed);
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.query.reserved()
    }

    fn memory_limit(&self) -> MemoryLimit {
        self.query.memory_limit()
    }
}

/// The refusal of a reservation the server's budget cannot take, for people.
fn server_exhausted(additional: usize, left: usize, bytes_max: usize) -> DataFusionError {
    DataFusionError::ResourcesExhausted(format!(
        "the server is out of memory for queries: this query asked for {} more with {} left of \
         the {} all running queries share (the server's --memory-bytes-max); try again when \
         fewer queries run",
        human_bytes(additional),
        human_bytes(left),
        human_bytes(bytes_max)
    ))
}

/// `bytes` for people: `77.3 MB`, `512 B`.
fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Names DataFusion gives the directories it spills into (`datafusion-XXXXXX`).
const SPILL_DIR_PREFIX: &str = "datafusion-";

/// A disk manager that spills into `dir` (created if missing) and at most `bytes_max` bytes
/// at once over all queries; a query that would spill more fails with SQLSTATE 53400. What
/// earlier processes spilled there (their `datafusion-*` directories) is removed first:
/// spill files live only as long as their query, so any left are a crashed process's.
pub fn spill_disk_manager(dir: &Path, bytes_max: u64) -> std::io::Result<Arc<DiskManager>> {
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(SPILL_DIR_PREFIX)
        {
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
    }
    let manager = DiskManagerBuilder::default()
        .with_mode(DiskManagerMode::Directories(vec![dir.to_path_buf()]))
        .with_max_temp_directory_size(bytes_max)
        .build()
        .map_err(std::io::Error::other)?;
    Ok(Arc::new(manager))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(query_bytes_max: usize, server: &Arc<ServerMemory>) -> Arc<dyn MemoryPool> {
        Arc::new(QueryPool::new(query_bytes_max, server.clone()))
    }

    #[test]
    fn reservations_are_counted_and_released() {
        let server = Arc::new(ServerMemory::new(0));
        let pool = pool(1000, &server);
        let before = query_memory_in_use();
        let r = MemoryConsumer::new("t").register(&pool);
        r.try_grow(600).unwrap();
        assert!(query_memory_in_use() >= before + 600);
        assert_eq!(server.reserved(), 600);
        // Over the limit: refused, and not counted.
        assert!(r.try_grow(600).is_err());
        assert_eq!(server.reserved(), 600);
        r.shrink(100);
        r.grow(50);
        assert_eq!(pool.reserved(), 550);
        assert_eq!(server.reserved(), 550);
        drop(r);
        assert_eq!(pool.reserved(), 0);
        assert_eq!(server.reserved(), 0);
    }

    /// Queries within their own limits together get at most the server's budget; a refusal
    /// names the server's flag and leaves both pools as they were; freed memory is granted
    /// again.
    #[test]
    fn queries_share_the_server_budget() {
        let server = Arc::new(ServerMemory::new(1000));
        let (a, b) = (pool(800, &server), pool(800, &server));
        let ra = MemoryConsumer::new("a").register(&a);
        let rb = MemoryConsumer::new("b").register(&b);
        ra.try_grow(700).unwrap();
        let refused = rb.try_grow(400).expect_err("over the server's budget");
        assert!(
            matches!(refused, DataFusionError::ResourcesExhausted(_)),
            "{refused}"
        );
        let text = refused.to_string();
        assert!(text.contains("--memory-bytes-max"), "{text}");
        assert!(text.contains("300 B left"), "{text}");
        assert_eq!((b.reserved(), server.reserved()), (0, 700));
        rb.try_grow(300).unwrap();
        assert_eq!(server.reserved(), 1000);
        // The query's own limit still applies first, with DataFusion's message.
        let own = ra.try_grow(200).expect_err("over the query's limit");
        assert!(!own.to_string().contains("--memory-bytes-max"), "{own}");
        drop(ra);
        assert_eq!(server.reserved(), 300);
        rb.try_grow(500).unwrap();
        assert_eq!((b.reserved(), server.reserved()), (800, 800));
        drop(rb);
        assert_eq!(server.reserved(), 0);
    }

    /// Growth that cannot be refused is counted past the budget, and then refuses others.
    #[test]
    fn infallible_growth_counts_past_the_budget() {
        let server = Arc::new(ServerMemory::new(100));
        let (a, b) = (pool(0, &server), pool(0, &server));
        let ra = MemoryConsumer::new("a").register(&a);
        ra.grow(150);
        assert_eq!(server.reserved(), 150);
        let rb = MemoryConsumer::new("b").register(&b);
        assert!(rb.try_grow(1).is_err());
        drop(ra);
        rb.try_grow(100).unwrap();
    }

    /// An ORDER BY over stored rows is charged for the rows it holds, not for the mapped
    /// files its batches were cut from: 1M rows of two 8-byte columns (16 MB, two 8 MB files)
    /// sort within 96 MB, without spilling. Charged at the files' size, every batch of 8,192
    /// rows cost 16 MB and the sort ran out after a few.
    #[tokio::test]
    async fn sorting_stored_rows_is_charged_for_the_rows() {
        let (mut engine, _dir) = crate::exec::scan::tests::engine_with(&[
            "CREATE TABLE big (k BIGINT, v DOUBLE)",
            "INSERT INTO big SELECT value, (value * 7919) % 1000003 FROM \
             generate_series(1, 1000000)",
        ])
        .await;
        engine.set_query_memory_bytes_max(96 << 20);
        let no_spill = DiskManagerBuilder::default()
            .with_mode(DiskManagerMode::Disabled)
            .build()
            .expect("disk manager");
        engine.set_spill(Arc::new(no_spill));
        for _ in 0..3 {
            let out = engine
                .execute("SELECT k, v FROM big ORDER BY v DESC, k")
                .await
                .expect("sorted within the limit");
            let rows: usize = out[0].batches.iter().map(|b| b.num_rows()).sum();
            assert_eq!(rows, 1_000_000);
        }
    }

    /// Leftover spill directories of an earlier process are removed; other files are not.
    #[test]
    fn the_spill_directory_is_emptied_of_old_spills() {
        let dir = tempfile::tempdir().expect("temp dir");
        let spill = dir.path().join(".spill");
        let old = spill.join("datafusion-abc123");
        std::fs::create_dir_all(&old).expect("old spill");
        std::fs::write(old.join("sort.arrow"), b"x").expect("old file");
        std::fs::write(spill.join("keep.txt"), b"x").expect("other file");
        let manager = spill_disk_manager(&spill, 1 << 20).expect("disk manager");
        assert!(!old.exists());
        assert!(spill.join("keep.txt").exists());
        let file = manager.create_tmp_file("test").expect("temp file");
        let path = file.path().expect("a local file");
        assert!(path.starts_with(&spill), "{path:?}");
    }
}

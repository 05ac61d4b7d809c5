//! Query memory in use, process-wide: every memory pool a bounded query runs with counts its
//! reservations into one atomic, which `sundial_query_memory_bytes` reads at scrape time.
//!
//! ```text
//!  operator ─reserve─▶ CountedPool ─▶ GreedyMemoryPool (the query's limit)
//!                          └─ on success: IN_USE += bytes     (shrink: IN_USE -= bytes)
//! ```
//!
//! Invariant: `IN_USE` changes only by what the inner pool actually granted or released, so it
//! returns to its earlier value once every reservation of a query is freed. One relaxed atomic
//! add per reservation change (operators reserve per batch, not per row).

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::error::Result;
use datafusion::execution::memory_pool::{
    GreedyMemoryPool, MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

static IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Bytes that running queries' operators hold from their memory pools, over all queries of the
/// process with a memory limit (`--query-memory-bytes-max`).
pub fn query_memory_in_use() -> usize {
    IN_USE.load(Ordering::Relaxed)
}

/// A query's memory pool: a [`GreedyMemoryPool`] whose reservations are also counted in
/// [`query_memory_in_use`].
#[derive(Debug)]
pub(crate) struct CountedPool(GreedyMemoryPool);

impl CountedPool {
    pub(crate) fn new(bytes: usize) -> CountedPool {
        CountedPool(GreedyMemoryPool::new(bytes))
    }
}

impl fmt::Display for CountedPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl MemoryPool for CountedPool {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn register(&self, consumer: &MemoryConsumer) {
        self.0.register(consumer);
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.0.unregister(consumer);
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.0.grow(reservation, additional);
        IN_USE.fetch_add(additional, Ordering::Relaxed);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.0.shrink(reservation, shrink);
        IN_USE.fetch_sub(shrink, Ordering::Relaxed);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        self.0.try_grow(reservation, additional)?;
        IN_USE.fetch_add(additional, Ordering::Relaxed);
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.0.reserved()
    }

    fn memory_limit(&self) -> MemoryLimit {
        self.0.memory_limit()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn reservations_are_counted_and_released() {
        let pool: Arc<dyn MemoryPool> = Arc::new(CountedPool::new(1000));
        let before = query_memory_in_use();
        let r = MemoryConsumer::new("t").register(&pool);
        r.try_grow(600).unwrap();
        assert!(query_memory_in_use() >= before + 600);
        // Over the limit: refused, and not counted.
        assert!(r.try_grow(600).is_err());
        r.shrink(100);
        r.grow(50);
        assert_eq!(pool.reserved(), 550);
        drop(r);
        assert_eq!(pool.reserved(), 0);
    }
}

//! Bulk loads (`/imp`, `sundial import`, COPY FROM) through the table's sink, in bounded chunks.
//!
//! ```text
//!  loader ─push(batch)─▶ BulkLoad: chunk (≤ chunk_bytes, in memory, uncommitted)
//!                            │ chunk full, or finish()
//!                            ▼
//!  ILP receivers ─batch─▶ TableSink ◀─ the whole chunk, one ticket (waits like an INSERT)
//!                            │ one commit: the chunk with whatever else is pending
//!                            ▼
//!                  TableWriter::append + commit (writer held only during the commit)
//! ```
//!
//! A bulk load never holds the table's writer between commits, so other writers (ILP senders,
//! INSERTs) commit between its chunks instead of waiting for the whole load.
//!
//! Invariants:
//! - at most `chunk_bytes` (Arrow memory) plus one batch wait in a load before they are handed
//!   to the sink;
//! - a chunk is committed whole or not at all: its batches travel under one ticket, and should
//!   a commit shared with other writers fail, the chunk is committed again alone;
//! - rows are committed chunk by chunk, in push order: after an error (a refused batch or a
//!   failed commit), the chunks committed before stay and the uncommitted one is discarded, as
//!   it is when the load is dropped without [`BulkLoad::finish`]. A load that fits in one chunk
//!   is therefore atomic.

use std::sync::Arc;

use arrow_array::RecordBatch;

use sundial_metrics::RowSource;

use crate::error::IngestError;
use crate::sink::{Sinks, TableSink, canonical_batch};

impl Sinks {
    /// A bulk load into `table` that commits through its sink every `chunk_bytes` of rows;
    /// each commit waits first while `pending_rows_max` rows are pending for the table.
    pub fn bulk(
        &self,
        table: &Arc<sundial_storage::Table>,
        chunk_bytes: usize,
        pending_rows_max: usize,
    ) -> BulkLoad {
        BulkLoad {
            sink: self.sink(table),
            chunk: Vec::new(),
            held_bytes: 0,
            chunk_bytes,
            pending_rows_max,
            committed_rows: 0,
            source: RowSource::Imp,
        }
    }
}

/// One bulk load: batches gathered into chunks, each committed as one transaction through the
/// table's sink (see the module docs).
pub struct BulkLoad {
    sink: Arc<TableSink>,
    /// Batches not yet committed, in push order.
    chunk: Vec<RecordBatch>,
    /// Arrow memory of `chunk`.
    held_bytes: usize,
    /// A chunk is committed once it holds this much.
    chunk_bytes: usize,
    pending_rows_max: usize,
    committed_rows: u64,
    /// The ingestion path its rows are counted under (`sundial_rows_ingested_total`).
    source: RowSource,
}

impl BulkLoad {
    /// Counts the load's rows under `source` (by default `/imp`, whose loader the CSV import
    /// shares).
    pub fn counted_as(mut self, source: RowSource) -> BulkLoad {
        self.source = source;
        self
    }

    /// Adds a batch (its columns must be the table's; their types are cast to the sink's).
    /// Commits the chunk once it holds `chunk_bytes`; returns the rows this call committed. On
    /// error the uncommitted chunk is discarded.
    pub fn push(&mut self, batch: RecordBatch) -> Result<u64, IngestError> {
        if batch.num_rows() == 0 {
            return Ok(0);
        }
        let batch = match canonical_batch(self.sink.table(), batch) {
            Ok(b) => b,
            Err(e) => {
                self.discard();
                return Err(e);
            }
        };
        self.held_bytes += batch.get_array_memory_size();
        self.chunk.push(batch);
        if self.held_bytes >= self.chunk_bytes {
            self.commit_chunk()
        } else {
            Ok(0)
        }
    }

    /// Rows committed so far.
    pub fn committed_rows(&self) -> u64 {
        self.committed_rows
    }

    /// Rows pushed and not yet committed.
    pub fn uncommitted_rows(&self) -> usize {
        self.chunk.iter().map(RecordBatch::num_rows).sum()
    }

    /// Commits the rest; returns every row the load committed.
    pub fn finish(mut self) -> Result<u64, IngestError> {
        self.commit_chunk()?;
        Ok(self.committed_rows)
    }

    /// Hands the chunk to the sink as one ticket and waits for its commit.
    fn commit_chunk(&mut self) -> Result<u64, IngestError> {
        let chunk = std::mem::take(&mut self.chunk);
        self.held_bytes = 0;
        if chunk.is_empty() {
            return Ok(0);
        }
        let rows = self.sink.write(chunk, self.pending_rows_max)?;
        self.committed_rows += rows;
        sundial_metrics::metrics().rows_ingested(self.source, rows);
        Ok(rows)
    }

    fn discard(&mut self) {
        self.chunk.clear();
        self.held_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{ArrayRef, Int64Array, StringArray, TimestampNanosecondArray};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    use sundial_storage::{
        ColumnType, Database, Durability, PartitionBy, StorageOptions, Table, TableDef,
    };

    use super::*;

    /// Table `t` (`timestamp`, `v` LONG, `u` UUID) whose writer waits at most `writer_wait_ms`.
    fn table(writer_wait_ms: u64) -> (tempfile::TempDir, Arc<Sinks>, Arc<Table>) {
        let dir = tempfile::tempdir().unwrap();
        let options = StorageOptions {
            durability: Durability::None,
            writer_wait_ms,
            ..StorageOptions::default()
        };
        let db = Database::open(dir.path(), options).unwrap();
        let def = TableDef {
            name: "t".into(),
            columns: vec![
                ("timestamp".into(), ColumnType::Timestamp),
                ("v".into(), ColumnType::Long),
                ("u".into(), ColumnType::Uuid),
            ],
            timestamp: Some("timestamp".into()),
            partition_by: PartitionBy::Day,
            indexed: Vec::new(),
            dedup_keys: Vec::new(),
            ttl: None,
            cold_after: None,
        };
        let table = db.create_table(def, false).unwrap();
        (dir, Sinks::new(db), table)
    }

    const GOOD: &str = "11111111-2222-3333-4444-555555555555";
    /// As long as [`GOOD`] (batches of both take the same memory), but not a UUID.
    const BAD: &str = "zzzzzzzz-2222-3333-4444-555555555555";

    /// Rows `from..to` (timestamp = value), every `u` set to `u`.
    fn rows(from: i64, to: i64, u: &str) -> RecordBatch {
        let n = (to - from) as usize;
        let schema = Schema::new(vec![
            Field::new(
                "timestamp",
                DataType::Timestamp(TimeUnit::Nanosecond, None),
                true,
            ),
            Field::new("v", DataType::Int64, true),
            Field::new("u", DataType::Utf8, true),
        ]);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(from..to)),
            Arc::new(Int64Array::from_iter_values(from..to)),
            Arc::new(StringArray::from(vec![u; n])),
        ];
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    fn count(table: &Table) -> u64 {
        table.snapshot().row_count()
    }

    #[test]
    fn commits_a_chunk_whenever_it_holds_chunk_bytes_and_the_rest_at_finish() {
        let (_dir, sinks, table) = table(30_000);
        let batch_bytes = rows(0, 100, GOOD).get_array_memory_size();
        // Three batches fill a chunk.
        let mut load = sinks.bulk(&table, 3 * batch_bytes, 1000);
        let mut committed = Vec::new();
        for i in 0..7 {
            committed.push(load.push(rows(i * 100, i * 100 + 100, GOOD)).unwrap());
            assert_eq!(count(&table), load.committed_rows());
        }
        assert_eq!(committed, vec![0, 0, 300, 0, 0, 300, 0]);
        assert_eq!(load.uncommitted_rows(), 100);
        assert_eq!(load.finish().unwrap(), 700);
        assert_eq!(count(&table), 700);
    }

    #[test]
    fn a_load_within_one_chunk_is_atomic() {
        let (_dir, sinks, table) = table(30_000);
        let mut load = sinks.bulk(&table, usize::MAX, 1000);
        load.push(rows(0, 100, GOOD)).unwrap();
        load.push(rows(100, 200, BAD)).unwrap();
        load.push(rows(200, 300, GOOD)).unwrap();
        let e = load.finish().unwrap_err();
        assert!(e.to_string().to_lowercase().contains("uuid"), "{e}");
        assert_eq!(count(&table), 0);
        // Dropped without finish: nothing either.
        let mut load = sinks.bulk(&table, usize::MAX, 1000);
        load.push(rows(0, 100, GOOD)).unwrap();
        drop(load);
        assert_eq!(count(&table), 0);
        // The table takes later loads as usual.
        let mut load = sinks.bulk(&table, usize::MAX, 1000);
        load.push(rows(0, 100, GOOD)).unwrap();
        assert_eq!(load.finish().unwrap(), 100);
        assert_eq!(count(&table), 100);
    }

    #[test]
    fn an_error_discards_only_the_uncommitted_chunk() {
        let (_dir, sinks, table) = table(30_000);
        let batch_bytes = rows(0, 100, GOOD).get_array_memory_size();
        let mut load = sinks.bulk(&table, 2 * batch_bytes, 1000);
        load.push(rows(0, 100, GOOD)).unwrap();
        assert_eq!(load.push(rows(100, 200, GOOD)).unwrap(), 200);
        load.push(rows(200, 300, GOOD)).unwrap();
        assert!(load.push(rows(300, 400, BAD)).is_err());
        assert_eq!(count(&table), 200);
        // A batch refused before it is queued (NULL designated timestamp) discards the chunk.
        let mut load = sinks.bulk(&table, usize::MAX, 1000);
        load.push(rows(1000, 1100, GOOD)).unwrap();
        let nulls = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "timestamp",
                DataType::Timestamp(TimeUnit::Nanosecond, None),
                true,
            )])),
            vec![Arc::new(TimestampNanosecondArray::from(vec![None::<i64>]))],
        )
        .unwrap();
        assert!(load.push(nulls).is_err());
        assert_eq!(load.uncommitted_rows(), 0);
        assert_eq!(load.finish().unwrap(), 0);
        assert_eq!(count(&table), 200);
    }

    #[test]
    fn other_writers_commit_while_a_load_is_in_progress() {
        // A writer held for the whole load would make the others fail after 200 ms.
        let (_dir, sinks, table) = table(200);
        let batch_bytes = rows(0, 1000, GOOD).get_array_memory_size();
        let mut load = sinks.bulk(&table, 4 * batch_bytes, 1_000_000);
        load.push(rows(0, 1000, GOOD)).unwrap();
        // Between chunks: another writer commits (it would fail, the table busy, if the load
        // held the writer), the load's rows stay uncommitted.
        assert_eq!(sinks.write(&table, rows(-10, 0, GOOD), 1000).unwrap(), 10);
        assert_eq!(count(&table), 10);
        // During chunks: an ILP-style sender on another thread never fails.
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sender = {
            let (sinks, table, done) = (sinks.clone(), table.clone(), done.clone());
            std::thread::spawn(move || {
                let mut sent = 0;
                while !done.load(std::sync::atomic::Ordering::SeqCst) || sent < 20 {
                    let from = 10_000_000 + sent * 10;
                    assert_eq!(
                        sinks
                            .write(&table, rows(from, from + 10, GOOD), 1000)
                            .unwrap(),
                        10
                    );
                    sent += 1;
                }
                sent
            })
        };
        for i in 1..42 {
            load.push(rows(i * 1000, i * 1000 + 1000, GOOD)).unwrap();
        }
        assert!(load.uncommitted_rows() > 0);
        assert_eq!(load.finish().unwrap(), 42_000);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let sent = sender.join().unwrap() as u64;
        assert_eq!(count(&table), 42_000 + 10 + sent * 10);
    }
}

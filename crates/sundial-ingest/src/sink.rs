//! Where every receiver's rows for one table meet before they are committed.
//!
//! ```text
//!  Ingestor (TCP conn 1) ─batch─┐
//!  Ingestor (TCP conn 2) ─batch─┼─▶ TableSink: pending batches ─▶ sort by timestamp ─▶ append + commit
//!  Ingestor (UDP, HTTP)  ─batch─┘      (bounded: senders wait)      hold back the newest quarter
//! ```
//!
//! Receivers that send the same table in parallel interleave in time: committed one by one,
//! each batch would land out of order against the other receivers' commits and make the storage
//! rewrite the partition. The sink gathers the batches, sorts them together and commits them in
//! timestamp order. A commit triggered by volume keeps the newest quarter of the rows back, so a
//! batch that arrives a little late still lands in order; a commit triggered by time, or
//! requested by HTTP, takes everything.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, RecordBatch, TimestampNanosecondArray, new_null_array};
use arrow_schema::{Field, Schema};
use sundial_storage::{Database, StorageError, Table};

use crate::IngestError;

/// The table sinks of one database, shared by all its receivers.
pub struct Sinks {
    db: Arc<Database>,
    by_table: Mutex<HashMap<String, Arc<TableSink>>>,
}

impl Sinks {
    pub fn new(db: Arc<Database>) -> Arc<Sinks> {
        Arc::new(Sinks {
            db,
            by_table: Mutex::new(HashMap::new()),
        })
    }

    pub fn db(&self) -> &Arc<Database> {
        &self.db
    }

    /// The sink of `table`, made on first use (and again if the table was dropped and created
    /// anew since).
    pub(crate) fn sink(&self, table: &Arc<Table>) -> Arc<TableSink> {
        let mut sinks = lock(&self.by_table);
        let key = table.name().to_lowercase();
        match sinks.get(&key) {
            Some(sink) if Arc::ptr_eq(&sink.table, table) => sink.clone(),
            _ => {
                let sink = Arc::new(TableSink::new(table.clone()));
                sinks.insert(key, sink.clone());
                sink
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind: still usable.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How much of the pending rows a commit takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// All but the newest quarter (by timestamp).
    Older,
    All,
}

#[derive(Default)]
struct Pending {
    batches: Vec<RecordBatch>,
    rows: usize,
    /// When the oldest pending row arrived.
    oldest: Option<Instant>,
}

pub(crate) struct TableSink {
    table: Arc<Table>,
    pending: Mutex<Pending>,
    /// Signalled after every commit, for senders waiting for room.
    committed: Condvar,
    /// Held while committing: one commit at a time, in order.
    committing: Mutex<()>,
}

impl TableSink {
    fn new(table: Arc<Table>) -> TableSink {
        TableSink {
            table,
            pending: Mutex::new(Pending::default()),
            committed: Condvar::new(),
            committing: Mutex::new(()),
        }
    }

    /// Adds a batch. Commits when `commit_rows` are pending (unless another receiver is already
    /// committing); waits while `4 x commit_rows` are pending, so a slow table slows its senders
    /// down instead of filling memory. Returns the rows this call committed.
    pub(crate) fn submit(
        &self,
        batch: RecordBatch,
        arrived: Instant,
        commit_rows: usize,
    ) -> Result<u64, IngestError> {
        let rows_max = commit_rows.saturating_mul(4).max(1);
        {
            let mut pending = lock(&self.pending);
            while pending.rows >= rows_max {
                let (guard, _) = self
                    .committed
                    .wait_timeout(pending, Duration::from_millis(100))
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                pending = guard;
                if pending.rows >= rows_max && self.committing.try_lock().is_ok() {
                    // Nobody is committing: the waiting sender must.
                    break;
                }
            }
            pending.rows += batch.num_rows();
            pending.batches.push(batch);
            pending.oldest = Some(pending.oldest.map_or(arrived, |o| o.min(arrived)));
            if pending.rows < commit_rows {
                return Ok(0);
            }
        }
        match self.committing.try_lock() {
            Ok(guard) => self.commit_locked(guard, Take::Older),
            // Another receiver is committing these rows' predecessors; it will be back.
            Err(_) => Ok(0),
        }
    }

    /// Commits every pending row.
    pub(crate) fn commit_all(&self) -> Result<u64, IngestError> {
        let guard = lock(&self.committing);
        self.commit_locked(guard, Take::All)
    }

    /// Commits every pending row if the oldest has waited `interval`.
    pub(crate) fn commit_due(&self, now: Instant, interval: Duration) -> Result<u64, IngestError> {
        let due = lock(&self.pending)
            .oldest
            .is_some_and(|o| now.duration_since(o) >= interval);
        if due { self.commit_all() } else { Ok(0) }
    }

    fn commit_locked(&self, _guard: MutexGuard<'_, ()>, take: Take) -> Result<u64, IngestError> {
        let (batches, oldest) = {
            let mut pending = lock(&self.pending);
            let oldest = pending.oldest.take();
            pending.rows = 0;
            (std::mem::take(&mut pending.batches), oldest)
        };
        let result = self.commit_batches(batches, oldest, take);
        self.committed.notify_all();
        result
    }

    fn commit_batches(
        &self,
        batches: Vec<RecordBatch>,
        oldest: Option<Instant>,
        take: Take,
    ) -> Result<u64, IngestError> {
        if batches.is_empty() {
            return Ok(0);
        }
        let meta = self.table.meta();
        let timestamp = meta.timestamp_column().map(|c| c.name.clone());
        let (now, later) = match timestamp {
            Some(ts) => sort_and_split(&batches, &ts, take)?,
            // Without a designated timestamp, rows keep their arrival order.
            None => (batches, Vec::new()),
        };
        if !later.is_empty() {
            let mut pending = lock(&self.pending);
            let rows: usize = later.iter().map(RecordBatch::num_rows).sum();
            pending.rows += rows;
            let mut kept = later;
            kept.append(&mut pending.batches);
            pending.batches = kept;
            pending.oldest = match (pending.oldest, oldest) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let rows: usize = now.iter().map(RecordBatch::num_rows).sum();
        if rows == 0 {
            return Ok(0);
        }
        let mut writer = self.table.writer()?;
        for batch in &now {
            writer.append(batch)?;
        }
        writer.commit()?;
        Ok(rows as u64)
    }
}

/// Puts the rows of `batches` in timestamp order (stable: equal timestamps keep arrival order)
/// and splits them into those to commit now and those to keep back.
fn sort_and_split(
    batches: &[RecordBatch],
    timestamp: &str,
    take: Take,
) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>), IngestError> {
    let mut spans = Vec::with_capacity(batches.len());
    for batch in batches {
        spans.push(TimeSpan::of(timestamps_of(batch, timestamp)?));
    }
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let keep_back = match take {
        Take::All => 0,
        Take::Older => rows / 4,
    };
    // Batches that are each in order and do not overlap (the usual case: receivers sending
    // consecutive stretches of time) only need putting in order, not copying.
    let mut by_start: Vec<usize> = (0..batches.len()).collect();
    by_start.sort_by_key(|&i| (spans[i].min, i));
    let disjoint = by_start
        .windows(2)
        .all(|w| spans[w[0]].max <= spans[w[1]].min);
    if disjoint && spans.iter().all(|s| s.sorted) {
        let ordered: Vec<RecordBatch> = by_start.iter().map(|&i| batches[i].clone()).collect();
        return Ok(split_sorted(&ordered, rows - keep_back));
    }
    let mut order: Vec<(i64, u32, u32)> = Vec::with_capacity(rows);
    for (b, batch) in batches.iter().enumerate() {
        for (r, t) in timestamps_of(batch, timestamp)?.iter().enumerate() {
            order.push((*t, b as u32, r as u32));
        }
    }
    order.sort_by_key(|(t, b, r)| (*t, *b, *r));
    let (now, later) = order.split_at(order.len() - keep_back);
    let schema = union_schema(batches);
    let now = gather(batches, &schema, now)?;
    let later = if later.is_empty() {
        Vec::new()
    } else {
        vec![gather(batches, &schema, later)?]
    };
    Ok((vec![now], later))
}

fn timestamps_of<'a>(batch: &'a RecordBatch, timestamp: &str) -> Result<&'a [i64], IngestError> {
    batch
        .column_by_name(timestamp)
        .and_then(|c| c.as_any().downcast_ref::<TimestampNanosecondArray>())
        .map(|ts| ts.values().as_ref())
        .ok_or_else(|| internal(format!("batch without timestamp column '{timestamp}'")))
}

/// The time a batch covers, and whether its rows are in order.
struct TimeSpan {
    min: i64,
    max: i64,
    sorted: bool,
}

impl TimeSpan {
    fn of(ts: &[i64]) -> TimeSpan {
        let mut span = TimeSpan {
            min: i64::MAX,
            max: i64::MIN,
            sorted: true,
        };
        let mut last = i64::MIN;
        for &t in ts {
            span.sorted &= t >= last;
            last = t;
            span.min = span.min.min(t);
            span.max = span.max.max(t);
        }
        span
    }
}

/// Already in order: the first `rows` rows, and the rest, without copying.
fn split_sorted(batches: &[RecordBatch], rows: usize) -> (Vec<RecordBatch>, Vec<RecordBatch>) {
    let (mut now, mut later) = (Vec::new(), Vec::new());
    let mut left = rows;
    for batch in batches {
        let n = batch.num_rows();
        if left >= n {
            now.push(batch.clone());
            left -= n;
        } else if left == 0 {
            later.push(batch.clone());
        } else {
            now.push(batch.slice(0, left));
            later.push(batch.slice(left, n - left));
            left = 0;
        }
    }
    (now, later)
}

/// Every column of any batch, in the order of the batch with the most columns (the newest
/// schema), then any others.
fn union_schema(batches: &[RecordBatch]) -> Arc<Schema> {
    let widest = batches
        .iter()
        .max_by_key(|b| b.num_columns())
        .map(RecordBatch::schema)
        .unwrap_or_else(|| Arc::new(Schema::empty()));
    let mut fields: Vec<Arc<Field>> = widest.fields().iter().cloned().collect();
    for batch in batches {
        for field in batch.schema().fields() {
            if !fields.iter().any(|f| f.name() == field.name()) {
                fields.push(field.clone());
            }
        }
    }
    Arc::new(Schema::new(fields))
}

/// The rows `order` names, as one batch of `schema` (columns a batch lacks are NULL there).
fn gather(
    batches: &[RecordBatch],
    schema: &Arc<Schema>,
    order: &[(i64, u32, u32)],
) -> Result<RecordBatch, IngestError> {
    let indices: Vec<(usize, usize)> = order
        .iter()
        .map(|(_, b, r)| (*b as usize, *r as usize))
        .collect();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let sources: Vec<ArrayRef> = batches
            .iter()
            .map(|b| match b.column_by_name(field.name()) {
                Some(c) if c.data_type() == field.data_type() => c.clone(),
                _ => new_null_array(field.data_type(), b.num_rows()),
            })
            .collect();
        let refs: Vec<&dyn Array> = sources.iter().map(|a| a.as_ref()).collect();
        let column = arrow_select::interleave::interleave(&refs, &indices)
            .map_err(|e| internal(e.to_string()))?;
        columns.push(column);
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| internal(e.to_string()))
}

fn internal(message: String) -> IngestError {
    IngestError::Storage(StorageError::Internal(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;

    fn batch(ts: &[i64], v: Option<&[i64]>) -> RecordBatch {
        let mut fields = vec![Field::new(
            "timestamp",
            arrow_schema::DataType::Timestamp(arrow_schema::TimeUnit::Nanosecond, None),
            true,
        )];
        let mut columns: Vec<ArrayRef> =
            vec![Arc::new(TimestampNanosecondArray::from(ts.to_vec()))];
        if let Some(v) = v {
            fields.push(Field::new("v", arrow_schema::DataType::Int64, true));
            columns.push(Arc::new(Int64Array::from(v.to_vec())));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    fn timestamps(b: &RecordBatch) -> Vec<i64> {
        b.column(0)
            .as_any()
            .downcast_ref::<TimestampNanosecondArray>()
            .unwrap()
            .values()
            .to_vec()
    }

    fn all_timestamps(batches: &[RecordBatch]) -> Vec<i64> {
        batches.iter().flat_map(timestamps).collect()
    }

    #[test]
    fn interleaved_batches_are_sorted_and_the_newest_quarter_waits() {
        let batches = [
            batch(&[1, 3, 5, 7], Some(&[10, 30, 50, 70])),
            batch(&[2, 4, 6, 8], None),
        ];
        let (now, later) = sort_and_split(&batches, "timestamp", Take::Older).unwrap();
        assert_eq!(all_timestamps(&now), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(all_timestamps(&later), vec![7, 8]);
        let v = now[0]
            .column_by_name("v")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .clone();
        assert_eq!(
            v.iter().collect::<Vec<_>>(),
            vec![Some(10), None, Some(30), None, Some(50), None]
        );
        let (now, later) = sort_and_split(&batches, "timestamp", Take::All).unwrap();
        assert_eq!(all_timestamps(&now), (1..=8).collect::<Vec<_>>());
        assert!(later.is_empty());
    }

    #[test]
    fn disjoint_batches_are_reordered_without_copying() {
        let batches = [
            batch(&[5, 6, 7, 8], Some(&[50, 60, 70, 80])),
            batch(&[1, 2, 3, 4], None),
        ];
        let (now, later) = sort_and_split(&batches, "timestamp", Take::Older).unwrap();
        assert_eq!(now.len(), 2);
        assert_eq!(now[1].num_columns(), 2);
        assert_eq!(all_timestamps(&now), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(all_timestamps(&later), vec![7, 8]);
    }

    #[test]
    fn equal_timestamps_keep_arrival_order() {
        let batches = [batch(&[2, 1], Some(&[1, 2])), batch(&[1], Some(&[3]))];
        let (now, _) = sort_and_split(&batches, "timestamp", Take::All).unwrap();
        let v = now[0]
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .values()
            .to_vec();
        assert_eq!(v, vec![2, 3, 1]);
    }

    #[test]
    fn senders_wait_while_a_table_is_far_behind() {
        use sundial_storage::{ColumnType, Durability, PartitionBy, StorageOptions, TableDef};
        let dir = tempfile::tempdir().unwrap();
        let options = StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        };
        let db = Database::open(dir.path(), options).unwrap();
        let def = TableDef {
            name: "t".into(),
            columns: vec![("timestamp".into(), ColumnType::Timestamp)],
            timestamp: Some("timestamp".into()),
            partition_by: PartitionBy::Day,
        };
        let table = db.create_table(def, false).unwrap();
        let sink = Arc::new(TableSink::new(table.clone()));
        // Another receiver is committing: submissions pile up until 4 x commit_rows...
        let committing = lock(&sink.committing);
        for i in 0..4 {
            let ts: Vec<i64> = (i * 4..i * 4 + 4).collect();
            assert_eq!(sink.submit(batch(&ts, None), Instant::now(), 4).unwrap(), 0);
        }
        // ...then the next sender waits.
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sender = {
            let (sink, done) = (sink.clone(), done.clone());
            std::thread::spawn(move || {
                let committed = sink.submit(batch(&[16, 17, 18, 19], None), Instant::now(), 4);
                done.store(true, std::sync::atomic::Ordering::SeqCst);
                committed.unwrap()
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(!done.load(std::sync::atomic::Ordering::SeqCst));
        drop(committing);
        // Once the commit is over, the waiting sender commits all but the newest quarter.
        assert_eq!(sender.join().unwrap(), 15);
        assert_eq!(table.snapshot().row_count(), 15);
        assert_eq!(sink.commit_all().unwrap(), 5);
        assert_eq!(table.snapshot().row_count(), 20);
    }
}

//! Where every receiver's rows for one table meet before they are committed.
//!
//! ```text
//!  Ingestor (TCP conn 1) ─batch─┐
//!  Ingestor (TCP conn 2) ─batch─┼─▶ TableSink: pending batches ─▶ split at a time: the rows to
//!  Ingestor (UDP, HTTP)  ─batch─┘   (bounded: senders wait)       commit now as slices in time
//!                                     │ volume / pause commits:    order, the newer ones back
//!                                     └▶ a commit thread           ─▶ append_all + commit
//! ```
//!
//! Receivers that send the same table in parallel interleave in time: committed one by one,
//! each batch would land out of order against the other receivers' commits and make the storage
//! merge it into the partition. The sink gathers the batches and commits them together in
//! timestamp order. A commit triggered by volume takes only the rows up to the lowest
//! *watermark* of the receivers sending the table (the newest timestamp each has handed over:
//! a receiver's later rows are not older), so a receiver that is behind still lands in order;
//! when that would hold back more than twice `commit_rows` rows, it keeps the newest quarter
//! back instead. A receiver whose sender pauses asks for the rows up to its own watermark.
//! A commit triggered by time (the rows up to the low watermark, and everything once the oldest
//! row waited twice the interval), by a receiver closing, or requested by HTTP, takes
//! everything.
//!
//! Nothing is copied on the way: the rows kept back are slices of the batches, and the rows
//! committed go to storage as slices in time order where the senders' batches interleave in
//! long stretches (the usual case), or as they are, for storage to sort together
//! ([`TableWriter::append_all`](sundial_storage::TableWriter::append_all)).
//!
//! Volume and pause commits run on the sinks' commit threads, so a receiver goes on reading
//! while its rows are committed: one that committed inline fell behind the others meanwhile,
//! and its watermark held their rows back until the sink had to commit past it, so that its
//! next rows were merged into the partition.
//!
//! SQL INSERTs come through [`Sinks::write`], bulk loads through [`Sinks::bulk`] (each chunk
//! one queued entry of several batches): the caller waits until its rows are committed, all in
//! one commit (group commit). While one commit runs, the INSERTs that arrive queue up and the
//! next commit takes them all, so concurrent INSERTs share commits and fsyncs, and ILP rows
//! commit between a bulk load's chunks. Should a shared commit fail, its entries are committed
//! again one by one, so that a bad one fails alone; a batch of ILP rows (which no writer waits
//! for) that storage refuses as invalid is halved until the refused rows are found, so they
//! alone are dropped. Rows whose designated timestamp is outside the range tables hold never
//! reach storage.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arrow_array::{Array, BooleanArray, RecordBatch, TimestampNanosecondArray};
use arrow_schema::{Field, Schema};
use sundial_storage::{
    Database, StorageError, TIMESTAMP_RANGE_TEXT, Table, timestamp_in_range, to_write_type,
};

use crate::error::IngestError;

/// The table sinks of one database, shared by all its receivers.
pub struct Sinks {
    db: Arc<Database>,
    by_table: Mutex<HashMap<String, Arc<TableSink>>>,
    committer: Arc<Committer>,
    committer_threads: Vec<std::thread::JoinHandle<()>>,
}

impl Sinks {
    pub fn new(db: Arc<Database>) -> Arc<Sinks> {
        let committer = Arc::new(Committer::default());
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get() / 2)
            .clamp(1, COMMITTER_THREADS_MAX);
        let committer_threads = (0..threads)
            .filter_map(|i| {
                let committer = committer.clone();
                std::thread::Builder::new()
                    .name(format!("sundial-commit-{i}"))
                    .spawn(move || committer.run())
                    .map_err(|e| tracing::error!("cannot start a commit thread: {e}"))
                    .ok()
            })
            .collect::<Vec<_>>();
        Arc::new(Sinks {
            db,
            by_table: Mutex::new(HashMap::new()),
            committer,
            committer_threads,
        })
    }

    pub fn db(&self) -> &Arc<Database> {
        &self.db
    }

    /// Commits `batch` to `table` together with whatever else is pending there, and returns
    /// once it is committed (or failed): the rows of one call are committed whole or not at all.
    /// Waits first while `pending_rows_max` rows are pending for the table.
    pub fn write(
        &self,
        table: &Arc<Table>,
        batch: RecordBatch,
        pending_rows_max: usize,
    ) -> Result<u64, IngestError> {
        let batch = canonical_batch(table, batch)?;
        let rows = self.sink(table).write(vec![batch], pending_rows_max)?;
        sundial_metrics::metrics().rows_ingested(sundial_metrics::RowSource::Insert, rows);
        Ok(rows)
    }

    /// Rows handed to the sinks and not yet committed, over every table (at this moment; a
    /// commit under way no longer counts its rows).
    pub fn pending_rows(&self) -> u64 {
        let sinks: Vec<Arc<TableSink>> = lock(&self.by_table).values().cloned().collect();
        sinks
            .iter()
            .map(|sink| lock(&sink.pending).rows as u64)
            .sum()
    }

    /// Lets go of the sinks of dropped tables (whose files go with their last handle). The
    /// query engine calls it after DROP TABLE, receivers as they find a table dropped.
    pub fn forget_dropped(&self) {
        lock(&self.by_table).retain(|_, sink| !sink.table.is_dropped());
    }

    /// The sink of `table`, made on first use (and again if the table was dropped and created
    /// anew since). A dropped table gets a sink of its own, never kept: its commits refuse
    /// the rows.
    pub(crate) fn sink(&self, table: &Arc<Table>) -> Arc<TableSink> {
        if table.is_dropped() {
            return Arc::new(TableSink::new(table.clone()));
        }
        let mut sinks = lock(&self.by_table);
        let key = table.name().to_lowercase();
        match sinks.get(&key) {
            Some(sink) if Arc::ptr_eq(&sink.table, table) => sink.clone(),
            _ => {
                let sink = Arc::new_cyclic(|me| {
                    let mut sink = TableSink::new(table.clone());
                    // Without commit threads (none could start), receivers commit themselves.
                    if !self.committer_threads.is_empty() {
                        sink.background = Some(Background {
                            committer: self.committer.clone(),
                            me: me.clone(),
                        });
                    }
                    sink
                });
                sinks.insert(key, sink.clone());
                sink
            }
        }
    }
}

impl Drop for Sinks {
    /// Runs the commits already asked for, then stops the commit threads.
    fn drop(&mut self) {
        lock(&self.committer.queue).stop = true;
        self.committer.work.notify_all();
        for thread in self.committer_threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Most threads that commit receivers' rows in the background.
const COMMITTER_THREADS_MAX: usize = 4;

/// The threads that run the commits receivers ask for (by volume, or as they pause), so that a
/// receiver goes on reading while its rows are committed: a receiver that committed inline fell
/// behind the others while it did, and held every other receiver's rows back (its watermark).
#[derive(Default)]
struct Committer {
    queue: Mutex<CommitQueue>,
    work: Condvar,
}

#[derive(Default)]
struct CommitQueue {
    /// Sinks with a commit asked for, each at most once (`Pending::scheduled`).
    sinks: std::collections::VecDeque<Arc<TableSink>>,
    stop: bool,
}

impl Committer {
    fn schedule(&self, sink: Arc<TableSink>) {
        lock(&self.queue).sinks.push_back(sink);
        self.work.notify_one();
    }

    fn run(&self) {
        loop {
            let sink = {
                let mut queue = lock(&self.queue);
                loop {
                    if let Some(sink) = queue.sinks.pop_front() {
                        break sink;
                    }
                    if queue.stop {
                        return;
                    }
                    queue = self
                        .work
                        .wait(queue)
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                }
            };
            if let Err(e) = sink.commit_requested() {
                tracing::error!("commit to '{}' failed: {e}", sink.table.name());
            }
        }
    }
}

/// How a sink reaches the commit threads.
struct Background {
    committer: Arc<Committer>,
    me: std::sync::Weak<TableSink>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind: still usable.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How much of the pending rows a commit takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// The rows up to `up_to` (the receivers' low watermark), when that keeps at most
    /// `keep_max` rows back; else all but the newest quarter (by timestamp).
    Older {
        up_to: Option<i64>,
        keep_max: usize,
    },
    /// The rows up to this timestamp (in a deduplicating table, before it: see
    /// `split_by_time`).
    UpTo(i64),
    /// The rows up to this timestamp, in every table: a pausing receiver's rows must all become
    /// visible.
    Through(i64),
    All,
}

/// A receiver's watermark older than this no longer holds rows back: the receiver stopped
/// sending this table without committing (it commits when it pauses or closes).
const WATERMARK_TTL: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Pending {
    batches: Vec<Queued>,
    rows: usize,
    /// When the oldest pending row arrived.
    oldest: Option<Instant>,
    /// Per receiver sending rows (an `Ingestor`), the newest timestamp it has handed over and
    /// when. A receiver sends its rows in time order, so none of its next rows is older than
    /// its watermark: committing only rows up to the lowest watermark lands every later row
    /// in order, where committing newer rows would make the storage merge the partition again.
    watermarks: HashMap<u64, (i64, Instant)>,
    /// The sink is queued for a commit thread.
    scheduled: bool,
    /// Receivers that paused asked for their rows up to this timestamp to be committed.
    pause_up_to: Option<i64>,
    /// The `commit_rows` of the receivers that submit rows (a volume commit is due at it).
    commit_rows: usize,
}

impl Pending {
    /// The lowest watermark of the receivers that sent within [`WATERMARK_TTL`] of `now`.
    fn low_watermark(&mut self, now: Instant) -> Option<i64> {
        self.watermarks
            .retain(|_, (_, seen)| now.saturating_duration_since(*seen) < WATERMARK_TTL);
        self.watermarks.values().map(|(ts, _)| *ts).min()
    }
}

struct Queued {
    /// Committed together, in one transaction: one batch from a receiver, or a writer's whole
    /// chunk.
    batches: Vec<RecordBatch>,
    /// When its oldest row arrived.
    arrived: Instant,
    /// Where a waiting writer learns the outcome of the commit that takes this batch. While
    /// any pending batch has one, commits take every row (none is kept back).
    ticket: Option<Arc<Ticket>>,
}

impl Queued {
    fn untracked(batch: RecordBatch, arrived: Instant) -> Queued {
        Queued {
            batches: vec![batch],
            arrived,
            ticket: None,
        }
    }

    fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// The outcome of one waiting writer's batch, set once by the commit that takes it.
#[derive(Default)]
struct Ticket {
    outcome: Mutex<Option<Result<u64, IngestError>>>,
}

impl Ticket {
    fn set(&self, outcome: Result<u64, IngestError>) {
        *lock(&self.outcome) = Some(outcome);
    }

    fn take(&self) -> Option<Result<u64, IngestError>> {
        lock(&self.outcome).take()
    }
}

pub(crate) struct TableSink {
    table: Arc<Table>,
    pending: Mutex<Pending>,
    /// Signalled after every commit, for senders waiting for room.
    committed: Condvar,
    /// Held while committing: one commit at a time, in order.
    committing: Mutex<()>,
    /// Where volume and pause commits run; `None`: in the receiver that asks.
    background: Option<Background>,
}

impl TableSink {
    fn new(table: Arc<Table>) -> TableSink {
        TableSink {
            table,
            pending: Mutex::new(Pending::default()),
            committed: Condvar::new(),
            committing: Mutex::new(()),
            background: None,
        }
    }

    /// Queues this sink for a commit thread, unless it is queued already. Returns false when
    /// there are no commit threads: the caller commits.
    fn schedule(&self, pending: &mut Pending) -> bool {
        let Some(background) = &self.background else {
            return false;
        };
        if !pending.scheduled
            && let Some(me) = background.me.upgrade()
        {
            pending.scheduled = true;
            background.committer.schedule(me);
        }
        true
    }

    /// What a commit thread runs: a pause commit (the rows up to the paused receivers'
    /// watermarks, or to the low watermark if that is later), else a volume commit once
    /// `commit_rows` are pending (as [`TableSink::submit`] describes).
    fn commit_requested(&self) -> Result<u64, IngestError> {
        let guard = lock(&self.committing);
        let take = {
            let mut pending = lock(&self.pending);
            pending.scheduled = false;
            let low = pending.low_watermark(Instant::now());
            let commit_rows = pending.commit_rows;
            match pending.pause_up_to.take() {
                // Past the low watermark, rows at it wait as for any commit; the pausing
                // receiver's rows all go.
                Some(mark) => match low {
                    Some(low) if low > mark => Take::UpTo(low),
                    _ => Take::Through(mark),
                },
                None if commit_rows > 0 && pending.rows >= commit_rows => Take::Older {
                    up_to: low,
                    keep_max: commit_rows.saturating_mul(2),
                },
                None => return Ok(0),
            }
        };
        self.commit_locked(guard, take)
    }

    /// Asks for `receiver`'s rows to be committed as it pauses: on a commit thread, or here
    /// when there are none. The receiver's watermark is forgotten (as by [`TableSink::leave`]);
    /// rows of other receivers after it stay pending.
    pub(crate) fn commit_paused(&self, receiver: u64) -> Result<u64, IngestError> {
        let mark = {
            let mut pending = lock(&self.pending);
            // No watermark (a table without a designated timestamp, or one it lost by sending
            // nothing for a while): everything.
            let mark = pending
                .watermarks
                .remove(&receiver)
                .map_or(i64::MAX, |(ts, _)| ts);
            if pending.rows == 0 {
                return Ok(0);
            }
            pending.pause_up_to = Some(pending.pause_up_to.map_or(mark, |m| m.max(mark)));
            if self.schedule(&mut pending) {
                return Ok(0);
            }
            mark
        };
        let guard = lock(&self.committing);
        lock(&self.pending).pause_up_to = None;
        self.commit_locked(guard, Take::Through(mark))
    }

    pub(crate) fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Adds a batch. Commits when `commit_rows` are pending (unless another receiver is already
    /// committing); waits while `4 x commit_rows` are pending, so a slow table slows its senders
    /// down instead of filling memory. Returns the rows this call committed.
    pub(crate) fn submit(
        &self,
        batch: RecordBatch,
        arrived: Instant,
        commit_rows: usize,
        receiver: u64,
    ) -> Result<u64, IngestError> {
        let newest = match self.table.meta().timestamp_column() {
            Some(ts) => timestamps_of(&batch, &ts.name)?.iter().max().copied(),
            None => None,
        };
        let up_to = {
            let mut pending = self.room(commit_rows.saturating_mul(4), true);
            pending.push(Queued::untracked(batch, arrived));
            pending.commit_rows = commit_rows;
            let now = Instant::now();
            if let Some(newest) = newest {
                let mark = pending.watermarks.entry(receiver).or_insert((newest, now));
                *mark = (mark.0.max(newest), now);
            }
            if pending.rows < commit_rows || self.schedule(&mut pending) {
                return Ok(0);
            }
            pending.low_watermark(now)
        };
        match self.committing.try_lock() {
            // Held rows stay within half the bound on pending rows (`room`), so senders only
            // wait for a table that is truly behind.
            Ok(guard) => self.commit_locked(
                guard,
                Take::Older {
                    up_to,
                    keep_max: commit_rows.saturating_mul(2),
                },
            ),
            // Another receiver is committing these rows' predecessors; it will be back.
            Err(_) => Ok(0),
        }
    }

    /// Adds `batches` and waits until a commit has taken them (all in that one commit); that
    /// commit's outcome for them.
    pub(crate) fn write(
        &self,
        batches: Vec<RecordBatch>,
        pending_rows_max: usize,
    ) -> Result<u64, IngestError> {
        let ticket = Arc::new(Ticket::default());
        self.room(pending_rows_max, false).push(Queued {
            batches,
            arrived: Instant::now(),
            ticket: Some(ticket.clone()),
        });
        loop {
            // Whoever holds `committing` now either takes the batch or leaves it for the next
            // holder: commits take every pending batch while one has a ticket.
            let guard = lock(&self.committing);
            if let Some(outcome) = ticket.take() {
                return outcome;
            }
            if let Err(e) = self.commit_locked(guard, Take::All) {
                tracing::error!("commit to '{}' failed: {e}", self.table.name());
            }
            if let Some(outcome) = ticket.take() {
                return outcome;
            }
        }
    }

    /// The pending rows once there are fewer than `rows_max` of them (waiting for commits, or
    /// going ahead when nobody is committing). With `volume` (rows of a receiver, which ask
    /// for volume commits) and commit threads, a sender that finds nobody committing asks a
    /// commit thread and goes on waiting: a volume commit keeps back at most half the bound.
    fn room(&self, rows_max: usize, volume: bool) -> MutexGuard<'_, Pending> {
        let rows_max = rows_max.max(1);
        let mut pending = lock(&self.pending);
        while pending.rows >= rows_max {
            let (guard, _) = self
                .committed
                .wait_timeout(pending, Duration::from_millis(100))
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            pending = guard;
            if pending.rows >= rows_max && self.committing.try_lock().is_ok() {
                // Nobody is committing: a commit thread must, or else the waiting sender.
                if !(volume && pending.commit_rows > 0 && self.schedule(&mut pending)) {
                    break;
                }
            }
        }
        pending
    }

    /// Forgets `receiver`'s watermark: it committed its rows (it paused or closed), and rows
    /// it sends later start a new one.
    pub(crate) fn leave(&self, receiver: u64) {
        lock(&self.pending).watermarks.remove(&receiver);
    }

    /// Commits every pending row.
    pub(crate) fn commit_all(&self) -> Result<u64, IngestError> {
        let guard = lock(&self.committing);
        self.commit_locked(guard, Take::All)
    }

    /// Commits once the oldest pending row has waited `interval`: the rows up to the
    /// receivers' low watermark (the rows past it belong to receivers ahead of one still
    /// sending older rows), and every row once the oldest has waited twice that.
    pub(crate) fn commit_due(&self, now: Instant, interval: Duration) -> Result<u64, IngestError> {
        let take = {
            let mut pending = lock(&self.pending);
            let waited = pending.oldest.map(|o| now.saturating_duration_since(o));
            match waited {
                Some(w) if w >= interval * 2 => Take::All,
                Some(w) if w >= interval => match pending.low_watermark(now) {
                    Some(mark) => Take::UpTo(mark),
                    None => Take::All,
                },
                _ => return Ok(0),
            }
        };
        let guard = lock(&self.committing);
        self.commit_locked(guard, take)
    }

    fn commit_locked(&self, _guard: MutexGuard<'_, ()>, take: Take) -> Result<u64, IngestError> {
        let queued = {
            let mut pending = lock(&self.pending);
            pending.oldest = None;
            pending.rows = 0;
            std::mem::take(&mut pending.batches)
        };
        let result = if self.table.is_dropped() {
            self.discard_dropped(queued)
        } else {
            self.commit_queued(queued, take)
        };
        self.committed.notify_all();
        result
    }

    /// The rows of a dropped table go nowhere: waiting writers learn it was dropped, rows no
    /// one waits for (ILP) are discarded.
    fn discard_dropped(&self, queued: Vec<Queued>) -> Result<u64, IngestError> {
        let name = self.table.name();
        let mut discarded = 0;
        for q in queued {
            match q.ticket {
                Some(ticket) => ticket.set(Err(IngestError::Storage(StorageError::NotFound(
                    format!("table '{name}' was dropped"),
                )))),
                None => discarded += q.rows(),
            }
        }
        if discarded > 0 {
            tracing::info!("{discarded} row(s) for dropped table '{name}' discarded");
        }
        Ok(0)
    }

    /// Commits the drained batches and tells their waiting writers. When a shared commit fails
    /// and writers wait, each batch is committed alone, so only a bad one fails.
    fn commit_queued(&self, queued: Vec<Queued>, take: Take) -> Result<u64, IngestError> {
        let tracked = queued.iter().any(|q| q.ticket.is_some());
        let arrived = |q: &Queued| {
            let at = q.arrived;
            q.batches
                .iter()
                .map(move |b| (b.clone(), at))
                .collect::<Vec<_>>()
        };
        if !tracked {
            let batches = queued.iter().flat_map(arrived).collect();
            return self.commit_untracked(batches, take);
        }
        let batches = queued.iter().flat_map(arrived).collect();
        let shared = self.commit_batches(batches, Take::All);
        match shared {
            Ok(rows) => {
                for q in &queued {
                    if let Some(ticket) = &q.ticket {
                        ticket.set(Ok(q.rows() as u64));
                    }
                }
                Ok(rows)
            }
            Err(e) if queued.len() == 1 => {
                let message = e.to_string();
                if let Some(ticket) = &queued[0].ticket {
                    ticket.set(Err(e));
                }
                Err(IngestError::Rejected(message))
            }
            Err(_) => self.commit_one_by_one(queued),
        }
    }

    fn commit_one_by_one(&self, queued: Vec<Queued>) -> Result<u64, IngestError> {
        let mut rows = 0;
        let mut first_error = None;
        for q in queued {
            let at = q.arrived;
            let batches = q.batches.into_iter().map(|b| (b, at)).collect();
            match q.ticket {
                Some(ticket) => {
                    let outcome = self.commit_batches(batches, Take::All);
                    if let Ok(n) = &outcome {
                        rows += n;
                    }
                    ticket.set(outcome);
                }
                None => match self.commit_untracked(batches, Take::All) {
                    Ok(n) => rows += n,
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                },
            }
        }
        first_error.map_or(Ok(rows), Err)
    }

    /// Commits rows no writer waits for (ILP). Should the commit fail, no other row is lost
    /// for it: the rows that were to be committed are tried again batch by batch, and a batch
    /// that storage refuses as invalid is halved until the refused rows are found; only those
    /// are dropped. Returns the rows committed, or the first error once the rest is committed.
    fn commit_untracked(
        &self,
        batches: Vec<(RecordBatch, Instant)>,
        take: Take,
    ) -> Result<u64, IngestError> {
        let Some(now) = self.split_for_commit(batches, take)? else {
            return Ok(0);
        };
        match self.append_and_commit(&now) {
            Ok(rows) => Ok(rows),
            Err(e) => {
                tracing::warn!(
                    "commit to '{}' failed ({e}); committing its batches one by one",
                    self.table.name()
                );
                let mut salvage = Salvage::default();
                for batch in now {
                    self.commit_or_halve(batch, &mut salvage);
                }
                match salvage.first_error {
                    None => Ok(salvage.rows),
                    Some(e) => Err(e.into()),
                }
            }
        }
    }

    /// Commits `batch` alone; when storage refuses it as invalid, commits each half the same
    /// way, so that only the rows it refuses on their own are dropped. Every other failure, or
    /// a spent budget, drops the batch.
    fn commit_or_halve(&self, batch: RecordBatch, salvage: &mut Salvage) {
        let rows = batch.num_rows();
        let error = match self.append_and_commit(std::slice::from_ref(&batch)) {
            Ok(n) => {
                salvage.rows += n;
                return;
            }
            Err(e) => e,
        };
        let invalid = matches!(error, StorageError::InvalidInput(_));
        if invalid && rows > 1 && salvage.failures < SALVAGE_FAILURES_MAX {
            salvage.failures += 1;
            let half = rows / 2;
            self.commit_or_halve(batch.slice(0, half), salvage);
            self.commit_or_halve(batch.slice(half, rows - half), salvage);
            return;
        }
        tracing::error!("{rows} row(s) for '{}' dropped: {error}", self.table.name());
        salvage.failures += 1;
        salvage.first_error.get_or_insert(error);
    }

    /// Appends `batches` and commits them as one commit; on failure nothing of them is kept.
    fn append_and_commit(&self, batches: &[RecordBatch]) -> Result<u64, StorageError> {
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows == 0 {
            return Ok(0);
        }
        let mut writer = self.table.writer()?;
        // A failed append or commit leaves nothing of this writer's rows behind.
        writer.append_all(batches)?;
        writer.commit()?;
        Ok(rows as u64)
    }

    fn commit_batches(
        &self,
        batches: Vec<(RecordBatch, Instant)>,
        take: Take,
    ) -> Result<u64, IngestError> {
        match self.split_for_commit(batches, take)? {
            Some(now) => Ok(self.append_and_commit(&now)?),
            None => Ok(0),
        }
    }

    /// Splits `batches` (each with when it arrived) into the rows to commit now, in an order
    /// that [`TableWriter::append_all`](sundial_storage::TableWriter::append_all) puts in
    /// timestamp order (`None` when there are none), and the newest rows `take` keeps back,
    /// which go back to the pending rows with their arrival. Neither is copied: they are slices
    /// of the batches (or, for a batch not in time order, its rows filtered). Rows whose
    /// designated timestamp is outside the range tables hold are dropped (every ingestion path
    /// refuses them before they get here; storage could not take them).
    fn split_for_commit(
        &self,
        batches: Vec<(RecordBatch, Instant)>,
        take: Take,
    ) -> Result<Option<Vec<RecordBatch>>, IngestError> {
        if batches.is_empty() {
            return Ok(None);
        }
        let meta = self.table.meta();
        let (now, later) = match meta.timestamp_column().map(|c| c.name.clone()) {
            Some(ts) => {
                let batches = self.drop_out_of_range(batches, &ts)?;
                split_by_time(batches, &ts, take, meta.deduplicates())?
            }
            // Without a designated timestamp, rows keep their arrival order.
            None => (batches.into_iter().map(|(b, _)| b).collect(), Vec::new()),
        };
        tracing::debug!(
            "'{}': commit {take:?}: {} rows now, {} kept back",
            self.table.name(),
            now.iter().map(RecordBatch::num_rows).sum::<usize>(),
            later.iter().map(|(b, _)| b.num_rows()).sum::<usize>()
        );
        if !later.is_empty() {
            let mut pending = lock(&self.pending);
            let mut kept = Vec::with_capacity(later.len() + pending.batches.len());
            for (batch, arrived) in later {
                pending.rows += batch.num_rows();
                pending.oldest = Some(pending.oldest.map_or(arrived, |o| o.min(arrived)));
                kept.push(Queued::untracked(batch, arrived));
            }
            kept.append(&mut pending.batches);
            pending.batches = kept;
        }
        let rows: usize = now.iter().map(RecordBatch::num_rows).sum();
        Ok((rows > 0).then_some(now))
    }

    /// `batches` without the rows whose designated timestamp `ts` is outside the range tables
    /// hold; a batch all in range is kept as it is.
    fn drop_out_of_range(
        &self,
        batches: Vec<(RecordBatch, Instant)>,
        ts: &str,
    ) -> Result<Vec<(RecordBatch, Instant)>, IngestError> {
        let mut kept = Vec::with_capacity(batches.len());
        for (batch, arrived) in batches {
            let values = timestamps_of(&batch, ts)?;
            if values.iter().all(|t| timestamp_in_range(*t)) {
                kept.push((batch, arrived));
                continue;
            }
            let in_range: BooleanArray = values
                .iter()
                .map(|t| Some(timestamp_in_range(*t)))
                .collect();
            let dropped = in_range.false_count();
            let first = values.iter().find(|t| !timestamp_in_range(**t)).copied();
            tracing::error!(
                "{dropped} row(s) for '{}' dropped: designated timestamp {} is outside {}",
                self.table.name(),
                first.unwrap_or_default(),
                TIMESTAMP_RANGE_TEXT
            );
            let filtered = arrow_select::filter::filter_record_batch(&batch, &in_range)
                .map_err(|e| internal(e.to_string()))?;
            if filtered.num_rows() > 0 {
                kept.push((filtered, arrived));
            }
        }
        Ok(kept)
    }
}

/// Failed commits one salvage may try before it drops what is left: a storage that refuses
/// everything costs a bounded number of attempts, not one per row.
const SALVAGE_FAILURES_MAX: usize = 256;

/// Progress of committing rows again after a failed commit.
#[derive(Default)]
struct Salvage {
    rows: u64,
    failures: usize,
    first_error: Option<StorageError>,
}

impl Pending {
    fn push(&mut self, queued: Queued) {
        let arrived = queued.arrived;
        self.rows += queued.rows();
        self.batches.push(queued);
        self.oldest = Some(self.oldest.map_or(arrived, |o| o.min(arrived)));
    }
}

/// `batch` with every column as its write type (`ColumnType::write_type`, what the ILP builders
/// make, so that batches from any source can be merged), checked for what a merge relies on: known columns and a non-NULL designated
/// timestamp.
pub(crate) fn canonical_batch(
    table: &Table,
    batch: RecordBatch,
) -> Result<RecordBatch, IngestError> {
    let meta = table.meta();
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let index = meta.column_index(field.name()).ok_or_else(|| {
            IngestError::Rejected(format!(
                "column '{}' does not exist in table '{}'",
                field.name(),
                meta.name
            ))
        })?;
        let target = &meta.columns[index];
        let column = to_write_type(column, target.column_type, &target.name)
            .map_err(|e| IngestError::Rejected(e.to_string()))?;
        if Some(index) == meta.timestamp_index {
            if column.null_count() > 0 {
                return Err(IngestError::Rejected(format!(
                    "designated timestamp column '{}' cannot be NULL",
                    meta.columns[index].name
                )));
            }
            let values = column
                .as_any()
                .downcast_ref::<TimestampNanosecondArray>()
                .map(|ts| ts.values().as_ref())
                .unwrap_or_default();
            if let Some(bad) = values.iter().find(|t| !timestamp_in_range(**t)) {
                return Err(IngestError::Rejected(format!(
                    "designated timestamp {bad} (nanoseconds since the epoch) in column '{}' is out \
                     of range: timestamps must be from {TIMESTAMP_RANGE_TEXT}",
                    meta.columns[index].name
                )));
            }
        }
        fields.push(Field::new(&target.name, column.data_type().clone(), true));
        columns.push(column);
    }
    if let Some(ts) = meta.timestamp_column()
        && !fields.iter().any(|f| f.name() == &ts.name)
    {
        return Err(IngestError::Rejected(format!(
            "designated timestamp column '{}' cannot be NULL",
            ts.name
        )));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| internal(e.to_string()))
}

/// A batch and when it arrived (its oldest row).
type Arrived = (RecordBatch, Instant);

/// Splits the rows of `batches` into those to commit now and those to keep back (with their
/// batch's arrival), per `take`: the rows after a cutoff timestamp are kept back, so the rows
/// of one timestamp stay together. With `dedup` (the table deduplicates), rows at a watermark
/// are kept back too: a receiver's later rows may have its watermark's timestamp, and
/// committing only older rows spares the table merges of rows at the newest timestamp it holds.
///
/// The rows to commit come in arrival order, or ordered by their first timestamp when they are
/// then in time order without overlapping (the usual case: receivers sending consecutive
/// stretches of time), so that storage appends them as they are; otherwise storage sorts them
/// together, and equal timestamps keep arrival order.
fn split_by_time(
    batches: Vec<(RecordBatch, Instant)>,
    timestamp: &str,
    take: Take,
    dedup: bool,
) -> Result<(Vec<RecordBatch>, Vec<Arrived>), IngestError> {
    let limit = |limit: i64| limit.saturating_sub(i64::from(dedup));
    let cutoff = match take {
        Take::All => None,
        Take::UpTo(up_to) => Some(limit(up_to)),
        Take::Through(up_to) => Some(up_to),
        Take::Older {
            up_to: Some(up_to),
            keep_max,
        } if rows_after(&batches, timestamp, limit(up_to))? <= keep_max => Some(limit(up_to)),
        Take::Older { .. } => newest_quarter_cutoff(&batches, timestamp)?,
    };
    let (mut now, mut later) = (Vec::with_capacity(batches.len()), Vec::new());
    let mut spans = Vec::with_capacity(batches.len());
    for (batch, arrived) in batches {
        let ts = timestamps_of(&batch, timestamp)?;
        let span = TimeSpan::of(ts);
        let n = batch.num_rows();
        match cutoff {
            Some(c) if span.min > c => later.push((batch, arrived)),
            Some(c) if span.max > c => {
                let (head, tail) = if span.sorted {
                    let k = ts.partition_point(|t| *t <= c);
                    (batch.slice(0, k), batch.slice(k, n - k))
                } else {
                    let older: BooleanArray = ts.iter().map(|t| Some(*t <= c)).collect();
                    let newer: BooleanArray = ts.iter().map(|t| Some(*t > c)).collect();
                    let filter = |mask: &BooleanArray| {
                        arrow_select::filter::filter_record_batch(&batch, mask)
                            .map_err(|e| internal(e.to_string()))
                    };
                    (filter(&older)?, filter(&newer)?)
                };
                spans.push(TimeSpan::of(timestamps_of(&head, timestamp)?));
                now.push(head);
                later.push((tail, arrived));
            }
            _ => {
                spans.push(span);
                now.push(batch);
            }
        }
    }
    if spans.iter().all(|s| s.sorted)
        && let Some(slices) = merge_slices(&now, timestamp, dedup)?
    {
        now = slices;
    }
    Ok((now, later))
}

/// Rows per slice below which [`merge_slices`] gives up: storage appends each slice on its
/// own (a write per column), and sorts many small runs faster in one piece.
const SLICE_ROWS_MIN: usize = 1024;

/// The rows of `runs` (each in time order) as slices of them in time order, without copying:
/// what a merge of the runs would give, equal timestamps in the order of `runs` (arrival
/// order). Senders' batches usually interleave in long stretches of time, which makes few
/// slices; `None` when the slices would be short (rows interleaved finely), and storage had
/// better sort the runs together. With `dedup`, rows of one timestamp must be in one slice
/// (storage deduplicates within a run), so runs sharing a timestamp give `None` too.
fn merge_slices(
    runs: &[RecordBatch],
    timestamp: &str,
    dedup: bool,
) -> Result<Option<Vec<RecordBatch>>, IngestError> {
    if runs.len() < 2 {
        return Ok(None);
    }
    let ts: Vec<&[i64]> = runs
        .iter()
        .map(|b| timestamps_of(b, timestamp))
        .collect::<Result<_, _>>()?;
    let rows: usize = ts.iter().map(|t| t.len()).sum();
    let slices_max = (rows / SLICE_ROWS_MIN).max(runs.len());
    let mut at = vec![0usize; runs.len()];
    let mut slices = Vec::with_capacity(runs.len());
    loop {
        // The run with the earliest next row (ties: the earlier run), and the next row of any
        // other run, which bounds the slice.
        let mut first: Option<(i64, usize)> = None;
        let mut bound: Option<(i64, usize)> = None;
        for (r, t) in ts.iter().enumerate() {
            let Some(&head) = t.get(at[r]) else {
                continue;
            };
            if first.is_none_or(|f| (head, r) < f) {
                bound = first;
                first = Some((head, r));
            } else if bound.is_none_or(|b| (head, r) < b) {
                bound = Some((head, r));
            }
        }
        let Some((head, r)) = first else {
            return Ok(Some(slices));
        };
        let rest = &ts[r][at[r]..];
        // Never empty: the head is before the bound (or at it, from an earlier run).
        let len = match bound {
            None => rest.len(),
            Some((b, _)) if dedup => {
                if head == b {
                    return Ok(None);
                }
                rest.partition_point(|t| *t < b)
            }
            // Rows before the bound's, and rows at its timestamp when this run comes first.
            Some((b, other)) => rest.partition_point(|t| *t < b || (*t == b && r < other)),
        };
        slices.push(runs[r].slice(at[r], len));
        at[r] += len;
        if slices.len() > slices_max {
            return Ok(None);
        }
    }
}

/// The timestamp that keeps about the newest quarter of the rows of `batches` after it (fewer
/// when rows share it), or `None` when there are too few rows to keep any back.
fn newest_quarter_cutoff(
    batches: &[(RecordBatch, Instant)],
    timestamp: &str,
) -> Result<Option<i64>, IngestError> {
    let mut all = Vec::new();
    for (batch, _) in batches {
        all.extend_from_slice(timestamps_of(batch, timestamp)?);
    }
    let keep = all.len() / 4;
    if keep == 0 {
        return Ok(None);
    }
    let at = all.len() - keep - 1;
    Ok(Some(*all.select_nth_unstable(at).1))
}

/// Rows of `batches` whose timestamp is after `limit`.
fn rows_after(
    batches: &[(RecordBatch, Instant)],
    timestamp: &str,
    limit: i64,
) -> Result<usize, IngestError> {
    let mut newer = 0;
    for (batch, _) in batches {
        newer += timestamps_of(batch, timestamp)?
            .iter()
            .filter(|t| **t > limit)
            .count();
    }
    Ok(newer)
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

fn internal(message: String) -> IngestError {
    IngestError::Storage(StorageError::Internal(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int64Array};

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

    fn arrived(batches: &[RecordBatch]) -> Vec<(RecordBatch, Instant)> {
        let now = Instant::now();
        batches.iter().map(|b| (b.clone(), now)).collect()
    }

    fn later_timestamps(later: &[(RecordBatch, Instant)]) -> Vec<i64> {
        later.iter().flat_map(|(b, _)| timestamps(b)).collect()
    }

    /// `split_by_time` without watermarks: all but the newest quarter.
    fn quarter_split(batches: &[RecordBatch]) -> (Vec<RecordBatch>, Vec<(RecordBatch, Instant)>) {
        let take = Take::Older {
            up_to: None,
            keep_max: 0,
        };
        split_by_time(arrived(batches), "timestamp", take, false).unwrap()
    }

    /// Commits `batches` into a fresh table with a LONG column `v`; its timestamps and `v`.
    fn committed(batches: &[RecordBatch]) -> (Vec<i64>, Vec<Option<i64>>) {
        let (_dir, _, table) = test_table(&[("v", sundial_storage::ColumnType::Long)]);
        TableSink::new(table.clone())
            .append_and_commit(batches)
            .unwrap();
        let snapshot = table.snapshot();
        let (mut ts, mut v) = (Vec::new(), Vec::new());
        for (p, partition) in snapshot.partitions().iter().enumerate() {
            let rows = 0..partition.row_count;
            ts.extend(timestamps(
                &RecordBatch::try_from_iter([(
                    "t",
                    snapshot.read_column(p, 0, rows.clone()).unwrap(),
                )])
                .unwrap(),
            ));
            let column = snapshot.read_column(p, 1, rows).unwrap();
            v.extend(column.as_any().downcast_ref::<Int64Array>().unwrap().iter());
        }
        (ts, v)
    }

    #[test]
    fn interleaved_batches_are_sorted_and_the_newest_quarter_waits() {
        let batches = [
            batch(&[1, 3, 5, 7], Some(&[10, 30, 50, 70])),
            batch(&[2, 4, 6, 8], None),
        ];
        let (now, later) = quarter_split(&batches);
        // Slices of the batches, in arrival order: storage sorts them together.
        assert_eq!(all_timestamps(&now), vec![1, 3, 5, 2, 4, 6]);
        assert_eq!(later_timestamps(&later), vec![7, 8]);
        assert_eq!(
            committed(&now),
            (
                vec![1, 2, 3, 4, 5, 6],
                vec![Some(10), None, Some(30), None, Some(50), None]
            )
        );
        let (now, later) = split_by_time(arrived(&batches), "timestamp", Take::All, false).unwrap();
        assert_eq!(committed(&now).0, (1..=8).collect::<Vec<_>>());
        assert!(later.is_empty());
    }

    #[test]
    fn disjoint_batches_are_reordered_without_copying() {
        let batches = [
            batch(&[5, 6, 7, 8], Some(&[50, 60, 70, 80])),
            batch(&[1, 2, 3, 4], None),
        ];
        let (now, later) = quarter_split(&batches);
        assert_eq!(now.len(), 2);
        assert_eq!(now[1].num_columns(), 2);
        assert_eq!(all_timestamps(&now), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(later_timestamps(&later), vec![7, 8]);
    }

    /// A batch out of time order is split by filtering: each side keeps its rows' order.
    #[test]
    fn a_batch_out_of_order_is_split_by_its_timestamps() {
        let batches = [batch(&[9, 1, 8, 2, 7, 3, 6, 4], None)];
        let (now, later) = quarter_split(&batches);
        assert_eq!(all_timestamps(&now), vec![1, 2, 7, 3, 6, 4]);
        assert_eq!(later_timestamps(&later), vec![9, 8]);
        let (now, later) =
            split_by_time(arrived(&batches), "timestamp", Take::UpTo(5), false).unwrap();
        assert_eq!(all_timestamps(&now), vec![1, 2, 3, 4]);
        assert_eq!(later_timestamps(&later), vec![9, 8, 7, 6]);
    }

    /// Runs interleaving in long stretches become slices in time order; equal timestamps keep
    /// the order of the runs; short slices or (deduplicating) shared timestamps give up.
    #[test]
    fn interleaved_runs_become_slices_in_time_order() {
        let run = |from: i64, to: i64| batch(&(from..to).collect::<Vec<_>>(), None);
        let blocks = |a: (i64, i64), b: (i64, i64)| {
            batch(&(a.0..a.1).chain(b.0..b.1).collect::<Vec<_>>(), None)
        };
        // Two senders taking turns with stretches of 2000 timestamps: four slices.
        let runs = [
            blocks((0, 2000), (4000, 6000)),
            blocks((2000, 4000), (6000, 8000)),
        ];
        let slices = merge_slices(&runs, "timestamp", false).unwrap().unwrap();
        assert_eq!(all_timestamps(&slices), (0..8000).collect::<Vec<_>>());
        assert_eq!(slices.len(), 4);
        // Sharing every timestamp of a stretch, the runs alternate row by row there: too many
        // slices, so storage sorts them.
        let runs = [run(0, 2000), run(2000, 4000), run(1000, 3000)];
        assert!(merge_slices(&runs, "timestamp", false).unwrap().is_none());
        let runs = [run(0, 2000), run(4000, 6000), run(2000, 4000)];
        let slices = merge_slices(&runs, "timestamp", false).unwrap().unwrap();
        assert_eq!(all_timestamps(&slices), (0..6000).collect::<Vec<_>>());
        assert_eq!(slices.len(), 3);
        // Equal timestamps across runs: the earlier run's first.
        let runs = [
            batch(&[1, 2, 3, 3], Some(&[1, 2, 3, 4])),
            batch(&[3, 3, 5], Some(&[5, 6, 7])),
        ];
        let slices = merge_slices(&runs, "timestamp", false).unwrap().unwrap();
        assert_eq!(all_timestamps(&slices), vec![1, 2, 3, 3, 3, 3, 5]);
        assert_eq!(
            committed(&slices).1,
            [1, 2, 3, 4, 5, 6, 7].map(Some).to_vec()
        );
        assert!(merge_slices(&runs, "timestamp", true).unwrap().is_none());
        let runs = [batch(&[1, 2], None), batch(&[3, 4], None)];
        assert_eq!(
            merge_slices(&runs, "timestamp", true)
                .unwrap()
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn equal_timestamps_keep_arrival_order() {
        let batches = [batch(&[2, 1], Some(&[1, 2])), batch(&[1], Some(&[3]))];
        let (now, _) = split_by_time(arrived(&batches), "timestamp", Take::All, false).unwrap();
        assert_eq!(committed(&now).1, vec![Some(2), Some(3), Some(1)]);
    }

    /// A commit by volume takes the rows up to the lowest watermark of the receivers, so the
    /// receiver that is behind still lands in order; one too far behind holds back no more
    /// than twice `commit_rows` (then the newest quarter waits, as without watermarks).
    #[test]
    fn volume_commits_stop_at_the_receivers_low_watermark() {
        let (_dir, _, table) = test_table(&[]);
        let sink = TableSink::new(table.clone());
        let now = Instant::now();
        assert_eq!(
            sink.submit(batch(&[1, 2, 3, 4, 5, 6], None), now, 8, 1)
                .unwrap(),
            0
        );
        // Receiver 2 is ahead: of 9 rows, those up to receiver 1's 6 are committed.
        assert_eq!(
            sink.submit(batch(&[10, 11, 12], None), now, 8, 2).unwrap(),
            6
        );
        // Receiver 1 passes receiver 2: rows up to receiver 2's 12 go.
        assert_eq!(
            sink.submit(batch(&[7, 8, 9, 13, 14], None), now, 8, 1)
                .unwrap(),
            6
        );
        // Receiver 1 commits as it pauses: everything, and its watermark is gone.
        sink.leave(1);
        assert_eq!(sink.commit_all().unwrap(), 2);
        let before = table.snapshot().partitions()[0].version;
        // Receiver 2 alone, far ahead of a new receiver 3: the quarter rule.
        assert_eq!(sink.submit(batch(&[20], None), now, 8, 3).unwrap(), 0);
        let ts: Vec<i64> = (30..50).collect();
        assert_eq!(sink.submit(batch(&ts, None), now, 8, 2).unwrap(), 16);
        assert_eq!(table.snapshot().row_count(), 30);
        // Every commit landed in order: the partition was never rewritten.
        assert_eq!(table.snapshot().partitions()[0].version, before);
    }

    /// A commit by time takes the rows up to the receivers' low watermark; rows held past it
    /// keep their arrival, and are committed once they have waited twice the interval.
    #[test]
    fn time_commits_keep_to_the_watermark_until_rows_waited_twice_the_interval() {
        let (_dir, _, table) = test_table(&[]);
        let sink = TableSink::new(table.clone());
        let (t0, interval) = (Instant::now(), Duration::from_secs(1));
        assert_eq!(sink.submit(batch(&[1, 2, 3], None), t0, 100, 1).unwrap(), 0);
        assert_eq!(sink.submit(batch(&[5, 6], None), t0, 100, 2).unwrap(), 0);
        assert_eq!(sink.commit_due(t0, interval).unwrap(), 0);
        assert_eq!(sink.commit_due(t0 + interval, interval).unwrap(), 3);
        assert_eq!(sink.commit_due(t0 + interval, interval).unwrap(), 0);
        assert_eq!(sink.commit_due(t0 + interval * 2, interval).unwrap(), 2);
        assert_eq!(table.snapshot().row_count(), 5);
    }

    /// In a deduplicating table a commit stops before the watermark's timestamp, so later rows
    /// (which may have it) never merge with committed ones.
    #[test]
    fn dedup_tables_commit_only_rows_before_the_watermark() {
        let (_dir, table, sink) = dedup_sink();
        let now = Instant::now();
        assert_eq!(
            sink.submit(batch(&[1, 2, 3, 3], None), now, 4, 1).unwrap(),
            2
        );
        let version = table.snapshot().partitions()[0].version;
        assert_eq!(sink.submit(batch(&[3, 4], None), now, 4, 1).unwrap(), 3);
        sink.leave(1);
        assert_eq!(sink.commit_all().unwrap(), 1);
        let snapshot = table.snapshot();
        assert_eq!(
            snapshot.partitions().len(),
            1,
            "{:?}",
            snapshot.partitions()
        );
        assert_eq!(snapshot.partitions()[0].version, version, "no merge");
        // Rows with equal timestamps (the only key) were deduplicated: 1, 2, 3, 4.
        assert_eq!(snapshot.row_count(), 4);
    }

    /// A pausing receiver's rows all become visible, those at its newest timestamp too, in a
    /// deduplicating table as in any other; other receivers' newer rows wait.
    #[test]
    fn a_pause_commits_every_row_of_the_pausing_receiver() {
        let (_dir, table, sink) = dedup_sink();
        let now = Instant::now();
        assert_eq!(
            sink.submit(batch(&[1, 2, 3, 3], None), now, 100, 1)
                .unwrap(),
            0
        );
        assert_eq!(sink.submit(batch(&[2, 9], None), now, 100, 2).unwrap(), 0);
        // Receiver 1's 1, 2, 3, 3 and receiver 2's 2: ts 1, 2, 3 once each (the only key).
        assert_eq!(sink.commit_paused(1).unwrap(), 5);
        assert_eq!(table.snapshot().row_count(), 3);
        assert_eq!(sink.commit_paused(2).unwrap(), 1);
        assert_eq!(table.snapshot().row_count(), 4);
    }

    #[test]
    fn senders_wait_while_a_table_is_far_behind() {
        let (_dir, _, table) = test_table(&[]);
        let sink = Arc::new(TableSink::new(table.clone()));
        // Another receiver is committing: submissions pile up until 4 x commit_rows...
        let committing = lock(&sink.committing);
        for i in 0..4 {
            let ts: Vec<i64> = (i * 4..i * 4 + 4).collect();
            assert_eq!(
                sink.submit(batch(&ts, None), Instant::now(), 4, 0).unwrap(),
                0
            );
        }
        // ...then the next sender waits.
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sender = {
            let (sink, done) = (sink.clone(), done.clone());
            std::thread::spawn(move || {
                let committed = sink.submit(batch(&[16, 17, 18, 19], None), Instant::now(), 4, 0);
                done.store(true, std::sync::atomic::Ordering::SeqCst);
                committed.unwrap()
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(!done.load(std::sync::atomic::Ordering::SeqCst));
        drop(committing);
        // Once the commit is over, the waiting sender commits: the only receiver sends in
        // order, so every row up to its watermark (all of them) goes.
        assert_eq!(sender.join().unwrap(), 20);
        assert_eq!(table.snapshot().row_count(), 20);
        assert_eq!(sink.commit_all().unwrap(), 0);
    }

    /// A sink (committing inline) of table `t`, deduplicated on its designated timestamp.
    fn dedup_sink() -> (tempfile::TempDir, Arc<Table>, TableSink) {
        let (dir, _, table) = test_table(&[]);
        let keys = ["timestamp".to_string()];
        table.writer().unwrap().set_dedup_keys(&keys).unwrap();
        let sink = TableSink::new(table.clone());
        (dir, table, sink)
    }

    /// Table `t`: a designated `timestamp`, then `columns`.
    fn test_table(
        columns: &[(&str, sundial_storage::ColumnType)],
    ) -> (tempfile::TempDir, Arc<Sinks>, Arc<Table>) {
        use sundial_storage::{ColumnType, Durability, PartitionBy, StorageOptions, TableDef};
        let dir = tempfile::tempdir().unwrap();
        let options = StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        };
        let db = Database::open(dir.path(), options).unwrap();
        let mut all = vec![("timestamp".to_string(), ColumnType::Timestamp)];
        all.extend(columns.iter().map(|(n, t)| (n.to_string(), *t)));
        let def = TableDef {
            name: "t".into(),
            columns: all,
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

    fn uuid_table() -> (tempfile::TempDir, Arc<Sinks>, Arc<Table>) {
        test_table(&[("u", sundial_storage::ColumnType::Uuid)])
    }

    fn uuid_batch(ts: &[i64], u: &str) -> RecordBatch {
        let fields = vec![
            Field::new(
                "timestamp",
                arrow_schema::DataType::Timestamp(arrow_schema::TimeUnit::Nanosecond, None),
                true,
            ),
            Field::new("u", arrow_schema::DataType::LargeUtf8, true),
        ];
        let columns: Vec<ArrayRef> = vec![
            Arc::new(TimestampNanosecondArray::from(ts.to_vec())),
            Arc::new(arrow_array::LargeStringArray::from(vec![u; ts.len()])),
        ];
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    fn waiting_writers(sink: &TableSink) -> usize {
        let pending = lock(&sink.pending);
        pending
            .batches
            .iter()
            .filter(|q| q.ticket.is_some())
            .count()
    }

    #[test]
    fn waiting_writers_share_a_commit_and_a_bad_batch_fails_alone() {
        let (_dir, sinks, table) = uuid_table();
        let sink = sinks.sink(&table);
        let good = "11111111-2222-3333-4444-555555555555";
        // While a commit runs, three writers queue up...
        let committing = lock(&sink.committing);
        let writers: Vec<_> = [
            (&[3i64, 1][..], good),
            (&[2][..], "not a uuid"),
            (&[4, 5, 6][..], good),
        ]
        .into_iter()
        .map(|(ts, u)| {
            let (sinks, table, batch) = (sinks.clone(), table.clone(), uuid_batch(ts, u));
            std::thread::spawn(move || sinks.write(&table, batch, 1000))
        })
        .collect();
        while waiting_writers(&sink) < 3 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let version = table.snapshot().seq();
        drop(committing);
        let outcomes: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        // ...the shared commit fails on the bad batch, and the others commit one by one.
        assert_eq!(outcomes[0].as_ref().unwrap(), &2);
        assert!(
            outcomes[1]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("uuid"),
            "{outcomes:?}"
        );
        assert_eq!(outcomes[2].as_ref().unwrap(), &3);
        assert_eq!(table.snapshot().row_count(), 5);
        assert!(table.snapshot().seq() > version);
        // Without a bad batch, they share one commit.
        let committing = lock(&sink.committing);
        let writers: Vec<_> = (0..4)
            .map(|i| {
                let (sinks, table) = (sinks.clone(), table.clone());
                let batch = uuid_batch(&[10 + i, 20 + i], good);
                std::thread::spawn(move || sinks.write(&table, batch, 1000))
            })
            .collect();
        while waiting_writers(&sink) < 4 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let version = table.snapshot().seq();
        drop(committing);
        for w in writers {
            assert_eq!(w.join().unwrap().unwrap(), 2);
        }
        assert_eq!(table.snapshot().row_count(), 13);
        assert_eq!(table.snapshot().seq(), version + 1);
    }

    /// A batch for `u` with one value per row.
    fn uuid_rows(ts: &[i64], u: &[&str]) -> RecordBatch {
        let fields = vec![
            Field::new(
                "timestamp",
                arrow_schema::DataType::Timestamp(arrow_schema::TimeUnit::Nanosecond, None),
                true,
            ),
            Field::new("u", arrow_schema::DataType::Utf8, true),
        ];
        let columns: Vec<ArrayRef> = vec![
            Arc::new(TimestampNanosecondArray::from(ts.to_vec())),
            Arc::new(arrow_array::StringArray::from(u.to_vec())),
        ];
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    #[test]
    fn a_failed_commit_of_ilp_rows_drops_only_the_rows_storage_refuses() {
        let (_dir, sinks, table) = uuid_table();
        let sink = sinks.sink(&table);
        let good = "11111111-2222-3333-4444-555555555555";
        let other = "22222222-2222-3333-4444-555555555555";
        // Three receivers' batches, one with a row storage refuses among good ones.
        let batches = [
            uuid_rows(&[1, 2, 3], &[good, good, good]),
            uuid_rows(
                &[4, 5, 6, 7, 8],
                &[other, other, "not a uuid", other, other],
            ),
            uuid_rows(&[9, 10], &[good, good]),
        ];
        for b in &batches {
            sink.submit(b.clone(), Instant::now(), 1000, 0).unwrap();
        }
        let e = sink.commit_all().unwrap_err();
        assert!(e.to_string().contains("uuid"), "{e}");
        let snapshot = table.snapshot();
        assert_eq!(snapshot.row_count(), 9);
        let ts = snapshot.read_column(0, 0, 0..9).unwrap();
        let ts = ts
            .as_any()
            .downcast_ref::<TimestampNanosecondArray>()
            .unwrap();
        assert_eq!(ts.values().to_vec(), vec![1, 2, 3, 4, 5, 7, 8, 9, 10]);
        // The table takes later rows as usual.
        sink.submit(uuid_rows(&[11], &[good]), Instant::now(), 1000, 0)
            .unwrap();
        assert_eq!(sink.commit_all().unwrap(), 1);
        assert_eq!(table.snapshot().row_count(), 10);
    }

    #[test]
    fn rows_outside_the_storage_range_never_reach_storage() {
        use sundial_storage::{TIMESTAMP_END_NS, TIMESTAMP_MIN_NS};
        let (_dir, sinks, table) = uuid_table();
        let sink = sinks.sink(&table);
        let good = "11111111-2222-3333-4444-555555555555";
        let ts = [
            1,
            i64::MIN,
            TIMESTAMP_MIN_NS,
            TIMESTAMP_MIN_NS - 1,
            TIMESTAMP_END_NS,
            TIMESTAMP_END_NS - 1,
            2,
        ];
        sink.submit(uuid_rows(&ts, &[good; 7]), Instant::now(), 1000, 0)
            .unwrap();
        assert_eq!(sink.commit_all().unwrap(), 4);
        let snapshot = table.snapshot();
        let mut kept = Vec::new();
        for (p, partition) in snapshot.partitions().iter().enumerate() {
            let ts = snapshot.read_column(p, 0, 0..partition.row_count).unwrap();
            let ts = ts
                .as_any()
                .downcast_ref::<TimestampNanosecondArray>()
                .unwrap();
            kept.extend_from_slice(ts.values());
        }
        assert_eq!(kept, vec![TIMESTAMP_MIN_NS, 1, 2, TIMESTAMP_END_NS - 1]);
        // A waiting writer is told why, before its rows queue.
        let e = sinks
            .write(&table, uuid_rows(&[3, i64::MAX], &[good, good]), 1000)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "designated timestamp 9223372036854775807 (nanoseconds since the epoch) in column \
             'timestamp' is out of range: timestamps must be from 1678-01-01T00:00:00Z \
             (inclusive) to 2262-01-01T00:00:00Z (exclusive)"
        );
        assert_eq!(table.snapshot().row_count(), 4);
    }

    #[test]
    fn a_write_without_its_designated_timestamp_is_refused_before_it_queues() {
        let (_dir, sinks, table) = uuid_table();
        let nulls = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "timestamp",
                arrow_schema::DataType::Timestamp(arrow_schema::TimeUnit::Nanosecond, None),
                true,
            )])),
            vec![Arc::new(TimestampNanosecondArray::from(vec![
                Some(1),
                None,
            ]))],
        )
        .unwrap();
        let e = sinks.write(&table, nulls, 1000).unwrap_err();
        assert!(e.to_string().contains("cannot be NULL"), "{e}");
        let unknown = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "x",
                arrow_schema::DataType::Int64,
                true,
            )])),
            vec![Arc::new(Int64Array::from(vec![1]))],
        )
        .unwrap();
        let e = sinks.write(&table, unknown, 1000).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert_eq!(lock(&sinks.sink(&table).pending).rows, 0);
        assert_eq!(table.snapshot().row_count(), 0);
    }
}

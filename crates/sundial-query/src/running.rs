//! How many heavy queries run at once (`--queries-running-max`), so that a cheap statement is
//! not stuck behind a hundred heavy ones.
//!
//! ```text
//!  plan ─▶ is_light? ──yes──▶ runs at once            (SELECT 1, catalog queries, a few rows)
//!             │ no
//!             ▼
//!          Gated stream: first poll ─▶ FIFO permit ─▶ execute ─▶ poll ... ─▶ batch ─▶ release
//!                                  ▲                                                  │
//!                                  └────────── next poll takes a permit again ◀───────┘
//! ```
//!
//! The query runtime's threads are shared by every statement: with a hundred scans and
//! aggregations runnable, each poll a statement needs waits behind hundreds of others', and a
//! `SELECT 1` takes seconds. The gate keeps at most `running_max` heavy queries executing;
//! the rest wait in arrival order (tokio's semaphore is FIFO) and cost nothing meanwhile.
//!
//! A query holds its permit while it computes and gives it back with every batch it yields:
//! a client reading slowly (or a suspended portal) holds no permit, and long results take
//! turns, round-robin, with the queries waiting. Work a plan spawned (partitions feeding a
//! repartition) may go on for a batch or two past the release; it is bounded by the plan's
//! channels, so the gate bounds CPU work closely but not exactly.
//!
//! Only the streams returned to clients are gated, never one a gated query runs inside
//! itself, so a query cannot wait for a permit while holding one (no deadlock).
//!
//! Light plans bypass the gate: those whose leaves report at most [`LIGHT_ROWS_MAX`] rows in
//! all and that hold no join that multiplies rows (nested-loop and cross joins) nor a
//! recursive query. A leaf that does not know its row count makes a plan heavy.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::stats::Precision;
use datafusion::error::Result;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::{ExecutionPlan, execute_stream};
use futures::Stream;
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

/// Rows a plan's leaves may hold in all for it to run without waiting for a permit: a few
/// milliseconds of work on one core.
pub const LIGHT_ROWS_MAX: usize = 100_000;

/// Heavy queries holding a permit and waiting for one, over every gate of the process.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Heavy queries executing now under a gate, over all gates of the process.
pub fn queries_running() -> usize {
    RUNNING.load(Ordering::Relaxed)
}

/// Heavy queries waiting for a gate's permit now, over all gates of the process.
pub fn queries_waiting() -> usize {
    WAITING.load(Ordering::Relaxed)
}

/// Plans that multiply or repeat their inputs' rows: heavy whatever their leaves hold.
const HEAVY_NODES: [&str; 3] = ["NestedLoopJoinExec", "CrossJoinExec", "RecursiveQueryExec"];

/// The permits heavy queries take to execute, and counts of those running and waiting.
#[derive(Debug)]
pub struct QueryGate {
    permits: Arc<Semaphore>,
    running: AtomicUsize,
    waiting: AtomicUsize,
}

impl QueryGate {
    /// A gate letting `running_max` heavy queries execute at once (at least one).
    pub fn new(running_max: usize) -> QueryGate {
        let running_max = running_max.clamp(1, Semaphore::MAX_PERMITS);
        QueryGate {
            permits: Arc::new(Semaphore::new(running_max)),
            running: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Heavy queries holding a permit at this gate now (the process-wide count is
    /// [`queries_running`]).
    #[cfg(test)]
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// Heavy queries waiting for a permit at this gate now.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The stream `plan` yields under `gate` (executed at its first poll, once it holds a
    /// permit), or at once when `gate` is `None` or the plan is light.
    pub fn execute(
        gate: Option<&Arc<QueryGate>>,
        plan: Arc<dyn ExecutionPlan>,
        task: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        match gate {
            Some(gate) if !is_light(&plan) => Ok(Box::pin(Gated {
                schema: plan.schema(),
                gate: gate.clone(),
                state: State::Planned(plan, task),
                permit: None,
                acquiring: None,
            })),
            _ => execute_stream(plan, task),
        }
    }
}

/// Whether `plan` may run without a permit (see the module's docs).
pub fn is_light(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut rows = 0usize;
    light_rows(plan.as_ref(), &mut rows)
}

fn light_rows(plan: &dyn ExecutionPlan, rows: &mut usize) -> bool {
    if HEAVY_NODES.contains(&plan.name()) {
        return false;
    }
    let children = plan.children();
    if children.is_empty() {
        let Ok(statistics) = plan.statistics_from_inputs(&[], &StatisticsArgs::new()) else {
            return false;
        };
        let leaf_rows = match statistics.num_rows {
            Precision::Exact(n) | Precision::Inexact(n) => n,
            Precision::Absent => return false,
        };
        *rows = rows.saturating_add(leaf_rows);
        return *rows <= LIGHT_ROWS_MAX;
    }
    children
        .into_iter()
        .all(|child| light_rows(child.as_ref(), rows))
}

type Acquiring =
    Pin<Box<dyn Future<Output = std::result::Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

/// A heavy query's stream: executes its plan once it holds a permit, and gives the permit
/// back with every batch, at its end and when dropped.
struct Gated {
    schema: SchemaRef,
    gate: Arc<QueryGate>,
    state: State,
    permit: Option<Permit>,
    acquiring: Option<(Acquiring, Waiting)>,
}

enum State {
    /// Not executed yet: no operator has started or spawned anything.
    Planned(Arc<dyn ExecutionPlan>, Arc<TaskContext>),
    Running(SendableRecordBatchStream),
    Done,
}

/// A permit held, counted in `running` while it lives.
struct Permit {
    _permit: OwnedSemaphorePermit,
    gate: Arc<QueryGate>,
}

impl Permit {
    fn new(permit: OwnedSemaphorePermit, gate: &Arc<QueryGate>) -> Permit {
        gate.running.fetch_add(1, Ordering::Relaxed);
        RUNNING.fetch_add(1, Ordering::Relaxed);
        Permit {
            _permit: permit,
            gate: gate.clone(),
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.gate.running.fetch_sub(1, Ordering::Relaxed);
        RUNNING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A wait for a permit, counted in `waiting` while it lives.
struct Waiting(Arc<QueryGate>);

impl Waiting {
    fn new(gate: &Arc<QueryGate>) -> Waiting {
        gate.waiting.fetch_add(1, Ordering::Relaxed);
        WAITING.fetch_add(1, Ordering::Relaxed);
        Waiting(gate.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
        WAITING.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Gated {
    /// Takes a permit: at once if one is free and nobody waits, else in arrival order.
    fn poll_permit(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.permit.is_some() {
            return Poll::Ready(());
        }
        if self.acquiring.is_none() {
            // A free permit means nobody waits: the semaphore hands released permits to
            // waiters first.
            if let Ok(permit) = self.gate.permits.clone().try_acquire_owned() {
                self.permit = Some(Permit::new(permit, &self.gate));
                return Poll::Ready(());
            }
            let acquire = Box::pin(self.gate.permits.clone().acquire_owned());
            self.acquiring = Some((acquire, Waiting::new(&self.gate)));
        }
        let Some((acquire, _)) = self.acquiring.as_mut() else {
            unreachable!("a wait was set above");
        };
        match acquire.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(permit) => {
                self.acquiring = None;
                // The semaphore is never closed.
                let permit = permit.expect("the query gate's semaphore is never closed");
                self.permit = Some(Permit::new(permit, &self.gate));
                Poll::Ready(())
            }
        }
    }
}

impl Stream for Gated {
    type Item = Result<RecordBatch>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if matches!(this.state, State::Done) {
            return Poll::Ready(None);
        }
        if this.poll_permit(cx).is_pending() {
            return Poll::Pending;
        }
        if let State::Planned(plan, task) = &this.state {
            match execute_stream(plan.clone(), task.clone()) {
                Ok(stream) => this.state = State::Running(stream),
                Err(e) => {
                    this.state = State::Done;
                    this.permit = None;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
        let State::Running(stream) = &mut this.state else {
            unreachable!("executed above");
        };
        let polled = stream.as_mut().poll_next(cx);
        match &polled {
            Poll::Pending => {}
            Poll::Ready(Some(Ok(_))) => this.permit = None,
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => {
                this.permit = None;
                this.state = State::Done;
            }
        }
        polled
    }
}

impl RecordBatchStream for Gated {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;
    use futures::StreamExt;

    async fn plan(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
        ctx.sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn small_plans_are_light_and_big_or_multiplying_ones_heavy() {
        let ctx = SessionContext::new();
        assert!(is_light(&plan(&ctx, "SELECT 1").await));
        assert!(is_light(
            &plan(&ctx, "SELECT * FROM (VALUES (1), (2)) v(x)").await
        ));
        // generate_series does not report its row count.
        assert!(!is_light(
            &plan(&ctx, "SELECT * FROM generate_series(1, 10)").await
        ));
        assert!(!is_light(
            &plan(&ctx, "SELECT count(*) FROM generate_series(1, 1000000)").await
        ));
        let cross = "SELECT a.x + b.y FROM (VALUES (1), (2)) a(x), (VALUES (1), (2)) b(y)";
        let cross = plan(&ctx, cross).await;
        let text = datafusion::physical_plan::displayable(cross.as_ref()).indent(false);
        assert!(!is_light(&cross), "{text}");
    }

    #[tokio::test]
    async fn heavy_queries_wait_in_turn_and_count_while_they_wait() {
        let ctx = SessionContext::new();
        let gate = Arc::new(QueryGate::new(1));
        let heavy = plan(&ctx, "SELECT count(*) FROM generate_series(1, 1000000)").await;
        let task = ctx.task_ctx();
        let mut first = QueryGate::execute(Some(&gate), heavy.clone(), task.clone()).unwrap();
        let mut second = QueryGate::execute(Some(&gate), heavy.clone(), task.clone()).unwrap();
        // Nothing runs before a poll.
        assert_eq!((gate.running(), gate.waiting()), (0, 0));
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        // The first takes the only permit (and may finish within its poll).
        let first_polled = first.as_mut().poll_next(&mut cx);
        if first_polled.is_pending() {
            assert_eq!(gate.running(), 1);
            assert!(second.as_mut().poll_next(&mut cx).is_pending());
            assert_eq!((gate.running(), gate.waiting()), (1, 1));
            // A light plan is not held up.
            let light =
                QueryGate::execute(Some(&gate), plan(&ctx, "SELECT 1").await, task).unwrap();
            let rows: Vec<_> = light.collect().await;
            assert_eq!(rows.len(), 1);
            assert_eq!(gate.waiting(), 1);
            // Dropping the running query hands its permit to the waiting one.
            drop(first);
            assert_eq!(gate.running(), 0);
            let counted: Vec<_> = second.collect().await;
            assert_eq!(counted.len(), 1);
        } else {
            assert_eq!(gate.running(), 0, "the permit is given back with the batch");
            drop(first);
            drop(second);
        }
        assert_eq!((gate.running(), gate.waiting()), (0, 0));
    }

    /// A client that reads a batch and then stops reading (a suspended portal, a slow
    /// reader) holds no permit: another heavy query runs meanwhile.
    #[tokio::test]
    async fn a_query_between_batches_holds_no_permit() {
        let ctx = SessionContext::new();
        let gate = Arc::new(QueryGate::new(1));
        let rows = plan(&ctx, "SELECT * FROM generate_series(1, 1000000)").await;
        let task = ctx.task_ctx();
        let mut reading = QueryGate::execute(Some(&gate), rows, task.clone()).unwrap();
        let first = reading.next().await.expect("a batch").unwrap();
        assert!(first.num_rows() > 0);
        assert_eq!(gate.running(), 0, "the permit went back with the batch");
        let other = plan(&ctx, "SELECT count(*) FROM generate_series(1, 1000)").await;
        let counted: Vec<_> = QueryGate::execute(Some(&gate), other, task)
            .unwrap()
            .collect()
            .await;
        assert_eq!(
            counted.len(),
            1,
            "the other query ran while the first was not read"
        );
        drop(reading);
        assert_eq!((gate.running(), gate.waiting()), (0, 0));
    }

    #[tokio::test]
    async fn a_dropped_waiter_stops_counting() {
        let ctx = SessionContext::new();
        let gate = Arc::new(QueryGate::new(1));
        let heavy = plan(&ctx, "SELECT count(*) FROM generate_series(1, 1000000)").await;
        let task = ctx.task_ctx();
        let holder = gate.permits.clone().try_acquire_owned().unwrap();
        let mut waiting = QueryGate::execute(Some(&gate), heavy, task).unwrap();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(waiting.as_mut().poll_next(&mut cx).is_pending());
        assert_eq!(gate.waiting(), 1);
        drop(waiting);
        assert_eq!(gate.waiting(), 0);
        drop(holder);
        assert_eq!(gate.permits.available_permits(), 1);
    }
}

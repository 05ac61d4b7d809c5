//! Running one statement for `/exec` or `/exp` on the task serving the connection (which runs
//! on the query runtime), its answer encoded in chunks that go out as the body.
//!
//! ```text
//!  handler ── start() ──▶ Running: a stream of Msg that polls produce() for each one
//!     │                    produce(): prepare, run, stream batches, Encoder::head / rows / tail
//!     ◀── Msg::Chunk (≈256 KiB, one at a time) … Msg::Last │ Msg::Done (DDL, INSERT), Msg::Failed
//!  first(): waits (Statement-Timeout) for the first message, so a failure or a timeout before
//!  any row is a proper 400; the rest streams as the body. An answer that is one Msg::Last
//!  goes out whole, with its length, so small answers skip compression. Dropping `Running` (the
//!  client went away, or the handler gave up) drops DataFusion's stream, which stops it.
//! ```
//!
//! Running the statement on the connection's own task, not one spawned on another runtime,
//! saves the wake-ups of other threads (three per query, by strace), which were most of a small
//! query's latency.

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use futures::{Stream, StreamExt};
use sundial_query::{Caller, Engine, Output};
use tokio::time::Instant;

use crate::error::Error;

/// Bytes gathered before a chunk is handed to the HTTP side.
pub(crate) const CHUNK_BYTES: usize = 256 << 10;
/// A chunk's first allocation; it grows (to a little over [`CHUNK_BYTES`]) as rows come.
const CHUNK_START_BYTES: usize = 16 << 10;

/// Rows `[first, end)` of the result to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowRange {
    pub first: u64,
    pub end: u64,
}

impl RowRange {
    pub(crate) const ALL: RowRange = RowRange {
        first: 0,
        end: u64::MAX,
    };

    /// QuestDB's `limit`: `n` is the first n rows; `m,n` skips rows before `m` and stops after
    /// row `n`. `/exec` counts `m` from 1 (rows m..=n), `/exp` from 0 (rows m+1..=n), as QuestDB
    /// does. Negative numbers count as 0.
    pub(crate) fn parse(limit: Option<&str>, one_based: bool) -> Result<RowRange, Error> {
        let Some(text) = limit.filter(|t| !t.trim().is_empty()) else {
            return Ok(RowRange::ALL);
        };
        let number = |s: &str| -> Result<u64, Error> {
            let v = s
                .trim()
                .parse::<i64>()
                .map_err(|_| Error::BadRequest(format!("bad limit '{text}': use n or m,n")))?;
            Ok(v.max(0) as u64)
        };
        match text.split_once(',') {
            None => Ok(RowRange {
                first: 0,
                end: number(text)?,
            }),
            Some((m, n)) => {
                let m = number(m)?;
                let first = if one_based { m.saturating_sub(1) } else { m };
                let end = if n.trim().is_empty() {
                    u64::MAX
                } else {
                    number(n)?
                };
                Ok(RowRange {
                    first,
                    end: end.max(first),
                })
            }
        }
    }
}

/// The statement timeout of a request: its `Statement-Timeout` header (milliseconds; 0 means
/// none) or the server's default.
pub(crate) fn timeout_ms(headers: &HeaderMap, default_ms: u64) -> Result<u64, Error> {
    match headers.get("statement-timeout") {
        None => Ok(default_ms),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                Error::BadRequest("bad Statement-Timeout header: use milliseconds".into())
            }),
    }
}

/// Timings of an answer, in nanoseconds (QuestDB's `timings`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tail {
    /// QuestDB's `count`: the rows counted (all of them with `count=true`).
    pub count: u64,
    pub compiler_ns: u64,
    pub execute_ns: u64,
    pub count_ns: u64,
}

/// Turns a result into the bytes of an answer.
pub(crate) trait Encoder: Send + 'static {
    /// The start of the answer, before any row. `timestamp` names the result's designated
    /// timestamp column, if it has one.
    fn head(&mut self, schema: &SchemaRef, timestamp: Option<&str>, out: &mut Vec<u8>);
    /// Rows `rows` of `batch`.
    fn rows(&mut self, batch: &RecordBatch, rows: Range<usize>, out: &mut Vec<u8>);
    /// The end of the answer. `failure` is an error after rows were already sent; returns
    /// whether the answer may still end normally (else the connection is cut, so the client
    /// cannot take a cut-short answer for a whole one).
    fn tail(&mut self, tail: &Tail, failure: Option<&str>, out: &mut Vec<u8>) -> bool;
}

/// What the query task tells the HTTP side.
pub(crate) enum Msg {
    Chunk(Bytes),
    /// A statement without rows finished, with its command tag.
    Done(String),
    /// The statement failed before any of its answer was sent.
    Failed(Error),
    /// The answer's last bytes: it is complete.
    Last(Bytes),
}

/// The client's address, where the server knows it (`ConnectInfo`, which `sundial serve`
/// provides; routers served without it, as in tests, give `None`).
pub(crate) struct Client(pub Option<std::net::SocketAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Client {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Client, Self::Rejection> {
        let info = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>();
        Ok(Client(info.map(|c| c.0)))
    }
}

/// One statement in flight.
pub(crate) struct Request {
    pub sql: String,
    pub range: RowRange,
    /// Keep reading past `range` to count every row (`count=true`).
    pub count_all: bool,
    /// Refuse statements that return no rows, without running them (`/exp`).
    pub select_only: bool,
    pub timeout_ms: u64,
    /// When the request arrived.
    pub started: Instant,
    /// The client's address, for the statement log.
    pub client: Option<std::net::SocketAddr>,
    /// Who runs the statement: the engine checks its role (see `sundial_query::Engine::run_as`).
    pub caller: Caller,
}

impl Request {
    /// The statement of a `/exec` or `/exp` request: its text (refused when empty), the rows
    /// `limit` asks for (`m,n` counted from 1 when `one_based`, as `/exec` reads it) and the
    /// statement timeout. Counts no rows past the range and refuses nothing: callers say.
    pub(crate) fn from_params(
        query: &str,
        params: &HashMap<String, String>,
        headers: &HeaderMap,
        default_timeout_ms: u64,
        one_based: bool,
        started: Instant,
        caller: Caller,
    ) -> Result<Request, Error> {
        if query.trim().is_empty() {
            return Err(Error::BadRequest("No query text".into()));
        }
        Ok(Request {
            sql: query.to_string(),
            range: RowRange::parse(params.get("limit").map(String::as_str), one_based)?,
            count_all: false,
            select_only: false,
            timeout_ms: timeout_ms(headers, default_timeout_ms)?,
            started,
            client: None,
            caller,
        })
    }

    fn deadline(&self) -> Option<Instant> {
        (self.timeout_ms > 0).then(|| self.started + Duration::from_millis(self.timeout_ms))
    }
}

/// A statement in flight. It runs only while the handler or the body polls it, on the task
/// serving the connection; dropping it drops the statement's stream, which stops it.
pub(crate) struct Running {
    producer: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    outbox: Outbox,
    deadline: Option<Instant>,
    timeout_ms: u64,
    complete: bool,
    /// How the statement failed, if it did.
    failure: FailureSlot,
    /// For the statement log and metrics, when the statement ends (dropped).
    sql: String,
    client: Option<std::net::SocketAddr>,
    started: Instant,
}

impl Drop for Running {
    /// The statement ended: counted, and logged if it failed, was cancelled or was slow
    /// (sundial-metrics). An answer neither complete nor failed was cut short: the client
    /// went away, or the server stopped the request.
    fn drop(&mut self) {
        use sundial_metrics::QueryOutcome;
        let failure = self.failure.take();
        let outcome = match &failure {
            Some((true, message)) => QueryOutcome::Cancelled(message),
            Some((false, message)) => QueryOutcome::Error(message),
            None if self.complete => QueryOutcome::Ok,
            None => QueryOutcome::Cancelled(
                "HTTP query stopped before its answer was complete: the client went away, or \
                 the server is shutting down",
            ),
        };
        let elapsed = self.started.elapsed();
        let protocol = sundial_metrics::Protocol::Http;
        sundial_metrics::query_finished(protocol, self.client, &self.sql, elapsed, outcome);
    }
}

/// How a statement failed: whether it was cancelled (a statement timeout, SQLSTATE 57014) and
/// the error's message. Set once by whoever sees the failure; read as the statement ends.
#[derive(Clone, Default)]
struct FailureSlot(Arc<Mutex<Option<(bool, String)>>>);

impl FailureSlot {
    fn set(&self, e: &Error) {
        let cancelled = match e {
            Error::Timeout(_) => true,
            Error::Query(q) => q.sqlstate() == "57014",
            _ => false,
        };
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert_with(|| (cancelled, e.to_string()));
    }

    fn take(&self) -> Option<(bool, String)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The one message the producer handed over and the HTTP side has not taken yet.
#[derive(Clone, Default)]
struct Outbox(Arc<Mutex<Option<Msg>>>);

impl Outbox {
    /// Hands `msg` over once the previous message was taken. It waits without a waker, which is
    /// sound only because [`Running`] polls the producer again each time it is polled after
    /// taking a message: the producer waits here only while its message is untaken.
    async fn send(&self, msg: Msg) {
        let mut msg = Some(msg);
        std::future::poll_fn(|_| {
            let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = msg.take();
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    fn take(&self) -> Option<Msg> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Starts a statement on the caller's task. It advances only while its messages are polled,
/// and at most one chunk ahead of what was taken, so a client that stops reading stops it.
pub(crate) fn start<E: Encoder>(engine: Arc<Engine>, request: Request, encoder: E) -> Running {
    let outbox = Outbox::default();
    let failure = FailureSlot::default();
    let deadline = request.deadline();
    let timeout_ms = request.timeout_ms;
    let (sql, client, started) = (request.sql.clone(), request.client, request.started);
    let producer = produce(engine, request, encoder, outbox.clone(), failure.clone());
    Running {
        producer: Some(Box::pin(producer)),
        outbox,
        deadline,
        timeout_ms,
        complete: false,
        failure,
        sql,
        client,
        started,
    }
}

impl Stream for Running {
    type Item = Msg;

    /// A waiting message; otherwise the producer runs until it hands one over, waits on the
    /// query, or ends (then the statement's messages end).
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Msg>> {
        if let Some(msg) = self.outbox.take() {
            return Poll::Ready(Some(msg));
        }
        if let Some(producer) = self.producer.as_mut()
            && producer.as_mut().poll(cx).is_ready()
        {
            self.producer = None;
        }
        match self.outbox.take() {
            Some(msg) => Poll::Ready(Some(msg)),
            None if self.producer.is_none() => Poll::Ready(None),
            None => Poll::Pending,
        }
    }
}

/// How a statement began.
pub(crate) enum Started {
    /// A statement without rows finished, with its command tag.
    Done(String),
    /// Rows are coming: the body streams them.
    Rows(Body),
}

impl Running {
    /// Waits for the statement's first message, within its timeout.
    pub(crate) async fn first(mut self) -> Result<Started, Error> {
        let first = match self.deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, self.next()).await {
                Ok(first) => first,
                Err(_) => {
                    let e = Error::Timeout(self.timeout_ms);
                    self.failure.set(&e);
                    return Err(e);
                }
            },
            None => self.next().await,
        };
        match first {
            None => {
                let e = Error::Internal("the query stopped without an answer".into());
                self.failure.set(&e);
                Err(e)
            }
            Some(Msg::Failed(e)) => Err(e),
            Some(Msg::Done(tag)) => {
                self.complete = true;
                Ok(Started::Done(tag))
            }
            Some(Msg::Last(bytes)) => {
                self.complete = true;
                Ok(Started::Rows(Body::from(bytes)))
            }
            Some(Msg::Chunk(bytes)) => Ok(Started::Rows(self.body(bytes))),
        }
    }

    /// The rest of the answer as a streamed body. The body ends normally only at `Msg::Last`;
    /// a task that stopped before it makes the body fail, which cuts the connection.
    fn body(self, first: Bytes) -> Body {
        let stream =
            futures::stream::unfold((Some(first), Some(self)), |(first, running)| async move {
                let mut running = running?;
                if let Some(bytes) = first {
                    return Some((Ok(bytes), (None, Some(running))));
                }
                match running.next().await {
                    Some(Msg::Chunk(bytes)) => Some((Ok(bytes), (None, Some(running)))),
                    Some(Msg::Last(bytes)) => {
                        running.complete = true;
                        Some((Ok(bytes), (None, None)))
                    }
                    Some(Msg::Failed(e)) => {
                        Some((Err(std::io::Error::other(e.to_string())), (None, None)))
                    }
                    Some(Msg::Done(_)) | None => Some((
                        Err(std::io::Error::other(
                            "the query stopped before its answer was complete",
                        )),
                        (None, None),
                    )),
                }
            });
        // Fused: a body may be polled again after its end (the compression layer does).
        Body::from_stream(stream.fuse())
    }
}

/// Prepares and runs the statement: its output, and its designated timestamp column if it has
/// one. With `select_only`, a statement that returns no rows is refused before it runs.
async fn run(
    engine: &Engine,
    sql: &str,
    select_only: bool,
    caller: &Caller,
) -> Result<(Output, Option<String>), Error> {
    let prepared = engine.prepare_as(sql, caller).await?;
    if select_only && prepared.schema.is_none() {
        return Err(Error::NotSelect);
    }
    let output = engine
        .run_prepared_as(&prepared, Vec::new(), caller)
        .await?;
    Ok((output, prepared.designated_timestamp))
}

fn nanos_since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Runs the statement and hands its encoded answer to `outbox`, a chunk at a time.
async fn produce<E: Encoder>(
    engine: Arc<Engine>,
    request: Request,
    mut encoder: E,
    outbox: Outbox,
    failed: FailureSlot,
) {
    let deadline = request.deadline();
    let compile = Instant::now();
    let output = match deadline {
        Some(d) => {
            let running = run(&engine, &request.sql, request.select_only, &request.caller);
            match tokio::time::timeout_at(d, running).await {
                Ok(output) => output,
                Err(_) => Err(Error::Timeout(request.timeout_ms)),
            }
        }
        None => run(&engine, &request.sql, request.select_only, &request.caller).await,
    };
    let compiler_ns = nanos_since(compile);
    let (mut stream, timestamp) = match output {
        Err(e) => {
            failed.set(&e);
            outbox.send(Msg::Failed(e)).await;
            return;
        }
        Ok((Output::Done { tag, .. }, _)) => {
            outbox.send(Msg::Done(tag)).await;
            return;
        }
        Ok((Output::Rows(stream), timestamp)) => (stream, timestamp),
    };
    let range = request.range;
    let mut out = Vec::with_capacity(CHUNK_START_BYTES);
    encoder.head(&stream.schema(), timestamp.as_deref(), &mut out);
    let mut sent_any = false;
    let mut row = 0u64;
    let mut sent = 0u64;
    let mut counting_since: Option<Instant> = None;
    let mut failure = None;
    loop {
        let next = match deadline {
            Some(d) => tokio::select! {
                next = stream.next() => next,
                _ = tokio::time::sleep_until(d) => {
                    failure = Some(Error::Timeout(request.timeout_ms));
                    break;
                }
            },
            None => stream.next().await,
        };
        let batch = match next {
            None => break,
            Some(Err(e)) => {
                failure = Some(Error::Query(e.into()));
                break;
            }
            Some(Ok(batch)) => batch,
        };
        let rows = batch.num_rows() as u64;
        if row < range.end {
            let start = range.first.saturating_sub(row).min(rows);
            let end = range.end.saturating_sub(row).min(rows);
            if end > start {
                encoder.rows(&batch, start as usize..end as usize, &mut out);
                sent += end - start;
            }
        }
        row += rows;
        if row >= range.end {
            if !request.count_all {
                break;
            }
            counting_since.get_or_insert_with(Instant::now);
        }
        if out.len() >= CHUNK_BYTES {
            // An answer past one chunk is large: later chunks start at their full size.
            let chunk = Bytes::from(std::mem::replace(
                &mut out,
                Vec::with_capacity(CHUNK_BYTES + CHUNK_BYTES / 4),
            ));
            outbox.send(Msg::Chunk(chunk)).await;
            sent_any = true;
        }
    }
    // Dropping the stream now releases what the query holds before the last bytes go out.
    drop(stream);
    if let Some(e) = &failure {
        failed.set(e);
    }
    if let Some(e) = failure.take_if(|_| !sent_any) {
        outbox.send(Msg::Failed(e)).await;
        return;
    }
    let tail = Tail {
        count: if request.count_all {
            row
        } else if sent > 0 {
            range.first + sent
        } else {
            0
        },
        compiler_ns,
        execute_ns: nanos_since(request.started),
        count_ns: counting_since.map_or(0, nanos_since),
    };
    let message = failure.map(|e| e.to_string());
    let complete = encoder.tail(&tail, message.as_deref(), &mut out);
    // Without `Msg::Last` the body fails, which tells the client the answer is cut short.
    let last = Bytes::from(out);
    outbox
        .send(if complete {
            Msg::Last(last)
        } else {
            Msg::Chunk(last)
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_questdb() {
        let exec = |s| RowRange::parse(Some(s), true).ok();
        let exp = |s| RowRange::parse(Some(s), false).ok();
        assert_eq!(exec("5"), Some(RowRange { first: 0, end: 5 }));
        assert_eq!(exec("3,4"), Some(RowRange { first: 2, end: 4 }));
        assert_eq!(exp("3,4"), Some(RowRange { first: 3, end: 4 }));
        assert_eq!(exec("-5"), Some(RowRange { first: 0, end: 0 }));
        assert_eq!(
            exec("2,"),
            Some(RowRange {
                first: 1,
                end: u64::MAX
            })
        );
        assert!(exec("x").is_none());
        assert_eq!(RowRange::parse(None, true).ok(), Some(RowRange::ALL));
    }
}

//! One client connection: startup, authentication, then the simple and extended query
//! protocols.
//!
//! ```text
//!  socket ─▶ input buffer ─▶ next_message ─▶ handle(message)
//!                                              │ Parse:   plan once, keep the plan
//!                                              │ Bind:    decode parameters into a portal
//!                                              │ Execute: run in this task ─▶ rows
//!                                              ▼
//!                     output buffer ──(a round trip's end, buffer full)──▶ socket
//! ```
//!
//! Invariants:
//! - the output buffer is written to the socket only when it is full, or when it holds a round
//!   trip's end (ReadyForQuery after Sync or a simple query, or a Flush's answer) and either no
//!   further complete message is buffered or the session is about to wait on a statement; so a
//!   client's pipelined round trips cost one write, and no answer waits for a later statement;
//! - after an error in the extended protocol every message up to Sync is skipped;
//! - a portal lives until its transaction ends (Sync outside a transaction block, COMMIT,
//!   ROLLBACK); only cursors declared WITH HOLD outlive it;
//! - a portal's rows are pulled from its statement's stream one batch at a time, as the output
//!   takes them, so a large result is never held whole.
//!
//! Statements run in the session's own task, on the runtime serving the connection: a round
//! trip involves no other thread. DataFusion's partition tasks, where a plan has them, are
//! spawned on that same runtime.
//!
//! COPY (in `copy`) and SQL cursors (in `cursor`) are statements of their own kinds run on the
//! same machinery: a COPY FROM STDIN puts the session in copy-in mode, where CopyData messages
//! arriving through the normal message loop feed a loader thread; a cursor is a named portal
//! whose rows FETCH sends n at a time.

mod copy;
mod cursor;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use futures::stream::{self, BoxStream, StreamExt};
use sundial_query::copy::CopyOptions;
use sundial_query::{
    Caller, Deallocate, Engine, LookupRows, Output, Prepared, QueryError, ScalarValue,
    SessionStatements,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::admission::{self, Ticket};
use crate::auth::Exchange;
use crate::cancel::CancelSignal;
use crate::cells::CellEncoder;
use crate::codec::{self, Message, Reader, Writer};
use crate::error::PgError;
use crate::local::{self, LocalCommand};
use crate::shared::{Shared, stopped};
use crate::transport::{self, ReadSide, Watch, WriteSide};
use crate::types::{self, ColumnEncoder, Format};

const READ_CHUNK_BYTES: usize = 16 << 10;
const SPIN_READ_BYTES: usize = 4 << 10;
/// SSLRequests and GSSENCRequests answered on one connection (a client tries each at most
/// once).
const ENCRYPTION_REQUESTS_MAX: u32 = 2;

pub(crate) struct Session {
    shared: Arc<Shared>,
    /// Plain TCP, or TLS once the client asked for it (`transport`).
    reader: ReadSide,
    writer: WriteSide,
    /// Bytes received but not yet handled.
    input: Vec<u8>,
    out: Writer,
    stop: watch::Receiver<bool>,
    /// Protocol-level prepared statements (Parse), by name.
    statements: HashMap<String, Arc<Statement>>,
    /// SQL-level prepared statements (PREPARE), the session's own; gone with it.
    sql_statements: SessionStatements,
    portals: HashMap<String, Portal>,
    transaction: Transaction,
    /// Set by an error in the extended protocol: messages are skipped until Sync.
    skipping: bool,
    /// The 1-based character position in its SQL of the error a Parse just failed with.
    parse_error_position: Option<usize>,
    settings: BTreeMap<String, (String, bool)>,
    pid: i32,
    secret: i32,
    cancel: Arc<CancelSignal>,
    /// Set while a COPY FROM STDIN receives data: copy messages go to its loader.
    copy_in: Option<copy::CopyIn>,
    /// A simple query of several statements runs as one implicit transaction block (for
    /// DECLARE, as in PostgreSQL).
    implicit_block: bool,
    /// The output ends a round trip (ReadyForQuery, or what a Flush asks for). It is written
    /// once no further complete message is buffered, or before the session waits on anything,
    /// so a client's pipelined messages get one write in answer.
    reply_due: bool,
    /// The client's address, for the statement log.
    peer: Option<std::net::SocketAddr>,
    /// While logging in: marks the connection heard from at each read (see `admission`).
    login_heard: Option<admission::Heard>,
    /// Who runs the session's statements: the logged-in user, whose role the engine checks
    /// at every statement. Until login, a name no user store holds.
    caller: Caller,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transaction {
    Idle,
    Block,
    Failed,
}

impl Transaction {
    fn status(self) -> u8 {
        match self {
            Transaction::Idle => b'I',
            Transaction::Block => b'T',
            Transaction::Failed => b'E',
        }
    }
}

/// A parsed statement: planned once, run by any number of portals.
struct Statement {
    kind: StatementKind,
    /// The OID reported for each parameter.
    param_oids: Vec<i32>,
    /// The type each parameter converts to before substitution, where known.
    param_types: Vec<Option<DataType>>,
    /// The type OIDs RowDescription gives the result columns, which their encoding follows.
    column_types: Vec<i32>,
    /// The statement's text (Parse's; empty for simple queries, which log their own), for
    /// the statement log.
    text: Box<str>,
    /// The RowDescription message last sent for it, with the result formats it was for: a
    /// client that describes each portal it binds (libpq does) gets it copied. The schema is
    /// fixed at Parse, so only the formats can change it.
    description: std::sync::Mutex<Option<Described>>,
}

/// A RowDescription message and the result formats it was written for.
type Described = (Vec<Format>, Box<[u8]>);

enum StatementKind {
    Empty,
    Local(LocalCommand),
    Engine(Prepared),
    /// `COPY table [(columns)] FROM STDIN`.
    CopyIn {
        table: String,
        columns: Vec<String>,
        options: CopyOptions,
    },
    /// `COPY table | (query) TO STDOUT`: the query, planned.
    CopyOut {
        query: Prepared,
        options: CopyOptions,
    },
    /// `DECLARE name CURSOR FOR query`: the query, planned.
    Declare {
        name: String,
        binary: bool,
        hold: bool,
        query: Prepared,
    },
    /// `FETCH` / `MOVE`: `count` rows forward (`None`: all).
    Fetch {
        name: String,
        count: Option<u64>,
        move_only: bool,
    },
    /// `CLOSE name` / `CLOSE ALL` (`None`).
    CloseCursor(Option<String>),
}

impl Statement {
    fn new(
        kind: StatementKind,
        param_oids: Vec<i32>,
        param_types: Vec<Option<DataType>>,
    ) -> Statement {
        let mut statement = Statement {
            kind,
            param_oids,
            param_types,
            column_types: Vec::new(),
            text: Box::default(),
            description: std::sync::Mutex::new(None),
        };
        if let Some(schema) = statement.schema() {
            statement.column_types = types::pg_field_types(&schema);
        }
        statement
    }

    fn schema(&self) -> Option<SchemaRef> {
        match &self.kind {
            StatementKind::Engine(p) => p.schema.clone(),
            StatementKind::Local(LocalCommand::Show(name)) => Some(show_schema(name)),
            _ => None,
        }
    }
}

struct Portal {
    statement: Arc<Statement>,
    params: Vec<ScalarValue>,
    formats: Vec<Format>,
    state: PortalState,
    /// Rows sent so far, over every Execute or FETCH.
    rows_sent: u64,
    /// Set when the portal is an SQL cursor.
    cursor: Option<cursor::CursorInfo>,
}

impl Portal {
    fn new(statement: Arc<Statement>, params: Vec<ScalarValue>, formats: Vec<Format>) -> Portal {
        Portal {
            statement,
            params,
            formats,
            state: PortalState::Ready,
            rows_sent: 0,
            cursor: None,
        }
    }
}

enum PortalState {
    Ready,
    Running(Running),
    Done,
}

/// A statement being executed.
struct Running {
    source: Source,
    /// The batch being sent and the next row of it.
    current: Option<(Vec<ArrayRef>, usize, usize)>,
    deadline: Option<Instant>,
    /// The statement sets the session user's own password: once it is done, the session
    /// goes on with the credential version it made (see `renew_credential`).
    sets_own_password: bool,
}

/// Where a running statement's items come from.
enum Source {
    /// The statement's run: planning, then its batches, each computed when polled. Dropping
    /// it stops the statement, DataFusion's partition tasks included.
    Stream(BoxStream<'static, Item>),
    /// A result computed in place (a point lookup).
    Ready(std::vec::IntoIter<Item>),
}

enum Item {
    Batch(RecordBatch),
    Done { tag: String, rows: Option<u64> },
    Failed(QueryError),
}

/// What a pass over the input buffer did.
enum Handled {
    None,
    Some,
    Terminate,
}

/// How an Execute ended.
enum Completion {
    /// The row limit was reached with rows left: PortalSuspended.
    Suspended,
    /// Finished: CommandComplete with this tag.
    Complete(String),
    /// A COPY FROM STDIN is receiving data: CommandComplete comes after CopyDone.
    CopyStarted,
}

/// What happens to the rows a portal produces.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rows {
    Send,
    /// `MOVE`: counted, not sent.
    Discard,
}

/// A statement of a simple query, and the characters of the query before it.
struct SimpleStatement {
    text: String,
    chars_before: usize,
}

impl Session {
    pub fn new(shared: Arc<Shared>, stream: TcpStream, stop: watch::Receiver<bool>) -> Session {
        let peer = stream.peer_addr().ok();
        let (reader, writer) = transport::plain(stream);
        let (pid, secret, cancel) = shared.cancels.register();
        Session {
            shared,
            reader,
            writer,
            input: Vec::with_capacity(READ_CHUNK_BYTES),
            out: Writer::default(),
            stop,
            statements: HashMap::new(),
            sql_statements: SessionStatements::new(),
            portals: HashMap::new(),
            transaction: Transaction::Idle,
            skipping: false,
            parse_error_position: None,
            settings: local::default_settings(),
            pid,
            secret,
            cancel,
            copy_in: None,
            implicit_block: false,
            reply_due: false,
            peer,
            login_heard: None,
            caller: Caller::user(""),
        }
    }

    /// Serves the connection until the client leaves, a fatal error, or server shutdown.
    pub async fn run(mut self, ticket: Ticket) -> Result<(), PgError> {
        let result = self.serve(ticket).await;
        self.shared.cancels.unregister(self.pid);
        if let Err(e) = &result
            && !matches!(e, PgError::Io(_))
        {
            self.out
                .error(b'E', "FATAL", e.sqlstate(), &e.to_string(), None, None);
            let _ = self.flush().await;
        }
        result
    }

    async fn serve(&mut self, ticket: Ticket) -> Result<(), PgError> {
        let Some((user, credential)) = self.login(&ticket).await? else {
            return Ok(());
        };
        self.login_heard = None;
        // Held until the session ends.
        let _slot = ticket.admit()?;
        // Every statement checks the user's credentials are still those it logged in with.
        self.caller = Caller::session(user.as_str(), credential);
        self.settings
            .insert("session_authorization".into(), (user, true));
        for (name, (value, reportable)) in &self.settings {
            if *reportable {
                self.out.parameter_status(local::reported_name(name), value);
            }
        }
        self.out.backend_key_data(self.pid, self.secret);
        self.out.ready_for_query(self.transaction.status());
        self.flush().await?;
        loop {
            match self.handle_buffered().await? {
                Handled::Terminate => return Ok(()),
                // Bytes may have arrived while those messages ran: look again before reading.
                Handled::Some => continue,
                Handled::None => {}
            }
            self.send_due().await?;
            self.cancel.idle();
            if self.spin_read()? {
                self.cancel.busy();
                continue;
            }
            let stop = stopped(self.stop.clone());
            tokio::select! {
                read = self.read_more() => {
                    if read? == 0 {
                        return Ok(());
                    }
                    self.cancel.busy();
                }
                _ = stop => {
                    self.out.error(b'E', "FATAL", "57P01", "terminating connection: the server is shutting down", None, None);
                    self.flush().await?;
                    return Ok(());
                }
            }
        }
    }

    async fn read_more(&mut self) -> Result<usize, PgError> {
        self.input.reserve(READ_CHUNK_BYTES);
        let n = self.reader.read_buf(&mut self.input).await?;
        if n > 0
            && let Some(heard) = &self.login_heard
        {
            heard.now();
        }
        Ok(n)
    }

    async fn flush(&mut self) -> Result<(), PgError> {
        if !self.out.buf.is_empty() {
            self.writer.write_all(&self.out.buf).await?;
            // TLS may hold the last records until flushed (a no-op on plain TCP).
            self.writer.flush().await?;
            self.out.buf.clear();
        }
        self.reply_due = false;
        Ok(())
    }

    /// Waits up to `read_spin_us` for the client's next bytes without letting the thread
    /// sleep, if a polling slot is free and another query thread is idle: a client that
    /// answers promptly is served without a wake-up's latency. Between polls the thread
    /// yields, so any other runnable thread on its CPU (a client on the same machine, another
    /// process) runs first: polling only takes time nobody else wants, and a server that is
    /// not saturated adds no scheduling delay to others' work (with a busy-wait instead, p99
    /// at a paced 20,000 lookups/s over 16 clients was 1.3-2.1 ms; yielding, 0.34 ms).
    ///
    /// Over plain TCP the bytes are read here, going around tokio's readiness cache (which
    /// only the runtime's event loop refreshes), and the result says whether any were. Under
    /// TLS the socket is only peeked (its bytes are records for rustls): the result is false,
    /// and the read that follows finds the bytes at once (see `transport::EagerTcp`). False
    /// also at end of stream, which the blocking read then reports.
    fn spin_read(&mut self) -> Result<bool, PgError> {
        let spin = Duration::from_micros(self.shared.options.read_spin_us);
        if spin.is_zero() {
            return Ok(false);
        }
        let Some(watch) = self.reader.watch() else {
            return Ok(false);
        };
        let shared = self.shared.clone();
        let parked = shared.options.parked_workers.as_deref();
        let others_idle = || parked.is_none_or(|p| p.count() > 0);
        if !others_idle() {
            return Ok(false);
        }
        let Some(_slot) = shared.spinners.try_enter() else {
            return Ok(false);
        };
        let started = Instant::now();
        let mut chunk = [0u8; SPIN_READ_BYTES];
        let mut peeked = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        loop {
            let got = match &watch {
                Watch::Plain(socket) => {
                    std::io::Read::read(&mut &*socket2::SockRef::from(*socket), &mut chunk)
                }
                Watch::Tls(socket) => socket.peek(&mut peeked),
            };
            match got {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    if let Watch::Tls(_) = watch {
                        return Ok(false);
                    }
                    self.input.extend_from_slice(&chunk[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
            // Work arrived for the other workers: this thread may be needed too.
            if started.elapsed() >= spin || !others_idle() {
                return Ok(false);
            }
            std::thread::yield_now();
            crate::fair::yielded();
        }
    }

    /// Writes the output if it ends a round trip.
    async fn send_due(&mut self) -> Result<(), PgError> {
        if self.reply_due {
            self.flush().await?;
            crate::fair::yield_if_due(self.shared.options.yield_interval);
        }
        Ok(())
    }

    /// Startup and authentication, within the authentication timeout and while no newer
    /// connection evicts this one (see [`crate::admission`]). Returns the authenticated user and
    /// its credential version, or `None` when the connection carried a cancel or the server is
    /// stopping.
    async fn login(&mut self, ticket: &Ticket) -> Result<Option<(String, u64)>, PgError> {
        let ms = self.shared.options.auth_timeout_ms.max(1);
        let stop = stopped(self.stop.clone());
        // Bytes arriving during the login tell the admission this connection is no silent one.
        self.login_heard = Some(ticket.heard());
        let exchange = async {
            let Some(user) = self.startup().await? else {
                return Ok(None);
            };
            if !ticket.has_room() {
                return Err(admission::too_many_clients());
            }
            // Read before the password is checked: a change in between ends the session at
            // its first statement.
            let credential = self.shared.users.store().credential(&user);
            self.authenticate(&user).await?;
            let credential = credential.ok_or_else(|| {
                PgError::Query(sundial_auth::AuthError::Expired(user.clone()).into())
            })?;
            Ok(Some((user, credential)))
        };
        tokio::select! {
            done = tokio::time::timeout(Duration::from_millis(ms), exchange) => {
                done.map_err(|_| PgError::AuthTimeout { ms })?
            }
            () = ticket.evicted() => Err(PgError::TooManyConnections(
                "too many connections are waiting to authenticate; this one waited longest"
                    .into(),
            )),
            _ = stop => Ok(None),
        }
    }

    /// Reads the startup packet, answering an SSLRequest with 'S' and going on over TLS when
    /// the server has a certificate ('N' without one; GSSENCRequests get 'N'; at most
    /// [`ENCRYPTION_REQUESTS_MAX`] requests), taking a connection that opens with a TLS
    /// handshake (PostgreSQL 17's direct TLS), and serving a CancelRequest (plain or not). A
    /// plain login the TLS policy forbids for the peer fails (SQLSTATE 28000). Returns the
    /// user, or `None` when the connection carried a cancel.
    async fn startup(&mut self) -> Result<Option<String>, PgError> {
        let max = self.shared.options.message_bytes_max;
        let mut encryption_requests = 0;
        if let Some(tls) = self.shared.options.tls.clone()
            && self.input.is_empty()
            && self.reader.peek_first().await? == Some(sundial_tls::TLS_HANDSHAKE_RECORD)
        {
            self.start_tls(&tls).await?;
        }
        loop {
            let parsed = codec::next_startup(&self.input, max)?.map(|(body, n)| (body.to_vec(), n));
            let Some((body, n)) = parsed else {
                if self.read_more().await? == 0 {
                    return Ok(None);
                }
                continue;
            };
            self.input.drain(..n);
            let mut r = Reader::new(&body);
            match r.i32()? {
                code @ (codec::SSL_REQUEST | codec::GSSENC_REQUEST) => {
                    encryption_requests += 1;
                    if encryption_requests > ENCRYPTION_REQUESTS_MAX {
                        return Err(PgError::Protocol(format!(
                            "more than {ENCRYPTION_REQUESTS_MAX} encryption requests"
                        )));
                    }
                    if self.reader.is_tls() {
                        return Err(PgError::Protocol(
                            "an encryption request on a connection already using TLS".into(),
                        ));
                    }
                    match self.shared.options.tls.clone() {
                        Some(tls) if code == codec::SSL_REQUEST => {
                            // Bytes sent past the request before the handshake would be
                            // taken as if they had come over TLS (CVE-2021-23214).
                            if !self.input.is_empty() {
                                return Err(PgError::Protocol(
                                    "unencrypted data after the SSLRequest".into(),
                                ));
                            }
                            self.writer.write_all(b"S").await?;
                            self.start_tls(&tls).await?;
                        }
                        _ => self.writer.write_all(b"N").await?,
                    }
                }
                codec::CANCEL_REQUEST => {
                    let (pid, secret) = (r.i32()?, r.i32()?);
                    self.shared.cancels.cancel(pid, secret);
                    return Ok(None);
                }
                codec::PROTOCOL_V3 => {
                    self.check_tls_required()?;
                    return self.startup_parameters(r).map(Some);
                }
                version => {
                    return Err(PgError::Protocol(format!(
                        "unsupported frontend protocol {}.{}: the server supports 3.0",
                        version >> 16,
                        version & 0xffff
                    )));
                }
            }
        }
    }

    /// Runs the TLS handshake; the session goes on over TLS.
    async fn start_tls(&mut self, tls: &sundial_tls::Tls) -> Result<(), PgError> {
        let reader = std::mem::replace(&mut self.reader, ReadSide::Detached);
        let writer = std::mem::replace(&mut self.writer, WriteSide::Detached);
        (self.reader, self.writer) = transport::upgrade(reader, writer, tls).await?;
        Ok(())
    }

    /// Fails a plain login from a peer that `tls_require` wants on TLS.
    fn check_tls_required(&self) -> Result<(), PgError> {
        let require = self.shared.options.tls_require;
        let allowed = self.reader.is_tls()
            || match &self.peer {
                Some(peer) => require.allows_plain(peer),
                None => require == sundial_tls::TlsRequire::Off,
            };
        if allowed {
            return Ok(());
        }
        let from = self
            .peer
            .map_or_else(|| "an unknown address".to_string(), |p| p.to_string());
        Err(PgError::TlsRequired(format!(
            "TLS is required for connections from {from}: connect with sslmode=require"
        )))
    }

    /// Fails a cleartext-password login over plain TCP from another host: the password would
    /// cross the network in clear.
    fn check_cleartext_allowed(&self) -> Result<(), PgError> {
        let method = self.shared.users.method();
        if crate::auth::password_may_travel(method, self.reader.is_tls(), self.peer) {
            return Ok(());
        }
        Err(PgError::TlsRequired(
            "this server takes passwords in clear text (--pg-auth-method password), which it \
             accepts only over TLS from other hosts: connect with sslmode=require"
                .into(),
        ))
    }

    fn startup_parameters(&mut self, mut r: Reader<'_>) -> Result<String, PgError> {
        let mut user = None;
        while !r.is_empty() {
            let name = r.cstr()?;
            if name.is_empty() {
                break;
            }
            let value = r.cstr()?;
            match name {
                "user" => user = Some(value.to_string()),
                "application_name" | "client_encoding" | "datestyle" | "timezone" => {
                    self.settings
                        .insert(name.to_ascii_lowercase(), (value.to_string(), true));
                }
                "options" => {
                    // `-c name=value` pairs, as libpq's PGOPTIONS passes them.
                    for pair in value.split_whitespace().filter(|p| *p != "-c") {
                        let pair = pair.trim_start_matches("-c");
                        if let Some((k, v)) = pair.split_once('=') {
                            self.set(k, Some(v.to_string()));
                        }
                    }
                }
                _ => {}
            }
        }
        user.ok_or_else(|| PgError::Protocol("startup packet names no user".into()))
    }

    /// The password exchange, in the address's turn (see `sundial_auth::Throttle`) and slowed
    /// for an (address, user) that failed before; a failure is counted, remembered and delayed
    /// before the client hears of it.
    async fn authenticate(&mut self, user: &str) -> Result<(), PgError> {
        let ip = self
            .peer
            .map_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), |p| {
                p.ip()
            });
        self.check_cleartext_allowed()?;
        let shared = self.shared.clone();
        let throttle = shared.users.throttle();
        // The delay is served within the address's turn: parallel guesses queue.
        let _turn = throttle
            .attempt(ip)
            .await
            .map_err(|e| PgError::Query(e.into()))?;
        let wait = throttle.delay(ip, user);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let outcome = self.password_exchange(user).await;
        match &outcome {
            Ok(()) => throttle.succeeded(ip, user),
            Err(PgError::Auth(_)) => {
                throttle.failed(ip, user);
                sundial_metrics::metrics().auth_failed(sundial_metrics::Connection::Pg);
                tokio::time::sleep(sundial_auth::FAILURE_DELAY).await;
            }
            Err(_) => {}
        }
        outcome
    }

    async fn password_exchange(&mut self, user: &str) -> Result<(), PgError> {
        let shared = self.shared.clone();
        let mut exchange: Exchange = shared.users.begin(user, &mut self.out);
        self.flush().await?;
        let max = self.shared.options.message_bytes_max;
        loop {
            let step = match codec::next_message(&self.input, max)? {
                Some((message, n)) => {
                    if message.tag != b'p' {
                        return Err(PgError::Protocol(format!(
                            "expected a password message, got '{}'",
                            message.tag as char
                        )));
                    }
                    let next = exchange.step(&shared.users, message.body, &mut self.out)?;
                    self.input.drain(..n);
                    next
                }
                None => {
                    if self.read_more().await? == 0 {
                        return Err(PgError::Io(std::io::ErrorKind::UnexpectedEof.into()));
                    }
                    continue;
                }
            };
            match step {
                Some(next) => {
                    exchange = next;
                    self.flush().await?;
                }
                None => return Ok(()),
            }
        }
    }

    /// Handles every complete message in the input buffer.
    async fn handle_buffered(&mut self) -> Result<Handled, PgError> {
        let max = self.shared.options.message_bytes_max;
        let mut input = std::mem::take(&mut self.input);
        let mut start = 0;
        let mut handled = Handled::None;
        let mut outcome = Ok(());
        while let Some((message, n)) = match codec::next_message(&input[start..], max) {
            Ok(m) => m,
            Err(e) => {
                outcome = Err(e);
                None
            }
        } {
            start += n;
            handled = Handled::Some;
            match self.handle(message).await {
                Ok(true) => {}
                Ok(false) => {
                    handled = Handled::Terminate;
                    break;
                }
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        // Bytes read while handling (a query waits while watching the socket) follow the rest.
        input.drain(..start);
        input.append(&mut self.input);
        self.input = input;
        outcome.map(|()| handled)
    }

    /// Handles one message. Returns false when the client said goodbye.
    async fn handle(&mut self, message: Message<'_>) -> Result<bool, PgError> {
        if self.copy_in.is_some() {
            return self.copy_message(message).await;
        }
        if self.skipping && !matches!(message.tag, b'S' | b'X') {
            return Ok(true);
        }
        let result = match message.tag {
            b'Q' => {
                self.simple_query(message.body).await?;
                return Ok(true);
            }
            b'P' => self.parse(message.body).await,
            b'B' => self.bind(message.body),
            b'D' => self.describe(message.body),
            b'E' => self.execute(message.body).await,
            b'C' => self.close(message.body),
            b'S' => {
                self.skipping = false;
                if self.transaction == Transaction::Idle {
                    // Only holdable cursors outlive the implicit transaction.
                    self.portals.retain(|_, p| p.cursor.is_some());
                }
                self.out.ready_for_query(self.transaction.status());
                self.reply_due = true;
                return Ok(true);
            }
            b'H' => {
                self.reply_due = true;
                return Ok(true);
            }
            b'X' => return Ok(false),
            // Copy messages outside COPY are ignored, as PostgreSQL does.
            b'd' | b'c' | b'f' => return Ok(true),
            tag => {
                return Err(PgError::Protocol(format!(
                    "unknown message type '{}'",
                    tag as char
                )));
            }
        };
        if let Err(e) = result {
            if e.is_fatal() {
                return Err(e);
            }
            let position = self.parse_error_position.take();
            self.report(&e, position);
            self.skipping = true;
        }
        Ok(true)
    }

    /// Counts a statement that ended (`sundial_queries_total`) and logs it if it failed, was
    /// cancelled (57014: a cancel request, a statement timeout) or was slow.
    fn log_statement(&self, sql: &str, elapsed: Duration, outcome: Result<(), &PgError>) {
        let message;
        let outcome = match outcome {
            Ok(()) => sundial_metrics::QueryOutcome::Ok,
            Err(e) => {
                message = e.to_string();
                if e.sqlstate() == "57014" || matches!(e, PgError::Io(_)) {
                    sundial_metrics::QueryOutcome::Cancelled(&message)
                } else {
                    sundial_metrics::QueryOutcome::Error(&message)
                }
            }
        };
        let protocol = sundial_metrics::Protocol::Pg;
        sundial_metrics::query_finished(protocol, self.peer, sql, elapsed, outcome);
    }

    /// Writes an ErrorResponse and marks an open transaction block failed.
    fn report(&mut self, e: &PgError, position: Option<usize>) {
        self.out.error(
            b'E',
            "ERROR",
            e.sqlstate(),
            &e.to_string(),
            position,
            e.context(),
        );
        if self.transaction == Transaction::Block {
            self.transaction = Transaction::Failed;
        }
    }

    // ---- simple query ----------------------------------------------------------------------

    async fn simple_query(&mut self, body: &[u8]) -> Result<(), PgError> {
        let sql = Reader::new(body).cstr()?.to_string();
        // The unnamed statement and portal do not survive a simple query.
        self.statements.remove("");
        self.portals.remove("");
        match Engine::split(&sql) {
            Ok(statements) if statements.is_empty() => self.out.empty(b'I'),
            Ok(statements) => {
                let mut search_from = 0;
                let mut queue = VecDeque::with_capacity(statements.len());
                for statement in statements {
                    let offset = sql[search_from..]
                        .find(&statement.text)
                        .map_or(0, |i| i + search_from);
                    search_from = offset + statement.text.len();
                    queue.push_back(SimpleStatement {
                        chars_before: sql[..offset].chars().count(),
                        text: statement.text,
                    });
                }
                self.implicit_block = queue.len() > 1;
                if self.run_simple(queue).await? {
                    // A COPY FROM STDIN waits for its data; the query ends after CopyDone.
                    return Ok(());
                }
            }
            Err(e) => {
                let position = e.char_offset(&sql).map(|p| p + 1);
                let e = PgError::Query(e);
                self.log_statement(&sql, Duration::ZERO, Err(&e));
                self.report(&e, position);
            }
        }
        self.end_simple_query();
        Ok(())
    }

    /// Runs statements of a simple query until one fails or a COPY FROM STDIN starts. Returns
    /// true in the latter case, with the statements left kept for after the COPY.
    async fn run_simple(&mut self, mut queue: VecDeque<SimpleStatement>) -> Result<bool, PgError> {
        while let Some(statement) = queue.pop_front() {
            let started = Instant::now();
            let result = self.simple_statement(&statement.text).await;
            let outcome = result.as_ref().map(|_| ()).map_err(|(e, _)| e);
            self.log_statement(&statement.text, started.elapsed(), outcome);
            if let Err((e, position)) = result {
                if e.is_fatal() {
                    return Err(e);
                }
                self.report(&e, position.map(|p| p + statement.chars_before + 1));
                return Ok(false);
            }
            if let Some(copy) = &mut self.copy_in {
                copy.rest = Some(queue);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Ends a simple query: its implicit block (and the cursors declared in it) and
    /// ReadyForQuery.
    fn end_simple_query(&mut self) {
        if std::mem::take(&mut self.implicit_block) && self.transaction == Transaction::Idle {
            self.close_portals_at_commit();
        }
        self.out.ready_for_query(self.transaction.status());
        self.reply_due = true;
    }

    /// Runs one statement of a simple query; errors carry their 0-based character position.
    async fn simple_statement(&mut self, sql: &str) -> Result<(), (PgError, Option<usize>)> {
        let statement = self
            .prepare_statement(sql, &[])
            .await
            .map_err(|e| with_position(e, sql))?;
        let statement = Arc::new(statement);
        if let Some((schema, formats)) = self
            .described(&statement, &[])
            .map_err(|e| with_position(e, sql))?
        {
            self.row_description(&schema, &formats);
        }
        let mut portal = Portal::new(statement, Vec::new(), Vec::new());
        match self.run_portal(&mut portal, 0, Rows::Send).await {
            Ok(Completion::Complete(tag)) => {
                self.out.command_complete(&tag);
                Ok(())
            }
            Ok(Completion::CopyStarted) => Ok(()),
            Ok(Completion::Suspended) => {
                Err((PgError::Internal("suspended without a limit".into()), None))
            }
            Err(e) => Err(with_position(e, sql)),
        }
    }

    // ---- extended query --------------------------------------------------------------------

    async fn parse(&mut self, body: &[u8]) -> Result<(), PgError> {
        let mut r = Reader::new(body);
        let name = r.cstr()?.to_string();
        let sql = r.cstr()?.to_string();
        let count = r.count()?;
        let mut declared = Vec::with_capacity(count);
        for _ in 0..count {
            declared.push(r.i32()?);
        }
        if !name.is_empty() && self.statements.contains_key(&name) {
            return Err(PgError::DuplicateStatement(name));
        }
        if !name.is_empty() && self.statements.len() >= sundial_query::SESSION_STATEMENTS_MAX {
            return Err(PgError::TooManyStatements(
                sundial_query::SESSION_STATEMENTS_MAX,
            ));
        }
        let started = Instant::now();
        let mut statement = match self.prepare_statement(&sql, &declared).await {
            Ok(statement) => statement,
            Err(e) => {
                self.log_statement(&sql, started.elapsed(), Err(&e));
                let (e, position) = with_position(e, &sql);
                self.parse_error_position = position.map(|p| p + 1);
                return Err(e);
            }
        };
        statement.text = sql.into_boxed_str();
        self.statements.insert(name, Arc::new(statement));
        self.out.empty(b'1');
        Ok(())
    }

    async fn prepare_statement(
        &mut self,
        sql: &str,
        declared: &[i32],
    ) -> Result<Statement, PgError> {
        if self.transaction == Transaction::Failed
            && !matches!(
                local::classify(sql),
                Some(LocalCommand::Commit | LocalCommand::Rollback)
            )
        {
            return Err(PgError::InFailedTransaction);
        }
        let kind = if is_empty_statement(sql) {
            StatementKind::Empty
        } else if let Some(command) = local::classify(sql) {
            StatementKind::Local(command)
        } else if let Some(command) = local::classify_cursor(sql) {
            self.prepare_cursor(command?).await?
        } else if let Some(copy) = sundial_query::copy::parse_copy(sql)? {
            self.prepare_copy(copy).await?
        } else {
            StatementKind::Engine(
                self.shared
                    .engine
                    .prepare_in(sql, &self.caller, &self.sql_statements)
                    .await?,
            )
        };
        let inferred: &[Option<DataType>] = match &kind {
            StatementKind::Engine(p) | StatementKind::Declare { query: p, .. } => &p.param_types,
            _ => &[],
        };
        let count = inferred.len().max(declared.len());
        let mut param_oids = Vec::with_capacity(count);
        let mut param_types = Vec::with_capacity(count);
        for i in 0..count {
            let declared_oid = declared.get(i).copied().filter(|o| *o != 0);
            let inferred_type = inferred.get(i).cloned().flatten();
            param_oids.push(declared_oid.unwrap_or_else(|| {
                inferred_type
                    .as_ref()
                    .map_or(types::oid::TEXT, |t| types::pg_type(t).0)
            }));
            param_types.push(inferred_type.or_else(|| declared_oid.and_then(types::arrow_type_of)));
        }
        Ok(Statement::new(kind, param_oids, param_types))
    }

    fn bind(&mut self, body: &[u8]) -> Result<(), PgError> {
        let mut r = Reader::new(body);
        let portal = r.cstr()?.to_string();
        let name = r.cstr()?;
        let statement = self.statements.get(name).cloned().ok_or_else(|| {
            PgError::Undefined(format!("prepared statement \"{name}\" does not exist"))
        })?;
        let format_count = r.count()?;
        let mut param_formats = Vec::with_capacity(format_count);
        for _ in 0..format_count {
            param_formats.push(Format::from_code(r.i16()?)?);
        }
        let count = r.count()?;
        if count != statement.param_oids.len() {
            let e = PgError::BadMessage(format!(
                "bind message supplies {count} parameters, but prepared statement \"{name}\" \
                 requires {}",
                statement.param_oids.len()
            ));
            self.log_statement(&statement.text, Duration::ZERO, Err(&e));
            return Err(e);
        }
        let mut params = Vec::with_capacity(count);
        for i in 0..count {
            let value = r.value()?;
            let format = Format::for_column(&param_formats, i);
            params.push(types::decode_param(
                value,
                format,
                statement.param_oids[i],
                statement.param_types[i].as_ref(),
            )?);
        }
        let result_count = r.count()?;
        let mut formats = Vec::with_capacity(result_count);
        for _ in 0..result_count {
            formats.push(Format::from_code(r.i16()?)?);
        }
        if !portal.is_empty() && self.portals.contains_key(&portal) {
            return Err(PgError::DuplicateCursor(portal));
        }
        self.portals
            .insert(portal, Portal::new(statement, params, formats));
        self.out.empty(b'2');
        Ok(())
    }

    fn describe(&mut self, body: &[u8]) -> Result<(), PgError> {
        let mut r = Reader::new(body);
        let kind = r.u8()?;
        let name = r.cstr()?;
        match kind {
            b'S' => {
                let statement = self.statements.get(name).cloned().ok_or_else(|| {
                    PgError::Undefined(format!("prepared statement \"{name}\" does not exist"))
                })?;
                let at = self.out.begin(b't');
                self.out.i16(statement.param_oids.len() as i16);
                for oid in &statement.param_oids {
                    self.out.i32(*oid);
                }
                self.out.end(at);
                match self.described(&statement, &[])? {
                    Some((schema, formats)) => self.row_description(&schema, &formats),
                    None => self.out.empty(b'n'),
                }
            }
            b'P' => {
                let portal = self
                    .portals
                    .get(name)
                    .ok_or_else(|| PgError::UndefinedPortal(name.to_string()))?;
                let (statement, formats) = (portal.statement.clone(), portal.formats.clone());
                // A FETCH describes its cursor's rows, which the statement does not fix.
                let cacheable = !matches!(statement.kind, StatementKind::Fetch { .. });
                let mut cached = statement
                    .description
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                if cacheable
                    && let Some((for_formats, message)) = cached.as_ref()
                    && *for_formats == formats
                {
                    self.out.buf.extend_from_slice(message);
                    return Ok(());
                }
                let at = self.out.buf.len();
                match self.described(&statement, &formats)? {
                    Some((schema, formats)) => self.row_description(&schema, &formats),
                    None => self.out.empty(b'n'),
                }
                if cacheable {
                    *cached = Some((formats, self.out.buf[at..].into()));
                }
            }
            other => {
                return Err(PgError::Protocol(format!(
                    "describe of '{}'",
                    other as char
                )));
            }
        }
        Ok(())
    }

    async fn execute(&mut self, body: &[u8]) -> Result<(), PgError> {
        let mut r = Reader::new(body);
        let name = r.cstr()?.to_string();
        let max_rows = r.i32()?.max(0) as u64;
        let mut portal = self
            .portals
            .remove(&name)
            .ok_or_else(|| PgError::UndefinedPortal(name.clone()))?;
        let started = Instant::now();
        let result = self.run_portal(&mut portal, max_rows, Rows::Send).await;
        // A suspended portal is logged at its last Execute; a COPY FROM STDIN as its data ends.
        match &result {
            Ok(Completion::Suspended | Completion::CopyStarted) => {}
            Ok(Completion::Complete(_)) => {
                self.log_statement(&portal.statement.text, started.elapsed(), Ok(()))
            }
            Err(e) => self.log_statement(&portal.statement.text, started.elapsed(), Err(e)),
        }
        match &result {
            Ok(Completion::Suspended) => self.out.empty(b's'),
            Ok(Completion::CopyStarted) => {}
            Ok(Completion::Complete(tag)) => {
                if matches!(portal.statement.kind, StatementKind::Empty) {
                    self.out.empty(b'I');
                } else {
                    self.out.command_complete(tag);
                }
            }
            Err(_) => {}
        }
        if !matches!(portal.state, PortalState::Running(_)) {
            portal.state = PortalState::Done;
        }
        self.portals.insert(name, portal);
        result.map(|_| ())
    }

    fn close(&mut self, body: &[u8]) -> Result<(), PgError> {
        let mut r = Reader::new(body);
        let kind = r.u8()?;
        let name = r.cstr()?;
        match kind {
            b'S' => {
                self.statements.remove(name);
            }
            b'P' => {
                self.portals.remove(name);
            }
            other => return Err(PgError::Protocol(format!("close of '{}'", other as char))),
        }
        self.out.empty(b'3');
        Ok(())
    }

    // ---- running statements ----------------------------------------------------------------

    /// Runs (or resumes) a portal, producing at most `max_rows` rows (0: all).
    async fn run_portal(
        &mut self,
        portal: &mut Portal,
        max_rows: u64,
        rows: Rows,
    ) -> Result<Completion, PgError> {
        match std::mem::replace(&mut portal.state, PortalState::Done) {
            PortalState::Done => Ok(Completion::Complete(select_tag(0))),
            PortalState::Ready => {
                let statement = portal.statement.clone();
                if self.transaction == Transaction::Failed
                    && !matches!(
                        statement.kind,
                        StatementKind::Local(_) | StatementKind::Empty
                    )
                {
                    return Err(PgError::InFailedTransaction);
                }
                match &statement.kind {
                    StatementKind::Empty => Ok(Completion::Complete(String::new())),
                    StatementKind::Local(command) => self.run_local(command.clone()),
                    StatementKind::Engine(prepared) => {
                        let params = std::mem::take(&mut portal.params);
                        let found =
                            match self
                                .shared
                                .engine
                                .run_lookup_now(prepared, &params, &self.caller)
                            {
                                Some(Ok(found)) => {
                                    if let Some(sent) =
                                        self.send_found(portal, &found, max_rows, rows).await?
                                    {
                                        return Ok(Completion::Complete(select_tag(sent)));
                                    }
                                    Some(Ok(found))
                                }
                                other => other,
                            };
                        let running = self.running(prepared.clone(), params, found);
                        self.stream_rows(portal, running, max_rows, rows).await
                    }
                    StatementKind::CopyIn {
                        table,
                        columns,
                        options,
                    } => self.start_copy_in(table, columns, options).await,
                    StatementKind::CopyOut { query, options } => {
                        self.copy_out(query, options).await
                    }
                    StatementKind::Declare {
                        name,
                        binary,
                        hold,
                        query,
                    } => self.declare(portal, name, *binary, *hold, query),
                    StatementKind::Fetch {
                        name,
                        count,
                        move_only,
                    } => self.fetch(name, *count, *move_only, &portal.formats).await,
                    StatementKind::CloseCursor(name) => self.close_cursor(name.as_deref()),
                }
            }
            PortalState::Running(running) => {
                self.stream_rows(portal, running, max_rows, rows).await
            }
        }
    }

    fn start(&self, prepared: Prepared, params: Vec<ScalarValue>) -> Running {
        let found = self
            .shared
            .engine
            .run_lookup_now(&prepared, &params, &self.caller);
        self.running(prepared, params, found)
    }

    /// The run of `prepared`: the rows a point lookup `found` already, or its stream.
    fn running(
        &self,
        prepared: Prepared,
        params: Vec<ScalarValue>,
        found: Option<Result<LookupRows, QueryError>>,
    ) -> Running {
        let sets_own_password =
            self.caller.name().is_some() && prepared.sets_password_of() == self.caller.name();
        let source = match found.map(|found| found.and_then(LookupRows::into_batches)) {
            Some(Ok(batches)) => Source::Ready(
                batches
                    .into_iter()
                    .map(Item::Batch)
                    .collect::<Vec<_>>()
                    .into_iter(),
            ),
            Some(Err(e)) => Source::Ready(vec![Item::Failed(e)].into_iter()),
            None => self.stream(prepared, params),
        };
        Running {
            source,
            current: None,
            deadline: self.deadline(),
            sets_own_password,
        }
    }

    /// Sends a point lookup's rows straight from the mapped files (see `cells`), when the
    /// Execute's row limit takes them all and every column has a [`CellEncoder`]: the count
    /// sent, or `None` with nothing sent, and the rows go through Arrow.
    async fn send_found(
        &mut self,
        portal: &mut Portal,
        found: &LookupRows,
        max_rows: u64,
        rows: Rows,
    ) -> Result<Option<u64>, PgError> {
        let n = found.row_count() as u64;
        if max_rows != 0 && n > max_rows {
            return Ok(None);
        }
        if rows == Rows::Discard {
            portal.rows_sent += n;
            return Ok(Some(n));
        }
        let encoders = found
            .schema()
            .fields()
            .iter()
            .enumerate()
            .map(|(i, field)| {
                let type_oid = portal.statement.column_types.get(i).copied().unwrap_or(0);
                CellEncoder::new(field, type_oid, Format::for_column(&portal.formats, i))
            })
            .collect::<Option<Vec<_>>>();
        let (Some(encoders), Some(parts)) = (encoders, found.parts()?) else {
            return Ok(None);
        };
        for (part, part_rows) in &parts {
            for &row in *part_rows {
                let at = self.out.begin(b'D');
                self.out.i16(encoders.len() as i16);
                for (c, encoder) in encoders.iter().enumerate() {
                    match part.cell(c, u64::from(row)) {
                        Ok(cell) => encoder.encode(cell, &mut self.out.buf),
                        Err(e) => {
                            // The rows before this one stand, as rows sent before an error do.
                            self.out.buf.truncate(at - 1);
                            return Err(QueryError::from(e).into());
                        }
                    }
                }
                self.out.end(at);
                portal.rows_sent += 1;
                if self.out.buf.len() >= self.shared.options.flush_bytes {
                    self.flush().await?;
                }
            }
        }
        Ok(Some(n))
    }

    /// The items of `prepared`'s run with `params`, produced as the session polls them.
    fn stream(&self, prepared: Prepared, params: Vec<ScalarValue>) -> Source {
        let (engine, caller) = (self.shared.engine.clone(), self.caller.clone());
        let run = async move { engine.run_prepared_as(&prepared, params, &caller).await };
        let items = futures::stream::once(run).flat_map(|output| match output {
            Ok(Output::Rows(batches)) => batches
                .map(|batch| match batch {
                    Ok(b) => Item::Batch(b),
                    Err(e) => Item::Failed(e.into()),
                })
                .boxed(),
            Ok(Output::Done { tag, rows }) => stream::iter([Item::Done { tag, rows }]).boxed(),
            Err(e) => stream::iter([Item::Failed(e)]).boxed(),
        });
        Source::Stream(items.boxed())
    }

    /// When a statement starting now must end, per `statement_timeout`.
    fn deadline(&self) -> Option<Instant> {
        let timeout_ms = self.statement_timeout_ms();
        (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms))
    }

    /// Sends (or discards) rows until the result ends or `max_rows` (0: no limit) are done. A
    /// SELECT's tag counts the rows of this call only, as PostgreSQL's does for an Execute that
    /// finishes a suspended portal.
    async fn stream_rows(
        &mut self,
        portal: &mut Portal,
        mut running: Running,
        max_rows: u64,
        rows: Rows,
    ) -> Result<Completion, PgError> {
        let mut sent_now = 0u64;
        loop {
            if let Some((columns, next, len)) = running.current.take() {
                let mut row = next;
                while row < len && (max_rows == 0 || sent_now < max_rows) {
                    let limit = if max_rows == 0 {
                        len
                    } else {
                        len.min(row + (max_rows - sent_now) as usize)
                    };
                    let encoded = match rows {
                        Rows::Send => encode_rows(
                            &mut self.out,
                            &columns,
                            &portal.formats,
                            &portal.statement.column_types,
                            row..limit,
                            self.shared.options.flush_bytes,
                        )?,
                        Rows::Discard => limit - row,
                    };
                    row += encoded;
                    sent_now += encoded as u64;
                    if self.out.buf.len() >= self.shared.options.flush_bytes {
                        self.flush().await?;
                    }
                }
                portal.rows_sent += (row - next) as u64;
                if row < len {
                    running.current = Some((columns, row, len));
                    portal.state = PortalState::Running(running);
                    return Ok(Completion::Suspended);
                }
            }
            if max_rows > 0 && sent_now == max_rows {
                // The limit landed on a batch's end: the result's end completes the portal now
                // (PostgreSQL would suspend it, then complete it on the next Execute with
                // `SELECT 0`); anything else suspends it.
                match self.next_item(&mut running).await? {
                    None => return Ok(Completion::Complete(select_tag(sent_now))),
                    Some(item) => {
                        self.take_item(item, &mut running)?;
                        portal.state = PortalState::Running(running);
                        return Ok(Completion::Suspended);
                    }
                }
            }
            match self.next_item(&mut running).await? {
                None => return Ok(Completion::Complete(select_tag(sent_now))),
                Some(Item::Done { tag, rows }) => {
                    if running.sets_own_password {
                        self.renew_credential();
                    }
                    return Ok(Completion::Complete(command_tag(&tag, rows)));
                }
                Some(item) => self.take_item(item, &mut running)?,
            }
        }
    }

    /// After the session's user set its own password: the session goes on with the new
    /// credential version (as PostgreSQL's sessions outlive their own password change), while
    /// the user's other sessions and console cookies end. Whoever changes the password next
    /// (an admin, a DROP USER) ends this session too.
    fn renew_credential(&mut self) {
        let Some(user) = self.caller.name().map(str::to_string) else {
            return;
        };
        if let Some(credential) = self.shared.users.store().credential(&user) {
            self.caller = Caller::session(user.as_str(), credential);
        }
    }

    fn take_item(&self, item: Item, running: &mut Running) -> Result<(), PgError> {
        match item {
            Item::Batch(batch) => {
                let columns = batch
                    .columns()
                    .iter()
                    .map(types::normalize)
                    .collect::<Result<Vec<_>, _>>()?;
                running.current = Some((columns, 0, batch.num_rows()));
                Ok(())
            }
            Item::Failed(e) => Err(e.into()),
            Item::Done { .. } => Err(PgError::Internal("statement ended twice".into())),
        }
    }

    /// Polls the statement for its next item while watching for a cancel, the statement
    /// timeout and the client going away. `None` means the result ended.
    async fn next_item(&mut self, running: &mut Running) -> Result<Option<Item>, PgError> {
        let items = match &mut running.source {
            Source::Ready(items) => return Ok(items.next()),
            Source::Stream(items) => items,
        };
        // Answers to earlier round trips must not wait for this statement.
        self.send_due().await?;
        let cancel = self.cancel.clone();
        let deadline = running.deadline;
        loop {
            let cancelled = cancel.requested();
            if cancel.take() {
                return Err(PgError::Canceled);
            }
            tokio::select! {
                item = items.next() => return Ok(item),
                _ = cancelled => {
                    cancel.take();
                    return Err(PgError::Canceled);
                }
                _ = sleep_until(deadline) => return Err(PgError::Timeout),
                read = self.reader.read_buf(&mut self.input), if self.input.len() < self.shared.options.message_bytes_max => {
                    if read? == 0 {
                        return Err(PgError::Io(std::io::ErrorKind::ConnectionReset.into()));
                    }
                }
            }
        }
    }

    fn statement_timeout_ms(&self) -> u64 {
        match self.settings.get("statement_timeout") {
            Some((v, _)) => local::parse_duration_ms(v).unwrap_or(0),
            None => self.shared.options.statement_timeout_ms,
        }
    }

    /// `DEALLOCATE`: SQL-level and protocol-level prepared statements share one namespace
    /// here, as in PostgreSQL (psycopg deallocates its protocol-level ones this way).
    fn deallocate(&mut self, what: Deallocate) -> Result<&'static str, PgError> {
        match what {
            Deallocate::All => {
                self.sql_statements.clear();
                self.statements.retain(|name, _| name.is_empty());
                Ok("DEALLOCATE ALL")
            }
            Deallocate::Name(name) => {
                let protocol = !name.is_empty() && self.statements.remove(&name).is_some();
                let sql = self.sql_statements.remove(&name);
                if protocol || sql {
                    Ok("DEALLOCATE")
                } else {
                    Err(PgError::Query(sundial_query::unknown_statement(&name)))
                }
            }
        }
    }

    fn run_local(&mut self, command: LocalCommand) -> Result<Completion, PgError> {
        let tag = match command {
            LocalCommand::Begin => {
                if self.transaction == Transaction::Idle {
                    self.transaction = Transaction::Block;
                }
                "BEGIN"
            }
            LocalCommand::Commit => {
                let failed = self.transaction == Transaction::Failed;
                self.transaction = Transaction::Idle;
                self.close_portals_at_commit();
                if failed { "ROLLBACK" } else { "COMMIT" }
            }
            LocalCommand::Rollback => {
                self.transaction = Transaction::Idle;
                self.close_portals_at_commit();
                "ROLLBACK"
            }
            LocalCommand::Set { name, value } => {
                if name == "statement_timeout"
                    && let Some(v) = &value
                    && local::parse_duration_ms(v).is_none()
                {
                    return Err(PgError::BadValue(format!(
                        "invalid value for parameter \"statement_timeout\": \"{v}\""
                    )));
                }
                self.set(&name, value);
                if name == "reset" { "RESET" } else { "SET" }
            }
            LocalCommand::ResetAll => {
                self.settings = local::default_settings();
                "RESET"
            }
            LocalCommand::Show(name) => {
                let value = self.show(&name)?;
                let schema = show_schema(&name);
                let array: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![value]));
                let encoder = ColumnEncoder::new(&array, Format::Text)?;
                let _ = schema;
                let at = self.out.begin(b'D');
                self.out.i16(1);
                encoder.encode(0, &mut self.out.buf);
                self.out.end(at);
                return Ok(Completion::Complete("SHOW".into()));
            }
            LocalCommand::Deallocate(what) => self.deallocate(what)?,
            LocalCommand::Ignored(tag) => tag,
        };
        Ok(Completion::Complete(tag.into()))
    }

    fn set(&mut self, name: &str, value: Option<String>) {
        let name = name.to_ascii_lowercase();
        let reportable = self.settings.get(&name).is_some_and(|(_, r)| *r);
        if value.is_none() && !reportable {
            // Back to the server default.
            self.settings.remove(&name);
            return;
        }
        let value = value.unwrap_or_else(|| {
            sundial_query::pg_setting(&name)
                .unwrap_or_default()
                .to_string()
        });
        let reportable = self.settings.get(&name).is_some_and(|(_, r)| *r);
        if reportable {
            self.out
                .parameter_status(local::reported_name(&name), &value);
        }
        self.settings.insert(name, (value, reportable));
    }

    fn show(&self, name: &str) -> Result<String, PgError> {
        if name == "statement_timeout" {
            return Ok(format!("{}ms", self.statement_timeout_ms()));
        }
        self.settings
            .get(name)
            .map(|(v, _)| v.clone())
            .or_else(|| sundial_query::pg_setting(name).map(str::to_string))
            .ok_or_else(|| PgError::UnknownSetting(name.to_string()))
    }

    fn row_description(&mut self, schema: &SchemaRef, formats: &[Format]) {
        let at = self.out.begin(b'T');
        self.out.i16(schema.fields().len() as i16);
        for (i, field) in schema.fields().iter().enumerate() {
            let (type_oid, type_len) = types::pg_field_type(field);
            let (table_oid, attnum) = sundial_query::pg_column_origin(field);
            self.out.cstr(field.name());
            self.out.i32(table_oid);
            self.out.i16(attnum);
            self.out.i32(type_oid);
            self.out.i16(type_len);
            self.out.i32(-1);
            self.out.i16(Format::for_column(formats, i).code());
        }
        self.out.end(at);
    }
}

/// Appends DataRows for `rows` until the output holds `flush_bytes`; returns how many rows
/// were written.
fn encode_rows(
    out: &mut Writer,
    columns: &[ArrayRef],
    formats: &[Format],
    column_types: &[i32],
    rows: std::ops::Range<usize>,
    flush_bytes: usize,
) -> Result<usize, PgError> {
    let encoders = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let type_oid = column_types.get(i).copied().unwrap_or(0);
            ColumnEncoder::for_type(c, type_oid, Format::for_column(formats, i))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut written = 0;
    for row in rows {
        let at = out.begin(b'D');
        out.i16(encoders.len() as i16);
        for e in &encoders {
            e.encode(row, &mut out.buf);
        }
        out.end(at);
        written += 1;
        if out.buf.len() >= flush_bytes {
            break;
        }
    }
    Ok(written)
}

/// A SHOW's one column: `text`, as PostgreSQL's.
fn show_schema(name: &str) -> SchemaRef {
    Arc::new(arrow::datatypes::Schema::new(vec![
        sundial_query::with_pg_type(
            arrow::datatypes::Field::new(name, DataType::Utf8, true),
            types::oid::TEXT,
        ),
    ]))
}

fn select_tag(rows: u64) -> String {
    format!("SELECT {rows}")
}

/// PostgreSQL's command tag for a statement without a result set.
fn command_tag(tag: &str, rows: Option<u64>) -> String {
    match (tag, rows) {
        ("INSERT", Some(n)) => format!("INSERT 0 {n}"),
        ("UPDATE" | "DELETE" | "COPY", Some(n)) => format!("{tag} {n}"),
        _ => tag.to_string(),
    }
}

fn with_position(e: PgError, sql: &str) -> (PgError, Option<usize>) {
    let position = match &e {
        PgError::Query(q) => q.char_offset(sql),
        _ => None,
    };
    (e, position)
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// Whether `sql` holds no statement: only whitespace, semicolons and comments (`-- ping`,
/// which drivers send to check a connection). PostgreSQL answers such a statement with
/// EmptyQueryResponse in both protocols. Text without a comment marker needs no tokenizing.
fn is_empty_statement(sql: &str) -> bool {
    if !sql.contains("--") && !sql.contains("/*") {
        return sql.trim().trim_end_matches(';').trim().is_empty();
    }
    Engine::split(sql).is_ok_and(|statements| statements.is_empty())
}

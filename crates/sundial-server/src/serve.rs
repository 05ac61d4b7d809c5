//! `sundial serve`: the network server. It receives InfluxDB line protocol over TCP, UDP and
//! HTTP (`/write`, `/api/v2/write`, `/ping`), answers SQL over HTTP (`/exec`, `/exp`, `/imp`:
//! sundial-http) and over the PostgreSQL protocol (sundial-pgwire).
//!
//! ```text
//!  TCP conn ──▶ task: LineSplitter ─▶ Ingestor ──┐
//!  UDP ─recvmmsg─▶ thread ─chunks─▶ thread: Ingestor ┼─▶ TableWriter (per table, one at a time)
//!  HTTP /write ─▶ blocking task: body ─▶ Ingestor ┘     commit: by rows, by time, at shutdown
//!  HTTP /exec /exp /imp ─▶ sundial-http on the query runtime ─▶ Engine ─▶ JSON / CSV, streamed
//!  PostgreSQL  ─▶ sundial-pgwire on the query runtime ─▶ Engine ─▶ DataRows, streamed
//! ```
//!
//! What a sender can rely on: HTTP answers 204 only once every good line is committed. TCP and
//! UDP have no acknowledgement: a line is committed at the latest `commit_interval_ms` after it
//! arrived while the server runs, and at graceful shutdown (Ctrl-C, SIGTERM), which first takes
//! every byte the kernel already received; lines still buffered when the process is killed are
//! lost. Bad lines are logged and counted, never stop the others.
//!
//! At shutdown, HTTP requests and PostgreSQL sessions under way get `--shutdown-timeout-ms`
//! to finish; then they are dropped (statements yield often enough to be dropped at once),
//! and the ILP receivers commit what they took. Web pages of other origins are refused on
//! every HTTP route (`sundial_http::origin`).

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use sundial_ilp::{LineSpan, LineSplitter, Precision};
use sundial_ingest::{IngestError, IngestOptions, Ingestor, Sinks, TableCounts};
use sundial_query::{Engine, InsertPath};
use sundial_storage::{Database, PartitionBy};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

use crate::udp::{UdpOptions, UdpReceiver};
use sundial_http::json::write_json_string;
use sundial_http::{AllowedOrigins, HttpOptions, HttpSql, sql_router};
use sundial_pgwire::{AuthMethod, PgOptions, PgServer, Users};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Listener and ingestion settings of `sundial serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// HTTP listener: ILP `/write` and the SQL API (`/exec`, `/exp`, `/imp`).
    #[arg(long, env = "SUNDIAL_HTTP_ADDR", default_value = "127.0.0.1:9000")]
    pub http_addr: SocketAddr,
    /// ILP over TCP listener.
    #[arg(long, env = "SUNDIAL_ILP_TCP_ADDR", default_value = "127.0.0.1:9009")]
    pub ilp_tcp_addr: SocketAddr,
    /// ILP over UDP listener; off unless given (e.g. 127.0.0.1:9009).
    #[arg(long, env = "SUNDIAL_ILP_UDP_ADDR")]
    pub ilp_udp_addr: Option<SocketAddr>,
    /// Receive ILP over UDP from this IPv4 multicast group (the port is --ilp-udp-addr's).
    #[arg(long, env = "SUNDIAL_ILP_UDP_MULTICAST_GROUP")]
    pub ilp_udp_multicast_group: Option<Ipv4Addr>,
    /// Local interface address on which to join the multicast group.
    #[arg(
        long,
        env = "SUNDIAL_ILP_UDP_MULTICAST_INTERFACE",
        default_value = "0.0.0.0"
    )]
    pub ilp_udp_multicast_interface: Ipv4Addr,
    /// Kernel receive buffer for the UDP socket (SO_RCVBUF), in bytes.
    #[arg(long, env = "SUNDIAL_ILP_UDP_RECV_BUFFER_BYTES", default_value_t = 64 << 20)]
    pub ilp_udp_recv_buffer_bytes: usize,
    /// Datagrams taken per receive call (recvmmsg).
    #[arg(long, env = "SUNDIAL_ILP_UDP_BATCH_DATAGRAMS", default_value_t = 32)]
    pub ilp_udp_batch_datagrams: usize,
    /// Batches of datagrams that may wait for the ingesting thread.
    #[arg(long, env = "SUNDIAL_ILP_UDP_QUEUE_BATCHES", default_value_t = 16)]
    pub ilp_udp_queue_batches: usize,
    /// Largest accepted HTTP body (after gzip decoding), in bytes; larger ones get 413.
    #[arg(long, env = "SUNDIAL_HTTP_BODY_BYTES_MAX", default_value_t = 256 << 20)]
    pub http_body_bytes_max: usize,
    /// Largest accepted HTTP `/imp` (CSV upload) body, in bytes; larger ones get 413.
    #[arg(long, env = "SUNDIAL_HTTP_IMPORT_BYTES_MAX", default_value_t = 1 << 30)]
    pub http_import_bytes_max: u64,
    /// Gzip-compress `/exec` and `/exp` answers of 256 KiB or more, for clients that accept
    /// it: `remote` for clients on other hosts only (over loopback compressing costs more than
    /// it saves), `always`, or `never` (as QuestDB).
    #[arg(long, env = "SUNDIAL_HTTP_GZIP", value_enum, default_value_t = GzipArg::Remote)]
    pub http_gzip: GzipArg,
    /// Longest accepted ILP line, in bytes.
    #[arg(long, env = "SUNDIAL_ILP_LINE_BYTES_MAX", default_value_t = 1 << 20)]
    pub ilp_line_bytes_max: usize,
    /// Commit a table's buffered ILP rows once there are this many...
    #[arg(long, env = "SUNDIAL_ILP_COMMIT_ROWS", default_value_t = 100_000)]
    pub ilp_commit_rows: usize,
    /// ...or once the oldest has waited this long.
    #[arg(long, env = "SUNDIAL_ILP_COMMIT_INTERVAL_MS", default_value_t = 1_000)]
    pub ilp_commit_interval_ms: u64,
    /// Close a TCP connection that sent nothing for this long.
    #[arg(long, env = "SUNDIAL_ILP_IDLE_TIMEOUT_MS", default_value_t = 300_000)]
    pub ilp_idle_timeout_ms: u64,
    /// Designated timestamp column of tables created by ILP.
    #[arg(
        long,
        env = "SUNDIAL_ILP_TIMESTAMP_COLUMN",
        default_value = "timestamp"
    )]
    pub ilp_timestamp_column: String,
    /// Partitioning of tables created by ILP.
    #[arg(long, env = "SUNDIAL_ILP_PARTITION_BY", default_value = "DAY")]
    pub ilp_partition_by: String,
    /// PostgreSQL wire protocol listener.
    #[arg(long, env = "SUNDIAL_PG_ADDR", default_value = "127.0.0.1:8812")]
    pub pg_addr: SocketAddr,
    /// User name PostgreSQL clients log in as.
    #[arg(long, env = "SUNDIAL_PG_USER", default_value = "admin")]
    pub pg_user: String,
    /// That user's password.
    #[arg(long, env = "SUNDIAL_PG_PASSWORD", default_value = "quest")]
    pub pg_password: String,
    /// How PostgreSQL clients prove the password: scram-sha-256, md5 or password (cleartext).
    #[arg(long, env = "SUNDIAL_PG_AUTH_METHOD", default_value = "scram-sha-256")]
    pub pg_auth_method: String,
    /// Authenticated PostgreSQL sessions at once; more are refused (SQLSTATE 53300).
    #[arg(long, env = "SUNDIAL_PG_CONNECTIONS_MAX", default_value_t = 256)]
    pub pg_connections_max: usize,
    /// PostgreSQL connections still logging in, at once (they hold no session slot); past it,
    /// the one waiting longest is closed (SQLSTATE 53300) to make room for the newcomer.
    #[arg(
        long,
        env = "SUNDIAL_PG_UNAUTHENTICATED_CONNECTIONS_MAX",
        default_value_t = 64
    )]
    pub pg_unauthenticated_connections_max: usize,
    /// Time a PostgreSQL connection has from accept to the end of its login, in milliseconds.
    #[arg(long, env = "SUNDIAL_PG_AUTH_TIMEOUT_MS", default_value_t = 10_000)]
    pub pg_auth_timeout_ms: u64,
    /// Largest PostgreSQL protocol message accepted (query text, Bind, COPY data), in bytes.
    #[arg(long, env = "SUNDIAL_PG_MESSAGE_BYTES_MAX", default_value_t = 16 << 20)]
    pub pg_message_bytes_max: usize,
    /// How long a PostgreSQL session that has answered polls for the client's next message
    /// before its thread sleeps, in microseconds (0: never poll). At most query threads less
    /// one sessions poll at once.
    #[arg(long, env = "SUNDIAL_PG_READ_SPIN_US", default_value_t = 50)]
    pub pg_read_spin_us: u64,
    /// Default statement timeout in milliseconds (0: none), for PostgreSQL sessions (which may
    /// SET their own) and HTTP `/exec` and `/exp` (a `Statement-Timeout` header overrides it).
    #[arg(long, env = "SUNDIAL_STATEMENT_TIMEOUT_MS", default_value_t = 0)]
    pub statement_timeout_ms: u64,
    /// Threads executing queries and serving HTTP and PostgreSQL, apart from the threads
    /// receiving ILP (0: one per core).
    #[arg(long, env = "SUNDIAL_QUERY_THREADS", default_value_t = 0)]
    pub query_threads: usize,
    /// Memory one query's operators (sorts, joins, aggregations) may hold, in bytes (0: no
    /// limit); past it the query fails with SQLSTATE 53200 and the server goes on.
    #[arg(long, env = "SUNDIAL_QUERY_MEMORY_BYTES_MAX", default_value_t = 4 << 30)]
    pub query_memory_bytes_max: usize,
    /// The only directory SQL may write server files in (`COPY (query) TO 'file'`, relative
    /// to it or absolute under it); unless given, SQL cannot read or write server files.
    #[arg(long, env = "SUNDIAL_SQL_FILE_DIR")]
    pub sql_file_dir: Option<std::path::PathBuf>,
    /// Origins (`https://host:port`, comma-separated; `*` for any) whose web pages may send
    /// HTTP requests and read the answers; requests of other origins' pages are refused (403).
    #[arg(long, env = "SUNDIAL_HTTP_ALLOWED_ORIGINS", default_value = "")]
    pub http_allowed_origins: String,
    /// At Ctrl-C / SIGTERM, how long running statements and HTTP requests may go on before
    /// they are stopped; received ILP lines are committed either way.
    #[arg(long, env = "SUNDIAL_SHUTDOWN_TIMEOUT_MS", default_value_t = 10_000)]
    pub shutdown_timeout_ms: u64,
}

/// Rows and lines per transport, for the logs (and later metrics).
#[derive(Default)]
struct Counters {
    accepted: [AtomicU64; 3],
    rejected: [AtomicU64; 3],
    /// Rows committed and lines rejected per table, by transport.
    tables: Mutex<BTreeMap<String, [TableCounts; 3]>>,
}

const TRANSPORTS: [(&str, usize); 3] = [("TCP", TCP), ("UDP", UDP), ("HTTP", HTTP)];

/// How often the counters are logged while they change.
const COUNTERS_LOG_INTERVAL_S: u64 = 60;

const TCP: usize = 0;
pub(crate) const UDP: usize = 1;
const HTTP: usize = 2;

pub(crate) struct Shared {
    /// Where every receiver's rows for a table meet before a commit.
    pub(crate) sinks: Arc<Sinks>,
    pub(crate) ingest: IngestOptions,
    args: ServeArgs,
    counters: Counters,
}

impl Shared {
    pub(crate) fn count(
        &self,
        transport: usize,
        ingestor: &Ingestor,
        before: sundial_ingest::IngestStats,
    ) {
        let now = ingestor.stats();
        self.counters.accepted[transport].fetch_add(
            now.lines_accepted - before.lines_accepted,
            Ordering::Relaxed,
        );
        self.counters.rejected[transport].fetch_add(
            now.lines_rejected - before.lines_rejected,
            Ordering::Relaxed,
        );
    }

    /// Moves the ingestor's per-table counts into the server's.
    pub(crate) fn count_tables(&self, transport: usize, ingestor: &mut Ingestor) {
        let counts = ingestor.take_table_counts();
        if counts.is_empty() {
            return;
        }
        let Ok(mut tables) = self.counters.tables.lock() else {
            return;
        };
        for (table, c) in counts {
            let entry = tables.entry(table).or_default();
            entry[transport].lines_accepted += c.lines_accepted;
            entry[transport].lines_rejected += c.lines_rejected;
        }
    }

    /// Changes whenever a line is counted.
    fn fingerprint(&self) -> u64 {
        TRANSPORTS.iter().fold(0u64, |f, (_, i)| {
            let c = &self.counters;
            f.wrapping_mul(31).wrapping_add(
                c.accepted[*i].load(Ordering::Relaxed) + c.rejected[*i].load(Ordering::Relaxed),
            )
        })
    }

    /// Logs lines per transport and rows per table.
    fn log_counters(&self) {
        let c = &self.counters;
        for (name, i) in TRANSPORTS {
            let (accepted, rejected) = (
                c.accepted[i].load(Ordering::Relaxed),
                c.rejected[i].load(Ordering::Relaxed),
            );
            if accepted + rejected > 0 {
                tracing::info!("ILP/{name}: {accepted} lines accepted, {rejected} rejected");
            }
        }
        if let Ok(tables) = c.tables.lock() {
            for (table, counts) in tables.iter() {
                for (name, i) in TRANSPORTS {
                    let TableCounts {
                        lines_accepted,
                        lines_rejected,
                    } = counts[i];
                    if lines_accepted + lines_rejected > 0 {
                        tracing::info!(
                            "ILP/{name} table '{table}': {lines_accepted} lines accepted, \
                             {lines_rejected} rejected"
                        );
                    }
                }
            }
        }
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

pub async fn run(db: Arc<Database>, args: ServeArgs) -> Result<(), String> {
    let partition_by = PartitionBy::parse(&args.ilp_partition_by)
        .ok_or_else(|| format!("unknown partitioning '{}'", args.ilp_partition_by))?;
    let ingest = IngestOptions {
        timestamp_column: args.ilp_timestamp_column.clone(),
        partition_by,
        line_bytes_max: args.ilp_line_bytes_max,
        commit_rows: args.ilp_commit_rows,
        commit_interval_ms: args.ilp_commit_interval_ms,
    };
    let shared = Arc::new(Shared {
        sinks: Sinks::new(db),
        ingest,
        args: args.clone(),
        counters: Counters::default(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();

    let tcp = TcpListener::bind(args.ilp_tcp_addr)
        .await
        .map_err(|e| format!("cannot listen on {} (ILP/TCP): {e}", args.ilp_tcp_addr))?;
    let queries = query_runtime(args.query_threads)?;
    let http = listen_on(&queries, args.http_addr)
        .map_err(|e| format!("cannot listen on {} (HTTP): {e}", args.http_addr))?;
    tracing::info!("ILP over TCP on {}", args.ilp_tcp_addr);
    tracing::info!("HTTP on {}", args.http_addr);
    tasks.spawn(accept_tcp(tcp, shared.clone(), stop_rx.clone()));
    let udp = match args.ilp_udp_addr {
        Some(addr) => {
            let options = UdpOptions {
                addr,
                multicast_group: args.ilp_udp_multicast_group,
                multicast_interface: args.ilp_udp_multicast_interface,
                recv_buffer_bytes: args.ilp_udp_recv_buffer_bytes,
                datagrams_per_chunk: args.ilp_udp_batch_datagrams,
                chunks: args.ilp_udp_queue_batches,
            };
            let receiver = UdpReceiver::start(options, shared.clone())?;
            match args.ilp_udp_multicast_group {
                Some(group) => tracing::info!(
                    "ILP over UDP on multicast group {group}, port {}",
                    addr.port()
                ),
                None => tracing::info!("ILP over UDP on {addr}"),
            }
            Some(receiver)
        }
        None => None,
    };
    // SQL INSERTs commit through the ILP receivers' table sinks, waiting like ILP senders
    // once a table has four commits' worth of rows pending.
    let inserts = InsertPath {
        sinks: shared.sinks.clone(),
        pending_rows_max: shared.ingest.commit_rows.saturating_mul(4),
    };
    let mut engine = Engine::with_inserts(inserts).map_err(|e| e.to_string())?;
    engine.set_query_memory_bytes_max(args.query_memory_bytes_max);
    // Clients share this engine: each keeps its own settings (PostgreSQL sessions) or none
    // past its request (HTTP).
    engine.set_settings(sundial_query::Settings::Fixed);
    engine.set_sql_file_dir(sql_file_dir(
        args.sql_file_dir.as_deref(),
        shared.sinks.db(),
    )?);
    let engine = Arc::new(engine);
    let pg = pg_server(&args, engine.clone())?;
    let pg_listener = listen_on(&queries, args.pg_addr)
        .map_err(|e| format!("cannot listen on {} (PostgreSQL): {e}", args.pg_addr))?;
    tracing::info!("PostgreSQL wire protocol on {}", args.pg_addr);
    let pg_stop = stop_rx.clone();
    // Served on the query runtime, as HTTP is: sessions run their statements themselves.
    // At shutdown these get a grace period, then are stopped.
    let mut served = JoinSet::new();
    served.spawn_on(
        async move { pg.serve(pg_listener, pg_stop).await },
        queries.handle(),
    );
    let allowed_origins = AllowedOrigins::parse(&args.http_allowed_origins);
    let sql = sql_router(HttpSql {
        engine,
        options: HttpOptions {
            statement_timeout_ms: args.statement_timeout_ms,
            import_bytes_max: args.http_import_bytes_max,
            gzip: args.http_gzip.into(),
            allowed_origins: allowed_origins.clone(),
        },
    });
    let app = Router::new()
        .route("/ping", get(ping).head(ping))
        .route("/write", post(write))
        .route("/api/v2/write", post(write))
        .layer(DefaultBodyLimit::max(args.http_body_bytes_max))
        .layer(axum::middleware::from_fn_with_state(
            allowed_origins,
            sundial_http::origin::refuse_foreign_pages,
        ))
        .with_state(shared.clone())
        .merge(sql);
    let mut http_stop = stop_rx.clone();
    // HTTP is served on the query runtime: each connection's task runs its statements itself,
    // with no hand-off to another thread and back.
    served.spawn_on(
        async move {
            // Answers are small and written once: don't let Nagle hold them for the peer's ACK.
            let http = http.tap_io(|stream| {
                let _ = stream.set_nodelay(true);
            });
            // The peer's address tells local clients apart (`--http-gzip remote`).
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            let served = axum::serve(http, app)
                .with_graceful_shutdown(async move {
                    let _ = http_stop.wait_for(|stop| *stop).await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!("HTTP server failed: {e}");
            }
        },
        queries.handle(),
    );
    eprintln!(
        "sundial serving: HTTP {}, PostgreSQL {}, ILP/TCP {}{}",
        args.http_addr,
        args.pg_addr,
        args.ilp_tcp_addr,
        args.ilp_udp_addr
            .map(|a| format!(", ILP/UDP {a}"))
            .unwrap_or_default()
    );

    let reporter = shared.clone();
    let mut reporter_stop = stop_rx.clone();
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(COUNTERS_LOG_INTERVAL_S));
        tick.tick().await;
        let mut last = 0;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = reporter_stop.wait_for(|s| *s) => break,
            }
            let fingerprint = reporter.fingerprint();
            if fingerprint != last {
                reporter.log_counters();
                last = fingerprint;
            }
        }
    });

    shutdown_signal().await;
    tracing::info!("shutting down: committing what was received");
    let _ = stop_tx.send(true);
    if let Some(receiver) = udp {
        let _ = tokio::task::spawn_blocking(move || receiver.stop()).await;
    }
    // Requests and statements under way may finish within the grace period; then they are
    // dropped (every statement yields often: see sundial_query's `cooperative`).
    let grace = Duration::from_millis(args.shutdown_timeout_ms);
    let finished =
        tokio::time::timeout(grace, async { while served.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tracing::warn!(
            "requests still under way after {} ms (--shutdown-timeout-ms): stopping them",
            args.shutdown_timeout_ms
        );
        served.abort_all();
    }
    // The ILP receivers commit what they took.
    while tasks.join_next().await.is_some() {}
    drop(queries);
    shared.log_counters();
    Ok(())
}

/// `--sql-file-dir`, resolved: an existing directory that neither is nor holds the data
/// directory, nor lies inside it (SQL must not reach table files).
fn sql_file_dir(
    dir: Option<&std::path::Path>,
    db: &Database,
) -> Result<Option<std::path::PathBuf>, String> {
    let Some(dir) = dir else {
        return Ok(None);
    };
    let resolved = dir
        .canonicalize()
        .map_err(|e| format!("--sql-file-dir {}: {e}", dir.display()))?;
    if !resolved.is_dir() {
        return Err(format!("--sql-file-dir {}: not a directory", dir.display()));
    }
    let data = db
        .root()
        .canonicalize()
        .map_err(|e| format!("data directory {}: {e}", db.root().display()))?;
    if resolved.starts_with(&data) || data.starts_with(&resolved) {
        return Err(format!(
            "--sql-file-dir {} overlaps the data directory {}: SQL must not write table files",
            resolved.display(),
            data.display()
        ));
    }
    Ok(Some(resolved))
}

/// `--http-gzip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GzipArg {
    #[value(alias = "false")]
    Never,
    Remote,
    #[value(alias = "true")]
    Always,
}

impl From<GzipArg> for sundial_http::Gzip {
    fn from(arg: GzipArg) -> Self {
        match arg {
            GzipArg::Never => sundial_http::Gzip::Never,
            GzipArg::Remote => sundial_http::Gzip::Remote,
            GzipArg::Always => sundial_http::Gzip::Always,
        }
    }
}

/// The query runtime, shut down without waiting when dropped: dropping a runtime the blocking
/// way inside the serving runtime (on any early return) would panic.
struct QueryRuntime(Option<tokio::runtime::Runtime>);

impl QueryRuntime {
    fn handle(&self) -> &tokio::runtime::Handle {
        match &self.0 {
            Some(runtime) => runtime.handle(),
            None => unreachable!("the query runtime is only taken when dropped"),
        }
    }
}

impl Drop for QueryRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A listener whose connections are served by `runtime`'s I/O driver.
fn listen_on(runtime: &QueryRuntime, addr: SocketAddr) -> std::io::Result<TcpListener> {
    let _in_runtime = runtime.handle().enter();
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Connections the kernel may hold for a listener before they are accepted.
const LISTEN_BACKLOG: u32 = 1024;

/// The runtime statements execute on (and HTTP is served on), apart from the one serving ILP.
fn query_runtime(threads: usize) -> Result<QueryRuntime, String> {
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    } else {
        threads
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("sundial-query")
        // Statements are parsed and planned on these threads (see sundial_query::limits).
        .thread_stack_size(sundial_query::limits::PLANNING_STACK_BYTES)
        .enable_all()
        .build()
        .map(|runtime| QueryRuntime(Some(runtime)))
        .map_err(|e| format!("cannot start the query runtime: {e}"))
}

fn pg_server(args: &ServeArgs, engine: Arc<Engine>) -> Result<PgServer, String> {
    let method = AuthMethod::parse(&args.pg_auth_method).ok_or_else(|| {
        format!(
            "unknown PostgreSQL auth method '{}': use scram-sha-256, md5 or password",
            args.pg_auth_method
        )
    })?;
    if args.pg_unauthenticated_connections_max == 0 || args.pg_auth_timeout_ms == 0 {
        return Err(
            "--pg-unauthenticated-connections-max and --pg-auth-timeout-ms must be at least 1"
                .into(),
        );
    }
    let users = Users::new(method, &[(args.pg_user.clone(), args.pg_password.clone())]);
    let options = PgOptions {
        connections_max: args.pg_connections_max,
        unauthenticated_connections_max: args.pg_unauthenticated_connections_max,
        auth_timeout_ms: args.pg_auth_timeout_ms,
        message_bytes_max: args.pg_message_bytes_max,
        statement_timeout_ms: args.statement_timeout_ms,
        read_spin_us: args.pg_read_spin_us,
        ..PgOptions::default()
    };
    Ok(PgServer::new(engine, users, options))
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

async fn accept_tcp(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    let connection_stop = stop.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(tcp_connection(stream, peer, shared.clone(), connection_stop.clone()));
                }
                Err(e) => tracing::warn!("ILP/TCP accept failed: {e}"),
            },
            _ = stop.wait_for(|s| *s) => break,
        }
        while connections.try_join_next().is_some() {}
    }
    while connections.join_next().await.is_some() {}
}

/// Bytes read from a socket per read call.
const READ_BYTES: usize = 64 << 10;

/// One TCP connection's state: its ingestor, and the bytes after the last complete line.
struct TcpConnection {
    ingestor: Ingestor,
    splitter: LineSplitter,
    buf: Vec<u8>,
    peer: SocketAddr,
    shared: Arc<Shared>,
}

impl TcpConnection {
    /// Room for the next read at the end of `buf`; returns where it starts.
    fn reserve(&mut self) -> usize {
        let start = self.buf.len();
        self.buf.resize(start + READ_BYTES, 0);
        start
    }

    /// Takes the `n` bytes read into the room at `start`: ingests every complete line and keeps
    /// the incomplete last one.
    fn received(&mut self, start: usize, n: usize) {
        self.buf.truncate(start + n);
        if n == 0 {
            return;
        }
        let before = self.ingestor.stats();
        let consumed = ingest_lines(
            &mut self.ingestor,
            &mut self.splitter,
            &self.buf,
            false,
            self.peer,
        );
        self.shared.count(TCP, &self.ingestor, before);
        self.buf.drain(..consumed);
    }

    /// At shutdown: ingests what the kernel already received, without waiting for more.
    /// Returns whether the sender had closed its side.
    fn drain_received(&mut self, stream: &TcpStream) -> bool {
        loop {
            let start = self.reserve();
            match stream.try_read(&mut self.buf[start..]) {
                Ok(0) => {
                    self.received(start, 0);
                    return true;
                }
                Ok(n) => self.received(start, n),
                Err(_) => {
                    self.received(start, 0);
                    return false;
                }
            }
        }
    }

    /// Only a sender that closed its side has finished its last line, newline or not;
    /// otherwise an unterminated tail is a line cut short, and is dropped. Then commits.
    fn finish(mut self, closed_by_peer: bool) {
        let peer = self.peer;
        if closed_by_peer {
            let before = self.ingestor.stats();
            ingest_lines(
                &mut self.ingestor,
                &mut self.splitter,
                &self.buf,
                true,
                peer,
            );
            self.shared.count(TCP, &self.ingestor, before);
        } else if !self.buf.is_empty() {
            tracing::warn!(
                "ILP/TCP {peer}: dropped an incomplete last line of {} bytes",
                self.buf.len()
            );
            self.shared.counters.rejected[TCP].fetch_add(1, Ordering::Relaxed);
        }
        commit(&self.shared, TCP, &mut self.ingestor, Ingestor::flush);
    }
}

async fn tcp_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let idle = Duration::from_millis(shared.args.ilp_idle_timeout_ms);
    let mut tick = tokio::time::interval(Duration::from_millis(
        (shared.ingest.commit_interval_ms / 2).max(10),
    ));
    let mut conn = TcpConnection {
        ingestor: Ingestor::with_sinks(shared.sinks.clone(), shared.ingest.clone()),
        splitter: LineSplitter::new(shared.ingest.line_bytes_max),
        buf: Vec::with_capacity(READ_BYTES * 2),
        peer,
        shared,
    };
    let mut last_read = Instant::now();
    let closed_by_peer = loop {
        let start = conn.reserve();
        tokio::select! {
            read = stream.read(&mut conn.buf[start..]) => match read {
                Ok(0) => {
                    conn.received(start, 0);
                    break true;
                }
                Ok(n) => {
                    conn.received(start, n);
                    last_read = Instant::now();
                }
                Err(e) => {
                    conn.received(start, 0);
                    tracing::info!("ILP/TCP {peer}: connection failed: {e}");
                    break false;
                }
            },
            _ = tick.tick() => {
                conn.received(start, 0);
                if last_read.elapsed() > idle {
                    tracing::info!("ILP/TCP {peer}: idle for {} ms, closing", idle.as_millis());
                    break false;
                }
                commit(&conn.shared, TCP, &mut conn.ingestor, |i| i.flush_due(Instant::now()));
            }
            _ = stop.wait_for(|s| *s) => {
                conn.received(start, 0);
                break conn.drain_received(&stream);
            }
        }
    };
    conn.finish(closed_by_peer);
}

/// Feeds every complete line of `buf` to the ingestor; returns the bytes consumed. Ingesting
/// may commit (blocking file I/O): one hand-off to the blocking pool per buffer, not per line.
fn ingest_lines(
    ingestor: &mut Ingestor,
    splitter: &mut LineSplitter,
    buf: &[u8],
    last: bool,
    peer: SocketAddr,
) -> usize {
    tokio::task::block_in_place(|| feed_lines(ingestor, splitter, buf, last, peer))
}

/// [`ingest_lines`] for threads outside the async runtime. With `last`, an unterminated last
/// line counts as complete.
pub(crate) fn feed_lines(
    ingestor: &mut Ingestor,
    splitter: &mut LineSplitter,
    buf: &[u8],
    last: bool,
    peer: SocketAddr,
) -> usize {
    let now = now_ns();
    let line_bytes_max = ingestor.options().line_bytes_max;
    let mut on_line = |span: LineSpan| match span {
        LineSpan::Line(range) => {
            if let Err(e) = ingestor.ingest_line(&buf[range], Precision::Nanos, now) {
                tracing::warn!("ILP from {peer}: line rejected: {e}");
            }
        }
        LineSpan::TooLong(_) => {
            tracing::warn!("ILP from {peer}: line longer than {line_bytes_max} bytes rejected")
        }
    };
    if last {
        splitter.split_final(buf, &mut on_line);
        buf.len()
    } else {
        splitter.split(buf, &mut on_line)
    }
}

fn commit(
    shared: &Shared,
    transport: usize,
    ingestor: &mut Ingestor,
    f: impl FnOnce(&mut Ingestor) -> Result<u64, IngestError>,
) {
    if let Err(e) = tokio::task::block_in_place(|| f(ingestor)) {
        tracing::error!("ILP commit failed: {e}");
    }
    shared.count_tables(transport, ingestor);
}

async fn ping() -> StatusCode {
    StatusCode::NO_CONTENT
}

fn error_response(status: StatusCode, code: &str, message: &str, line: Option<usize>) -> Response {
    let mut body = Vec::with_capacity(message.len() + 48);
    body.extend_from_slice(b"{\"code\":");
    write_json_string(&mut body, code);
    body.extend_from_slice(b",\"message\":");
    write_json_string(&mut body, message);
    if let Some(line) = line {
        body.extend_from_slice(format!(",\"line\":{line}").as_bytes());
    }
    body.push(b'}');
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `POST /write` and `/api/v2/write`. Policy for bad lines (InfluxDB's): the good lines of the
/// request are committed, and the answer is 400 naming the first bad line and how many were bad.
async fn write(
    State(shared): State<Arc<Shared>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let precision = match params.get("precision").map(String::as_str) {
        None => Precision::Nanos,
        Some(p) => match Precision::parse(p) {
            Some(p) => p,
            None => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    "invalid",
                    &format!("unknown precision '{p}'; use n, u, ms or s"),
                    None,
                );
            }
        },
    };
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    let limit = shared.args.http_body_bytes_max;
    let result = tokio::task::spawn_blocking(move || {
        if !gzip {
            return write_lines(&shared, &body, precision);
        }
        match gunzip(&body, limit) {
            Ok(body) => write_lines(&shared, &body, precision),
            Err(response) => *response,
        }
    })
    .await;
    result.unwrap_or_else(|e| {
        error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            &e.to_string(),
            None,
        )
    })
}

/// Decodes a gzip body of at most `limit` decoded bytes.
fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, Box<Response>> {
    let mut out = Vec::new();
    let mut decoder = std::io::Read::take(flate2::read::GzDecoder::new(body), limit as u64 + 1);
    if let Err(e) = std::io::Read::read_to_end(&mut decoder, &mut out) {
        return Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            "invalid",
            &format!("bad gzip body: {e}"),
            None,
        )));
    }
    if out.len() > limit {
        return Err(Box::new(error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            &format!("body over {limit} bytes"),
            None,
        )));
    }
    Ok(out)
}

fn write_lines(shared: &Shared, body: &[u8], precision: Precision) -> Response {
    let options = IngestOptions {
        commit_rows: usize::MAX,
        ..shared.ingest.clone()
    };
    let mut ingestor = Ingestor::with_sinks(shared.sinks.clone(), options);
    let mut first_error: Option<(usize, String)> = None;
    let mut rejected = 0usize;
    let now = now_ns();
    let mut splitter = LineSplitter::new(shared.ingest.line_bytes_max);
    splitter.split_final(body, |span| {
        let (range, error) = match span {
            LineSpan::Line(range) => {
                let error = ingestor
                    .ingest_line(&body[range.clone()], precision, now)
                    .err()
                    .map(|e| e.to_string());
                (range, error)
            }
            LineSpan::TooLong(range) => (
                range,
                Some(format!(
                    "line longer than {} bytes",
                    shared.ingest.line_bytes_max
                )),
            ),
        };
        if let Some(message) = error {
            rejected += 1;
            if first_error.is_none() {
                let line = 1 + body[..range.start].iter().filter(|b| **b == b'\n').count();
                first_error = Some((line, message));
            }
        }
    });
    let before = sundial_ingest::IngestStats::default();
    shared.count(HTTP, &ingestor, before);
    let flushed = ingestor.flush();
    shared.count_tables(HTTP, &mut ingestor);
    if let Err(e) = flushed {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            &format!("commit failed: {e}"),
            None,
        );
    }
    match first_error {
        None => StatusCode::NO_CONTENT.into_response(),
        Some((line, message)) => {
            let message = format!("{rejected} line(s) rejected; first at line {line}: {message}");
            error_response(StatusCode::BAD_REQUEST, "invalid", &message, Some(line))
        }
    }
}

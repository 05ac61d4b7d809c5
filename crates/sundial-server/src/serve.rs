//! `sundial serve`: the network server's wiring. It starts the listeners, receives InfluxDB
//! line protocol over TCP, UDP and HTTP (`/write`, `/api/v2/write`, `/ping`), answers SQL over
//! HTTP (`/exec`, `/exp`, `/imp`: sundial-http) and over the PostgreSQL protocol
//! (sundial-pgwire), and stops them all at shutdown.
//!
//! ```text
//!  ilp_tcp:  TCP conn ──▶ task: LineSplitter ─▶ Ingestor ──────┐
//!  ilp_udp:  UDP ─recvmmsg─▶ thread ─chunks─▶ thread: Ingestor ┼─▶ table sinks ─▶ TableWriter
//!  ilp_http: HTTP /write ─▶ blocking task: body ─▶ Ingestor ───┘   commit: by rows, by time,
//!                                                                    at shutdown
//!  HTTP /exec /exp /imp ─▶ sundial-http on the query runtime ─▶ Engine ─▶ JSON / CSV, streamed
//!  PostgreSQL  ─▶ sundial-pgwire on the query runtime ─▶ Engine ─▶ DataRows, streamed
//! ```
//!
//! Modules depend one way: `serve` (this wiring) ─▶ the transports `ilp_tcp`, `ilp_udp`,
//! `ilp_http` ─▶ `ilp` (the state they share and feeding lines to an ingestor).
//!
//! What a sender can rely on: HTTP answers 204 only once every good line is committed. TCP and
//! UDP have no acknowledgement: a line is committed at the latest `commit_interval_ms` after it
//! arrived while the server runs, `pause_commit_ms` after its sender last sent a byte (TCP: that
//! connection; UDP: any sender), when its TCP sender closes, and at graceful shutdown (Ctrl-C,
//! SIGTERM), which first takes
//! every byte the kernel already received; lines still buffered when the process is killed are
//! lost. Bad lines are logged and counted, never stop the others.
//!
//! At shutdown, HTTP requests and PostgreSQL sessions under way get `--shutdown-timeout-ms`
//! to finish; then they are dropped (statements yield often enough to be dropped at once),
//! and the ILP receivers commit what they took. Web pages of other origins are refused on
//! every HTTP route (`sundial_http::origin`).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use sundial_http::auth::HttpAuth;
use sundial_http::{AllowedOrigins, HttpOptions, HttpSql, sql_router};
use sundial_ingest::{IngestOptions, Sinks};
use sundial_pgwire::{AuthMethod, ParkedWorkers, PgOptions, PgServer, Users};
use sundial_query::{Engine, InsertPath};
use sundial_storage::{Database, PartitionBy};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::access::{Access, AccessFlags, AuthArg, DEFAULT_ADMIN_PASSWORD};
use crate::ilp::Shared;
use crate::ilp_http;
use crate::ilp_tcp::{TcpAdmission, accept_tcp};
use crate::ilp_udp::{UdpOptions, UdpReceiver};
use crate::ops;
use crate::tls::ListenerTls;

/// Listener and ingestion settings of `sundial serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// HTTP listener: ILP `/write` and the SQL API (`/exec`, `/exp`, `/imp`).
    #[arg(long, env = "SUNDIAL_HTTP_ADDR", default_value = "127.0.0.1:9000")]
    pub http_addr: SocketAddr,
    /// Time an HTTP client has to send a request's head (request line and headers), counted
    /// from the connection's start or the end of the previous answer, in milliseconds: a
    /// connection idle or this slow is closed.
    #[arg(long, env = "SUNDIAL_HTTP_HEADER_TIMEOUT_MS", default_value_t = 30_000)]
    pub http_header_timeout_ms: u64,
    /// HTTP connections whose first byte or TLS handshake is awaited, at once (with a
    /// certificate); past it, the oldest is closed to make room for the newcomer.
    #[arg(long, env = "SUNDIAL_HTTP_HANDSHAKES_MAX", default_value_t = 256)]
    pub http_handshakes_max: usize,
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
    /// Commit a TCP connection's rows (UDP: every sender's) once it has sent nothing for
    /// this long: rows are queryable this soon after a sender pauses or closes.
    #[arg(long, env = "SUNDIAL_ILP_PAUSE_COMMIT_MS", default_value_t = 50)]
    pub ilp_pause_commit_ms: u64,
    /// Give tables that ILP creates DEDUP UPSERT KEYS on the designated timestamp and the tags
    /// of their first line: a line sent again replaces the stored row instead of adding one.
    /// `--ilp-dedup-tags` alone means true; `=true|false` as the config file writes it.
    #[arg(
        long,
        env = "SUNDIAL_ILP_DEDUP_TAGS",
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub ilp_dedup_tags: bool,
    /// Close a TCP connection that sent nothing for this long.
    #[arg(long, env = "SUNDIAL_ILP_IDLE_TIMEOUT_MS", default_value_t = 300_000)]
    pub ilp_idle_timeout_ms: u64,
    /// ILP/TCP connections served at once: each holds buffers of its own (up to the text of
    /// a batch per table and its remembered series), so more are closed as they are accepted.
    #[arg(long, env = "SUNDIAL_ILP_TCP_CONNECTIONS_MAX", default_value_t = 256)]
    pub ilp_tcp_connections_max: usize,
    /// ILP/TCP connections that have not sent a byte yet (or not finished authenticating), at
    /// once; they hold no slot of --ilp-tcp-connections-max. Past it, the oldest is closed to
    /// make room for the newcomer.
    #[arg(
        long,
        env = "SUNDIAL_ILP_TCP_UNAUTHENTICATED_CONNECTIONS_MAX",
        default_value_t = 64
    )]
    pub ilp_tcp_unauthenticated_connections_max: usize,
    /// Time an ILP/TCP connection without credentials has for its first byte, in milliseconds
    /// (after its TLS handshake, if any); past it, it is closed. With --auth required, the
    /// signature exchange has 10 s.
    #[arg(
        long,
        env = "SUNDIAL_ILP_TCP_FIRST_BYTE_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub ilp_tcp_first_byte_timeout_ms: u64,
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
    /// Whether clients must log in: `required` (every listener checks credentials against
    /// the users, see docs/operations.md) or `off` (HTTP and ILP clients without credentials
    /// act as an admin, for local development; PostgreSQL still asks for a password).
    #[arg(long, env = "SUNDIAL_AUTH", value_enum, default_value_t = AuthArg::Required)]
    pub auth: AuthArg,
    /// The built-in admin's name. It is not stored: these flags define it at every start,
    /// and SQL cannot change it. (`--pg-user` is its old name.)
    #[arg(
        long,
        alias = "pg-user",
        env = "SUNDIAL_ADMIN_USER",
        default_value = "admin"
    )]
    pub admin_user: String,
    /// The built-in admin's password; empty: no built-in admin (the stored admins only).
    /// A server listening beyond loopback refuses to start with the default one.
    /// (`--pg-password` is its old name.)
    #[arg(
        long,
        alias = "pg-password",
        env = "SUNDIAL_ADMIN_PASSWORD",
        default_value = DEFAULT_ADMIN_PASSWORD,
        hide_default_value = true
    )]
    pub admin_password: String,
    /// How PostgreSQL clients prove the password: scram-sha-256, md5 or password (cleartext).
    #[arg(long, env = "SUNDIAL_PG_AUTH_METHOD", default_value = "scram-sha-256")]
    pub pg_auth_method: String,
    /// Authenticated PostgreSQL sessions at once; more are refused (SQLSTATE 53300).
    #[arg(long, env = "SUNDIAL_PG_CONNECTIONS_MAX", default_value_t = 256)]
    pub pg_connections_max: usize,
    /// PostgreSQL connections still logging in, at once (they hold no session slot); past it,
    /// one silent for a quarter of the auth timeout is closed (SQLSTATE 53300) to make room for
    /// a newcomer, else the newcomer is let in, up to four times this many.
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
    /// one sessions poll at once, and only while another query thread is idle.
    #[arg(long, env = "SUNDIAL_PG_READ_SPIN_US", default_value_t = 50)]
    pub pg_read_spin_us: u64,
    /// A query thread that has run this long without giving up its CPU yields it after the
    /// PostgreSQL reply it sends, in microseconds (0: never), so other threads and processes
    /// on the machine wait at most about this long behind a saturated server.
    #[arg(long, env = "SUNDIAL_PG_YIELD_INTERVAL_US", default_value_t = 250)]
    pub pg_yield_interval_us: u64,
    /// Answer SAMPLE BY queries from materialized views whose buckets nest in theirs, for the
    /// buckets the views cover, and from the table for the rest (`true`); `false`: always from
    /// the table.
    #[arg(long, env = "SUNDIAL_ROLLUP_ROUTING", default_value_t = true, action = clap::ArgAction::Set)]
    pub rollup_routing: bool,
    /// Default statement timeout in milliseconds (0: none), for PostgreSQL sessions (which may
    /// SET their own) and HTTP `/exec` and `/exp` (a `Statement-Timeout` header overrides it).
    #[arg(long, env = "SUNDIAL_STATEMENT_TIMEOUT_MS", default_value_t = 0)]
    pub statement_timeout_ms: u64,
    /// Threads executing queries and serving HTTP and PostgreSQL, apart from the threads
    /// receiving ILP (0: one per core).
    #[arg(long, env = "SUNDIAL_QUERY_THREADS", default_value_t = 0)]
    pub query_threads: usize,
    /// Heavy queries (those reading more than about 100,000 rows, or joining without keys)
    /// that execute at once; the others wait their turn in arrival order, so statements that
    /// read a few rows are never stuck behind them (0: no bound). Default: two per core.
    #[arg(long, env = "SUNDIAL_QUERIES_RUNNING_MAX")]
    pub queries_running_max: Option<usize>,
    /// Memory one query's operators (sorts, joins, aggregations) may hold, in bytes (0: no
    /// limit); past it the query fails with SQLSTATE 53200 and the server goes on.
    #[arg(long, env = "SUNDIAL_QUERY_MEMORY_BYTES_MAX", default_value_t = 4 << 30)]
    pub query_memory_bytes_max: usize,
    /// Memory all queries' operators may hold together, in bytes (0: no bound); a query
    /// that would go past it spills or fails with SQLSTATE 53200. Default: half the memory
    /// the server may use (physical memory, or its cgroup's memory.max when lower).
    #[arg(long, env = "SUNDIAL_MEMORY_BYTES_MAX")]
    pub memory_bytes_max: Option<usize>,
    /// The directory sorts, aggregations and joins spill into when out of memory; files of
    /// an earlier process there are removed at start. Default: `.spill` in the data directory.
    #[arg(long, env = "SUNDIAL_SPILL_DIR")]
    pub spill_dir: Option<std::path::PathBuf>,
    /// Bytes all queries may spill at once; a query that would spill more fails with
    /// SQLSTATE 53400.
    #[arg(long, env = "SUNDIAL_SPILL_BYTES_MAX", default_value_t = 16 << 30)]
    pub spill_bytes_max: u64,
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
    /// Log statements (PostgreSQL and HTTP) that take longer than this many milliseconds, at
    /// WARN, with their duration, protocol, client and text (0: none).
    #[arg(
        long,
        env = "SUNDIAL_SLOW_QUERY_MS",
        default_value_t = sundial_metrics::SLOW_QUERY_MS_DEFAULT
    )]
    pub slow_query_ms: u64,
    /// TLS certificate chain (PEM, the server's certificate first) for every TCP listener:
    /// PostgreSQL (sslmode=require), HTTPS and ILP over TLS on the same ports as plain TCP.
    /// Needs --tls-key; SIGHUP reloads both files.
    #[arg(long, env = "SUNDIAL_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC).
    #[arg(long, env = "SUNDIAL_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Which clients must use TLS: `off` (none), `remote` (all but loopback ones) or `all`;
    /// plain connections of the others are refused. Needs --tls-cert.
    #[arg(
        long,
        env = "SUNDIAL_TLS_REQUIRE",
        default_value = "off",
        value_parser = clap::builder::TypedValueParser::map(
            clap::builder::PossibleValuesParser::new(sundial_tls::TlsRequire::NAMES),
            |s: String| sundial_tls::TlsRequire::parse(&s).unwrap_or_default()
        )
    )]
    pub tls_require: sundial_tls::TlsRequire,
    /// Time an HTTP or ILP/TCP client has for its first byte and TLS handshake together, in
    /// milliseconds (PostgreSQL's is within --pg-auth-timeout-ms).
    #[arg(
        long,
        env = "SUNDIAL_TLS_HANDSHAKE_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub tls_handshake_timeout_ms: u64,
    #[command(flatten)]
    pub log: crate::logging::LogArgs,
}

/// Runs the server until Ctrl-C or SIGTERM, then stops it: see the module docs.
pub async fn run(db: Arc<Database>, args: ServeArgs) -> Result<(), String> {
    let stop_signals = StopSignals::install()?;
    // Uptime counts from here.
    let _ = sundial_metrics::metrics();
    sundial_metrics::set_slow_query_ms(args.slow_query_ms);
    let shared = Arc::new(Shared::new(
        Sinks::new(db),
        ingest_options(&args)?,
        args.ilp_idle_timeout_ms,
        args.ilp_tcp_connections_max,
        args.http_body_bytes_max,
    ));
    let flags = AccessFlags {
        admin_user: &args.admin_user,
        admin_password: &args.admin_password,
        auth: args.auth,
        listen: [args.http_addr, args.pg_addr, args.ilp_tcp_addr],
        ilp_udp_addr: args.ilp_udp_addr,
    };
    let access = Access::open(&flags, shared.sinks.db())?;
    let tls = ListenerTls::new(
        args.tls_cert.as_deref(),
        args.tls_key.as_deref(),
        args.tls_require,
        args.tls_handshake_timeout_ms,
    )?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();

    let tcp = TcpListener::bind(args.ilp_tcp_addr)
        .await
        .map_err(|e| listen_error(args.ilp_tcp_addr, "ILP/TCP", "--ilp-tcp-addr", &e))?;
    let queries = query_runtime(args.query_threads)?;
    let http = listen_on(&queries, args.http_addr)
        .map_err(|e| listen_error(args.http_addr, "HTTP", "--http-addr", &e))?;
    tracing::info!("ILP over TCP on {}", args.ilp_tcp_addr);
    tracing::info!("HTTP on {}", args.http_addr);
    let admission = tcp_admission(&args, &shared)?;
    tasks.spawn(accept_tcp(
        tcp,
        shared.clone(),
        access.clone(),
        tls.clone(),
        admission,
        stop_rx.clone(),
    ));
    let udp = start_udp(&args, &shared)?;
    let engine = Arc::new(engine(&args, &shared, &access)?);
    // PostgreSQL and HTTP are served on the query runtime: sessions and connections run their
    // statements themselves. At shutdown these get a grace period, then are stopped.
    let mut served = JoinSet::new();
    serve_pg(
        &args,
        &access,
        &tls,
        engine.clone(),
        &queries,
        &mut served,
        stop_rx.clone(),
    )?;
    // Materialized views refresh on the query runtime, as queries.
    served.spawn_on(
        Engine::refresh_views(Arc::downgrade(&engine), stop_rx.clone()),
        queries.handle(),
    );
    let app = http_app(&args, &access, engine, shared.clone());
    crate::tls::warn_cleartext_http(args.http_addr, access.required, &tls);
    serve_http(
        http,
        app,
        &args,
        tls.clone(),
        &queries,
        &mut served,
        stop_rx.clone(),
    )?;
    eprintln!(
        "sundial serving: HTTP {}, PostgreSQL {}, ILP/TCP {}{}{}; {}",
        args.http_addr,
        args.pg_addr,
        args.ilp_tcp_addr,
        args.ilp_udp_addr
            .map(|a| format!(", ILP/UDP {a}"))
            .unwrap_or_default(),
        tls.describe(),
        console_hint(&args, &tls)
    );
    tasks.spawn(shared.clone().report_counters(stop_rx.clone()));
    tasks.spawn(crate::tls::reload_on_sighup(
        tls.tls.clone(),
        stop_rx.clone(),
    ));

    stop_signals.wait().await;
    tracing::info!("shutting down: committing what was received");
    let _ = stop_tx.send(true);
    if let Some(receiver) = udp {
        let _ = tokio::task::spawn_blocking(move || receiver.stop()).await;
    }
    stop_served(&mut served, args.shutdown_timeout_ms).await;
    // The ILP receivers commit what they took.
    while tasks.join_next().await.is_some() {}
    drop(queries);
    shared.log_counters();
    Ok(())
}

/// The ILP/TCP listener's budgets, from the `--ilp-tcp-*` flags.
fn tcp_admission(args: &ServeArgs, shared: &Shared) -> Result<TcpAdmission, String> {
    if args.ilp_tcp_unauthenticated_connections_max == 0 || args.ilp_tcp_first_byte_timeout_ms == 0
    {
        return Err(
            "--ilp-tcp-unauthenticated-connections-max and --ilp-tcp-first-byte-timeout-ms \
             must be at least 1"
                .into(),
        );
    }
    Ok(TcpAdmission::new(
        args.ilp_tcp_unauthenticated_connections_max,
        Duration::from_millis(args.ilp_tcp_first_byte_timeout_ms),
        shared.tcp_connections_max,
    ))
}

/// How the ILP receivers ingest, from the `--ilp-*` flags.
fn ingest_options(args: &ServeArgs) -> Result<IngestOptions, String> {
    let partition_by = PartitionBy::parse(&args.ilp_partition_by)
        .ok_or_else(|| format!("unknown partitioning '{}'", args.ilp_partition_by))?;
    Ok(IngestOptions {
        timestamp_column: args.ilp_timestamp_column.clone(),
        partition_by,
        line_bytes_max: args.ilp_line_bytes_max,
        commit_rows: args.ilp_commit_rows,
        commit_interval_ms: args.ilp_commit_interval_ms,
        pause_commit_ms: args.ilp_pause_commit_ms,
        dedup_tags: args.ilp_dedup_tags,
    })
}

/// The UDP receiver, when `--ilp-udp-addr` is given.
fn start_udp(args: &ServeArgs, shared: &Arc<Shared>) -> Result<Option<UdpReceiver>, String> {
    let Some(addr) = args.ilp_udp_addr else {
        return Ok(None);
    };
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
    Ok(Some(receiver))
}

/// The engine every SQL client shares.
fn engine(args: &ServeArgs, shared: &Shared, access: &Access) -> Result<Engine, String> {
    // SQL INSERTs commit through the ILP receivers' table sinks, waiting like ILP senders
    // once a table has four commits' worth of rows pending.
    let inserts = InsertPath {
        sinks: shared.sinks.clone(),
        pending_rows_max: shared.ingest.commit_rows.saturating_mul(4),
    };
    let mut engine = Engine::with_inserts(inserts).map_err(|e| e.to_string())?;
    engine.set_query_memory_bytes_max(args.query_memory_bytes_max);
    let running_max = args.queries_running_max.unwrap_or_else(|| {
        2 * std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
    });
    engine.set_queries_running_max(running_max);
    sundial_metrics::metrics()
        .queries_running_max
        .set(i64::try_from(running_max).unwrap_or(i64::MAX));
    crate::memory::bound_queries(
        &mut engine,
        args.memory_bytes_max,
        args.spill_dir.as_deref(),
        args.spill_bytes_max,
        shared.sinks.db().root(),
    )?;
    engine.set_users(access.users.clone());
    engine.set_rollup_routing(args.rollup_routing);
    // Clients share this engine: each keeps its own settings (PostgreSQL sessions) or none
    // past its request (HTTP).
    engine.set_settings(sundial_query::Settings::Fixed);
    engine.set_sql_file_dir(sql_file_dir(
        args.sql_file_dir.as_deref(),
        shared.sinks.db(),
    )?);
    Ok(engine)
}

/// Listens for PostgreSQL clients and serves them on the query runtime until `stop`.
fn serve_pg(
    args: &ServeArgs,
    access: &Access,
    tls: &ListenerTls,
    engine: Arc<Engine>,
    queries: &QueryRuntime,
    served: &mut JoinSet<()>,
    stop: watch::Receiver<bool>,
) -> Result<(), String> {
    let pg = pg_server(args, access, tls, engine, queries.1.clone())?;
    let listener = listen_on(queries, args.pg_addr)
        .map_err(|e| listen_error(args.pg_addr, "PostgreSQL", "--pg-addr", &e))?;
    tracing::info!("PostgreSQL wire protocol on {}", args.pg_addr);
    served.spawn_on(
        async move { pg.serve(listener, stop).await },
        queries.handle(),
    );
    Ok(())
}

/// Every HTTP route: ILP (`/write`, `/api/v2/write`, `/ping`) and SQL (sundial-http).
fn http_app(args: &ServeArgs, access: &Access, engine: Arc<Engine>, shared: Arc<Shared>) -> Router {
    let allowed_origins = AllowedOrigins::parse(&args.http_allowed_origins);
    let auth = HttpAuth::new(
        access.users.clone(),
        access.required,
        access.throttle.clone(),
        args.tls_cert.is_some(),
    );
    let origin_check = axum::middleware::from_fn_with_state(
        allowed_origins.clone(),
        sundial_http::origin::refuse_foreign_pages,
    );
    let sql = sql_router(HttpSql {
        engine,
        options: HttpOptions {
            statement_timeout_ms: args.statement_timeout_ms,
            import_bytes_max: args.http_import_bytes_max,
            gzip: args.http_gzip.into(),
            allowed_origins: allowed_origins.clone(),
        },
    });
    Router::new()
        .route("/metrics", get(ops::metrics_text))
        .route("/status", get(ops::status))
        .route("/health", get(ops::status))
        .route("/ping", get(ilp_http::ping).head(ilp_http::ping))
        .route("/write", post(ilp_http::write))
        .route("/api/v2/write", post(ilp_http::write))
        .layer(DefaultBodyLimit::max(args.http_body_bytes_max))
        .layer(origin_check.clone())
        .with_state(shared)
        .merge(sql)
        .merge(sundial_http::auth::routes(auth.clone()).layer(origin_check))
        // Outermost: no route but the exempt ones runs without a checked caller.
        .layer(axum::middleware::from_fn_with_state(
            auth,
            sundial_http::auth::authenticate,
        ))
}

/// Serves `app` on the query runtime until `stop`: each connection's task runs its statements
/// itself, with no hand-off to another thread and back.
fn serve_http(
    http: TcpListener,
    app: Router,
    args: &ServeArgs,
    tls: ListenerTls,
    queries: &QueryRuntime,
    served: &mut JoinSet<()>,
    stop: watch::Receiver<bool>,
) -> Result<(), String> {
    if args.http_header_timeout_ms == 0 || args.http_handshakes_max == 0 {
        return Err("--http-header-timeout-ms and --http-handshakes-max must be at least 1".into());
    }
    let header_timeout = Duration::from_millis(args.http_header_timeout_ms);
    let handshakes_max = args.http_handshakes_max;
    served.spawn_on(
        async move {
            // HTTPS and HTTP on one port, told apart by the first byte, the handshakes run
            // apart from the accepts; counted in sundial_connections_active, with TCP_NODELAY
            // (`ops`); each request knows its peer's address (`--http-gzip remote`).
            let http = ops::CountedListener::new(http, tls, handshakes_max);
            crate::http_conn::serve(http, app, header_timeout, stop).await;
        },
        queries.handle(),
    );
    Ok(())
}

/// The end of the ready line: where the web console is, and how to log in.
fn console_hint(args: &ServeArgs, tls: &ListenerTls) -> String {
    let scheme = if tls.tls.is_some() { "https" } else { "http" };
    // A wildcard address is reached on loopback from this machine.
    let host = match args.http_addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_string(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V4(ip) => ip.to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
    };
    let login = if args.auth == AuthArg::Off {
        "no login needed: --auth off".to_string()
    } else if args.admin_password == DEFAULT_ADMIN_PASSWORD {
        format!(
            "log in as {} with password {DEFAULT_ADMIN_PASSWORD}, the default: change it with \
             --admin-password",
            args.admin_user
        )
    } else if args.admin_password.is_empty() {
        "log in as a stored admin".to_string()
    } else {
        format!("log in as {} with --admin-password", args.admin_user)
    };
    format!(
        "web console {scheme}://{host}:{}/ ({login})",
        args.http_addr.port()
    )
}

/// Lets requests and statements under way finish within `grace_ms`; then they are dropped
/// (every statement yields often: see sundial_query's `cooperative`).
async fn stop_served(served: &mut JoinSet<()>, grace_ms: u64) {
    let grace = Duration::from_millis(grace_ms);
    let finished =
        tokio::time::timeout(grace, async { while served.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tracing::warn!(
            "requests still under way after {grace_ms} ms (--shutdown-timeout-ms): stopping them"
        );
        served.abort_all();
    }
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
/// The query runtime, and its worker threads that are parked (counted by its park hooks).
struct QueryRuntime(Option<tokio::runtime::Runtime>, Arc<ParkedWorkers>);

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

/// Why a listener could not start, with the flag that moves it when the port is taken or
/// not ours to use.
fn listen_error(addr: SocketAddr, what: &str, flag: &str, e: &std::io::Error) -> String {
    let hint = match e.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "; another process is listening there: stop it, or choose another address with \
             {flag} (or {})",
            env_name(flag)
        ),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::AddrNotAvailable => {
            format!(
                "; choose another address with {flag} (or {})",
                env_name(flag)
            )
        }
        _ => String::new(),
    };
    format!("cannot listen on {addr} ({what}): {e}{hint}")
}

/// The `SUNDIAL_*` variable of a `--flag`.
fn env_name(flag: &str) -> String {
    format!(
        "SUNDIAL_{}",
        flag.trim_start_matches('-')
            .replace('-', "_")
            .to_uppercase()
    )
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
    let parked = Arc::new(ParkedWorkers::default());
    let (on_park, on_unpark) = (parked.clone(), parked.clone());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("sundial-query")
        // Statements are parsed and planned on these threads (see sundial_query::limits).
        .thread_stack_size(sundial_query::limits::PLANNING_STACK_BYTES)
        .on_thread_park(move || on_park.parked())
        .on_thread_unpark(move || on_unpark.unparked())
        .enable_all()
        .build()
        .map(|runtime| QueryRuntime(Some(runtime), parked))
        .map_err(|e| format!("cannot start the query runtime: {e}"))
}

fn pg_server(
    args: &ServeArgs,
    access: &Access,
    tls: &ListenerTls,
    engine: Arc<Engine>,
    parked_workers: Arc<ParkedWorkers>,
) -> Result<PgServer, String> {
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
    let users = Users::with_store(method, access.users.clone(), access.throttle.clone());
    let options = PgOptions {
        connections_max: args.pg_connections_max,
        unauthenticated_connections_max: args.pg_unauthenticated_connections_max,
        auth_timeout_ms: args.pg_auth_timeout_ms,
        message_bytes_max: args.pg_message_bytes_max,
        statement_timeout_ms: args.statement_timeout_ms,
        read_spin_us: args.pg_read_spin_us,
        yield_interval: std::time::Duration::from_micros(args.pg_yield_interval_us),
        tls: tls.tls.clone(),
        tls_require: tls.require,
        parked_workers: Some(parked_workers),
        ..PgOptions::default()
    };
    Ok(PgServer::new(engine, users, options))
}

/// The signals that stop the server gracefully (SIGTERM, Ctrl-C), registered before it says
/// it is serving: one sent the moment the ready line appears must stop it, not kill it.
#[cfg(unix)]
struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl StopSignals {
    fn install() -> Result<StopSignals, String> {
        use tokio::signal::unix::{SignalKind, signal};
        let handle = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|e| format!("cannot handle {name}: {e}"))
        };
        Ok(StopSignals {
            terminate: handle(SignalKind::terminate(), "SIGTERM")?,
            interrupt: handle(SignalKind::interrupt(), "SIGINT")?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

#[cfg(not(unix))]
struct StopSignals;

#[cfg(not(unix))]
impl StopSignals {
    fn install() -> Result<StopSignals, String> {
        Ok(StopSignals)
    }

    async fn wait(self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::ServeArgs;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    /// The one boolean flag reads as a switch, and as `=true|false` (how the config file and
    /// `SUNDIAL_ILP_DEDUP_TAGS` pass it).
    #[test]
    fn ilp_dedup_tags_is_a_switch_that_takes_a_value() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("sundial").chain(args.iter().copied()))
                .map(|c| c.serve.ilp_dedup_tags)
        };
        assert!(!parse(&[]).expect("no flag"));
        assert!(parse(&["--ilp-dedup-tags"]).expect("switch"));
        assert!(parse(&["--ilp-dedup-tags=true"]).expect("=true"));
        assert!(!parse(&["--ilp-dedup-tags=false"]).expect("=false"));
        assert!(parse(&["--ilp-dedup-tags=maybe"]).is_err());
    }
}

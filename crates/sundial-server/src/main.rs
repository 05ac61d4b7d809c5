//! # sundial
//!
//! The `sundial` command: the server (`serve`), and an interactive SQL shell, one-shot SQL and
//! CSV import, all on a data directory (default `./sundial-data`, or `$SUNDIAL_DATA_DIR`) that
//! one process at a time holds.
//!
//! ```text
//!  sundial serve  ──▶ ILP over TCP, UDP, HTTP ──▶ table sinks (sundial-ingest) ─┐
//!                     SQL over HTTP, PostgreSQL ──▶ Engine (sundial-query) ─────┤
//!  sundial shell  ──▶ line editor ──▶ Engine ───────────────────────────────────┼─▶ Database
//!  sundial sql    ──▶ statements  ──▶ Engine ───────────────────────────────────┤   (sundial-
//!  sundial import ──▶ sundial-csv reader ──▶ TableWriter (streaming, one commit)┘    storage)
//! ```
//!
//! Settings of `serve` come from flags, `SUNDIAL_*` variables and a TOML file (`config`).

mod access;
mod admission;
mod backup;
mod config;
mod http_conn;
mod ilp;
mod ilp_auth;
mod ilp_http;
mod ilp_tcp;
mod ilp_udp;
mod import;
mod logging;
mod memory;
mod ops;
mod output;
mod serve;
mod shell;
mod tls;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use sundial_query::Engine;
use sundial_storage::{ColdStoreOptions, Database, Durability, StorageOptions};

use crate::output::Format;

/// Query execution allocates and frees many short-lived buffers per batch; mimalloc's
/// thread-local free lists serve them faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "sundial",
    version,
    about = "Sundial: a time-series SQL database"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Options shared by every command that opens a data directory.
#[derive(clap::Args, Debug, Clone)]
struct DataOptions {
    /// Data directory; created on first use.
    #[arg(long, env = "SUNDIAL_DATA_DIR", default_value = "./sundial-data")]
    data_dir: PathBuf,
    /// What a commit waits for: `sync` (fsync before returning), `periodic` (file system
    /// flushed every second), `none` (left to the kernel). All survive a crash of Sundial itself.
    #[arg(long, env = "SUNDIAL_DURABILITY", value_enum, default_value_t = DurabilityArg::Periodic)]
    durability: DurabilityArg,
    /// Column files kept open for writing, least recently used closed first (default: half the
    /// open-files limit, which Sundial raises to its hard limit at start).
    #[arg(long, env = "SUNDIAL_OPEN_FILES_MAX", value_parser = clap::value_parser!(u64).range(1..))]
    open_files_max: Option<u64>,
    /// How often partitions that a table's `COLD AFTER` has made cold are looked for and
    /// converted to Parquet, in the background (0: never).
    #[arg(long, env = "SUNDIAL_COLD_CHECK_INTERVAL_MS", default_value_t = 60_000)]
    cold_check_interval_ms: u64,
    /// Memory for decoded column chunks of Parquet partitions, shared by all queries (least
    /// recently used dropped first).
    #[arg(long, env = "SUNDIAL_DECODED_CACHE_MB", default_value_t = 512)]
    decoded_cache_mb: u64,
    /// Keep Parquet partitions in an object store instead of the data directory:
    /// `s3://bucket/prefix` (credentials and region from the usual AWS_* variables) or
    /// `file:///path`.
    #[arg(long, env = "SUNDIAL_COLD_STORE")]
    cold_store: Option<String>,
    /// The S3 endpoint of an S3-compatible store (MinIO, Ceph, moto...), e.g.
    /// `http://127.0.0.1:9000`; plain HTTP is allowed when it says so.
    #[arg(long, env = "SUNDIAL_COLD_STORE_ENDPOINT")]
    cold_store_endpoint: Option<String>,
    /// Local copies of the cold store's Parquet files kept at most (least recently opened
    /// deleted first).
    #[arg(long, env = "SUNDIAL_COLD_CACHE_MB", default_value_t = 10_240)]
    cold_cache_mb: u64,
    /// TTL and COLD AFTER count back from a table's newest row capped at the wall clock (`on`,
    /// QuestDB's default), so that one row stamped in the future cannot expire the others;
    /// `off`: from the newest row alone.
    #[arg(long, env = "SUNDIAL_TTL_WALL_CLOCK", value_enum, default_value_t = OnOff::On)]
    ttl_wall_clock: OnOff,
    /// Refuse rows whose designated timestamp is more than this many milliseconds ahead of the
    /// server's clock (ILP lines are rejected as bad lines, INSERT and COPY fail); unset: any
    /// timestamp before 2262 is taken.
    #[arg(long, env = "SUNDIAL_TIMESTAMP_FUTURE_MS_MAX")]
    timestamp_future_ms_max: Option<u64>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum OnOff {
    On,
    Off,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum DurabilityArg {
    Sync,
    Periodic,
    None,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the server: SQL over PostgreSQL's protocol and HTTP, ILP over TCP, UDP and HTTP.
    Serve {
        /// TOML file with any of these settings (flags and SUNDIAL_* variables override it).
        #[arg(long, env = "SUNDIAL_CONFIG")]
        config: Option<PathBuf>,
        #[command(flatten)]
        data: DataOptions,
        #[command(flatten)]
        serve: Box<serve::ServeArgs>,
    },
    /// Interactive SQL shell.
    Shell {
        #[command(flatten)]
        data: DataOptions,
    },
    /// Run SQL statements and print their results.
    Sql {
        #[command(flatten)]
        data: DataOptions,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// One or more statements separated by `;`.
        sql: String,
    },
    /// Back up a running server's data while it ingests (BACKUP DATABASE TO over HTTP), or,
    /// when no server answers and --data-dir is given, that stopped server's data directory.
    /// Restore: stop the server and start it with --data-dir pointing at the backup.
    Backup {
        /// The backup directory: new or empty, outside the data directory, on the server's
        /// machine (a relative path is made absolute here).
        #[arg(long)]
        to: PathBuf,
        /// The running server's HTTP address.
        #[arg(long, env = "SUNDIAL_URL", default_value = "http://127.0.0.1:9000")]
        url: String,
        /// The admin to log in as (BACKUP needs the admin role).
        #[arg(long, env = "SUNDIAL_USER", default_value = "admin")]
        user: String,
        /// That user's password (better given as SUNDIAL_PASSWORD than on the command line).
        #[arg(
            long,
            env = "SUNDIAL_PASSWORD",
            default_value = "quest",
            hide_default_value = true
        )]
        password: String,
        /// If no server answers: back up this data directory offline (taking its lock).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// With --data-dir: the cold store its Parquet partitions are kept in, if any.
        #[arg(long, env = "SUNDIAL_COLD_STORE")]
        cold_store: Option<String>,
        /// With --data-dir: the S3 endpoint of that cold store.
        #[arg(long, env = "SUNDIAL_COLD_STORE_ENDPOINT")]
        cold_store_endpoint: Option<String>,
    },
    /// Load a CSV file (with a header row) into a table, creating it if needed; bad rows are
    /// skipped and reported with their line (see --atomicity, --rejects).
    Import {
        #[command(flatten)]
        data: DataOptions,
        file: PathBuf,
        #[arg(long)]
        table: String,
        /// Column to use as the designated timestamp.
        #[arg(long)]
        timestamp: Option<String>,
        /// Partitioning of a new table (default DAY with --timestamp, otherwise NONE).
        #[arg(long)]
        partition_by: Option<String>,
        /// Field delimiter.
        #[arg(long, default_value = ",")]
        delimiter: char,
        /// A value that does not parse as its column's type: `skipRow` drops the row,
        /// `skipCol` stores NULL, `abort` stops the import (naming line, column and value).
        #[arg(long, default_value = "skipRow", value_parser = import::parse_atomicity)]
        atomicity: sundial_csv::Atomicity,
        /// Refused rows printed with their line and reason (the rest are counted).
        #[arg(long, default_value_t = 10)]
        max_reported_errors: usize,
        /// Write every refused row (line, action, column, reason, record) to this CSV file.
        #[arg(long)]
        rejects: Option<PathBuf>,
    },
}

fn open(data: &DataOptions) -> Result<(Arc<Database>, Engine), String> {
    open_for(data, None)
}

/// Opens the data directory; `server`: the settings of the `serve` that opens it, which name
/// where a server already running on it probably listens.
fn open_for(
    data: &DataOptions,
    server: Option<&serve::ServeArgs>,
) -> Result<(Arc<Database>, Engine), String> {
    let durability = match data.durability {
        DurabilityArg::Sync => Durability::Sync,
        DurabilityArg::Periodic => Durability::Periodic { interval_ms: 1_000 },
        DurabilityArg::None => Durability::None,
    };
    let defaults = StorageOptions::default();
    let options = StorageOptions {
        durability,
        open_files_max: data.open_files_max.map_or(defaults.open_files_max, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        }),
        cold_check_interval_ms: data.cold_check_interval_ms,
        cold_store: data.cold_store.as_ref().map(|url| {
            let mut settings = Vec::new();
            if let Some(endpoint) = &data.cold_store_endpoint {
                settings.push(("aws_endpoint".to_string(), endpoint.clone()));
                if endpoint.starts_with("http://") {
                    settings.push(("aws_allow_http".to_string(), "true".to_string()));
                }
            }
            ColdStoreOptions {
                url: url.clone(),
                settings,
                cache_bytes: data.cold_cache_mb.saturating_mul(1 << 20),
            }
        }),
        decoded_cache_bytes: usize::try_from(data.decoded_cache_mb.saturating_mul(1 << 20))
            .unwrap_or(usize::MAX),
        ttl_wall_clock: data.ttl_wall_clock == OnOff::On,
        timestamp_future_ms_max: data.timestamp_future_ms_max,
        ..defaults
    };
    let db = Database::open(&data.data_dir, options).map_err(|e| match e {
        sundial_storage::StorageError::Locked { .. } => format!("{e}\n{}", locked_hint(server)),
        e => e.to_string(),
    })?;
    let engine = Engine::new(db.clone()).map_err(|e| e.to_string())?;
    Ok((db, engine))
}

/// How to reach the server that holds a data directory instead: its addresses are this
/// `serve`'s settings, or (other commands) those `SUNDIAL_HTTP_ADDR` and `SUNDIAL_PG_ADDR` give,
/// or the defaults.
fn locked_hint(server: Option<&serve::ServeArgs>) -> String {
    let setting = |var: &str, default: &str| {
        std::env::var(var)
            .ok()
            .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
            .unwrap_or_else(|| default.parse().unwrap_or(([127, 0, 0, 1], 0).into()))
    };
    let (http, pg, admin) = match server {
        Some(args) => (args.http_addr, args.pg_addr, args.admin_user.clone()),
        None => (
            setting("SUNDIAL_HTTP_ADDR", "127.0.0.1:9000"),
            setting("SUNDIAL_PG_ADDR", "127.0.0.1:8812"),
            std::env::var("SUNDIAL_ADMIN_USER").unwrap_or_else(|_| "admin".into()),
        ),
    };
    format!(
        "If `sundial serve` runs on it, talk to that server instead: the web console at \
         http://{http}/, `psql -h {} -p {} -U {admin}`, or `curl -u {admin}:PASSWORD -G \
         http://{http}/exec --data-urlencode 'query=SELECT 1'` (the password is {} unless the \
         server was given --admin-password). The lock is held only while that process runs: a \
         `.lock` file a stopped process left behind is harmless.",
        pg.ip(),
        pg.port(),
        access::DEFAULT_ADMIN_PASSWORD
    )
}

fn main() -> ExitCode {
    let cli: Cli = match config::parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    logging::init(match &cli.command {
        Command::Serve { serve, .. } => Some(&serve.log),
        _ => None,
    });
    // Before any table is opened: the default open-files bound is a share of this limit.
    if let Err(e) = sundial_storage::raise_open_files_limit() {
        tracing::warn!("cannot raise the open-files limit: {e}");
    }
    // Statements are parsed and planned on the thread that polls them: the main thread here
    // (`block_on`) and the runtime's threads, all with the stack planning needs.
    let main = std::thread::Builder::new()
        .name("sundial-main".into())
        .stack_size(sundial_query::limits::PLANNING_STACK_BYTES)
        .spawn(move || run_command(cli));
    match main.map(|thread| thread.join()) {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: cannot start the main thread: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_command(cli: Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(sundial_query::limits::PLANNING_STACK_BYTES)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve { data, serve, .. } => {
                let (db, _engine) = open_for(&data, Some(&*serve))?;
                let lock = data.data_dir.join(".lock");
                let served = serve::run(db.clone(), *serve).await;
                if served.is_err() {
                    // A start that failed leaves no lock file behind. Removed while this
                    // process still holds the lock (`db`), so no other process's lock is lost.
                    let _ = std::fs::remove_file(lock);
                }
                drop(db);
                served
            }
            Command::Shell { data } => {
                let (_db, engine) = open(&data)?;
                shell::run(engine, &data.data_dir).await
            }
            Command::Sql { data, format, sql } => {
                let (_db, engine) = open(&data)?;
                output::run_script(&engine, &sql, format, false).await
            }
            Command::Backup {
                to,
                url,
                user,
                password,
                data_dir,
                cold_store,
                cold_store_endpoint,
            } => {
                let offline = data_dir.map(|data_dir| DataOptions {
                    data_dir,
                    durability: DurabilityArg::Periodic,
                    open_files_max: None,
                    cold_check_interval_ms: 0,
                    decoded_cache_mb: 64,
                    cold_store,
                    cold_store_endpoint,
                    cold_cache_mb: 10_240,
                    ttl_wall_clock: OnOff::On,
                    timestamp_future_ms_max: None,
                });
                let request = backup::BackupRequest {
                    to,
                    url,
                    user,
                    password,
                    offline,
                };
                backup::run(request).await
            }
            Command::Import {
                data,
                file,
                table,
                timestamp,
                partition_by,
                delimiter,
                atomicity,
                max_reported_errors,
                rejects,
            } => {
                let (db, _engine) = open(&data)?;
                let options = import::ImportOptions {
                    file,
                    table,
                    timestamp,
                    partition_by,
                    delimiter,
                    atomicity,
                    max_reported_errors,
                    rejects,
                };
                import::run(&db, options).await
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

//! `sundial-bench tsbs-queries`: runs TSBS query files, in the spirit of TSBS's
//! `tsbs_run_queries_*`, against any server that speaks HTTP `/exec` or PostgreSQL (Sundial,
//! QuestDB).
//!
//! ```text
//!  devops-<type>.<dialect>.sql ─▶ one query per line ─▶ N workers take the next query
//!                                  ─▶ GET /exec?count=false&query=... | PG Parse/Bind/Execute
//!  per file (= query type): min / median / mean / p99 / max latency, queries per second
//! ```
//!
//! Files run one after another, so each type's queries per second is its own. A failed query
//! is counted and its first error printed; the run goes on.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use tokio_postgres::NoTls;

use crate::load::HttpClient;

#[derive(clap::Args, Debug, Clone)]
pub struct TsbsQueryArgs {
    /// Query files (`devops-<type>.<dialect>.sql`, one statement per line).
    #[arg(long, value_delimiter = ',', required = true)]
    pub files: Vec<PathBuf>,
    /// `http` (`/exec`, as TSBS sends QuestDB's queries) or `pg` (extended protocol, each query
    /// parsed, bound and executed).
    #[arg(long, default_value = "http")]
    pub protocol: String,
    #[arg(long, default_value = "127.0.0.1:8812")]
    pub pg_addr: SocketAddr,
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub http_addr: SocketAddr,
    #[arg(long, default_value = "admin")]
    pub user: String,
    #[arg(long, default_value = "quest")]
    pub password: String,
    /// Concurrent workers.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Runs each file's queries this many times (the first round warms caches, as TSBS's
    /// runs over many queries do).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Name printed in the result lines.
    #[arg(long, default_value = "server")]
    pub label: String,
}

/// One query's outcome: its latency, or why it failed.
type Outcome = Result<Duration, String>;

pub fn run(args: TsbsQueryArgs) -> Result<(), BoxError> {
    for file in &args.files {
        let queries = read_queries(file)?;
        let queries: Vec<String> = (0..args.rounds.max(1))
            .flat_map(|_| queries.iter().cloned())
            .collect();
        let started = Instant::now();
        let outcomes = match args.protocol.as_str() {
            "http" => run_http(&args, &queries)?,
            "pg" => run_pg(&args, &queries)?,
            other => return Err(format!("unknown protocol '{other}'").into()),
        };
        report(&args, &query_type(file), outcomes, started.elapsed());
    }
    Ok(())
}

/// The statements of a query file: one per non-empty line, without the trailing `;`.
fn read_queries(file: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    Ok(text
        .lines()
        .map(|l| l.trim().trim_end_matches(';').trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// `devops-single-groupby-1-1-1.questdb.sql` is of type `single-groupby-1-1-1`.
fn query_type(file: &Path) -> String {
    let name = file
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let stem = name.split('.').next().unwrap_or(&name);
    stem.strip_prefix("devops-").unwrap_or(stem).to_string()
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Runs `queries` on `workers` threads, each taking the next query until none are left:
/// `connect` makes a worker's client, `send` sends one query with it and reads the answer.
fn on_workers<C>(
    workers: usize,
    queries: &[String],
    connect: impl Fn() -> Result<C, BoxError> + Sync,
    send: impl Fn(&C, &str) -> Result<(), String> + Sync,
) -> Result<Vec<Outcome>, BoxError> {
    let next = AtomicUsize::new(0);
    let worker = || -> Result<Vec<Outcome>, BoxError> {
        let client = connect()?;
        let mut outcomes = Vec::new();
        while let Some(sql) = queries.get(next.fetch_add(1, Ordering::Relaxed)) {
            let started = Instant::now();
            outcomes.push(send(&client, sql).map(|()| started.elapsed()));
        }
        Ok(outcomes)
    };
    std::thread::scope(|scope| {
        let running: Vec<_> = (0..workers.max(1)).map(|_| scope.spawn(worker)).collect();
        let mut outcomes = Vec::new();
        for done in running {
            match done.join() {
                Ok(done) => outcomes.extend(done?),
                Err(_) => return Err("a query worker panicked".into()),
            }
        }
        Ok(outcomes)
    })
}

fn run_http(args: &TsbsQueryArgs, queries: &[String]) -> Result<Vec<Outcome>, BoxError> {
    on_workers(
        args.workers,
        queries,
        || Ok(HttpClient::new(args.http_addr)),
        |client, sql| client.exec_with(sql, &[("count", "false")]),
    )
}

/// A PG worker's connection, with a runtime of its own that serves both the client and the
/// driver's connection task, so the runner adds no hand-off between threads to a round trip
/// (as TSBS's Go workers, which do their own socket I/O).
struct PgWorker {
    runtime: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

fn run_pg(args: &TsbsQueryArgs, queries: &[String]) -> Result<Vec<Outcome>, BoxError> {
    let config = crate::query::pg_config(args.pg_addr, &args.user, &args.password);
    let connect = || -> Result<PgWorker, BoxError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (client, connection) = runtime
            .block_on(tokio_postgres::connect(&config, NoTls))
            .map_err(crate::query::describe)?;
        runtime.spawn(connection);
        Ok(PgWorker { runtime, client })
    };
    let send = |worker: &PgWorker, sql: &str| {
        worker
            .runtime
            .block_on(read_all_rows(&worker.client, sql))
            .map_err(crate::query::describe)
    };
    on_workers(args.workers, queries, connect, send)
}

/// Prepares `sql` (extended protocol, no parameters), runs it and reads every row without
/// decoding it, as TSBS's runners do: rows are dropped as they arrive, never collected.
async fn read_all_rows(
    client: &tokio_postgres::Client,
    sql: &str,
) -> Result<(), tokio_postgres::Error> {
    let rows = client
        .query_raw(
            sql,
            std::iter::empty::<&(dyn tokio_postgres::types::ToSql + Sync)>(),
        )
        .await?;
    futures::pin_mut!(rows);
    while rows.try_next().await?.is_some() {}
    Ok(())
}

fn report(args: &TsbsQueryArgs, query_type: &str, outcomes: Vec<Outcome>, wall: Duration) {
    let mut ms: Vec<f64> = Vec::with_capacity(outcomes.len());
    let mut failed = 0;
    for outcome in &outcomes {
        match outcome {
            Ok(d) => ms.push(d.as_secs_f64() * 1e3),
            Err(e) => {
                if failed == 0 {
                    println!("error: label={} type={query_type}: {e}", args.label);
                }
                failed += 1;
            }
        }
    }
    ms.sort_by(f64::total_cmp);
    let n = ms.len();
    let at = |q: f64| {
        if n == 0 {
            0.0
        } else {
            ms[((n as f64 * q) as usize).min(n - 1)]
        }
    };
    let mean = if n == 0 {
        0.0
    } else {
        ms.iter().sum::<f64>() / n as f64
    };
    println!(
        "result: label={} protocol={} type={query_type} workers={} queries={n} failed={failed} \
         min_ms={:.2} median_ms={:.2} mean_ms={:.2} p99_ms={:.2} max_ms={:.2} qps={:.1}",
        args.label,
        args.protocol,
        args.workers,
        at(0.0),
        at(0.5),
        mean,
        at(0.99),
        ms.last().copied().unwrap_or(0.0),
        n as f64 / wall.as_secs_f64().max(1e-9)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_type_comes_from_the_file_name() {
        assert_eq!(
            query_type(Path::new("/x/devops-single-groupby-1-1-1.questdb.sql")),
            "single-groupby-1-1-1"
        );
        assert_eq!(query_type(Path::new("lastpoint.sql")), "lastpoint");
    }
}

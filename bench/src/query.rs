//! `sundial-bench query`: latency and throughput of short queries over PostgreSQL's protocol
//! (prepared statements) and HTTP `/exec`, with N concurrent clients, against any server that
//! speaks them (Sundial, QuestDB).
//!
//! `--setup` first loads the table the queries read: `--rows` rows sent over ILP/TCP
//! (`qps,sym=s<k> id=<i>i,price=<f> <ts>`), then waits until all are queryable.
//!
//! Each client runs one query after another for `--duration-s`, choosing the looked-up id at
//! random; the report gives queries per second and latency percentiles over all clients.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio_postgres::NoTls;

use crate::load::HttpClient;

#[derive(clap::Args, Debug, Clone)]
pub struct QueryArgs {
    /// `pg` (prepared statements) or `http` (`/exec`).
    #[arg(long, default_value = "pg")]
    pub protocol: String,
    #[arg(long, default_value = "127.0.0.1:8812")]
    pub pg_addr: SocketAddr,
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub http_addr: SocketAddr,
    #[arg(long, default_value = "127.0.0.1:9009")]
    pub ilp_addr: SocketAddr,
    #[arg(long, default_value = "admin")]
    pub user: String,
    #[arg(long, default_value = "quest")]
    pub password: String,
    /// Client counts to run, one after another.
    #[arg(long, value_delimiter = ',', default_value = "1,16,100")]
    pub clients: Vec<usize>,
    /// Seconds each client count runs.
    #[arg(long, default_value_t = 10)]
    pub duration_s: u64,
    /// Load the `qps` table first.
    #[arg(long)]
    pub setup: bool,
    /// Rows in the `qps` table (ids 0..rows).
    #[arg(long, default_value_t = 100_000)]
    pub rows: u64,
    /// The query; `$1` is a random id in 0..rows.
    #[arg(
        long,
        default_value = "SELECT timestamp, sym, price FROM qps WHERE id = $1"
    )]
    pub query: String,
    /// Name printed in the result lines.
    #[arg(long, default_value = "server")]
    pub label: String,
}

pub fn query(args: QueryArgs) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    if args.setup {
        setup(&args)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    for &clients in &args.clients {
        let latencies_us = match args.protocol.as_str() {
            "pg" => runtime.block_on(run_pg(&args, clients))?,
            "http" => run_http(&args, clients)?,
            other => return Err(format!("unknown protocol '{other}'").into()),
        };
        report(&args, clients, latencies_us);
    }
    Ok(())
}

fn report(args: &QueryArgs, clients: usize, mut latencies_us: Vec<u32>) {
    latencies_us.sort_unstable();
    let n = latencies_us.len();
    let at = |q: f64| {
        latencies_us
            .get(((n as f64 * q) as usize).min(n.saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    println!(
        "result: label={} protocol={} clients={clients} queries={n} qps={:.0} p50_us={} p99_us={} max_us={}",
        args.label,
        args.protocol,
        n as f64 / args.duration_s as f64,
        at(0.50),
        at(0.99),
        latencies_us.last().copied().unwrap_or(0)
    );
}

/// A deterministic per-client sequence of ids.
struct Ids(u64);

impl Ids {
    fn next(&mut self, rows: u64) -> i64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % rows.max(1)) as i64
    }
}

async fn run_pg(
    args: &QueryArgs,
    clients: usize,
) -> Result<Vec<u32>, Box<dyn std::error::Error + Send + Sync>> {
    let config = pg_config(args.pg_addr, &args.user, &args.password);
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (client, connection) = tokio_postgres::connect(&config, NoTls)
            .await
            .map_err(describe)?;
        tokio::spawn(connection);
        let statement = client.prepare(&args.query).await.map_err(describe)?;
        let stop = stop.clone();
        let rows = args.rows;
        tasks.push(tokio::spawn(async move {
            let mut ids = Ids(0x9E37_79B9_7F4A_7C15 ^ (c as u64 + 1));
            let mut latencies = Vec::with_capacity(1 << 16);
            while !stop.load(Ordering::Relaxed) {
                let id = ids.next(rows);
                let started = Instant::now();
                client.query(&statement, &[&id]).await.map_err(describe)?;
                latencies.push(started.elapsed().as_micros() as u32);
            }
            Ok::<_, String>(latencies)
        }));
    }
    tokio::time::sleep(Duration::from_secs(args.duration_s)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}

/// tokio-postgres's connection string for a server (Sundial's and QuestDB's database is `qdb`).
pub(crate) fn pg_config(addr: SocketAddr, user: &str, password: &str) -> String {
    format!(
        "host={} port={} user={user} password={password} dbname=qdb",
        addr.ip(),
        addr.port()
    )
}

/// A PostgreSQL error with the server's message, which `Display` leaves out.
pub(crate) fn describe(e: tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

fn run_http(
    args: &QueryArgs,
    clients: usize,
) -> Result<Vec<u32>, Box<dyn std::error::Error + Send + Sync>> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for c in 0..clients {
        let stop = stop.clone();
        let args = args.clone();
        threads.push(std::thread::spawn(move || {
            let client = HttpClient::new(args.http_addr);
            let mut ids = Ids(0x9E37_79B9_7F4A_7C15 ^ (c as u64 + 1));
            let mut latencies = Vec::with_capacity(1 << 16);
            while !stop.load(Ordering::Relaxed) {
                let sql = args.query.replace("$1", &ids.next(args.rows).to_string());
                let started = Instant::now();
                client.exec(&sql)?;
                latencies.push(started.elapsed().as_micros() as u32);
            }
            Ok::<_, String>(latencies)
        }));
    }
    std::thread::sleep(Duration::from_secs(args.duration_s));
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in threads {
        all.extend(t.join().map_err(|_| "client thread panicked")??);
    }
    Ok(all)
}

/// Sends the `qps` table over ILP and waits until every row is queryable.
fn setup(args: &QueryArgs) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    const START_NS: i64 = 1_704_067_200_000_000_000; // 2024-01-01
    let mut stream = std::io::BufWriter::with_capacity(1 << 20, TcpStream::connect(args.ilp_addr)?);
    for id in 0..args.rows {
        writeln!(
            stream,
            "qps,sym=s{} id={id}i,price={}.{} {}",
            id % 100,
            id % 1000,
            id % 7,
            START_NS + id as i64 * 1_000_000_000
        )?;
    }
    stream.flush()?;
    drop(stream);
    let http = HttpClient::new(args.http_addr);
    let deadline = Instant::now() + Duration::from_secs(120);
    while http.count("qps") != Some(args.rows) {
        if Instant::now() > deadline {
            return Err("the qps table did not reach its row count within 120 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

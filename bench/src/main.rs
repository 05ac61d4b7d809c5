//! # sundial-bench
//!
//! Benchmarks Sundial on this machine. `storage` measures the writing API and a parallel scan:
//!
//! ```text
//!  generate TSBS-cpu-shaped batches (untimed) ─▶ TableWriter::append/commit (timed: rows/s, MB/s)
//!  SELECT count(*), max(usage_user) FROM cpu WHERE usage_user > 90   (timed, 1 core and all cores)
//! ```
//!
//! Figures are reported, never asserted: this machine is noisy, so compare runs side by side.

mod analytics;
mod cold;
mod load;
mod query;
mod tsbs;
mod udp;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use clap::{Parser, Subcommand};
use sundial_query::{Engine, collect};
use sundial_storage::{ColumnType, Database, Durability, PartitionBy, StorageOptions, TableDef};

/// The allocator the server uses, for the in-process benchmarks; it also keeps the query
/// runners' per-row allocations (a PG driver's row objects) from weighing on their figures.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "Sundial benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Append TSBS-cpu-shaped rows through the writing API, then scan them.
    Storage {
        /// Rows to append.
        #[arg(long, default_value_t = 10_000_000)]
        rows: usize,
        /// Hosts (one row per host every 10 s).
        #[arg(long, default_value_t = 100)]
        hosts: usize,
        /// Rows per appended batch.
        #[arg(long, default_value_t = 100_000)]
        batch_rows: usize,
        /// Rows per commit.
        #[arg(long, default_value_t = 1_000_000)]
        commit_rows: usize,
        /// Data directory (emptied first).
        #[arg(long, default_value = "/tmp/sundial-bench")]
        data_dir: std::path::PathBuf,
        /// Scan repetitions (the median is reported).
        #[arg(long, default_value_t = 5)]
        scan_runs: usize,
    },
    /// Send an ILP file to a server (Sundial or QuestDB) over TCP or HTTP; time until queryable.
    Load(load::LoadArgs),
    /// Blast ILP over UDP at rising rates; report the share of rows that arrived.
    Udp(udp::UdpArgs),
    /// Short queries over PostgreSQL (prepared) or HTTP with N clients: QPS and latency.
    Query(query::QueryArgs),
    /// Run TSBS query files over HTTP or PostgreSQL: latency per query type.
    TsbsQueries(tsbs::TsbsQueryArgs),
    /// Run the analytics battery over PostgreSQL: medians, GB/s, answers checked.
    Analytics(analytics::AnalyticsArgs),
    /// Write a data directory's partitions as Parquet: bytes per point, conversion rate.
    Cold(cold::ColdArgs),
    /// This machine's memory read rate, on one thread and on all.
    Membw {
        /// Bytes summed.
        #[arg(long, default_value_t = 1 << 30)]
        bytes: usize,
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
}

const TAGS: [&str; 10] = [
    "hostname",
    "region",
    "datacenter",
    "rack",
    "os",
    "arch",
    "team",
    "service",
    "service_version",
    "service_environment",
];
const FIELDS: [&str; 10] = [
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "usage_irq",
    "usage_softirq",
    "usage_steal",
    "usage_guest",
    "usage_guest_nice",
];
const START_NS: i64 = 1_451_606_400_000_000_000; // 2016-01-01
const INTERVAL_NS: i64 = 10_000_000_000;

fn schema() -> Arc<Schema> {
    let mut fields = vec![Field::new(
        "timestamp",
        DataType::Timestamp(TimeUnit::Nanosecond, None),
        false,
    )];
    fields.extend(TAGS.iter().map(|t| Field::new(*t, DataType::Utf8, true)));
    fields.extend(FIELDS.iter().map(|f| Field::new(*f, DataType::Int64, true)));
    Arc::new(Schema::new(fields))
}

/// Rows `[first, first + n)`: row `r` is host `r % hosts` at `START + (r / hosts) * 10 s`.
fn make_batch(first: usize, n: usize, hosts: usize, seed: &mut u64) -> RecordBatch {
    let ts = TimestampNanosecondArray::from_iter_values(
        (first..first + n).map(|r| START_NS + (r / hosts) as i64 * INTERVAL_NS),
    );
    let mut columns: Vec<ArrayRef> = vec![Arc::new(ts)];
    for (k, tag) in TAGS.iter().enumerate() {
        let values = (first..first + n).map(|r| {
            let host = r % hosts;
            if k == 0 {
                format!("host_{host}")
            } else {
                format!("{tag}_{}", host % (3 + k))
            }
        });
        columns.push(Arc::new(StringArray::from_iter_values(values)));
    }
    for _ in FIELDS {
        let values = (0..n).map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed % 101) as i64
        });
        columns.push(Arc::new(Int64Array::from_iter_values(values)));
    }
    RecordBatch::try_new(schema(), columns).expect("batch")
}

fn dir_bytes(path: &std::path::Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            let p = e.path();
            total += if p.is_dir() {
                dir_bytes(&p)
            } else {
                e.metadata().map(|m| m.len()).unwrap_or(0)
            };
        }
    }
    total
}

async fn scan(
    engine: &Engine,
    sql: &str,
    runs: usize,
) -> Result<(Duration, String), Box<dyn std::error::Error>> {
    let mut times = Vec::new();
    let mut answer = String::new();
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let out = collect(engine.run(sql).await?).await?;
        times.push(started.elapsed());
        answer = arrow::util::pretty::pretty_format_batches(&out.batches)?.to_string();
    }
    times.sort();
    Ok((times[times.len() / 2], answer))
}

async fn storage(
    rows: usize,
    hosts: usize,
    batch_rows: usize,
    commit_rows: usize,
    data_dir: std::path::PathBuf,
    scan_runs: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let _ = std::fs::remove_dir_all(&data_dir);
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    let db = Database::open(&data_dir, options)?;
    let mut columns = vec![("timestamp".to_string(), ColumnType::Timestamp)];
    columns.extend(TAGS.iter().map(|t| (t.to_string(), ColumnType::Symbol)));
    columns.extend(FIELDS.iter().map(|f| (f.to_string(), ColumnType::Long)));
    let table = db.create_table(
        TableDef {
            name: "cpu".into(),
            columns,
            timestamp: Some("timestamp".into()),
            partition_by: PartitionBy::Day,
            indexed: Vec::new(),
            dedup_keys: Vec::new(),
            ttl: None,
            cold_after: None,
        },
        false,
    )?;
    eprintln!("generating {rows} rows ({hosts} hosts) ...");
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let batches: Vec<RecordBatch> = (0..rows)
        .step_by(batch_rows)
        .map(|first| make_batch(first, batch_rows.min(rows - first), hosts, &mut seed))
        .collect();
    let row_bytes = 8 + TAGS.len() * 4 + FIELDS.len() * 8;
    let mut writer = table.writer()?;
    let started = Instant::now();
    let mut since_commit = 0;
    for b in &batches {
        writer.append(b)?;
        since_commit += b.num_rows();
        if since_commit >= commit_rows {
            writer.commit()?;
            since_commit = 0;
        }
    }
    writer.commit()?;
    let append = started.elapsed().as_secs_f64();
    drop(writer);
    let disk = dir_bytes(&data_dir);
    println!(
        "append: {rows} rows in {append:.3} s = {:.2} M rows/s, {:.0} MB/s of column data ({row_bytes} B/row); {:.1} MB on disk",
        rows as f64 / append / 1e6,
        (rows * row_bytes) as f64 / append / 1e6,
        disk as f64 / 1e6
    );

    let engine = Engine::new(db.clone())?;
    let sql = "SELECT count(*), max(usage_user) FROM cpu WHERE usage_user > 90";
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    for partitions in [1, cores] {
        collect(
            engine
                .run(&format!(
                    "SET datafusion.execution.target_partitions = {partitions}"
                ))
                .await?,
        )
        .await?;
        let (median, answer) = scan(&engine, sql, scan_runs).await?;
        let secs = median.as_secs_f64();
        println!(
            "scan ({partitions} thread{}): median {:.1} ms = {:.0} M rows/s = {:.0} M rows/s per core; usage_user read at {:.2} GB/s per core",
            if partitions == 1 { "" } else { "s" },
            secs * 1e3,
            rows as f64 / secs / 1e6,
            rows as f64 / secs / 1e6 / partitions as f64,
            (rows * 8) as f64 / secs / 1e9 / partitions as f64
        );
        eprintln!("{answer}");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match Cli::parse().command {
        Command::Storage {
            rows,
            hosts,
            batch_rows,
            commit_rows,
            data_dir,
            scan_runs,
        } => storage(rows, hosts, batch_rows, commit_rows, data_dir, scan_runs).await,
        Command::Load(args) => {
            tokio::task::spawn_blocking(|| load::load(args)).await??;
            Ok(())
        }
        Command::Udp(args) => {
            tokio::task::spawn_blocking(|| udp::udp(args)).await??;
            Ok(())
        }
        Command::Query(args) => {
            tokio::task::spawn_blocking(|| query::query(args))
                .await?
                .map_err(|e| e.to_string())?;
            Ok(())
        }
        Command::TsbsQueries(args) => {
            tokio::task::spawn_blocking(|| tsbs::run(args))
                .await?
                .map_err(|e| e.to_string())?;
            Ok(())
        }
        Command::Analytics(args) => {
            tokio::task::spawn_blocking(|| analytics::run(args)).await??;
            Ok(())
        }
        Command::Cold(args) => cold::run(args),
        Command::Membw { bytes, threads } => {
            tokio::task::spawn_blocking(move || analytics::membw(bytes, threads)).await?;
            Ok(())
        }
    }
}

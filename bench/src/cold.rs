//! `cold`: writes every partition of a data directory's tables as Parquet with several encoding
//! and compression choices, and reports bytes per point (per table and per column type) and
//! the conversion rate.
//!
//! ```text
//!  data dir (server stopped) ─▶ per table, per partition: write_partition(variant) ─▶ files
//!  report: native bytes, Parquet bytes, bytes per point (rows x fields), bytes per value by
//!          column type, rows/s per core
//! ```
//!
//! A *point* is one field value, as TSBS and InfluxDB count them: rows times the columns that
//! are neither the designated timestamp nor SYMBOLs (tags).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use sundial_storage::{
    ColumnType, Database, Encodings, PageCompression, ParquetOptions, StorageOptions,
    write_partition,
};

#[derive(clap::Args)]
pub struct ColdArgs {
    /// A data directory (no server may hold it).
    #[arg(long)]
    data_dir: PathBuf,
    /// Where the Parquet files go (emptied first, removed after).
    #[arg(long, default_value = "/tmp/sundial-cold-bench")]
    out_dir: PathBuf,
    /// Only these tables (default: all).
    #[arg(long)]
    tables: Vec<String>,
}

struct Variant {
    name: &'static str,
    options: ParquetOptions,
}

fn variants() -> Vec<Variant> {
    let base = ParquetOptions::default();
    let with = |name, compression, encodings| Variant {
        name,
        options: ParquetOptions {
            compression,
            encodings,
            ..base
        },
    };
    vec![
        with(
            "time-series+zstd3",
            PageCompression::Zstd(3),
            Encodings::TimeSeries,
        ),
        with(
            "time-series+zstd9",
            PageCompression::Zstd(9),
            Encodings::TimeSeries,
        ),
        with(
            "time-series+lz4",
            PageCompression::Lz4,
            Encodings::TimeSeries,
        ),
        with(
            "time-series, none",
            PageCompression::None,
            Encodings::TimeSeries,
        ),
        with(
            "no-dictionary+zstd3",
            PageCompression::Zstd(3),
            Encodings::NoDictionary,
        ),
        with(
            "defaults+zstd3",
            PageCompression::Zstd(3),
            Encodings::Defaults,
        ),
    ]
}

fn dir_bytes(path: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

pub fn run(args: ColdArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db = Database::open(&args.data_dir, StorageOptions::default())?;
    let _ = std::fs::remove_dir_all(&args.out_dir);
    std::fs::create_dir_all(&args.out_dir)?;
    println!("# sundial-bench cold: {}", args.data_dir.display());
    for table in db.tables() {
        if !args.tables.is_empty()
            && !args
                .tables
                .iter()
                .any(|t| t.eq_ignore_ascii_case(&table.name()))
        {
            continue;
        }
        let snapshot = table.snapshot();
        let meta = snapshot.meta().clone();
        let rows = snapshot.row_count();
        let fields = meta
            .columns
            .iter()
            .enumerate()
            .filter(|(i, c)| {
                Some(*i) != meta.timestamp_index && c.column_type != ColumnType::Symbol
            })
            .count() as u64;
        let points = rows * fields;
        let native = dir_bytes(table.path());
        println!(
            "table {}: {rows} rows, {fields} fields, {points} points; native {:.1} MiB, {:.2} bytes/point",
            table.name(),
            native as f64 / 1048576.0,
            native as f64 / points.max(1) as f64
        );
        let mut keys: Vec<i64> = snapshot.partitions().iter().map(|p| p.key).collect();
        keys.dedup();
        for variant in variants() {
            let started = Instant::now();
            let mut bytes = 0;
            let mut by_column = vec![0u64; meta.columns.len()];
            for key in &keys {
                let path = args.out_dir.join(format!("{}-{key}.parquet", table.name()));
                let file = std::io::BufWriter::new(std::fs::File::create(&path)?);
                let written = write_partition(&snapshot, *key, file, &variant.options)?;
                bytes += written.bytes;
                for (total, b) in by_column.iter_mut().zip(&written.column_bytes) {
                    *total += b;
                }
                std::fs::remove_file(&path)?;
            }
            let seconds = started.elapsed().as_secs_f64();
            let mut by_type: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
            for (c, b) in meta.columns.iter().zip(&by_column) {
                let name = if Some(c.id) == meta.timestamp_column().map(|t| t.id) {
                    "designated timestamp"
                } else {
                    c.column_type.name()
                };
                let entry = by_type.entry(name).or_default();
                entry.0 += b;
                entry.1 += rows;
            }
            let types: Vec<String> = by_type
                .iter()
                .map(|(t, (b, values))| format!("{t} {:.3}", *b as f64 / (*values).max(1) as f64))
                .collect();
            println!(
                "result: table={} variant=\"{}\" parquet_mib={:.1} bytes_per_point={:.3} \
                 rows_per_s={:.0} bytes_per_value_by_type=\"{}\"",
                table.name(),
                variant.name,
                bytes as f64 / 1048576.0,
                bytes as f64 / points.max(1) as f64,
                rows as f64 / seconds.max(1e-9),
                types.join(", ")
            );
        }
    }
    let _ = std::fs::remove_dir_all(&args.out_dir);
    Ok(())
}

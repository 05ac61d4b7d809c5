//! `sundial import`: stream a CSV file into a table, with a progress bar on a terminal.
//! The CSV-to-table work is `sundial_http::load`, shared with HTTP `/imp`: rows are committed
//! through the table's sink (the command's own [`Sinks`], no server runs) in chunks of half the
//! storage's `uncommitted_bytes_max`. A file that fits in one chunk is imported whole or not at
//! all; a larger one is committed chunk by chunk, and a failure keeps the chunks before it.

use std::fs::File;
use std::io::{BufReader, IsTerminal};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use sundial_csv::{CsvOptions, CsvReader};
use sundial_http::load::{LoadOptions, csv_options, load};
use sundial_ingest::Sinks;
use sundial_query::{INSERT_PENDING_ROWS_MAX, InsertPath};
use sundial_storage::{Database, PartitionBy};

pub struct ImportOptions {
    pub file: PathBuf,
    pub table: String,
    pub timestamp: Option<String>,
    pub partition_by: Option<String>,
    pub delimiter: char,
}

const READ_BUFFER_BYTES: usize = 1 << 20;

pub async fn run(db: &Arc<Database>, o: ImportOptions) -> Result<(), String> {
    let started = Instant::now();
    let file = File::open(&o.file).map_err(|e| format!("cannot open {}: {e}", o.file.display()))?;
    let file_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    if !o.delimiter.is_ascii() {
        return Err("the delimiter must be a single ASCII character".into());
    }
    let partition_by = match &o.partition_by {
        Some(p) => PartitionBy::parse(p).ok_or_else(|| {
            format!("unknown partitioning '{p}'; use NONE, HOUR, DAY, WEEK, MONTH or YEAR")
        })?,
        None if o.timestamp.is_some() => PartitionBy::Day,
        None => PartitionBy::None,
    };
    let load_options = LoadOptions {
        table: o.table.clone(),
        timestamp: o.timestamp.clone(),
        partition_by,
        overwrite: false,
        create: true,
        column_types: Vec::new(),
        chunk_bytes: db.options().uncommitted_bytes_max / 2,
    };
    let options = csv_options(
        db,
        &load_options,
        CsvOptions {
            delimiter: o.delimiter as u8,
            timestamp_column: o.timestamp.clone(),
            ..CsvOptions::default()
        },
    );
    let input = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let mut reader =
        CsvReader::new(input, options).map_err(|e| format!("{}: {e}", o.file.display()))?;
    let bar = progress_bar(file_bytes);
    let inserts = InsertPath {
        sinks: Sinks::new(db.clone()),
        pending_rows_max: INSERT_PENDING_ROWS_MAX,
    };
    let report = load(&inserts, &mut reader, &load_options, |reader, rows| {
        if let Some(bar) = &bar {
            bar.set_position(reader.bytes_read());
            let rate = rows as f64 / started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("{rows} rows, {rate:.0} rows/s"));
        }
    })
    .map_err(|e| e.to_string())?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let seconds = started.elapsed().as_secs_f64();
    let bad_values: u64 = report.columns.iter().map(|c| c.errors).sum();
    let rows = report.rows_imported;
    eprintln!(
        "imported {rows} rows into '{}' in {seconds:.2} s ({:.0} rows/s); {} rows rejected, {bad_values} values unparseable (stored as NULL)",
        report.table,
        rows as f64 / seconds.max(1e-9),
        report.rows_rejected
    );
    Ok(())
}

fn progress_bar(total_bytes: u64) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(total_bytes);
    let style = ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {msg} ETA {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    Some(bar)
}

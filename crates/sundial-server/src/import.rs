//! `sundial import`: stream a CSV file into a table, with a progress bar on a terminal.
//! The CSV-to-table work is `sundial_http::load`, shared with HTTP `/imp`: rows are committed
//! through the table's sink (the command's own [`Sinks`], no server runs) in chunks of half the
//! storage's `uncommitted_bytes_max`. A file that fits in one chunk is imported whole or not at
//! all; a larger one is committed chunk by chunk, and a failure keeps the chunks before it.
//!
//! Bad values follow `--atomicity` (default `skipRow`: the row is dropped and reported, so
//! nothing is silently NULLed; `skipCol` stores NULL; `abort` stops at the first, naming line,
//! column and value). The first `--max-reported-errors` refused rows are printed with their
//! line and reason; `--rejects FILE` streams every one of them into a CSV file (line, action,
//! column, reason, record), so nothing is held in memory for them. The first line must be a
//! header row: one that looks like data, or has empty, duplicate or invalid names, is an error
//! that says so.

use std::fs::File;
use std::io::{BufReader, BufWriter, IsTerminal};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use sundial_csv::{Atomicity, CsvOptions, CsvReader, RejectSink, RejectsWriter};
use sundial_http::load::{IMPORT_RECORD_BYTES_MAX, LoadOptions, csv_options, load};
use sundial_ingest::Sinks;
use sundial_query::{INSERT_PENDING_ROWS_MAX, InsertPath};
use sundial_storage::{Database, PartitionBy};

pub struct ImportOptions {
    pub file: PathBuf,
    pub table: String,
    pub timestamp: Option<String>,
    pub partition_by: Option<String>,
    pub delimiter: char,
    pub atomicity: Atomicity,
    pub max_reported_errors: usize,
    pub rejects: Option<PathBuf>,
}

/// `--atomicity`: `skipRow`, `skipCol` or `abort` (case-insensitive; QuestDB's 1, 2, 0 too).
pub fn parse_atomicity(s: &str) -> Result<Atomicity, String> {
    Atomicity::parse(s).ok_or_else(|| format!("'{s}' is not one of skipRow, skipCol, abort"))
}

type Rejects = Arc<Mutex<Option<RejectsWriter<BufWriter<File>>>>>;

/// Opens the rejects file and a sink that streams every rejection into it.
fn rejects_sink(path: &std::path::Path) -> Result<(Rejects, RejectSink), String> {
    let file = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let writer = RejectsWriter::new(BufWriter::new(file))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let shared: Rejects = Arc::new(Mutex::new(Some(writer)));
    let sink_side = shared.clone();
    let shown = path.display().to_string();
    let sink: RejectSink = Box::new(move |rejection| {
        let mut guard = sink_side.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_mut() {
            Some(writer) => writer
                .write(rejection)
                .map_err(|e| std::io::Error::new(e.kind(), format!("cannot write {shown}: {e}"))),
            None => Ok(()),
        }
    });
    Ok((shared, sink))
}

/// Flushes the rejects file, if any.
fn finish_rejects(rejects: Option<&Rejects>, path: Option<&PathBuf>) -> Result<(), String> {
    let (Some(rejects), Some(path)) = (rejects, path) else {
        return Ok(());
    };
    let writer = rejects.lock().unwrap_or_else(|p| p.into_inner()).take();
    match writer {
        Some(w) => w
            .finish()
            .map(drop)
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => Ok(()),
    }
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
            atomicity: o.atomicity,
            max_reported_errors: o.max_reported_errors,
            max_record_bytes: IMPORT_RECORD_BYTES_MAX,
            require_header: true,
            ..CsvOptions::default()
        },
    );
    let (rejects, sink) = match &o.rejects {
        Some(path) => {
            let (rejects, sink) = rejects_sink(path)?;
            (Some(rejects), Some(sink))
        }
        None => (None, None),
    };
    let input = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let mut reader = match CsvReader::with_reject_sink(input, options, sink) {
        Ok(reader) => reader,
        Err(e) => {
            finish_rejects(rejects.as_ref(), o.rejects.as_ref())?;
            return Err(format!("{}: {e}", o.file.display()));
        }
    };
    let bar = progress_bar(file_bytes);
    let inserts = InsertPath {
        sinks: Sinks::new(db.clone()),
        pending_rows_max: INSERT_PENDING_ROWS_MAX,
    };
    let loaded = load(&inserts, &mut reader, &load_options, |reader, rows| {
        if let Some(bar) = &bar {
            bar.set_position(reader.bytes_read());
            let rate = rows as f64 / started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("{rows} rows, {rate:.0} rows/s"));
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let flushed = finish_rejects(rejects.as_ref(), o.rejects.as_ref());
    let report = loaded.map_err(|e| format!("{}: {e}", o.file.display()))?;
    flushed?;
    for rejection in &report.errors {
        eprintln!("{rejection}");
    }
    let unlisted = report.errors_total - report.errors.len() as u64;
    if unlisted > 0 {
        match &o.rejects {
            Some(path) => eprintln!(
                "... and {unlisted} more; all {} are in {}",
                report.errors_total,
                path.display()
            ),
            None => eprintln!("... and {unlisted} more (--rejects FILE lists them all)"),
        }
    }
    for fallback in &report.fallbacks {
        eprintln!("warning: {fallback}");
    }
    let seconds = started.elapsed().as_secs_f64();
    let rows = report.rows_imported;
    let nulled = report.errors_total.saturating_sub(report.rows_rejected);
    eprintln!(
        "imported {rows} rows into '{}' in {seconds:.2} s ({:.0} rows/s); {} rows rejected, {nulled} values stored as NULL (--atomicity {})",
        report.table,
        rows as f64 / seconds.max(1e-9),
        report.rows_rejected,
        o.atomicity
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

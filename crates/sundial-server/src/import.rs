//! `sundial import`: stream a CSV file into a table with one commit (more only when
//! out-of-order rows outgrow the writer's memory bound), with a progress bar on a terminal.

use std::fs::File;
use std::io::{BufReader, IsTerminal};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use sundial_csv::{CsvOptions, CsvReader};
use sundial_query::conform;
use sundial_storage::{ColumnType, Database, PartitionBy, Table, TableDef};

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
    let options = CsvOptions {
        delimiter: o.delimiter as u8,
        timestamp_column: o.timestamp.clone(),
        ..CsvOptions::default()
    };
    let mut reader = CsvReader::new(BufReader::with_capacity(READ_BUFFER_BYTES, file), options)
        .map_err(|e| format!("{}: {e}", o.file.display()))?;
    let table = table_for(db, &o, &reader)?;
    let mut writer = table.writer().map_err(|e| e.to_string())?;
    let meta = writer.meta();
    let bar = progress_bar(file_bytes);
    let commit_bytes = db.options().uncommitted_bytes_max / 2;
    let mut rows = 0u64;
    while let Some(batch) = reader.next_batch().map_err(|e| e.to_string())? {
        let batch = conform(&batch, &meta).map_err(|e| e.to_string())?;
        writer.append(&batch).map_err(|e| e.to_string())?;
        rows += batch.num_rows() as u64;
        if writer.pending_bytes() > commit_bytes {
            writer.commit().map_err(|e| e.to_string())?;
        }
        if let Some(bar) = &bar {
            bar.set_position(reader.bytes_read());
            let rate = rows as f64 / started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("{rows} rows, {rate:.0} rows/s"));
        }
    }
    writer.commit().map_err(|e| e.to_string())?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let stats = reader.stats();
    let seconds = started.elapsed().as_secs_f64();
    let bad_values: u64 = stats.column_errors.iter().sum();
    eprintln!(
        "imported {rows} rows into '{}' in {seconds:.2} s ({:.0} rows/s); {} rows rejected, {bad_values} values unparseable (stored as NULL)",
        meta.name,
        rows as f64 / seconds.max(1e-9),
        stats.rows_rejected
    );
    Ok(())
}

fn table_for<R: std::io::Read>(
    db: &Arc<Database>,
    o: &ImportOptions,
    reader: &CsvReader<R>,
) -> Result<Arc<Table>, String> {
    if let Some(table) = db.table(&o.table) {
        return Ok(table);
    }
    let mut columns = Vec::new();
    for field in reader.schema().fields() {
        let column_type = ColumnType::from_arrow(field.data_type()).ok_or_else(|| {
            format!(
                "column '{}' has unsupported type {}",
                field.name(),
                field.data_type()
            )
        })?;
        columns.push((field.name().clone(), column_type));
    }
    let partition_by = match &o.partition_by {
        Some(p) => PartitionBy::parse(p).ok_or_else(|| {
            format!("unknown partitioning '{p}'; use NONE, HOUR, DAY, WEEK, MONTH or YEAR")
        })?,
        None if o.timestamp.is_some() => PartitionBy::Day,
        None => PartitionBy::None,
    };
    let def = TableDef {
        name: o.table.clone(),
        columns,
        timestamp: o.timestamp.clone(),
        partition_by,
    };
    db.create_table(def, false).map_err(|e| e.to_string())
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

//! CSV into a table: the one implementation behind HTTP `/imp` and `sundial import`.
//!
//! ```text
//!  csv_options() ── an existing table's column types decide how its columns are parsed
//!        │
//!  CsvReader (sundial-csv, streaming) ──▶ load(): table_for() creates / replaces the table
//!        └── batches ─▶ conform (casts to the table's types) ─▶ BulkLoad (sundial-ingest)
//!                          one commit through the table's sink per `chunk_bytes` of rows,
//!                          the rest at the end; an error discards the uncommitted chunk
//! ```
//!
//! Invariants: at most `chunk_bytes` of rows (plus one batch) are held in memory; the table's
//! writer is only held by the sink during each chunk's commit, so ILP senders and INSERTs to
//! the same table commit between the chunks of a long load. A file whose rows fit in one chunk
//! loads atomically (all or nothing); a larger one is committed chunk by chunk, and a failure
//! keeps the chunks committed before it.
//!
//! It lives here rather than in sundial-csv because it needs storage and the query layer's
//! `conform`, which sundial-csv deliberately does not depend on.

use std::io::Read;
use std::sync::Arc;

use sundial_csv::{ColumnFallback, ColumnKind, CsvOptions, CsvReader, Rejection};
use sundial_ingest::IngestError;
use sundial_query::{InsertPath, conform};
use sundial_storage::{ColumnType, Database, PartitionBy, Table, TableDef, TableMeta};

use crate::error::Error;

/// Longest CSV record `/imp` and `sundial import` read (`CsvOptions::max_record_bytes`): a
/// longer one (a file without line breaks, an unterminated quote) stops the load with an error
/// naming its line instead of being buffered.
pub const IMPORT_RECORD_BYTES_MAX: usize = 4 << 20;

/// Where and how rows go.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub table: String,
    /// Designated timestamp of a table this load creates.
    pub timestamp: Option<String>,
    /// Partitioning of a table this load creates.
    pub partition_by: PartitionBy,
    /// Replace an existing table: drop it and create it anew from the file's columns. (Not
    /// atomic: should the load then fail, the table stays, empty.)
    pub overwrite: bool,
    /// Create the table when it does not exist (else that is an error).
    pub create: bool,
    /// SQL types of columns of a table this load creates, by column name, where the file's
    /// detected type is not wanted (`INT`, `FLOAT`, `DATE`, ... of `/imp`'s `schema`).
    pub column_types: Vec<(String, ColumnType)>,
    /// Rows are committed once this many bytes of them (Arrow memory) are gathered: the
    /// bound on what a load holds in memory, and on what a failure discards.
    pub chunk_bytes: usize,
}

/// What a load did, per column too.
#[derive(Debug, Clone)]
pub struct LoadReport {
    pub table: String,
    /// Whether the file's first line was its header.
    pub header: bool,
    pub rows_imported: u64,
    /// Lines dropped: a wrong number of fields, or (under `skipRow`) a value that does not parse.
    pub rows_rejected: u64,
    pub partition_by: PartitionBy,
    pub timestamp: Option<String>,
    pub columns: Vec<ColumnReport>,
    /// Rows skipped and values NULLed, in all.
    pub errors_total: u64,
    /// The first of them (`CsvOptions::max_reported_errors`), with line numbers and reasons.
    pub errors: Vec<Rejection>,
    /// Columns detection left as text although most of their values are typed, and why.
    pub fallbacks: Vec<ColumnFallback>,
}

#[derive(Debug, Clone)]
pub struct ColumnReport {
    pub name: String,
    pub column_type: ColumnType,
    /// Values that did not parse as the column's type.
    pub errors: u64,
}

/// Bytes a value of the type takes (QuestDB's column `size`); -1 for variable-size types.
pub fn type_size(t: ColumnType) -> i64 {
    match t {
        ColumnType::Boolean | ColumnType::Byte => 1,
        ColumnType::Short => 2,
        ColumnType::Int | ColumnType::Float | ColumnType::Symbol => 4,
        ColumnType::Long | ColumnType::Double | ColumnType::Timestamp | ColumnType::Date => 8,
        ColumnType::Uuid => 16,
        ColumnType::Varchar | ColumnType::Binary => -1,
    }
}

/// Reader settings for loading into `load.table`: when it exists (and is not being replaced),
/// its column types decide how the file's columns of the same names are parsed, and a file
/// without a header names its columns after the table's.
pub fn csv_options(db: &Database, load: &LoadOptions, mut csv: CsvOptions) -> CsvOptions {
    if load.overwrite {
        return csv;
    }
    if let Some(table) = db.table(&load.table) {
        let meta = table.meta();
        for column in &meta.columns {
            csv.type_overrides.push((
                column.name.clone(),
                ColumnKind::for_column_type(column.column_type),
            ));
        }
        csv.timestamp_column = None;
        csv.default_names = meta.columns.iter().map(|c| c.name.clone()).collect();
        csv.lenient_overrides = true;
    }
    csv
}

/// Streams every row of `reader` into the table through its sink (`inserts`); `progress` is
/// told after each batch (rows so far). Commits every `chunk_bytes` of rows and at the end; on
/// error, what was committed before stays (nothing, when the file fits in one chunk).
pub fn load<R: Read>(
    inserts: &InsertPath,
    reader: &mut CsvReader<R>,
    options: &LoadOptions,
    mut progress: impl FnMut(&CsvReader<R>, u64),
) -> Result<LoadReport, Error> {
    let table = table_for(inserts.sinks.db(), reader, options)?;
    let meta = table.meta();
    check_columns(reader, &meta)?;
    let mut bulk = inserts
        .sinks
        .bulk(&table, options.chunk_bytes, inserts.pending_rows_max);
    let mut rows = 0u64;
    while let Some(batch) = reader.next_batch()? {
        let batch = conform(&batch, &meta)?;
        rows += batch.num_rows() as u64;
        bulk.push(batch).map_err(ingest_error)?;
        progress(reader, rows);
    }
    bulk.finish().map_err(ingest_error)?;
    Ok(report(reader, &meta, rows))
}

/// Every column of the file must be one of the table's.
fn check_columns<R: Read>(reader: &CsvReader<R>, meta: &TableMeta) -> Result<(), Error> {
    for field in reader.schema().fields() {
        if meta.column_index(field.name()).is_none() {
            return Err(Error::BadRequest(format!(
                "column '{}' of the file is not in table '{}'",
                field.name(),
                meta.name
            )));
        }
    }
    Ok(())
}

fn ingest_error(e: IngestError) -> Error {
    Error::from(e.into_storage())
}

fn report<R: Read>(reader: &CsvReader<R>, meta: &TableMeta, rows: u64) -> LoadReport {
    let stats = reader.stats();
    let columns = reader
        .schema()
        .fields()
        .iter()
        .enumerate()
        .map(|(i, field)| ColumnReport {
            name: field.name().clone(),
            column_type: meta
                .column_index(field.name())
                .map_or(ColumnType::Varchar, |c| meta.columns[c].column_type),
            errors: stats.column_errors.get(i).copied().unwrap_or(0),
        })
        .collect();
    LoadReport {
        table: meta.name.clone(),
        header: reader.has_header(),
        rows_imported: rows,
        rows_rejected: stats.rows_rejected,
        partition_by: meta.partition_by,
        timestamp: meta.timestamp_column().map(|c| c.name.clone()),
        columns,
        errors_total: stats.errors_total,
        errors: stats.errors.clone(),
        fallbacks: reader.fallbacks().to_vec(),
    }
}

/// The table to load into: the existing one, or a new one with the file's columns.
fn table_for<R: Read>(
    db: &Arc<Database>,
    reader: &CsvReader<R>,
    options: &LoadOptions,
) -> Result<Arc<Table>, Error> {
    if let Some(table) = db.table(&options.table) {
        if !options.overwrite {
            return Ok(table);
        }
        db.drop_table(&options.table)?;
    } else if !options.create {
        return Err(Error::BadRequest(format!(
            "table '{}' does not exist (create=false)",
            options.table
        )));
    }
    let schema = reader.schema();
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let declared = options
            .column_types
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(field.name()))
            .map(|(_, t)| *t);
        let column_type = match declared.or_else(|| ColumnType::from_arrow(field.data_type())) {
            Some(t) => t,
            None => {
                return Err(Error::Internal(format!(
                    "column '{}' has unsupported type {}",
                    field.name(),
                    field.data_type()
                )));
            }
        };
        columns.push((field.name().clone(), column_type));
    }
    // The designated timestamp as the file spells it.
    let timestamp = options.timestamp.as_ref().map(|ts| {
        columns
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(ts))
            .map_or_else(|| ts.clone(), |(name, _)| name.clone())
    });
    let def = TableDef {
        name: options.table.clone(),
        columns,
        timestamp,
        partition_by: options.partition_by,
        indexed: Vec::new(),
        dedup_keys: Vec::new(),
        ttl: None,
        cold_after: None,
    };
    Ok(db.create_table(def, false)?)
}

#[cfg(test)]
mod tests {
    use sundial_csv::Atomicity;
    use sundial_ingest::Sinks;
    use sundial_storage::StorageOptions;

    use super::*;

    fn inserts() -> (tempfile::TempDir, InsertPath) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), StorageOptions::default()).unwrap();
        let inserts = InsertPath {
            sinks: Sinks::new(db),
            pending_rows_max: 1000,
        };
        (dir, inserts)
    }

    /// `rows` lines `ts,v` (one second apart); line `bad` (1-based, 0: none) has a bad `v`.
    fn csv(rows: usize, bad: usize) -> String {
        let mut text = String::from("ts,v\n");
        for i in 1..=rows {
            let v = if i == bad {
                "x".to_string()
            } else {
                i.to_string()
            };
            text.push_str(&format!("2024-01-01T00:00:{:02}Z,{v}\n", i % 60));
        }
        text
    }

    fn run(inserts: &InsertPath, text: &str, chunk_bytes: usize) -> Result<LoadReport, Error> {
        let options = LoadOptions {
            table: "t".into(),
            timestamp: Some("ts".into()),
            partition_by: PartitionBy::Day,
            overwrite: false,
            create: true,
            column_types: Vec::new(),
            chunk_bytes,
        };
        let csv = CsvOptions {
            has_header: true,
            batch_rows: 10,
            timestamp_column: Some("ts".into()),
            atomicity: Atomicity::Abort,
            ..CsvOptions::default()
        };
        let csv = csv_options(inserts.sinks.db(), &options, csv);
        let mut reader = CsvReader::new(text.as_bytes(), csv).map_err(Error::from)?;
        load(inserts, &mut reader, &options, |_, _| {})
    }

    fn table_rows(inserts: &InsertPath) -> (u64, u64) {
        let snapshot = inserts.sinks.db().table("t").unwrap().snapshot();
        (snapshot.row_count(), snapshot.seq())
    }

    #[test]
    fn a_file_within_one_chunk_is_one_commit_and_all_or_nothing() {
        let (_dir, inserts) = inserts();
        assert_eq!(
            run(&inserts, &csv(50, 0), usize::MAX)
                .unwrap()
                .rows_imported,
            50
        );
        let (rows, seq) = table_rows(&inserts);
        assert_eq!(rows, 50);
        assert!(run(&inserts, &csv(50, 45), usize::MAX).is_err());
        assert_eq!(table_rows(&inserts), (rows, seq));
    }

    #[test]
    fn a_larger_file_commits_chunk_by_chunk_and_keeps_them_on_error() {
        let (_dir, inserts) = inserts();
        // Every batch of 10 rows fills a chunk.
        assert_eq!(run(&inserts, &csv(50, 0), 1).unwrap().rows_imported, 50);
        let (rows, first_seq) = table_rows(&inserts);
        assert_eq!(rows, 50);
        // The bad value is in the fifth batch: the four before it stay.
        assert!(run(&inserts, &csv(50, 45), 1).is_err());
        let (rows, seq) = table_rows(&inserts);
        assert_eq!(rows, 90);
        assert_eq!(seq, first_seq + 4);
    }
}

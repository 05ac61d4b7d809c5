//! COPY FROM STDIN: the client's rows, through the CSV reader, into the table's sink.
//!
//! ```text
//!  session (I/O runtime)                     loader (blocking thread)
//!  CopyData ─▶ bounded channel of chunks ─▶ CopyInput: Read ── Decoder ─▶ canonical CSV
//!  CopyDone ─▶ Chunk::Done                        │
//!  CopyFail ─▶ channel dropped                    ▼
//!                                           CsvReader (types forced to the columns', Abort)
//!                                                 │ batches
//!                                                 ▼
//!                     fit ─▶ conform ─▶ BulkLoad (sundial-ingest): one commit through the
//!                                       table's sink per `chunk_bytes` of rows, the rest at
//!                                       CopyDone
//! ```
//!
//! Invariants: at most [`CHANNEL_CHUNKS`] chunks wait between the session and the loader, and
//! the loader holds at most one chunk of rows (half the storage's `uncommitted_bytes_max`) plus
//! one batch, so a COPY of any size streams in bounded memory. The table's writer is held only
//! by the sink during a commit, so ILP senders and INSERTs to the table commit between the
//! chunks of a long COPY. A COPY whose rows fit in one chunk is atomic: nothing is committed
//! unless the input ended with CopyDone and every row was good. A larger one is committed chunk
//! by chunk; an error (a bad row, CopyFail, a cancel) discards the uncommitted chunk and keeps
//! the chunks committed before it.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow::array::{Array, ArrayRef, AsArray, LargeBinaryBuilder, RecordBatch};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit, TimestampNanosecondType};
use sundial_csv::{Atomicity, ColumnKind, CsvError, CsvOptions, CsvReader};
use sundial_ingest::IngestError;
use sundial_query::copy::{CopyFormat, CopyOptions};
use sundial_query::text::{Fraction, push_timestamp};
use sundial_query::{InsertPath, QueryError};
use sundial_storage::{ColumnType, Database, Table, timestamp_in_range};
use tokio::sync::mpsc;

use crate::copy_decode::{
    BinaryDecoder, CsvDecoder, Decoder, InputError, Spelling, Target, TextDecoder,
};
use crate::error::PgError;

/// CopyData messages waiting for the loader. Each holds at most the largest message the
/// server accepts.
pub const CHANNEL_CHUNKS: usize = 8;
/// Rows per batch handed to the table writer.
const BATCH_ROWS: usize = 16_384;

/// What the session sends the loader.
pub enum Chunk {
    Data(Vec<u8>),
    /// CopyDone: the input is complete. The channel closing without it means CopyFail.
    Done,
}

/// A COPY FROM's destination, resolved before CopyInResponse.
pub struct CopyPlan {
    pub table: Arc<Table>,
    /// The table's name as stored, for messages.
    pub table_name: String,
    /// The columns filled, in input order, with the names the table spells them with.
    pub columns: Vec<(String, ColumnType)>,
    pub options: CopyOptions,
}

impl CopyPlan {
    /// Looks up the table and the named columns (all of them, in table order, when none are
    /// named).
    pub fn resolve(
        db: &Database,
        table: &str,
        names: &[String],
        options: CopyOptions,
    ) -> Result<CopyPlan, PgError> {
        let table = db
            .table(table)
            .ok_or_else(|| PgError::UndefinedTable(table.to_string()))?;
        let meta = table.meta();
        let columns = if names.is_empty() {
            meta.columns
                .iter()
                .map(|c| (c.name.clone(), c.column_type))
                .collect()
        } else {
            let mut columns: Vec<(String, ColumnType)> = Vec::with_capacity(names.len());
            for name in names {
                let column = meta
                    .columns
                    .iter()
                    .find(|c| c.name == *name)
                    .or_else(|| {
                        meta.columns
                            .iter()
                            .find(|c| c.name.eq_ignore_ascii_case(name))
                    })
                    .ok_or_else(|| {
                        PgError::UndefinedColumn(format!(
                            "column \"{name}\" of relation \"{}\" does not exist",
                            meta.name
                        ))
                    })?;
                if columns.iter().any(|(n, _)| *n == column.name) {
                    return Err(PgError::DuplicateColumn(column.name.clone()));
                }
                columns.push((column.name.clone(), column.column_type));
            }
            columns
        };
        Ok(CopyPlan {
            table_name: meta.name.clone(),
            table,
            columns,
            options,
        })
    }

    fn decoder(&self, field_bytes_max: usize) -> Decoder {
        let targets: Vec<Target> = self
            .columns
            .iter()
            .map(|(name, t)| Target {
                name: name.clone(),
                spelling: spelling(*t),
            })
            .collect();
        let o = &self.options;
        match o.format {
            CopyFormat::Text => Decoder::Text(TextDecoder::new(
                targets,
                o.delimiter,
                &o.null,
                o.header,
                field_bytes_max,
            )),
            CopyFormat::Csv => Decoder::Csv(CsvDecoder::new(
                targets,
                o.delimiter,
                o.quote,
                o.escape,
                &o.null,
                o.header,
                field_bytes_max,
            )),
            CopyFormat::Binary => Decoder::Binary(BinaryDecoder::new(targets, field_bytes_max)),
        }
    }

    /// The reader's options: no header (the decoder dropped it), every column's type forced
    /// (so nothing is sampled or guessed), and the first bad value fails the COPY.
    fn csv_options(&self) -> CsvOptions {
        CsvOptions {
            delimiter: b',',
            has_header: false,
            infer_rows: 0,
            batch_rows: BATCH_ROWS,
            timestamp_column: None,
            type_overrides: self
                .columns
                .iter()
                .enumerate()
                .map(|(i, (_, t))| (format!("f{i}"), ColumnKind::for_column_type(*t)))
                .collect(),
            atomicity: Atomicity::Abort,
            ..CsvOptions::default()
        }
    }

    /// Renames the reader's columns to the table's and converts what `conform` would convert
    /// lossily: narrower integers and timestamps are range-checked, `bytea` text is decoded.
    /// `first_line` is the input line of the batch's first row, for messages.
    fn fit(&self, batch: &RecordBatch, first_line: u64) -> Result<RecordBatch, PgError> {
        let mut fields = Vec::with_capacity(self.columns.len());
        let mut arrays = Vec::with_capacity(self.columns.len());
        for (i, (name, column_type)) in self.columns.iter().enumerate() {
            let array = batch.column(i);
            self.check_time_range(array, name, first_line)?;
            let array = match column_type {
                ColumnType::Byte | ColumnType::Short | ColumnType::Int => {
                    narrow(array, *column_type, name)?
                }
                ColumnType::Binary => bytea(array, name)?,
                _ => array.clone(),
            };
            fields.push(Field::new(name, array.data_type().clone(), true));
            arrays.push(array);
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
            .map_err(|e| PgError::Internal(format!("COPY batch: {e}")))
    }

    /// Rejects a timestamp a table cannot hold (SQLSTATE 22008), naming it and its line.
    fn check_time_range(
        &self,
        array: &ArrayRef,
        name: &str,
        first_line: u64,
    ) -> Result<(), PgError> {
        let DataType::Timestamp(TimeUnit::Nanosecond, _) = array.data_type() else {
            return Ok(());
        };
        let values = array.as_primitive::<TimestampNanosecondType>();
        let outside = values
            .iter()
            .enumerate()
            .find_map(|(row, v)| v.filter(|ns| !timestamp_in_range(*ns)).map(|ns| (row, ns)));
        let Some((row, nanos)) = outside else {
            return Ok(());
        };
        let mut shown = Vec::new();
        push_timestamp(&mut shown, nanos, b' ', Fraction::TrimmedMicros);
        let shown = String::from_utf8_lossy(&shown);
        Err(PgError::CopyRange {
            message: crate::types::timestamp_overflow_message(&shown),
            context: format!(
                "{}, column {name}: \"{shown}\"",
                self.context(first_line + row as u64)
            ),
        })
    }

    fn context(&self, line: u64) -> String {
        format!("COPY {}, line {line}", self.table_name)
    }

    /// The reader's error as PostgreSQL words it; `header_lines` turns the reader's line
    /// numbers (data only) into the input's.
    fn csv_error(&self, e: CsvError, header_lines: u64) -> PgError {
        match e {
            CsvError::Io(io) => self.io_error(io),
            CsvError::BadValue {
                line,
                column,
                value,
                problem,
                ..
            } => {
                let index = column
                    .strip_prefix('f')
                    .and_then(|i| i.parse::<usize>().ok())
                    .unwrap_or(0);
                let (name, column_type) = self
                    .columns
                    .get(index)
                    .cloned()
                    .unwrap_or((column, ColumnType::Varchar));
                let context = format!(
                    "{}, column {name}: \"{value}\"",
                    self.context(line + header_lines)
                );
                if matches!(column_type, ColumnType::Timestamp | ColumnType::Date)
                    && (problem == sundial_csv::ValueProblem::OutOfRange
                        || crate::types::is_timestamp_beyond_nanos(&value))
                {
                    return PgError::CopyRange {
                        message: crate::types::timestamp_overflow_message(&value),
                        context,
                    };
                }
                PgError::CopyValue {
                    message: format!(
                        "invalid input syntax for type {}: \"{value}\"",
                        pg_type_name(column_type)
                    ),
                    context: format!(
                        "{}, column {name}: \"{value}\"",
                        self.context(line + header_lines)
                    ),
                }
            }
            CsvError::Malformed { line, message } => PgError::CopyFormat {
                message,
                context: self.context(line + header_lines),
            },
            other => PgError::Internal(format!("COPY: {other}")),
        }
    }

    fn io_error(&self, e: io::Error) -> PgError {
        match e.into_inner().map(|inner| inner.downcast::<InputError>()) {
            Some(Ok(input)) => self.input_error(*input),
            Some(Err(other)) => PgError::Internal(format!("COPY input: {other}")),
            None => PgError::Internal("COPY input failed".into()),
        }
    }

    fn input_error(&self, e: InputError) -> PgError {
        match e {
            InputError::Format { line, message } => PgError::CopyFormat {
                message,
                context: self.context(line),
            },
            InputError::Value {
                line,
                column,
                message,
            } => PgError::CopyValue {
                message,
                context: format!("{}, column {column}", self.context(line)),
            },
            InputError::Range {
                line,
                column,
                message,
            } => PgError::CopyRange {
                message,
                context: format!("{}, column {column}", self.context(line)),
            },
            InputError::Aborted => PgError::CopyFailed("the client ended the COPY".into()),
        }
    }
}

/// Runs on a blocking thread: reads the whole input and commits it through the table's sink
/// (`inserts`) chunk by chunk, all of it in one commit when it fits in one. Returns the number
/// of rows copied.
pub fn load(
    plan: &CopyPlan,
    inserts: &InsertPath,
    chunks: mpsc::Receiver<Chunk>,
    field_bytes_max: usize,
    canceled: &AtomicBool,
) -> Result<u64, PgError> {
    let meta = plan.table.meta();
    let chunk_bytes = inserts.sinks.db().options().uncommitted_bytes_max / 2;
    let mut bulk = inserts
        .sinks
        .bulk(&plan.table, chunk_bytes, inserts.pending_rows_max)
        .counted_as(sundial_metrics::RowSource::Copy);
    let decoder = plan.decoder(field_bytes_max);
    let header_lines = decoder.header_lines();
    let mut input = CopyInput {
        chunks,
        decoder,
        decoded: Vec::new(),
        at: 0,
        ended: false,
    };
    if !input.fill().map_err(|e| plan.io_error(e))? {
        return Ok(0);
    }
    let mut reader =
        CsvReader::new(input, plan.csv_options()).map_err(|e| plan.csv_error(e, header_lines))?;
    let mut rows = 0u64;
    while let Some(batch) = reader
        .next_batch()
        .map_err(|e| plan.csv_error(e, header_lines))?
    {
        if canceled.load(Ordering::Relaxed) {
            return Err(PgError::Canceled);
        }
        let batch = sundial_query::conform(&plan.fit(&batch, header_lines + rows + 1)?, &meta)?;
        rows += batch.num_rows() as u64;
        bulk.push(batch).map_err(ingest_error)?;
    }
    bulk.finish().map_err(ingest_error)?;
    Ok(rows)
}

fn ingest_error(e: IngestError) -> PgError {
    PgError::from(QueryError::from(e.into_storage()))
}

/// The loader's view of the input: chunks from the session, decoded to canonical CSV.
struct CopyInput {
    chunks: mpsc::Receiver<Chunk>,
    decoder: Decoder,
    /// Decoded bytes of the last chunk, handed out from `at`.
    decoded: Vec<u8>,
    at: usize,
    ended: bool,
}

impl CopyInput {
    /// Waits for decoded bytes; false once the input has ended and all were read.
    fn fill(&mut self) -> io::Result<bool> {
        while self.at == self.decoded.len() {
            if self.ended {
                return Ok(false);
            }
            self.decoded.clear();
            self.at = 0;
            match self.chunks.blocking_recv() {
                Some(Chunk::Data(data)) => self
                    .decoder
                    .feed(&data, &mut self.decoded)
                    .map_err(io::Error::other)?,
                Some(Chunk::Done) => {
                    self.ended = true;
                    self.decoder
                        .finish(&mut self.decoded)
                        .map_err(io::Error::other)?;
                }
                None => return Err(io::Error::other(InputError::Aborted)),
            }
        }
        Ok(true)
    }
}

impl Read for CopyInput {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.fill()? {
            return Ok(0);
        }
        let n = buf.len().min(self.decoded.len() - self.at);
        buf[..n].copy_from_slice(&self.decoded[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Marks a loader to stop at its next batch (a CancelRequest during COPY).
pub type CancelFlag = Arc<AtomicBool>;

fn spelling(t: ColumnType) -> Spelling {
    match t {
        ColumnType::Boolean => Spelling::Boolean,
        ColumnType::Byte | ColumnType::Short | ColumnType::Int | ColumnType::Long => {
            Spelling::Integer
        }
        ColumnType::Float | ColumnType::Double => Spelling::Float,
        ColumnType::Timestamp | ColumnType::Date => Spelling::Timestamp,
        ColumnType::Uuid => Spelling::Uuid,
        ColumnType::Symbol | ColumnType::Varchar => Spelling::Text,
        ColumnType::Binary => Spelling::Bytes,
    }
}

/// PostgreSQL's name for a column type, as its error messages spell it.
fn pg_type_name(t: ColumnType) -> &'static str {
    match t {
        ColumnType::Boolean => "boolean",
        ColumnType::Byte | ColumnType::Short => "smallint",
        ColumnType::Int => "integer",
        ColumnType::Long => "bigint",
        ColumnType::Float => "real",
        ColumnType::Double => "double precision",
        ColumnType::Timestamp => "timestamp",
        ColumnType::Date => "date",
        ColumnType::Uuid => "uuid",
        ColumnType::Binary => "bytea",
        ColumnType::Symbol | ColumnType::Varchar => "character varying",
    }
}

/// Casts 64-bit integers to a narrower column type, failing on a value that does not fit
/// (where `conform`'s cast would store NULL).
fn narrow(array: &ArrayRef, t: ColumnType, column: &str) -> Result<ArrayRef, PgError> {
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    cast_with_options(array, &t.arrow_type(), &options).map_err(|_| {
        PgError::OutOfRange(format!(
            "a value of column \"{column}\" is out of range for type {}",
            pg_type_name(t)
        ))
    })
}

/// Decodes `bytea` text (`\x` hex; anything else is taken as its bytes).
fn bytea(array: &ArrayRef, column: &str) -> Result<ArrayRef, PgError> {
    let Some(text) = array.as_string_opt::<i64>() else {
        return Ok(array.clone());
    };
    let mut out = LargeBinaryBuilder::with_capacity(text.len(), text.value_data().len() / 2);
    for value in text.iter() {
        match value {
            None => out.append_null(),
            Some(v) => {
                let bytes = crate::types::parse_bytea(v).ok_or_else(|| PgError::CopyValue {
                    message: format!("invalid input syntax for type bytea: \"{v}\""),
                    context: format!("COPY column {column}"),
                })?;
                out.append_value(bytes);
            }
        }
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sundial_storage::{StorageOptions, TableDef};

    fn db() -> (tempfile::TempDir, Arc<Database>) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), StorageOptions::default()).unwrap();
        let def = TableDef {
            name: "t".into(),
            columns: vec![
                ("ts".into(), ColumnType::Timestamp),
                ("sym".into(), ColumnType::Symbol),
                ("n".into(), ColumnType::Short),
                ("ok".into(), ColumnType::Boolean),
                ("b".into(), ColumnType::Binary),
            ],
            timestamp: Some("ts".into()),
            partition_by: sundial_storage::PartitionBy::Day,
            indexed: Vec::new(),
            dedup_keys: Vec::new(),
            ttl: None,
            cold_after: None,
        };
        db.create_table(def, false).unwrap();
        (dir, db)
    }

    fn options(format: CopyFormat) -> CopyOptions {
        CopyOptions::defaults(format)
    }

    /// Sends `chunks` (then CopyDone when `done`) and runs the loader.
    fn run(
        db: &Arc<Database>,
        plan: &CopyPlan,
        chunks: &[&str],
        done: bool,
    ) -> Result<u64, PgError> {
        let (tx, rx) = mpsc::channel(chunks.len() + 1);
        for c in chunks {
            tx.try_send(Chunk::Data(c.as_bytes().to_vec())).unwrap();
        }
        if done {
            tx.try_send(Chunk::Done).unwrap();
        }
        drop(tx);
        let inserts = InsertPath {
            sinks: sundial_ingest::Sinks::new(db.clone()),
            pending_rows_max: 1000,
        };
        load(plan, &inserts, rx, 1 << 20, &AtomicBool::new(false))
    }

    fn rows(db: &Database) -> u64 {
        db.table("t").unwrap().snapshot().row_count()
    }

    #[test]
    fn loads_text_in_chunks_and_commits_once() {
        let (_dir, db) = db();
        let plan = CopyPlan::resolve(&db, "T", &[], options(CopyFormat::Text)).unwrap();
        let n = run(
            &db,
            &plan,
            &[
                "2024-01-01 00:00:00\tA\t1\tt\t\\\\x00",
                "ff\n2024-01-01 00:00:01\t\\N\t-2\tf\t\\N\n",
            ],
            true,
        )
        .unwrap();
        assert_eq!(n, 2);
        assert_eq!(rows(&db), 2);
    }

    #[test]
    fn a_bad_row_or_a_missing_copydone_commits_nothing() {
        let (_dir, db) = db();
        let plan = CopyPlan::resolve(
            &db,
            "t",
            &["ts".into(), "n".into()],
            options(CopyFormat::Csv),
        )
        .unwrap();
        let e = run(&db, &plan, &["2024-01-01,1\n2024-01-01,x\n"], true).unwrap_err();
        assert_eq!(e.sqlstate(), "22P02");
        assert_eq!(e.context(), Some("COPY t, line 2, column n: \"x\""));
        let e = run(&db, &plan, &["2024-01-01,1\n2024-01-01,1,2\n"], true).unwrap_err();
        assert_eq!(e.sqlstate(), "22P04");
        let e = run(&db, &plan, &["2024-01-01,70000\n"], true).unwrap_err();
        assert_eq!(e.sqlstate(), "22003");
        assert!(run(&db, &plan, &["2024-01-01,1\n"], false).is_err());
        assert_eq!(rows(&db), 0);
        assert_eq!(run(&db, &plan, &[], true).unwrap(), 0);
    }

    #[test]
    fn unknown_table_and_columns() {
        let (_dir, db) = db();
        let o = options(CopyFormat::Text);
        let e = CopyPlan::resolve(&db, "nope", &[], o.clone())
            .err()
            .unwrap();
        assert_eq!(e.sqlstate(), "42P01");
        let e = CopyPlan::resolve(&db, "t", &["zz".into()], o.clone())
            .err()
            .unwrap();
        assert_eq!(e.sqlstate(), "42703");
        let e = CopyPlan::resolve(&db, "t", &["n".into(), "N".into()], o)
            .err()
            .unwrap();
        assert_eq!(e.sqlstate(), "42701");
    }
}

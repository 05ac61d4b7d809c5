//! Streaming CSV reader with type detection.
//!
//! This crate turns a CSV byte stream into Arrow [`RecordBatch`]es. It is
//! shared by the CLI command `sundial import FILE.csv --table T
//! [--timestamp COL]` and the QuestDB-compatible HTTP `/imp` endpoint.
//!
//! Memory is bounded whatever the input size: only the first
//! [`CsvOptions::infer_rows`] records are buffered (to detect column types),
//! after which records are parsed one at a time straight into Arrow builders
//! and handed out [`CsvOptions::batch_rows`] rows at a time.
//!
//! ```text
//!  bytes ──► BOM strip ──► csv parser ──► header ──► column names
//!                              │
//!                              ├── first infer_rows records ──► sample buffer
//!                              │                                   │
//!                              │                  detect_kind per column
//!                              │                  + overrides / timestamp col
//!                              │                                   ▼
//!                              │                            schema (Arrow)
//!                              │                                   │
//!                              └── remaining records ──┐           │
//!                                                      ▼           ▼
//!                        sample rows, then the rest ─► parse cells ─► builders
//!                                                      (atomicity)     │
//!                                                                      ▼
//!                                              RecordBatch (≤ batch_rows rows)
//! ```
//!
//! Column types are [`ColumnKind`]s, each emitted as one fixed Arrow type
//! (see [`ColumnKind::arrow_type`]): BOOLEAN, LONG, DOUBLE, TIMESTAMP
//! (UTC nanoseconds), UUID, SYMBOL (dictionary-encoded) and VARCHAR.
//! Empty fields are NULL. Values that do not parse are handled according to
//! [`Atomicity`]; each refused row or value is a [`Rejection`] (line, column, reason, record),
//! the first few kept in [`CsvStats::errors`] and all of them handed to an optional
//! [`RejectSink`] ([`RejectsWriter`] streams them to a CSV file). Detection tolerates a few bad
//! values ([`tolerated_failures`]) rather than turning a numeric column into text, and
//! [`CsvReader::fallbacks`] names the columns that did become text although most of their
//! values are typed. Records are bounded ([`CsvOptions::max_record_bytes`]), so a file without
//! line breaks or with an unterminated quote is an error, never an unbounded buffer; line
//! numbers count physical lines (CRLF, blank lines and quoted line breaks included).
//! The value parsers live in [`parse`] for reuse elsewhere;
//! timestamps in other notations are read with QuestDB-style patterns
//! ([`pattern`]). For uploads of unknown shape, the reader can decide whether
//! the first line is a header ([`CsvOptions::detect_header`]) and
//! [`detect_delimiter`] guesses the delimiter.
//!
//! ```
//! use sundial_csv::{ColumnKind, CsvOptions, CsvReader};
//!
//! let data = "ts,host,load\n2016-01-01T00:00:00Z,a,0.5\n2016-01-01T00:00:01Z,a,0.7\n";
//! let mut reader = CsvReader::new(data.as_bytes(), CsvOptions::default())?;
//! assert_eq!(reader.column_kinds()[0], ColumnKind::Timestamp);
//! let batch = reader.next_batch()?.expect("one batch");
//! assert_eq!(batch.num_rows(), 2);
//! assert!(reader.next_batch()?.is_none());
//! # Ok::<(), sundial_csv::CsvError>(())
//! ```
//!
//! [`RecordBatch`]: arrow_array::RecordBatch

mod error;
mod infer;
mod options;
pub mod parse;
pub mod pattern;
mod reader;
mod reject;

pub use error::{CsvError, ValueProblem};
pub use infer::{
    Detection, MAX_SYMBOL_DISTINCT, Mixed, detect_column, detect_delimiter, detect_kind,
    tolerated_failures,
};
pub use options::{Atomicity, ColumnKind, CsvOptions};
pub use pattern::TimestampFormat;
pub use reader::{CsvReader, CsvStats, SAMPLE_BYTES_MAX};
pub use reject::{
    ColumnFallback, KEPT_RECORD_BYTES, RejectAction, RejectSink, Rejection, RejectsWriter,
};

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
//! [`Atomicity`]. The value parsers live in [`parse`] for reuse elsewhere;
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

pub use error::{CsvError, ValueProblem};
pub use infer::{MAX_SYMBOL_DISTINCT, detect_delimiter, detect_kind};
pub use options::{Atomicity, ColumnKind, CsvOptions};
pub use pattern::TimestampFormat;
pub use reader::{CsvReader, CsvStats};

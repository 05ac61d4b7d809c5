//! The error type returned by [`CsvReader`](crate::CsvReader).

use arrow_schema::ArrowError;

/// Everything that can go wrong while reading a CSV stream.
#[derive(thiserror::Error, Debug)]
pub enum CsvError {
    /// The underlying reader failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    /// A record is structurally invalid, e.g. it has the wrong number of
    /// fields. `line` is the 1-based line on which the record starts.
    #[error("malformed CSV at line {line}: {message}")]
    Malformed {
        /// 1-based line number where the record starts.
        line: u64,
        /// What is wrong with the record.
        message: String,
    },

    /// A field could not be parsed as its column's type, or is a timestamp
    /// outside the range tables hold (only returned under
    /// [`Atomicity::Abort`](crate::Atomicity::Abort), or for a sample value
    /// of a forced timestamp column).
    #[error("line {line}, column '{column}': {}", problem.describe(value, expected))]
    BadValue {
        /// 1-based line number where the record starts.
        line: u64,
        /// Name of the column.
        column: String,
        /// The offending value (lossily decoded, possibly shortened).
        value: String,
        /// Name of the expected type, e.g. `"TIMESTAMP"`.
        expected: &'static str,
        /// What is wrong with the value.
        problem: ValueProblem,
    },

    /// The header or the options do not describe a usable schema: unknown
    /// override column, missing timestamp column, empty input.
    #[error("schema error: {0}")]
    Schema(String),

    /// The header row is malformed (duplicate, empty or invalid column names) or, when a
    /// header is required ([`CsvOptions::require_header`](crate::CsvOptions::require_header)),
    /// the first line looks like data. The message says which and how to fix it.
    #[error("{0}")]
    Header(String),

    /// Header detection ([`CsvOptions::detect_header`](crate::CsvOptions::detect_header))
    /// decided that the first line is data, and a column the options name (the timestamp
    /// column) is therefore missing.
    #[error(
        "could not detect a header row (the first line looks like data: '{first_line}'), so \
         there is no column '{column}'; pass forceHeader=true if the first line is the header, \
         or add a header row naming the columns"
    )]
    HeaderNotDetected {
        /// The first line, shortened.
        first_line: String,
        /// The column that was asked for.
        column: String,
    },

    /// A record is longer than [`CsvOptions::max_record_bytes`](crate::CsvOptions::max_record_bytes):
    /// most likely an unterminated quote or a file without line breaks. Reading stops rather
    /// than buffer it.
    #[error(
        "line {line}: a record longer than {limit} bytes (an unterminated quote, or a file \
         without line breaks?); records are limited to {limit} bytes"
    )]
    RecordTooLong {
        /// 1-based line on which the record starts.
        line: u64,
        /// The limit in bytes.
        limit: usize,
    },

    /// Arrow refused to build an array or a batch (e.g. dictionary key
    /// overflow). Not expected in practice.
    #[error("arrow error: {0}")]
    Arrow(#[from] ArrowError),
}

/// Why a field value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueProblem {
    /// The value is not of the column's type.
    Unparseable,
    /// The value is a well-formed timestamp outside the range tables hold
    /// ([`sundial_storage::TIMESTAMP_RANGE_TEXT`]).
    OutOfRange,
}

impl ValueProblem {
    /// The problem in words, naming `value` (already quoted for a message).
    pub fn describe(self, value: &str, expected: &str) -> String {
        match self {
            ValueProblem::Unparseable => format!("cannot parse '{value}' as {expected}"),
            ValueProblem::OutOfRange => format!(
                "timestamp '{value}' is out of range: timestamps must be from {}",
                sundial_storage::TIMESTAMP_RANGE_TEXT
            ),
        }
    }
}

/// Longest value (in chars) quoted back in a [`CsvError::BadValue`].
const MAX_QUOTED_VALUE_CHARS: usize = 200;

/// Lossily decodes `value` for an error message, shortening long values.
pub(crate) fn quote_value(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    let mut chars = text.char_indices();
    match chars.nth(MAX_QUOTED_VALUE_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.into_owned(),
    }
}

/// Lossily decodes a whole record for a message: its fields joined by `delimiter`, shortened.
pub(crate) fn quote_record(record: &csv::ByteRecord, delimiter: u8) -> String {
    let mut line = Vec::new();
    for (i, field) in record.iter().enumerate() {
        if i > 0 {
            line.push(delimiter);
        }
        line.extend_from_slice(field);
        if line.len() > MAX_QUOTED_VALUE_CHARS * 4 {
            break;
        }
    }
    quote_value(&line)
}

/// Converts an error of the `csv` crate, which with byte records in flexible
/// mode is in practice always an I/O error.
pub(crate) fn from_csv(err: csv::Error, line: u64) -> CsvError {
    let message = err.to_string();
    match err.into_kind() {
        csv::ErrorKind::Io(io) => CsvError::Io(io),
        _ => CsvError::Malformed { line, message },
    }
}

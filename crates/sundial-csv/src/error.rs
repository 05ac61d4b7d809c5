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
    /// override column, duplicate header names, missing timestamp column,
    /// empty input.
    #[error("schema error: {0}")]
    Schema(String),

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

/// Converts an error of the `csv` crate, which with byte records in flexible
/// mode is in practice always an I/O error.
pub(crate) fn from_csv(err: csv::Error, line: u64) -> CsvError {
    let message = err.to_string();
    match err.into_kind() {
        csv::ErrorKind::Io(io) => CsvError::Io(io),
        _ => CsvError::Malformed { line, message },
    }
}

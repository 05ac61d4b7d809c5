//! Parse errors: what went wrong and at which byte of the line.

use std::fmt;

/// Why a line was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The line is blank, or starts with a `,` or a space where the measurement should be.
    EmptyMeasurement,
    /// The line starts with `#`: a comment, which carries no data. [`split_lines`] skips
    /// comments, so only callers that split lines themselves see this.
    ///
    /// [`split_lines`]: crate::split_lines
    Comment,
    /// The measurement and tags are not followed by a space and at least one field.
    MissingFields,
    /// A tag key is not followed by `=` and a non-empty value.
    MissingTagValue,
    /// A field key is not followed by `=` and a value.
    MissingFieldValue,
    /// A tag or field key is empty (`m,=v f=1`, `m =1`, or a trailing `,`).
    EmptyKey,
    /// A field value is not a number, a quoted string or a boolean.
    InvalidFieldValue,
    /// An `i` integer does not fit in `i64`, or a `u` integer does not fit in `u64`.
    IntegerOutOfRange,
    /// A float literal is finite but too large for `f64` (e.g. `1e400`).
    FloatOutOfRange,
    /// A quoted string value has no closing `"`.
    UnterminatedString,
    /// A quoted string value is followed by something other than `,`, a space or the end.
    MissingSeparator,
    /// The timestamp is not an integer that fits in `i64`.
    InvalidTimestamp,
    /// Something other than spaces follows the timestamp.
    TrailingCharacters,
    /// The line is not valid UTF-8.
    InvalidUtf8,
    /// The line contains a NUL (0x00) byte; the offset is the first one.
    NulByte,
    /// The line is longer than the parser's `max_line_bytes`; the offset is that limit.
    LineTooLong,
}

impl ErrorKind {
    /// A short name for the error, e.g. `"invalid field value"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::EmptyMeasurement => "empty measurement",
            ErrorKind::Comment => "comment line",
            ErrorKind::MissingFields => "missing fields",
            ErrorKind::MissingTagValue => "missing tag value",
            ErrorKind::MissingFieldValue => "missing field value",
            ErrorKind::EmptyKey => "empty key",
            ErrorKind::InvalidFieldValue => "invalid field value",
            ErrorKind::IntegerOutOfRange => "integer out of range",
            ErrorKind::FloatOutOfRange => "float out of range",
            ErrorKind::UnterminatedString => "unterminated string",
            ErrorKind::MissingSeparator => "missing separator",
            ErrorKind::InvalidTimestamp => "invalid timestamp",
            ErrorKind::TrailingCharacters => "trailing characters",
            ErrorKind::InvalidUtf8 => "invalid UTF-8",
            ErrorKind::NulByte => "NUL byte",
            ErrorKind::LineTooLong => "line too long",
        }
    }

    /// What the parser expected instead, in plain English.
    pub fn detail(self) -> &'static str {
        match self {
            ErrorKind::EmptyMeasurement => "a line must start with a measurement name",
            ErrorKind::Comment => "lines starting with '#' are comments and carry no data",
            ErrorKind::MissingFields => {
                "expected a space and at least one field after the measurement and tags"
            }
            ErrorKind::MissingTagValue => "expected '=' and a non-empty value after the tag key",
            ErrorKind::MissingFieldValue => "expected '=' and a value after the field key",
            ErrorKind::EmptyKey => "tag and field keys must not be empty",
            ErrorKind::InvalidFieldValue => "expected a number, a quoted string, or a boolean",
            ErrorKind::IntegerOutOfRange => {
                "'i' integers must fit in a signed and 'u' integers in an unsigned 64-bit integer"
            }
            ErrorKind::FloatOutOfRange => "the number is too large for a 64-bit float",
            ErrorKind::UnterminatedString => "the quoted string has no closing '\"'",
            ErrorKind::MissingSeparator => "expected ',' or a space after the quoted string",
            ErrorKind::InvalidTimestamp => {
                "expected an integer timestamp (optionally negative) that fits in 64 bits"
            }
            ErrorKind::TrailingCharacters => "expected the end of the line after the timestamp",
            ErrorKind::InvalidUtf8 => "names and string values must be valid UTF-8",
            ErrorKind::NulByte => {
                "measurement names, tag keys and values, field keys and string values must not \
                 contain NUL (0x00) bytes"
            }
            ErrorKind::LineTooLong => "the line is longer than the configured maximum",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rejected line: the reason and the byte offset (within the line passed to
/// [`LineParser::parse_line`](crate::LineParser::parse_line)) where it was detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParseError {
    pub kind: ErrorKind,
    pub offset: usize,
}

impl ParseError {
    pub fn new(kind: ErrorKind, offset: usize) -> Self {
        ParseError { kind, offset }
    }
}

impl fmt::Display for ParseError {
    /// E.g. `invalid field value at byte 17: expected a number, a quoted string, or a boolean`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind == ErrorKind::LineTooLong {
            return write!(
                f,
                "line too long: lines may not be longer than {} bytes",
                self.offset
            );
        }
        write!(
            f,
            "{} at byte {}: {}",
            self.kind.as_str(),
            self.offset,
            self.kind.detail()
        )
    }
}

impl std::error::Error for ParseError {}

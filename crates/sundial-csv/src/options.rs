//! Reader configuration: [`CsvOptions`], [`ColumnKind`] and [`Atomicity`].

use std::fmt;

use arrow_schema::{DataType, TimeUnit};
use sundial_storage::ColumnType;

use crate::pattern::TimestampFormat;

/// Column types the reader can produce, named after the database's SQL
/// types. Each maps to exactly one Arrow [`DataType`] (see
/// [`ColumnKind::arrow_type`]), which is how the database recognises them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnKind {
    /// `true` / `false` -> [`DataType::Boolean`].
    Boolean,
    /// 64-bit signed integer -> [`DataType::Int64`].
    Long,
    /// 64-bit float -> [`DataType::Float64`].
    Double,
    /// UTC instant -> `Timestamp(Nanosecond, None)`.
    Timestamp,
    /// UUID -> `FixedSizeBinary(16)`.
    Uuid,
    /// Low-cardinality string -> `Dictionary(Int32, Utf8)`.
    Symbol,
    /// Any other string -> [`DataType::LargeUtf8`].
    Varchar,
}

impl ColumnKind {
    /// How values bound for a table column of type `t` are read. UUID and BINARY columns are
    /// read as text: the table writer parses UUIDs, and loaders decode binary themselves.
    pub fn for_column_type(t: ColumnType) -> ColumnKind {
        match t {
            ColumnType::Boolean => ColumnKind::Boolean,
            ColumnType::Byte | ColumnType::Short | ColumnType::Int | ColumnType::Long => {
                ColumnKind::Long
            }
            ColumnType::Float | ColumnType::Double => ColumnKind::Double,
            ColumnType::Timestamp | ColumnType::Date => ColumnKind::Timestamp,
            ColumnType::Symbol => ColumnKind::Symbol,
            ColumnType::Varchar | ColumnType::Uuid | ColumnType::Binary => ColumnKind::Varchar,
        }
    }

    /// All kinds, in detection order (narrowest first).
    pub const ALL: [ColumnKind; 7] = [
        ColumnKind::Boolean,
        ColumnKind::Long,
        ColumnKind::Double,
        ColumnKind::Timestamp,
        ColumnKind::Uuid,
        ColumnKind::Symbol,
        ColumnKind::Varchar,
    ];

    /// The Arrow type the reader emits for this kind.
    pub fn arrow_type(&self) -> DataType {
        match self {
            ColumnKind::Boolean => DataType::Boolean,
            ColumnKind::Long => DataType::Int64,
            ColumnKind::Double => DataType::Float64,
            ColumnKind::Timestamp => DataType::Timestamp(TimeUnit::Nanosecond, None),
            ColumnKind::Uuid => DataType::FixedSizeBinary(16),
            ColumnKind::Symbol => {
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
            }
            ColumnKind::Varchar => DataType::LargeUtf8,
        }
    }

    /// The SQL name: `"BOOLEAN"`, `"LONG"`, `"DOUBLE"`, `"TIMESTAMP"`,
    /// `"UUID"`, `"SYMBOL"` or `"VARCHAR"`.
    pub fn name(&self) -> &'static str {
        match self {
            ColumnKind::Boolean => "BOOLEAN",
            ColumnKind::Long => "LONG",
            ColumnKind::Double => "DOUBLE",
            ColumnKind::Timestamp => "TIMESTAMP",
            ColumnKind::Uuid => "UUID",
            ColumnKind::Symbol => "SYMBOL",
            ColumnKind::Varchar => "VARCHAR",
        }
    }

    /// Parses a type name, case-insensitively. Besides the canonical names
    /// it accepts `INT`, `INTEGER`, `BIGINT` (LONG), `FLOAT` (DOUBLE),
    /// `STRING` (VARCHAR) and `BOOL` (BOOLEAN).
    pub fn parse_name(s: &str) -> Option<Self> {
        let kind = match s.trim().to_ascii_uppercase().as_str() {
            "BOOLEAN" | "BOOL" => ColumnKind::Boolean,
            "LONG" | "INT" | "INTEGER" | "BIGINT" => ColumnKind::Long,
            "DOUBLE" | "FLOAT" => ColumnKind::Double,
            "TIMESTAMP" => ColumnKind::Timestamp,
            "UUID" => ColumnKind::Uuid,
            "SYMBOL" => ColumnKind::Symbol,
            "VARCHAR" | "STRING" => ColumnKind::Varchar,
            _ => return None,
        };
        Some(kind)
    }

    /// Whether values of this kind are text (kept verbatim, not trimmed).
    pub fn is_string(&self) -> bool {
        matches!(self, ColumnKind::Symbol | ColumnKind::Varchar)
    }
}

impl fmt::Display for ColumnKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What to do with a field that does not parse as its column's type. Every value or row
/// refused under the two skip modes is reported as a [`Rejection`](crate::Rejection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Atomicity {
    /// The value becomes NULL and is counted in
    /// [`CsvStats::column_errors`](crate::CsvStats::column_errors). (A bad designated
    /// timestamp cannot be NULL: its row is dropped as under `SkipRow`.) QuestDB's `/imp`
    /// default.
    #[default]
    SkipColumn,
    /// The whole row is dropped and counted in
    /// [`CsvStats::rows_rejected`](crate::CsvStats::rows_rejected) (the
    /// offending columns are also counted in `column_errors`).
    SkipRow,
    /// Reading stops with [`CsvError::BadValue`](crate::CsvError::BadValue)
    /// (or [`CsvError::Malformed`](crate::CsvError::Malformed) for a record
    /// with the wrong number of fields).
    Abort,
}

impl Atomicity {
    /// Parses QuestDB's spellings, case-insensitively: `skipCol` (or `skipColumn`, `2`),
    /// `skipRow` (`1`), `abort` (`0`).
    pub fn parse(s: &str) -> Option<Atomicity> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("skipCol") || s.eq_ignore_ascii_case("skipColumn") || s == "2" {
            Some(Atomicity::SkipColumn)
        } else if s.eq_ignore_ascii_case("skipRow") || s == "1" {
            Some(Atomicity::SkipRow)
        } else if s.eq_ignore_ascii_case("abort") || s == "0" {
            Some(Atomicity::Abort)
        } else {
            None
        }
    }

    /// The canonical name: `skipCol`, `skipRow` or `abort`.
    pub fn name(self) -> &'static str {
        match self {
            Atomicity::SkipColumn => "skipCol",
            Atomicity::SkipRow => "skipRow",
            Atomicity::Abort => "abort",
        }
    }
}

impl fmt::Display for Atomicity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Configuration of a [`CsvReader`](crate::CsvReader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// Field delimiter. Default `b','`.
    pub delimiter: u8,
    /// Whether the first record names the columns. Default `true`. Without a
    /// header the columns are named from [`CsvOptions::default_names`], then
    /// `f0`, `f1`, ...
    pub has_header: bool,
    /// Decide from the data whether the first record is a header, ignoring
    /// `has_header` (QuestDB's `/imp` without `forceHeader`). Default `false`.
    /// The first record is a header when one of its values does not parse as
    /// the type detected for its column from the records after it; when every
    /// column is text, when each of its values is non-empty and appears
    /// nowhere else in its column of the sample; a lone record is a header
    /// when none of its values looks like a number, boolean, timestamp or UUID.
    pub detect_header: bool,
    /// Names of the first columns of input without a header row (e.g. an
    /// existing table's columns); the rest are `f<i>`.
    pub default_names: Vec<String>,
    /// How many records are buffered and sampled for type detection.
    /// Default 10 000. Without a header at least one record is sampled.
    pub infer_rows: usize,
    /// Maximum rows per emitted `RecordBatch`. Default 65 536; 0 is
    /// treated as 1.
    pub batch_rows: usize,
    /// This column is forced to TIMESTAMP; [`CsvReader::new`](crate::CsvReader::new)
    /// fails if the column is missing or one of its sample values does not parse.
    pub timestamp_column: Option<String>,
    /// Forced types by column name (QuestDB's `/imp` `schema` part).
    /// Unknown names are an error unless `lenient_overrides`.
    pub type_overrides: Vec<(String, ColumnKind)>,
    /// Timestamp patterns by column name: the column becomes TIMESTAMP and
    /// its values are parsed with the pattern instead of as ISO 8601.
    /// Unknown names are an error unless `lenient_overrides`.
    pub timestamp_formats: Vec<(String, TimestampFormat)>,
    /// Ignore `type_overrides` and `timestamp_formats` naming columns the
    /// input does not have. Default `false`.
    pub lenient_overrides: bool,
    /// Handling of unparseable values. Default [`Atomicity::SkipColumn`].
    pub atomicity: Atomicity,
    /// How many [`Rejection`](crate::Rejection)s [`CsvStats::errors`](crate::CsvStats::errors)
    /// keeps (the first ones); the rest are only counted (and given to a reject sink, see
    /// [`CsvReader::with_reject_sink`](crate::CsvReader::with_reject_sink)). Default 10.
    pub max_reported_errors: usize,
    /// Longest record (bytes of input, quotes and delimiters included) the reader buffers;
    /// a longer one stops reading with [`CsvError::RecordTooLong`](crate::CsvError::RecordTooLong).
    /// Default 64 MiB.
    pub max_record_bytes: usize,
    /// The first line must be a well-formed header (with `has_header` and without
    /// `detect_header`): an empty column name, or a first line that looks like data (every
    /// value parses as its column's detected non-string type), is a
    /// [`CsvError::Header`](crate::CsvError::Header) rather than a column named `f<i>` or
    /// after a value. Default `false`.
    pub require_header: bool,
}

impl Default for CsvOptions {
    fn default() -> Self {
        Self {
            delimiter: b',',
            has_header: true,
            detect_header: false,
            default_names: Vec::new(),
            infer_rows: 10_000,
            batch_rows: 65_536,
            timestamp_column: None,
            type_overrides: Vec::new(),
            timestamp_formats: Vec::new(),
            lenient_overrides: false,
            atomicity: Atomicity::SkipColumn,
            max_reported_errors: 10,
            max_record_bytes: 64 << 20,
            require_header: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in ColumnKind::ALL {
            assert_eq!(ColumnKind::parse_name(kind.name()), Some(kind));
            assert_eq!(
                ColumnKind::parse_name(&kind.name().to_lowercase()),
                Some(kind)
            );
        }
        assert_eq!(ColumnKind::parse_name("int"), Some(ColumnKind::Long));
        assert_eq!(ColumnKind::parse_name("Integer"), Some(ColumnKind::Long));
        assert_eq!(ColumnKind::parse_name("BIGINT"), Some(ColumnKind::Long));
        assert_eq!(ColumnKind::parse_name("float"), Some(ColumnKind::Double));
        assert_eq!(ColumnKind::parse_name("string"), Some(ColumnKind::Varchar));
        assert_eq!(ColumnKind::parse_name("blob"), None);
    }

    #[test]
    fn atomicity_names() {
        for a in [Atomicity::SkipColumn, Atomicity::SkipRow, Atomicity::Abort] {
            assert_eq!(Atomicity::parse(a.name()), Some(a));
        }
        assert_eq!(Atomicity::parse("SKIPCOLUMN"), Some(Atomicity::SkipColumn));
        assert_eq!(Atomicity::parse(" skiprow "), Some(Atomicity::SkipRow));
        assert_eq!(Atomicity::parse("0"), Some(Atomicity::Abort));
        assert_eq!(Atomicity::parse("1"), Some(Atomicity::SkipRow));
        assert_eq!(Atomicity::parse("2"), Some(Atomicity::SkipColumn));
        assert_eq!(Atomicity::parse("3"), None);
        assert_eq!(Atomicity::parse("sometimes"), None);
    }

    #[test]
    fn arrow_types() {
        assert_eq!(ColumnKind::Long.arrow_type(), DataType::Int64);
        assert_eq!(
            ColumnKind::Timestamp.arrow_type(),
            DataType::Timestamp(TimeUnit::Nanosecond, None)
        );
        assert_eq!(ColumnKind::Uuid.arrow_type(), DataType::FixedSizeBinary(16));
        assert_eq!(ColumnKind::Varchar.arrow_type(), DataType::LargeUtf8);
    }
}

//! Reports of what an import refused: [`Rejection`]s (one per skipped row or NULLed value,
//! with its line and reason), [`ColumnFallback`]s (columns detection left as text although
//! most of their values are typed), and [`RejectsWriter`], which streams rejections into a
//! CSV file.
//!
//! Invariants: a reader keeps at most [`CsvOptions::max_reported_errors`] rejections, each with
//! at most [`KEPT_RECORD_BYTES`] of its record; everything else goes to the caller's sink one
//! rejection at a time and is never accumulated.
//!
//! [`CsvOptions::max_reported_errors`]: crate::CsvOptions::max_reported_errors

use std::fmt;
use std::io::{self, Write};

use crate::options::ColumnKind;

/// Bytes of its record a rejection kept in [`CsvStats::errors`](crate::CsvStats::errors) holds.
pub const KEPT_RECORD_BYTES: usize = 1024;

/// What happened to a refused row or value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectAction {
    /// The whole row was dropped.
    RowSkipped,
    /// The value was stored as NULL, the rest of the row kept (`skipCol`).
    ValueNulled,
}

impl RejectAction {
    /// `rowSkipped` or `valueNulled`.
    pub fn name(self) -> &'static str {
        match self {
            RejectAction::RowSkipped => "rowSkipped",
            RejectAction::ValueNulled => "valueNulled",
        }
    }
}

/// One row or value the reader refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// 1-based line of the input on which the record starts.
    pub line: u64,
    /// The column whose value was refused; `None` for a record with the wrong number of fields.
    pub column: Option<String>,
    /// Why, for people, without the line: `column 'ts': cannot parse 'abc' as TIMESTAMP`, or
    /// `expected 3 fields, found 4`.
    pub reason: String,
    /// What was done about it.
    pub action: RejectAction,
    /// The record as one CSV line (its fields re-quoted where needed, no line break); possibly
    /// shortened (see `record_truncated`).
    pub record: Vec<u8>,
    /// Whether `record` was shortened.
    pub record_truncated: bool,
}

impl Rejection {
    /// A copy whose record is at most [`KEPT_RECORD_BYTES`] long.
    pub(crate) fn shortened(&self) -> Rejection {
        let mut kept = self.clone();
        if kept.record.len() > KEPT_RECORD_BYTES {
            kept.record.truncate(KEPT_RECORD_BYTES);
            kept.record_truncated = true;
        }
        kept
    }
}

impl fmt::Display for Rejection {
    /// `line 1234: column 'ts': cannot parse 'abc' as TIMESTAMP`, with ` (stored as NULL)`
    /// for a NULLed value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)?;
        if self.action == RejectAction::ValueNulled {
            f.write_str(" (stored as NULL)")?;
        }
        Ok(())
    }
}

/// Receives every rejection as it happens (e.g. to write a rejects file); an error stops
/// reading with [`CsvError::Io`](crate::CsvError::Io).
pub type RejectSink = Box<dyn FnMut(&Rejection) -> io::Result<()> + Send>;

/// A column left as text although most of its sample values are of one other type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnFallback {
    /// The column.
    pub column: String,
    /// What it became: SYMBOL or VARCHAR.
    pub kind: ColumnKind,
    /// What most of its values are.
    pub wanted: ColumnKind,
    /// Sample values that parse as `wanted`.
    pub parsed: usize,
    /// Non-empty sample values.
    pub non_null: usize,
    /// Line of the first sample value that does not parse as `wanted`.
    pub line: u64,
    /// That value (shortened).
    pub value: String,
}

impl fmt::Display for ColumnFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "column '{}' is {}, not {}: its values are mixed ({} of {} sampled values are {}; \
             the first that is not is '{}' on line {})",
            self.column,
            self.kind,
            self.wanted,
            self.parsed,
            self.non_null,
            self.wanted,
            self.value,
            self.line
        )
    }
}

/// Writes rejections as CSV: a header `line,action,column,reason,record`, then one row per
/// rejection (`record` is the refused record as one CSV line, itself quoted as a field).
/// Nothing is buffered beyond the underlying writer's buffer.
pub struct RejectsWriter<W: Write> {
    csv: csv::Writer<W>,
}

impl<W: Write> RejectsWriter<W> {
    /// Writes the header.
    pub fn new(out: W) -> io::Result<Self> {
        let mut csv = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(out);
        csv.write_record(["line", "action", "column", "reason", "record"])
            .map_err(io::Error::other)?;
        Ok(Self { csv })
    }

    /// Writes one rejection.
    pub fn write(&mut self, r: &Rejection) -> io::Result<()> {
        let line = r.line.to_string();
        let fields: [&[u8]; 5] = [
            line.as_bytes(),
            r.action.name().as_bytes(),
            r.column.as_deref().unwrap_or("").as_bytes(),
            r.reason.as_bytes(),
            &r.record,
        ];
        self.csv.write_record(fields).map_err(io::Error::other)
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(self) -> io::Result<W> {
        self.csv.into_inner().map_err(|e| e.into_error())
    }
}

/// Encodes `record` as one CSV line with `delimiter` (fields quoted where needed), without
/// its line break.
pub(crate) fn encode_record(record: &csv::ByteRecord, delimiter: u8) -> Vec<u8> {
    let mut out = csv::WriterBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    if out.write_byte_record(record).is_err() {
        return Vec::new();
    }
    let mut bytes = out.into_inner().unwrap_or_default();
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_are_csv_with_the_record_as_one_field() {
        let record = csv::ByteRecord::from(vec!["2016-01-01", "a,b", "say \"hi\""]);
        let encoded = encode_record(&record, b',');
        assert_eq!(encoded, b"2016-01-01,\"a,b\",\"say \"\"hi\"\"\"");
        let rejection = Rejection {
            line: 7,
            column: Some("v".into()),
            reason: "column 'v': cannot parse 'x' as LONG".into(),
            action: RejectAction::RowSkipped,
            record: encoded,
            record_truncated: false,
        };
        assert_eq!(
            rejection.to_string(),
            "line 7: column 'v': cannot parse 'x' as LONG"
        );
        let mut writer = RejectsWriter::new(Vec::new()).unwrap();
        writer.write(&rejection).unwrap();
        let text = String::from_utf8(writer.finish().unwrap()).unwrap();
        assert_eq!(
            text,
            "line,action,column,reason,record\n7,rowSkipped,v,column 'v': cannot parse 'x' as LONG,\"2016-01-01,\"\"a,b\"\",\"\"say \"\"\"\"hi\"\"\"\"\"\"\"\n"
        );
        let nulled = Rejection {
            action: RejectAction::ValueNulled,
            record: vec![b'x'; 5000],
            ..rejection
        };
        assert!(nulled.to_string().ends_with("(stored as NULL)"));
        let kept = nulled.shortened();
        assert_eq!(kept.record.len(), KEPT_RECORD_BYTES);
        assert!(kept.record_truncated);
    }
}

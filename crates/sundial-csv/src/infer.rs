//! Type detection over the buffered sample.

use std::collections::HashSet;

use crate::options::ColumnKind;
use crate::parse::{parse_bool, parse_f64, parse_i64, parse_timestamp_nanos, parse_uuid};

/// Upper bound on distinct values for a SYMBOL column.
pub const MAX_SYMBOL_DISTINCT: usize = 10_000;

/// Detects the kind of one column from its sample values.
///
/// Empty values are NULL and ignored. The result is the narrowest kind every
/// non-null value parses as, in the order BOOLEAN, LONG, DOUBLE, TIMESTAMP,
/// UUID (non-string values are trimmed of ASCII whitespace first). Failing
/// those, the column is SYMBOL if it has few distinct values (at most
/// `max(1, non_null / 10)` and at most [`MAX_SYMBOL_DISTINCT`]), otherwise
/// VARCHAR. A column without non-null values is VARCHAR.
pub fn detect_kind<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> ColumnKind {
    let mut candidates = Candidates::all();
    let mut non_null: usize = 0;
    let mut distinct: HashSet<&'a [u8]> = HashSet::new();
    let mut distinct_overflow = false;

    for value in values {
        if value.is_empty() {
            continue;
        }
        non_null += 1;
        candidates.narrow(value.trim_ascii());
        if !distinct_overflow && distinct.insert(value) && distinct.len() > MAX_SYMBOL_DISTINCT {
            distinct_overflow = true;
            distinct = HashSet::new();
        }
    }

    if non_null == 0 {
        return ColumnKind::Varchar;
    }
    if let Some(kind) = candidates.narrowest() {
        return kind;
    }
    if !distinct_overflow && distinct.len() <= (non_null / 10).max(1) {
        ColumnKind::Symbol
    } else {
        ColumnKind::Varchar
    }
}

/// Delimiters [`detect_delimiter`] chooses from, in order of preference.
const DELIMITER_CANDIDATES: [u8; 4] = [b',', b'\t', b'|', b';'];

/// Guesses the field delimiter from the first bytes of a file (QuestDB's `/imp` does this when
/// no `delimiter` is given): of `,`, tab, `|` and `;`, the one that appears (outside double
/// quotes) the same number of times on each of the first complete lines, most often; `,` when
/// none does.
pub fn detect_delimiter(head: &[u8]) -> u8 {
    // Whole lines only, at most 20; an unterminated head is one line.
    let mut lines: Vec<&[u8]> = head.split(|b| *b == b'\n').collect();
    if lines.len() > 1 {
        lines.pop();
    }
    lines.truncate(20);
    let mut best = (b',', 0usize);
    for candidate in DELIMITER_CANDIDATES {
        let mut counts = lines.iter().map(|line| {
            let mut quoted = false;
            line.iter()
                .filter(|&&b| {
                    if b == b'"' {
                        quoted = !quoted;
                    }
                    !quoted && b == candidate
                })
                .count()
        });
        let Some(first) = counts.next() else {
            continue;
        };
        if first > best.1 && counts.all(|c| c == first) {
            best = (candidate, first);
        }
    }
    best.0
}

/// Which non-string kinds every value seen so far parses as.
struct Candidates {
    boolean: bool,
    long: bool,
    double: bool,
    timestamp: bool,
    uuid: bool,
}

impl Candidates {
    fn all() -> Self {
        Self {
            boolean: true,
            long: true,
            double: true,
            timestamp: true,
            uuid: true,
        }
    }

    fn narrow(&mut self, value: &[u8]) {
        self.boolean = self.boolean && parse_bool(value).is_some();
        self.long = self.long && parse_i64(value).is_some();
        self.double = self.double && parse_f64(value).is_some();
        // A detected TIMESTAMP column can hold every sample value.
        self.timestamp = self.timestamp
            && parse_timestamp_nanos(value).is_some_and(sundial_storage::timestamp_in_range);
        self.uuid = self.uuid && parse_uuid(value).is_some();
    }

    fn narrowest(&self) -> Option<ColumnKind> {
        [
            (self.boolean, ColumnKind::Boolean),
            (self.long, ColumnKind::Long),
            (self.double, ColumnKind::Double),
            (self.timestamp, ColumnKind::Timestamp),
            (self.uuid, ColumnKind::Uuid),
        ]
        .into_iter()
        .find_map(|(possible, kind)| possible.then_some(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(values: &[&str]) -> ColumnKind {
        detect_kind(values.iter().map(|v| v.as_bytes()))
    }

    #[test]
    fn narrowest_kind() {
        assert_eq!(detect(&["true", "FALSE", ""]), ColumnKind::Boolean);
        assert_eq!(detect(&["1", "-2", "", "+3"]), ColumnKind::Long);
        assert_eq!(detect(&["1", "2.5"]), ColumnKind::Double);
        assert_eq!(detect(&["1", "9223372036854775808"]), ColumnKind::Double);
        assert_eq!(detect(&["NaN", "Infinity", "-inf"]), ColumnKind::Double);
        assert_eq!(
            detect(&["2016-01-01", "2016-01-01T02:17:08Z"]),
            ColumnKind::Timestamp
        );
        assert_eq!(
            detect(&["123e4567-e89b-12d3-a456-426614174000"]),
            ColumnKind::Uuid
        );
        assert_eq!(detect(&["", ""]), ColumnKind::Varchar);
        assert_eq!(detect(&[]), ColumnKind::Varchar);
        assert_eq!(detect(&[" 12 ", "13"]), ColumnKind::Long);
    }

    #[test]
    fn delimiters() {
        assert_eq!(detect_delimiter(b"a,b,c\n1,2,3\n"), b',');
        assert_eq!(detect_delimiter(b"a\tb\n1\t2\n"), b'\t');
        assert_eq!(detect_delimiter(b"a|b|c\n1|\"x,y\"|3\n1|2"), b'|');
        assert_eq!(detect_delimiter(b"a;b\n1,5;2,5\n"), b';');
        assert_eq!(detect_delimiter(b"single"), b',');
        assert_eq!(detect_delimiter(b""), b',');
    }

    #[test]
    fn symbol_versus_varchar() {
        let hosts: Vec<String> = (0..100).map(|i| format!("host{}", i % 10)).collect();
        assert_eq!(
            detect_kind(hosts.iter().map(|s| s.as_bytes())),
            ColumnKind::Symbol
        );
        let hosts: Vec<String> = (0..100).map(|i| format!("host{}", i % 11)).collect();
        assert_eq!(
            detect_kind(hosts.iter().map(|s| s.as_bytes())),
            ColumnKind::Varchar
        );
        assert_eq!(detect(&["a"]), ColumnKind::Symbol);
        assert_eq!(detect(&["a", "b"]), ColumnKind::Varchar);
        assert_eq!(detect(&["a", "a", "1"]), ColumnKind::Varchar);
        assert_eq!(detect(&["true", "1"]), ColumnKind::Varchar);
    }
}

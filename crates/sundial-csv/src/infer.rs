//! Type detection over the buffered sample.
//!
//! Invariant: detection never silently widens a column to text because of a few bad values.
//! A non-string kind is chosen when every non-empty sample value parses as it, or, failing
//! that, when all but a tolerated few do ([`tolerated_failures`]); those few are then refused
//! at load time like any other bad value (and reported). A column whose values are genuinely
//! mixed becomes SYMBOL or VARCHAR, and [`Detection::mixed`] says why, so the caller can
//! report it.

use std::collections::HashSet;

use crate::options::ColumnKind;
use crate::parse::{parse_bool, parse_f64, parse_i64, parse_timestamp_nanos, parse_uuid};

/// Upper bound on distinct values for a SYMBOL column.
pub const MAX_SYMBOL_DISTINCT: usize = 10_000;

/// How many of `non_null` sample values may fail to parse as a kind that is still chosen:
/// 5% of them (rounded down), and at least one from ten values on.
pub fn tolerated_failures(non_null: usize) -> usize {
    let share = non_null / 20;
    if non_null >= 10 { share.max(1) } else { share }
}

/// What [`detect_column`] found for one column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    /// The chosen kind.
    pub kind: ColumnKind,
    /// Sample values that do not parse as `kind` (only ever non-zero for a non-string kind
    /// chosen with [`tolerated_failures`]).
    pub failures: usize,
    /// Set when the column became SYMBOL or VARCHAR although most of its values are of one
    /// non-string kind.
    pub mixed: Option<Mixed>,
}

/// Why a mostly typed column fell back to text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mixed {
    /// The kind most values parse as.
    pub wanted: ColumnKind,
    /// How many non-empty sample values parse as `wanted`.
    pub parsed: usize,
    /// Non-empty sample values.
    pub non_null: usize,
    /// Position (0-based, among all values given) of the first value that does not.
    pub first_bad: usize,
}

/// Detects the kind of one column from its sample values (see [`detect_column`]).
pub fn detect_kind<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> ColumnKind {
    detect_column(values).kind
}

/// Detects the kind of one column from its sample values.
///
/// Empty values are NULL and ignored. The result is the narrowest kind every non-null value
/// parses as, in the order BOOLEAN, LONG, DOUBLE, TIMESTAMP, UUID (non-string values are
/// trimmed of ASCII whitespace first). Failing that, the kind with the fewest failures (the
/// narrowest of equals) when they are at most [`tolerated_failures`]. Failing those, the
/// column is SYMBOL if it has few distinct values (at most `max(1, non_null / 10)` and at most
/// [`MAX_SYMBOL_DISTINCT`]), otherwise VARCHAR; when more than half of its values are of one
/// non-string kind, [`Detection::mixed`] says which and where the first other value is. A
/// column without non-null values is VARCHAR.
pub fn detect_column<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Detection {
    let mut candidates = [
        Candidate::new(ColumnKind::Boolean),
        Candidate::new(ColumnKind::Long),
        Candidate::new(ColumnKind::Double),
        Candidate::new(ColumnKind::Timestamp),
        Candidate::new(ColumnKind::Uuid),
    ];
    let mut non_null: usize = 0;
    let mut distinct: HashSet<&'a [u8]> = HashSet::new();
    let mut distinct_overflow = false;

    for (position, value) in values.into_iter().enumerate() {
        if value.is_empty() {
            continue;
        }
        non_null += 1;
        let trimmed = value.trim_ascii();
        for candidate in &mut candidates {
            candidate.check(trimmed, position);
        }
        if !distinct_overflow && distinct.insert(value) && distinct.len() > MAX_SYMBOL_DISTINCT {
            distinct_overflow = true;
            distinct = HashSet::new();
        }
    }

    let text = |mixed| {
        let kind = if non_null > 0 && !distinct_overflow && distinct.len() <= (non_null / 10).max(1)
        {
            ColumnKind::Symbol
        } else {
            ColumnKind::Varchar
        };
        Detection {
            kind,
            failures: 0,
            mixed,
        }
    };
    if non_null == 0 {
        return text(None);
    }
    // `min_by_key` keeps the first (narrowest) of equals.
    let best = candidates
        .iter()
        .min_by_key(|c| c.failures)
        .expect("five candidates");
    if best.failures <= tolerated_failures(non_null) {
        return Detection {
            kind: best.kind,
            failures: best.failures,
            mixed: None,
        };
    }
    let parsed = non_null - best.failures;
    text((parsed * 2 > non_null).then(|| Mixed {
        wanted: best.kind,
        parsed,
        non_null,
        first_bad: best.first_failure.unwrap_or(0),
    }))
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

/// How the sample's values fare as one non-string kind.
struct Candidate {
    kind: ColumnKind,
    failures: usize,
    first_failure: Option<usize>,
}

impl Candidate {
    fn new(kind: ColumnKind) -> Self {
        Self {
            kind,
            failures: 0,
            first_failure: None,
        }
    }

    fn check(&mut self, value: &[u8], position: usize) {
        let ok = match self.kind {
            ColumnKind::Boolean => parse_bool(value).is_some(),
            ColumnKind::Long => parse_i64(value).is_some(),
            ColumnKind::Double => parse_f64(value).is_some(),
            // A detected TIMESTAMP column can hold every value that counts for it.
            ColumnKind::Timestamp => {
                parse_timestamp_nanos(value).is_some_and(sundial_storage::timestamp_in_range)
            }
            ColumnKind::Uuid => parse_uuid(value).is_some(),
            ColumnKind::Symbol | ColumnKind::Varchar => true,
        };
        if !ok {
            self.failures += 1;
            self.first_failure.get_or_insert(position);
        }
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
    fn a_few_bad_values_are_tolerated() {
        assert_eq!(tolerated_failures(9), 0);
        assert_eq!(tolerated_failures(10), 1);
        assert_eq!(tolerated_failures(59), 2);
        assert_eq!(tolerated_failures(10_000), 500);
        let mut values: Vec<String> = (0..99).map(|i| i.to_string()).collect();
        values.insert(40, "oops".into());
        let d = detect_column(values.iter().map(|s| s.as_bytes()));
        assert_eq!((d.kind, d.failures, d.mixed), (ColumnKind::Long, 1, None));
        // The kind with the fewest failures wins: one float among longs is DOUBLE, not a bad LONG.
        values[40] = "2.5".into();
        let d = detect_column(values.iter().map(|s| s.as_bytes()));
        assert_eq!((d.kind, d.failures), (ColumnKind::Double, 0));
        values[41] = "x".into();
        let d = detect_column(values.iter().map(|s| s.as_bytes()));
        assert_eq!((d.kind, d.failures), (ColumnKind::Double, 1));
        // Timestamps with one bad value; the empty values do not count.
        let mut stamps: Vec<&str> = vec!["2016-01-01T00:00:00Z"; 30];
        stamps.push("");
        stamps.push("yesterday");
        assert_eq!(detect(&stamps), ColumnKind::Timestamp);
    }

    #[test]
    fn mixed_columns_say_where() {
        let d = detect_column(["1", "2", "x", "3", "y"].iter().map(|s| s.as_bytes()));
        assert_eq!(d.kind, ColumnKind::Varchar);
        assert_eq!(
            d.mixed,
            Some(Mixed {
                wanted: ColumnKind::Long,
                parsed: 3,
                non_null: 5,
                first_bad: 2
            })
        );
        // No majority: plain text, nothing to say.
        let d = detect_column(["a", "b", "1"].iter().map(|s| s.as_bytes()));
        assert_eq!((d.kind, d.mixed), (ColumnKind::Varchar, None));
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

//! Checks shared by the parser's test files.

use sundial_ilp::{Line, LineParser, series_len};

/// The fields and timestamp of a line as text (NaN compares equal to itself there).
fn rest_of(line: &Line<'_>) -> String {
    let fields: Vec<String> = line.fields().map(|(k, v)| format!("{k:?}={v:?}")).collect();
    format!("{fields:?} {:?}", line.timestamp())
}

/// A line whose bytes delimit its series ([`series_len`]) parses to the same fields and
/// timestamp, and to the same error past the series, when the series is skipped
/// ([`LineParser::parse_fields`], which yields no measurement and no tags).
pub fn check_series_skipping(parser: &mut LineParser, line: &[u8]) {
    let Some(len) = series_len(line) else {
        return;
    };
    let whole = parser
        .parse_line(line)
        .map(|l| (l.series_len(), rest_of(&l)));
    let fields_only = parser.parse_fields(line, len).map(|l| {
        (
            l.measurement().raw().is_empty() && l.tag_count() == 0,
            rest_of(&l),
        )
    });
    match (whole, fields_only) {
        (Ok((series, rest)), Ok((no_series, other))) => {
            assert_eq!(series, Some(len), "{line:?}");
            assert_eq!(rest, other, "{line:?}");
            assert!(no_series, "{line:?}");
        }
        (Ok(_), Err(e)) => panic!("{line:?}: parse_fields refused a valid line: {e}"),
        (Err(e), Err(other)) if e.offset > len => assert_eq!(e, other, "{line:?}"),
        (Err(_), _) => {}
    }
}

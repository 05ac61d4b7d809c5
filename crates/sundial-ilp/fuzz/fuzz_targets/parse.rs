//! `cargo +nightly fuzz run parse` (from crates/sundial-ilp): split and parse arbitrary input,
//! whole and streamed in chunks, touching every part of every parsed line.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sundial_ilp::{FieldValue, LineParser, LineSpan, LineSplitter, split_complete};

/// The fields and timestamp of a parsed line, for comparing the two ways of parsing it.
type Rest = (Vec<(Vec<u8>, String)>, Option<i64>);

fn rest_of(line: &sundial_ilp::Line<'_>) -> Rest {
    let fields = line
        .fields()
        .map(|(k, v)| (k.raw().to_vec(), format!("{v:?}")))
        .collect();
    (fields, line.timestamp())
}

fn touch(parser: &mut LineParser, scratch: &mut String, line: &[u8]) {
    // A line whose series its bytes delimit parses the same with the series skipped; its
    // errors past the series (which ends at the space before the fields) are the same.
    let whole = parser.parse_line(line).map(|l| (l.series_len(), rest_of(&l)));
    if let Some(len) = sundial_ilp::series_len(line) {
        let fields_only = parser.parse_fields(line, len).map(|l| rest_of(&l));
        match (&whole, fields_only) {
            (Ok((series, rest)), Ok(other)) => {
                assert_eq!(*series, Some(len));
                assert_eq!(*rest, other);
            }
            (Ok(_), Err(e)) => panic!("parse_fields refused a valid line: {e}"),
            (Err(e), Err(other)) if e.offset > len => assert_eq!(*e, other),
            (Err(_), _) => {}
        }
    }
    match parser.parse_line(line) {
        Ok(parsed) => {
            assert!(parsed.field_count() >= 1);
            let _ = parsed.measurement().unescape(scratch).len();
            for (k, v) in parsed.tags() {
                let _ = k.unescape(scratch).len() + v.to_string().len();
            }
            for (k, v) in parsed.fields() {
                let _ = k.to_cow();
                if let FieldValue::Str(s) = v {
                    let _ = s.unescape(scratch).len();
                }
            }
            let _ = parsed.timestamp();
        }
        Err(e) => {
            assert!(e.offset <= line.len());
            let _ = e.to_string();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks the limits, so short and long lines both get exercised.
    let (max, chunk) = match data.first() {
        Some(&b) => (usize::from(b) * 4, usize::from(b % 31) + 1),
        None => (0, 1),
    };
    let mut parser = LineParser::new(max.max(64));
    let mut scratch = String::new();

    touch(&mut parser, &mut scratch, data);

    split_complete(data, max, |span| {
        if let LineSpan::Line(range) = span {
            assert!(range.len() <= max);
            touch(&mut parser, &mut scratch, &data[range]);
        }
    });

    let mut splitter = LineSplitter::new(max);
    let mut pending = Vec::new();
    for piece in data.chunks(chunk) {
        pending.extend_from_slice(piece);
        let consumed = splitter.split(&pending, |span| {
            if let LineSpan::Line(range) = span {
                touch(&mut parser, &mut scratch, &pending[range]);
            }
        });
        assert!(consumed <= pending.len());
        pending.drain(..consumed);
        assert!(pending.len() <= max);
    }
    splitter.split_final(&pending, |span| {
        if let LineSpan::Line(range) = span {
            touch(&mut parser, &mut scratch, &pending[range]);
        }
    });
});

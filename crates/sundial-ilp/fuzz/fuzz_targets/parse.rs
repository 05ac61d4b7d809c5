//! `cargo +nightly fuzz run parse` (from crates/sundial-ilp): split and parse arbitrary input,
//! whole and streamed in chunks, touching every part of every parsed line.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sundial_ilp::{FieldValue, LineParser, LineSpan, LineSplitter, split_complete};

// The parser's own tests check the same invariant over their inputs.
#[path = "../../tests/common/mod.rs"]
mod common;

fn touch(parser: &mut LineParser, scratch: &mut String, line: &[u8]) {
    // A line whose series its bytes delimit parses the same with the series skipped.
    common::check_series_skipping(parser, line);
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

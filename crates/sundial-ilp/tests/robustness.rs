//! Pseudo-random and mutated input: nothing panics, invariants hold, escaping round-trips.

mod common;

use common::check_series_skipping;
use sundial_ilp::{FieldValue, LineParser, LineSpan, LineSplitter, split_complete, split_lines};

/// xorshift64*: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// Bytes that matter to the syntax, over-represented so random input reaches deep states.
const INTERESTING: &[u8] = b",= \"\\\n\r\t#-.0123456789eEiuftTFNaIy";

fn random_bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| match rng.below(4) {
            0 => rng.next() as u8,
            1 => b'a' + rng.below(26) as u8,
            _ => rng.pick(INTERESTING),
        })
        .collect()
}

/// Parses `line` and touches everything the result offers.
fn exercise_line(parser: &mut LineParser, scratch: &mut String, line: &[u8]) {
    check_series_skipping(parser, line);
    match parser.parse_line(line) {
        Ok(parsed) => {
            assert!(parsed.field_count() >= 1);
            assert!(!parsed.measurement().raw().is_empty());
            let _ = parsed.measurement().unescape(scratch).len();
            for (k, v) in parsed.tags() {
                assert!(!k.raw().is_empty() && !v.raw().is_empty());
                let _ = k.unescape(scratch).len() + v.to_string().len();
            }
            for (k, v) in parsed.fields() {
                assert!(!k.raw().is_empty());
                let _ = k.unescape(scratch).len();
                if let FieldValue::Str(s) = v {
                    let _ = s.unescape(scratch).len() + s.to_cow().len();
                    assert!(s.as_str().is_some() != s.is_escaped());
                }
            }
            let _ = parsed.timestamp();
            let _ = format!("{parsed:?}");
        }
        Err(e) => {
            assert!(e.offset <= line.len(), "{e:?} for {} bytes", line.len());
            let _ = e.to_string();
        }
    }
}

/// Checks the spans a splitter reports over `buf`.
fn check_spans(buf: &[u8], spans: &[LineSpan], consumed: usize) {
    assert!(consumed <= buf.len());
    let mut last_end = 0;
    for span in spans {
        let range = match span {
            LineSpan::Line(r) | LineSpan::TooLong(r) => r.clone(),
        };
        assert!(range.start >= last_end && range.start <= range.end && range.end <= buf.len());
        last_end = range.end;
    }
}

fn exercise_split(parser: &mut LineParser, scratch: &mut String, buf: &[u8], max: usize) {
    let mut spans = Vec::new();
    let consumed = split_lines(buf, max, |s| spans.push(s));
    check_spans(buf, &spans, consumed);
    for span in &spans {
        if let LineSpan::Line(r) = span {
            assert!(r.len() <= max);
            exercise_line(parser, scratch, &buf[r.clone()]);
        }
    }
    spans.clear();
    split_complete(buf, max, |s| spans.push(s));
    check_spans(buf, &spans, 0);

    // Streaming in small reads: bounded buffering.
    let mut splitter = LineSplitter::new(max);
    let mut pending = Vec::new();
    for piece in buf.chunks(7) {
        pending.extend_from_slice(piece);
        spans.clear();
        let consumed = splitter.split(&pending, |s| spans.push(s));
        check_spans(&pending, &spans, consumed);
        pending.drain(..consumed);
        assert!(pending.len() <= max);
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut parser = LineParser::new(256);
    let mut scratch = String::new();
    for case in 0..300_000 {
        let len = rng.below(if case % 100 == 0 { 600 } else { 48 });
        let bytes = random_bytes(&mut rng, len);
        exercise_line(&mut parser, &mut scratch, &bytes);
        if case % 4 == 0 {
            let max = rng.pick(&[0, 1, 8, 32, 256]);
            exercise_split(&mut parser, &mut scratch, &bytes, max);
        }
    }
}

const VALID: &[&str] = &[
    "cpu,hostname=host_0,region=eu-central-1,rack=6 usage_user=58i,usage_system=2i,usage_idle=24.5 1451606400000000000",
    "readings,name=truck_0,fleet=South latitude=72.45258,longitude=-68.8e1,velocity=0 1451606400000000000",
    r#"m\ x\,y,t\ k=v\=w s="a \"b\" \\ c\nd",b=TRUE,u=18446744073709551615u,i=-9223372036854775808i -1"#,
    "weather,loc=z temp=NaN,hi=Infinity,lo=-Infinity,note=\"multi\nline, with = signs\"",
    "  x,a=1,a=2 f=t,g=F 0\r",
];

#[test]
fn mutated_valid_lines_never_panic() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut parser = LineParser::new(4096);
    let mut scratch = String::new();
    for line in VALID {
        assert!(parser.parse_line(line.as_bytes()).is_ok(), "{line}");
    }
    for _ in 0..200_000 {
        let mut bytes = rng.pick(VALID).as_bytes().to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len() + 1);
            match rng.below(6) {
                0 if at < bytes.len() => bytes[at] = rng.pick(INTERESTING),
                1 if at < bytes.len() => bytes[at] = rng.next() as u8,
                2 => bytes.insert(at, rng.pick(INTERESTING)),
                3 if at < bytes.len() => {
                    bytes.remove(at);
                }
                4 => bytes.truncate(at),
                _ => {
                    let from = rng.below(bytes.len() + 1);
                    let to = (from + rng.below(16)).min(bytes.len());
                    let copy = bytes[from..to].to_vec();
                    bytes.splice(at..at, copy);
                }
            }
        }
        exercise_line(&mut parser, &mut scratch, &bytes);
        let mut joined = bytes.clone();
        joined.push(b'\n');
        joined.extend_from_slice(rng.pick(VALID).as_bytes());
        exercise_split(&mut parser, &mut scratch, &joined, rng.pick(&[16, 4096]));
    }
}

/// A random name from characters that can all be written in escaped form. (A backslash followed
/// by an escapable character, or at the end, has no escaped form in ILP names, so the only
/// backslashes generated are followed by a letter.)
fn random_name(rng: &mut Rng, alphabet: &[&str]) -> String {
    let mut name = String::new();
    for _ in 0..1 + rng.below(6) {
        name.push_str(rng.pick(alphabet));
    }
    name
}

fn escape(name: &str, special: &[char]) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if special.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[test]
fn escaping_round_trips() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    let names: &[&str] = &[
        "a", "Z", "9", "_", ",", "=", " ", "\"", "é", "✓", "\\q", "#", "-",
    ];
    let strings: &[&str] = &[
        "a", " ", ",", "=", "\"", "\\", "\n", "\r", "é", "\\n", "#", "",
    ];
    let mut parser = LineParser::new(1 << 20);
    let mut scratch = String::new();
    let mut input = Vec::new();
    let mut expected = Vec::new();
    for _ in 0..20_000 {
        let mut measurement = random_name(&mut rng, names);
        if measurement.starts_with('#') {
            measurement.insert(0, 'm');
        }
        let tags: Vec<(String, String)> = (0..rng.below(4))
            .map(|_| (random_name(&mut rng, names), random_name(&mut rng, names)))
            .collect();
        let key = random_name(&mut rng, names);
        let value = random_name(&mut rng, strings);
        let mut line = escape(&measurement, &[',', ' ']);
        for (k, v) in &tags {
            line.push(',');
            line.push_str(&escape(k, &[',', '=', ' ']));
            line.push('=');
            line.push_str(&escape(v, &[',', '=', ' ']));
        }
        line.push(' ');
        line.push_str(&escape(&key, &[',', '=', ' ']));
        line.push_str("=\"");
        line.push_str(&escape(&value, &['"', '\\']));
        line.push_str("\" 1\n");
        input.extend_from_slice(line.as_bytes());
        expected.push((measurement, tags, key, value));
    }

    let mut got = Vec::new();
    split_complete(&input, 1 << 20, |span| {
        let LineSpan::Line(range) = span else {
            panic!("too long")
        };
        let line = parser
            .parse_line(&input[range.clone()])
            .unwrap_or_else(|e| panic!("{e} in {:?}", String::from_utf8_lossy(&input[range])));
        let tags: Vec<(String, String)> = line
            .tags()
            .map(|(k, v)| (k.to_string(), v.unescape(&mut scratch).to_string()))
            .collect();
        let (key, value) = line.fields().next().unwrap();
        let FieldValue::Str(value) = value else {
            panic!("not a string")
        };
        assert_eq!(line.field_count(), 1);
        assert_eq!(line.timestamp(), Some(1));
        got.push((
            line.measurement().to_cow().into_owned(),
            tags,
            key.to_string(),
            value.unescape(&mut scratch).to_string(),
        ));
    });
    assert_eq!(got.len(), expected.len());
    for (got, want) in got.iter().zip(&expected) {
        assert_eq!(got, want);
    }
}

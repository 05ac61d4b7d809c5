//! The ILP syntax, error reporting and line splitting, through the public API.

mod common;

use common::check_series_skipping;
use sundial_ilp::{
    ErrorKind, FieldValue, LineParser, LineSpan, LineSplitter, ParseError, Precision, TextKind,
    is_blank_or_comment, series_len, split_complete, split_lines,
};

const MAX: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq)]
enum V {
    F(f64),
    I(i64),
    U(u64),
    S(String),
    B(bool),
    Micros(i64),
    Nanos(i64),
}

#[derive(Debug, PartialEq)]
struct Parsed {
    measurement: String,
    tags: Vec<(String, String)>,
    fields: Vec<(String, V)>,
    timestamp: Option<i64>,
}

/// Parses `bytes` whole, after checking that skipping its series (when [`series_len`]
/// delimits it) agrees on the fields, the timestamp and any error past the series.
fn parse_bytes(bytes: &[u8]) -> Result<Parsed, ParseError> {
    let mut parser = LineParser::new(MAX);
    check_series_skipping(&mut parser, bytes);
    parser.parse_line(bytes).map(|line| to_parsed(&line))
}

fn to_parsed(line: &sundial_ilp::Line<'_>) -> Parsed {
    assert_eq!(line.tag_count(), line.tags().len());
    assert_eq!(line.field_count(), line.fields().len());
    Parsed {
        measurement: line.measurement().to_string(),
        tags: line
            .tags()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        fields: line
            .fields()
            .map(|(k, v)| {
                let v = match v {
                    FieldValue::Float(f) => V::F(f),
                    FieldValue::Integer(i) => V::I(i),
                    FieldValue::UInteger(u) => V::U(u),
                    FieldValue::Str(s) => V::S(s.to_string()),
                    FieldValue::Bool(b) => V::B(b),
                    FieldValue::TimestampMicros(t) => V::Micros(t),
                    FieldValue::TimestampNanos(t) => V::Nanos(t),
                };
                (k.to_string(), v)
            })
            .collect(),
        timestamp: line.timestamp(),
    }
}

fn parse(line: &str) -> Parsed {
    match parse_bytes(line.as_bytes()) {
        Ok(parsed) => parsed,
        Err(e) => panic!("{line:?}: {e}"),
    }
}

fn error(line: &[u8]) -> (ErrorKind, usize) {
    match parse_bytes(line) {
        Ok(parsed) => panic!("{:?} parsed: {parsed:?}", String::from_utf8_lossy(line)),
        Err(e) => (e.kind, e.offset),
    }
}

fn single_field(line: &str) -> V {
    let parsed = parse(line);
    assert_eq!(parsed.fields.len(), 1, "{line}");
    parsed.fields[0].1.clone()
}

fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn series_length_is_known_from_the_bytes_only_for_plain_lines() {
    assert_eq!(series_len(b"cpu,host=a,region=b f=1 1"), Some(19));
    assert_eq!(series_len(b"cpu f=1"), Some(3));
    assert_eq!(series_len(b"m,t=a=b f=1"), Some(7));
    // Whatever follows the first space is the parser's to judge.
    assert_eq!(series_len(b"cpu ,=x"), Some(3));
    assert_eq!(series_len(b"cpu,host=a\\ b f=1"), None);
    assert_eq!(series_len(b"c\\,pu f=1"), None);
    assert_eq!(series_len(b" cpu f=1"), None);
    assert_eq!(series_len(b"\tcpu f=1"), None);
    assert_eq!(series_len(b"#cpu f=1"), None);
    assert_eq!(series_len(b"cpu"), None);
    assert_eq!(series_len(b""), None);
    // A backslash after the series does not matter.
    assert_eq!(series_len(b"cpu s=\"a\\\"b\""), Some(3));

    let mut parser = LineParser::new(MAX);
    let line = parser.parse_line(b"  cpu,host=a f=1").unwrap();
    assert_eq!(line.series_len(), None);
    let line = parser.parse_line(b"cpu,h\\ ost=a f=1").unwrap();
    assert_eq!(line.series_len(), Some(12));
    // Errors from parse_fields count from the start of the line.
    let e = parser.parse_fields(b"cpu,host=a f=x", 10).unwrap_err();
    assert_eq!((e.kind, e.offset), (ErrorKind::InvalidFieldValue, 13));
    let e = parser
        .parse_fields(b"cpu,host=a f=\"\xff\"", 10)
        .unwrap_err();
    assert_eq!((e.kind, e.offset), (ErrorKind::InvalidUtf8, 14));
    let e = parser.parse_fields(b"cpu,host=a ", 10).unwrap_err();
    assert_eq!((e.kind, e.offset), (ErrorKind::MissingFields, 11));
}

#[test]
fn tsbs_cpu_line() {
    let line = "cpu,hostname=host_0,region=eu-central-1,datacenter=eu-central-1a,rack=6,os=Ubuntu15.10,arch=x86,team=SF,service=19,service_version=1,service_environment=test usage_user=58i,usage_system=2i,usage_idle=24i,usage_nice=61i,usage_iowait=22i,usage_irq=63i,usage_softirq=6i,usage_steal=44i,usage_guest=80i,usage_guest_nice=38i 1451606400000000000";
    let p = parse(line);
    assert_eq!(p.measurement, "cpu");
    assert_eq!(
        p.tags,
        tags(&[
            ("hostname", "host_0"),
            ("region", "eu-central-1"),
            ("datacenter", "eu-central-1a"),
            ("rack", "6"),
            ("os", "Ubuntu15.10"),
            ("arch", "x86"),
            ("team", "SF"),
            ("service", "19"),
            ("service_version", "1"),
            ("service_environment", "test"),
        ])
    );
    let values: Vec<_> = p.fields.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(
        values,
        [58, 2, 24, 61, 22, 63, 6, 44, 80, 38].map(V::I).to_vec()
    );
    assert_eq!(p.fields[0].0, "usage_user");
    assert_eq!(p.fields[9].0, "usage_guest_nice");
    assert_eq!(p.timestamp, Some(1451606400000000000));
}

#[test]
fn tsbs_iot_lines() {
    let p = parse(
        "readings,name=truck_0,fleet=South,driver=Trish,model=H-2,device_version=v2.3 latitude=72.45258,longitude=68.83761,elevation=255,velocity=0,heading=181,grade=0,fuel_consumption=25 1451606400000000000",
    );
    assert_eq!(p.measurement, "readings");
    assert_eq!(p.tags.len(), 5);
    assert_eq!(p.tags[4], ("device_version".into(), "v2.3".into()));
    assert_eq!(p.fields[0], ("latitude".into(), V::F(72.45258)));
    assert_eq!(p.fields[2], ("elevation".into(), V::F(255.0)));
    assert_eq!(p.fields[6], ("fuel_consumption".into(), V::F(25.0)));

    // A missing `name` tag and missing fields, as TSBS generates them.
    let p = parse(
        "readings,fleet=South,driver=Albert,model=G-2000,device_version=v1.5 load_capacity=5000,fuel_capacity=300,nominal_fuel_consumption=19,latitude=51.1578,longitude=121.33627,elevation=474,velocity=16,heading=298,grade=7,fuel_consumption=36.3 1451606880000000000",
    );
    assert_eq!(p.tags[0], ("fleet".into(), "South".into()));
    assert_eq!(
        p.fields.last(),
        Some(&("fuel_consumption".into(), V::F(36.3)))
    );
    let p = parse(
        "diagnostics,fleet=West,driver=Trish,model=F-150,device_version=v2.0 load_capacity=2000,fuel_capacity=200,nominal_fuel_consumption=15,fuel_state=0.9,current_load=4616,status=0i 1451607000000000000",
    );
    assert_eq!(p.measurement, "diagnostics");
    assert_eq!(p.fields.last(), Some(&("status".into(), V::I(0))));
}

#[test]
fn minimal_lines() {
    assert_eq!(
        parse("m f=1"),
        Parsed {
            measurement: "m".into(),
            tags: vec![],
            fields: vec![("f".into(), V::F(1.0))],
            timestamp: None,
        }
    );
    let p = parse("m,t=v f=1i,g=\"s\",h=t 42");
    assert_eq!(p.tags, tags(&[("t", "v")]));
    assert_eq!(
        p.fields,
        vec![
            ("f".into(), V::I(1)),
            ("g".into(), V::S("s".into())),
            ("h".into(), V::B(true)),
        ]
    );
    assert_eq!(p.timestamp, Some(42));
}

#[test]
fn measurement_escapes() {
    let mut parser = LineParser::new(MAX);
    let line = parser.parse_line(br"my\ meas\,ure=x f=1").unwrap();
    let m = line.measurement();
    assert_eq!(m.kind(), TextKind::Measurement);
    assert!(m.is_escaped());
    assert_eq!(m.raw(), br"my\ meas\,ure=x");
    assert_eq!(m.as_str(), None);
    assert_eq!(m.to_string(), "my meas,ure=x");
    // `\=` is an escape in a measurement too (QuestDB's clients write it); `\y` is none.
    let p = parse(r"m\=x\y f=1");
    assert_eq!(p.measurement, r"m=x\y");
    let mut parser = LineParser::new(MAX);
    let line = parser.parse_line(br"m\y f=1").unwrap();
    assert!(!line.measurement().is_escaped());
    assert_eq!(line.measurement().as_str(), Some(r"m\y"));
    // Escapes at the start and end of the measurement, and before the tags.
    assert_eq!(parse(r"\ m\, f=1").measurement, " m,");
    assert_eq!(parse(r"m\ ,t=1 f=1").tags, tags(&[("t", "1")]));
    // A backslash pairs with the next byte: `\\` is one backslash.
    assert_eq!(parse(r"m\\ f=1").measurement, r"m\");
}

#[test]
fn tag_and_field_key_escapes() {
    let p = parse(r"m,t\ k\,e\=y=v\ a\,l\=ue,x=y f\ i\,e\=ld=1i");
    assert_eq!(p.tags, tags(&[("t k,e=y", "v a,l=ue"), ("x", "y")]));
    assert_eq!(p.fields, vec![("f i,e=ld".into(), V::I(1))]);

    let mut parser = LineParser::new(MAX);
    let line = parser.parse_line(br"m,t=a\b,u=c\,d f\x=1").unwrap();
    let (k, v) = line.tags().next().unwrap();
    assert_eq!((k.as_str(), v.as_str()), (Some("t"), Some(r"a\b")));
    assert_eq!(v.kind(), TextKind::Name);
    let (_, v) = line.tags().nth(1).unwrap();
    assert!(v.is_escaped());
    assert_eq!(v.raw(), br"c\,d");
    let mut scratch = String::new();
    assert_eq!(v.unescape(&mut scratch), "c,d");
    let (k, _) = line.fields().next().unwrap();
    assert_eq!(k.as_str(), Some(r"f\x"));
    // `=` inside a tag value needs no escape; UTF-8 names are fine.
    assert_eq!(parse("m,t=a=b f=1").tags, tags(&[("t", "a=b")]));
    assert_eq!(
        parse("mesure,clé=été champ=1").tags,
        tags(&[("clé", "été")])
    );
    assert_eq!(parse("mesure,clé=été champ=1").fields[0].0, "champ");
}

#[test]
fn quoted_strings() {
    let cases: &[(&str, &str)] = &[
        (r#"m s="""#, ""),
        (r#"m s="plain""#, "plain"),
        (r#"m s="a \"quoted\" word""#, r#"a "quoted" word"#),
        (r#"m s="C:\\temp\\""#, r"C:\temp\"),
        (
            r#"m s="spaces, commas, = signs""#,
            "spaces, commas, = signs",
        ),
        ("m s=\"line1\nline2\"", "line1\nline2"),
        (r#"m s="literal \n and \t""#, r"literal \n and \t"),
        (r#"m s="\\\"""#, r#"\""#),
        (r#"m s="ünïcödé ✓""#, "ünïcödé ✓"),
        (r##"m s="#not a comment""##, "#not a comment"),
    ];
    for (line, want) in cases {
        assert_eq!(single_field(line), V::S(want.to_string()), "{line}");
    }
    let p = parse(r#"m a="x,y=z w",b="",c="q\"" 7"#);
    assert_eq!(
        p.fields,
        vec![
            ("a".into(), V::S("x,y=z w".into())),
            ("b".into(), V::S(String::new())),
            ("c".into(), V::S("q\"".into())),
        ]
    );
    assert_eq!(p.timestamp, Some(7));

    let mut parser = LineParser::new(MAX);
    let line = parser
        .parse_line(br#"m a="plain",b="esc\"aped",c="lit\eral""#)
        .unwrap();
    let values: Vec<_> = line.fields().map(|(_, v)| v).collect();
    let FieldValue::Str(a) = values[0] else {
        panic!()
    };
    let FieldValue::Str(b) = values[1] else {
        panic!()
    };
    let FieldValue::Str(c) = values[2] else {
        panic!()
    };
    assert_eq!((a.as_str(), a.kind()), (Some("plain"), TextKind::Quoted));
    assert_eq!((b.is_escaped(), b.raw()), (true, &br#"esc\"aped"#[..]));
    assert_eq!(b.to_cow(), "esc\"aped");
    assert_eq!(c.as_str(), Some(r"lit\eral"));
}

#[test]
fn timestamp_fields() {
    assert_eq!(
        single_field("m t=1451606400000000t"),
        V::Micros(1_451_606_400_000_000)
    );
    assert_eq!(single_field("m t=-5t"), V::Micros(-5));
    assert_eq!(
        single_field("m t=1451606400000000000n"),
        V::Nanos(1_451_606_400_000_000_000)
    );
    assert_eq!(single_field("m t=t"), V::B(true));
    assert_eq!(error(b"m t=12xt"), (ErrorKind::InvalidFieldValue, 4));
    assert_eq!(error(b"m t=n"), (ErrorKind::InvalidFieldValue, 4));
    assert_eq!(
        error(b"m t=99999999999999999999t").0,
        ErrorKind::IntegerOutOfRange
    );
}

#[test]
fn booleans() {
    for (text, value) in [
        ("t", true),
        ("T", true),
        ("true", true),
        ("True", true),
        ("TRUE", true),
        ("f", false),
        ("F", false),
        ("false", false),
        ("False", false),
        ("FALSE", false),
    ] {
        assert_eq!(single_field(&format!("m b={text}")), V::B(value), "{text}");
        assert_eq!(parse(&format!("m b={text},x=1 5")).fields[0].1, V::B(value));
    }
    for bad in ["tRue", "yes", "TRUe", "truth"] {
        assert_eq!(
            error(format!("m b={bad}").as_bytes()),
            (ErrorKind::InvalidFieldValue, 4)
        );
    }
}

#[test]
fn integers() {
    assert_eq!(single_field("m i=0i"), V::I(0));
    assert_eq!(single_field("m i=-123i"), V::I(-123));
    assert_eq!(single_field("m i=9223372036854775807i"), V::I(i64::MAX));
    assert_eq!(single_field("m i=-9223372036854775808i"), V::I(i64::MIN));
    assert_eq!(
        error(b"m i=9223372036854775808i"),
        (ErrorKind::IntegerOutOfRange, 4)
    );
    assert_eq!(
        error(b"m a=1,i=-9223372036854775809i"),
        (ErrorKind::IntegerOutOfRange, 8)
    );
    assert_eq!(error(b"m i=1.5i"), (ErrorKind::InvalidFieldValue, 4));
    assert_eq!(error(b"m i=i"), (ErrorKind::InvalidFieldValue, 4));

    assert_eq!(single_field("m u=123u"), V::U(123));
    assert_eq!(single_field("m u=18446744073709551615u"), V::U(u64::MAX));
    assert_eq!(
        error(b"m u=18446744073709551616u"),
        (ErrorKind::IntegerOutOfRange, 4)
    );
    assert_eq!(error(b"m u=-1u"), (ErrorKind::IntegerOutOfRange, 4));
    assert_eq!(error(b"m u=1xu"), (ErrorKind::InvalidFieldValue, 4));
}

#[test]
fn floats() {
    for (text, want) in [
        ("1", 1.0),
        ("1.5", 1.5),
        ("-1.5", -1.5),
        ("-1.5e10", -1.5e10),
        ("1E-3", 1e-3),
        ("2.5e+2", 250.0),
        ("0.000001", 1e-6),
        (".5", 0.5),
        ("1.", 1.0),
        ("72.45258", 72.45258),
        ("1.7976931348623157e308", f64::MAX),
        ("Infinity", f64::INFINITY),
        ("-Infinity", f64::NEG_INFINITY),
    ] {
        assert_eq!(single_field(&format!("m x={text}")), V::F(want), "{text}");
    }
    let V::F(nan) = single_field("m x=NaN") else {
        panic!()
    };
    assert!(nan.is_nan());
    assert_eq!(error(b"m x=1e999"), (ErrorKind::FloatOutOfRange, 4));
    for bad in ["nan", "inf", "+1", "1e", "1.2.3", "0x1F", "12abc", "-"] {
        assert_eq!(
            error(format!("m x={bad}").as_bytes()),
            (ErrorKind::InvalidFieldValue, 4),
            "{bad}"
        );
    }
}

#[test]
fn timestamps() {
    assert_eq!(parse("m f=1").timestamp, None);
    assert_eq!(parse("m f=1 ").timestamp, None);
    assert_eq!(parse("m f=1 0").timestamp, Some(0));
    assert_eq!(parse("m f=1 -1").timestamp, Some(-1));
    assert_eq!(
        parse("m f=1 -9223372036854775808").timestamp,
        Some(i64::MIN)
    );
    assert_eq!(parse("m f=1 9223372036854775807").timestamp, Some(i64::MAX));
    assert_eq!(parse("m f=1   123   ").timestamp, Some(123));
    assert_eq!(parse("m,t=1   f=1").fields.len(), 1);
    assert_eq!(parse("m f=\"a b\" 5").timestamp, Some(5));
    assert_eq!(
        error(b"m f=1 9223372036854775808"),
        (ErrorKind::InvalidTimestamp, 6)
    );
    assert_eq!(error(b"m f=1 12a"), (ErrorKind::InvalidTimestamp, 6));
    assert_eq!(error(b"m f=1 1.5"), (ErrorKind::InvalidTimestamp, 6));
    assert_eq!(error(b"m f=1 -"), (ErrorKind::InvalidTimestamp, 6));
    assert_eq!(error(b"m f=1 +5"), (ErrorKind::InvalidTimestamp, 6));
    assert_eq!(error(b"m f=1 123 456"), (ErrorKind::TrailingCharacters, 10));
    assert_eq!(error(b"m f=1 123  x"), (ErrorKind::TrailingCharacters, 11));
}

#[test]
fn whitespace_and_crlf() {
    assert_eq!(parse("m f=1 5\r").timestamp, Some(5));
    assert_eq!(parse("m f=1\r").fields[0].1, V::F(1.0));
    assert_eq!(parse("m s=\"x\"\r").fields[0].1, V::S("x".into()));
    assert_eq!(parse("  \tm f=1").measurement, "m");
    // Only one trailing `\r` is a line ending.
    assert_eq!(error(b"m f=1\r\r"), (ErrorKind::InvalidFieldValue, 4));
    let mut parser = LineParser::new(MAX);
    assert_eq!(parser.parse_line(b"m f=1 5\r").unwrap().as_str(), "m f=1 5");
}

#[test]
fn duplicate_keys_are_kept() {
    let p = parse("m,t=1,t=2 f=1,f=2i");
    assert_eq!(p.tags, tags(&[("t", "1"), ("t", "2")]));
    assert_eq!(
        p.fields,
        vec![("f".into(), V::F(1.0)), ("f".into(), V::I(2))]
    );
}

#[test]
fn every_error_kind_with_its_offset() {
    let cases: &[(&[u8], ErrorKind, usize)] = &[
        (b"", ErrorKind::EmptyMeasurement, 0),
        (b"   ", ErrorKind::EmptyMeasurement, 3),
        (b"\r", ErrorKind::EmptyMeasurement, 0),
        (b",t=1 f=1", ErrorKind::EmptyMeasurement, 0),
        (b" ,t=1 f=1", ErrorKind::EmptyMeasurement, 1),
        (b"# a comment", ErrorKind::Comment, 0),
        (b"  #x f=1", ErrorKind::Comment, 2),
        (b"m", ErrorKind::MissingFields, 1),
        (b"m ", ErrorKind::MissingFields, 2),
        (b"m,t=1", ErrorKind::MissingFields, 5),
        (b"m,t=1   ", ErrorKind::MissingFields, 8),
        (br"m\ f=1", ErrorKind::MissingFields, 6),
        (b"m,t f=1", ErrorKind::MissingTagValue, 3),
        (b"m,t", ErrorKind::MissingTagValue, 3),
        (b"m,t= f=1", ErrorKind::MissingTagValue, 4),
        (b"m,t=,u=1 f=1", ErrorKind::MissingTagValue, 4),
        (b"m,t=", ErrorKind::MissingTagValue, 4),
        (b"m f", ErrorKind::MissingFieldValue, 3),
        (b"m f 1", ErrorKind::MissingFieldValue, 3),
        (b"m f,g=1", ErrorKind::MissingFieldValue, 3),
        (b"m f=", ErrorKind::MissingFieldValue, 4),
        (b"m f=,g=1", ErrorKind::MissingFieldValue, 4),
        (b"m f= 1", ErrorKind::MissingFieldValue, 4),
        (b"m g=1,f", ErrorKind::MissingFieldValue, 7),
        (b"m,=v f=1", ErrorKind::EmptyKey, 2),
        (b"m, f=1", ErrorKind::EmptyKey, 2),
        (b"m,", ErrorKind::EmptyKey, 2),
        (b"m =1", ErrorKind::EmptyKey, 2),
        (b"m f=1,", ErrorKind::EmptyKey, 6),
        (b"m f=1,,g=1", ErrorKind::EmptyKey, 6),
        (b"m f=1, g=1", ErrorKind::EmptyKey, 6),
        (b"m f=abc", ErrorKind::InvalidFieldValue, 4),
        (b"m g=1,f=12x 1", ErrorKind::InvalidFieldValue, 8),
        (b"m f=\"a\"b", ErrorKind::MissingSeparator, 7),
        (b"m f=\"a\"\"b\"", ErrorKind::MissingSeparator, 7),
        (b"m f=9223372036854775808i", ErrorKind::IntegerOutOfRange, 4),
        (b"m f=1e400", ErrorKind::FloatOutOfRange, 4),
        (b"m f=\"abc", ErrorKind::UnterminatedString, 4),
        (b"m f=\"abc\\\"", ErrorKind::UnterminatedString, 4),
        (b"m f=\"abc\\", ErrorKind::UnterminatedString, 4),
        (b"m a=1,f=\"", ErrorKind::UnterminatedString, 8),
        (b"m f=1 x", ErrorKind::InvalidTimestamp, 6),
        (b"m f=1 1 2", ErrorKind::TrailingCharacters, 8),
        (b"m,t=\xff f=1", ErrorKind::InvalidUtf8, 4),
        (b"\xc3 f=1", ErrorKind::InvalidUtf8, 0),
        (b"m f=\"ok \xe2\x82\"", ErrorKind::InvalidUtf8, 8),
        (b"m f\xc0=1", ErrorKind::InvalidUtf8, 3),
    ];
    for &(line, kind, offset) in cases {
        assert_eq!(
            error(line),
            (kind, offset),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn nul_bytes_are_rejected_wherever_they_are() {
    let cases: &[(&[u8], usize)] = &[
        (b"m\0x f=1", 1),
        (b"\0 f=1", 0),
        (b"m,t\0k=v f=1", 3),
        (b"m,t=v\0 f=1", 5),
        (b"m,t=\0 f=1", 4),
        (b"m f\0=1", 3),
        (b"m f=\"a\0b\"", 6),
        (b"m f=\"\0\"", 5),
        (b"m f=\"\\\0\"", 6),
        (b"m,t=a\\\0 f=1", 6),
        (b"m f=1\0", 5),
        (b"m f=1 1\0", 7),
        (b"m f=1 \0", 6),
        (b"m f=1 1 \0", 8),
        (b"m f=\"ok\" 1\r\0", 11),
    ];
    for &(line, offset) in cases {
        assert_eq!(
            error(line),
            (ErrorKind::NulByte, offset),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
    let e = parse_bytes(b"cpu,host=a\0b usage=1").unwrap_err();
    assert_eq!(
        e.to_string(),
        "NUL byte at byte 10: measurement names, tag keys and values, field keys and string \
         values must not contain NUL (0x00) bytes"
    );
    // Only the line with the NUL is rejected; the ones around it parse.
    let buf = b"m,t=a f=1\nm,t=b\0 f=2\nm,t=c f=\"x\0\"\nm,t=d f=4\n";
    let mut parser = LineParser::new(MAX);
    let mut results = Vec::new();
    let consumed = split_lines(buf, MAX, |span| {
        let LineSpan::Line(range) = span else {
            panic!("{span:?}")
        };
        results.push(match parser.parse_line(&buf[range]) {
            Ok(line) => Ok(line.tags().next().map(|(_, v)| v.to_string())),
            Err(e) => Err(e.kind),
        });
    });
    assert_eq!(consumed, buf.len());
    assert_eq!(
        results,
        vec![
            Ok(Some("a".to_string())),
            Err(ErrorKind::NulByte),
            Err(ErrorKind::NulByte),
            Ok(Some("d".to_string())),
        ]
    );
}

#[test]
fn line_too_long() {
    let mut parser = LineParser::new(10);
    assert_eq!(parser.max_line_bytes(), 10);
    assert!(parser.parse_line(b"m f=123456").is_ok());
    let e = parser.parse_line(b"m f=1234567").unwrap_err();
    assert_eq!((e.kind, e.offset), (ErrorKind::LineTooLong, 10));
    assert_eq!(
        e.to_string(),
        "line too long: lines may not be longer than 10 bytes"
    );
}

#[test]
fn error_messages() {
    let e = parse_bytes(b"m,host=a value=abc,x=1i 17").unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid field value at byte 15: expected a number, a quoted string, or a boolean"
    );
    let e = parse_bytes(b"m f=\"x").unwrap_err();
    assert_eq!(
        e.to_string(),
        "unterminated string at byte 4: the quoted string has no closing '\"'"
    );
    let as_error: &dyn std::error::Error = &e;
    assert!(as_error.source().is_none());
    assert_eq!(ErrorKind::InvalidUtf8.to_string(), "invalid UTF-8");
    assert_eq!(ParseError::new(ErrorKind::EmptyKey, 3).offset, 3);
}

#[test]
fn parser_is_reusable() {
    let mut parser = LineParser::new(MAX);
    let lines: &[&[u8]] = &[
        b"a,t1=1,t2=2,t3=3 f1=1,f2=2,f3=3",
        b"b f=1",
        b"c,bad",
        b"d,x=y g=\"s\" 9",
    ];
    for _ in 0..3 {
        for &line in lines {
            match parser.parse_line(line) {
                Ok(parsed) => {
                    let m = parsed.measurement().to_string();
                    match m.as_str() {
                        "a" => assert_eq!((parsed.tag_count(), parsed.field_count()), (3, 3)),
                        "b" => assert_eq!((parsed.tag_count(), parsed.field_count()), (0, 1)),
                        "d" => assert_eq!((parsed.tag_count(), parsed.timestamp()), (1, Some(9))),
                        other => panic!("{other}"),
                    }
                }
                Err(e) => assert_eq!(e.kind, ErrorKind::MissingTagValue),
            }
        }
    }
    let line = parser.parse_line(b"m,a=1,b=2 x=1,y=2").unwrap();
    let rev: Vec<String> = line.tags().rev().map(|(k, _)| k.to_string()).collect();
    assert_eq!(rev, ["b", "a"]);
    let rev: Vec<String> = line.fields().rev().map(|(k, _)| k.to_string()).collect();
    assert_eq!(rev, ["y", "x"]);
    let debug = format!("{line:?}");
    assert!(debug.contains("measurement"), "{debug}");
}

// ---------------------------------------------------------------------------------------------
// Splitting

/// A reported line as a string, or a too-long span as `(start, end)`.
type Reported = Result<String, (usize, usize)>;

/// Lines (as strings) and too-long ranges reported by splitting `buf`, plus the consumed length.
fn split(buf: &[u8], max: usize) -> (Vec<Reported>, usize) {
    let mut out = Vec::new();
    let consumed = split_lines(buf, max, |span| out.push(describe(buf, span)));
    (out, consumed)
}

fn describe(buf: &[u8], span: LineSpan) -> Reported {
    match span {
        LineSpan::Line(r) => Ok(String::from_utf8_lossy(&buf[r]).into_owned()),
        LineSpan::TooLong(r) => Err((r.start, r.end)),
    }
}

fn ok(lines: &[&str]) -> Vec<Reported> {
    lines.iter().map(|l| Ok(l.to_string())).collect()
}

#[test]
fn splits_lines() {
    let buf = b"a f=1\nb f=2 3\nc f=3";
    assert_eq!(split(buf, MAX), (ok(&["a f=1", "b f=2 3"]), 14));
    assert_eq!(split(b"", MAX), (vec![], 0));
    assert_eq!(split(b"a f=1\n", MAX), (ok(&["a f=1"]), 6));
}

#[test]
fn skips_blank_lines_and_comments() {
    let buf = b"\n\n  \n\t\r\n# comment \"with quote\nm f=1\n   # indented\r\n\r\nn f=2\n#";
    assert_eq!(split(buf, MAX), (ok(&["m f=1", "n f=2"]), buf.len() - 1));
    assert!(is_blank_or_comment(b"  # x"));
    assert!(!is_blank_or_comment(b"m f=1"));
}

#[test]
fn strips_crlf() {
    let buf = b"a f=1\r\nb s=\"x\r\ny\"\r\nc f=1\r";
    let (lines, consumed) = split(buf, MAX);
    assert_eq!(lines, ok(&["a f=1", "b s=\"x\r\ny\""]));
    assert_eq!(&buf[consumed..], b"c f=1\r");
}

#[test]
fn quoted_newlines_do_not_end_lines() {
    let buf = b"m s=\"one\ntwo\" 1\nm s=\"a\\\"\nb\",t=\"\n\" 2\nm f=1,s=\"x\\\\\"\nn f=1\n";
    let (lines, consumed) = split(buf, MAX);
    assert_eq!(
        lines,
        ok(&[
            "m s=\"one\ntwo\" 1",
            "m s=\"a\\\"\nb\",t=\"\n\" 2",
            "m f=1,s=\"x\\\\\"",
            "n f=1",
        ])
    );
    assert_eq!(consumed, buf.len());
    let mut parser = LineParser::new(MAX);
    let second = &lines[1].as_ref().unwrap();
    let line = parser.parse_line(second.as_bytes()).unwrap();
    let values: Vec<String> = line
        .fields()
        .map(|(_, v)| match v {
            FieldValue::Str(s) => s.to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(values, ["a\"\nb", "\n"]);

    // Quotes that start no string leave newlines alone.
    let buf = b"m\"x f=1\nm,t=\"x f=1\nm f=1 \"x\nm f=x\"\n# \"\nn f=1\n";
    assert_eq!(split(buf, MAX).0.len(), 5);
}

#[test]
fn keeps_incomplete_tail() {
    let buf = b"a f=1\nb s=\"open\nstill open";
    let (lines, consumed) = split(buf, MAX);
    assert_eq!(lines, ok(&["a f=1"]));
    assert_eq!(&buf[consumed..], b"b s=\"open\nstill open");

    // The tail completes with the next read.
    let mut next = buf[consumed..].to_vec();
    next.extend_from_slice(b"\" 5\nc f=2");
    let (lines, consumed) = split(&next, MAX);
    assert_eq!(lines, ok(&["b s=\"open\nstill open\" 5"]));
    assert_eq!(&next[consumed..], b"c f=2");
}

#[test]
fn complete_buffers_end_with_their_last_line() {
    let mut lines = Vec::new();
    let buf = b"a f=1\nb f=2";
    split_complete(buf, MAX, |s| lines.push(describe(buf, s)));
    assert_eq!(lines, ok(&["a f=1", "b f=2"]));

    for buf in [&b"a f=1\n"[..], b"a f=1\n# c", b"a f=1\n  ", b"a f=1\r\n\r"] {
        let mut lines = Vec::new();
        split_complete(buf, MAX, |s| lines.push(describe(buf, s)));
        assert_eq!(lines, ok(&["a f=1"]), "{buf:?}");
    }

    // An unterminated string makes the rest of the input one (bad) line.
    let buf = b"a f=1\nb s=\"x\ny f=2";
    let mut lines = Vec::new();
    split_complete(buf, MAX, |s| lines.push(describe(buf, s)));
    assert_eq!(lines, ok(&["a f=1", "b s=\"x\ny f=2"]));
    let mut parser = LineParser::new(MAX);
    let e = parser.parse_line(b"b s=\"x\ny f=2").unwrap_err();
    assert_eq!((e.kind, e.offset), (ErrorKind::UnterminatedString, 4));
}

#[test]
fn over_long_lines_are_reported() {
    // Exactly max is fine; one more is too long.
    let buf = b"m f=12\nm f=123\nm f=1\n";
    assert_eq!(
        split(buf, 6),
        (
            vec![Ok("m f=12".into()), Err((7, 14)), Ok("m f=1".into())],
            buf.len()
        )
    );
    // A trailing `\r` counts.
    assert_eq!(split(b"m f=12\r\n", 6).0, vec![Err((0, 7))]);
    // An incomplete tail of max bytes may still be a valid line: kept.
    assert_eq!(split(b"a f=1\nm f=12", 6), (ok(&["a f=1"]), 6));
    // An incomplete tail longer than max is reported and consumed.
    assert_eq!(
        split(b"a f=1\nm f=123", 6),
        (vec![Ok("a f=1".into()), Err((6, 13))], 13)
    );
    // A too-long line whose end is inside a quoted string.
    let buf = b"m s=\"a\nbcdefgh\"\nn f=1\n";
    assert_eq!(split(buf, 8).0, vec![Err((0, 15)), Ok("n f=1".into())]);
}

#[test]
fn splitter_discards_the_rest_of_a_too_long_line() {
    let mut splitter = LineSplitter::new(8);
    assert_eq!(splitter.max_line_bytes(), 8);
    let mut seen = Vec::new();

    let buf = b"a f=1\nm,t=xxxxxxxxx";
    let consumed = splitter.split(buf, |s| seen.push(describe(buf, s)));
    assert_eq!(consumed, buf.len());
    assert!(splitter.is_discarding());
    assert_eq!(seen, vec![Ok("a f=1".into()), Err((6, 19))]);

    // Still the same line: nothing reported.
    seen.clear();
    let buf = b"yyyyyyyyyyyyyyyy";
    assert_eq!(
        splitter.split(buf, |s| seen.push(describe(buf, s))),
        buf.len()
    );
    assert!(seen.is_empty() && splitter.is_discarding());

    // The line goes on into a quoted string with a newline; the line after it is reported.
    let buf = b" s=\"in\nside\" 1\nb f=2\nc f=";
    let consumed = splitter.split(buf, |s| seen.push(describe(buf, s)));
    assert!(!splitter.is_discarding());
    assert_eq!(seen, ok(&["b f=2"]));
    assert_eq!(&buf[consumed..], b"c f=");

    // split_final resets a discarding splitter.
    let buf = b"zzzzzzzzzzzzzzzzzzzzz";
    splitter.split(buf, |_| {});
    assert!(splitter.is_discarding());
    seen.clear();
    let buf = b"zz\nq f=1";
    splitter.split_final(buf, |s| seen.push(describe(buf, s)));
    assert_eq!(seen, ok(&["q f=1"]));
    assert!(!splitter.is_discarding());
}

/// Feeds `input` to a [`LineSplitter`] the way a TCP reader does, `chunk` bytes per read.
fn stream(input: &[u8], chunk: usize, max: usize) -> Vec<Result<String, usize>> {
    let mut splitter = LineSplitter::new(max);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut fed = 0;
    for piece in input.chunks(chunk) {
        buf.extend_from_slice(piece);
        fed += piece.len();
        let consumed = splitter.split(&buf, |s| {
            out.push(match s {
                LineSpan::Line(r) => Ok(String::from_utf8_lossy(&buf[r]).into_owned()),
                LineSpan::TooLong(_) => Err(0),
            })
        });
        buf.drain(..consumed);
        assert!(buf.len() <= max, "kept {} bytes", buf.len());
    }
    assert_eq!(fed, input.len());
    splitter.split_final(&buf, |s| {
        out.push(match s {
            LineSpan::Line(r) => Ok(String::from_utf8_lossy(&buf[r]).into_owned()),
            LineSpan::TooLong(_) => Err(0),
        })
    });
    out
}

#[test]
fn streaming_in_any_chunk_size_gives_the_same_lines() {
    let input: &[u8] = b"cpu,host=a u=1i 1\r\n# c \"q\n\nm s=\"x\ny\\\"\n\" 2\nm\\ x,t\\,=v f\\=g=\"\\\\\" 3\n  n f=t\nlast f=1";
    let mut whole = Vec::new();
    split_complete(input, MAX, |s| {
        whole.push(match s {
            LineSpan::Line(r) => Ok(String::from_utf8_lossy(&input[r]).into_owned()),
            LineSpan::TooLong(_) => Err(0),
        })
    });
    assert_eq!(whole.len(), 5);
    let mut parser = LineParser::new(MAX);
    for line in &whole {
        let line = line.as_ref().unwrap();
        parser.parse_line(line.as_bytes()).unwrap();
    }
    for chunk in 1..=input.len() {
        assert_eq!(stream(input, chunk, MAX), whole, "chunk {chunk}");
    }
}

#[test]
fn precision() {
    assert_eq!(Precision::parse("n"), Some(Precision::Nanos));
    assert_eq!(Precision::parse("ns"), Some(Precision::Nanos));
    assert_eq!(Precision::parse("u"), Some(Precision::Micros));
    assert_eq!(Precision::parse("us"), Some(Precision::Micros));
    assert_eq!(Precision::parse("ms"), Some(Precision::Millis));
    assert_eq!(Precision::parse("s"), Some(Precision::Seconds));
    for bad in ["", "m", "h", "S", "MS", "nanos", " s"] {
        assert_eq!(Precision::parse(bad), None, "{bad}");
    }
    assert_eq!(Precision::default(), Precision::Nanos);
    let t = 1_451_606_400;
    assert_eq!(
        Precision::Seconds.to_nanos(t),
        Some(1_451_606_400_000_000_000)
    );
    assert_eq!(
        Precision::Millis.to_nanos(t * 1000),
        Some(1_451_606_400_000_000_000)
    );
    assert_eq!(Precision::Micros.to_nanos(-5), Some(-5_000));
    assert_eq!(Precision::Nanos.to_nanos(i64::MIN), Some(i64::MIN));
    assert_eq!(
        Precision::Seconds.to_nanos(i64::MAX / 1_000_000_000),
        Some(9_223_372_036_000_000_000)
    );
    assert_eq!(
        Precision::Seconds.to_nanos(i64::MAX / 1_000_000_000 + 1),
        None
    );
    assert_eq!(
        Precision::Seconds.to_nanos(i64::MIN / 1_000_000_000 - 1),
        None
    );
    assert_eq!(Precision::Millis.to_nanos(i64::MAX), None);
    assert_eq!(Precision::Micros.to_nanos(i64::MIN), None);
    assert_eq!(Precision::Millis.nanos_per_unit(), 1_000_000);
}

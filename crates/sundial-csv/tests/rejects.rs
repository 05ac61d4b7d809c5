//! What the reader refuses and how it says so: tolerant type detection, rejections with line
//! numbers and reasons, header errors, and hostile inputs (huge or endless records,
//! unterminated quotes, ragged rows, invalid UTF-8, out-of-range timestamps).

use std::io::Read;
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use sundial_csv::{
    Atomicity, ColumnKind, CsvError, CsvOptions, CsvReader, RejectAction, RejectSink, Rejection,
};

fn options(atomicity: Atomicity) -> CsvOptions {
    CsvOptions {
        atomicity,
        ..CsvOptions::default()
    }
}

fn read_all<R: Read>(reader: &mut CsvReader<R>) -> Result<Vec<RecordBatch>, CsvError> {
    let mut batches = Vec::new();
    while let Some(batch) = reader.next_batch()? {
        batches.push(batch);
    }
    Ok(batches)
}

fn longs(batches: &[RecordBatch], column: usize) -> Vec<Option<i64>> {
    batches
        .iter()
        .flat_map(|b| {
            b.column(column)
                .as_primitive::<Int64Type>()
                .iter()
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `k,v` with `rows` rows; `v` is `k` except on the 1-based rows in `bad`, where it is `oops`.
fn numbers(rows: usize, bad: &[usize]) -> String {
    let mut text = String::from("k,v\n");
    for i in 1..=rows {
        if bad.contains(&i) {
            text.push_str(&format!("{i},oops\n"));
        } else {
            text.push_str(&format!("{i},{i}\n"));
        }
    }
    text
}

#[test]
fn one_bad_number_does_not_make_a_column_varchar() {
    // Row 50 is on line 51.
    let data = numbers(100, &[50]);
    for atomicity in [Atomicity::SkipRow, Atomicity::SkipColumn] {
        let mut reader = CsvReader::new(data.as_bytes(), options(atomicity)).unwrap();
        assert_eq!(reader.column_kinds()[1], ColumnKind::Long);
        assert!(reader.fallbacks().is_empty());
        let batches = read_all(&mut reader).unwrap();
        let stats = reader.stats();
        assert_eq!(stats.errors_total, 1);
        let e = &stats.errors[0];
        assert_eq!(e.line, 51);
        assert_eq!(e.column.as_deref(), Some("v"));
        assert_eq!(e.record, b"50,oops");
        match atomicity {
            Atomicity::SkipRow => {
                assert_eq!(
                    e.to_string(),
                    "line 51: column 'v': cannot parse 'oops' as LONG"
                );
                assert_eq!(e.action, RejectAction::RowSkipped);
                assert_eq!((stats.rows_imported, stats.rows_rejected), (99, 1));
            }
            _ => {
                assert_eq!(
                    e.to_string(),
                    "line 51: column 'v': cannot parse 'oops' as LONG (stored as NULL)"
                );
                assert_eq!((stats.rows_imported, stats.rows_rejected), (100, 0));
                assert_eq!(longs(&batches, 1)[49], None);
            }
        }
    }
    let mut reader = CsvReader::new(data.as_bytes(), options(Atomicity::Abort)).unwrap();
    let err = read_all(&mut reader).unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 51, column 'v': cannot parse 'oops' as LONG"
    );
}

#[test]
fn genuinely_mixed_columns_fall_back_to_text_and_say_why() {
    // 7 of 10 values are numbers: too many others to be bad values.
    let data = numbers(10, &[4, 6, 9]);
    let reader = CsvReader::new(data.as_bytes(), CsvOptions::default()).unwrap();
    assert_eq!(reader.column_kinds()[1], ColumnKind::Varchar);
    let fallbacks = reader.fallbacks();
    assert_eq!(fallbacks.len(), 1);
    assert_eq!(
        fallbacks[0].to_string(),
        "column 'v' is VARCHAR, not LONG: its values are mixed (7 of 10 sampled values are \
         LONG; the first that is not is 'oops' on line 5)"
    );
    // Text that is mostly text is no news.
    let reader = CsvReader::new(
        &b"h\nhost_a\nhost_b\n1\nhost_c\n"[..],
        CsvOptions::default(),
    )
    .unwrap();
    assert!(reader.fallbacks().is_empty());
    // An override is not a fallback.
    let overridden = CsvOptions {
        type_overrides: vec![("v".into(), ColumnKind::Varchar)],
        ..CsvOptions::default()
    };
    let reader = CsvReader::new(data.as_bytes(), overridden).unwrap();
    assert!(reader.fallbacks().is_empty());
}

#[test]
fn reported_errors_are_bounded_and_the_sink_gets_them_all() {
    let bad: Vec<usize> = (1..=1000).filter(|i| i % 20 == 0).collect();
    let data = numbers(1000, &bad);
    let seen: Arc<Mutex<Vec<Rejection>>> = Arc::default();
    let sink_seen = seen.clone();
    let sink: RejectSink = Box::new(move |r| {
        sink_seen.lock().unwrap().push(r.clone());
        Ok(())
    });
    let opts = CsvOptions {
        atomicity: Atomicity::SkipRow,
        max_reported_errors: 3,
        infer_rows: 100,
        batch_rows: 64,
        ..CsvOptions::default()
    };
    let mut reader = CsvReader::with_reject_sink(data.as_bytes(), opts, Some(sink)).unwrap();
    assert_eq!(reader.column_kinds()[1], ColumnKind::Long);
    read_all(&mut reader).unwrap();
    let stats = reader.stats();
    assert_eq!(stats.errors_total, 50);
    assert_eq!(stats.rows_rejected, 50);
    assert_eq!(stats.rows_imported, 950);
    assert_eq!(stats.errors.len(), 3);
    let lines: Vec<u64> = stats.errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [21, 41, 61]);
    let all = seen.lock().unwrap();
    assert_eq!(all.len(), 50);
    assert_eq!(all[49].line, 1001);
    assert_eq!(all[49].record, b"1000,oops");
}

#[test]
fn a_failing_sink_stops_the_reader() {
    let sink: RejectSink = Box::new(|_| Err(std::io::Error::other("disk full")));
    let data = numbers(100, &[3]);
    let err = CsvReader::with_reject_sink(data.as_bytes(), options(Atomicity::SkipRow), Some(sink))
        .and_then(|mut r| read_all(&mut r).map(drop))
        .unwrap_err();
    assert!(err.to_string().contains("disk full"), "{err}");
}

#[test]
fn ragged_rows_are_reported_with_their_line() {
    let data = "a,b\n1,2\n3\n4,5,6\n7,8\n";
    let mut reader = CsvReader::new(data.as_bytes(), options(Atomicity::SkipRow)).unwrap();
    read_all(&mut reader).unwrap();
    let shown: Vec<String> = reader
        .stats()
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shown,
        [
            "line 3: expected 2 fields, found 1",
            "line 4: expected 2 fields, found 3"
        ]
    );
    assert_eq!(reader.stats().errors[1].record, b"4,5,6");
    assert_eq!(reader.stats().errors[1].column, None);
}

#[test]
fn a_bad_designated_timestamp_costs_its_row_not_the_import() {
    let data = "ts,v\n\
                2016-01-01T00:00:00Z,1\n\
                abc,2\n\
                9999-12-31T00:00:00Z,3\n\
                2016-01-01T00:00:03Z,4\n";
    for atomicity in [Atomicity::SkipRow, Atomicity::SkipColumn] {
        let opts = CsvOptions {
            timestamp_column: Some("ts".into()),
            ..options(atomicity)
        };
        let mut reader = CsvReader::new(data.as_bytes(), opts).unwrap();
        let batches = read_all(&mut reader).unwrap();
        assert_eq!(longs(&batches, 1), [Some(1), Some(4)]);
        let shown: Vec<String> = reader
            .stats()
            .errors
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            shown[0],
            "line 3: column 'ts': cannot parse 'abc' as TIMESTAMP"
        );
        assert!(
            shown[1].starts_with(
                "line 4: column 'ts': timestamp '9999-12-31T00:00:00Z' is out of range"
            ),
            "{}",
            shown[1]
        );
    }
    let opts = CsvOptions {
        timestamp_column: Some("ts".into()),
        ..options(Atomicity::Abort)
    };
    let mut reader = CsvReader::new(data.as_bytes(), opts).unwrap();
    let err = read_all(&mut reader).unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 3, column 'ts': cannot parse 'abc' as TIMESTAMP"
    );
}

#[test]
fn header_detection_errors_say_so() {
    let detect = CsvOptions {
        detect_header: true,
        timestamp_column: Some("ts".into()),
        ..CsvOptions::default()
    };
    let data = "2016-01-01T00:00:00Z,host_1,0.5\n2016-01-01T00:00:01Z,host_2,0.7\n";
    let err = CsvReader::new(data.as_bytes(), detect.clone())
        .err()
        .unwrap();
    assert!(matches!(err, CsvError::HeaderNotDetected { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "could not detect a header row (the first line looks like data: \
         '2016-01-01T00:00:00Z,host_1,0.5'), so there is no column 'ts'; pass forceHeader=true \
         if the first line is the header, or add a header row naming the columns"
    );
    // A header that names the timestamp column is a header, even over text-only data.
    let reader = CsvReader::new(&b"ts,host\nx,a\ny,a\n"[..], detect.clone());
    assert!(reader.is_ok_and(|r| r.has_header()));
    // A header without the timestamp column: the error lists the columns there are.
    let err = CsvReader::new(&b"time,v\n2016-01-01,1\n"[..], detect)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "schema error: timestamp column 'ts' not found; the columns are 'time', 'v'"
    );
}

#[test]
fn a_required_header_must_be_one() {
    let strict = CsvOptions {
        require_header: true,
        ..CsvOptions::default()
    };
    let err = CsvReader::new(
        &b"2016-01-01T00:00:00Z,host_1,0.5\n2016-01-01T00:00:01Z,host_2,0.7\n"[..],
        strict.clone(),
    )
    .err()
    .unwrap();
    assert_eq!(
        err.to_string(),
        "the first line looks like data, not a header row: '2016-01-01T00:00:00Z,host_1,0.5'; \
         the file needs a header row naming the columns"
    );
    let err = CsvReader::new(&b"a,,c\n1,2,3\n"[..], strict.clone())
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "the header row has no name for column 2 (of 3); every column needs one"
    );
    let err = CsvReader::new(&b"a,b/c\n1,2\n"[..], strict.clone())
        .err()
        .unwrap();
    assert!(matches!(err, CsvError::Header(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with("the header row's column 2 is not a valid name: "),
        "{err}"
    );
    assert!(err.to_string().contains("b/c"), "{err}");
    // Proper headers pass, text-only files too; a header alone is fine.
    assert!(CsvReader::new(&b"ts,v\n2016-01-01,1\n"[..], strict.clone()).is_ok());
    assert!(CsvReader::new(&b"name,city\nann,paris\n"[..], strict.clone()).is_ok());
    let mut reader = CsvReader::new(&b"ts,v\r\n"[..], strict).unwrap();
    assert!(reader.next_batch().unwrap().is_none());
}

#[test]
fn empty_inputs_say_so() {
    for data in [&b""[..], &b"\xEF\xBB\xBF"[..]] {
        let err = CsvReader::new(data, CsvOptions::default()).err().unwrap();
        assert_eq!(
            err.to_string(),
            "schema error: the input is empty: no header row and no data"
        );
    }
}

/// Endless input: the reader must stop on its own, with a bounded buffer.
struct Endless(u8);

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        buf.fill(self.0);
        Ok(buf.len())
    }
}

#[test]
fn huge_and_endless_records_are_refused_not_buffered() {
    let limited = CsvOptions {
        max_record_bytes: 1 << 20,
        ..CsvOptions::default()
    };
    // A 10 MB single line (no line break at all).
    let line = vec![b'x'; 10 << 20];
    let err = CsvReader::new(&line[..], limited.clone()).err().unwrap();
    assert!(
        matches!(err, CsvError::RecordTooLong { line: 1, limit } if limit == 1 << 20),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("line 1: a record longer than 1048576 bytes")
    );
    // The same line after good rows: stopped when reached.
    let mut data = b"a,b\n1,2\n".to_vec();
    data.extend_from_slice(&line);
    data.extend_from_slice(b",3\n");
    let mut reader = CsvReader::new(
        &data[..],
        CsvOptions {
            infer_rows: 1,
            ..limited.clone()
        },
    )
    .unwrap();
    let err = read_all(&mut reader).unwrap_err();
    assert!(
        matches!(err, CsvError::RecordTooLong { line: 3, .. }),
        "{err}"
    );
    // An endless stream of bytes, and an endless quoted field.
    let err = CsvReader::new(Endless(b'x'), limited.clone())
        .err()
        .unwrap();
    assert!(matches!(err, CsvError::RecordTooLong { .. }), "{err}");
    let endless_quote = (&b"a\n\""[..]).chain(Endless(b'y'));
    let err = CsvReader::new(endless_quote, limited).err().unwrap();
    assert!(
        matches!(err, CsvError::RecordTooLong { line: 2, .. }),
        "{err}"
    );
}

#[test]
fn unterminated_quotes_are_malformed() {
    let data = "a,b\n1,2\n3,\"open\n4,5\n";
    let err = CsvReader::new(data.as_bytes(), CsvOptions::default())
        .and_then(|mut r| read_all(&mut r).map(drop))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "malformed CSV at line 3: a quoted field is not closed: its opening '\"' runs to the \
         end of the input"
    );
    // A closed multi-line field at the end is fine, with or without a final line break.
    for data in [
        "a,b\n1,\"x\ny\"\n",
        "a,b\n1,\"x\ny\"",
        "a,b\r\n1,\"x\r\ny\"\r\n",
    ] {
        let mut reader = CsvReader::new(data.as_bytes(), CsvOptions::default()).unwrap();
        let rows: usize = read_all(&mut reader)
            .unwrap()
            .iter()
            .map(RecordBatch::num_rows)
            .sum();
        assert_eq!(rows, 1, "{data:?}");
    }
}

#[test]
fn line_numbers_count_crlf_bom_and_multi_line_fields() {
    let data = b"\xEF\xBB\xBFk,note,v\r\n1,\"two\r\nlines\",1\r\n2,x,2\r\n3,y,oops\r\n4,z,4\r\n";
    let opts = CsvOptions {
        type_overrides: vec![("v".into(), ColumnKind::Long)],
        ..options(Atomicity::SkipRow)
    };
    let mut reader = CsvReader::new(&data[..], opts).unwrap();
    read_all(&mut reader).unwrap();
    let e = &reader.stats().errors[0];
    assert_eq!(
        e.to_string(),
        "line 5: column 'v': cannot parse 'oops' as LONG"
    );
    // Blank lines count too, with either line break.
    for data in ["a,b\n\n1,2\n\n\n3,x\n", "a,b\r\n\r\n1,2\r\n\r\n\r\n3,x\r\n"] {
        let opts = CsvOptions {
            type_overrides: vec![("b".into(), ColumnKind::Long)],
            ..options(Atomicity::SkipRow)
        };
        let mut reader = CsvReader::new(data.as_bytes(), opts).unwrap();
        read_all(&mut reader).unwrap();
        assert_eq!(reader.stats().errors[0].line, 6, "{data:?}");
    }
}

#[test]
fn invalid_utf8_and_null_looking_tokens() {
    // Invalid UTF-8 in a text column: that value is refused, with a readable reason.
    let data = b"id,name\n1,ok\n2,caf\xE9\n";
    let mut reader = CsvReader::new(&data[..], options(Atomicity::SkipRow)).unwrap();
    read_all(&mut reader).unwrap();
    assert_eq!(
        reader.stats().errors[0].to_string(),
        "line 3: column 'name': cannot parse 'caf\u{FFFD}' as VARCHAR"
    );
    // Only empty fields are NULL: a word like NULL in a numeric column is a bad value (one
    // of them does not turn the column into text), and text columns keep it as text.
    let mut data = String::from("v,s\n");
    for i in 0..40 {
        data.push_str(&format!("{i},NULL\n"));
    }
    data.push_str("NULL,x\n,\n");
    let mut reader = CsvReader::new(data.as_bytes(), options(Atomicity::SkipColumn)).unwrap();
    assert_eq!(
        reader.column_kinds(),
        [ColumnKind::Long, ColumnKind::Symbol]
    );
    let batches = read_all(&mut reader).unwrap();
    let v = longs(&batches, 0);
    assert_eq!(v.len(), 42);
    assert_eq!(&v[40..], [None, None]);
    assert_eq!(
        reader.stats().errors[0].to_string(),
        "line 42: column 'v': cannot parse 'NULL' as LONG (stored as NULL)"
    );
    assert_eq!(reader.stats().errors_total, 1);
}

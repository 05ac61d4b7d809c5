//! End-to-end tests of `CsvReader` on in-memory and on-disk inputs.

use std::io::{BufWriter, Write};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type, TimestampNanosecondType};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use sundial_csv::{Atomicity, ColumnKind, CsvError, CsvOptions, CsvReader};

fn open(data: &[u8], options: CsvOptions) -> CsvReader<&[u8]> {
    CsvReader::new(data, options).expect("reader")
}

fn read_all<R: std::io::Read>(reader: &mut CsvReader<R>) -> Vec<RecordBatch> {
    let mut batches = Vec::new();
    while let Some(batch) = reader.next_batch().expect("batch") {
        batches.push(batch);
    }
    batches
}

fn single_batch(data: &str, options: CsvOptions) -> (Vec<ColumnKind>, RecordBatch) {
    let mut reader = open(data.as_bytes(), options);
    let kinds = reader.column_kinds().to_vec();
    let mut batches = read_all(&mut reader);
    assert_eq!(batches.len(), 1);
    (kinds, batches.remove(0))
}

fn strings(batch: &RecordBatch, column: usize) -> Vec<Option<String>> {
    let array = batch.column(column);
    match array.data_type() {
        DataType::LargeUtf8 => array
            .as_string::<i64>()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect(),
        DataType::Dictionary(_, _) => {
            let dict = array.as_dictionary::<Int32Type>();
            let values = dict.values().as_string::<i32>();
            dict.keys()
                .iter()
                .map(|k| k.map(|k| values.value(k as usize).to_string()))
                .collect()
        }
        other => panic!("not a string column: {other}"),
    }
}

fn longs(batch: &RecordBatch, column: usize) -> Vec<Option<i64>> {
    batch
        .column(column)
        .as_primitive::<Int64Type>()
        .iter()
        .collect()
}

fn timestamps(batch: &RecordBatch, column: usize) -> Vec<Option<i64>> {
    batch
        .column(column)
        .as_primitive::<TimestampNanosecondType>()
        .iter()
        .collect()
}

#[test]
fn detects_every_kind() {
    let mut data = String::from("flag,count,price,ts,id,host,note\n");
    for i in 0..20 {
        data.push_str(&format!(
            "{},{},{}.5,2016-01-01T00:00:{:02}Z,123e4567-e89b-12d3-a456-4266141740{:02},host{},note number {}\n",
            i % 2 == 0,
            i,
            i,
            i,
            i,
            i % 2,
            i
        ));
    }
    let (kinds, batch) = single_batch(&data, CsvOptions::default());
    assert_eq!(
        kinds,
        vec![
            ColumnKind::Boolean,
            ColumnKind::Long,
            ColumnKind::Double,
            ColumnKind::Timestamp,
            ColumnKind::Uuid,
            ColumnKind::Symbol,
            ColumnKind::Varchar,
        ]
    );
    let types: Vec<DataType> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    assert_eq!(
        types,
        vec![
            DataType::Boolean,
            DataType::Int64,
            DataType::Float64,
            DataType::Timestamp(TimeUnit::Nanosecond, None),
            DataType::FixedSizeBinary(16),
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            DataType::LargeUtf8,
        ]
    );
    assert_eq!(batch.num_rows(), 20);
    assert!(!batch.column(0).as_boolean().value(1));
    assert!(batch.column(0).as_boolean().value(2));
    assert_eq!(longs(&batch, 1)[7], Some(7));
    assert_eq!(batch.column(2).as_primitive::<Float64Type>().value(3), 3.5);
    assert_eq!(timestamps(&batch, 3)[8], Some(1_451_606_408_000_000_000));
    let uuid = batch.column(4).as_fixed_size_binary().value(5);
    assert_eq!(uuid[0..4], [0x12, 0x3e, 0x45, 0x67]);
    assert_eq!(uuid[15], 0x05);
    assert_eq!(strings(&batch, 5)[3].as_deref(), Some("host1"));
    assert_eq!(strings(&batch, 6)[9].as_deref(), Some("note number 9"));
}

#[test]
fn mixed_ints_and_floats_are_double_and_huge_ints_too() {
    let (kinds, batch) = single_batch(
        "a,b\n1,1\n2.5,99999999999999999999\n",
        CsvOptions::default(),
    );
    assert_eq!(kinds, vec![ColumnKind::Double, ColumnKind::Double]);
    let b = batch.column(1).as_primitive::<Float64Type>();
    assert_eq!(b.value(1), 1e20);
}

#[test]
fn empty_fields_are_null_for_every_kind() {
    let data = "b,l,d,t,u,s,v\n\
                true,1,1.5,2016-01-01,123e4567-e89b-12d3-a456-426614174000,x,hello\n\
                ,,,,,,\n\
                false,2,2.5,2016-01-02,123e4567-e89b-12d3-a456-426614174001,,world\n";
    let options = CsvOptions {
        type_overrides: vec![("s".into(), ColumnKind::Symbol)],
        ..CsvOptions::default()
    };
    let (kinds, batch) = single_batch(data, options);
    assert_eq!(
        kinds,
        vec![
            ColumnKind::Boolean,
            ColumnKind::Long,
            ColumnKind::Double,
            ColumnKind::Timestamp,
            ColumnKind::Uuid,
            ColumnKind::Symbol,
            ColumnKind::Varchar,
        ]
    );
    for column in batch.columns() {
        assert!(column.is_null(1), "{:?}", column.data_type());
        assert!(column.is_valid(0));
    }
    assert_eq!(strings(&batch, 5), vec![Some("x".into()), None, None]);
}

#[test]
fn all_empty_column_is_varchar() {
    let (kinds, batch) = single_batch("a,b\n1,\n2,\n", CsvOptions::default());
    assert_eq!(kinds, vec![ColumnKind::Long, ColumnKind::Varchar]);
    assert_eq!(batch.column(1).null_count(), 2);
}

#[test]
fn timestamp_formats_parse_to_exact_nanos() {
    let data = "ts\n\
                2016-01-01T02:17:08Z\n\
                2016-01-01 07:47:52.646325 +0000\n\
                2016-01-01T00:00:00.123456789Z\n\
                2016-01-01T09:47:52.646325+02:00\n\
                2016-01-01T09:47:52+0200\n\
                2016-01-01\n\
                2016-01-01T02:17\n\
                2016-01-01 02:17:08\n";
    let (kinds, batch) = single_batch(data, CsvOptions::default());
    assert_eq!(kinds, vec![ColumnKind::Timestamp]);
    assert_eq!(
        timestamps(&batch, 0),
        vec![
            Some(1_451_614_628_000_000_000),
            Some(1_451_634_472_646_325_000),
            Some(1_451_606_400_123_456_789),
            Some(1_451_634_472_646_325_000),
            Some(1_451_634_472_000_000_000),
            Some(1_451_606_400_000_000_000),
            Some(1_451_614_620_000_000_000),
            Some(1_451_614_628_000_000_000),
        ]
    );
}

#[test]
fn type_overrides_win_over_detection() {
    let data = "id,code,v\n1,10,x\n2,20,y\n3,oops,z\n";
    let options = CsvOptions {
        type_overrides: vec![
            ("id".into(), ColumnKind::Varchar),
            ("CODE".into(), ColumnKind::Long),
            ("v".into(), ColumnKind::Symbol),
        ],
        ..CsvOptions::default()
    };
    let mut reader = open(data.as_bytes(), options);
    assert_eq!(
        reader.column_kinds(),
        [ColumnKind::Varchar, ColumnKind::Long, ColumnKind::Symbol]
    );
    let batch = reader.next_batch().unwrap().unwrap();
    assert_eq!(strings(&batch, 0)[2].as_deref(), Some("3"));
    assert_eq!(longs(&batch, 1), vec![Some(10), Some(20), None]);
    assert_eq!(reader.stats().column_errors, vec![0, 1, 0]);
    assert_eq!(reader.stats().rows_imported, 3);
}

#[test]
fn unknown_override_column_is_a_schema_error() {
    let options = CsvOptions {
        type_overrides: vec![("nope".into(), ColumnKind::Long)],
        ..CsvOptions::default()
    };
    let err = CsvReader::new(&b"a\n1\n"[..], options).err().unwrap();
    assert!(
        matches!(err, CsvError::Schema(ref m) if m.contains("nope")),
        "{err}"
    );
}

#[test]
fn timestamp_column_is_forced() {
    // All NULL in the sample: would otherwise be VARCHAR.
    let data = "v,when\n1,\n2,\n3,2020-05-01T00:00:00Z\n";
    let options = CsvOptions {
        timestamp_column: Some("when".into()),
        infer_rows: 2,
        ..CsvOptions::default()
    };
    let mut reader = open(data.as_bytes(), options);
    assert_eq!(reader.column_kinds()[1], ColumnKind::Timestamp);
    let batch = reader.next_batch().unwrap().unwrap();
    assert_eq!(
        timestamps(&batch, 1),
        vec![None, None, Some(1_588_291_200_000_000_000)]
    );
}

#[test]
fn timestamp_column_errors() {
    let missing = CsvOptions {
        timestamp_column: Some("ts".into()),
        ..CsvOptions::default()
    };
    let err = CsvReader::new(&b"a\n1\n"[..], missing.clone())
        .err()
        .unwrap();
    assert!(matches!(err, CsvError::Schema(_)), "{err}");

    // Under the skip modes a bad timestamp only costs its row (and is reported).
    let mut reader = open(b"ts\n2016-01-01\nyesterday\n", missing.clone());
    let batches = read_all(&mut reader);
    assert_eq!(batches[0].num_rows(), 1);
    assert_eq!(reader.stats().rows_rejected, 1);
    assert_eq!(
        reader.stats().errors[0].to_string(),
        "line 3: column 'ts': cannot parse 'yesterday' as TIMESTAMP"
    );
    // Under Abort, the first bad value fails the read.
    let abort = CsvOptions {
        atomicity: Atomicity::Abort,
        ..missing.clone()
    };
    let mut reader = open(b"ts\n2016-01-01\nyesterday\n", abort);
    let err = reader.next_batch().err().unwrap();
    match err {
        CsvError::BadValue {
            line,
            column,
            value,
            expected,
            ..
        } => {
            assert_eq!(
                (line, column.as_str(), value.as_str(), expected),
                (3, "ts", "yesterday", "TIMESTAMP")
            );
        }
        other => panic!("unexpected {other}"),
    }

    let conflicting = CsvOptions {
        type_overrides: vec![("ts".into(), ColumnKind::Long)],
        ..missing
    };
    let err = CsvReader::new(&b"ts\n1\n"[..], conflicting).err().unwrap();
    assert!(matches!(err, CsvError::Schema(_)), "{err}");
}

/// A LONG column (detected from the first two rows) with a bad value later.
const BAD_VALUE_DATA: &str = "n,s\n1,a\n2,b\nthree,c\n4,d\n";

fn bad_value_options(atomicity: Atomicity) -> CsvOptions {
    CsvOptions {
        infer_rows: 2,
        atomicity,
        ..CsvOptions::default()
    }
}

#[test]
fn skip_column_nulls_bad_values() {
    let mut reader = open(
        BAD_VALUE_DATA.as_bytes(),
        bad_value_options(Atomicity::SkipColumn),
    );
    assert_eq!(reader.column_kinds()[0], ColumnKind::Long);
    let batches = read_all(&mut reader);
    assert_eq!(longs(&batches[0], 0), vec![Some(1), Some(2), None, Some(4)]);
    assert_eq!(strings(&batches[0], 1)[2].as_deref(), Some("c"));
    let stats = reader.stats();
    assert_eq!(
        (stats.rows_read, stats.rows_imported, stats.rows_rejected),
        (4, 4, 0)
    );
    assert_eq!(stats.column_errors, vec![1, 0]);
}

#[test]
fn skip_row_drops_bad_rows() {
    let mut reader = open(
        BAD_VALUE_DATA.as_bytes(),
        bad_value_options(Atomicity::SkipRow),
    );
    let batches = read_all(&mut reader);
    assert_eq!(longs(&batches[0], 0), vec![Some(1), Some(2), Some(4)]);
    assert_eq!(
        strings(&batches[0], 1),
        vec![Some("a".into()), Some("b".into()), Some("d".into())]
    );
    let stats = reader.stats();
    assert_eq!(
        (stats.rows_read, stats.rows_imported, stats.rows_rejected),
        (4, 3, 1)
    );
    assert_eq!(stats.column_errors, vec![1, 0]);
}

#[test]
fn abort_reports_line_column_and_value() {
    let mut reader = open(
        BAD_VALUE_DATA.as_bytes(),
        bad_value_options(Atomicity::Abort),
    );
    let err = reader.next_batch().err().unwrap();
    match err {
        CsvError::BadValue {
            line,
            column,
            value,
            expected,
            ..
        } => assert_eq!(
            (line, column.as_str(), value.as_str(), expected),
            (4, "n", "three", "LONG")
        ),
        other => panic!("unexpected {other}"),
    }
    assert_eq!(reader.stats().rows_imported, 0);
}

#[test]
fn wrong_field_counts() {
    let data = "a,b\n1,2\n3\n4,5,6\n7,8\n";
    for atomicity in [Atomicity::SkipColumn, Atomicity::SkipRow] {
        let mut reader = open(
            data.as_bytes(),
            CsvOptions {
                atomicity,
                ..CsvOptions::default()
            },
        );
        let batches = read_all(&mut reader);
        assert_eq!(longs(&batches[0], 0), vec![Some(1), Some(7)]);
        assert_eq!(reader.stats().rows_rejected, 2);
        assert_eq!(reader.stats().rows_read, 4);
    }
    // Inside the sample, under Abort: reported by `next_batch` too, in line order.
    let abort = CsvOptions {
        atomicity: Atomicity::Abort,
        ..CsvOptions::default()
    };
    let mut reader = open(data.as_bytes(), abort.clone());
    let err = reader.next_batch().err().unwrap();
    assert!(matches!(err, CsvError::Malformed { line: 3, .. }), "{err}");
    // After the sample: reported by `next_batch`.
    let mut reader = open(
        data.as_bytes(),
        CsvOptions {
            infer_rows: 1,
            ..abort
        },
    );
    let err = reader.next_batch().err().unwrap();
    assert!(matches!(err, CsvError::Malformed { line: 3, .. }), "{err}");
}

#[test]
fn quoted_fields() {
    let data = "name,text,n\n\
                \"Smith, John\",\"said \"\"hi\"\"\nand left\",1\n\
                plain,\"\",2\n";
    let (kinds, batch) = single_batch(data, CsvOptions::default());
    assert_eq!(kinds[2], ColumnKind::Long);
    assert_eq!(
        strings(&batch, 0),
        vec![Some("Smith, John".into()), Some("plain".into())]
    );
    assert_eq!(
        strings(&batch, 1),
        vec![Some("said \"hi\"\nand left".into()), None]
    );
    assert_eq!(longs(&batch, 2), vec![Some(1), Some(2)]);
}

#[test]
fn crlf_line_endings() {
    let data = "a,b\r\n1,x y\r\n2,z\r\n";
    let (kinds, batch) = single_batch(data, CsvOptions::default());
    assert_eq!(kinds, vec![ColumnKind::Long, ColumnKind::Varchar]);
    assert_eq!(longs(&batch, 0), vec![Some(1), Some(2)]);
    assert_eq!(
        strings(&batch, 1),
        vec![Some("x y".into()), Some("z".into())]
    );
    assert_eq!(batch.schema().field(1).name(), "b");
}

#[test]
fn utf8_bom_is_skipped() {
    let data = b"\xEF\xBB\xBF\"id\",name\n1,a\n";
    let mut reader = open(data, CsvOptions::default());
    assert_eq!(reader.schema().field(0).name(), "id");
    assert_eq!(reader.column_kinds()[0], ColumnKind::Long);
    read_all(&mut reader);
    assert_eq!(reader.bytes_read(), data.len() as u64);

    let no_header = CsvOptions {
        has_header: false,
        ..CsvOptions::default()
    };
    let (kinds, batch) = single_batch("\u{feff}5,6\n7,8\n", no_header);
    assert_eq!(kinds, vec![ColumnKind::Long, ColumnKind::Long]);
    assert_eq!(longs(&batch, 0), vec![Some(5), Some(7)]);
}

#[test]
fn invalid_utf8_is_a_bad_value() {
    let data = b"id,name\n1,ok\n2,caf\xE9\n";
    let mut reader = open(data, CsvOptions::default());
    assert_eq!(reader.column_kinds()[1], ColumnKind::Varchar);
    let batch = reader.next_batch().unwrap().unwrap();
    assert_eq!(strings(&batch, 1), vec![Some("ok".into()), None]);
    assert_eq!(reader.stats().column_errors, vec![0, 1]);

    let abort = CsvOptions {
        atomicity: Atomicity::Abort,
        ..CsvOptions::default()
    };
    let mut reader = open(data, abort);
    let err = reader.next_batch().err().unwrap();
    assert!(
        matches!(
            err,
            CsvError::BadValue {
                line: 3,
                expected: "VARCHAR",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn header_names() {
    let (_, batch) = single_batch(" a ,,c\n1,2,3\n", CsvOptions::default());
    let names: Vec<&str> = batch
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, ["a", "f1", "c"]);

    let err = CsvReader::new(&b"a,b,A\n1,2,3\n"[..], CsvOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, CsvError::Header(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "the header row names two columns 'a' (columns 1 and 3; names are compared case-insensitively)"
    );

    let no_header = CsvOptions {
        has_header: false,
        ..CsvOptions::default()
    };
    let (_, batch) = single_batch("1,x\n2,y\n", no_header);
    let names: Vec<&str> = batch
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, ["f0", "f1"]);
    assert_eq!(batch.num_rows(), 2);
}

#[test]
fn empty_inputs() {
    let err = CsvReader::new(&b""[..], CsvOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, CsvError::Schema(_)), "{err}");

    let mut reader = open(b"a,b\n", CsvOptions::default());
    assert_eq!(
        reader.column_kinds(),
        [ColumnKind::Varchar, ColumnKind::Varchar]
    );
    assert!(reader.next_batch().unwrap().is_none());
    assert_eq!(reader.bytes_read(), 4);
}

#[test]
fn other_delimiter_and_no_trailing_newline() {
    let options = CsvOptions {
        delimiter: b'\t',
        ..CsvOptions::default()
    };
    let (kinds, batch) = single_batch("a\tb\n1,5\tx\n2,5\ty", options);
    assert_eq!(kinds, vec![ColumnKind::Varchar, ColumnKind::Varchar]);
    assert_eq!(
        strings(&batch, 0),
        vec![Some("1,5".into()), Some("2,5".into())]
    );
    assert_eq!(strings(&batch, 1), vec![Some("x".into()), Some("y".into())]);
}

#[test]
fn batches_split_with_sample_rows_first() {
    let mut data = String::from("n\n");
    for i in 0..100_001 {
        data.push_str(&format!("{i}\n"));
    }
    let mut reader = open(data.as_bytes(), CsvOptions::default());
    let batches = read_all(&mut reader);
    assert_eq!(batches.len(), 2);
    assert_eq!(batches[0].num_rows(), 65_536);
    assert_eq!(batches[1].num_rows(), 100_001 - 65_536);
    let all: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(all, (0..100_001).collect::<Vec<i64>>());
    assert_eq!(reader.stats().rows_imported, 100_001);
    assert_eq!(reader.bytes_read(), data.len() as u64);
}

#[test]
fn small_batches_and_small_sample() {
    let data = "n\n1\n2\n3\n4\n5\n";
    let options = CsvOptions {
        batch_rows: 2,
        infer_rows: 3,
        ..CsvOptions::default()
    };
    let mut reader = open(data.as_bytes(), options);
    let sizes: Vec<Vec<Option<i64>>> = read_all(&mut reader).iter().map(|b| longs(b, 0)).collect();
    assert_eq!(
        sizes,
        vec![
            vec![Some(1), Some(2)],
            vec![Some(3), Some(4)],
            vec![Some(5)]
        ]
    );
}

#[test]
fn streams_a_large_file() {
    const ROWS: u64 = 300_000;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    {
        let mut out = BufWriter::new(file.as_file_mut());
        writeln!(out, "ts,host,value,ok,msg").unwrap();
        for i in 0..ROWS {
            writeln!(
                out,
                "2020-01-01T00:00:{:02}.{:06}Z,host{},{}.25,{},\"msg, {}\"",
                i % 60,
                i % 1_000_000,
                i % 7,
                i,
                i % 3 == 0,
                i
            )
            .unwrap();
        }
        out.flush().unwrap();
    }
    let size = file.as_file().metadata().unwrap().len();
    let options = CsvOptions {
        timestamp_column: Some("ts".into()),
        ..CsvOptions::default()
    };
    let mut reader = CsvReader::new(std::fs::File::open(file.path()).unwrap(), options).unwrap();
    assert_eq!(
        reader.column_kinds(),
        [
            ColumnKind::Timestamp,
            ColumnKind::Symbol,
            ColumnKind::Double,
            ColumnKind::Boolean,
            ColumnKind::Varchar
        ]
    );
    // After `new`, only the sample has been consumed.
    assert!(reader.bytes_read() < size / 10);
    let mut rows = 0u64;
    let mut batches = 0;
    let mut last_progress = 0;
    while let Some(batch) = reader.next_batch().unwrap() {
        assert!(batch.num_rows() <= 65_536);
        assert!(reader.bytes_read() >= last_progress);
        last_progress = reader.bytes_read();
        let values = batch.column(2).as_primitive::<Float64Type>();
        assert_eq!(values.value(0), rows as f64 + 0.25);
        rows += batch.num_rows() as u64;
        batches += 1;
    }
    assert_eq!(rows, ROWS);
    assert_eq!(batches, ROWS.div_ceil(65_536));
    assert_eq!(reader.bytes_read(), size);
    let stats = reader.stats();
    assert_eq!(
        (stats.rows_read, stats.rows_imported, stats.rows_rejected),
        (ROWS, ROWS, 0)
    );
    assert_eq!(stats.column_errors, vec![0; 5]);
    let _schema: Arc<_> = reader.schema();
}

fn hinted(data: &[u8], options: CsvOptions) -> CsvReader<&[u8]> {
    CsvReader::new(data, options).expect("reader")
}

#[test]
fn header_detection() {
    let detect = CsvOptions {
        detect_header: true,
        ..CsvOptions::default()
    };
    // A name in a numeric column: a header.
    let reader = hinted(b"ts,v\n2016-01-01,1\n2016-01-02,2\n", detect.clone());
    assert!(reader.has_header());
    assert_eq!(reader.schema().field(1).name(), "v");
    // Every value of the first line parses: data, columns named f0, f1 (or as given).
    let named = CsvOptions {
        default_names: vec!["when".into()],
        ..detect.clone()
    };
    let mut reader = hinted(b"2016-01-01,1\n2016-01-02,2\n", named);
    assert_eq!(
        reader.column_kinds(),
        &[ColumnKind::Timestamp, ColumnKind::Long]
    );
    let batches = read_all(&mut reader);
    assert_eq!(batches[0].num_rows(), 2);
    assert_eq!(batches[0].schema().field(0).name(), "when");
    assert_eq!(batches[0].schema().field(1).name(), "f1");
    // All text: a header when its values appear nowhere below.
    let reader = hinted(b"name,city\nann,paris\nbob,rome\n", detect.clone());
    assert!(reader.has_header());
    let reader = hinted(b"ann,paris\nbob,paris\n", detect.clone());
    assert!(!reader.has_header());
    // A lone line is a header unless it looks like data.
    assert!(hinted(b"a,b\n", detect.clone()).has_header());
    assert!(!hinted(b"a,1\n", detect).has_header());
}

#[test]
fn timestamp_patterns_and_lenient_overrides() {
    let options = CsvOptions {
        type_overrides: vec![("missing".into(), ColumnKind::Long)],
        timestamp_column: Some("ts".into()),
        timestamp_formats: vec![(
            "ts".into(),
            sundial_csv::TimestampFormat::compile("dd/MM/yyyy HH:mm").unwrap(),
        )],
        lenient_overrides: true,
        ..CsvOptions::default()
    };
    let data = b"ts,v\n31/12/2016 23:59,1\n01/01/2017 00:00,2\n";
    let mut reader = CsvReader::new(&data[..], options).expect("reader");
    let kinds = reader.column_kinds().to_vec();
    let batch = read_all(&mut reader).remove(0);
    assert_eq!(kinds[0], ColumnKind::Timestamp);
    assert_eq!(
        timestamps(&batch, 0),
        vec![
            Some(1_483_228_740_000_000_000),
            Some(1_483_228_800_000_000_000)
        ]
    );
}

const RANGE: &str = "timestamps must be from 1678-01-01T00:00:00Z (inclusive) to \
                     2262-01-01T00:00:00Z (exclusive)";

/// The error of reading `data` (header `ts,v`) whole under `Abort`, with `ts` the designated
/// timestamp when `designated`.
fn abort_error(data: &str, designated: bool, options: CsvOptions) -> String {
    let options = CsvOptions {
        atomicity: Atomicity::Abort,
        timestamp_column: designated.then(|| "ts".to_string()),
        ..options
    };
    let result = CsvReader::new(data.as_bytes(), options).and_then(|mut reader| {
        while reader.next_batch()?.is_some() {}
        Ok(())
    });
    result.expect_err(data).to_string()
}

#[test]
fn timestamps_outside_the_storage_range_are_named_never_wrapped_or_clamped() {
    let sample_rows = "2016-01-01T00:00:00Z,1\n".repeat(3);
    let out_of_range = [
        "1600-01-01",
        "2300-01-01T00:00:00Z",
        "1677-12-31T23:59:59.999999999Z",
        "2262-01-01T00:00:00Z",
        "2262-04-11T23:47:16.854775807Z",
        "2262-04-11T23:47:16.854775808Z",
        "1677-09-21T00:12:43.145224191Z",
        "9999-12-31",
        "0001-01-01",
    ];
    for value in out_of_range {
        let want = format!("timestamp '{value}' is out of range: {RANGE}");
        // In the sample of a forced timestamp column.
        let e = abort_error(&format!("ts,v\n{value},1\n"), true, CsvOptions::default());
        assert_eq!(e, format!("line 2, column 'ts': {want}"));
        // After the sample, in a detected TIMESTAMP column.
        let data = format!("ts,v\n{sample_rows}{value},2\n");
        let options = CsvOptions {
            infer_rows: 3,
            ..CsvOptions::default()
        };
        assert_eq!(
            abort_error(&data, false, options),
            format!("line 5, column 'ts': {want}")
        );
    }
    for value in ["1678-01-01T00:00:00Z", "2261-12-31T23:59:59.999999999Z"] {
        let data = format!("ts,v\n{value},1\n");
        let options = CsvOptions {
            timestamp_column: Some("ts".into()),
            atomicity: Atomicity::Abort,
            ..CsvOptions::default()
        };
        let (_, batch) = single_batch(&data, options);
        assert_eq!(
            timestamps(&batch, 0),
            vec![sundial_csv::parse::parse_timestamp_str(value)]
        );
    }
}

#[test]
fn unparseable_timestamps_and_huge_epoch_numbers_are_named() {
    for value in [
        "99999999999999999999999",
        "9223372036854775807",
        "-9223372036854775808",
        "1451606400000000000",
        "2016-13-01",
        "yesterday",
    ] {
        let e = abort_error(&format!("ts,v\n{value},1\n"), true, CsvOptions::default());
        assert_eq!(
            e,
            format!("line 2, column 'ts': cannot parse '{value}' as TIMESTAMP")
        );
    }
}

#[test]
fn timestamp_patterns_out_of_range_are_named() {
    let format = sundial_csv::TimestampFormat::compile("dd/MM/yyyy").unwrap();
    assert_eq!(format.parse_nanos(b"01/01/2300"), None);
    assert_eq!(format.parse_wide(b"01/01/2300").map(|n| n > 0), Some(true));
    let options = CsvOptions {
        timestamp_formats: vec![("ts".into(), format)],
        ..CsvOptions::default()
    };
    assert_eq!(
        abort_error("ts,v\n01/01/2016,1\n01/01/2300,2\n", true, options),
        format!("line 3, column 'ts': timestamp '01/01/2300' is out of range: {RANGE}")
    );
}

#[test]
fn skipped_timestamps_are_counted_and_the_first_is_named() {
    // An out-of-range designated timestamp drops its row even under SkipColumn (it cannot
    // be NULL); elsewhere the value becomes NULL. Either way the first one is named.
    let data = "ts,at,v\n\
                2016-01-01T00:00:00Z,2016-01-01T00:00:00Z,1\n\
                2016-01-01T00:00:01Z,2300-01-01T00:00:00Z,2\n\
                1600-01-01T00:00:00Z,2016-01-01T00:00:00Z,3\n\
                2016-01-01T00:00:03Z,2016-01-01T00:00:00Z,4\n";
    let options = CsvOptions {
        timestamp_column: Some("ts".into()),
        infer_rows: 1,
        ..CsvOptions::default()
    };
    let mut reader = open(data.as_bytes(), options);
    let batches = read_all(&mut reader);
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, 3);
    let at: Vec<Option<i64>> = batches.iter().flat_map(|b| timestamps(b, 1)).collect();
    assert_eq!(at.iter().filter(|v| v.is_none()).count(), 1);
    let stats = reader.stats();
    assert_eq!(stats.column_errors, vec![1, 1, 0]);
    assert_eq!(stats.rows_rejected, 1);
    assert_eq!(
        stats.first_error.as_deref(),
        Some(
            format!(
                "line 3, column 'at': timestamp '2300-01-01T00:00:00Z' is out of range: {RANGE}"
            )
            .as_str()
        )
    );
}

//! Parses the real TSBS data sets, when `zstd` and the files are available (skips otherwise).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use sundial_ilp::{FieldValue, LineParser, LineSpan, LineSplitter};

const DIR: &str = "/work/shared/tsbs";
const MAX_LINE: usize = 64 * 1024;

struct Summary {
    lines: usize,
    rows_by_measurement: Vec<(String, usize)>,
    min_tags: usize,
    max_tags: usize,
}

/// Streams `zstd -dc file` through a LineSplitter in 64 KiB reads, like a TCP connection.
fn parse_file(file: &str) -> Option<Summary> {
    let path = Path::new(DIR).join(file);
    if !path.exists() {
        eprintln!("skipping: {} not found", path.display());
        return None;
    }
    let mut child = match Command::new("zstd")
        .arg("-dc")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("skipping: cannot run zstd: {e}");
            return None;
        }
    };
    let mut stdout = child.stdout.take()?;
    let mut splitter = LineSplitter::new(MAX_LINE);
    let mut parser = LineParser::new(MAX_LINE);
    let mut summary = Summary {
        lines: 0,
        rows_by_measurement: Vec::new(),
        min_tags: usize::MAX,
        max_tags: 0,
    };
    let mut buf = Vec::with_capacity(2 * MAX_LINE);
    let mut chunk = vec![0u8; MAX_LINE];
    let mut handle = |buf: &[u8], span: LineSpan, summary: &mut Summary| {
        let LineSpan::Line(range) = span else {
            panic!("line too long: {span:?}")
        };
        let line = match parser.parse_line(&buf[range.clone()]) {
            Ok(line) => line,
            Err(e) => panic!("{e} in {:?}", String::from_utf8_lossy(&buf[range])),
        };
        summary.lines += 1;
        summary.min_tags = summary.min_tags.min(line.tag_count());
        summary.max_tags = summary.max_tags.max(line.tag_count());
        assert!(line.timestamp().is_some());
        assert!(line.field_count() >= 1);
        for (_, value) in line.fields() {
            assert!(matches!(
                value,
                FieldValue::Float(_) | FieldValue::Integer(_)
            ));
        }
        let m = line.measurement().as_str().unwrap_or_default();
        match summary
            .rows_by_measurement
            .iter_mut()
            .find(|(name, _)| name == m)
        {
            Some((_, n)) => *n += 1,
            None => summary.rows_by_measurement.push((m.to_string(), 1)),
        }
    };
    loop {
        let n = stdout.read(&mut chunk).expect("read zstd output");
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        let consumed = splitter.split(&buf, |span| handle(&buf, span, &mut summary));
        buf.drain(..consumed);
    }
    splitter.split_final(&buf, |span| handle(&buf, span, &mut summary));
    assert!(child.wait().expect("wait for zstd").success());
    Some(summary)
}

#[test]
fn tsbs_devops_cpu() {
    let Some(summary) = parse_file("devops-cpu-s100-1d.ilp.zst") else {
        return;
    };
    assert_eq!(summary.lines, 864_000);
    assert_eq!(
        summary.rows_by_measurement,
        vec![("cpu".to_string(), 864_000)]
    );
    assert_eq!((summary.min_tags, summary.max_tags), (10, 10));
}

#[test]
fn tsbs_iot() {
    let Some(summary) = parse_file("iot-s100-3d.ilp.zst") else {
        return;
    };
    assert_eq!(summary.lines, 777_196);
    assert_eq!(summary.rows_by_measurement.len(), 2);
    assert!(
        summary.min_tags < summary.max_tags,
        "rows with missing tags"
    );
}

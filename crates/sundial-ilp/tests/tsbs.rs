//! Parses TSBS-shaped data made here: the devops `cpu-only` shape at scale 100 over one day
//! (100 hosts with TSBS's ten tags and ten integer fields, one row per host every 10 s, 864,000
//! lines), streamed through a LineSplitter in 64 KiB reads as a TCP connection would be.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sundial_ilp::{FieldValue, LineParser, LineSpan, LineSplitter};

const MAX_LINE: usize = 64 * 1024;
const HOSTS: usize = 100;
const STEPS: usize = 86_400 / 10;
const START_NS: i64 = 1_451_606_400_000_000_000;

const TAGS: [&str; 10] = [
    "hostname",
    "region",
    "datacenter",
    "rack",
    "os",
    "arch",
    "team",
    "service",
    "service_version",
    "service_environment",
];
const METRICS: [&str; 10] = [
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "usage_irq",
    "usage_softirq",
    "usage_steal",
    "usage_guest",
    "usage_guest_nice",
];
const REGIONS: [&str; 9] = [
    "us-east-1",
    "us-west-1",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-northeast-1",
    "sa-east-1",
];

/// A seeded generator's picks and draws, as the data set needs them.
trait Draw {
    fn below(&mut self, n: u64) -> u64;
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str;
}

impl Draw for StdRng {
    fn below(&mut self, n: u64) -> u64 {
        self.random_range(0..n)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.random_range(0..items.len())]
    }
}

/// The devops data set as ILP: rows by time then host, each field a random walk in 0..=100.
fn devops_cpu(seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let series: Vec<String> = (0..HOSTS)
        .map(|h| {
            let region = rng.pick(&REGIONS);
            let values = [
                format!("host_{h}"),
                region.to_string(),
                format!("{region}{}", rng.pick(&["a", "b", "c"])),
                rng.below(100).to_string(),
                rng.pick(&["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"])
                    .to_string(),
                rng.pick(&["x64", "x86"]).to_string(),
                rng.pick(&["SF", "NYC", "LON", "CHI"]).to_string(),
                rng.below(20).to_string(),
                rng.below(2).to_string(),
                rng.pick(&["production", "staging", "test"]).to_string(),
            ];
            let tags: Vec<String> = TAGS
                .iter()
                .zip(&values)
                .map(|(k, v)| format!(",{k}={v}"))
                .collect();
            format!("cpu{}", tags.concat())
        })
        .collect();
    let mut values: Vec<[i64; 10]> = (0..HOSTS)
        .map(|_| std::array::from_fn(|_| rng.below(101) as i64))
        .collect();
    let mut out = Vec::with_capacity(HOSTS * STEPS * 330);
    for step in 0..STEPS {
        let ts = START_NS + step as i64 * 10_000_000_000;
        for (series, row) in series.iter().zip(&mut values) {
            out.extend_from_slice(series.as_bytes());
            for (i, (metric, value)) in METRICS.iter().zip(row.iter_mut()).enumerate() {
                *value = (*value + rng.below(11) as i64 - 5).clamp(0, 100);
                let sep = if i == 0 { ' ' } else { ',' };
                out.extend_from_slice(format!("{sep}{metric}={value}i").as_bytes());
            }
            out.extend_from_slice(format!(" {ts}\n").as_bytes());
        }
    }
    out
}

struct Summary {
    lines: usize,
    rows_by_measurement: Vec<(String, usize)>,
    min_tags: usize,
    max_tags: usize,
    first_ts: Option<i64>,
    last_ts: Option<i64>,
    value_range: (i64, i64),
}

/// Feeds `data` to a LineSplitter in 64 KiB reads, like a TCP connection.
fn parse_stream(data: &[u8]) -> Summary {
    let mut splitter = LineSplitter::new(MAX_LINE);
    let mut parser = LineParser::new(MAX_LINE);
    let mut summary = Summary {
        lines: 0,
        rows_by_measurement: Vec::new(),
        min_tags: usize::MAX,
        max_tags: 0,
        first_ts: None,
        last_ts: None,
        value_range: (i64::MAX, i64::MIN),
    };
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
        let ts = line.timestamp().expect("a timestamp");
        summary.first_ts.get_or_insert(ts);
        summary.last_ts = Some(ts);
        assert_eq!(line.field_count(), 10);
        for (key, value) in line.fields() {
            assert!(METRICS.iter().any(|m| key == *m), "{key}");
            let FieldValue::Integer(v) = value else {
                panic!("{value:?}")
            };
            summary.value_range = (summary.value_range.0.min(v), summary.value_range.1.max(v));
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
    let mut buf = Vec::with_capacity(2 * MAX_LINE);
    for chunk in data.chunks(MAX_LINE) {
        buf.extend_from_slice(chunk);
        let consumed = splitter.split(&buf, |span| handle(&buf, span, &mut summary));
        buf.drain(..consumed);
    }
    splitter.split_final(&buf, |span| handle(&buf, span, &mut summary));
    summary
}

#[test]
fn tsbs_devops_cpu_shape() {
    let data = devops_cpu(123);
    assert_eq!(data, devops_cpu(123), "the generator is deterministic");
    let summary = parse_stream(&data);
    assert_eq!(summary.lines, HOSTS * STEPS);
    assert_eq!(
        summary.rows_by_measurement,
        vec![("cpu".to_string(), HOSTS * STEPS)]
    );
    assert_eq!((summary.min_tags, summary.max_tags), (10, 10));
    assert_eq!(summary.first_ts, Some(START_NS));
    assert_eq!(
        summary.last_ts,
        Some(START_NS + 86_400_000_000_000 - 10_000_000_000)
    );
    let (lo, hi) = summary.value_range;
    assert!((0..=100).contains(&lo) && (0..=100).contains(&hi) && lo < hi);
}

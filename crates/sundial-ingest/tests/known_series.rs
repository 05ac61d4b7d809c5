//! Lines of a series a receiver has seen skip parsing their measurement and tags (the series
//! cache); a line that starts with a space never does. Random lines sent both ways, to two
//! databases, must give the same outcome line by line and the same tables.

use std::sync::Arc;

use arrow_cast::display::{ArrayFormatter, FormatOptions};
use sundial_ilp::Precision;
use sundial_ingest::{IngestError, IngestOptions, Ingestor};
use sundial_storage::{ColumnType, Database, Durability, PartitionBy, StorageOptions, TableDef};

/// xorshift64*: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A line of one of a few tables, mostly of a few hundred series, sometimes of a new one (so
/// that dictionaries outgrow their bounds), with new fields, type conflicts, escapes, repeated
/// keys, tags into non-SYMBOL columns, missing and out-of-range timestamps, and garbage.
fn random_line(rng: &mut Rng, i: u64) -> String {
    if rng.chance(1) {
        return rng
            .pick(&[
                "garbage",
                "cpu,host=a",
                "cpu,host=a usage=",
                "cpu usage=1 x",
            ])
            .into();
    }
    let mut line = rng
        .pick(&["cpu", "cpu", "cpu", "mem", "disk", "Cpu"])
        .to_string();
    let host = if rng.chance(5) {
        rng.below(6000)
    } else {
        rng.below(200)
    };
    let tags: Vec<String> = vec![
        format!("host=h{host}"),
        format!("region={}", rng.pick(&["eu", "us", "ap"])),
        format!("rack={}", rng.below(4)),
    ];
    for tag in &tags {
        if !rng.chance(10) {
            line.push(',');
            line.push_str(tag);
        }
    }
    if rng.chance(2) {
        line.push_str(",host=again");
    }
    if rng.chance(2) {
        line.push_str(",usage=tag");
    }
    if rng.chance(2) {
        line.push_str(",esc=a\\ b");
    }
    if rng.chance(1) {
        line.push_str(&format!(",new_tag_{}=x", rng.below(5)));
    }
    let mut fields = Vec::new();
    if !rng.chance(5) {
        fields.push(format!("usage={}", rng.below(1000) as f64 / 8.0));
    }
    if !rng.chance(5) {
        fields.push(format!("count={}i", rng.below(1000)));
    }
    if rng.chance(30) {
        fields.push(format!("ok={}", rng.pick(&["t", "false"])));
    }
    if rng.chance(20) {
        fields.push(format!(
            "note=\"{}\"",
            rng.pick(&["a", "b c", "q\\\"uote", "é"])
        ));
    }
    if rng.chance(2) {
        fields.push(format!("new_field_{}={}i", rng.below(5), rng.below(9)));
    }
    if rng.chance(2) {
        fields.push(
            rng.pick(&["count=1.5", "ok=\"no\"", "usage=\"x\"", "count=99u"])
                .into(),
        );
    }
    if rng.chance(1) {
        fields.push(
            rng.pick(&[
                "timestamp=5i",
                "f\\ x=1",
                "count=1i",
                "big=99999999999999999999u",
            ])
            .into(),
        );
    }
    if fields.is_empty() || rng.chance(1) {
        fields.push("usage=1".into());
    }
    if rng.chance(20) {
        fields.reverse();
    }
    line.push(' ');
    line.push_str(&fields.join(","));
    if rng.chance(97) {
        line.push_str(&format!(
            " {}",
            1_451_606_400_000_000_000 + i as i64 * 1_000_000_000
        ));
    } else if rng.chance(50) {
        line.push_str(" 99999999999999999999");
    }
    line
}

fn open_db(dir: &std::path::Path) -> Arc<Database> {
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    let db = Database::open(dir, options).unwrap();
    // Tags into a VARCHAR and an INT column: such series are never remembered.
    for (name, columns) in [
        ("mem", vec![("host", ColumnType::Varchar)]),
        ("disk", vec![("rack", ColumnType::Int)]),
    ] {
        let mut all = vec![("timestamp".to_string(), ColumnType::Timestamp)];
        all.extend(columns.iter().map(|(n, t)| (n.to_string(), *t)));
        let def = TableDef {
            name: name.into(),
            columns: all,
            timestamp: Some("timestamp".into()),
            partition_by: PartitionBy::Day,
            indexed: Vec::new(),
            dedup_keys: Vec::new(),
            ttl: None,
            cold_after: None,
        };
        db.create_table(def, false).unwrap();
    }
    db
}

/// Every table as text: its columns, then its rows in storage order.
fn dump(db: &Database) -> Vec<String> {
    let mut out = Vec::new();
    let mut names = db.table_names();
    names.sort();
    for name in names {
        let snapshot = db.table(&name).unwrap().snapshot();
        let meta = snapshot.meta();
        let columns: Vec<String> = meta
            .columns
            .iter()
            .map(|c| format!("{} {:?}", c.name, c.column_type))
            .collect();
        out.push(format!("{name}: {}", columns.join(", ")));
        for (p, partition) in snapshot.partitions().iter().enumerate() {
            let arrays: Vec<_> = (0..meta.columns.len())
                .map(|c| snapshot.read_column(p, c, 0..partition.row_count).unwrap())
                .collect();
            let options = FormatOptions::default().with_null("NULL");
            let formatters: Vec<_> = arrays
                .iter()
                .map(|a| ArrayFormatter::try_new(a.as_ref(), &options).unwrap())
                .collect();
            for row in 0..partition.row_count as usize {
                let values: Vec<String> = formatters
                    .iter()
                    .map(|f| f.value(row).to_string())
                    .collect();
                out.push(values.join(" | "));
            }
        }
    }
    out
}

/// An outcome to compare: byte offsets differ by the leading space, so digits are masked.
fn outcome(result: &Result<(), IngestError>) -> String {
    match result {
        Ok(()) => "ok".into(),
        Err(e) => e.to_string().replace(|c: char| c.is_ascii_digit(), "#"),
    }
}

#[test]
fn known_series_lines_store_what_the_whole_path_stores() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (db_a, db_b) = (open_db(dir_a.path()), open_db(dir_b.path()));
    // Small batches: many hand-offs, so dictionaries are reused and outgrow their bounds.
    let options = IngestOptions {
        commit_rows: 800,
        ..IngestOptions::default()
    };
    let mut a = Ingestor::new(db_a.clone(), options.clone());
    let mut b = Ingestor::new(db_b.clone(), options);
    let mut rng = Rng(0x5eed_cafe);
    let mut accepted = 0;
    for i in 0..40_000 {
        let line = random_line(&mut rng, i);
        let spaced = format!(" {line}");
        let ra = a.ingest_line(line.as_bytes(), Precision::Nanos, 42);
        let rb = b.ingest_line(spaced.as_bytes(), Precision::Nanos, 42);
        assert_eq!(outcome(&ra), outcome(&rb), "line {i}: {line}");
        accepted += u64::from(ra.is_ok());
        if i % 9_000 == 0 {
            a.flush().unwrap();
            b.flush().unwrap();
        }
    }
    a.flush().unwrap();
    b.flush().unwrap();
    assert_eq!(b.stats().lines_of_known_series, 0);
    let known = a.stats().lines_of_known_series;
    assert!(
        known > accepted / 2,
        "{known} of {accepted} lines took the short path"
    );
    assert!(known < accepted, "every line took the short path");
    let (dump_a, dump_b) = (dump(&db_a), dump(&db_b));
    assert!(dump_a.len() > 30_000, "{} rows", dump_a.len());
    for (i, (x, y)) in dump_a.iter().zip(&dump_b).enumerate() {
        assert_eq!(x, y, "row {i} of the dump differs");
    }
    assert_eq!(dump_a.len(), dump_b.len());
}

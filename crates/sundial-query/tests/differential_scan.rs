//! Differential test of the scan kernels: random tables (every fixed-width type, NULLs, NaN
//! and -0.0, several partitions, out-of-order commits, a column added after rows existed)
//! and random filter and aggregate queries from a small grammar, answered by the fast path
//! (filters compiled into kernels, aggregates folded into the scan) and by DataFusion's
//! general operators, which a LIMIT below the query keeps out of the scan.
//!
//! `SCAN_DIFF_CASES` (default 400) queries per table; `SCAN_DIFF_SEED` replays a run.

use datafusion::arrow::util::pretty::pretty_format_batches;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sundial_query::Engine;
use sundial_storage::{Database, Durability, StorageOptions};

fn engine() -> (Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    let db = Database::open(dir.path(), options).expect("open database");
    (Engine::new(db).expect("engine"), dir)
}

/// Two workers with the stack planning needs, as the server runs queries.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(sundial_query::limits::PLANNING_STACK_BYTES)
        .enable_all()
        .build()
        .expect("runtime")
}

async fn run(engine: &Engine, sql: &str) -> Result<String, String> {
    let output = engine.run(sql).await.map_err(|e| e.to_string())?;
    let collected = sundial_query::collect(output)
        .await
        .map_err(|e| e.to_string())?;
    Ok(pretty_format_batches(&collected.batches)
        .map_err(|e| e.to_string())?
        .to_string())
}

/// Numeric columns and the constants they are compared with.
const NUMERIC: &[&str] = &["b", "sh", "i", "l", "f", "d", "late"];
const SYMBOLS: &[&str] = &["s", "s2"];

fn value(rng: &mut StdRng, column: &str) -> String {
    if rng.random_bool(0.12) {
        return "NULL".into();
    }
    match column {
        "b" => rng.random_range(-5..5).to_string(),
        "sh" => rng.random_range(-300..300).to_string(),
        "i" | "l" => rng.random_range(-20..20).to_string(),
        "f" | "d" | "late" => match rng.random_range(0..20) {
            0 => "CAST('NaN' AS DOUBLE)".into(),
            1 => "CAST('-0' AS DOUBLE)".into(),
            2 => "CAST('Infinity' AS DOUBLE)".into(),
            _ => format!("{}", rng.random_range(-40..40) as f64 / 4.0),
        },
        "s" => format!("'{}'", ["a", "b", "c", "d"][rng.random_range(0..4)]),
        "s2" => format!("'{}'", ["x", "y"][rng.random_range(0..2)]),
        "t2" => format!(
            "'2024-01-01T0{}:{:02}:00Z'",
            rng.random_range(0..4),
            rng.random_range(0..60)
        ),
        "dt" => format!("'2024-01-0{}'", rng.random_range(1..4)),
        "flag" => ["true", "false"][rng.random_range(0..2)].into(),
        _ => unreachable!("{column}"),
    }
}

fn constant(rng: &mut StdRng, column: &str) -> String {
    match column {
        "f" | "d" | "late" if rng.random_bool(0.3) => rng.random_range(-10..10).to_string(),
        "i" | "l" | "sh" if rng.random_bool(0.2) => format!("{}.5", rng.random_range(-10..10)),
        "s" => format!("'{}'", ["a", "b", "zz"][rng.random_range(0..3)]),
        "s2" => format!("'{}'", ["x", "y", "none"][rng.random_range(0..3)]),
        _ => {
            let v = value(rng, column);
            if v == "NULL" && rng.random_bool(0.7) {
                value(rng, column)
            } else {
                v
            }
        }
    }
}

fn atom(rng: &mut StdRng) -> String {
    let columns: Vec<&str> = NUMERIC
        .iter()
        .chain(SYMBOLS)
        .chain(&["t2", "dt", "flag"])
        .copied()
        .collect();
    let c = columns[rng.random_range(0..columns.len())];
    if c == "flag" {
        return ["flag", "NOT flag", "flag = true", "flag IS NULL"][rng.random_range(0..4)].into();
    }
    let symbol = SYMBOLS.contains(&c);
    match rng.random_range(0..10) {
        0 => format!("{c} IS NULL"),
        1 => format!("{c} IS NOT NULL"),
        2 | 3 => {
            let n = [1, 1, 2, 3, 12][rng.random_range(0..5)];
            // DataFusion's hashed IN lists tell -0.0 from 0.0, unlike its `=` (and the
            // kernels, and PostgreSQL): no zero in lists of floating-point columns.
            let float = matches!(c, "f" | "d" | "late");
            let list: Vec<String> = (0..n)
                .map(|_| constant(rng, c))
                .map(|v| {
                    if float && matches!(v.as_str(), "0" | "-0.0" | "0.0" | "CAST('-0' AS DOUBLE)")
                    {
                        "1.5".into()
                    } else {
                        v
                    }
                })
                .collect();
            let not = if rng.random_bool(0.3) { "NOT " } else { "" };
            format!("{c} {not}IN ({})", list.join(", "))
        }
        4 if !symbol => format!("{c} BETWEEN {} AND {}", constant(rng, c), constant(rng, c)),
        5 if !symbol && !matches!(c, "t2" | "dt") => {
            // Arithmetic with a constant (compiled for DOUBLE columns, DataFusion's otherwise).
            let op = ["+", "-", "*", "/"][rng.random_range(0..4)];
            let k = ["2", "0.5", "-1.5", "0"][rng.random_range(0..4)];
            let cmp = ["=", "<", ">=", "<>"][rng.random_range(0..4)];
            let v = rng.random_range(-10..10);
            if rng.random_bool(0.3) {
                format!("{k} {op} {c} {cmp} {v}")
            } else {
                format!("{c} {op} {k} {cmp} {v}")
            }
        }
        _ => {
            let ops: &[&str] = if symbol {
                &["=", "<>", "!="]
            } else {
                &["=", "<>", "<", "<=", ">", ">="]
            };
            let op = ops[rng.random_range(0..ops.len())];
            if rng.random_bool(0.2) {
                format!("{} {op} {c}", constant(rng, c))
            } else {
                format!("{c} {op} {}", constant(rng, c))
            }
        }
    }
}

fn filter(rng: &mut StdRng, depth: u32) -> String {
    if depth == 0 || rng.random_bool(0.4) {
        return atom(rng);
    }
    let n = rng.random_range(2..4);
    let parts: Vec<String> = (0..n).map(|_| filter(rng, depth - 1)).collect();
    let joiner = if rng.random_bool(0.6) {
        " AND "
    } else {
        " OR "
    };
    format!("({})", parts.join(joiner))
}

/// An aggregate; `grouped` leaves out min and max of floating-point columns, where
/// DataFusion's grouped accumulators disagree with its own ungrouped ones (and PostgreSQL's)
/// over NaN: they skip it, or not, depending on the order rows come in.
fn aggregate(rng: &mut StdRng, grouped: bool) -> String {
    let c = NUMERIC[rng.random_range(0..NUMERIC.len())];
    let float = matches!(c, "f" | "d" | "late");
    match rng.random_range(0..7) {
        4 | 5 if grouped && float => format!("sum({c})"),
        0 => "count(*)".into(),
        1 => format!("count({c})"),
        2 => format!("sum({c})"),
        3 => format!("avg({c})"),
        4 => format!("min({c})"),
        5 => format!("max({c})"),
        _ => ["min(t2)", "max(dt)", "count(s)", "count(flag)"][rng.random_range(0..4)].into(),
    }
}

fn query(rng: &mut StdRng) -> String {
    let where_ = if rng.random_bool(0.85) {
        format!(" WHERE {}", filter(rng, 2))
    } else {
        String::new()
    };
    match rng.random_range(0..14) {
        0 => format!("SELECT count(DISTINCT s) FROM $t{where_}"),
        1 => format!("SELECT DISTINCT s2 FROM $t{where_} ORDER BY 1"),
        2 => format!("SELECT ts, s, l, d FROM $t{where_} ORDER BY ts, s, l, d"),
        13 => format!("SELECT count(DISTINCT i) FROM $t{where_}"),
        n => {
            let keys = match n {
                3 | 4 => vec!["s"],
                5 => vec!["s", "s2"],
                6 => vec!["s2", "s"],
                10 => vec!["b"],
                11 => vec!["i", "s"],
                12 => vec!["s", "sh", "l"],
                _ => vec![],
            };
            let aggs: Vec<String> = (0..rng.random_range(1..4))
                .map(|_| aggregate(rng, !keys.is_empty()))
                .collect();
            if keys.is_empty() {
                format!("SELECT {} FROM $t{where_}", aggs.join(", "))
            } else {
                let k = keys.join(", ");
                let order: Vec<String> = (1..=keys.len()).map(|i| i.to_string()).collect();
                format!(
                    "SELECT {k}, {} FROM $t{where_} GROUP BY {k} ORDER BY {}",
                    aggs.join(", "),
                    order.join(", ")
                )
            }
        }
    }
}

#[test]
fn kernels_answer_as_the_general_path() {
    let seed: u64 = std::env::var("SCAN_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5ca1_ab1e);
    let cases: usize = std::env::var("SCAN_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    let runtime = runtime();
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut fused_plans, mut kernel_plans) = (0, 0);
    for table in 0..3 {
        let (engine, _dir) = engine();
        runtime.block_on(async {
            run(&engine, "CREATE TABLE t (ts TIMESTAMP, s SYMBOL, s2 SYMBOL, b BYTE, \
                 sh SHORT, i INT, l LONG, f FLOAT, d DOUBLE, t2 TIMESTAMP, dt DATE, \
                 flag BOOLEAN) TIMESTAMP(ts) PARTITION BY HOUR")
                .await
                .expect("create");
            // Commits out of time order, over several partitions; then a column added after
            // rows existed (NULL in every earlier row) and more rows with it.
            for commit in 0..6 {
                if commit == 4 {
                    run(&engine, "ALTER TABLE t ADD COLUMN late DOUBLE").await.expect("add");
                }
                let rows = rng.random_range(1..(if table == 2 { 3000 } else { 300 }));
                let mut values = Vec::with_capacity(rows);
                for _ in 0..rows {
                    let ts = format!(
                        "'2024-01-01T0{}:{:02}:{:02}Z'",
                        rng.random_range(0..4),
                        rng.random_range(0..60),
                        rng.random_range(0..60)
                    );
                    let mut row = vec![ts];
                    for c in ["s", "s2", "b", "sh", "i", "l", "f", "d", "t2", "dt", "flag"] {
                        row.push(value(&mut rng, c));
                    }
                    if commit >= 4 {
                        row.push(value(&mut rng, "late"));
                    }
                    values.push(format!("({})", row.join(", ")));
                }
                // In statements under the operator limit, each its own commit.
                for rows in values.chunks(200) {
                    let sql = format!("INSERT INTO t VALUES {}", rows.join(", "));
                    run(&engine, &sql).await.expect("insert");
                }
            }
            if table == 1 {
                run(&engine, "CREATE TABLE empty AS (SELECT * FROM t WHERE l > 1000)")
                    .await
                    .expect("empty");
            }
            for _ in 0..cases {
                let shape = query(&mut rng);
                let fast = shape.replace("$t", "t");
                let general = shape.replace("$t", "(SELECT * FROM t LIMIT 1000000000) t");
                let (a, b) = (run(&engine, &fast).await, run(&engine, &general).await);
                match (&a, &b) {
                    (Ok(a), Ok(b)) if a != b => {
                        let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
                        let at = la.iter().zip(&lb).position(|(x, y)| x != y).unwrap_or(la.len().min(lb.len()));
                        panic!(
                            "seed {seed}: {fast}\n{} rows fast, {} general; first difference:\n{}\nfast:    {:?}\ngeneral: {:?}",
                            la.len(), lb.len(), la.get(1).unwrap_or(&""), la.get(at), lb.get(at)
                        );
                    }
                    (Ok(_), Ok(_)) => {}
                    // Both may refuse a query (e.g. a type they cannot compare); with the
                    // same error.
                    (Err(a), Err(b)) => assert_eq!(a, b, "seed {seed}: {fast}"),
                    _ => panic!("seed {seed}: {fast}\nfast: {a:?}\ngeneral: {b:?}"),
                }
                if let Ok(plan) = run(&engine, &format!("EXPLAIN {fast}")).await {
                    fused_plans += usize::from(plan.contains("ScanAggregateExec"));
                    kernel_plans += usize::from(plan.contains("(kernel)"));
                }
            }
            if table == 1 {
                for sql in [
                    "SELECT count(*), sum(l), min(d) FROM empty WHERE d > 0",
                    "SELECT s, count(*) FROM empty GROUP BY s",
                    "SELECT count(DISTINCT s) FROM empty",
                ] {
                    let general = sql.replace("empty", "(SELECT * FROM empty LIMIT 100) e");
                    assert_eq!(run(&engine, sql).await, run(&engine, &general).await, "{sql}");
                }
            }
        });
    }
    // The fast paths were taken, not only compared with themselves.
    assert!(
        fused_plans > cases,
        "{fused_plans} plans folded aggregates into the scan"
    );
    assert!(
        kernel_plans > cases,
        "{kernel_plans} plans compiled a filter"
    );
}

/// Ungrouped `min` and `max` over whole zones (65,536 rows) come from the zone maps, the
/// rest of the rows read: answers equal the general path's over zones that are all NULL,
/// below a column's top, hold -0.0 or 0.0 as their extreme (one key in the map, which notes
/// the zeros a zone holds), hold a NaN, or are ordinary; and EXPLAIN ANALYZE shows zones were
/// used.
#[test]
fn extremes_from_zone_maps_answer_as_the_general_path() {
    let runtime = runtime();
    let (engine, _dir) = engine();
    runtime.block_on(async {
        // Zone z holds rows 65536 z .. 65536 (z + 1) of the day's partition.
        let columns = |from: u64, to: u64, late: bool| {
            format!(
                "INSERT INTO z SELECT to_timestamp_micros(1704067200000000 + value * 50000), \
                 CASE WHEN value / 65536 = 1 THEN NULL ELSE (value * 7919) % 100003 - 50000 END, \
                 CASE value / 65536 WHEN 0 THEN (CASE WHEN value = 7 THEN CAST('-0' AS DOUBLE) ELSE value * 0.5 END) \
                   WHEN 2 THEN (CASE WHEN value = 140000 THEN CAST('NaN' AS DOUBLE) ELSE value * 0.25 END) \
                   ELSE -(value % 977) * 1.5 END, \
                 CASE WHEN value % 3 = 0 THEN CAST('-0' AS DOUBLE) ELSE -(value % 50) - 1.0 END, \
                 CAST(value % 1000 AS FLOAT) - 500{} FROM generate_series({from}, {to} - 1)",
                if late { ", value * 2.0 - 1.0" } else { "" }
            )
        };
        run(
            &engine,
            "CREATE TABLE z (ts TIMESTAMP, l LONG, d DOUBLE, neg DOUBLE, f FLOAT) \
             TIMESTAMP(ts) PARTITION BY DAY",
        )
        .await
        .expect("create");
        run(&engine, &columns(0, 150_000, false)).await.expect("insert");
        run(&engine, "ALTER TABLE z ADD COLUMN late DOUBLE").await.expect("add");
        run(&engine, &columns(150_000, 1_100_000, true)).await.expect("insert late");
        let mut used = false;
        for sql in [
            "SELECT min(l), max(l), count(l) FROM $t",
            "SELECT min(d), max(d), min(neg), max(neg) FROM $t",
            "SELECT min(f), max(f), min(late), max(late), count(late) FROM $t",
            "SELECT max(neg), sum(l), avg(d), count(*) FROM $t",
            "SELECT min(ts), max(ts) FROM $t",
        ] {
            let fast = sql.replace("$t", "z");
            let general = sql.replace("$t", "(SELECT * FROM z LIMIT 1000000000) z");
            assert_eq!(run(&engine, &fast).await, run(&engine, &general).await, "{fast}");
            let analyzed = run(&engine, &format!("EXPLAIN ANALYZE {fast}")).await.expect("explain");
            used |= analyzed.contains("zone_rows=") && !analyzed.contains("zone_rows=0");
        }
        assert!(used, "no extreme came from a zone map");
        // Every zone of `neg` has -0.0 as its largest value, one key with 0.0 in the map,
        // which notes the zeros a zone holds: the answer keeps the sign.
        let neg = run(&engine, "SELECT max(neg) FROM z").await.expect("max neg");
        assert!(neg.contains("| -0.0 "), "{neg}");
    });
}

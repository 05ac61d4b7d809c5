//! Differential test of rollup routing: random SAMPLE BY queries over a table with
//! materialized views, answered with routing (from the views where they serve, the table for
//! the rest) and without (from the table), must give the same names, types and rows (floats
//! to a relative 1e-9: sums add in another order). Views that are fresh, behind the table by
//! some commits (out of order too), and invalid are all covered, and the routed plans are
//! checked to read the views at all.
//!
//! `ROLLUP_DIFF_CASES` (default 300) queries per round; `ROLLUP_DIFF_SEED` replays a run.

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sundial_query::Engine;
use sundial_storage::{Database, Durability, StorageOptions};

/// 2024-01-01T00:00:00Z in seconds.
const BASE_S: i64 = 1_704_067_200;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(sundial_query::limits::PLANNING_STACK_BYTES)
        .enable_all()
        .build()
        .expect("runtime")
}

/// One result: column names and types, and rows as text (floats kept apart for tolerance).
#[derive(Debug)]
struct Answer {
    schema: Vec<(String, DataType)>,
    rows: Vec<Vec<Cell>>,
}

#[derive(Debug)]
enum Cell {
    Text(String),
    Float(Option<f64>),
}

fn same(a: &Cell, b: &Cell) -> bool {
    match (a, b) {
        (Cell::Text(a), Cell::Text(b)) => a == b,
        (Cell::Float(Some(a)), Cell::Float(Some(b))) => {
            a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
        }
        (Cell::Float(a), Cell::Float(b)) => a.is_none() && b.is_none(),
        _ => false,
    }
}

fn answer(batches: &[RecordBatch]) -> Answer {
    let mut out = Answer {
        schema: Vec::new(),
        rows: Vec::new(),
    };
    let Some(first) = batches.first() else {
        return out;
    };
    out.schema = first
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    let options = FormatOptions::default();
    for batch in batches {
        for row in 0..batch.num_rows() {
            let mut cells = Vec::new();
            for column in batch.columns() {
                if column.data_type() == &DataType::Float64 {
                    let a = column.as_primitive::<Float64Type>();
                    cells.push(Cell::Float(a.is_valid(row).then(|| a.value(row))));
                } else {
                    let f = ArrayFormatter::try_new(column.as_ref(), &options).unwrap();
                    cells.push(Cell::Text(f.value(row).to_string()));
                }
            }
            out.rows.push(cells);
        }
    }
    out
}

async fn run(engine: &Engine, sql: &str) -> Result<Answer, String> {
    let output = engine.run(sql).await.map_err(|e| e.to_string())?;
    let collected = sundial_query::collect(output)
        .await
        .map_err(|e| e.to_string())?;
    Ok(answer(&collected.batches))
}

async fn plan_text(engine: &Engine, sql: &str) -> String {
    let output = engine.run(&format!("EXPLAIN {sql}")).await.unwrap();
    let collected = sundial_query::collect(output).await.unwrap();
    let mut text = String::new();
    for batch in &collected.batches {
        let plans = batch.column(1).as_string::<i32>();
        for i in 0..plans.len() {
            text.push_str(plans.value(i));
        }
    }
    text
}

/// Counts the rows made, for their timestamps' nanoseconds.
static UNIQUE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// Random rows: hosts, NULLs, a few seconds apart over two days, some out of order.
fn rows(rng: &mut StdRng, from_s: i64, n: usize) -> String {
    let values: Vec<String> = (0..n)
        .map(|i| {
            let back = if rng.random_bool(0.1) {
                rng.random_range(0..20_000)
            } else {
                0
            };
            let ts = BASE_S + from_s + i as i64 * 37 - back;
            let host = ["a", "b", "c", "d"][rng.random_range(0..4)];
            let usage = if rng.random_bool(0.1) {
                "NULL".to_string()
            } else {
                format!("{:.3}", rng.random_range(-50.0..100.0))
            };
            let n = if rng.random_bool(0.1) {
                "NULL".to_string()
            } else {
                rng.random_range(-1000..1000).to_string()
            };
            // Unique timestamps: first and last pick one row of several at the same instant
            // arbitrarily.
            let unique = UNIQUE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let ts = chrono::DateTime::from_timestamp(ts, unique % 1_000_000_000).unwrap();
            format!(
                "('{}', '{host}', '{}', {usage}, {n})",
                ts.format("%Y-%m-%dT%H:%M:%S%.9f"),
                ["x", "y"][i % 2]
            )
        })
        .collect();
    format!("INSERT INTO cpu VALUES {}", values.join(", "))
}

/// A random SAMPLE BY query the views may serve.
fn query(rng: &mut StdRng) -> String {
    let stride = ["1m", "5m", "15m", "1h", "2h", "1d", "90s", "7m"][rng.random_range(0..8)];
    let mut items = vec!["ts".to_string()];
    let keyed = rng.random_bool(0.7);
    if keyed {
        items.push("host".into());
    }
    let aggregates = [
        "avg(usage)",
        "sum(usage)",
        "count()",
        "count(usage)",
        "min(usage)",
        "max(usage)",
        "sum(n)",
        "min(n)",
        "max(n)",
        "count(*)",
        "avg(n)",
        "count(n)",
        "first(usage)",
        "last(usage)",
        "first(n)",
        "last(n)",
    ];
    for _ in 0..rng.random_range(1..4) {
        items.push(aggregates[rng.random_range(0..aggregates.len())].to_string());
    }
    let mut conjuncts = Vec::new();
    let at = |rng: &mut StdRng| {
        let s = BASE_S + rng.random_range(-3_600..2 * 86_400);
        let t = chrono::DateTime::from_timestamp(s, 0).unwrap();
        format!("'{}'", t.format("%Y-%m-%dT%H:%M:%S"))
    };
    match rng.random_range(0..5) {
        0 => {}
        1 => conjuncts.push(format!("ts >= {}", at(rng))),
        2 => conjuncts.push(format!("ts < {}", at(rng))),
        3 => {
            let (a, b) = (at(rng), at(rng));
            conjuncts.push(format!("ts >= {a} AND ts < {b}"));
        }
        _ => {
            let (a, b) = (at(rng), at(rng));
            conjuncts.push(format!("ts BETWEEN {a} AND {b}"));
        }
    }
    if keyed && rng.random_bool(0.4) {
        conjuncts.push(
            ["host = 'a'", "host IN ('b', 'c')", "host <> 'd'"][rng.random_range(0..3)].into(),
        );
    }
    let filter = if conjuncts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conjuncts.join(" AND "))
    };
    let order = match (rng.random_bool(0.2), keyed) {
        (true, true) => " ORDER BY ts DESC, host LIMIT 7",
        (true, false) => " ORDER BY ts DESC LIMIT 7",
        _ => "",
    };
    format!(
        "SELECT {} FROM cpu{filter} SAMPLE BY {stride}{order}",
        items.join(", ")
    )
}

#[test]
fn routed_queries_answer_as_the_table_does() {
    let seed: u64 = std::env::var("ROLLUP_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    let cases: usize = std::env::var("ROLLUP_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    eprintln!("ROLLUP_DIFF_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    let db = Database::open(dir.path(), options).unwrap();
    let routed = Engine::new(db.clone()).unwrap();
    let mut plain = Engine::new(db).unwrap();
    plain.set_rollup_routing(false);
    runtime().block_on(async {
        for sql in [
            "CREATE TABLE cpu (ts TIMESTAMP, host SYMBOL, tag VARCHAR, usage DOUBLE, n LONG) TIMESTAMP(ts) PARTITION BY HOUR",
            &rows(&mut rng, 0, 3_000),
            "CREATE MATERIALIZED VIEW cpu_1m REFRESH MANUAL AS (SELECT ts, host, sum(usage) AS su, count(usage) AS cu, count() AS c, min(usage) AS mnu, max(usage) AS mxu, sum(n) AS sn, count(n) AS cn, min(n) AS mnn, max(n) AS mxn, first(usage) AS fu, last(usage) AS lu, first(n) AS fnn, last(n) AS lnn FROM cpu SAMPLE BY 1m)",
            "CREATE MATERIALIZED VIEW cpu_1h REFRESH MANUAL AS (SELECT ts, host, sum(usage) AS su, count(usage) AS cu, count() AS c FROM cpu SAMPLE BY 1h)",
        ] {
            routed.run(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let (mut served, mut served_picks) = (0, 0);
        for round in 0..4 {
            // Round 0: fresh views; then rows the views have not seen (some out of order), and
            // last an invalid view (which must not serve).
            match round {
                1 | 2 => {
                    let insert = rows(&mut rng, 40_000 + round * 20_000, 500);
                    routed.run(&insert).await.unwrap();
                }
                3 => {
                    routed
                        .run("REFRESH MATERIALIZED VIEW cpu_1m")
                        .await
                        .unwrap();
                    routed.run("ALTER TABLE cpu DROP PARTITION WHERE ts < '2024-01-01T01:00:00'").await.unwrap();
                    routed.run("REFRESH MATERIALIZED VIEW cpu_1h").await.unwrap();
                }
                _ => {}
            }
            for case in 0..cases {
                let sql = query(&mut rng);
                let want = run(&plain, &sql).await;
                let got = run(&routed, &sql).await;
                let context = format!("round {round} case {case}: {sql}");
                let (want, got) = match (want, got) {
                    (Ok(w), Ok(g)) => (w, g),
                    (Err(w), Err(g)) => {
                        assert_eq!(w, g, "{context}");
                        continue;
                    }
                    (w, g) => panic!("{context}\nwithout routing: {w:?}\nwith: {g:?}"),
                };
                assert_eq!(got.schema, want.schema, "{context}");
                assert_eq!(got.rows.len(), want.rows.len(), "{context}");
                for (r, (g, w)) in got.rows.iter().zip(&want.rows).enumerate() {
                    assert!(
                        g.len() == w.len() && g.iter().zip(w).all(|(a, b)| same(a, b)),
                        "{context}\nrow {r}: {g:?} != {w:?}"
                    );
                }
                if plan_text(&routed, &sql).await.contains("cpu_1") {
                    served += 1;
                    if sql.contains("first(") || sql.contains("last(") {
                        served_picks += 1;
                    }
                }
            }
        }
        // Most queries qualify; the invalid round must route none through cpu_1m.
        assert!(served > cases, "only {served} queries were served by views");
        assert!(served_picks > 0, "no first() or last() was served by a view");
        let sql = "SELECT ts, host, sum(usage) FROM cpu SAMPLE BY 1h";
        let text = plan_text(&routed, sql).await;
        assert!(!text.contains("cpu_1m"), "an invalid view served: {text}");
        assert!(!text.contains("cpu_1h"), "an invalid view served: {text}");
    });
}

#[test]
fn explain_shows_the_view_and_routing_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    let db = Database::open(dir.path(), options).unwrap();
    let mut engine = Engine::new(db).unwrap();
    runtime().block_on(async {
        for sql in [
            "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY",
            "INSERT INTO t VALUES ('2024-01-01T00:00:10Z', 'a', 1.0), ('2024-01-01T01:00:10Z', 'a', 2.0)",
            "CREATE MATERIALIZED VIEW t_1m AS (SELECT ts, k, max(v) AS m, first(v) AS f FROM t SAMPLE BY 1m)",
        ] {
            engine.run(sql).await.unwrap();
        }
        let sql = "SELECT ts, k, max(v) FROM t SAMPLE BY 1h";
        assert!(plan_text(&engine, sql).await.contains("t_1m"));
        assert!(
            plan_text(&engine, "SELECT ts, k, first(v) FROM t SAMPLE BY 1h")
                .await
                .contains("t_1m")
        );
        // Not served: an aggregate the view lacks, a filter on a value, a FILL.
        for other in [
            "SELECT ts, k, min(v) FROM t SAMPLE BY 1h",
            "SELECT ts, k, max(v) FROM t WHERE v > 1 SAMPLE BY 1h",
            "SELECT ts, k, max(v) FROM t SAMPLE BY 1h FILL(PREV)",
            "SELECT ts, k, max(v) FROM t SAMPLE BY 30s",
            // first/last need the view's keys exactly: per sub-bucket, which key's row came
            // first is not in the view.
            "SELECT ts, first(v) FROM t SAMPLE BY 1h",
        ] {
            assert!(!plan_text(&engine, other).await.contains("t_1m"), "{other}");
        }
        // A view on a time zone's calendar serves nothing: routing is on UTC's calendar.
        engine
            .run("CREATE MATERIALIZED VIEW t_berlin AS (SELECT ts, k, max(v) AS m FROM t SAMPLE BY 1m ALIGN TO CALENDAR TIME ZONE 'Europe/Berlin')")
            .await
            .unwrap();
        engine.run("DROP MATERIALIZED VIEW t_1m").await.unwrap();
        assert!(!plan_text(&engine, sql).await.contains("t_berlin"));
        engine.set_rollup_routing(false);
        assert!(!plan_text(&engine, sql).await.contains("t_1m"));
    });
}

//! Last-value caches against plain queries: generated commits (in order, out of order, DROP
//! PARTITION, TRUNCATE, ADD COLUMN, a DEDUP upsert) to a table with three caches while the
//! background upkeep runs, and after each commit `LATEST ON`, `SELECT DISTINCT` and
//! `last_cache()` must answer what the same question asked without a cache does (window
//! functions and aggregates over every row).

use std::sync::Arc;

use datafusion::arrow::util::pretty::pretty_format_batches;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sundial_query::Engine;
use sundial_storage::{Database, Durability, StorageOptions};

const DAY_NS: i64 = 86_400_000_000_000;
/// 2024-01-01T00:00:00Z.
const START_NS: i64 = 1_704_067_200_000_000_000;

async fn text(engine: &Engine, sql: &str) -> String {
    let output = engine
        .run(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let collected = sundial_query::collect(output).await.unwrap();
    pretty_format_batches(&collected.batches)
        .unwrap()
        .to_string()
}

fn iso(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns)
        .format("%Y-%m-%dT%H:%M:%S%.9fZ")
        .to_string()
}

/// `n` rows with unique timestamps (`unique` counts them) around day `day`.
fn rows(rng: &mut StdRng, unique: &mut i64, day: i64, n: usize) -> String {
    let hosts = ["'h0'", "'h1'", "'h2'", "'h3'", "'h4'", "'h5'", "NULL"];
    let regions = ["'eu'", "'us'", "'ap'", "NULL"];
    let mut values = Vec::new();
    for _ in 0..n {
        *unique += 1;
        let ts = START_NS + day * DAY_NS + rng.random_range(0..DAY_NS / 2) / 1000 * 1000 + *unique;
        let usage = if rng.random_bool(0.3) {
            "NULL".to_string()
        } else {
            format!("{}", rng.random_range(0..1000))
        };
        let note = if rng.random_bool(0.4) {
            "NULL".to_string()
        } else {
            format!("'n{}'", rng.random_range(0..50))
        };
        values.push(format!(
            "('{}', {}, {}, {usage}, {note})",
            iso(ts),
            hosts[rng.random_range(0..hosts.len())],
            regions[rng.random_range(0..regions.len())],
        ));
    }
    format!(
        "INSERT INTO t (ts, host, region, usage, note) VALUES {}",
        values.join(", ")
    )
}

/// The questions, each with and without a cache to answer it.
const PAIRS: &[(&str, &str)] = &[
    (
        "SELECT ts, host, region, usage, note FROM t LATEST ON ts PARTITION BY host ORDER BY host",
        "SELECT ts, host, region, usage, note FROM (SELECT *, row_number() OVER \
         (PARTITION BY host ORDER BY ts DESC) AS rn FROM t) WHERE rn = 1 ORDER BY host",
    ),
    (
        "SELECT ts, host, region, usage FROM t LATEST ON ts PARTITION BY region, host \
         ORDER BY host, region",
        "SELECT ts, host, region, usage FROM (SELECT *, row_number() OVER \
         (PARTITION BY host, region ORDER BY ts DESC) AS rn FROM t) WHERE rn = 1 \
         ORDER BY host, region",
    ),
    (
        "SELECT host, usage FROM t WHERE host IN ('h1', 'h3') LATEST ON ts PARTITION BY host \
         ORDER BY host",
        "SELECT host, usage FROM (SELECT *, row_number() OVER \
         (PARTITION BY host ORDER BY ts DESC) AS rn FROM t WHERE host IN ('h1', 'h3')) \
         WHERE rn = 1 ORDER BY host",
    ),
    (
        "SELECT DISTINCT host FROM t ORDER BY host",
        "SELECT host FROM t WHERE usage IS NULL OR usage IS NOT NULL GROUP BY host ORDER BY host",
    ),
    (
        "SELECT DISTINCT region, host FROM t ORDER BY region, host",
        "SELECT region, host FROM t WHERE usage IS NULL OR usage IS NOT NULL \
         GROUP BY region, host ORDER BY region, host",
    ),
    (
        "SELECT ts, region, usage, note FROM last_cache('t', 'by_region') ORDER BY region NULLS FIRST",
        "SELECT max(ts) AS ts, region, last_value(usage ORDER BY ts) FILTER \
         (WHERE usage IS NOT NULL) AS usage, last_value(note ORDER BY ts) FILTER \
         (WHERE note IS NOT NULL) AS note FROM t GROUP BY region ORDER BY region NULLS FIRST",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_answer_as_the_table_does() {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    let db = Database::open(dir.path(), options).unwrap();
    let engine = Arc::new(Engine::new(db.clone()).unwrap());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let upkeep = tokio::spawn(Engine::refresh_views(Arc::downgrade(&engine), stopped));
    for sql in [
        "CREATE TABLE t (ts TIMESTAMP, host SYMBOL, region SYMBOL, usage LONG, note VARCHAR) \
         TIMESTAMP(ts) PARTITION BY DAY",
        "CREATE LAST VALUE CACHE by_host ON t (host)",
        "CREATE LAST VALUE CACHE by_both ON t (host, region)",
        "CREATE LAST VALUE CACHE by_region ON t (region) IGNORE NULLS",
    ] {
        engine.run(sql).await.unwrap();
    }
    // The planner picks the caches.
    let plan = text(&engine, &format!("EXPLAIN {}", PAIRS[0].0)).await;
    assert!(plan.contains("last_value_cache=by_host"), "{plan}");
    let plan = text(&engine, &format!("EXPLAIN {}", PAIRS[4].0)).await;
    assert!(plan.contains("DistinctKeysExec"), "{plan}");
    assert!(plan.contains("last_value_cache=by_both"), "{plan}");
    let plan = text(&engine, &format!("EXPLAIN {}", PAIRS[3].1)).await;
    assert!(!plan.contains("DistinctKeysExec"), "{plan}");

    let mut rng = StdRng::seed_from_u64(40);
    let mut unique = 0i64;
    let (mut newest_day, mut oldest_day) = (0i64, 0i64);
    let mut added = 0;
    // Commits of each kind made: in order, out of order, DROP PARTITION, TRUNCATE, ADD COLUMN.
    let mut made = [0usize; 5];
    for step in 0..80 {
        let what = rng.random_range(0..20);
        let sql = match what {
            0..=9 => {
                made[0] += 1;
                if rng.random_bool(0.3) {
                    newest_day += 1;
                }
                let n = rng.random_range(1..40);
                rows(&mut rng, &mut unique, newest_day, n)
            }
            10..=14 => {
                made[1] += 1;
                let day = rng.random_range(oldest_day..=newest_day);
                let n = rng.random_range(1..20);
                rows(&mut rng, &mut unique, day, n)
            }
            15 | 16 if newest_day > oldest_day => {
                made[2] += 1;
                let day = iso(START_NS + oldest_day * DAY_NS);
                oldest_day += 1;
                format!("ALTER TABLE t DROP PARTITION LIST '{}'", &day[..10])
            }
            17 if step % 3 == 0 => {
                made[3] += 1;
                (oldest_day, newest_day) = (newest_day, newest_day);
                "TRUNCATE TABLE t".to_string()
            }
            18 if added < 2 => {
                made[4] += 1;
                added += 1;
                format!("ALTER TABLE t ADD COLUMN extra{added} LONG")
            }
            _ => rows(&mut rng, &mut unique, newest_day, 3),
        };
        engine
            .run(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        for (cached, plain) in PAIRS {
            let (a, b) = (text(&engine, cached).await, text(&engine, plain).await);
            assert_eq!(a, b, "step {step} after {sql}\n{cached}\n{plain}");
        }
    }
    assert!(made.iter().all(|&n| n > 0), "{made:?}");
    // A DISTINCT from a cache is kept like a scan: its shape's plan is made once.
    let prepared = format!("{:?}", engine.prepare(PAIRS[3].0).await.unwrap());
    assert!(prepared.contains("KeptPhysical(kept"), "{prepared}");
    let listing = text(
        &engine,
        "SELECT cache_name, status FROM last_value_caches() ORDER BY cache_name",
    )
    .await;
    assert_eq!(listing.matches("ready").count(), 3, "{listing}");

    // DEDUP upserts keyed by the cache's keys replace rows in place: the cache follows them.
    for sql in [
        "CREATE TABLE d (ts TIMESTAMP, host SYMBOL, v LONG) TIMESTAMP(ts) PARTITION BY DAY \
         DEDUP UPSERT KEYS(ts, host)",
        "CREATE LAST VALUE CACHE last ON d (host)",
        "INSERT INTO d VALUES ('2024-01-01T00:00:00Z', 'a', 1), ('2024-01-01T00:00:01Z', 'b', 2)",
        "SELECT * FROM d LATEST ON ts PARTITION BY host",
        "INSERT INTO d VALUES ('2024-01-01T00:00:01Z', 'b', 20), ('2024-01-01T00:00:00Z', 'a', 10)",
    ] {
        engine.run(sql).await.unwrap();
    }
    assert_eq!(
        text(
            &engine,
            "SELECT host, v FROM d LATEST ON ts PARTITION BY host ORDER BY host"
        )
        .await,
        text(&engine, "SELECT host, v FROM d ORDER BY host").await,
    );
    stop.send(true).unwrap();
    upkeep.await.unwrap();
}

//! Fuzzing of SQL text: seeded random token streams, and mutations of real statements, go
//! through the whole engine (statement splitting, Sundial's own statements, the QuestDB and
//! PostgreSQL rewrites, planning and running). Any answer or error is fine; a panic, a hang
//! or an error without a SQLSTATE is not.
//!
//! Bounded in count and time: `SQL_FUZZ_CASES` (default 50,000) and `SQL_FUZZ_SECONDS`
//! (default 20); `SQL_FUZZ_SEED` replays a run.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sundial_query::Engine;
use sundial_storage::{Database, Durability, StorageOptions};

/// Tokens the streams are made of: keywords of both dialects, names of the test table,
/// literals of every kind, operators and punctuation.
const TOKENS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "ORDER BY",
    "LIMIT",
    "-",
    "OFFSET",
    "HAVING",
    "SAMPLE BY",
    "1h",
    "5m",
    "FILL(PREV)",
    "FILL(LINEAR)",
    "FILL(NULL)",
    "ALIGN TO CALENDAR",
    "TIME ZONE",
    "'Europe/Berlin'",
    "WITH OFFSET",
    "'00:15'",
    "LATEST ON",
    "PARTITION BY",
    "LATEST BY",
    "ASOF JOIN",
    "LT JOIN",
    "TOLERANCE",
    "10s",
    "ON",
    "IN",
    "NOT",
    "AND",
    "OR",
    "BETWEEN",
    "UNION ALL",
    "WITH",
    "AS",
    "(",
    ")",
    ",",
    "*",
    "+",
    "/",
    "%",
    "=",
    "<>",
    ">=",
    "<",
    "||",
    "::",
    "t",
    "ts",
    "k",
    "v",
    "s",
    "count(*)",
    "sum(v)",
    "avg(v)",
    "first(v)",
    "last(v)",
    "max(ts)",
    "timestamp_floor('1h', ts)",
    "time_bucket('1 hour', ts)",
    "date_trunc('day', ts)",
    "'2016-01-01'",
    "'2016-01-01T00:00:00Z'",
    "'2016-01-01;1h;1d;3'",
    "'k1'",
    "''",
    "'it''s'",
    "NULL",
    "TRUE",
    "0",
    "-1",
    "1e308",
    "9223372036854775807",
    "0.5",
    "$1",
    "CAST",
    "DOUBLE",
    "TIMESTAMP",
    "SYMBOL",
    "INTERVAL '1 day'",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "DISTINCT",
    "DISTINCT ON",
    "OVER",
    "row_number()",
    "EXPLAIN",
    "INSERT INTO t VALUES",
    "CREATE TABLE",
    "DROP TABLE",
    "ALTER TABLE",
    "SHOW TABLES",
    "SHOW COLUMNS FROM",
    "TRUNCATE TABLE",
    ";",
    "\"t\"",
    "pg_catalog.pg_class",
    "current_user",
    "generate_series(1, 3)",
    "-- c\n",
    "/* c */",
    "'",
    "\"",
];

/// Statements whose mutations start from real syntax.
const SEEDS: &[&str] = &[
    "SELECT ts, k, avg(v) FROM t WHERE ts IN '2016-01-01' SAMPLE BY 1h FILL(PREV)",
    "SELECT * FROM t LATEST ON ts PARTITION BY k",
    "SELECT k, max(v) FROM t WHERE v > 0.5 GROUP BY k ORDER BY k LIMIT -2",
    "SELECT * FROM t a ASOF JOIN t b ON (k) TOLERANCE 10s",
    "WITH x AS (SELECT k, v FROM t) SELECT count(DISTINCT k) FROM x",
    "SELECT time_bucket('15 minutes', ts) AS b, sum(v) FROM t GROUP BY b ORDER BY b",
    "INSERT INTO t VALUES ('2016-01-01T00:00:01Z', 'k9', 9.5)",
    "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relkind = 'r'",
];

fn engine() -> (Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    let db = Database::open(dir.path(), options).expect("open database");
    let mut engine = Engine::new(db).expect("engine");
    engine.set_query_memory_bytes_max(64 << 20);
    (engine, dir)
}

fn random_stream(rng: &mut StdRng) -> String {
    let n = rng.random_range(1..40);
    (0..n)
        .map(|_| TOKENS[rng.random_range(0..TOKENS.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

fn mutated_seed(rng: &mut StdRng) -> String {
    let seed = SEEDS[rng.random_range(0..SEEDS.len())];
    let mut words: Vec<String> = seed.split(' ').map(str::to_string).collect();
    for _ in 0..rng.random_range(1..4) {
        let at = rng.random_range(0..words.len());
        match rng.random_range(0..3) {
            0 => {
                words.remove(at);
                if words.is_empty() {
                    words.push("SELECT".into());
                }
            }
            1 => words.insert(at, TOKENS[rng.random_range(0..TOKENS.len())].into()),
            _ => words[at] = TOKENS[rng.random_range(0..TOKENS.len())].into(),
        }
    }
    words.join(" ")
}

#[test]
fn random_sql_gets_an_answer_or_a_clean_error() {
    let seed: u64 = std::env::var("SQL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_5017);
    let cases: usize = std::env::var("SQL_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50_000);
    let seconds: u64 = std::env::var("SQL_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(sundial_query::limits::PLANNING_STACK_BYTES)
        .enable_all()
        .build()
        .expect("runtime");
    let (engine, _dir) = engine();
    runtime.block_on(async {
        engine
            .execute(
                "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE, s VARCHAR) TIMESTAMP(ts) \
                 PARTITION BY HOUR; \
                 INSERT INTO t SELECT to_timestamp_seconds(1451606400 + value * 60), \
                 'k' || (value % 5), value / 10.0, 'x' FROM generate_series(0, 299)",
            )
            .await
            .expect("set up");
    });
    let mut rng = StdRng::seed_from_u64(seed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut ran = 0;
    while ran < cases && Instant::now() < deadline {
        let sql = if rng.random_bool(0.5) {
            random_stream(&mut rng)
        } else {
            mutated_seed(&mut rng)
        };
        // Each statement may run at most a few seconds: runaway ones are dropped (which must
        // stop them) and count as answered.
        let outcome = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), async {
                match engine.run(&sql).await {
                    Ok(output) => sundial_query::collect(output).await.map(|_| ()),
                    Err(e) => Err(e),
                }
            })
            .await
        });
        if let Ok(Err(e)) = outcome {
            let state = e.sqlstate();
            assert!(
                state.len() == 5 && !e.to_string().is_empty(),
                "seed {seed}, case {ran}: {sql:?} gave an error without SQLSTATE: {e}"
            );
            assert!(
                !e.to_string().contains("panicked"),
                "seed {seed}, case {ran}: {sql:?} panicked: {e}"
            );
        }
        ran += 1;
    }
    assert!(ran > 0);
    // The engine still answers after all of it.
    let rows = runtime
        .block_on(engine.execute("SELECT 1"))
        .expect("SELECT 1");
    assert_eq!(rows[0].batches[0].num_rows(), 1);
}

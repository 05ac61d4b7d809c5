//! Materialized views whose watermark cannot be trusted: a refresh state past the base table's
//! last commit (what a backup copying the view after a later refresh restores) makes the next
//! refresh a full one, and no query is routed to such a view meanwhile.

use datafusion::arrow::util::pretty::pretty_format_batches;
use sundial_query::Engine;
use sundial_storage::{Database, Durability, RefreshState, StorageOptions};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watermark_past_the_base_refreshes_fully() {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    let db = Database::open(dir.path(), options).unwrap();
    let engine = Engine::new(db.clone()).unwrap();
    for sql in [
        "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY",
        "INSERT INTO t VALUES ('2024-01-01T00:00:10Z', 'a', 1.0), ('2024-01-01T01:00:10Z', 'b', 2.0)",
        "CREATE MATERIALIZED VIEW t_1h REFRESH MANUAL AS (SELECT ts, k, sum(v) AS s, count(v) AS c FROM t SAMPLE BY 1h)",
    ] {
        engine.run(sql).await.unwrap();
    }
    let view = db.table("t_1h").unwrap();
    let base = db.table("t").unwrap();
    // The view claims commits the base table does not have, and holds rows the base never had.
    let ahead = RefreshState {
        base_id: base.id(),
        base_seq: base.snapshot().seq() + 5,
        refreshed_at_ns: 0,
        invalid: None,
    };
    let mut w = view.writer().unwrap();
    w.replace_range(1_704_153_600_000_000_000, 1_704_157_200_000_000_000)
        .unwrap();
    let ghost = datafusion::arrow::record_batch::RecordBatch::try_new(
        view.meta().arrow_schema(),
        vec![
            std::sync::Arc::new(datafusion::arrow::array::TimestampNanosecondArray::from(
                vec![1_704_153_600_000_000_000],
            )),
            std::sync::Arc::new(datafusion::arrow::array::DictionaryArray::<
                datafusion::arrow::datatypes::Int32Type,
            >::from_iter(["ghost"])),
            std::sync::Arc::new(datafusion::arrow::array::Float64Array::from(vec![9.0])),
            std::sync::Arc::new(datafusion::arrow::array::Int64Array::from(vec![1])),
        ],
    )
    .unwrap();
    w.append(&sundial_storage::conform(&ghost, &view.meta()).unwrap())
        .unwrap();
    w.set_refresh(ahead).unwrap();
    w.commit().unwrap();
    drop(w);
    // Not routed meanwhile: the query reads the table.
    let sql = "SELECT ts, k, sum(v) FROM t SAMPLE BY 1h";
    let plan = text(&engine, &format!("EXPLAIN {sql}")).await;
    assert!(!plan.contains("t_1h"), "{plan}");
    // The next refresh is full: the ghost row goes, the watermark is the base's commit.
    engine
        .run("REFRESH MATERIALIZED VIEW t_1h INCREMENTAL")
        .await
        .unwrap();
    let rows = text(&engine, "SELECT ts, k, s, c FROM t_1h ORDER BY ts").await;
    assert!(!rows.contains("ghost"), "{rows}");
    assert_eq!(
        rows,
        text(
            &engine,
            "SELECT ts, k, sum(v) AS s, count(v) AS c FROM t SAMPLE BY 1h ORDER BY ts"
        )
        .await
    );
    assert_eq!(
        view.snapshot().refresh().map(|r| r.base_seq),
        Some(base.snapshot().seq())
    );
    let plan = text(&engine, &format!("EXPLAIN {sql}")).await;
    assert!(plan.contains("t_1h"), "routed again once refreshed: {plan}");
}

/// A full refresh over many base partitions is one commit of the view: a reader sees the view
/// before or after it, never some buckets recomputed and others not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_refresh_is_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    let db = Database::open(dir.path(), options).unwrap();
    let engine = Engine::new(db.clone()).unwrap();
    for sql in [
        "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY HOUR",
        "INSERT INTO t SELECT to_timestamp_seconds(1704067200 + value * 600), 'k' || (value % 3), \
         value FROM generate_series(0, 599)",
        "CREATE MATERIALIZED VIEW t_1h REFRESH MANUAL AS (SELECT ts, k, sum(v) AS s FROM t SAMPLE BY 1h)",
        "INSERT INTO t VALUES ('2024-01-01T00:30:00Z', 'k9', 1.0), ('2024-01-04T03:30:00Z', 'k9', 2.0)",
    ] {
        engine
            .run(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let base = db.table("t").unwrap();
    assert!(base.snapshot().partitions().len() > 50);
    let view = db.table("t_1h").unwrap();
    let before = view.snapshot().seq();
    engine
        .run("REFRESH MATERIALIZED VIEW t_1h FULL")
        .await
        .unwrap();
    assert_eq!(view.snapshot().seq(), before + 1);
    assert_eq!(
        text(&engine, "SELECT ts, k, s FROM t_1h ORDER BY ts, k").await,
        text(
            &engine,
            "SELECT ts, k, sum(v) AS s FROM t SAMPLE BY 1h ORDER BY ts, k"
        )
        .await
    );
}

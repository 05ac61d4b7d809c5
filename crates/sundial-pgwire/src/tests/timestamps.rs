//! Timestamps a table cannot hold are refused with SQLSTATE 22008 on every PG input path,
//! never wrapped or clamped, and change nothing.

use std::io::Cursor;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::SinkExt;
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use super::*;
use crate::copy_decode::BINARY_SIGNATURE;

/// The instant `micros` after 2000-01-01, as a client sends it in binary.
fn since_2000(micros: i64) -> SystemTime {
    let epoch = UNIX_EPOCH + Duration::from_secs(946_684_800);
    if micros >= 0 {
        epoch + Duration::from_micros(micros as u64)
    } else {
        epoch - Duration::from_micros(micros.unsigned_abs())
    }
}

fn unix_seconds(seconds: i64) -> SystemTime {
    since_2000((seconds - 946_684_800) * 1_000_000)
}

const YEAR_1600: i64 = -11_676_096_000;
const YEAR_2300: i64 = 10_413_792_000;
const YEAR_2024: i64 = 1_704_067_200;

fn assert_overflow(result: Result<impl std::fmt::Debug, tokio_postgres::Error>, shown: &str) {
    let e = result.expect_err("an out-of-range timestamp is refused");
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.code(), &SqlState::DATETIME_FIELD_OVERFLOW, "{db:?}");
    assert!(db.message().contains(shown), "{}", db.message());
}

async fn table(server: &TestServer) -> Client {
    let client = server.client().await.expect("log in");
    client
        .batch_execute("CREATE TABLE t (ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY DAY")
        .await
        .expect("create the table");
    client
}

async fn rows(client: &Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_timestamp_parameters_out_of_range_are_refused() {
    let server = TestServer::start(PgOptions::default()).await;
    let client = table(&server).await;
    let select = client
        .prepare_typed("SELECT $1::timestamp", &[Type::TIMESTAMP])
        .await
        .expect("prepare");
    assert_overflow(
        client.query_one(&select, &[&since_2000(i64::MAX)]).await,
        "294277-01-09 04:00:54.775807",
    );
    assert_overflow(
        client.query_one(&select, &[&unix_seconds(YEAR_2300)]).await,
        "2300-01-01 00:00:00",
    );
    let insert = client
        .prepare_typed(
            "INSERT INTO t VALUES ($1, $2)",
            &[Type::TIMESTAMP, Type::INT8],
        )
        .await
        .expect("prepare");
    for (at, shown) in [
        (unix_seconds(YEAR_1600), "1600-01-01 00:00:00"),
        (unix_seconds(YEAR_2300), "2300-01-01 00:00:00"),
        (since_2000(i64::MIN + 1), "-290278-12-22"),
    ] {
        assert_overflow(client.execute(&insert, &[&at, &1i64]).await, shown);
    }
    assert_eq!(rows(&client).await, 0, "nothing was stored");
    let at = unix_seconds(YEAR_2024);
    client
        .execute(&insert, &[&at, &2i64])
        .await
        .expect("insert");
    let back: SystemTime = client
        .query_one("SELECT ts FROM t", &[])
        .await
        .expect("read back")
        .get(0);
    assert_eq!(back, at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_timestamp_parameters_out_of_range_are_refused() {
    let server = TestServer::start(PgOptions::default()).await;
    let client = table(&server).await;
    // Text parameters whose type the client leaves to the server.
    let insert = client
        .prepare_typed(
            "INSERT INTO t VALUES ($1, $2)",
            &[Type::UNKNOWN, Type::INT8],
        )
        .await
        .expect("prepare");
    for value in ["2300-01-01 00:00:00", "1600-01-01", "2262-02-01 00:00:00"] {
        assert_overflow(client.execute(&insert, &[&value, &1i64]).await, value);
    }
    assert_eq!(rows(&client).await, 0, "nothing was stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_timestamps_out_of_range_are_refused() {
    let server = TestServer::start(PgOptions::default()).await;
    let client = table(&server).await;
    let copy = |sql: &'static str, data: Vec<u8>| {
        let client = &client;
        async move {
            let sink = client.copy_in::<_, Cursor<Vec<u8>>>(sql).await?;
            let mut sink = std::pin::pin!(sink);
            sink.send(Cursor::new(data)).await?;
            sink.as_mut().finish().await
        }
    };
    for (sql, data, shown) in [
        (
            "COPY t FROM STDIN",
            "2024-01-01T00:00:00Z\t1\n2300-01-01T00:00:00Z\t2\n",
            "2300-01-01T00:00:00Z",
        ),
        (
            "COPY t FROM STDIN (FORMAT csv)",
            "2024-01-01T00:00:00Z,1\n2262-02-01 00:00:00,2\n",
            "2262-02-01 00:00:00",
        ),
        (
            "COPY t FROM STDIN",
            "1677-12-31 00:00:00\t1\n",
            "1677-12-31 00:00:00",
        ),
    ] {
        assert_overflow(copy(sql, data.as_bytes().to_vec()).await, shown);
    }
    let mut binary = BINARY_SIGNATURE.to_vec();
    binary.extend_from_slice(&[0; 8]);
    binary.extend_from_slice(&2i16.to_be_bytes());
    binary.extend_from_slice(&8i32.to_be_bytes());
    binary.extend_from_slice(&i64::MAX.to_be_bytes());
    binary.extend_from_slice(&8i32.to_be_bytes());
    binary.extend_from_slice(&1i64.to_be_bytes());
    binary.extend_from_slice(&(-1i16).to_be_bytes());
    assert_overflow(
        copy("COPY t FROM STDIN (FORMAT binary)", binary).await,
        "294277-01-09 04:00:54.775807",
    );
    assert_eq!(rows(&client).await, 0, "nothing was stored");
    let copied = copy("COPY t FROM STDIN", b"2024-01-01T00:00:00Z\t1\n".to_vec())
        .await
        .expect("an in-range COPY");
    assert_eq!(copied, 1);
}

//! Pipelined extended-protocol messages are answered in order; an error skips the rest of the
//! pipeline up to Sync, after which the session goes on; a failed transaction block refuses
//! statements (25P02, status 'E') until it ends.

use super::wire::{Messages, Wire};
use super::*;

pub const CREATE_T: &str = "CREATE TABLE t (ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY DAY";

/// A server whose users log in with a cleartext password, as [`Wire`] does.
pub async fn wire_server() -> TestServer {
    TestServer::start_with(PgOptions::default(), AuthMethod::Password).await
}

/// A raw session with table `t (ts, v)` created.
pub async fn with_table(server: &TestServer) -> Wire {
    let mut wire = Wire::connect(server.addr).await;
    assert_eq!(
        wire.round_trip(Messages::new().query(CREATE_T)).await,
        ["CommandComplete CREATE TABLE", "ReadyForQuery I"]
    );
    wire
}

/// `t`'s values of `v` by time, through a simple query.
pub async fn values(wire: &mut Wire) -> Vec<String> {
    wire.round_trip(Messages::new().query("SELECT v FROM t ORDER BY ts"))
        .await
}

fn insert(messages: Messages, second: u32, v: &str) -> Messages {
    let ts = format!("2024-01-01 00:00:{second:02}");
    messages
        .bind("", "ins", &[Some(&ts), Some(v)])
        .execute("", 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_statements_are_answered_in_order_at_one_sync() {
    let server = wire_server().await;
    let mut wire = with_table(&server).await;
    let pipeline = Messages::new().parse("ins", "INSERT INTO t VALUES ($1, $2)");
    let pipeline = insert(insert(pipeline, 0, "1"), 1, "2")
        .parse("", "SELECT v, v * $1 AS w FROM t ORDER BY ts")
        .bind("", "", &[Some("10")])
        .describe_portal("")
        .execute("", 0)
        .parse("", "SELECT 'last' AS s")
        .bind("", "", &[])
        .execute("", 0)
        .sync();
    assert_eq!(
        wire.round_trip(pipeline).await,
        [
            "ParseComplete",
            "BindComplete",
            "CommandComplete INSERT 0 1",
            "BindComplete",
            "CommandComplete INSERT 0 1",
            "ParseComplete",
            "BindComplete",
            "RowDescription v,w",
            "DataRow 1|10",
            "DataRow 2|20",
            "CommandComplete SELECT 2",
            "ParseComplete",
            "BindComplete",
            "DataRow last",
            "CommandComplete SELECT 1",
            "ReadyForQuery I",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_pipelining_queries_gets_each_its_own_answer() {
    let server = wire_server().await;
    let client = server.client().await.expect("log in");
    let double = client
        .prepare("SELECT $1::int8 * 2")
        .await
        .expect("prepare");
    // tokio-postgres sends all three before reading any answer.
    let (a, b, c) = tokio::join!(
        client.query_one(&double, &[&1i64]),
        client.query_one(&double, &[&2i64]),
        client.query_one("SELECT 'three'", &[]),
    );
    assert_eq!(a.expect("first").get::<_, i64>(0), 2);
    assert_eq!(b.expect("second").get::<_, i64>(0), 4);
    assert_eq!(c.expect("third").get::<_, String>(0), "three");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_at_bind_skips_the_rest_of_the_pipeline_until_sync() {
    let server = wire_server().await;
    let mut wire = with_table(&server).await;
    let pipeline = Messages::new().parse("ins", "INSERT INTO t VALUES ($1, $2)");
    let pipeline = insert(insert(insert(pipeline, 0, "1"), 1, "not a number"), 2, "3").sync();
    assert_eq!(
        wire.round_trip(pipeline).await,
        [
            "ParseComplete",
            "BindComplete",
            "CommandComplete INSERT 0 1",
            "Error 22P02",
            "ReadyForQuery I",
        ]
    );
    // Every statement commits on its own: the first insert stays; the third never ran.
    assert_eq!(
        values(&mut wire).await,
        [
            "RowDescription v",
            "DataRow 1",
            "CommandComplete SELECT 1",
            "ReadyForQuery I"
        ]
    );
    // The statement parsed before the error is still there.
    assert_eq!(
        wire.round_trip(insert(Messages::new(), 3, "4").sync())
            .await,
        [
            "BindComplete",
            "CommandComplete INSERT 0 1",
            "ReadyForQuery I"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_at_parse_skips_the_rest_of_the_pipeline_until_sync() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    let pipeline = Messages::new()
        .parse("s1", "SELECT 1 AS a")
        .bind("", "s1", &[])
        .execute("", 0)
        .parse("s2", "SELECT * FROM no_such_table")
        .bind("", "s2", &[])
        .execute("", 0)
        .parse("s3", "SELECT 3 AS c")
        .bind("", "s3", &[])
        .execute("", 0)
        .sync();
    assert_eq!(
        wire.round_trip(pipeline).await,
        [
            "ParseComplete",
            "BindComplete",
            "DataRow 1",
            "CommandComplete SELECT 1",
            "Error 42P01",
            "ReadyForQuery I",
        ]
    );
    assert!(
        wire.errors[0].contains("no_such_table"),
        "{:?}",
        wire.errors
    );
    // The skipped Parse of s3 did not happen; s1 is still there.
    let after = Messages::new()
        .bind("", "s3", &[])
        .sync()
        .bind("", "s1", &[])
        .execute("", 0)
        .sync();
    assert_eq!(
        wire.round_trip(after).await,
        ["Error 26000", "ReadyForQuery I"]
    );
    assert_eq!(
        wire.read_until_ready().await,
        [
            "BindComplete",
            "DataRow 1",
            "CommandComplete SELECT 1",
            "ReadyForQuery I"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_while_rows_stream_skips_the_rest_of_the_pipeline_until_sync() {
    let server = wire_server().await;
    let mut wire = with_table(&server).await;
    let rows = Messages::new().parse("ins", "INSERT INTO t VALUES ($1, $2)");
    let rows = insert(insert(rows, 0, "5"), 1, "0").sync();
    assert_eq!(
        wire.round_trip(rows).await.last().map(String::as_str),
        Some("ReadyForQuery I")
    );
    let pipeline = Messages::new()
        .parse("", "SELECT 10 / v AS q FROM t ORDER BY ts")
        .bind("", "", &[])
        .execute("", 0)
        .parse("", "SELECT 2 AS b")
        .bind("", "", &[])
        .execute("", 0)
        .sync()
        .parse("", "SELECT 3 AS c")
        .bind("", "", &[])
        .execute("", 0)
        .sync();
    let answer = wire.round_trip(pipeline).await;
    assert_eq!(
        answer,
        [
            "ParseComplete",
            "BindComplete",
            "Error 22012",
            "ReadyForQuery I"
        ]
    );
    assert_eq!(
        wire.read_until_ready().await,
        [
            "ParseComplete",
            "BindComplete",
            "DataRow 3",
            "CommandComplete SELECT 1",
            "ReadyForQuery I"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_transaction_block_refuses_statements_until_rollback() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    assert_eq!(
        wire.round_trip(Messages::new().query("BEGIN")).await,
        ["CommandComplete BEGIN", "ReadyForQuery T"]
    );
    let failing = Messages::new()
        .parse("", "SELECT 1 AS a")
        .bind("", "", &[])
        .execute("", 0)
        .parse("", "SELECT * FROM no_such_table")
        .bind("", "", &[])
        .execute("", 0)
        .parse("", "SELECT 3 AS c")
        .bind("", "", &[])
        .execute("", 0)
        .sync();
    assert_eq!(
        wire.round_trip(failing).await,
        [
            "ParseComplete",
            "BindComplete",
            "DataRow 1",
            "CommandComplete SELECT 1",
            "Error 42P01",
            "ReadyForQuery E",
        ]
    );
    let select = || {
        Messages::new()
            .parse("", "SELECT 1 AS a")
            .bind("", "", &[])
            .execute("", 0)
            .sync()
    };
    assert_eq!(
        wire.round_trip(select()).await,
        ["Error 25P02", "ReadyForQuery E"]
    );
    assert_eq!(
        wire.round_trip(Messages::new().query("SELECT 1")).await,
        ["Error 25P02", "ReadyForQuery E"]
    );
    let rollback = Messages::new()
        .parse("", "ROLLBACK")
        .bind("", "", &[])
        .execute("", 0)
        .sync();
    assert_eq!(
        wire.round_trip(rollback).await,
        [
            "ParseComplete",
            "BindComplete",
            "CommandComplete ROLLBACK",
            "ReadyForQuery I"
        ]
    );
    assert_eq!(
        wire.round_trip(select()).await,
        [
            "ParseComplete",
            "BindComplete",
            "DataRow 1",
            "CommandComplete SELECT 1",
            "ReadyForQuery I"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_of_a_failed_block_answers_rollback() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    let answers = wire
        .round_trip(Messages::new().query("BEGIN; SELECT * FROM no_such_table"))
        .await;
    assert_eq!(
        answers,
        ["CommandComplete BEGIN", "Error 42P01", "ReadyForQuery E"]
    );
    assert_eq!(
        wire.round_trip(Messages::new().query("COMMIT")).await,
        ["CommandComplete ROLLBACK", "ReadyForQuery I"]
    );
    assert_eq!(
        wire.round_trip(Messages::new().query("SELECT 1 AS a"))
            .await,
        [
            "RowDescription a",
            "DataRow 1",
            "CommandComplete SELECT 1",
            "ReadyForQuery I"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_with_the_wrong_number_of_parameters_is_08p01_and_the_session_goes_on() {
    let server = wire_server().await;
    let mut wire = with_table(&server).await;
    let pipeline = Messages::new()
        .parse("ins", "INSERT INTO t VALUES ($1, $2)")
        .bind("", "ins", &[Some("2024-01-01 00:00:00")])
        .execute("", 0)
        .sync();
    assert_eq!(
        wire.round_trip(pipeline).await,
        ["ParseComplete", "Error 08P01", "ReadyForQuery I"]
    );
    let pipeline = Messages::new()
        .bind(
            "",
            "ins",
            &[Some("2024-01-01 00:00:00"), Some("1"), Some("2")],
        )
        .execute("", 0)
        .sync();
    assert_eq!(
        wire.round_trip(pipeline).await,
        ["Error 08P01", "ReadyForQuery I"]
    );
    // The session and its statement are still there.
    assert_eq!(
        wire.round_trip(insert(Messages::new(), 0, "7").sync())
            .await,
        [
            "BindComplete",
            "CommandComplete INSERT 0 1",
            "ReadyForQuery I"
        ]
    );
}

/// A statement of nothing but comments or semicolons, parsed and run over the extended
/// protocol, is an EmptyQueryResponse, as in PostgreSQL (drivers ping with `-- ping`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comment_only_statements_are_empty_in_the_extended_protocol() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    for sql in ["-- ping", "/* nothing */ ;", " ; ", "-- a\n-- b\n"] {
        let messages = Messages::new()
            .parse("", sql)
            .bind("", "", &[])
            .execute("", 0)
            .sync();
        assert_eq!(
            wire.round_trip(messages).await,
            [
                "ParseComplete",
                "BindComplete",
                "EmptyQueryResponse",
                "ReadyForQuery I"
            ],
            "{sql:?}"
        );
    }
    // A comment before a statement leaves the statement.
    let messages = Messages::new()
        .parse("", "-- tag\nSELECT 1 AS one")
        .bind("", "", &[])
        .execute("", 0)
        .sync();
    assert_eq!(
        wire.round_trip(messages).await,
        [
            "ParseComplete",
            "BindComplete",
            "DataRow 1",
            "CommandComplete SELECT 1",
            "ReadyForQuery I"
        ]
    );
}

//! CancelRequest: the right process id and key stop the running statement with SQLSTATE 57014
//! and the session goes on; a wrong key or process id stops nothing.

use std::time::Duration;

use tokio_postgres::error::SqlState;

use super::pipeline::{CREATE_T, values, wire_server};
use super::wire::{Messages, Wire, cancel};

/// Runs for hours in a debug build; it streams, so it holds no memory meanwhile.
const LONG: &str =
    "SELECT count(*) AS n FROM generate_series(1, 20000000000) AS g(x) WHERE x % 7 = 3";

/// A cancel that stopped nothing leaves the statement running for at least this long.
const STILL_RUNNING: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_with_the_right_key_stops_a_simple_query() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    let mut other = Wire::connect(server.addr).await;
    wire.send(Messages::new().query(LONG)).await;
    // Neither a wrong key nor another session's key reaches this statement.
    cancel(server.addr, wire.pid, wire.secret.wrapping_add(1)).await;
    cancel(server.addr, wire.pid + 1000, wire.secret).await;
    cancel(server.addr, other.pid, other.secret).await;
    assert_eq!(
        wire.arriving_within(STILL_RUNNING).await,
        Vec::<String>::new()
    );
    cancel(server.addr, wire.pid, wire.secret).await;
    assert_eq!(
        wire.read_until_ready().await,
        ["RowDescription n", "Error 57014", "ReadyForQuery I"]
    );
    assert_eq!(wire.errors, ["canceling statement due to user request"]);
    // The session, and the one whose key was used while it was idle, go on.
    for session in [&mut wire, &mut other] {
        assert_eq!(
            session
                .round_trip(Messages::new().query("SELECT 1 AS a"))
                .await,
            [
                "RowDescription a",
                "DataRow 1",
                "CommandComplete SELECT 1",
                "ReadyForQuery I"
            ]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_stops_a_pipelined_statement_and_skips_to_sync() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    let pipeline = Messages::new()
        .parse("", "SELECT 1 AS a")
        .bind("", "", &[])
        .execute("", 0)
        .flush()
        .parse("", LONG)
        .bind("", "", &[])
        .execute("", 0)
        .parse("", "SELECT 3 AS c")
        .bind("", "", &[])
        .execute("", 0)
        .sync();
    wire.send(pipeline).await;
    // What the Flush asked for is not held back by the long statement, nor is what was
    // answered before the session waits on it.
    assert_eq!(
        wire.read_until("CommandComplete").await,
        [
            "ParseComplete",
            "BindComplete",
            "DataRow 1",
            "CommandComplete SELECT 1"
        ]
    );
    assert_eq!(
        wire.arriving_within(STILL_RUNNING).await,
        ["ParseComplete", "BindComplete"]
    );
    cancel(server.addr, wire.pid, wire.secret).await;
    assert_eq!(
        wire.read_until_ready().await,
        ["Error 57014", "ReadyForQuery I"]
    );
    // The statement after the cancelled one was skipped; the session goes on.
    let again = Messages::new()
        .parse("", "SELECT 4 AS d")
        .bind("", "", &[])
        .execute("", 0)
        .sync();
    assert_eq!(
        wire.round_trip(again).await,
        [
            "ParseComplete",
            "BindComplete",
            "DataRow 4",
            "CommandComplete SELECT 1",
            "ReadyForQuery I"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cancels_its_query_and_goes_on() {
    let server = wire_server().await;
    let client = server.client().await.expect("log in");
    let token = client.cancel_token();
    let running = tokio::spawn(async move {
        let result = client.query_one(LONG, &[]).await;
        (client, result)
    });
    // The cancel must find the statement running (one that arrives first stops nothing), so
    // it is sent again until the query ends.
    tokio::pin!(running);
    let mut attempts = 0;
    let (client, result) = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        token
            .cancel_query(tokio_postgres::NoTls)
            .await
            .expect("send the cancel");
        if let Ok(ended) = tokio::time::timeout(Duration::from_secs(1), &mut running).await {
            break ended.expect("the query task");
        }
        attempts += 1;
        assert!(attempts < 30, "the query was never cancelled");
    };
    let e = result.expect_err("the query was cancelled");
    assert_eq!(e.code(), Some(&SqlState::QUERY_CANCELED), "{e}");
    let row = client.query_one("SELECT 1", &[]).await.expect("SELECT 1");
    assert_eq!(row.get::<_, i64>(0), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_during_copy_from_stdin_loads_nothing() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    assert_eq!(
        wire.round_trip(Messages::new().query(CREATE_T)).await,
        ["CommandComplete CREATE TABLE", "ReadyForQuery I"]
    );
    wire.send(
        Messages::new()
            .query("COPY t FROM STDIN")
            .copy_data(b"2024-01-01 00:00:00\t1\n"),
    )
    .await;
    assert_eq!(
        wire.read_until("CopyInResponse").await,
        ["CopyInResponse text 2"]
    );
    // A cancel reaches a COPY even while it waits for the client's data: it stops the COPY
    // at the next copy message.
    cancel(server.addr, wire.pid, wire.secret).await;
    wire.send(
        Messages::new()
            .copy_data(b"2024-01-01 00:00:01\t2\n")
            .copy_done(),
    )
    .await;
    assert_eq!(
        wire.read_until_ready().await,
        ["Error 57014", "ReadyForQuery I"]
    );
    assert_eq!(
        values(&mut wire).await,
        [
            "RowDescription v",
            "CommandComplete SELECT 0",
            "ReadyForQuery I"
        ]
    );
}

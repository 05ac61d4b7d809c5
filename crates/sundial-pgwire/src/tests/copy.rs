//! COPY through the session: FROM STDIN in text and CSV (rows split across CopyData messages),
//! TO STDOUT, and a COPY with a bad row or a CopyFail answering an error and loading nothing.

use std::io::Cursor;

use futures::{SinkExt, TryStreamExt};
use tokio_postgres::error::SqlState;

use super::pipeline::wire_server;
use super::wire::{Messages, Wire};
use super::*;

const CREATE: &str = "CREATE TABLE c (ts TIMESTAMP, v LONG, s VARCHAR) TIMESTAMP(ts)";

async fn with_table(server: &TestServer) -> Wire {
    let mut wire = Wire::connect(server.addr).await;
    assert_eq!(
        wire.round_trip(Messages::new().query(CREATE)).await,
        ["CommandComplete CREATE TABLE", "ReadyForQuery I"]
    );
    wire
}

/// Starts a COPY FROM STDIN by simple query and sends `chunks` as CopyData, then CopyDone;
/// returns the answers after CopyInResponse, up to ReadyForQuery.
async fn copy_in(wire: &mut Wire, sql: &str, chunks: &[&str]) -> Vec<String> {
    wire.send(Messages::new().query(sql)).await;
    let started = wire.read_until("CopyInResponse").await;
    assert_eq!(started.len(), 1, "{started:?}");
    let mut data = Messages::new();
    for chunk in chunks {
        data = data.copy_data(chunk.as_bytes());
    }
    wire.round_trip(data.copy_done()).await
}

async fn contents(wire: &mut Wire) -> Vec<String> {
    wire.round_trip(Messages::new().query("SELECT v, s FROM c ORDER BY ts"))
        .await
}

fn table(rows: &[&str]) -> Vec<String> {
    let mut expected = vec!["RowDescription v,s".to_string()];
    expected.extend(rows.iter().map(|r| format!("DataRow {r}")));
    expected.push(format!("CommandComplete SELECT {}", rows.len()));
    expected.push("ReadyForQuery I".into());
    expected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_from_stdin_loads_text_and_csv_and_copy_to_stdout_returns_them() {
    let server = wire_server().await;
    let mut wire = with_table(&server).await;
    wire.send(Messages::new().query("COPY c FROM STDIN")).await;
    assert_eq!(
        wire.read_until("CopyInResponse").await,
        ["CopyInResponse text 3"]
    );
    // A row split across two CopyData messages, a NULL, an escaped tab.
    let text = Messages::new()
        .copy_data(b"2024-01-01 00:00:00\t1\ta\n2024-01-01 00:00:01\t2\t\\N\n2024-01-01 00:00:02\t")
        .copy_data(b"3\tc\\td\n")
        .copy_done();
    assert_eq!(
        wire.round_trip(text).await,
        ["CommandComplete COPY 3", "ReadyForQuery I"]
    );
    let csv = copy_in(
        &mut wire,
        "COPY c (ts, v, s) FROM STDIN (FORMAT csv, HEADER true)",
        &[
            "ts,v,s\n2024-01-01 00:00:03,4,\"x,",
            "y\"\n2024-01-01 00:00:04,5,\n",
        ],
    )
    .await;
    assert_eq!(csv, ["CommandComplete COPY 2", "ReadyForQuery I"]);
    assert_eq!(
        contents(&mut wire).await,
        table(&["1|a", "2|NULL", "3|c\td", "4|x,y", "5|NULL"])
    );

    let out = Messages::new().query("COPY (SELECT v, s FROM c ORDER BY ts) TO STDOUT");
    assert_eq!(
        wire.round_trip(out).await,
        [
            "CopyOutResponse text 2",
            "CopyData 1\ta\n",
            "CopyData 2\t\\N\n",
            "CopyData 3\tc\\td\n",
            "CopyData 4\tx,y\n",
            "CopyData 5\t\\N\n",
            "CopyDone",
            "CommandComplete COPY 5",
            "ReadyForQuery I",
        ]
    );
    let out = Messages::new()
        .query("COPY (SELECT v, s FROM c ORDER BY ts LIMIT 4) TO STDOUT (FORMAT csv, HEADER true)");
    assert_eq!(
        wire.round_trip(out).await,
        [
            "CopyOutResponse text 2",
            "CopyData v,s\n",
            "CopyData 1,a\n",
            "CopyData 2,\n",
            "CopyData 3,c\td\n",
            "CopyData 4,\"x,y\"\n",
            "CopyDone",
            "CommandComplete COPY 4",
            "ReadyForQuery I",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_with_a_bad_row_answers_an_error_and_loads_nothing() {
    let server = wire_server().await;
    let mut wire = with_table(&server).await;
    let good = "2024-01-01 00:00:00\t1\ta\n2024-01-01 00:00:01\t2\tb\n";
    let bad_value = copy_in(
        &mut wire,
        "COPY c FROM STDIN",
        &[good, "2024-01-01 00:00:02\tnot a number\tc\n", good],
    )
    .await;
    assert_eq!(bad_value, ["Error 22P02", "ReadyForQuery I"]);
    let too_few = copy_in(
        &mut wire,
        "COPY c FROM STDIN",
        &[good, "2024-01-01 00:00:02\t3\n"],
    )
    .await;
    assert_eq!(too_few, ["Error 22P04", "ReadyForQuery I"]);
    let bad_csv = copy_in(
        &mut wire,
        "COPY c FROM STDIN (FORMAT csv)",
        &["2024-01-01 00:00:00,1,a\n2024-01-01 00:00:01,2,\"unterminated\n"],
    )
    .await;
    assert_eq!(bad_csv, ["Error 22P04", "ReadyForQuery I"]);
    assert_eq!(contents(&mut wire).await, table(&[]));
    // The session goes on, and a good COPY after the bad ones loads.
    let loaded = copy_in(&mut wire, "COPY c FROM STDIN", &[good]).await;
    assert_eq!(loaded, ["CommandComplete COPY 2", "ReadyForQuery I"]);
    assert_eq!(contents(&mut wire).await, table(&["1|a", "2|b"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_fail_abandons_the_copy_and_the_rest_of_the_query() {
    let server = wire_server().await;
    let mut wire = with_table(&server).await;
    wire.send(Messages::new().query("COPY c FROM STDIN; SELECT 2 AS b"))
        .await;
    assert_eq!(
        wire.read_until("CopyInResponse").await,
        ["CopyInResponse text 3"]
    );
    let abandon = Messages::new()
        .copy_data(b"2024-01-01 00:00:00\t1\ta\n")
        .copy_fail("client gave up");
    assert_eq!(
        wire.round_trip(abandon).await,
        ["Error 57014", "ReadyForQuery I"]
    );
    assert_eq!(wire.errors, ["COPY from stdin failed: client gave up"]);
    assert_eq!(contents(&mut wire).await, table(&[]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_started_by_a_simple_query_lets_the_rest_of_it_run() {
    let server = wire_server().await;
    let mut wire = with_table(&server).await;
    let answers = copy_in(
        &mut wire,
        "COPY c FROM STDIN; SELECT count(*) AS n FROM c",
        &["2024-01-01 00:00:00\t1\ta\n"],
    )
    .await;
    assert_eq!(
        answers,
        [
            "CommandComplete COPY 1",
            "RowDescription n",
            "DataRow 1",
            "CommandComplete SELECT 1",
            "ReadyForQuery I"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_copies_in_and_out_over_the_extended_protocol() {
    let server = wire_server().await;
    let client = server.client().await.expect("log in");
    client
        .batch_execute(CREATE)
        .await
        .expect("create the table");
    let copy = |data: &'static str| {
        let client = &client;
        async move {
            let sink = client
                .copy_in::<_, Cursor<Vec<u8>>>("COPY c FROM STDIN (FORMAT csv)")
                .await?;
            futures::pin_mut!(sink);
            sink.send(Cursor::new(data.as_bytes().to_vec())).await?;
            sink.finish().await
        }
    };
    let loaded = copy("2024-01-01 00:00:00,1,a\n2024-01-01 00:00:01,2,b\n").await;
    assert_eq!(loaded.expect("COPY"), 2);
    let e = copy("2024-01-01 00:00:02,3,c\n2024-01-01 00:00:03,x,d\n")
        .await
        .expect_err("a bad row fails the COPY");
    assert_eq!(
        e.code(),
        Some(&SqlState::INVALID_TEXT_REPRESENTATION),
        "{e}"
    );

    let out = client
        .copy_out("COPY c TO STDOUT (FORMAT csv)")
        .await
        .expect("COPY TO");
    let chunks: Vec<_> = out.try_collect().await.expect("rows");
    let text: String = chunks
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    assert_eq!(
        text, "2024-01-01 00:00:00,1,a\n2024-01-01 00:00:01,2,b\n",
        "only the good COPY's rows are in the table"
    );
    let n: i64 = client
        .query_one("SELECT count(*) FROM c", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_after_a_comment_runs_over_the_extended_protocol() {
    let server = wire_server().await;
    let client = server.client().await.expect("log in");
    client
        .batch_execute(CREATE)
        .await
        .expect("create the table");
    let sink = client
        .copy_in::<_, Cursor<Vec<u8>>>("-- tag\n/* more */ COPY c FROM STDIN (FORMAT csv)")
        .await
        .expect("COPY after a comment starts");
    futures::pin_mut!(sink);
    sink.send(Cursor::new(b"2024-01-01 00:00:00,1,a\n".to_vec()))
        .await
        .expect("send");
    assert_eq!(sink.finish().await.expect("COPY"), 1);
    let out = client
        .copy_out("/* tag */ COPY c TO STDOUT (FORMAT csv)")
        .await
        .expect("COPY TO after a comment");
    let chunks: Vec<_> = out.try_collect().await.expect("rows");
    assert_eq!(chunks.concat(), b"2024-01-01 00:00:00,1,a\n");
}

//! Execute with a row limit: PortalSuspended after each full slice, the rest on later Executes,
//! and CommandComplete counting the rows of the Execute that finished the portal, as
//! PostgreSQL does.

use super::pipeline::wire_server;
use super::wire::{Messages, Wire};

const FIVE: &str = "SELECT value AS n FROM generate_series(1, 5)";

fn rows(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| format!("DataRow {v}")).collect()
}

fn then(mut got: Vec<String>, more: &[&str]) -> Vec<String> {
    got.extend(more.iter().map(|m| m.to_string()));
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_limit_suspends_the_portal_until_its_rows_are_all_sent() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    let first = Messages::new()
        .parse("s", FIVE)
        .bind("p", "s", &[])
        .execute("p", 2)
        .flush();
    wire.send(first).await;
    let mut expected = vec!["ParseComplete".to_string(), "BindComplete".to_string()];
    expected.extend(then(rows(&["1", "2"]), &["PortalSuspended"]));
    assert_eq!(wire.read_until("PortalSuspended").await, expected);

    wire.send(Messages::new().execute("p", 2).flush()).await;
    assert_eq!(
        wire.read_until("PortalSuspended").await,
        then(rows(&["3", "4"]), &["PortalSuspended"])
    );
    assert_eq!(
        wire.round_trip(Messages::new().execute("p", 2).sync())
            .await,
        then(
            rows(&["5"]),
            &["CommandComplete SELECT 1", "ReadyForQuery I"]
        )
    );
    // Sync ended the implicit transaction, and the portal with it.
    assert_eq!(
        wire.round_trip(Messages::new().execute("p", 0).sync())
            .await,
        ["Error 34000", "ReadyForQuery I"]
    );
    assert_eq!(wire.errors, ["portal \"p\" does not exist"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_transaction_block_a_portal_outlives_sync() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    assert_eq!(
        wire.round_trip(Messages::new().query("BEGIN")).await,
        ["CommandComplete BEGIN", "ReadyForQuery T"]
    );
    let first = Messages::new()
        .parse("s", FIVE)
        .bind("p", "s", &[])
        .describe_portal("p")
        .execute("p", 3)
        .sync();
    let mut expected = vec![
        "ParseComplete".to_string(),
        "BindComplete".to_string(),
        "RowDescription n".to_string(),
    ];
    expected.extend(then(
        rows(&["1", "2", "3"]),
        &["PortalSuspended", "ReadyForQuery T"],
    ));
    assert_eq!(wire.round_trip(first).await, expected);
    assert_eq!(
        wire.round_trip(Messages::new().execute("p", 0).sync())
            .await,
        then(
            rows(&["4", "5"]),
            &["CommandComplete SELECT 2", "ReadyForQuery T"]
        )
    );
    assert_eq!(
        wire.round_trip(Messages::new().execute("p", 0).sync())
            .await,
        ["CommandComplete SELECT 0", "ReadyForQuery T"],
        "a finished portal has no rows left"
    );
    assert_eq!(
        wire.round_trip(Messages::new().query("COMMIT")).await,
        ["CommandComplete COMMIT", "ReadyForQuery I"]
    );
    assert_eq!(
        wire.round_trip(Messages::new().execute("p", 0).sync())
            .await,
        ["Error 34000", "ReadyForQuery I"],
        "COMMIT closed the portal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portals_keep_their_places_when_read_in_turns() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    let turns = Messages::new()
        .parse("s", FIVE)
        .bind("a", "s", &[])
        .bind("b", "s", &[])
        .execute("a", 1)
        .execute("b", 3)
        .execute("a", 3)
        .execute("b", 3)
        .execute("a", 3)
        .close_portal("a")
        .execute("a", 1)
        .sync();
    let mut expected = vec!["ParseComplete", "BindComplete", "BindComplete"];
    expected.extend(["DataRow 1", "PortalSuspended"]);
    expected.extend(["DataRow 1", "DataRow 2", "DataRow 3", "PortalSuspended"]);
    expected.extend(["DataRow 2", "DataRow 3", "DataRow 4", "PortalSuspended"]);
    expected.extend(["DataRow 4", "DataRow 5", "CommandComplete SELECT 2"]);
    expected.extend(["DataRow 5", "CommandComplete SELECT 1"]);
    expected.extend(["CloseComplete", "Error 34000", "ReadyForQuery I"]);
    assert_eq!(wire.round_trip(turns).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_that_lands_on_the_last_row_completes_the_portal() {
    // PostgreSQL would answer PortalSuspended here and `SELECT 0` on the next Execute; Sundial
    // looks ahead and completes at once, which drivers handle alike.
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    let exact = Messages::new()
        .parse("s", FIVE)
        .bind("p", "s", &[])
        .execute("p", 5)
        .sync();
    let mut expected = vec!["ParseComplete".to_string(), "BindComplete".to_string()];
    expected.extend(then(
        rows(&["1", "2", "3", "4", "5"]),
        &["CommandComplete SELECT 5", "ReadyForQuery I"],
    ));
    assert_eq!(wire.round_trip(exact).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reads_a_large_result_in_slices() {
    let server = wire_server().await;
    let mut client = server.client().await.expect("log in");
    let transaction = client.transaction().await.expect("BEGIN");
    let query = transaction
        .prepare("SELECT value FROM generate_series(1, 10000)")
        .await
        .expect("prepare");
    let portal = transaction.bind(&query, &[]).await.expect("bind");
    let mut seen = 0i64;
    loop {
        let slice = transaction
            .query_portal(&portal, 3000)
            .await
            .expect("execute");
        for row in &slice {
            seen += 1;
            assert_eq!(row.get::<_, i64>(0), seen);
        }
        if slice.len() < 3000 {
            break;
        }
    }
    assert_eq!(seen, 10_000);
    transaction.commit().await.expect("COMMIT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_or_portal_name_in_use_is_refused() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    let statements = Messages::new()
        .parse("s", "SELECT 1 AS a")
        .parse("s", "SELECT 2 AS b")
        .sync();
    assert_eq!(
        wire.round_trip(statements).await,
        ["ParseComplete", "Error 42P05", "ReadyForQuery I"]
    );
    let portals = Messages::new()
        .bind("p", "s", &[])
        .bind("p", "s", &[])
        .sync()
        .bind("p", "s", &[])
        .execute("p", 0)
        .sync();
    assert_eq!(
        wire.round_trip(portals).await,
        ["BindComplete", "Error 42P03", "ReadyForQuery I"]
    );
    assert_eq!(
        wire.read_until_ready().await,
        [
            "BindComplete",
            "DataRow 1",
            "CommandComplete SELECT 1",
            "ReadyForQuery I"
        ],
        "Sync closed the portal, so its name is free again"
    );
    assert_eq!(
        wire.errors,
        [
            "prepared statement \"s\" already exists",
            "cursor \"p\" already exists"
        ]
    );
}

/// A statement's portals described again and again get the same description, in the formats
/// each was bound with, whichever was described before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portals_are_described_in_their_own_formats() {
    let server = wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    let parsed = Messages::new()
        .parse(
            "s",
            "SELECT value AS n, 'x' AS t FROM generate_series(1, 1)",
        )
        .sync();
    assert_eq!(
        wire.round_trip(parsed).await,
        ["ParseComplete", "ReadyForQuery I"]
    );
    for (binary, times) in [(false, 2), (true, 2), (false, 1)] {
        for _ in 0..times {
            let bound = match binary {
                true => Messages::new().bind_binary("", "s"),
                false => Messages::new().bind("", "s", &[]),
            };
            let got = wire.round_trip(bound.describe_portal("").sync()).await;
            let description = match binary {
                true => "RowDescription n binary,t binary",
                false => "RowDescription n,t",
            };
            assert_eq!(got, ["BindComplete", description, "ReadyForQuery I"]);
        }
    }
}

//! SQL-level PREPARE / EXECUTE / DEALLOCATE: each session has its own names, freed with it;
//! EXECUTE answers RowDescription and rows, takes values typed by PREPARE's list, and is
//! checked against the caller's role at each run; DEALLOCATE removes (26000 for an unknown
//! name); a session holds a bounded number.

use tokio_postgres::SimpleQueryMessage;
use tokio_postgres::error::SqlState;

use super::wire::{Messages, Wire};
use super::*;

/// The SQLSTATE of a statement's failure.
fn code(e: tokio_postgres::Error) -> SqlState {
    e.as_db_error().expect("a server error").code().clone()
}

/// The column names and the text values of a simple query's rows (tokio-postgres, like
/// psycopg, refuses a DataRow that no RowDescription announced).
async fn simple(client: &tokio_postgres::Client, sql: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut columns = Vec::new();
    let mut rows = Vec::new();
    for message in client.simple_query(sql).await.expect(sql) {
        match message {
            SimpleQueryMessage::RowDescription(c) => {
                columns = c.iter().map(|c| c.name().to_string()).collect();
            }
            SimpleQueryMessage::Row(row) => rows.push(
                (0..row.len())
                    .map(|i| row.get(i).unwrap_or("NULL").to_string())
                    .collect(),
            ),
            _ => {}
        }
    }
    (columns, rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_belong_to_their_session() {
    let server = TestServer::start(PgOptions::default()).await;
    let admin = server.client().await.expect("admin");
    admin
        .batch_execute(
            "CREATE TABLE t (ts TIMESTAMP, v LONG) TIMESTAMP(ts);
             CREATE USER writer WITH PASSWORD 'wpw'; GRANT WRITE TO writer;
             CREATE USER reader WITH PASSWORD 'rpw'; GRANT READ TO reader;
             CREATE USER nobody WITH PASSWORD 'npw'",
        )
        .await
        .expect("setup");
    let writer = connect(&server, "writer", "wpw").await;
    let reader = connect(&server, "reader", "rpw").await;
    let nobody = connect(&server, "nobody", "npw").await;

    // PREPARE's type list types the parameter; EXECUTE over the simple protocol describes
    // its rows.
    admin
        .batch_execute("PREPARE a(bigint) AS SELECT $1 + 1 AS n")
        .await
        .expect("prepare");
    assert_eq!(
        simple(&admin, "EXECUTE a(41)").await,
        (vec!["n".to_string()], vec![vec!["42".to_string()]])
    );
    // And over the extended protocol.
    let rows = admin.query("EXECUTE a(1)", &[]).await.expect("execute");
    assert_eq!(rows[0].get::<_, i64>("n"), 2);

    // Another session, another user: the admin's names are not theirs.
    assert_eq!(
        code(writer.batch_execute("EXECUTE a(1)").await.unwrap_err()),
        SqlState::INVALID_SQL_STATEMENT_NAME
    );
    assert_eq!(
        code(writer.batch_execute("DEALLOCATE a").await.unwrap_err()),
        SqlState::INVALID_SQL_STATEMENT_NAME
    );
    // The same name is free in another session.
    reader
        .batch_execute("PREPARE a AS SELECT 'mine' AS s")
        .await
        .expect("the reader's own a");
    assert_eq!(simple(&reader, "EXECUTE a").await.1, [["mine"]]);
    // DEALLOCATE ALL of a user without any role empties its own session only.
    nobody
        .batch_execute("DEALLOCATE ALL")
        .await
        .expect("deallocate all");
    assert_eq!(simple(&admin, "EXECUTE a(9)").await.1, [["10"]]);
    assert_eq!(simple(&reader, "EXECUTE a").await.1, [["mine"]]);
    assert_eq!(
        code(
            nobody
                .batch_execute("PREPARE x AS SELECT 1")
                .await
                .unwrap_err()
        ),
        SqlState::INSUFFICIENT_PRIVILEGE
    );
    // The role check applies to the prepared statement's plan, at each EXECUTE.
    reader
        .batch_execute("PREPARE ins(bigint) AS INSERT INTO t VALUES ('2024-01-01', $1)")
        .await
        .expect("a reader may prepare an insert");
    assert_eq!(
        code(reader.batch_execute("EXECUTE ins(5)").await.unwrap_err()),
        SqlState::INSUFFICIENT_PRIVILEGE
    );
    writer
        .batch_execute(
            "PREPARE ins(bigint) AS INSERT INTO t VALUES ('2024-01-01', $1);
             EXECUTE ins(7); EXECUTE ins('8')",
        )
        .await
        .expect("a writer inserts");
    assert_eq!(
        simple(&admin, "SELECT v FROM t ORDER BY v").await.1,
        [["7"], ["8"]]
    );
    // A name in use in the session is refused; DEALLOCATE removes it.
    assert_eq!(
        code(
            admin
                .batch_execute("PREPARE a AS SELECT 2")
                .await
                .unwrap_err()
        ),
        SqlState::DUPLICATE_PSTATEMENT
    );
    admin
        .batch_execute("DEALLOCATE PREPARE a")
        .await
        .expect("deallocate");
    assert_eq!(
        code(admin.batch_execute("EXECUTE a(1)").await.unwrap_err()),
        SqlState::INVALID_SQL_STATEMENT_NAME
    );
    assert_eq!(
        code(admin.batch_execute("DEALLOCATE a").await.unwrap_err()),
        SqlState::INVALID_SQL_STATEMENT_NAME
    );
    admin
        .batch_execute("PREPARE a AS SELECT 2")
        .await
        .expect("the name is free again");

    // A session's names go with it.
    drop(reader);
    let reader = connect(&server, "reader", "rpw").await;
    assert_eq!(
        code(reader.batch_execute("EXECUTE a").await.unwrap_err()),
        SqlState::INVALID_SQL_STATEMENT_NAME
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_holds_a_bounded_number_of_prepared_statements() {
    let server = TestServer::start(PgOptions::default()).await;
    let client = server.client().await.expect("log in");
    let script: String = (0..sundial_query::SESSION_STATEMENTS_MAX)
        .map(|i| format!("PREPARE p{i} AS SELECT {i};"))
        .collect();
    client
        .batch_execute(&script)
        .await
        .expect("up to the bound");
    let e = client
        .batch_execute("PREPARE one_more AS SELECT 1")
        .await
        .unwrap_err();
    assert_eq!(code(e), SqlState::PROGRAM_LIMIT_EXCEEDED);
    client
        .batch_execute("DEALLOCATE p0; PREPARE one_more AS SELECT 1")
        .await
        .expect("room again after a DEALLOCATE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deallocate_closes_protocol_level_statements_too() {
    // psycopg deallocates its own (Parse-made) statements by name.
    let server = super::pipeline::wire_server().await;
    let mut wire = Wire::connect(server.addr).await;
    assert_eq!(
        wire.round_trip(Messages::new().parse("st", "SELECT 1").sync())
            .await,
        ["ParseComplete", "ReadyForQuery I"]
    );
    assert_eq!(
        wire.round_trip(Messages::new().query("DEALLOCATE st"))
            .await,
        ["CommandComplete DEALLOCATE", "ReadyForQuery I"]
    );
    assert_eq!(
        wire.round_trip(Messages::new().bind("", "st", &[]).execute("", 0).sync())
            .await,
        ["Error 26000", "ReadyForQuery I"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_session_nothing_persists() {
    // What HTTP's /exec does: each request runs as a statement of its own.
    let server = TestServer::start(PgOptions::default()).await;
    let engine = &server.server.shared.engine;
    let caller = sundial_query::Caller::trusted();
    let prepared = engine.run_as("PREPARE x AS SELECT 1", &caller).await;
    assert!(prepared.is_ok(), "{:?}", prepared.err());
    let e = match engine.run_as("EXECUTE x", &caller).await {
        Ok(_) => panic!("a PREPARE of another request was kept"),
        Err(e) => e,
    };
    assert_eq!(e.sqlstate(), "26000", "{e}");
}

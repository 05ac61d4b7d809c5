//! Roles over the wire: every statement of a session runs as its logged-in user, a refusal
//! is an ErrorResponse with SQLSTATE 42501 after which the session goes on, and a role
//! revoked while connected ends the session at its next statement (28000).

use futures::{SinkExt, TryStreamExt};
use sundial_auth::Role;
use tokio_postgres::error::SqlState;

use super::*;

fn refused(e: tokio_postgres::Error) -> String {
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.code(), &SqlState::INSUFFICIENT_PRIVILEGE, "{db:?}");
    db.message().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_run_as_the_logged_in_user() {
    let server = TestServer::start(PgOptions::default()).await;
    let admin = server.client().await.expect("admin");
    admin
        .batch_execute(
            "CREATE TABLE t (ts TIMESTAMP, v LONG) TIMESTAMP(ts);
             INSERT INTO t VALUES ('2024-01-01T00:00:00Z', 1);
             CREATE USER reader WITH PASSWORD 'r''pw';
             GRANT READ TO reader;
             CREATE USER writer WITH PASSWORD 'wpw';
             GRANT WRITE TO writer",
        )
        .await
        .expect("setup");
    let store = server.server.shared.users.store().clone();
    assert_eq!(store.role("reader"), Some(Role::Read));

    let reader = connect(&server, "reader", "r'pw").await;
    // Simple protocol: a refusal, then the session goes on.
    let e = reader
        .batch_execute("INSERT INTO t VALUES ('2024-01-02T00:00:00Z', 2)")
        .await
        .expect_err("reader inserts");
    let message = refused(e);
    assert!(
        message.contains("user 'reader' has the read role; INSERT needs write"),
        "{message}"
    );
    let rows = reader
        .simple_query("SELECT count(*) FROM t")
        .await
        .expect("reader reads");
    assert!(!rows.is_empty());
    refused(reader.batch_execute("DROP TABLE t").await.expect_err("DDL"));
    refused(reader.batch_execute("SHOW USERS").await.expect_err("users"));
    // Extended protocol: prepared, refused at each execution.
    let insert = reader
        .prepare("INSERT INTO t VALUES ('2024-01-02T00:00:00Z', $1)")
        .await
        .expect("prepare");
    refused(reader.execute(&insert, &[&2i64]).await.expect_err("insert"));
    let select = reader
        .prepare("SELECT v FROM t WHERE v = $1")
        .await
        .expect("prepare select");
    assert_eq!(
        reader.query(&select, &[&1i64]).await.expect("select").len(),
        1
    );
    // COPY TO STDOUT reads; COPY FROM STDIN writes.
    let out: Vec<_> = reader
        .copy_out("COPY t TO STDOUT")
        .await
        .expect("copy out")
        .try_collect()
        .await
        .expect("copy out rows");
    assert_eq!(out.len(), 1);
    // On a connection of its own: after any COPY FROM STDIN that fails before the copy
    // starts (a missing table too), tokio-postgres finds the next answer unexpected.
    let copier = connect(&server, "reader", "r'pw").await;
    match copier
        .copy_in::<_, &'static [u8]>("COPY t FROM STDIN")
        .await
    {
        Ok(_) => panic!("a reader's COPY FROM STDIN started"),
        Err(e) => refused(e),
    };
    // Cursors read.
    let mut fetched = Vec::new();
    for sql in [
        "BEGIN",
        "DECLARE c CURSOR FOR SELECT * FROM t",
        "FETCH 1 FROM c",
        "COMMIT",
    ] {
        fetched.extend(reader.simple_query(sql).await.expect(sql));
    }
    let rows = fetched
        .iter()
        .filter(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(_)))
        .count();
    assert_eq!(rows, 1);

    // The writer inserts, by both protocols and COPY.
    let writer = connect(&server, "writer", "wpw").await;
    writer
        .batch_execute("INSERT INTO t VALUES ('2024-01-02T00:00:00Z', 2)")
        .await
        .expect("writer inserts");
    let sink = writer
        .copy_in::<_, &'static [u8]>("COPY t FROM STDIN")
        .await
        .expect("copy in");
    futures::pin_mut!(sink);
    sink.send(&b"2024-01-03T00:00:00.000000Z\t3\n"[..])
        .await
        .expect("copy data");
    assert_eq!(sink.finish().await.expect("copy done"), 1);
    refused(
        writer
            .batch_execute("ALTER TABLE t ADD COLUMN x INT")
            .await
            .expect_err("DDL"),
    );

    // Revoked while connected: a role change ends the session at its next statement (28000),
    // a prepared statement's run included.
    admin
        .batch_execute("REVOKE READ FROM reader")
        .await
        .expect("revoke");
    let e = reader.query(&select, &[&1i64]).await.expect_err("revoked");
    let db = e.as_db_error().expect("a server error");
    assert_eq!(
        db.code(),
        &SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
        "{db:?}"
    );
    assert!(
        reader.simple_query("SELECT 1").await.is_err(),
        "the session ended"
    );
    // Logged in again without a role, a user may change its own password, and nothing else.
    let reader = connect(&server, "reader", "r'pw").await;
    refused(reader.simple_query("SELECT 1").await.expect_err("no role"));
    refused(
        reader
            .batch_execute("ALTER USER writer WITH PASSWORD 'new'")
            .await
            .expect_err("another's password"),
    );
    reader
        .batch_execute("ALTER USER reader WITH PASSWORD 'new'")
        .await
        .expect("own password");
    assert!(store.verify_password("reader", "new"));
    connect(&server, "reader", "new").await;
}

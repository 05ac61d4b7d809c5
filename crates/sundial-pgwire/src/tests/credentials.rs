//! A connection remembers the credentials its user logged in with: after a password or role
//! change, or a DROP USER (and a CREATE USER of the same name), its next statement fails with
//! 28000 and the connection ends; a new login works with the new credentials. A session that
//! sets its own password goes on (as in PostgreSQL); the user's other sessions end.

use tokio_postgres::error::SqlState;

use super::*;

async fn connect(
    server: &TestServer,
    user: &str,
    password: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let config = format!(
        "host={} port={} user={user} password={password} dbname=qdb connect_timeout=10",
        server.addr.ip(),
        server.addr.port()
    );
    let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// The statement fails with 28000, and the connection is closed after it.
async fn ended(client: &tokio_postgres::Client) {
    let e = client
        .simple_query("SELECT 1")
        .await
        .expect_err("a session of old credentials");
    let db = e.as_db_error().expect("a server error");
    assert_eq!(
        db.code(),
        &SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
        "{db:?}"
    );
    assert!(
        client.simple_query("SELECT 1").await.is_err(),
        "the connection is closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_end_when_their_users_credentials_change() {
    let server = TestServer::start(PgOptions::default()).await;
    let admin = server.client().await.expect("admin");
    admin
        .batch_execute("CREATE USER s WITH PASSWORD 'first'; GRANT READ TO s")
        .await
        .expect("setup");

    // A password change.
    let old = connect(&server, "s", "first").await.expect("log in");
    old.simple_query("SELECT 1").await.expect("works");
    admin
        .batch_execute("ALTER USER s WITH PASSWORD 'second'")
        .await
        .expect("alter");
    ended(&old).await;
    assert!(connect(&server, "s", "first").await.is_err());
    let new = connect(&server, "s", "second")
        .await
        .expect("the new password");
    new.simple_query("SELECT 1").await.expect("works");

    // DROP USER, then a user of the same name made again, even an admin: the old session is
    // not its.
    admin
        .batch_execute("DROP USER s; CREATE USER s WITH PASSWORD 'third'; GRANT ADMIN TO s")
        .await
        .expect("drop and create");
    let e = new
        .batch_execute("CREATE TABLE stolen (ts TIMESTAMP) TIMESTAMP(ts)")
        .await
        .expect_err("the old session acts as the new admin");
    assert_eq!(
        e.as_db_error().expect("a server error").code(),
        &SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    );
    assert!(new.simple_query("SELECT 1").await.is_err(), "closed");
    let again = connect(&server, "s", "third").await.expect("the new user");
    again
        .batch_execute("CREATE TABLE mine (ts TIMESTAMP) TIMESTAMP(ts)")
        .await
        .expect("the new admin works");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_sets_its_own_password_goes_on() {
    let server = TestServer::start(PgOptions::default()).await;
    let admin = server.client().await.expect("admin");
    admin
        .batch_execute("CREATE USER s WITH PASSWORD 'first'; GRANT READ TO s")
        .await
        .expect("setup");
    let changing = connect(&server, "s", "first").await.expect("log in");
    let other = connect(&server, "s", "first").await.expect("log in");
    changing
        .batch_execute("ALTER USER s WITH PASSWORD 'second'")
        .await
        .expect("own password");
    changing
        .simple_query("SELECT 1")
        .await
        .expect("the session that changed it goes on");
    ended(&other).await;
    // The extended protocol too, and a later change by the admin still ends it.
    changing
        .execute("ALTER USER s WITH PASSWORD 'third'", &[])
        .await
        .expect("own password, extended protocol");
    changing.query("SELECT 1", &[]).await.expect("goes on");
    admin
        .batch_execute("ALTER USER s WITH PASSWORD 'fourth'")
        .await
        .expect("the admin's change");
    ended(&changing).await;
    connect(&server, "s", "fourth")
        .await
        .expect("the admin's password");
}

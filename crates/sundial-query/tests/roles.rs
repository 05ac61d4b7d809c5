//! Roles against every kind of statement: each user may run exactly what its role allows,
//! checked at every run (a prepared statement loses access with its user's role), and any
//! user may change its own password.

use std::sync::Arc;

use sundial_query::{Caller, Engine, QueryError, Role, Users, collect};
use sundial_storage::{Database, Durability, StorageOptions};

struct Setup {
    engine: Engine,
    users: Arc<Users>,
    _dirs: Vec<tempfile::TempDir>,
    backups: std::path::PathBuf,
}

async fn setup() -> Setup {
    let data = tempfile::tempdir().expect("tempdir");
    let files = tempfile::tempdir().expect("tempdir");
    let backups = tempfile::tempdir().expect("tempdir");
    let options = StorageOptions {
        durability: Durability::None,
        ..StorageOptions::default()
    };
    let db = Database::open(data.path(), options).expect("db");
    let mut engine = Engine::new(db).expect("engine");
    let users = Users::in_memory(Some(("admin".into(), "admin-password".into())));
    engine.set_users(users.clone());
    engine.set_sql_file_dir(Some(files.path().to_path_buf()));
    engine
        .execute(
            "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY;
             INSERT INTO t VALUES ('2024-01-01T00:00:00Z', 'a', 1.0), ('2024-01-02T00:00:00Z', 'b', 2.0)",
        )
        .await
        .expect("table");
    let admin = Caller::user("admin");
    for sql in [
        "CREATE USER nobody WITH PASSWORD 'pw'",
        "CREATE USER reader PASSWORD 'pw'",
        "CREATE USER writer WITH PASSWORD 'pw'",
        "CREATE USER boss WITH NO PASSWORD",
        "GRANT READ TO reader",
        "GRANT WRITE TO writer",
        "GRANT ADMIN TO boss",
    ] {
        run(&engine, sql, &admin).await.expect(sql);
    }
    let backups_path = backups.path().to_path_buf();
    Setup {
        engine,
        users,
        _dirs: vec![data, files, backups],
        backups: backups_path,
    }
}

async fn run(
    engine: &Engine,
    sql: &str,
    caller: &Caller,
) -> Result<sundial_query::Collected, QueryError> {
    collect(engine.run_as(sql, caller).await?).await
}

/// Statements, with `{u}` for the caller's name (so each caller's DDL has objects of its own)
/// and `{b}` for a backup directory, and the role each needs.
const STATEMENTS: &[(&str, Role)] = &[
    ("SELECT * FROM t", Role::Read),
    (
        "SELECT count(*) FROM t WHERE v IN (SELECT v FROM t WHERE k = 'a')",
        Role::Read,
    ),
    (
        "WITH a AS (SELECT v FROM t) SELECT max(v) FROM a",
        Role::Read,
    ),
    (
        "SELECT * FROM t WHERE k = 'a' LATEST ON ts PARTITION BY k",
        Role::Read,
    ),
    ("SELECT ts, avg(v) FROM t SAMPLE BY 1d", Role::Read),
    ("SHOW TABLES", Role::Read),
    ("SHOW COLUMNS FROM t", Role::Read),
    ("SHOW PARTITIONS FROM t", Role::Read),
    ("SHOW CREATE TABLE t", Role::Read),
    ("DESCRIBE t", Role::Read),
    ("EXPLAIN SELECT * FROM t", Role::Read),
    // EXPLAIN runs nothing, whatever it explains.
    (
        "EXPLAIN INSERT INTO t VALUES ('2024-01-03T00:00:00Z', 'c', 3.0)",
        Role::Read,
    ),
    ("SET datafusion.execution.batch_size = 8192", Role::Read),
    ("SELECT * FROM pg_catalog.pg_class LIMIT 1", Role::Read),
    (
        "INSERT INTO t VALUES ('2024-01-03T00:00:00Z', 'c', 3.0)",
        Role::Write,
    ),
    ("INSERT INTO t SELECT * FROM t WHERE k = 'zzz'", Role::Write),
    (
        "INSERT INTO t (ts, v) SELECT ts, v FROM t WHERE v IN (SELECT 99.0)",
        Role::Write,
    ),
    (
        "CREATE TABLE n_{u} (ts TIMESTAMP, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY",
        Role::Admin,
    ),
    ("ALTER TABLE n_{u} ADD COLUMN w INT", Role::Admin),
    ("ALTER TABLE n_{u} RENAME COLUMN w TO w2", Role::Admin),
    ("ALTER TABLE n_{u} DROP COLUMN w2", Role::Admin),
    ("ALTER TABLE n_{u} SET TTL 0 HOURS", Role::Admin),
    (
        "ALTER TABLE n_{u} DEDUP ENABLE UPSERT KEYS(ts)",
        Role::Admin,
    ),
    ("TRUNCATE TABLE n_{u}", Role::Admin),
    (
        "ALTER TABLE t DROP PARTITION WHERE ts < '2000-01-01'",
        Role::Admin,
    ),
    (
        "ALTER TABLE t CONVERT PARTITION TO NATIVE WHERE ts < '2000-01-01'",
        Role::Admin,
    ),
    (
        "CREATE TABLE c_{u} AS (SELECT * FROM t) TIMESTAMP(ts)",
        Role::Admin,
    ),
    ("RENAME TABLE c_{u} TO d_{u}", Role::Admin),
    ("DROP TABLE d_{u}", Role::Admin),
    ("DROP TABLE IF EXISTS n_{u}", Role::Admin),
    (
        "COPY (SELECT 1 AS one) TO '{u}.csv' STORED AS CSV",
        Role::Admin,
    ),
    ("BACKUP DATABASE TO '{b}'", Role::Admin),
    ("CREATE USER x_{u}", Role::Admin),
    ("GRANT WRITE TO x_{u}", Role::Admin),
    ("REVOKE WRITE FROM x_{u}", Role::Admin),
    ("ALTER USER x_{u} WITH PASSWORD 'secret'", Role::Admin),
    ("ALTER USER x_{u} CREATE TOKEN TYPE REST", Role::Admin),
    ("ALTER USER x_{u} DROP TOKEN TYPE REST", Role::Admin),
    ("ALTER USER x_{u} CREATE TOKEN TYPE JWK", Role::Admin),
    ("ALTER USER x_{u} DROP TOKEN TYPE JWK", Role::Admin),
    ("SHOW USERS", Role::Admin),
    ("DROP USER x_{u}", Role::Admin),
];

#[tokio::test]
async fn every_statement_needs_its_role() {
    let s = setup().await;
    let callers: [(&str, Option<Role>); 5] = [
        ("nobody", None),
        ("reader", Some(Role::Read)),
        ("writer", Some(Role::Write)),
        ("boss", Some(Role::Admin)),
        ("admin", Some(Role::Admin)),
    ];
    for (name, role) in callers {
        let caller = Caller::user(name);
        for (template, needed) in STATEMENTS {
            let backup = s.backups.join(name);
            let sql = template
                .replace("{u}", name)
                .replace("{b}", backup.to_str().expect("utf-8"));
            let allowed = role.is_some_and(|r| r >= *needed);
            match run(&s.engine, &sql, &caller).await {
                Ok(_) => assert!(allowed, "{name} ran {sql}"),
                Err(e) => {
                    assert!(!allowed, "{name} was refused {sql}: {e}");
                    assert_eq!(e.sqlstate(), "42501", "{name}: {sql}: {e}");
                    assert!(matches!(e, QueryError::Unauthorized(_)), "{sql}: {e:?}");
                    let message = e.to_string();
                    assert!(
                        message.starts_with(&format!("permission denied: user '{name}' ")),
                        "{message}"
                    );
                    // A caller without a role is refused a query before planning it: it
                    // needs read for anything.
                    let grant = |r: Role| format!("GRANT {} TO", r.name().to_uppercase());
                    assert!(
                        message.contains(&grant(*needed))
                            || role.is_none() && message.contains(&grant(Role::Read)),
                        "{message}"
                    );
                }
            }
        }
    }
    // The same statements through prepare + run_prepared_as, and the role each reports.
    for (template, needed) in STATEMENTS {
        let sql = template
            .replace("{u}", "p")
            .replace("{b}", s.backups.join("p").to_str().expect("utf-8"));
        let prepared = s.engine.prepare(&sql).await.expect(&sql);
        assert_eq!(prepared.needed_role(), *needed, "{sql}");
        let refused = s
            .engine
            .run_prepared_as(&prepared, Vec::new(), &Caller::user("nobody"))
            .await
            .expect_err(&sql);
        assert_eq!(refused.sqlstate(), "42501", "{sql}");
    }
    // The trusted caller may do anything.
    run(&s.engine, "DROP TABLE t", &Caller::trusted())
        .await
        .expect("trusted");
}

#[tokio::test]
async fn refusals_say_who_has_what_and_how_to_fix_it() {
    let s = setup().await;
    let e = run(
        &s.engine,
        "INSERT INTO t VALUES ('2024-01-03T00:00:00Z', 'c', 3.0)",
        &Caller::user("reader"),
    )
    .await
    .expect_err("reader inserts");
    assert_eq!(
        e.to_string(),
        "permission denied: user 'reader' has the read role; INSERT needs write (an admin can \
         GRANT WRITE TO reader)"
    );
    let e = run(&s.engine, "SELECT 1", &Caller::user("nobody"))
        .await
        .expect_err("no role");
    assert!(e.to_string().contains("'nobody' has no role"), "{e}");
    run(&s.engine, "CREATE USER \"Mixed-Case\"", &Caller::trusted())
        .await
        .expect("create");
    let e = run(&s.engine, "DROP TABLE t", &Caller::user("Mixed-Case"))
        .await
        .expect_err("no role");
    assert!(
        e.to_string().ends_with("GRANT ADMIN TO \"Mixed-Case\")"),
        "{e}"
    );
    assert!(e.is_user_error());
}

#[tokio::test]
async fn revoking_takes_effect_at_a_prepared_statements_next_run() {
    let s = setup().await;
    let writer = Caller::user("writer");
    let admin = Caller::user("admin");
    let insert = s
        .engine
        .prepare("INSERT INTO t VALUES ($1, 'w', 5.0)")
        .await
        .expect("prepare insert");
    let select = s
        .engine
        .prepare("SELECT count(*) FROM t")
        .await
        .expect("prepare select");
    let ts = || {
        vec![sundial_query::ScalarValue::TimestampNanosecond(
            Some(1_704_153_600_000_000_000),
            None,
        )]
    };
    s.engine
        .run_prepared_as(&insert, ts(), &writer)
        .await
        .expect("writer inserts");
    run(&s.engine, "REVOKE WRITE FROM writer", &admin)
        .await
        .expect("revoke");
    assert_eq!(s.users.role("writer"), Some(Role::Read));
    let e = s
        .engine
        .run_prepared_as(&insert, ts(), &writer)
        .await
        .expect_err("revoked");
    assert_eq!(e.sqlstate(), "42501", "{e}");
    // Read stays.
    s.engine
        .run_prepared_as(&select, Vec::new(), &writer)
        .await
        .expect("still reads");
    run(&s.engine, "REVOKE READ FROM writer", &admin)
        .await
        .expect("revoke read");
    assert_eq!(s.users.role("writer"), None);
    let e = s
        .engine
        .run_prepared_as(&select, Vec::new(), &writer)
        .await
        .expect_err("no role");
    assert_eq!(e.sqlstate(), "42501", "{e}");
    run(&s.engine, "GRANT ADMIN TO writer", &admin)
        .await
        .expect("grant");
    s.engine
        .run_prepared_as(&insert, ts(), &writer)
        .await
        .expect("admin inserts");
    // A dropped user loses everything at once.
    run(&s.engine, "DROP USER writer", &admin)
        .await
        .expect("drop");
    let e = s
        .engine
        .run_prepared_as(&select, Vec::new(), &writer)
        .await
        .expect_err("dropped");
    assert!(matches!(e, QueryError::Auth(_)), "{e:?}");
    assert!(e.to_string().contains("no longer exists"), "{e}");
    // A shared plan (the same text run again) is checked as well.
    let reader = Caller::user("reader");
    for _ in 0..3 {
        run(&s.engine, "SELECT v FROM t WHERE k = 'a'", &reader)
            .await
            .expect("reads");
    }
    run(&s.engine, "REVOKE READ FROM reader", &admin)
        .await
        .expect("revoke");
    let e = run(&s.engine, "SELECT v FROM t WHERE k = 'a'", &reader)
        .await
        .expect_err("revoked");
    assert_eq!(e.sqlstate(), "42501");
}

#[tokio::test]
async fn point_lookups_check_the_role_too() {
    let s = setup().await;
    let lookup = s
        .engine
        .prepare("SELECT v FROM t WHERE k = $1")
        .await
        .expect("prepare");
    let params = [sundial_query::ScalarValue::Utf8(Some("a".into()))];
    if let Some(result) = s
        .engine
        .run_lookup_now(&lookup, &params, &Caller::user("nobody"))
    {
        assert_eq!(result.expect_err("no role").sqlstate(), "42501");
    }
    if let Some(result) = s
        .engine
        .run_lookup_now(&lookup, &params, &Caller::user("reader"))
    {
        result.expect("reader");
    }
}

#[tokio::test]
async fn any_user_may_change_its_own_password_and_only_its_own() {
    let s = setup().await;
    let nobody = Caller::user("nobody");
    run(
        &s.engine,
        "ALTER USER nobody WITH PASSWORD 'n3w ''pw'''",
        &nobody,
    )
    .await
    .expect("own password");
    assert!(s.users.verify_password("nobody", "n3w 'pw'"));
    assert!(!s.users.verify_password("nobody", "pw"));
    let prepared = s
        .engine
        .prepare("ALTER USER nobody PASSWORD 'again'")
        .await
        .expect("prepare");
    s.engine
        .run_prepared_as(&prepared, Vec::new(), &nobody)
        .await
        .expect("own password, prepared");
    assert!(s.users.verify_password("nobody", "again"));
    for sql in [
        "ALTER USER reader WITH PASSWORD 'x'",
        "ALTER USER nobody CREATE TOKEN TYPE REST",
        "GRANT READ TO nobody",
        "SHOW USERS",
    ] {
        let e = run(&s.engine, sql, &nobody).await.expect_err(sql);
        assert_eq!(e.sqlstate(), "42501", "{sql}: {e}");
    }
    // Readers and writers neither, for other users.
    let e = run(
        &s.engine,
        "ALTER USER nobody WITH PASSWORD 'x'",
        &Caller::user("writer"),
    )
    .await
    .expect_err("another's password");
    assert_eq!(e.sqlstate(), "42501");
    // Nor may anyone change the built-in admin's.
    let e = run(
        &s.engine,
        "ALTER USER admin WITH PASSWORD 'x'",
        &Caller::user("admin"),
    )
    .await
    .expect_err("built-in");
    assert!(e.is_user_error(), "{e}");
    assert!(e.to_string().contains("built-in admin"), "{e}");
    run(&s.engine, "ALTER USER nobody WITH NO PASSWORD", &nobody)
        .await
        .expect("no password");
    assert!(!s.users.verify_password("nobody", "again"));
}

#[tokio::test]
async fn user_statements_answer_and_fail_as_the_store_says() {
    let s = setup().await;
    let admin = Caller::user("admin");
    let token = run(
        &s.engine,
        "ALTER USER reader CREATE TOKEN TYPE REST",
        &admin,
    )
    .await
    .expect("token");
    assert_eq!(token.schema.fields().len(), 1);
    assert_eq!(token.schema.field(0).name(), "token");
    assert_eq!(token.batches[0].num_rows(), 1);
    let jwk = run(&s.engine, "ALTER USER reader CREATE TOKEN TYPE JWK", &admin)
        .await
        .expect("jwk");
    let names: Vec<&str> = jwk
        .schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(
        names,
        ["key_id", "private_key", "public_key_x", "public_key_y"]
    );
    let shown = run(&s.engine, "SHOW USERS", &admin).await.expect("show");
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&shown.batches)
        .expect("format")
        .to_string();
    for expected in [
        "| admin  | admin | true     | 0           | false   | true    |",
        "| boss   | admin | false    | 0           | false   | false   |",
        "| nobody |       | true     | 0           | false   | false   |",
        "| reader | read  | true     | 1           | true    | false   |",
    ] {
        assert!(text.contains(expected), "{expected}\n{text}");
    }
    let done = run(&s.engine, "CREATE USER IF NOT EXISTS reader", &admin)
        .await
        .expect("if not exists");
    assert_eq!(done.tag.as_deref(), Some("CREATE ROLE"));
    run(&s.engine, "DROP USER IF EXISTS ghost", &admin)
        .await
        .expect("if exists");
    for (sql, state) in [
        ("CREATE USER reader", "42710"),
        ("DROP USER ghost", "42704"),
        ("GRANT READ TO ghost", "42704"),
        ("ALTER USER ghost WITH PASSWORD 'x'", "42704"),
        ("DROP USER admin", "55000"),
    ] {
        let e = run(&s.engine, sql, &admin).await.expect_err(sql);
        assert_eq!(e.sqlstate(), state, "{sql}: {e}");
        assert!(e.is_user_error(), "{sql}: {e}");
    }
    let e = run(&s.engine, "CREATE USER bob PASSWORD 'x' x", &admin)
        .await
        .expect_err("syntax");
    assert_eq!(e.sqlstate(), "42601");
}

#[tokio::test]
async fn an_engine_without_a_store_refuses_users_and_user_management() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(dir.path(), StorageOptions::default()).expect("db");
    let engine = Engine::new(db).expect("engine");
    let e = run(&engine, "SELECT 1", &Caller::user("bob"))
        .await
        .expect_err("no store");
    assert_eq!(e.sqlstate(), "42501");
    let e = run(&engine, "CREATE USER bob", &Caller::trusted())
        .await
        .expect_err("no store");
    assert_eq!(e.sqlstate(), "0A000");
    assert!(e.to_string().contains("managed by a Sundial server"), "{e}");
    run(&engine, "SELECT 1", &Caller::trusted())
        .await
        .expect("trusted");
}

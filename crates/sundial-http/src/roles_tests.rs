//! The SQL endpoints run statements as the request's caller: `/exec` and `/exp` per
//! statement, `/imp` needs write before its body is read, and a refusal is 403.

use std::net::SocketAddr;
use std::sync::Arc;

use sundial_query::{Caller, Engine, Role, Users};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Server {
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

/// A router whose requests run as `caller` (`None`: no caller extension, as before the
/// authentication middleware is wired).
async fn server(caller: Option<Caller>) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = sundial_storage::Database::open(dir.path(), Default::default()).expect("db");
    let mut engine = Engine::new(db).expect("engine");
    let users = Users::in_memory(Some(("admin".into(), "admin-pw".into())));
    users
        .create_user("reader", Some("reader-pw"), false)
        .expect("user");
    users.grant("reader", Role::Read).expect("grant");
    engine.set_users(users);
    engine
        .execute("CREATE TABLE t (ts TIMESTAMP, v LONG) TIMESTAMP(ts)")
        .await
        .expect("table");
    let app = crate::sql_router(crate::HttpSql {
        engine: Arc::new(engine),
        options: crate::HttpOptions::default(),
    });
    let app = match caller {
        Some(caller) => app.layer(axum::Extension(caller)),
        None => app,
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    Server { addr, _dir: dir }
}

/// Sends `head` (request line and headers, without the blank line) and `body`; returns the
/// status and the answer's text.
async fn request(addr: SocketAddr, head: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let message = format!(
        "{head}\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(message.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8_lossy(&answer).to_string();
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, answer)
}

async fn get(addr: SocketAddr, target: &str) -> (u16, String) {
    request(addr, &format!("GET {target} HTTP/1.1"), "").await
}

const INSERT: &str = "/exec?query=INSERT%20INTO%20t%20VALUES%20('2024-01-01T00:00:00Z',%201)";

async fn import(addr: SocketAddr) -> (u16, String) {
    let body = "--XX\r\nContent-Disposition: form-data; name=\"data\"; filename=\"t.csv\"\r\n\
                \r\nts,v\r\n2024-01-01T00:00:00Z,1\r\n--XX--\r\n";
    request(
        addr,
        "POST /imp?name=t HTTP/1.1\r\nContent-Type: multipart/form-data; boundary=XX",
        body,
    )
    .await
}

#[tokio::test]
async fn a_reader_reads_and_is_refused_writes_with_403() {
    let s = server(Some(Caller::user("reader"))).await;
    let (status, answer) = get(s.addr, "/exec?query=SELECT%20count(*)%20FROM%20t").await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = get(s.addr, "/exp?query=SELECT%20*%20FROM%20t").await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = get(s.addr, INSERT).await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer.contains("user 'reader' has the read role; INSERT needs write"),
        "{answer}"
    );
    let (status, answer) = get(s.addr, "/exec?query=DROP%20TABLE%20t").await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = import(s.addr).await;
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("/imp needs write"), "{answer}");
}

#[tokio::test]
async fn unknown_and_roleless_callers_are_refused() {
    let s = server(Some(Caller::user("ghost"))).await;
    let (status, answer) = get(s.addr, "/exec?query=SELECT%201").await;
    assert!((400..500).contains(&status), "{answer}");
    assert!(answer.contains("no longer exists"), "{answer}");
}

#[tokio::test]
async fn without_a_caller_requests_run_trusted_until_authentication_is_wired() {
    let s = server(None).await;
    let (status, answer) = get(s.addr, INSERT).await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = import(s.addr).await;
    assert_eq!(status, 200, "{answer}");
}

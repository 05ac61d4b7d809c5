//! Tests against a live listener on 127.0.0.1, with real clients and raw sockets.

mod admission;
mod cancel;
mod copy;
mod credentials;
mod fuzz;
mod pipeline;
mod portals;
mod roles;
mod sql_prepare;
mod timestamps;
mod tls;
mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sundial_query::Engine;
use sundial_storage::{Database, Durability, StorageOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::auth::{AuthMethod, Users};
use crate::{PgOptions, PgServer};

pub const USER: &str = "admin";
pub const PASSWORD: &str = "quest";

/// A server on an ephemeral port over a temporary database; stopped when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub server: Arc<PgServer>,
    stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// A server whose users log in with MD5.
    pub async fn start(options: PgOptions) -> TestServer {
        TestServer::start_with(options, AuthMethod::Md5).await
    }

    pub async fn start_with(options: PgOptions, method: AuthMethod) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let storage = StorageOptions {
            durability: Durability::None,
            ..StorageOptions::default()
        };
        let db = Database::open(dir.path(), storage).expect("open database");
        let mut engine = Engine::new(db).expect("engine");
        let users = Users::new(method, &[(USER.into(), PASSWORD.into())]);
        // The test user is the built-in admin of the store the engine checks roles in.
        engine.set_users(users.store().clone());
        let engine = Arc::new(engine);
        let server = Arc::new(PgServer::new(engine, users, options));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (stop, stop_rx) = watch::channel(false);
        let serving = server.clone();
        tokio::spawn(async move { serving.serve(listener, stop_rx).await });
        TestServer {
            addr,
            server,
            stop,
            _dir: dir,
        }
    }

    /// Logs in with tokio-postgres.
    pub async fn client(&self) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        let config = format!(
            "host={} port={} user={USER} password={PASSWORD} dbname=qdb connect_timeout=10",
            self.addr.ip(),
            self.addr.port()
        );
        let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        Ok(client)
    }

    /// A client that connects, logs in and runs `SELECT 1` within `limit`.
    pub async fn select_one_within(&self, limit: Duration) {
        let run = async {
            let client = self.client().await.expect("log in");
            let row = client.query_one("SELECT 1", &[]).await.expect("SELECT 1");
            assert_eq!(row.get::<_, i64>(0), 1);
        };
        tokio::time::timeout(limit, run)
            .await
            .expect("a client logs in and runs SELECT 1 promptly");
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// A tokio-postgres client logged in as `user` (the connection runs on its own task).
pub async fn connect(server: &TestServer, user: &str, password: &str) -> tokio_postgres::Client {
    let config = format!(
        "host={} port={} user={user} password={password} dbname=qdb connect_timeout=10",
        server.addr.ip(),
        server.addr.port()
    );
    let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls)
        .await
        .expect("log in");
    tokio::spawn(connection);
    client
}

/// A startup packet for protocol 3.0 naming `user`.
pub fn startup_packet(user: &str) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&crate::codec::PROTOCOL_V3.to_be_bytes());
    for (k, v) in [("user", user), ("database", "qdb")] {
        body.extend_from_slice(k.as_bytes());
        body.push(0);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    framed_startup(&body)
}

/// `body` behind its length, as startup-phase packets are framed.
pub fn framed_startup(body: &[u8]) -> Vec<u8> {
    let mut packet = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    packet.extend_from_slice(body);
    packet
}

/// A request code alone (SSLRequest, GSSENCRequest) as a startup-phase packet.
pub fn request_packet(code: i32) -> Vec<u8> {
    framed_startup(&code.to_be_bytes())
}

/// Reads until the server closes the socket or `limit` passes; returns what was read and
/// whether the socket was closed.
pub async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    let mut chunk = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Err(_) => return (got, false),
            Ok(Ok(0)) | Ok(Err(_)) => return (got, true),
            Ok(Ok(n)) => got.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The SQLSTATE of the first ErrorResponse in `bytes`, if any.
pub fn error_code(bytes: &[u8]) -> Option<String> {
    let mut at = 0;
    while at + 5 <= bytes.len() {
        let tag = bytes[at];
        let len = i32::from_be_bytes(bytes[at + 1..at + 5].try_into().ok()?) as usize;
        let body = bytes.get(at + 5..at + 1 + len)?;
        if tag == b'E' {
            let mut fields = body.split(|b| *b == 0);
            return fields
                .find(|f| f.first() == Some(&b'C'))
                .map(|f| String::from_utf8_lossy(&f[1..]).into_owned());
        }
        at += 1 + len;
    }
    None
}

/// Opens a connection that sends `first` (possibly nothing) and then stays silent.
pub async fn silent(addr: SocketAddr, first: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    if !first.is_empty() {
        stream.write_all(first).await.expect("send");
    }
    stream
}

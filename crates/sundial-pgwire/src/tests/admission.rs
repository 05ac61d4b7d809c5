//! Silent and slow sockets cannot lock clients out; refusals carry SQLSTATE 53300.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio_postgres::error::SqlState;

use super::*;
use crate::admission::BURST_FACTOR;
use crate::codec::{CANCEL_REQUEST, GSSENC_REQUEST, SSL_REQUEST};

const PROMPTLY: Duration = Duration::from_secs(10);

fn options(sessions: usize, pending: usize, auth_timeout_ms: u64) -> PgOptions {
    PgOptions {
        connections_max: sessions,
        unauthenticated_connections_max: pending,
        auth_timeout_ms,
        ..PgOptions::default()
    }
}

/// What silent attackers send before going quiet: nothing, a startup packet, an encryption
/// request.
fn first_bytes(i: usize) -> Vec<u8> {
    match i % 4 {
        0 => Vec::new(),
        1 => startup_packet(USER),
        2 => request_packet(SSL_REQUEST),
        _ => request_packet(GSSENC_REQUEST),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_sockets_does_not_lock_a_client_out() {
    // The auth timeout is long: what lets the client in is the unauthenticated budget.
    let server = TestServer::start(options(4, 8, 60_000)).await;
    let early = server.client().await.expect("log in before the flood");
    let mut flood = Vec::new();
    for i in 0..40 {
        flood.push(silent(server.addr, &first_bytes(i)).await);
    }
    server.select_one_within(PROMPTLY).await;
    let row = early.query_one("SELECT 1", &[]).await.expect("SELECT 1");
    assert_eq!(
        row.get::<_, i64>(0),
        1,
        "an authenticated session is never evicted"
    );
    // The oldest silent sockets were closed to make room, with 53300.
    let (got, closed) = read_until_closed(&mut flood[0], PROMPTLY).await;
    assert!(closed, "the oldest silent socket is closed");
    assert_eq!(error_code(&got).as_deref(), Some("53300"));
    assert!(server.server.shared.admission.pending_count() <= 8 * BURST_FACTOR);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_sockets_are_closed_after_the_auth_timeout() {
    let server = TestServer::start(options(4, 16, 300)).await;
    let started = Instant::now();
    let mut sockets = Vec::new();
    for i in 0..4 {
        sockets.push(silent(server.addr, &first_bytes(i)).await);
    }
    // A startup packet sent a byte at a time, never finished.
    let mut trickle = silent(server.addr, &startup_packet(USER)[..3]).await;
    for socket in &mut sockets {
        let (got, closed) = read_until_closed(socket, PROMPTLY).await;
        assert!(closed, "a silent socket is closed after the auth timeout");
        // An encryption request was answered 'N' first.
        let got = got.strip_prefix(b"N").unwrap_or(&got);
        assert_eq!(error_code(got).as_deref(), Some("08006"), "{got:?}");
    }
    let (_, closed) = read_until_closed(&mut trickle, PROMPTLY).await;
    assert!(closed, "an unfinished startup packet is closed too");
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(server.server.shared.admission.pending_count(), 0);
    server.select_one_within(PROMPTLY).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_server_refuses_with_53300_and_frees_the_slot_on_logout() {
    let server = TestServer::start(options(1, 8, 10_000)).await;
    let first = server.client().await.expect("first client");
    let refused = match server.client().await {
        Ok(_) => panic!("a second session fits in a server of one"),
        Err(e) => e,
    };
    assert_eq!(refused.code(), Some(&SqlState::TOO_MANY_CONNECTIONS));
    // Silent sockets do not take the session slot.
    let _silent = silent(server.addr, &startup_packet(USER)).await;
    drop(first);
    let deadline = Instant::now() + PROMPTLY;
    loop {
        match server.client().await {
            Ok(client) => {
                client.query_one("SELECT 1", &[]).await.expect("SELECT 1");
                break;
            }
            Err(e) if Instant::now() < deadline => {
                assert_eq!(e.code(), Some(&SqlState::TOO_MANY_CONNECTIONS));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("the slot was not given back: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encryption_and_cancel_requests_are_bounded() {
    let server = TestServer::start(options(4, 4, 60_000)).await;
    // Repeated encryption requests on one connection: two answers, then the connection ends.
    let mut repeat = silent(server.addr, &[]).await;
    for _ in 0..10 {
        if repeat
            .write_all(&request_packet(SSL_REQUEST))
            .await
            .is_err()
        {
            break;
        }
    }
    let (got, closed) = read_until_closed(&mut repeat, PROMPTLY).await;
    assert!(closed);
    assert!(
        got.starts_with(b"NN"),
        "two encryption requests are answered"
    );
    assert_eq!(error_code(&got[2..]).as_deref(), Some("08P01"));

    // A flood of cancels and encryption requests held open takes only unauthenticated places.
    let mut cancel = CANCEL_REQUEST.to_be_bytes().to_vec();
    cancel.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
    let cancel = framed_startup(&cancel);
    let mut flood = Vec::new();
    for i in 0..30 {
        let first = if i % 2 == 0 {
            cancel.clone()
        } else {
            request_packet(SSL_REQUEST)
        };
        flood.push(silent(server.addr, &first).await);
    }
    // A cancel ends its connection at once.
    let (_, closed) = read_until_closed(&mut flood[0], PROMPTLY).await;
    assert!(closed, "a connection that carried a cancel is closed");
    server.select_one_within(PROMPTLY).await;
    assert!(server.server.shared.admission.pending_count() <= 4 * BURST_FACTOR);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_clients_all_log_in() {
    // The default budgets: 64 logins in progress, 256 sessions.
    let server = TestServer::start(PgOptions::default()).await;
    let clients: Vec<_> = (0..100)
        .map(|_| {
            let config = format!(
                "host={} port={} user={USER} password={PASSWORD} dbname=qdb connect_timeout=60",
                server.addr.ip(),
                server.addr.port()
            );
            tokio::spawn(async move {
                let (client, connection) =
                    tokio_postgres::connect(&config, tokio_postgres::NoTls).await?;
                tokio::spawn(connection);
                let row = client.query_one("SELECT 1", &[]).await?;
                Ok::<_, tokio_postgres::Error>((client, row.get::<_, i64>(0)))
            })
        })
        .collect();
    let mut held = Vec::new();
    for (i, client) in clients.into_iter().enumerate() {
        let (client, one) = client
            .await
            .expect("the client task")
            .unwrap_or_else(|e| panic!("client {i} of the burst: {e}"));
        assert_eq!(one, 1);
        held.push(client);
    }
    assert_eq!(held.len(), 100);
}

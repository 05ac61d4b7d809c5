//! End-to-end tests of the listeners against peers that hold sockets without speaking: silent
//! sockets must not lock clients out of HTTP (with TLS on) or ILP over TCP, and HTTP closes
//! connections that send their request head too slowly or sit idle. Also what the server says
//! at start: the ready line's console address and login, and the plain-HTTP warning.
//!
//! No test depends on timing: budgets are set small so that eviction is decided by the order
//! of arrival (the kernel queues connections in order, the server accepts them in order), and
//! timeouts are waited for, never raced against; the generous read timeouts only turn a
//! server that would wait forever into a failure.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::{serve, start_on_free_ports, stop, wait_for_log};

/// Far longer than any answer takes; far shorter than the timeouts the servers here are given
/// where a test must not see them fire.
const PATIENCE: Duration = Duration::from_secs(60);

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream
}

/// Reads until the server closes the connection; fails if it has not within [`PATIENCE`].
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => got,
        // Closed with unread bytes of ours, or evicted mid-handshake: closed all the same.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => got,
        Err(e) => panic!("the server did not close the connection: {e}"),
    }
}

/// `GET /status` on a new connection, answered within [`PATIENCE`].
fn status(port: u16) -> String {
    let mut stream = connect(port);
    stream
        .write_all(b"GET /status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let answer = read_until_closed(&mut stream);
    String::from_utf8_lossy(&answer).into_owned()
}

/// A server certificate for localhost, written into `dir`: (certificate, key) paths.
fn certificate(dir: &Path) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let cert_path = dir.join("server.crt");
    let key_path = dir.join("server.key");
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (
        cert_path.to_string_lossy().into_owned(),
        key_path.to_string_lossy().into_owned(),
    )
}

/// With a certificate, each HTTP connection's first byte is awaited apart from the accepts;
/// sockets that send nothing fill that budget, and each newcomer evicts the oldest of them, so
/// a client is served at once however many silent sockets are open (they used to stall every
/// client for the whole handshake timeout past 256 of them).
#[test]
fn silent_sockets_do_not_lock_clients_out_of_https() {
    let dir = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(certs.path());
    let server = serve(
        dir.path(),
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--http-handshakes-max",
            "20",
            // Never fires here: only eviction can make room.
            "--tls-handshake-timeout-ms",
            "600000",
        ],
    );
    let mut silent: Vec<TcpStream> = (0..30).map(|_| connect(server.http)).collect();
    // The client arrives after the 30 silent sockets: the 11 oldest of them are evicted (10 by
    // the silent ones past the budget, one by the client).
    let answer = status(server.http);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"status\":\"ok\""), "{answer}");
    // The oldest silent socket was closed for the newer ones; the log says so.
    assert!(read_until_closed(&mut silent[0]).is_empty());
    assert!(wait_for_log(
        &server,
        "the oldest was closed to make room",
        PATIENCE
    ));
    silent.clear();
    stop(server);
}

/// ILP/TCP connections that have not sent a byte hold no connection slot, have a budget of
/// their own whose oldest member a newcomer evicts, and are closed past the first-byte timeout.
#[test]
fn silent_sockets_do_not_lock_ilp_senders_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &[
            "--ilp-tcp-connections-max",
            "8",
            "--ilp-tcp-unauthenticated-connections-max",
            "20",
            "--ilp-tcp-first-byte-timeout-ms",
            "600000",
        ],
    );
    // More silent sockets than slots and than the budget of arriving connections.
    let mut silent: Vec<TcpStream> = (0..30).map(|_| connect(server.tcp)).collect();
    let mut sender = connect(server.tcp);
    sender.write_all(b"listen_t,k=a v=1 1000\n").unwrap();
    sender.shutdown(std::net::Shutdown::Write).unwrap();
    // The server closes the connection once it has taken its lines.
    read_until_closed(&mut sender);
    assert!(read_until_closed(&mut silent[0]).is_empty(), "evicted");
    assert!(wait_for_log(
        &server,
        "the oldest was closed to make room",
        PATIENCE
    ));
    let query = common::encode("SELECT count(*) FROM listen_t");
    let mut stored = String::new();
    for _ in 0..600 {
        let (code, body) = common::http(
            server.http,
            "GET",
            &format!("/exec?query={query}"),
            &[],
            b"",
        );
        stored = body;
        if code == 200 && stored.contains("[[1]]") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(stored.contains("[[1]]"), "{stored}");
    silent.clear();
    stop(server);

    // A connection that sends nothing is closed at the first-byte timeout.
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--ilp-tcp-first-byte-timeout-ms", "200"]);
    let mut idle = connect(server.tcp);
    assert!(read_until_closed(&mut idle).is_empty());
    assert!(wait_for_log(
        &server,
        "sent no line within 200 ms",
        PATIENCE
    ));
    stop(server);
}

/// A request head sent too slowly (slowloris) gets 408 and is closed; a keep-alive connection
/// left idle after an answer is closed too.
#[test]
fn slow_and_idle_http_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--http-header-timeout-ms", "3000"]);
    let mut slow = connect(server.http);
    slow.write_all(b"GET /status HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    let answer = String::from_utf8_lossy(&read_until_closed(&mut slow)).into_owned();
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );

    let mut idle = connect(server.http);
    idle.write_all(b"GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    // The answer, then nothing more: the server closes the idle connection.
    let answer = String::from_utf8_lossy(&read_until_closed(&mut idle)).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(answer.matches("HTTP/1.1").count(), 1, "{answer}");

    // Clients that send their requests are served as before.
    assert!(status(server.http).starts_with("HTTP/1.1 200"));
    stop(server);
}

/// The ready line names the console's address and how to log in; a plain HTTP address beyond
/// loopback with credentials required gets a WARN that they travel in clear.
#[test]
fn the_start_names_the_console_and_warns_of_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let ready = server
        .log
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.starts_with("sundial serving: HTTP "))
        .cloned()
        .unwrap();
    assert!(
        ready.contains(&format!("web console http://127.0.0.1:{}/", server.http)),
        "{ready}"
    );
    // The tests' servers run with --auth off.
    assert!(ready.contains("no login needed"), "{ready}");
    let log = stop(server);
    assert!(!log.contains("travel in clear"), "{log}");

    let dir = tempfile::tempdir().unwrap();
    let server = start_on_free_ports(dir.path(), |(http, tcp, _)| {
        vec![
            "--http-addr".to_string(),
            format!("0.0.0.0:{http}"),
            "--ilp-tcp-addr".to_string(),
            format!("127.0.0.1:{tcp}"),
            "--auth".to_string(),
            "required".to_string(),
            "--admin-password".to_string(),
            "a-long-and-strong-secret".to_string(),
        ]
    });
    let port = server.http;
    let log = stop(server);
    assert!(log.contains("travel in clear"), "{log}");
    assert!(log.contains(&format!("0.0.0.0:{port}")), "{log}");
    assert!(log.contains("--tls-cert"), "{log}");
    assert!(
        log.contains(&format!(
            "web console http://127.0.0.1:{port}/ (log in as admin with --admin-password)"
        )),
        "{log}"
    );
}

//! End-to-end: `sundial serve` receives ILP over TCP, UDP and HTTP, and commits everything
//! received when stopped with SIGTERM.

mod common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn ilp_over_tcp_udp_and_http_is_committed_by_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    assert_eq!(http(server.http, "GET", "/ping", &[], b"").0, 204);

    // TCP: many lines, split across writes in the middle of a line, one bad line.
    let mut tcp = TcpStream::connect(("127.0.0.1", server.tcp)).unwrap();
    let mut payload = String::new();
    for i in 0..1000 {
        payload.push_str(&format!(
            "cpu,host=h{} usage_user={}i,note=\"a b\" {}\n",
            i % 10,
            i,
            1_451_606_400_000_000_000i64 + i * 1_000_000_000
        ));
    }
    payload.push_str("cpu,host=x usage_user=\"oops\" 1451606400000000000\n");
    let bytes = payload.as_bytes();
    for chunk in bytes.chunks(777) {
        tcp.write_all(chunk).unwrap();
    }
    // A last line without a newline is taken when the connection closes.
    tcp.write_all(b"cpu,host=last usage_user=5i 1451606500000000000")
        .unwrap();
    drop(tcp);

    // UDP: one datagram, several lines.
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.send_to(
        b"udp_t v=1 1000\nudp_t v=2 2000\n",
        ("127.0.0.1", server.udp),
    )
    .unwrap();

    // HTTP: precision, gzip, a bad line (good lines still go in), 400 with the line number.
    let (status, _) = http(
        server.http,
        "POST",
        "/write?precision=s",
        &[],
        b"web,src=a v=1 1451606400\nweb,src=b v=2 1451606401\n",
    );
    assert_eq!(status, 204);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"web,src=c v=3 1451606402\n").unwrap();
    let gz = gz.finish().unwrap();
    let (status, _) = http(
        server.http,
        "POST",
        "/api/v2/write?precision=s",
        &[("Content-Encoding", "gzip")],
        &gz,
    );
    assert_eq!(status, 204);
    let (status, body) = http(
        server.http,
        "POST",
        "/write?precision=s",
        &[],
        b"web,src=d v=4 1451606403\nweb,src=e v=bad 1451606404\n\nweb,src=f v=\"str\" 1451606405\n",
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains(r#""line":2"#) && body.contains("2 line(s) rejected"),
        "{body}"
    );
    let (status, body) = http(
        server.http,
        "POST",
        "/write?precision=fortnight",
        &[],
        b"web v=1\n",
    );
    assert_eq!(status, 400);
    assert!(body.contains("unknown precision"), "{body}");
    // Committed (204) rows are visible to a query at once... after the server releases the directory.
    stop(server);

    assert_eq!(
        sql(
            dir.path(),
            "SELECT count(*) AS n, count(DISTINCT host) AS hosts, sum(usage_user) AS s FROM cpu"
        ),
        "n,hosts,s\n1001,11,499505\n"
    );
    assert_eq!(
        sql(dir.path(), "SELECT note FROM cpu LIMIT 1"),
        "note\na b\n"
    );
    assert_eq!(
        sql(dir.path(), "SELECT src, v FROM web ORDER BY timestamp"),
        "src,v\na,1.0\nb,2.0\nc,3.0\nd,4.0\n"
    );
    assert_eq!(
        sql(dir.path(), "SELECT v FROM udp_t ORDER BY timestamp"),
        "v\n1.0\n2.0\n"
    );
    let columns = sql(dir.path(), "SHOW COLUMNS FROM cpu");
    assert!(
        columns.contains(
            "timestamp,TIMESTAMP,false,0,false,0,0,true,false\nhost,SYMBOL,false,256,true,256,"
        ),
        "{columns}"
    );
}

#[test]
fn config_file_multicast_exec_and_table_counters() {
    let dir = tempfile::tempdir().unwrap();
    let (http_port, tcp, udp) = (free_port(), free_port(), free_port());
    let config = dir.path().join("sundial.toml");
    // The file sets every listener; the flag beats the file for the TCP port.
    std::fs::write(
        &config,
        format!(
            "[http]\naddr = \"127.0.0.1:{http_port}\"\n[ilp]\ntcp_addr = \"127.0.0.1:1\"\n\
             udp_addr = \"127.0.0.1:{udp}\"\nudp_multicast_group = \"239.255.70.7\"\n\
             udp_multicast_interface = \"127.0.0.1\"\ncommit_interval_ms = 50\n"
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let server = start_with(
        &data,
        (http_port, tcp, udp),
        &[
            "--config",
            config.to_str().unwrap(),
            "--ilp-tcp-addr",
            &format!("127.0.0.1:{tcp}"),
        ],
    );

    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
    socket
        .set_multicast_if_v4(&"127.0.0.1".parse().unwrap())
        .unwrap();
    let sender: UdpSocket = socket.into();
    sender
        .send_to(
            b"mc,src=a v=1i 1000\nmc,src=b v=2i 2000\n",
            ("239.255.70.7", udp),
        )
        .unwrap();
    sender
        .send_to(b"mc,src=c v=\"bad\" 3000\n", ("239.255.70.7", udp))
        .unwrap();
    let mut tcp_stream = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    tcp_stream.write_all(b"mc,src=t v=3i 4000\n").unwrap();
    drop(tcp_stream);

    // Rows become queryable over /exec within the commit interval.
    let query = "/exec?query=select%20src,v%20from%20mc%20order%20by%20timestamp";
    let expected = r#""dataset":[["a",1],["b",2],["t",3]],"count":3}"#;
    let started = Instant::now();
    let body = loop {
        let (status, body) = http(server.http, "GET", query, &[], b"");
        if (status == 200 && body.ends_with(expected))
            || started.elapsed() > Duration::from_secs(10)
        {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(body.ends_with(expected), "{body}");
    assert!(
        body.contains(r#""columns":[{"name":"src","type":"SYMBOL"},{"name":"v","type":"LONG"}]"#),
        "{body}"
    );
    let (status, body) = http(
        server.http,
        "GET",
        "/exec?query=select%20nope%20from%20mc",
        &[],
        b"",
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains(r#""position":7"#), "{body}");

    let log = stop(server);
    assert!(
        log.contains("ILP/UDP: 2 lines accepted, 1 rejected"),
        "{log}"
    );
    assert!(
        log.contains("ILP/UDP table 'mc': 2 lines accepted, 1 rejected"),
        "{log}"
    );
    assert!(
        log.contains("ILP/TCP table 'mc': 1 lines accepted, 0 rejected"),
        "{log}"
    );
}

#[test]
fn a_bad_config_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sundial.toml");
    std::fs::write(&config, "[ilp]\ntcp_adr = \"127.0.0.1:1\"\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .env("SUNDIAL_DATA_DIR", dir.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("unknown setting 'ilp_tcp_adr'"), "{stderr}");
}

/// A port another process holds (HTTP, then PostgreSQL, which bind after the query runtime
/// starts) is a clear error and a failed exit, never a panic.
#[test]
fn a_busy_port_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_addr = busy.local_addr().unwrap().to_string();
    for (flag, what) in [
        ("--http-addr", "(HTTP)"),
        ("--pg-addr", "(PostgreSQL)"),
        ("--ilp-tcp-addr", "(ILP/TCP)"),
    ] {
        let free = |_| format!("127.0.0.1:{}", free_port());
        let mut args = vec![
            "serve".to_string(),
            "--http-addr".into(),
            free(0),
            "--pg-addr".into(),
            free(1),
            "--ilp-tcp-addr".into(),
            free(2),
        ];
        let at = args.iter().position(|a| a == flag).unwrap();
        args[at + 1] = busy_addr.clone();
        let o = Command::new(env!("CARGO_BIN_EXE_sundial"))
            .args(&args)
            .env("SUNDIAL_DATA_DIR", dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("cannot listen on {busy_addr} {what}")),
            "{stderr}"
        );
        // It names the flag that moves the listener.
        assert!(
            stderr.contains(&format!("choose another address with {flag}")),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// Polls `SELECT count(*) FROM table` over /exec until it is `rows` (true) or 30 s pass.
fn becomes_queryable(http_port: u16, table: &str, rows: usize) -> bool {
    let query = format!(
        "/exec?query={}",
        encode(&format!("SELECT count(*) FROM {table}"))
    );
    let expected = format!(r#""dataset":[[{rows}]]"#);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        let (status, body) = http(http_port, "GET", &query, &[], b"");
        if status == 200 && body.contains(&expected) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Rows are committed once their sender pauses (`--ilp-pause-commit-ms`) or closes, not at the
/// commit interval's tick: with that interval an hour, rows sent over TCP (the connection
/// still open) and UDP become queryable after a pause, and with the pause an hour too, rows
/// sent over TCP become queryable once the sender closes.
#[test]
fn rows_are_committed_when_their_sender_pauses_or_closes() {
    let lines = |table: &str, n: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("{table},k=a v={i}i {}\n", 1_000 + i).into_bytes())
            .collect()
    };
    for (pause_ms, closing) in [("50", false), ("3600000", true)] {
        let dir = tempfile::tempdir().unwrap();
        let (server, (http_port, tcp, udp)) = start_listening(
            dir.path(),
            &[
                "--ilp-commit-interval-ms",
                "3600000",
                "--ilp-pause-commit-ms",
                pause_ms,
            ],
        );
        let mut sender = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
        sender.write_all(&lines("tcp_rows", 2_000)).unwrap();
        sender.flush().unwrap();
        if closing {
            drop(sender);
            assert!(
                becomes_queryable(http_port, "tcp_rows", 2_000),
                "after close"
            );
        } else {
            assert!(
                becomes_queryable(http_port, "tcp_rows", 2_000),
                "after a pause"
            );
            // Still connected: more rows, another pause.
            sender.write_all(&lines("tcp_rows", 3)).unwrap();
            assert!(
                becomes_queryable(http_port, "tcp_rows", 2_003),
                "second pause"
            );
            let udp_sender = UdpSocket::bind("127.0.0.1:0").unwrap();
            udp_sender
                .send_to(&lines("udp_rows", 50), ("127.0.0.1", udp))
                .unwrap();
            assert!(
                becomes_queryable(http_port, "udp_rows", 50),
                "UDP after a pause"
            );
            drop(sender);
        }
        stop(server);
    }
}

/// `--ilp-tcp-connections-max` connections are served at once: one more is closed as it is
/// accepted, and once a connection closes, a new one is served again.
#[test]
fn tcp_connections_past_the_limit_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (server, (http_port, tcp, _)) =
        start_listening(dir.path(), &["--ilp-tcp-connections-max", "2"]);
    let connect = || TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    let mut served = vec![connect(), connect()];
    for (i, s) in served.iter_mut().enumerate() {
        s.write_all(format!("limits,k=a v={i}i {}\n", 1_000 + i).as_bytes())
            .unwrap();
    }
    assert!(becomes_queryable(http_port, "limits", 2));
    // The third is closed by the server: its read ends (EOF, or reset).
    let mut third = connect();
    third
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut byte = [0u8; 1];
    let ended = match third.read(&mut byte) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    assert!(ended, "a connection past the limit stays open");
    drop(served.pop());
    // Once the server has seen the close, a new connection is served (an attempt it still
    // refuses loses its line: try again).
    let started = Instant::now();
    while rows_of(http_port, "limits") < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no connection served after one closed"
        );
        let mut next = connect();
        let _ = next.write_all(b"limits,k=b v=9i 2000\n");
        drop(next);
        std::thread::sleep(Duration::from_millis(200));
    }
    stop(server);
}

/// `SELECT count(*) FROM table` over /exec (0 while it fails).
fn rows_of(http_port: u16, table: &str) -> u64 {
    let query = format!(
        "/exec?query={}",
        encode(&format!("SELECT count(*) FROM {table}"))
    );
    let (_, body) = http(http_port, "GET", &query, &[], b"");
    body.split(r#""dataset":[["#)
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A server on a data directory in `dir` listening on free ports for HTTP, ILP/TCP and ILP/UDP
/// (returned in that order), with `args` besides.
fn start_listening(dir: &std::path::Path, args: &[&str]) -> (Server, (u16, u16, u16)) {
    let ports = (free_port(), free_port(), free_port());
    let (http, tcp, udp) = ports;
    let addrs = [
        format!("127.0.0.1:{http}"),
        format!("127.0.0.1:{tcp}"),
        format!("127.0.0.1:{udp}"),
    ];
    let mut all = vec![
        "--http-addr",
        &addrs[0],
        "--ilp-tcp-addr",
        &addrs[1],
        "--ilp-udp-addr",
        &addrs[2],
    ];
    all.extend_from_slice(args);
    (start_with(&dir.join("data"), ports, &all), ports)
}

//! End-to-end: `sundial serve` receives ILP over TCP, UDP and HTTP, and commits everything
//! received when stopped with SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Server {
    child: Child,
    http: u16,
    tcp: u16,
    udp: u16,
}

fn start(dir: &Path) -> Server {
    let (http, tcp, udp) = (free_port(), free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args([
            "serve",
            "--http-addr",
            &format!("127.0.0.1:{http}"),
            "--ilp-tcp-addr",
            &format!("127.0.0.1:{tcp}"),
        ])
        .args(["--ilp-udp-addr", &format!("127.0.0.1:{udp}")])
        .env("SUNDIAL_DATA_DIR", dir)
        .env("SUNDIAL_DURABILITY", "none")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ready once it says it is serving.
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    for line in lines.by_ref() {
        if line.unwrap().contains("sundial serving") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    Server {
        child,
        http,
        tcp,
        udp,
    }
}

fn stop(mut server: Server) {
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "server exited with {status}");
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "server did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A minimal HTTP/1.1 request; returns (status, body).
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn sql(dir: &Path, query: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args(["sql", "--format", "csv", query])
        .env("SUNDIAL_DATA_DIR", dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

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
    assert!(columns.contains("timestamp,TIMESTAMP,false,true\nhost,SYMBOL,false,false\nusage_user,LONG,false,false\nnote,VARCHAR,false,false"), "{columns}");
}

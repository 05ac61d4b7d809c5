//! Helpers of the end-to-end tests: start `sundial serve` on free ports, stop it, and a minimal
//! HTTP/1.1 client (chunked and gzip bodies, response headers).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Server {
    pub child: Child,
    pub http: u16,
    pub tcp: u16,
    pub udp: u16,
    /// The PostgreSQL port.
    pub pg: u16,
    /// Every line the server wrote to stderr so far.
    pub log: Arc<Mutex<Vec<String>>>,
}

pub fn start(dir: &Path) -> Server {
    start_on_free_ports(dir, |(http, tcp, udp)| {
        vec![
            "--http-addr".to_string(),
            format!("127.0.0.1:{http}"),
            "--ilp-tcp-addr".to_string(),
            format!("127.0.0.1:{tcp}"),
            "--ilp-udp-addr".to_string(),
            format!("127.0.0.1:{udp}"),
        ]
    })
}

/// Starts a server on ports `free_port` picked, with the arguments `args` makes of them. A
/// port is free when picked but another test's server may take it before this one binds it:
/// a server that exits before serving is started again on other ports.
pub fn start_on_free_ports(dir: &Path, args: impl Fn((u16, u16, u16)) -> Vec<String>) -> Server {
    for _ in 0..5 {
        let ports = (free_port(), free_port(), free_port());
        let args = args(ports);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut server = start_with(dir, ports, &args);
        if server.child.try_wait().unwrap().is_none() {
            return server;
        }
    }
    panic!("the server did not start on five sets of free ports");
}

/// Starts a server on free loopback ports (HTTP, ILP/TCP, ILP/UDP) with the arguments `extra`.
pub fn serve(dir: &Path, extra: &[&str]) -> Server {
    start_on_free_ports(dir, |(http, tcp, udp)| {
        let mut args = vec![
            "--http-addr".to_string(),
            format!("127.0.0.1:{http}"),
            "--ilp-tcp-addr".to_string(),
            format!("127.0.0.1:{tcp}"),
            "--ilp-udp-addr".to_string(),
            format!("127.0.0.1:{udp}"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    })
}

/// The value of an unlabelled series in the server's `/metrics`.
pub fn metric(server: &Server, name: &str) -> u64 {
    let (status, text) = http(server.http, "GET", "/metrics", &[], b"");
    assert_eq!(status, 200, "{text}");
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("{name} missing:\n{text}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Starts a server with `args`; it may have exited (see [`start_on_free_ports`]) if it could
/// not serve.
pub fn start_with(dir: &Path, (http, tcp, udp): (u16, u16, u16), args: &[&str]) -> Server {
    let pg_port = free_port();
    let pg = format!("127.0.0.1:{pg_port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sundial"))
        .arg("serve")
        .args(["--pg-addr", &pg])
        .args(args)
        .env("SUNDIAL_DATA_DIR", dir)
        .env("SUNDIAL_DURABILITY", "none")
        // These tests are about other things than logging in: HTTP and ILP clients send no
        // credentials (a test passing `--auth required` overrides this).
        .env("SUNDIAL_AUTH", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ready once it says it is serving.
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let log = Arc::new(Mutex::new(Vec::new()));
    for line in lines.by_ref() {
        let line = line.unwrap();
        log.lock().unwrap().push(line.clone());
        if line.contains("sundial serving") {
            break;
        }
    }
    // Without that line the server exited; let it be reaped so `try_wait` sees it.
    if !log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("sundial serving"))
    {
        let _ = child.wait();
    }
    let more = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            more.lock().unwrap().push(line);
        }
    });
    Server {
        child,
        http,
        tcp,
        udp,
        pg: pg_port,
        log,
    }
}

/// Stops the server; returns its whole log.
pub fn stop(mut server: Server) -> String {
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "server exited with {status}");
            // The log thread reads to the end of the closed pipe.
            std::thread::sleep(Duration::from_millis(200));
            return server.log.lock().unwrap().join("\n");
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "server did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A response: status, headers (names lower case) and the body, de-chunked.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text, gunzipped when it is gzip-encoded.
    pub fn text(&self) -> String {
        if self.header("content-encoding") == Some("gzip") {
            let mut out = String::new();
            flate2::read::GzDecoder::new(&self.body[..])
                .read_to_string(&mut out)
                .unwrap();
            return out;
        }
        String::from_utf8(self.body.clone()).unwrap()
    }
}

/// Splits a raw HTTP/1.1 response.
pub fn parse_reply(raw: &[u8]) -> Reply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = &raw[split + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    Reply {
        status,
        headers,
        body,
    }
}

/// Decodes a chunked body: `<hex size>\r\n<data>\r\n` until a size of zero.
pub fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut decoded = Vec::new();
    while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..end]).trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        let data = &rest[end + 2..];
        decoded.extend_from_slice(&data[..size]);
        rest = &data[size + 2..];
    }
    decoded
}

/// One HTTP/1.1 request on a new connection.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
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
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse_reply(&raw)
}

/// A minimal HTTP/1.1 request; returns (status, body as text).
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let reply = request(port, method, path, headers, body);
    (reply.status, reply.text())
}

/// Percent-encodes a query parameter value.
pub fn encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A multipart/form-data body of `(name, file name, content)` parts; returns the Content-Type
/// and the body.
pub fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "sundial-test-boundary-7d3a";
    let mut body = Vec::new();
    for (name, file, content) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match file {
            Some(file) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{file}\"\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(content);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// The server process's resident memory (VmRSS) and its peak (VmHWM), in KiB.
pub fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// `query` over /exec: status and body.
pub fn exec(server: &Server, query: &str) -> (u16, String) {
    http(
        server.http,
        "GET",
        &format!("/exec?query={}", encode(query)),
        &[],
        b"",
    )
}

pub fn exec_ok(server: &Server, query: &str) -> String {
    let (status, body) = exec(server, query);
    assert_eq!(status, 200, "{query}: {body}");
    body
}

/// Waits until the server's log has a line containing `text`.
pub fn wait_for_log(server: &Server, text: &str, within: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < within {
        if server.log.lock().unwrap().iter().any(|l| l.contains(text)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

pub fn sql(dir: &Path, query: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args(["sql", "--format", "csv", query])
        .env("SUNDIAL_DATA_DIR", dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The `dataset` of an /exec answer.
pub fn dataset(body: &str) -> String {
    let at = body.find("\"dataset\":").expect("a dataset");
    let rest = &body[at..];
    rest[..rest.find(",\"count\"").unwrap_or(rest.len())].to_string()
}

//! A raw protocol v3 client for the session tests: frontend messages are built by hand and sent
//! in one write (so several of them form one pipeline), and backend messages are read back as
//! one-line summaries, so a test states exactly what the server answers and in which order.
//!
//! Summaries: `ParseComplete`, `BindComplete`, `CloseComplete`, `NoData`, `PortalSuspended`,
//! `EmptyQueryResponse`, `RowDescription a,b` (`a binary` for a binary column),
//! `DataRow 1|x|NULL` (text format),
//! `CommandComplete INSERT 0 1`, `ReadyForQuery I`, `Error 42P01` (the message is kept in
//! [`Wire::errors`]), `CopyInResponse text 2`, `CopyOutResponse text 2` (the overall format,
//! `text` or `binary`, and the column count), `CopyData <bytes as UTF-8>`, `CopyDone`, `ParameterStatus k=v`,
//! `ParameterDescription 20,25`, `Notice`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{PASSWORD, USER, framed_startup, startup_packet};
use crate::codec::CANCEL_REQUEST;

/// How long any expected answer may take (debug builds on a busy machine).
pub const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// Frontend messages to send in one write.
#[derive(Default)]
pub struct Messages(Vec<u8>);

impl Messages {
    pub fn new() -> Messages {
        Messages::default()
    }

    fn message(mut self, tag: u8, body: &[u8]) -> Messages {
        self.0.push(tag);
        self.0
            .extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
        self.0.extend_from_slice(body);
        self
    }

    /// Query: a simple query.
    pub fn query(self, sql: &str) -> Messages {
        self.message(b'Q', &cstr(sql))
    }

    /// Parse, with every parameter type left to the server.
    pub fn parse(self, statement: &str, sql: &str) -> Messages {
        let mut body = cstr(statement);
        body.extend(cstr(sql));
        body.extend_from_slice(&0i16.to_be_bytes());
        self.message(b'P', &body)
    }

    /// Bind of text parameters (`None`: NULL), results in text.
    pub fn bind(self, portal: &str, statement: &str, params: &[Option<&str>]) -> Messages {
        let mut body = cstr(portal);
        body.extend(cstr(statement));
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&(params.len() as i16).to_be_bytes());
        for param in params {
            match param {
                Some(value) => {
                    body.extend_from_slice(&(value.len() as i32).to_be_bytes());
                    body.extend_from_slice(value.as_bytes());
                }
                None => body.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        body.extend_from_slice(&0i16.to_be_bytes());
        self.message(b'B', &body)
    }

    /// Bind without parameters, every result column in binary.
    pub fn bind_binary(self, portal: &str, statement: &str) -> Messages {
        let mut body = cstr(portal);
        body.extend(cstr(statement));
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&1i16.to_be_bytes());
        body.extend_from_slice(&1i16.to_be_bytes());
        self.message(b'B', &body)
    }

    /// Describe of a portal.
    pub fn describe_portal(self, portal: &str) -> Messages {
        let mut body = vec![b'P'];
        body.extend(cstr(portal));
        self.message(b'D', &body)
    }

    /// Execute of at most `max_rows` rows (0: all).
    pub fn execute(self, portal: &str, max_rows: i32) -> Messages {
        let mut body = cstr(portal);
        body.extend_from_slice(&max_rows.to_be_bytes());
        self.message(b'E', &body)
    }

    /// Close of a portal.
    pub fn close_portal(self, portal: &str) -> Messages {
        let mut body = vec![b'P'];
        body.extend(cstr(portal));
        self.message(b'C', &body)
    }

    pub fn sync(self) -> Messages {
        self.message(b'S', &[])
    }

    pub fn flush(self) -> Messages {
        self.message(b'H', &[])
    }

    pub fn copy_data(self, data: &[u8]) -> Messages {
        self.message(b'd', data)
    }

    pub fn copy_done(self) -> Messages {
        self.message(b'c', &[])
    }

    pub fn copy_fail(self, reason: &str) -> Messages {
        self.message(b'f', &cstr(reason))
    }
}

fn cstr(s: &str) -> Vec<u8> {
    let mut out = s.as_bytes().to_vec();
    out.push(0);
    out
}

/// A logged-in raw connection.
pub struct Wire {
    stream: TcpStream,
    input: Vec<u8>,
    pub pid: i32,
    pub secret: i32,
    /// The message of every ErrorResponse read, in order.
    pub errors: Vec<String>,
}

impl Wire {
    /// Connects and logs in with a cleartext password (the server must use
    /// [`AuthMethod::Password`](crate::AuthMethod::Password)), up to the first ReadyForQuery.
    pub async fn connect(addr: SocketAddr) -> Wire {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let mut wire = Wire {
            stream,
            input: Vec::new(),
            pid: 0,
            secret: 0,
            errors: Vec::new(),
        };
        wire.send_raw(&startup_packet(USER)).await;
        let (tag, body) = wire.next().await.expect("an authentication request");
        assert_eq!((tag, body.as_slice()), (b'R', &3i32.to_be_bytes()[..]));
        wire.send_raw(&{
            let mut password = vec![b'p'];
            password.extend_from_slice(&((PASSWORD.len() + 5) as i32).to_be_bytes());
            password.extend(cstr(PASSWORD));
            password
        })
        .await;
        loop {
            let (tag, body) = wire.next().await.expect("the login ends");
            match tag {
                b'K' => {
                    wire.pid = i32::from_be_bytes(body[0..4].try_into().expect("pid"));
                    wire.secret = i32::from_be_bytes(body[4..8].try_into().expect("key"));
                }
                b'Z' => return wire,
                b'E' => panic!("login refused: {}", summary(tag, &body)),
                _ => {}
            }
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("send");
    }

    /// Sends `messages` in one write.
    pub async fn send(&mut self, messages: Messages) {
        self.send_raw(&messages.0).await;
    }

    /// The next backend message, or `None` if the server closed the connection.
    async fn next(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            if let Some(end) = frame_end(&self.input) {
                let tag = self.input[0];
                let body = self.input[5..end].to_vec();
                self.input.drain(..end);
                return Some((tag, body));
            }
            let mut chunk = [0u8; 8192];
            let n = tokio::time::timeout(ANSWER_WITHIN, self.stream.read(&mut chunk))
                .await
                .expect("the server answers in time")
                .expect("read");
            if n == 0 {
                return None;
            }
            self.input.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next message's summary (`Closed` if the server closed the connection).
    async fn next_summary(&mut self) -> String {
        let Some((tag, body)) = self.next().await else {
            return "Closed".into();
        };
        if tag == b'E' {
            self.errors.push(error_field(&body, b'M'));
        }
        summary(tag, &body)
    }

    /// Reads messages up to and including the first whose summary starts with `last`.
    pub async fn read_until(&mut self, last: &str) -> Vec<String> {
        let mut got = Vec::new();
        loop {
            let message = self.next_summary().await;
            let done = message.starts_with(last) || message == "Closed";
            got.push(message);
            if done {
                return got;
            }
        }
    }

    /// Reads messages up to and including ReadyForQuery.
    pub async fn read_until_ready(&mut self) -> Vec<String> {
        self.read_until("ReadyForQuery").await
    }

    /// Sends `messages` and reads the answers up to ReadyForQuery.
    pub async fn round_trip(&mut self, messages: Messages) -> Vec<String> {
        self.send(messages).await;
        self.read_until_ready().await
    }

    /// What arrives within `wait`, as summaries (complete messages only).
    pub async fn arriving_within(&mut self, wait: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut chunk = [0u8; 8192];
        while let Ok(read) = tokio::time::timeout_at(deadline, self.stream.read(&mut chunk)).await {
            match read {
                Ok(0) | Err(_) => break,
                Ok(n) => self.input.extend_from_slice(&chunk[..n]),
            }
        }
        let mut got = Vec::new();
        while frame_end(&self.input).is_some() {
            got.push(self.next_summary().await);
        }
        got
    }
}

/// Where the first message in `input` ends, if it is complete.
fn frame_end(input: &[u8]) -> Option<usize> {
    let len = i32::from_be_bytes(input.get(1..5)?.try_into().ok()?);
    let end = 1 + usize::try_from(len).ok()?;
    (input.len() >= end).then_some(end)
}

/// Sends a CancelRequest for (`pid`, `secret`) and waits until the server has handled it (it
/// closes a connection carrying a cancel once it has acted on it).
pub async fn cancel(addr: SocketAddr, pid: i32, secret: i32) {
    let mut body = CANCEL_REQUEST.to_be_bytes().to_vec();
    body.extend_from_slice(&pid.to_be_bytes());
    body.extend_from_slice(&secret.to_be_bytes());
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(&framed_startup(&body))
        .await
        .expect("send the cancel");
    let (got, closed) = super::read_until_closed(&mut stream, ANSWER_WITHIN).await;
    assert!(closed && got.is_empty(), "a cancel is answered by closing");
}

/// The summary of one backend message (see the module docs).
fn summary(tag: u8, body: &[u8]) -> String {
    match tag {
        b'1' => "ParseComplete".into(),
        b'2' => "BindComplete".into(),
        b'3' => "CloseComplete".into(),
        b'n' => "NoData".into(),
        b's' => "PortalSuspended".into(),
        b'I' => "EmptyQueryResponse".into(),
        b'c' => "CopyDone".into(),
        b'N' => "Notice".into(),
        b'Z' => format!("ReadyForQuery {}", body.first().map_or('?', |b| *b as char)),
        b'C' => format!("CommandComplete {}", text(body)),
        b'E' => format!("Error {}", error_field(body, b'C')),
        b'T' => format!("RowDescription {}", column_names(body).join(",")),
        b'D' => format!("DataRow {}", data_row(body).join("|")),
        b'd' => format!("CopyData {}", String::from_utf8_lossy(body)),
        b'G' => format!("CopyInResponse {}", copy_response(body)),
        b'H' => format!("CopyOutResponse {}", copy_response(body)),
        b'S' => format!("ParameterStatus {}", text(body).replacen('\0', "=", 1)),
        b't' => {
            let oids = body[2..]
                .chunks(4)
                .map(|c| i32::from_be_bytes(c.try_into().expect("oid")).to_string());
            format!(
                "ParameterDescription {}",
                oids.collect::<Vec<_>>().join(",")
            )
        }
        other => format!("Message '{}'", other as char),
    }
}

/// A body of C strings, without its last terminator.
fn text(body: &[u8]) -> String {
    String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(body)).into_owned()
}

fn error_field(body: &[u8], field: u8) -> String {
    body.split(|b| *b == 0)
        .find(|f| f.first() == Some(&field))
        .map(|f| String::from_utf8_lossy(&f[1..]).into_owned())
        .unwrap_or_default()
}

fn column_names(body: &[u8]) -> Vec<String> {
    let count = i16::from_be_bytes([body[0], body[1]]) as usize;
    let mut at = 2;
    let mut names = Vec::with_capacity(count);
    for _ in 0..count {
        let end = at + body[at..].iter().position(|b| *b == 0).expect("a name");
        let mut name = String::from_utf8_lossy(&body[at..end]).into_owned();
        // The name's terminator, then table oid, column, type oid, size, modifier, format.
        let format_at = end + 1 + 4 + 2 + 4 + 2 + 4;
        if body[format_at..format_at + 2] == 1i16.to_be_bytes() {
            name.push_str(" binary");
        }
        names.push(name);
        at = format_at + 2;
    }
    names
}

fn data_row(body: &[u8]) -> Vec<String> {
    let count = i16::from_be_bytes([body[0], body[1]]) as usize;
    let mut at = 2;
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        let len = i32::from_be_bytes(body[at..at + 4].try_into().expect("length"));
        at += 4;
        if len < 0 {
            values.push("NULL".into());
        } else {
            let end = at + len as usize;
            values.push(String::from_utf8_lossy(&body[at..end]).into_owned());
            at = end;
        }
    }
    values
}

fn copy_response(body: &[u8]) -> String {
    let format = if body[0] == 0 { "text" } else { "binary" };
    let columns = i16::from_be_bytes([body[1], body[2]]);
    format!("{format} {columns}")
}

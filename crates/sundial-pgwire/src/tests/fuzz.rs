//! Seeded fuzzing, bounded in cases and time so it runs in every `cargo test`: random and
//! mutated client byte streams through the decoders ([`crate::fuzz::frontend_input`]) and
//! through live sessions. `PG_FUZZ_SEED` replays another seed; `PG_FUZZ_SECONDS` runs longer.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::AsyncWriteExt;

use super::*;
use crate::codec::{CANCEL_REQUEST, GSSENC_REQUEST, SSL_REQUEST};
use crate::copy_decode::BINARY_SIGNATURE;
use crate::types::oid;

fn seed() -> u64 {
    std::env::var("PG_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_F00D)
}

fn budget(default_secs: u64) -> Duration {
    let secs = std::env::var("PG_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_secs);
    Duration::from_secs(secs)
}

const SQL: [&str; 10] = [
    "SELECT 1",
    "SELECT $1::int8 + 1",
    "SELECT $1::timestamp",
    "SELECT $1, $2, $3",
    "INSERT INTO fz VALUES ($1, $2, $3)",
    "SELECT * FROM fz WHERE ts > $1",
    "COPY fz FROM STDIN",
    "COPY fz FROM STDIN (FORMAT csv, HEADER true)",
    "COPY fz FROM STDIN (FORMAT binary)",
    "BEGIN; DECLARE c CURSOR FOR SELECT * FROM fz; FETCH 2 FROM c",
];

/// A length field: usually right, sometimes one of the values that break naive decoders.
fn length(rng: &mut StdRng, right: usize) -> i32 {
    match rng.random_range(0..20) {
        0 => -1,
        1 => i32::MIN,
        2 => i32::MAX,
        3 => rng.random_range(0..4),
        4 => rng.random(),
        5 => right as i32 + rng.random_range(1..64),
        6 => (right as i32 - rng.random_range(1..4)).max(0),
        _ => right as i32,
    }
}

fn random_bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let n = rng.random_range(0..=max);
    (0..n).map(|_| rng.random()).collect()
}

fn cstr(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// One parameter value in binary or text, fitting or not its declared type.
fn param_value(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..8) {
        0 => rng.random::<i64>().to_be_bytes().to_vec(),
        1 => [i64::MAX, i64::MIN, 0, -1][rng.random_range(0..4)]
            .to_be_bytes()
            .to_vec(),
        2 => rng.random::<i32>().to_be_bytes().to_vec(),
        3 => [
            "2300-01-01",
            "1600-01-01 00:00:00",
            "2024-05-05T10:00:00Z",
            "2262-04-11 23:47:16.854775807",
            "1677-09-21 00:12:43.145224192",
            "99999-12-31",
            "not a date",
        ][rng.random_range(0..7)]
        .as_bytes()
        .to_vec(),
        4 => rng.random::<f64>().to_string().into_bytes(),
        _ => random_bytes(rng, 24),
    }
}

/// A regular message of `tag`, with a body that is valid-looking, and a length that may lie.
fn message(rng: &mut StdRng) -> Vec<u8> {
    let tags = b"QPBDECSHXpdcfZ\0";
    let tag = tags[rng.random_range(0..tags.len())];
    let mut body = Vec::new();
    match tag {
        b'Q' => cstr(&mut body, SQL[rng.random_range(0..SQL.len())]),
        b'P' => {
            cstr(&mut body, ["", "s1", "s2"][rng.random_range(0..3)]);
            cstr(&mut body, SQL[rng.random_range(0..SQL.len())]);
            let n: i16 = rng.random_range(-2..5);
            body.extend_from_slice(&n.to_be_bytes());
            let oids = [0, oid::INT8, oid::TIMESTAMP, oid::DATE, oid::TEXT, 9999];
            for _ in 0..n.max(0) {
                body.extend_from_slice(&oids[rng.random_range(0..oids.len())].to_be_bytes());
            }
        }
        b'B' => {
            cstr(&mut body, ["", "p1"][rng.random_range(0..2)]);
            cstr(&mut body, ["", "s1", "s2"][rng.random_range(0..3)]);
            let formats: i16 = rng.random_range(-1..4);
            body.extend_from_slice(&formats.to_be_bytes());
            for _ in 0..formats.max(0) {
                body.extend_from_slice(&rng.random_range(-1i16..3).to_be_bytes());
            }
            let n: i16 = rng.random_range(-1..5);
            body.extend_from_slice(&n.to_be_bytes());
            for _ in 0..n.max(0) {
                let value = param_value(rng);
                body.extend_from_slice(&length(rng, value.len()).to_be_bytes());
                body.extend_from_slice(&value);
            }
            body.extend_from_slice(&rng.random_range(-1i16..3).to_be_bytes());
            body.extend_from_slice(&1i16.to_be_bytes());
        }
        b'D' | b'C' => {
            body.push([b'S', b'P', b'x'][rng.random_range(0..3)]);
            cstr(&mut body, ["", "s1", "p1"][rng.random_range(0..3)]);
        }
        b'E' => {
            cstr(&mut body, ["", "p1"][rng.random_range(0..2)]);
            body.extend_from_slice(&rng.random_range(-1i32..3).to_be_bytes());
        }
        b'p' => cstr(&mut body, [PASSWORD, "md5abc", ""][rng.random_range(0..3)]),
        b'd' => match rng.random_range(0..4) {
            0 => body.extend_from_slice(b"2024-01-01T00:00:00Z\t1\tx\n2300-01-01\t2\ty\n"),
            1 => body.extend_from_slice(b"ts,v,s\n\"2024-01-01\",1,\"a\"\"b\"\n"),
            2 => {
                body.extend_from_slice(BINARY_SIGNATURE);
                body.extend_from_slice(&[0; 8]);
                body.extend_from_slice(&3i16.to_be_bytes());
                for _ in 0..3 {
                    let value = param_value(rng);
                    body.extend_from_slice(&length(rng, value.len()).to_be_bytes());
                    body.extend_from_slice(&value);
                }
            }
            _ => body = random_bytes(rng, 64),
        },
        b'f' => cstr(&mut body, "fuzz"),
        _ => body = random_bytes(rng, 16),
    }
    mutate(rng, &mut body);
    let mut out = vec![tag];
    out.extend_from_slice(&length(rng, body.len() + 4).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Flips, inserts or cuts a few bytes now and then.
fn mutate(rng: &mut StdRng, bytes: &mut Vec<u8>) {
    if rng.random_range(0..4) != 0 {
        return;
    }
    for _ in 0..rng.random_range(1..4) {
        let at = rng.random_range(0..=bytes.len());
        match rng.random_range(0..3) {
            0 if at < bytes.len() => bytes[at] ^= 1 << rng.random_range(0..8),
            1 => bytes.insert(at, rng.random()),
            _ => bytes.truncate(at),
        }
    }
}

/// A startup-phase packet: a real startup packet, an encryption or cancel request, or junk.
fn startup(rng: &mut StdRng) -> Vec<u8> {
    let mut body = match rng.random_range(0..6) {
        0 => SSL_REQUEST.to_be_bytes().to_vec(),
        1 => GSSENC_REQUEST.to_be_bytes().to_vec(),
        2 => {
            let mut b = CANCEL_REQUEST.to_be_bytes().to_vec();
            b.extend_from_slice(&rng.random::<[u8; 8]>());
            b
        }
        3 => random_bytes(rng, 32),
        _ => startup_packet(USER)[4..].to_vec(),
    };
    mutate(rng, &mut body);
    let mut out = length(rng, body.len() + 4).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

/// A whole client stream: optional startup packets, then messages, sometimes cut short.
fn stream(rng: &mut StdRng, with_startup: bool) -> Vec<u8> {
    if rng.random_range(0..10) == 0 {
        return random_bytes(rng, 256);
    }
    let mut out = Vec::new();
    if with_startup {
        for _ in 0..rng.random_range(1..3) {
            out.extend(startup(rng));
        }
    }
    for _ in 0..rng.random_range(1..12) {
        out.extend(message(rng));
    }
    if rng.random_range(0..5) == 0 {
        out.truncate(rng.random_range(0..=out.len()));
    }
    out
}

#[test]
fn the_decoders_survive_random_and_mutated_client_input() {
    let mut rng = StdRng::seed_from_u64(seed());
    let deadline = Instant::now() + budget(5);
    let mut cases = 0;
    while cases < 200_000 && Instant::now() < deadline {
        let mut data = vec![rng.random()];
        data.extend(stream(&mut rng, true));
        crate::fuzz::frontend_input(&data);
        cases += 1;
    }
    eprintln!("decoder fuzz: {cases} cases");
    assert!(cases >= 100, "only {cases} cases ran");
}

/// Logs in over `stream` with a cleartext password, up to ReadyForQuery.
async fn log_in(stream: &mut TcpStream) {
    stream
        .write_all(&startup_packet(USER))
        .await
        .expect("send startup");
    let mut password = vec![b'p'];
    password.extend_from_slice(&((PASSWORD.len() + 5) as i32).to_be_bytes());
    cstr(&mut password, PASSWORD);
    let mut got = Vec::new();
    let mut sent = false;
    let mut chunk = [0u8; 1024];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("the server answers the login")
            .expect("read");
        assert!(n > 0, "closed during login: {:?}", error_code(&got));
        got.extend_from_slice(&chunk[..n]);
        if !sent && got.first() == Some(&b'R') {
            stream.write_all(&password).await.expect("send password");
            sent = true;
        }
        if got.windows(6).any(|w| w == [b'Z', 0, 0, 0, 5, b'I']) {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sessions_survive_random_and_mutated_client_input() {
    let options = PgOptions {
        statement_timeout_ms: 2_000,
        auth_timeout_ms: 2_000,
        message_bytes_max: 1 << 16,
        ..PgOptions::default()
    };
    let server = TestServer::start_with(options, AuthMethod::Password).await;
    let client = server.client().await.expect("log in");
    client
        .batch_execute("CREATE TABLE fz (ts TIMESTAMP, v LONG, s VARCHAR) TIMESTAMP(ts)")
        .await
        .expect("create the table");
    let deadline = Instant::now() + budget(8);
    let mut workers = Vec::new();
    for worker in 0..4u64 {
        let addr = server.addr;
        workers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed() ^ worker);
            let mut cases = 0;
            while cases < 400 && Instant::now() < deadline {
                let before_login = rng.random_range(0..4) == 0;
                let mut socket = TcpStream::connect(addr).await.expect("connect");
                if !before_login {
                    log_in(&mut socket).await;
                }
                let data = stream(&mut rng, before_login);
                if socket.write_all(&data).await.is_ok() {
                    // Whatever the answer, it comes promptly or the session waits for more.
                    read_until_closed(&mut socket, Duration::from_millis(100)).await;
                }
                cases += 1;
            }
            cases
        }));
    }
    let mut cases = 0;
    for worker in workers {
        cases += worker.await.expect("fuzz worker");
    }
    eprintln!("live fuzz: {cases} cases");
    assert!(cases >= 20, "only {cases} cases ran");
    assert_eq!(
        server
            .server
            .shared
            .panics
            .load(std::sync::atomic::Ordering::Relaxed),
        0,
        "no connection task panicked"
    );
    server.select_one_within(Duration::from_secs(10)).await;
    client
        .query_one("SELECT 1", &[])
        .await
        .expect("the first session still serves");
}

//! End-to-end: what all queries share, against the real server over the PostgreSQL protocol:
//! memory (`--memory-bytes-max`), where they spill (`<data-dir>/.spill`), and turns on the
//! query threads (`--queries-running-max`).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::*;

/// Rows of the test table: a few hundred thousand, so that a GROUP BY of unique keys holds
/// tens of MB and eight of them more than the bound, in a debug build in seconds.
const ROWS: u64 = 400_000;

/// The server's bound in these tests.
const MEMORY_BYTES_MAX: u64 = 64 << 20;

/// A minimal PostgreSQL client: simple-query protocol, text results.
struct Pg {
    stream: TcpStream,
}

/// A statement's answer: its rows as text, or the error's SQLSTATE and message.
type Answer = Result<Vec<Vec<String>>, (String, String)>;

impl Pg {
    fn connect(port: u16) -> Pg {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut body = Vec::new();
        body.extend_from_slice(&196_608u32.to_be_bytes());
        for s in ["user", "admin", "database", "qdb", ""] {
            body.extend_from_slice(s.as_bytes());
            body.push(0);
        }
        let mut startup = ((body.len() + 4) as u32).to_be_bytes().to_vec();
        startup.extend_from_slice(&body);
        stream.write_all(&startup).unwrap();
        let mut pg = Pg { stream };
        loop {
            let (tag, body) = pg.message();
            match tag {
                b'R' => match u32::from_be_bytes(body[..4].try_into().unwrap()) {
                    0 => {}
                    3 => pg.send(b'p', b"quest\0"),
                    other => panic!("authentication method {other} is not supported here"),
                },
                b'E' => panic!("login failed: {:?}", fields(&body)),
                b'Z' => return pg,
                _ => {}
            }
        }
    }

    fn send(&mut self, tag: u8, body: &[u8]) {
        let mut message = vec![tag];
        message.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        message.extend_from_slice(body);
        self.stream.write_all(&message).unwrap();
    }

    fn message(&mut self) -> (u8, Vec<u8>) {
        let mut head = [0u8; 5];
        self.stream.read_exact(&mut head).unwrap();
        let len = u32::from_be_bytes(head[1..].try_into().unwrap()) as usize;
        let mut body = vec![0u8; len - 4];
        self.stream.read_exact(&mut body).unwrap();
        (head[0], body)
    }

    fn query(&mut self, sql: &str) -> Answer {
        let mut text = sql.as_bytes().to_vec();
        text.push(0);
        self.send(b'Q', &text);
        let mut rows = Vec::new();
        let mut error = None;
        loop {
            let (tag, body) = self.message();
            match tag {
                b'D' => rows.push(data_row(&body)),
                b'E' => {
                    let f = fields(&body);
                    let get = |c: u8| {
                        f.iter()
                            .find(|(k, _)| *k == c)
                            .map(|(_, v)| v.clone())
                            .unwrap_or_default()
                    };
                    error = Some((get(b'C'), get(b'M')));
                }
                b'Z' => return error.map_or(Ok(rows), Err),
                _ => {}
            }
        }
    }

    fn ok(&mut self, sql: &str) -> Vec<Vec<String>> {
        self.query(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"))
    }
}

fn fields(body: &[u8]) -> Vec<(u8, String)> {
    body.split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| (f[0], String::from_utf8_lossy(&f[1..]).into_owned()))
        .collect()
}

fn data_row(body: &[u8]) -> Vec<String> {
    let columns = u16::from_be_bytes([body[0], body[1]]) as usize;
    let mut at = 2;
    let mut row = Vec::with_capacity(columns);
    for _ in 0..columns {
        let len = i32::from_be_bytes(body[at..at + 4].try_into().unwrap());
        at += 4;
        if len < 0 {
            row.push(String::new());
            continue;
        }
        let len = len as usize;
        row.push(String::from_utf8_lossy(&body[at..at + len]).into_owned());
        at += len;
    }
    row
}

fn load_table(pg: &mut Pg) {
    pg.ok(
        "CREATE TABLE big (ts TIMESTAMP, k LONG, i LONG, s VARCHAR) TIMESTAMP(ts) PARTITION BY DAY",
    );
    // In chunks of about 400 KB: an INSERT's rows are held in its memory pool until it
    // commits.
    let chunk = 10_000;
    for first in (1..=ROWS).step_by(chunk) {
        pg.ok(&format!(
            "INSERT INTO big SELECT to_timestamp_micros(value), value, value % 7, \
             'sym-' || CAST(value % 1000 AS VARCHAR) FROM generate_series({first}, {})",
            first + chunk as u64 - 1
        ));
    }
    assert_eq!(pg.ok("SELECT count(*) FROM big"), [[ROWS.to_string()]]);
}

/// Eight concurrent GROUP BYs of unique keys, each within its own 4 GiB limit but together
/// more than the server's 64 MiB: each answers its count or fails with 53200 naming a memory
/// bound; the server stays up, answers afterwards, gives the memory back, and its peak
/// resident memory stays within the bound plus what the process needs besides (a generous
/// margin: a debug build, the page cache of the mapped table, eight connections).
#[test]
fn concurrent_queries_share_the_server_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = serve(
        dir.path(),
        &[
            "--memory-bytes-max",
            &MEMORY_BYTES_MAX.to_string(),
            "--pg-auth-method",
            "password",
        ],
    );
    assert_eq!(
        metric(&server, "sundial_memory_bytes_max"),
        MEMORY_BYTES_MAX
    );
    let mut pg = Pg::connect(server.pg);
    load_table(&mut pg);

    let clients = 8;
    let barrier = Arc::new(Barrier::new(clients));
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let barrier = barrier.clone();
            let port = server.pg;
            std::thread::spawn(move || {
                let mut pg = Pg::connect(port);
                barrier.wait();
                pg.query("SELECT count(*) FROM (SELECT k + i, s, count(*) FROM big GROUP BY 1, 2)")
            })
        })
        .collect();
    for handle in handles {
        match handle.join().unwrap() {
            Ok(rows) => assert_eq!(rows, [[ROWS.to_string()]]),
            Err((code, message)) => {
                assert_eq!(code, "53200", "{message}");
                assert!(message.contains("memory-bytes-max"), "{message}");
            }
        }
    }
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server exited"
    );
    assert_eq!(pg.ok("SELECT count(*) FROM big"), [[ROWS.to_string()]]);
    assert_eq!(metric(&server, "sundial_query_memory_bytes"), 0);
    let (_, peak_kib) = memory_kib(server.child.id());
    let margin_kib = 512 << 10;
    assert!(
        peak_kib < (MEMORY_BYTES_MAX >> 10) + margin_kib,
        "peak resident memory {peak_kib} KiB"
    );
    stop(server);
}

/// A query that needs more than the server's bound alone, in an operator that cannot spill,
/// fails with 53200 and a message naming --memory-bytes-max, though its own limit is larger.
#[test]
fn one_query_past_the_server_memory_fails_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &[
            "--memory-bytes-max",
            "4000000",
            "--pg-auth-method",
            "password",
        ],
    );
    let mut pg = Pg::connect(server.pg);
    load_table(&mut pg);
    let (code, message) = pg
        .query("SELECT count(DISTINCT s || CAST(k AS VARCHAR)) FROM big")
        .expect_err("past the server's memory");
    assert_eq!(code, "53200", "{message}");
    assert!(message.contains("--memory-bytes-max"), "{message}");
    assert_eq!(pg.ok("SELECT count(*) FROM big"), [[ROWS.to_string()]]);
    stop(server);
}

/// Sorts spill into `<data-dir>/.spill`, which the server empties of an earlier process's
/// spill directories at start; the spilled total is bounded by --spill-bytes-max.
#[test]
fn sorts_spill_under_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join(".spill");
    let left = spill.join("datafusion-left-by-a-crash");
    std::fs::create_dir_all(&left).unwrap();
    std::fs::write(left.join("sort.arrow"), b"spilled").unwrap();
    let server = serve(dir.path(), &["--pg-auth-method", "password"]);
    load_table(&mut Pg::connect(server.pg));
    assert!(
        !left.exists(),
        "an earlier process's spill files are removed"
    );
    let spill_dirs: Vec<_> = std::fs::read_dir(&spill)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(spill_dirs.len(), 1, "{spill_dirs:?}");
    assert!(spill_dirs[0].starts_with("datafusion-"), "{spill_dirs:?}");
    stop(server);

    // 24 MB per query (an eighth of it kept for merging): the sort of about 20 MB of rows,
    // each batch taking twice its size while sorted, spills (windows over all rows, so that
    // the sort is not optimized away).
    // One partition (the LIMIT gathers the rows), so that the test does not depend on how
    // partitions race for the limit.
    let sort = "SELECT max(r) + 0 * max(m) FROM (SELECT row_number() OVER (ORDER BY s, k DESC) \
                AS r, max(length(w)) OVER (ORDER BY s, k DESC) AS m \
                FROM (SELECT k, s, repeat(s, 4) AS w FROM big LIMIT 1000000))";
    let with_spill_bytes_max = |bytes: &str| {
        serve(
            dir.path(),
            &[
                "--query-memory-bytes-max",
                "24000000",
                "--spill-bytes-max",
                bytes,
                "--pg-auth-method",
                "password",
            ],
        )
    };
    let server = with_spill_bytes_max("1000000000");
    let mut pg = Pg::connect(server.pg);
    let plan = pg.ok(&format!("EXPLAIN {sort}"));
    let plan = plan.into_iter().flatten().collect::<Vec<_>>().join("\n");
    assert!(
        plan.lines().any(
            |l| l.contains("SortExec: expr=[s@") && l.contains("preserve_partitioning=[false]")
        ),
        "the sort runs in one partition:\n{plan}"
    );
    assert_eq!(pg.ok(sort), [[ROWS.to_string()]]);
    let plan = pg.ok(&format!("EXPLAIN ANALYZE {sort}"));
    let plan = plan.into_iter().flatten().collect::<Vec<_>>().join("\n");
    let sort_spills = plan
        .lines()
        .filter(|line| line.contains("SortExec:"))
        .any(|line| line.contains("spill_count=") && !line.contains("spill_count=0,"));
    assert!(sort_spills, "the sort spilled:\n{plan}");
    stop(server);

    // Past the spill bound, the sort fails and says which flag to raise.
    let server = with_spill_bytes_max("100000");
    let mut pg = Pg::connect(server.pg);
    let (code, message) = pg.query(sort).expect_err("past the spill bound");
    assert!(code.starts_with("53"), "{code}: {message}");
    assert!(message.contains("--spill-bytes-max"), "{message}");
    stop(server);
}

/// Waits until `/metrics` shows `running` heavy queries executing and `waiting` waiting.
fn wait_for_turns(server: &Server, running: u64, waiting: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = (
            metric(server, "sundial_queries_running"),
            metric(server, "sundial_queries_waiting"),
        );
        if now == (running, waiting) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "running and waiting heavy queries: {now:?}, expected {:?}",
            (running, waiting)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// With one heavy query executing at a time, two more wait their turn (as /metrics shows),
/// while statements that read a few rows (SELECT 1, the catalog, a LIMIT over the big table)
/// are answered at once: the heavy queries are still running and waiting after them. The
/// heavy ones end at their statement timeout, the waiting one too, and nothing stays
/// counted.
#[test]
fn light_statements_do_not_wait_behind_heavy_queries() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &["--queries-running-max", "1", "--pg-auth-method", "password"],
    );
    assert_eq!(metric(&server, "sundial_queries_running_max"), 1);
    let mut pg = Pg::connect(server.pg);
    load_table(&mut pg);
    wait_for_turns(&server, 0, 0);

    // A self-join without keys: hours of work, ended by the statement timeout.
    let heavy = "SELECT count(*) FROM big a, big b WHERE a.k + b.k = 0";
    let heavies: Vec<_> = (0..3)
        .map(|_| {
            let port = server.pg;
            std::thread::spawn(move || {
                let mut pg = Pg::connect(port);
                // Long enough for the light statements to run meanwhile, however loaded the
                // machine.
                pg.ok("SET statement_timeout = 60000");
                pg.query(heavy)
            })
        })
        .collect();
    wait_for_turns(&server, 1, 2);

    let mut light = Pg::connect(server.pg);
    assert_eq!(light.ok("SELECT 1"), [["1"]]);
    assert_eq!(
        light.ok("SELECT count(*) FROM pg_catalog.pg_class WHERE relname = 'big'"),
        [["1"]]
    );
    assert_eq!(light.ok("SELECT k FROM big LIMIT 2"), [["1"], ["2"]]);
    // The light statements were not queued: the heavy ones still hold and wait for the turn.
    wait_for_turns(&server, 1, 2);

    for handle in heavies {
        let (code, message) = handle.join().unwrap().expect_err("ended by its timeout");
        assert_eq!(code, "57014", "{message}");
    }
    wait_for_turns(&server, 0, 0);
    assert_eq!(pg.ok("SELECT count(*) FROM big"), [[ROWS.to_string()]]);
    stop(server);
}

//! End-to-end: what rows can do to a table's data and disk, against `sundial serve`. One row
//! stamped in the future (ILP in 2261, an INSERT in 2200) does not expire a TTL table's real
//! partitions; `--timestamp-future-ms-max` refuses such rows; DROP TABLE of a table ILP wrote
//! to frees its directory while the sender stays connected, and its next rows make a new table.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

const HOUR_NS: i64 = 3_600_000_000_000;
/// 2261-01-01T00:00:00Z in nanoseconds.
const YEAR_2261_NS: i64 = 9_183_110_400_000_000_000;

fn now_ns() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_nanos()).unwrap()
}

/// ILP over HTTP: status and body.
fn write(server: &Server, lines: &str) -> (u16, String) {
    http(server.http, "POST", "/write", &[], lines.as_bytes())
}

/// `SELECT count(*) FROM table`.
fn count(server: &Server, table: &str) -> u64 {
    let body = exec_ok(server, &format!("SELECT count(*) FROM {table}"));
    body.split(r#""dataset":[["#)
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {body}"))
}

/// A TTL table with rows from the last hours keeps them through a line stamped 2261 and an
/// INSERT dated 2200: the TTL counts back from the wall clock, not from those rows (each
/// logged at WARN). With `--ttl-wall-clock off` (QuestDB's legacy behaviour) the 2261 row
/// expires the rest, as documented.
#[test]
fn one_future_row_does_not_empty_a_ttl_table() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    exec_ok(
        &server,
        "CREATE TABLE t (ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY HOUR TTL 1 DAY",
    );
    let now = now_ns();
    let recent: String = (1..=4)
        .map(|h| format!("t v={h}i {}\n", now - h * HOUR_NS))
        .collect();
    assert_eq!(write(&server, &recent).0, 204);
    assert_eq!(count(&server, "t"), 4);
    assert_eq!(
        write(&server, &format!("t v=2261i {YEAR_2261_NS}\n")).0,
        204
    );
    exec_ok(
        &server,
        "INSERT INTO t VALUES ('2200-01-01T00:00:00Z', 2200)",
    );
    assert_eq!(count(&server, "t"), 6);
    let body = exec_ok(&server, "SELECT v FROM t WHERE v < 10 ORDER BY v");
    assert!(body.contains(r#""dataset":[[1],[2],[3],[4]]"#), "{body}");
    assert!(wait_for_log(
        &server,
        "is ahead of the wall clock",
        Duration::from_secs(10)
    ));
    let log = stop(server);
    assert!(!log.contains("dropped partition"), "{log}");

    let server = serve(dir.path(), &["--ttl-wall-clock", "off"]);
    // Opening enforces the TTL from the 2261 row: only it is left.
    assert_eq!(count(&server, "t"), 1);
    stop(server);
}

/// `--timestamp-future-ms-max`: an ILP line further ahead of the server's clock is rejected as
/// a bad line (400 naming it; the good lines are stored), an INSERT fails with an error naming
/// the timestamp and the bound; rows within it are taken.
#[test]
fn rows_too_far_in_the_future_are_refused_when_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--timestamp-future-ms-max", "3600000"]);
    let now = now_ns();
    let lines = format!(
        "f v=1i {now}\nf v=2i {YEAR_2261_NS}\nf v=3i {}\n",
        now + HOUR_NS / 2
    );
    let (status, body) = write(&server, &lines);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("line 2"), "{body}");
    assert!(body.contains("2261-01-01T00:00:00Z"), "{body}");
    assert!(body.contains("3600000 ms"), "{body}");
    assert_eq!(count(&server, "f"), 2);
    let (status, body) = exec(
        &server,
        "INSERT INTO f (timestamp, v) VALUES ('2200-01-01', 4)",
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("2200-01-01T00:00:00Z"), "{body}");
    assert!(body.contains("timestamp_future_ms_max"), "{body}");
    assert_eq!(count(&server, "f"), 2);
    stop(server);
}

/// The directories of the tables in the data directory `dir` named `table`.
fn table_dirs(dir: &Path, table: &str) -> Vec<String> {
    let prefix = format!("{table}~");
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&prefix))
        .collect();
    found.sort();
    found
}

/// DROP TABLE of a table rows came to over ILP/TCP frees its directory though the sender stays
/// connected (and idle); the sender's next rows for the name create a new table.
#[test]
fn drop_table_frees_the_disk_of_a_table_ilp_wrote_to() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    let mut sender = TcpStream::connect(("127.0.0.1", server.tcp)).unwrap();
    let lines: String = (0..1000)
        .map(|i| format!("d,k=a v={i}i {}\n", 1_000_000_000 + i))
        .collect();
    sender.write_all(lines.as_bytes()).unwrap();
    sender.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while count_or_zero(&server, "d") < 1000 {
        assert!(Instant::now() < deadline, "rows never became visible");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = table_dirs(dir.path(), "d");
    assert_eq!(before.len(), 1, "{before:?}");
    exec_ok(&server, "DROP TABLE d");
    // The connection is idle and open: its receiver lets go on its next tick.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !table_dirs(dir.path(), "d").is_empty() {
        assert!(
            Instant::now() < deadline,
            "{:?} still on disk",
            table_dirs(dir.path(), "d")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The same connection's next rows make a new table.
    sender.write_all(b"d,k=b v=7i 2000000000\n").unwrap();
    sender.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while count_or_zero(&server, "d") < 1 {
        assert!(Instant::now() < deadline, "the new table never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(count(&server, "d"), 1);
    let after = table_dirs(dir.path(), "d");
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, before);
    drop(sender);
    stop(server);
}

/// `SELECT count(*) FROM table`, 0 while the table does not exist.
fn count_or_zero(server: &Server, table: &str) -> u64 {
    let (status, body) = exec(server, &format!("SELECT count(*) FROM {table}"));
    if status != 200 {
        return 0;
    }
    body.split(r#""dataset":[["#)
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

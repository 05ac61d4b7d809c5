//! End-to-end: materialized views refreshed IMMEDIATE by `sundial serve` while ILP rows arrive
//! (in order and out of order), and after `kill -9` at random moments: whenever the view's
//! watermark has caught up with the base table, the view answers what its query over the base
//! table answers.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

const MINUTE_NS: i64 = 60_000_000_000;
/// 2024-01-01T00:00:00Z.
const BASE_NS: i64 = 1_704_067_200_000_000_000;

/// What the view's query answers over the base table, and what the view holds.
const VIEWS: [(&str, &str); 2] = [
    (
        "cpu_1m",
        "SELECT ts, host, avg(usage) AS avg_usage, max(usage) AS max_usage, count() AS n FROM cpu SAMPLE BY 1m",
    ),
    (
        "cpu_1h",
        "SELECT ts, host, min(usage) AS min_usage, sum(usage) AS sum_usage FROM cpu SAMPLE BY 1h",
    ),
];

/// Waits until the rows sent are all committed (the row count holds still), then until every
/// view's watermark is the base table's last commit, and then compares.
fn assert_views_follow(server: &Server, context: &str) {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let count = dataset(&exec_ok(server, "SELECT count(*) FROM cpu"));
        if count == last {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{context}: rows kept arriving"
        );
        last = count;
        std::thread::sleep(Duration::from_millis(300));
    }
    loop {
        let body = exec_ok(
            server,
            "SELECT count(*) FROM materialized_views() WHERE view_status = 'valid' AND refresh_base_table_txn = base_table_txn",
        );
        if dataset(&body) == "\"dataset\":[[2]]" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{context}: the views did not catch up: {}",
            exec_ok(server, "SELECT * FROM materialized_views()")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for (view, query) in VIEWS {
        let want = dataset(&exec_ok(server, &format!("{query} ORDER BY ts, host")));
        let got = dataset(&exec_ok(
            server,
            &format!("SELECT * FROM {view} ORDER BY ts, host"),
        ));
        assert_eq!(got, want, "{context}: {view}");
        assert!(got.len() > 100, "{context}: {view} has rows: {got}");
    }
}

/// ILP lines for `n` rows of a few hosts from minute `from`, some a few minutes back.
fn lines(seed: &mut u64, from: i64, n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let back = if seed.is_multiple_of(10) {
            (*seed % 30) as i64
        } else {
            0
        };
        let ts = BASE_NS
            + (from + i as i64 / 4 - back) * MINUTE_NS
            + (*seed % 59_000) as i64 * 1_000_000;
        out.push_str(&format!(
            "cpu,host=h{} usage={} {ts}\n",
            *seed % 5,
            (*seed % 1000) as f64 / 10.0
        ));
    }
    out
}

#[test]
fn immediate_views_follow_ilp_rows_and_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = serve(&data, &["--ilp-commit-interval-ms", "20"]);
    exec_ok(
        &server,
        "CREATE TABLE cpu (ts TIMESTAMP, host SYMBOL, usage DOUBLE) TIMESTAMP(ts) PARTITION BY HOUR",
    );
    for (view, query) in VIEWS {
        exec_ok(
            &server,
            &format!("CREATE MATERIALIZED VIEW {view} REFRESH IMMEDIATE AS ({query})"),
        );
    }
    // The statement as QuestDB's SHOW CREATE prints it, every setting written out.
    let shown = exec_ok(&server, "SHOW CREATE MATERIALIZED VIEW cpu_1h");
    let want = format!(
        "CREATE MATERIALIZED VIEW 'cpu_1h' WITH BASE 'cpu' REFRESH IMMEDIATE AS (\\n{}\\n) PARTITION BY MONTH;",
        VIEWS[1].1
    );
    assert!(shown.contains(&want), "{shown}");
    // ALTER rewrites the statement SHOW CREATE shows.
    exec_ok(&server, "ALTER MATERIALIZED VIEW cpu_1h SET TTL 52 WEEKS");
    let shown = exec_ok(&server, "SHOW CREATE MATERIALIZED VIEW cpu_1h");
    assert!(
        shown.contains(") PARTITION BY MONTH TTL 52 WEEK"),
        "{shown}"
    );
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut minute = 0i64;
    for round in 0..4 {
        // Rows while the views refresh.
        let mut ilp = TcpStream::connect(("127.0.0.1", server.tcp)).unwrap();
        for _ in 0..20 {
            ilp.write_all(lines(&mut seed, minute, 200).as_bytes())
                .unwrap();
            minute += 50;
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(ilp);
        assert_views_follow(&server, &format!("round {round}"));
        // kill -9 while rows arrive and the views refresh.
        let mut ilp = TcpStream::connect(("127.0.0.1", server.tcp)).unwrap();
        for _ in 0..(5 + round * 3) {
            let _ = ilp.write_all(lines(&mut seed, minute, 200).as_bytes());
            minute += 50;
            std::thread::sleep(Duration::from_millis(7));
        }
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        server = serve(&data, &["--ilp-commit-interval-ms", "20"]);
        // After the restart the views catch up with whatever the base table kept.
        assert_views_follow(&server, &format!("after kill -9 in round {round}"));
    }
    // A full refresh gives the same rows.
    let rows = |server: &Server| -> Vec<String> {
        VIEWS
            .iter()
            .map(|(v, _)| {
                dataset(&exec_ok(
                    server,
                    &format!("SELECT * FROM {v} ORDER BY ts, host"),
                ))
            })
            .collect()
    };
    let before = rows(&server);
    exec_ok(&server, "REFRESH MATERIALIZED VIEW cpu_1m FULL");
    exec_ok(&server, "REFRESH MATERIALIZED VIEW cpu_1h FULL");
    assert_eq!(before, rows(&server));
    stop(server);
}

//! End-to-end: a last-value cache in `sundial serve` while ILP rows arrive (in order and out of
//! order) and across `kill -9`: the definition survives, the cache is rebuilt, and `LATEST ON`
//! and `SELECT DISTINCT` answer from it what the same questions asked without it answer, with
//! the lookups and the cache's size in /metrics.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

/// 2024-01-01T00:00:00Z.
const BASE_NS: i64 = 1_704_067_200_000_000_000;
const SECOND_NS: i64 = 1_000_000_000;

/// Questions with the cache and the same without it (no cache answers the second).
const PAIRS: [(&str, &str); 2] = [
    (
        "SELECT ts, host, usage, state FROM cpu LATEST ON ts PARTITION BY host ORDER BY host",
        "SELECT ts, host, usage, state FROM (SELECT *, row_number() OVER (PARTITION BY host \
         ORDER BY ts DESC) AS rn FROM cpu) WHERE rn = 1 ORDER BY host",
    ),
    (
        "SELECT DISTINCT host FROM cpu ORDER BY host",
        "SELECT host FROM cpu WHERE usage IS NULL OR usage IS NOT NULL GROUP BY host ORDER BY host",
    ),
];

/// ILP lines for `n` rows of a few hosts from second `from` (unique timestamps), one in ten a
/// few minutes back.
fn lines(seed: &mut u64, from: i64, n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let back = if seed.is_multiple_of(10) {
            (*seed % 300) as i64
        } else {
            0
        };
        let ts = BASE_NS + (from + i as i64 - back) * SECOND_NS + i as i64;
        let state = if seed.is_multiple_of(3) {
            String::new()
        } else {
            format!(",state=s{}", *seed % 4)
        };
        out.push_str(&format!(
            "cpu,host=h{}{state} usage={} {ts}\n",
            *seed % 7,
            (*seed % 1000) as f64 / 10.0
        ));
    }
    out
}

/// Waits until the rows sent are committed (the count holds still), then compares.
fn assert_cache_answers(server: &Server, context: &str) {
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
    for (cached, plain) in PAIRS {
        let (got, want) = (
            dataset(&exec_ok(server, cached)),
            dataset(&exec_ok(server, plain)),
        );
        assert_eq!(got, want, "{context}: {cached}");
        assert!(got.contains("h6"), "{context}: {got}");
    }
}

#[test]
fn a_cache_follows_ilp_rows_and_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = ["--ilp-commit-interval-ms", "20"];
    let mut server = serve(&data, &args);
    exec_ok(
        &server,
        "CREATE TABLE cpu (ts TIMESTAMP, host SYMBOL, state SYMBOL, usage DOUBLE) TIMESTAMP(ts) \
         PARTITION BY HOUR",
    );
    exec_ok(&server, "CREATE LAST VALUE CACHE by_host ON cpu (host)");
    let plan = exec_ok(&server, &format!("EXPLAIN {}", PAIRS[0].0));
    assert!(plan.contains("last_value_cache=by_host"), "{plan}");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut second = 0i64;
    for round in 0..3 {
        let mut ilp = TcpStream::connect(("127.0.0.1", server.tcp)).unwrap();
        for _ in 0..20 {
            ilp.write_all(lines(&mut seed, second, 300).as_bytes())
                .unwrap();
            second += 400;
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(ilp);
        assert_cache_answers(&server, &format!("round {round}"));
        // kill -9 while rows arrive and the cache keeps up.
        let mut ilp = TcpStream::connect(("127.0.0.1", server.tcp)).unwrap();
        for _ in 0..(5 + round * 3) {
            let _ = ilp.write_all(lines(&mut seed, second, 300).as_bytes());
            second += 400;
            std::thread::sleep(Duration::from_millis(7));
        }
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        server = serve(&data, &args);
        // The definition survived; the rows are rebuilt from the table.
        assert_cache_answers(&server, &format!("after kill -9 in round {round}"));
        let listing = exec_ok(
            &server,
            "SELECT cache_name, status, keys FROM last_value_caches()",
        );
        assert!(listing.contains("[\"by_host\",\"ready\",7]"), "{listing}");
    }
    assert!(
        metric(
            &server,
            "sundial_last_value_cache_lookups_total{outcome=\"hit\"}"
        ) > 0
    );
    assert_eq!(
        metric(
            &server,
            "sundial_last_value_cache_lookups_total{outcome=\"miss\"}"
        ),
        0
    );
    assert_eq!(metric(&server, "sundial_last_value_cache_keys"), 7);
    assert!(metric(&server, "sundial_last_value_cache_bytes") > 0);
    exec_ok(&server, "DROP LAST VALUE CACHE by_host ON cpu");
    let plan = exec_ok(&server, &format!("EXPLAIN {}", PAIRS[0].0));
    assert!(!plan.contains("last_value_cache"), "{plan}");
    stop(server);
}

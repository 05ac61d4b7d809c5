//! End-to-end: SQL over HTTP as QuestDB's REST API has it: `/exec` (JSON), `/exp` (CSV export),
//! `/imp` (CSV upload), with Statement-Timeout, gzip and CORS, against `sundial serve`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

const LONG_QUERY: &str =
    "SELECT count(*) FROM generate_series(1, 20000000000) AS g(x) WHERE x % 7 = 3";

fn exec(server: &Server, query: &str, extra: &str) -> Reply {
    request(
        server.http,
        "GET",
        &format!("/exec?query={}{extra}", encode(query)),
        &[],
        b"",
    )
}

fn exec_ok(server: &Server, query: &str) -> String {
    let reply = exec(server, query, "");
    let text = reply.text();
    assert_eq!(reply.status, 200, "{query}: {text}");
    text
}

/// CPU time (user + system) the process used so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn exec_answers_like_questdb() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        &["--http-allowed-origins", "http://console.example"],
    );
    assert_eq!(
        exec_ok(
            &server,
            "CREATE TABLE trades (sym SYMBOL, ts TIMESTAMP, price DOUBLE, qty LONG) \
             TIMESTAMP(ts) PARTITION BY DAY"
        ),
        r#"{"ddl":"OK"}"#
    );
    assert_eq!(
        exec_ok(
            &server,
            "INSERT INTO trades VALUES ('a', '2016-01-01T00:00:00Z', 1.5, 10), \
             ('b', '2016-01-01T00:00:01Z', 2.0, NULL), ('a', '2016-01-02T00:00:00Z', 3.25, 30)"
        ),
        r#"{"dml":"OK"}"#
    );

    // The designated timestamp's index, timings and explain.
    let reply = exec(
        &server,
        "SELECT sym, ts, price, qty FROM trades ORDER BY ts",
        "&timings=true&explain=true",
    );
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    let body = reply.text();
    assert!(
        body.starts_with(
            r#"{"query":"SELECT sym, ts, price, qty FROM trades ORDER BY ts","columns":[{"name":"sym","type":"SYMBOL"},{"name":"ts","type":"TIMESTAMP"},{"name":"price","type":"DOUBLE"},{"name":"qty","type":"LONG"}],"timestamp":1,"dataset":[["a","2016-01-01T00:00:00.000000Z",1.5,10],["b","2016-01-01T00:00:01.000000Z",2.0,null],["a","2016-01-02T00:00:00.000000Z",3.25,30]],"count":3,"timings":{"authentication":0,"compiler":"#
        ),
        "{body}"
    );
    assert!(body.contains(r#","execute":"#) && body.contains(r#","count":"#));
    assert!(
        body.ends_with(r#"},"explain":{"jitCompiled":false}}"#),
        "{body}"
    );
    assert!(exec_ok(&server, "SELECT * FROM trades").contains(r#""timestamp":1,"#));
    for no_index in [
        "SELECT sym, count(*) FROM trades GROUP BY sym",
        "SELECT ts, sym FROM trades ORDER BY sym",
        "SELECT 1 AS x",
    ] {
        assert!(
            exec_ok(&server, no_index).contains(r#""timestamp":-1,"#),
            "{no_index}"
        );
    }

    // limit m,n is rows m..=n counting from 1; count is QuestDB's (the last row's position, or
    // with count=true every row).
    let ordered = "SELECT qty FROM trades ORDER BY ts";
    let body = exec(&server, ordered, "&limit=2,3").text();
    assert!(
        body.ends_with(r#""dataset":[[null],[30]],"count":3}"#),
        "{body}"
    );
    let body = exec(&server, ordered, "&limit=1&count=true").text();
    assert!(body.ends_with(r#""dataset":[[10]],"count":3}"#), "{body}");
    let body = exec(&server, ordered, "&limit=1&nm=true").text();
    assert_eq!(body, r#"{"dataset":[[10]],"count":1}"#);

    // Errors: 400 with the position.
    let reply = exec(&server, "SELECT nope FROM trades", "");
    assert_eq!(reply.status, 400);
    assert!(
        reply.text().contains(r#""position":7}"#),
        "{}",
        reply.text()
    );
    let reply = request(server.http, "GET", "/exec", &[], b"");
    assert_eq!(reply.status, 400);
    assert!(reply.text().contains("No query text"));

    // gzip when asked for, for answers worth compressing, and CORS for browser consoles.
    let reply = request(
        server.http,
        "GET",
        &format!("/exec?query={}", encode("SELECT * FROM trades ORDER BY ts")),
        &[
            ("Accept-Encoding", "gzip"),
            ("Origin", "http://console.example"),
        ],
        b"",
    );
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-encoding"), None, "a small answer");
    assert_eq!(
        reply.header("content-length"),
        Some(reply.body.len().to_string().as_str())
    );
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("http://console.example")
    );
    assert!(reply.text().contains(r#""count":3}"#), "{}", reply.text());
    let large = format!(
        "/exec?query={}",
        encode("SELECT value FROM generate_series(1, 200000)")
    );
    let reply = request(
        server.http,
        "GET",
        &large,
        &[("Accept-Encoding", "gzip")],
        b"",
    );
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-encoding"),
        None,
        "by default only clients on other hosts get gzip"
    );
    assert!(reply.text().contains(r#""count":200000}"#));
    let always_dir = tempfile::tempdir().unwrap();
    let always = serve(always_dir.path(), &["--http-gzip", "always"]);
    let reply = request(
        always.http,
        "GET",
        &large,
        &[("Accept-Encoding", "gzip")],
        b"",
    );
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-encoding"), Some("gzip"));
    assert!(reply.text().contains(r#""count":200000}"#));
    stop(always);
    let reply = request(
        server.http,
        "OPTIONS",
        "/exec?query=x",
        &[
            ("Origin", "http://console.example"),
            ("Access-Control-Request-Method", "GET"),
            ("Access-Control-Request-Headers", "statement-timeout"),
        ],
        b"",
    );
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("http://console.example")
    );
    assert!(
        reply
            .header("access-control-allow-methods")
            .is_some_and(|m| m.contains("GET") && m.contains("POST")),
        "{:?}",
        reply.headers
    );
    stop(server);
}

#[test]
fn statement_timeout_and_disconnects_stop_queries() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    // The header stops the query; the answer is a 400 naming the timeout.
    for endpoint in ["exec", "exp"] {
        let started = Instant::now();
        let reply = request(
            server.http,
            "GET",
            &format!("/{endpoint}?query={}", encode(LONG_QUERY)),
            &[("Statement-Timeout", "300")],
            b"",
        );
        let text = reply.text();
        assert_eq!(reply.status, 400, "{text}");
        assert!(
            text.contains("timeout") && text.contains("300 ms"),
            "{text}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    // A client that goes away mid-query stops it.
    let mut socket = TcpStream::connect(("127.0.0.1", server.http)).unwrap();
    write!(
        socket,
        "GET /exec?query={} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        encode(LONG_QUERY)
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    drop(socket);
    assert!(
        wait_for_log(
            &server,
            "HTTP query stopped before its answer was complete",
            Duration::from_secs(10)
        ),
        "the query was not stopped"
    );
    // ...and does not keep burning CPU.
    std::thread::sleep(Duration::from_millis(300));
    let pid = server.child.id();
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(pid) - before;
    assert!(
        used < 50,
        "the server used {used} ticks in the second after the abort"
    );
    assert!(exec_ok(&server, "SELECT 41 + 1 AS x").contains("[[42]]"));
    stop(server);

    // The server's default applies when the request has no header.
    let server = serve(dir.path(), &["--statement-timeout-ms", "300"]);
    let reply = exec(&server, LONG_QUERY, "");
    assert_eq!(reply.status, 400);
    assert!(reply.text().contains("timeout"), "{}", reply.text());
    let reply = request(
        server.http,
        "GET",
        &format!("/exec?query={}", encode("SELECT 1 AS x")),
        &[("Statement-Timeout", "soon")],
        b"",
    );
    assert_eq!(reply.status, 400);
    stop(server);
}

#[test]
fn exp_streams_csv() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    exec_ok(
        &server,
        "CREATE TABLE notes (ts TIMESTAMP, sym SYMBOL, v DOUBLE, ok BOOLEAN, note VARCHAR) TIMESTAMP(ts)",
    );
    exec_ok(
        &server,
        "INSERT INTO notes VALUES ('2016-01-01T00:00:00Z', 'a', 1.5, true, 'say \"hi\", ok'), \
         ('2016-01-01T00:00:01.5Z', NULL, NULL, NULL, NULL), ('2016-01-02T00:00:00Z', 'c', -2.0, false, 'line\nbreak')",
    );
    let reply = request(
        server.http,
        "GET",
        &format!("/exp?query={}", encode("SELECT * FROM notes ORDER BY ts")),
        &[],
        b"",
    );
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/csv; charset=utf-8")
    );
    let disposition = reply.header("content-disposition").unwrap();
    assert!(
        disposition.starts_with("attachment; filename=\"questdb-query-")
            && disposition.ends_with(".csv\""),
        "{disposition}"
    );
    assert_eq!(
        reply.text(),
        "\"ts\",\"sym\",\"v\",\"ok\",\"note\"\r\n\
         \"2016-01-01T00:00:00.000000Z\",\"a\",1.5,true,\"say \"\"hi\"\", ok\"\r\n\
         \"2016-01-01T00:00:01.500000Z\",,,,\r\n\
         \"2016-01-02T00:00:00.000000Z\",\"c\",-2.0,false,\"line\nbreak\"\r\n"
    );
    // limit m,n skips m rows (counting from 0 on /exp); nm drops the header; filename.
    let reply = request(
        server.http,
        "GET",
        &format!(
            "/exp?query={}&limit=1,2&nm=true&filename=mine",
            encode("SELECT sym FROM notes ORDER BY ts")
        ),
        &[],
        b"",
    );
    assert_eq!(reply.text(), "\r\n");
    assert_eq!(
        reply.header("content-disposition"),
        Some("attachment; filename=\"mine.csv\"")
    );
    // Only queries: a DDL statement is refused without running.
    let reply = request(
        server.http,
        "GET",
        &format!("/exp?query={}", encode("CREATE TABLE t2 (x LONG)")),
        &[],
        b"",
    );
    assert_eq!(reply.status, 400);
    assert!(
        reply.text().contains("only accepts SELECT"),
        "{}",
        reply.text()
    );
    assert_eq!(exec(&server, "SELECT * FROM t2", "").status, 400);

    // A large export streams: the server's memory stays flat while ~250 MB go out.
    let pid = server.child.id();
    let (rss_before, _) = memory_kib(pid);
    let pad = "x".repeat(100);
    let query = format!("SELECT x, '{pad}' AS pad FROM generate_series(1, 2000000) AS g(x)");
    let mut socket = TcpStream::connect(("127.0.0.1", server.http)).unwrap();
    write!(
        socket,
        "GET /exp?query={} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        encode(&query)
    )
    .unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let (mut total, mut newlines, mut peak_rss) = (0usize, 0usize, 0u64);
    loop {
        let n = socket.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n;
        newlines += buf[..n].iter().filter(|b| **b == b'\n').count();
        if newlines % 100 == 0 {
            peak_rss = peak_rss.max(memory_kib(pid).0);
        }
    }
    // Header row, 2M rows (chunk-size lines of the chunked encoding add more newlines).
    assert!(newlines > 2_000_000, "{newlines} lines");
    assert!(total > 200_000_000, "{total} bytes");
    let grew_mib = peak_rss.saturating_sub(rss_before) / 1024;
    assert!(
        grew_mib < 100,
        "the server grew by {grew_mib} MiB during the export"
    );
    stop(server);
}

fn imp(server: &Server, params: &str, parts: &[(&str, Option<&str>, &[u8])]) -> Reply {
    let (content_type, body) = multipart(parts);
    request(
        server.http,
        "POST",
        &format!("/imp?{params}"),
        &[("Content-Type", &content_type)],
        &body,
    )
}

#[test]
fn imp_loads_csv_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &["--http-import-bytes-max", "20000000"]);
    let weather = b"ts,visMiles,tempF,station\n\
        2010-01-01T00:00:00.000000Z,8.8,34,a\n\
        2010-01-01T00:51:00.000000Z,9.1,35,a\n\
        2010-01-02T01:36:00.000000Z,8.0,,b\n";

    // Without a schema: the table is named after the file; QuestDB's text table answers.
    let reply = imp(&server, "", &[("data", Some("weather.csv"), weather)]);
    let text = reply.text();
    assert_eq!(reply.status, 200, "{text}");
    assert!(text.contains("|      Location:  |"), "{text}");
    assert!(text.contains("weather.csv  |"), "{text}");
    assert!(
        text.contains("|  Rows imported  |                                                 3  |"),
        "{text}"
    );
    assert!(text.contains("TIMESTAMP  |"), "{text}");
    assert!(exec_ok(&server, "SELECT count(*) AS n FROM \"weather.csv\"").contains("[[3]]"));

    // fmt=json, a designated timestamp and partitioning.
    let reply = imp(
        &server,
        "name=weather&timestamp=ts&partitionBy=DAY&fmt=json",
        &[("data", Some("weather.csv"), weather)],
    );
    assert_eq!(
        reply.text(),
        r#"{"status":"OK","location":"weather","rowsRejected":0,"rowsImported":3,"header":true,"partitionBy":"DAY","timestamp":"ts","columns":[{"name":"ts","type":"TIMESTAMP","size":8,"errors":0},{"name":"visMiles","type":"DOUBLE","size":8,"errors":0},{"name":"tempF","type":"LONG","size":8,"errors":0},{"name":"station","type":"VARCHAR","size":-1,"errors":0}],"errorsTotal":0,"errors":[],"warnings":[]}"#
    );
    assert!(exec_ok(&server, "SHOW PARTITIONS FROM weather").contains(r#""count":2}"#));
    // Without partitionBy, a new table with a timestamp is partitioned by day, as `sundial
    // import` does; without a timestamp, not at all.
    let reply = imp(
        &server,
        "name=weather_day&timestamp=ts&fmt=json",
        &[("data", Some("weather.csv"), weather)],
    );
    assert!(
        reply.text().contains(r#""partitionBy":"DAY""#),
        "{}",
        reply.text()
    );
    assert!(exec_ok(&server, "SHOW PARTITIONS FROM weather_day").contains(r#""count":2}"#));
    let reply = imp(
        &server,
        "name=weather_none&fmt=json",
        &[("data", Some("weather.csv"), weather)],
    );
    assert!(
        reply.text().contains(r#""partitionBy":"NONE""#),
        "{}",
        reply.text()
    );
    assert!(exec_ok(&server, "SELECT * FROM weather").contains(r#""timestamp":0,"#));
    // Appending to the existing table parses by the table's types.
    let reply = imp(
        &server,
        "name=weather&fmt=json",
        &[(
            "data",
            Some("more.csv"),
            b"ts,visMiles,tempF,station\n2010-01-03T00:00:00Z,7,36,c\n",
        )],
    );
    assert!(
        reply.text().contains(r#""rowsImported":1"#),
        "{}",
        reply.text()
    );
    assert!(exec_ok(&server, "SELECT count(*) FROM weather").contains("[[4]]"));

    // A schema part: a timestamp pattern and declared types; partitionBy needs timestamp.
    let schema = br#"[{"name":"when","type":"TIMESTAMP","pattern":"dd/MM/yyyy HH:mm"},{"name":"n","type":"INT"},{"name":"label","type":"VARCHAR"}]"#;
    let data = b"when,n,label\n31/12/2016 23:59,1,x\n01/01/2017 00:00,2,y\n";
    let reply = imp(
        &server,
        "name=odd&timestamp=when&partitionBy=YEAR&fmt=json",
        &[("schema", None, schema), ("data", Some("odd.csv"), data)],
    );
    let text = reply.text();
    assert_eq!(reply.status, 200, "{text}");
    assert!(
        text.contains(r#"{"name":"n","type":"INT","size":4,"errors":0}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"name":"label","type":"VARCHAR","size":-1,"errors":0}"#),
        "{text}"
    );
    assert!(
        exec_ok(&server, "SELECT \"when\", n FROM odd ORDER BY \"when\"").contains(
            r#""dataset":[["2016-12-31T23:59:00.000000Z",1],["2017-01-01T00:00:00.000000Z",2]]"#
        )
    );
    let reply = imp(
        &server,
        "name=x&partitionBy=DAY",
        &[("data", Some("x.csv"), data)],
    );
    assert_eq!(reply.status, 400);
    assert!(reply.text().contains("you must also specify timestamp"));

    // overwrite replaces the table, structure included.
    let reply = imp(
        &server,
        "name=odd&overwrite=true&fmt=json",
        &[("data", Some("new.csv"), b"a,b\n1,true\n2,false\n")],
    );
    assert!(
        reply.text().contains(r#""rowsImported":2"#),
        "{}",
        reply.text()
    );
    assert!(
        exec_ok(&server, "SELECT * FROM odd")
            .contains(r#""columns":[{"name":"a","type":"LONG"},{"name":"b","type":"BOOLEAN"}]"#)
    );

    // Bad values: skipCol (default) nulls them, skipRow drops the row, abort imports nothing.
    let bad = b"k,v\n1,10\n2,oops\n3,30\n";
    let reply = imp(&server, "name=sc&fmt=json", &[("data", Some("b.csv"), bad)]);
    let text = reply.text();
    assert!(
        text.contains(r#""rowsRejected":0,"rowsImported":3"#),
        "{text}"
    );
    let reply = imp(
        &server,
        "name=sr&fmt=json&atomicity=skipRow",
        &[
            (
                "schema",
                None,
                br#"[{"name":"v","type":"LONG"}]"#.as_slice(),
            ),
            ("data", Some("b.csv"), bad),
        ],
    );
    let text = reply.text();
    assert!(
        text.contains(r#""rowsRejected":1,"rowsImported":2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"name":"v","type":"LONG","size":8,"errors":1}"#),
        "{text}"
    );
    exec_ok(&server, "CREATE TABLE ab (k LONG, v LONG)");
    let reply = imp(
        &server,
        "name=ab&fmt=json&atomicity=abort",
        &[("data", Some("b.csv"), bad)],
    );
    let text = reply.text();
    assert_eq!(reply.status, 400, "{text}");
    assert!(
        text.starts_with(r#"{"status":"line 3, column 'v'"#),
        "{text}"
    );
    assert!(exec_ok(&server, "SELECT count(*) FROM ab").contains("[[0]]"));

    // No header line: detected, columns named f0, f1, ...; forceHeader takes the first line.
    let reply = imp(
        &server,
        "name=nh&fmt=json",
        &[("data", Some("nh.csv"), b"1,2.5\n2,3.5\n")],
    );
    assert!(
        reply.text().contains(r#""header":false"#),
        "{}",
        reply.text()
    );
    assert!(exec_ok(&server, "SELECT f0, f1 FROM nh").contains("[[1,2.5],[2,3.5]]"));
    let reply = imp(
        &server,
        "name=fh&fmt=json&forceHeader=true&delimiter=%7C",
        &[("data", Some("fh.csv"), b"1|2\n3|4\n")],
    );
    assert!(
        reply.text().contains(r#""header":true"#),
        "{}",
        reply.text()
    );
    assert!(exec_ok(&server, "SELECT \"1\", \"2\" FROM fh").contains("[[3,4]]"));

    // A bigger file streams through in many chunks and batches.
    let mut big = b"id,ts,name\n".to_vec();
    for i in 0..200_000 {
        big.extend_from_slice(
            format!("{i},2020-01-01T00:00:{:02}Z,name{}\n", i % 60, i % 7).as_bytes(),
        );
    }
    let reply = imp(
        &server,
        "name=big&fmt=json",
        &[("data", Some("big.csv"), &big)],
    );
    assert!(
        reply.text().contains(r#""rowsImported":200000"#),
        "{}",
        reply.text()
    );
    assert!(
        exec_ok(&server, "SELECT count(*), sum(id) FROM big").contains("[[200000,19999900000]]")
    );

    // Past --http-import-bytes-max: 413 before the body is read.
    let mut socket = TcpStream::connect(("127.0.0.1", server.http)).unwrap();
    write!(
        socket,
        "POST /imp?name=huge HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 30000000\r\n\
         Expect: 100-continue\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    socket.read_to_end(&mut raw).unwrap();
    let reply = parse_reply(&raw);
    assert_eq!(reply.status, 413, "{}", reply.text());
    assert_eq!(exec(&server, "SELECT * FROM huge", "").status, 400);
    stop(server);
}

#[test]
fn imp_reports_refused_rows_with_lines_and_header_detection() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[]);
    // 100 rows; line 31 has a bad number, line 61 a bad timestamp, line 81 a fourth field.
    let mut data = b"ts,v\n".to_vec();
    for i in 1..=100 {
        let line = i + 1;
        let ts = if line == 61 {
            "abc".to_string()
        } else {
            format!("2016-01-01T00:{:02}:{:02}Z", i / 60, i % 60)
        };
        let v = if line == 31 {
            "oops".to_string()
        } else {
            i.to_string()
        };
        let extra = if line == 81 { ",x" } else { "" };
        data.extend_from_slice(format!("{ts},{v}{extra}\n").as_bytes());
    }

    // skipCol (the default): the bad number is NULL, the bad timestamp costs its row (a
    // designated timestamp cannot be NULL); one bad number does not make the column text.
    let reply = imp(
        &server,
        "name=sc&timestamp=ts&fmt=json",
        &[("data", Some("d.csv"), &data)],
    );
    let text = reply.text();
    assert_eq!(reply.status, 200, "{text}");
    assert!(
        text.contains(r#""rowsRejected":2,"rowsImported":98"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"name":"v","type":"LONG","size":8,"errors":1}"#),
        "{text}"
    );
    assert!(
        text.ends_with(
            r#""errorsTotal":3,"errors":[{"line":31,"column":"v","action":"valueNulled","reason":"column 'v': cannot parse 'oops' as LONG"},{"line":61,"column":"ts","action":"rowSkipped","reason":"column 'ts': cannot parse 'abc' as TIMESTAMP"},{"line":81,"column":null,"action":"rowSkipped","reason":"expected 2 fields, found 3"}],"warnings":[]}"#
        ),
        "{text}"
    );
    // skipRow (also QuestDB's `1`), at most maxErrors listed, in the text answer too.
    let reply = imp(
        &server,
        "name=sr&timestamp=ts&atomicity=1&maxErrors=2",
        &[("data", Some("d.csv"), &data)],
    );
    let text = reply.text();
    assert_eq!(reply.status, 200, "{text}");
    assert!(
        text.ends_with(
            "Rejected rows and values: 3 (first 2 shown)\r\n\
             line 31: column 'v': cannot parse 'oops' as LONG\r\n\
             line 61: column 'ts': cannot parse 'abc' as TIMESTAMP\r\n"
        ),
        "{text}"
    );
    assert!(exec_ok(&server, "SELECT count(*) FROM sr").contains("[[97]]"));
    // abort: the first bad line, by line, column and value; nothing imported.
    let reply = imp(
        &server,
        "name=ab&timestamp=ts&atomicity=abort&fmt=json",
        &[("data", Some("d.csv"), &data)],
    );
    assert_eq!(reply.status, 400, "{}", reply.text());
    assert_eq!(
        reply.text(),
        r#"{"status":"line 31, column 'v': cannot parse 'oops' as LONG"}"#
    );
    assert!(exec_ok(&server, "SELECT count(*) FROM ab").contains("[[0]]"));
    let reply = imp(
        &server,
        "name=x&atomicity=7",
        &[("data", Some("d.csv"), &data)],
    );
    assert_eq!(reply.status, 400);
    assert!(
        reply.text().contains("invalid atomicity '7'"),
        "{}",
        reply.text()
    );

    // Genuinely mixed values: text, with a warning that says why.
    let reply = imp(
        &server,
        "name=mixed&fmt=json",
        &[("data", Some("m.csv"), b"k,v\n1,1\n2,x\n3,3\n4,4\n")],
    );
    let text = reply.text();
    assert!(
        text.ends_with(
            r#""warnings":["column 'v' is VARCHAR, not LONG: its values are mixed (3 of 4 sampled values are LONG; the first that is not is 'x' on line 3)"]}"#
        ),
        "{text}"
    );

    // No header line and a timestamp column asked for: the error says the header was not
    // detected, not that the column is missing.
    let headless = b"2016-01-01T00:00:00Z,host_1,0.5\n2016-01-01T00:00:01Z,host_2,0.7\n";
    let reply = imp(
        &server,
        "name=nh&timestamp=ts&fmt=json",
        &[("data", Some("nh.csv"), headless)],
    );
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.text(),
        r#"{"status":"could not detect a header row (the first line looks like data: '2016-01-01T00:00:00Z,host_1,0.5'), so there is no column 'ts'; pass forceHeader=true if the first line is the header, or add a header row naming the columns"}"#
    );
    // A header naming the timestamp column is taken as one, even over text-only data.
    let reply = imp(
        &server,
        "name=tx&timestamp=ts&fmt=json",
        &[(
            "data",
            Some("tx.csv"),
            b"ts,host\n2016-01-01,a\n2016-01-02,a\n",
        )],
    );
    assert!(
        reply.text().contains(r#""header":true"#),
        "{}",
        reply.text()
    );
    stop(server);
}

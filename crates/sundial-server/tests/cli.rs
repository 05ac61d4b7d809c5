//! End-to-end tests of the `sundial` binary.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn sundial(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args(args)
        .env("SUNDIAL_DATA_DIR", dir)
        .env("SUNDIAL_DURABILITY", "none")
        .output()
        .expect("run sundial")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn sql_runs_statements_and_prints_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let o = sundial(
        dir.path(),
        &[
            "sql",
            "CREATE TABLE t (ts TIMESTAMP, host SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY; INSERT INTO t VALUES ('2016-01-01T00:00:00Z', 'a', 1.5), ('2016-01-02T00:00:00Z', 'b', NULL)",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = sundial(
        dir.path(),
        &[
            "sql",
            "--format",
            "csv",
            "SELECT host, v FROM t ORDER BY ts",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "host,v\na,1.5\nb,\n");
    let o = sundial(
        dir.path(),
        &[
            "sql",
            "--format",
            "json",
            "SELECT host, v FROM t ORDER BY ts",
        ],
    );
    assert_eq!(stdout(&o).trim(), r#"[{"host":"a","v":1.5},{"host":"b"}]"#);
    let o = sundial(dir.path(), &["sql", "SELECT count(*) AS n FROM t"]);
    let out = stdout(&o);
    assert!(out.contains("| n |") && out.contains("| 2 |"), "{out}");
    assert!(stderr(&o).contains("1 row"), "{}", stderr(&o));
}

#[test]
fn errors_exit_non_zero_with_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let o = sundial(dir.path(), &["sql", "SELECT 1;\nCREATE TABLE t (a FANCY)"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("unknown column type 'FANCY'") && err.contains("line 2, column 19"),
        "{err}"
    );
    // Planning errors point at the offending identifier too.
    let o = sundial(
        dir.path(),
        &[
            "sql",
            "CREATE TABLE t (ts TIMESTAMP, v LONG) TIMESTAMP(ts);\nSELECT v,\n  nope FROM t",
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("column 'nope' does not exist") && err.contains("line 3, column 3"),
        "{err}"
    );
    // Positions count from the start of the whole input, not of the failing statement.
    let o = sundial(dir.path(), &["sql", "SELECT 1; SELEC 2"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("expected an SQL statement, found 'SELEC' at line 1, column 11"),
        "{err}"
    );
    let o = sundial(dir.path(), &["sql", "SELECT * FROM missing"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("missing"), "{}", stderr(&o));
}

#[test]
fn shell_reads_multi_line_statements_and_dot_commands() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args(["shell"])
        .env("SUNDIAL_DATA_DIR", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let script = "CREATE TABLE t (ts TIMESTAMP, v LONG)\n  TIMESTAMP(ts);\nINSERT INTO t VALUES ('2016-01-01', 7);\n.tables\n.schema t\n.mode csv\nSELECT v FROM t;\n.quit\n";
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("| t "), "{out}");
    assert!(
        out.contains("| ts     | TIMESTAMP | false   | 0                  | false        |"),
        "{out}"
    );
    assert!(out.contains("v\n7\n"), "{out}");
}

#[test]
fn a_second_process_gets_a_clear_lock_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut holder = Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args(["shell"])
        .env("SUNDIAL_DATA_DIR", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the shell has opened the directory (its banner is printed after that).
    let mut banner = [0u8; 7];
    std::io::Read::read_exact(holder.stdout.as_mut().unwrap(), &mut banner).unwrap();
    let o = sundial(dir.path(), &["sql", "SELECT 1"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("is locked by another process (pid"),
        "{}",
        stderr(&o)
    );
    // It says what to use next to a running server, with credentials.
    assert!(stderr(&o).contains("web console"), "{}", stderr(&o));
    assert!(stderr(&o).contains("curl -u admin:"), "{}", stderr(&o));
    assert!(stderr(&o).contains("is harmless"), "{}", stderr(&o));
    // At the addresses configured, not fixed ports.
    let o = Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args(["sql", "SELECT 1"])
        .env("SUNDIAL_DATA_DIR", dir.path())
        .env("SUNDIAL_HTTP_ADDR", "127.0.0.1:9555")
        .env("SUNDIAL_PG_ADDR", "127.0.0.1:8855")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(err.contains("http://127.0.0.1:9555/exec"), "{err}");
    assert!(err.contains("-p 8855"), "{err}");
    assert!(!err.contains("9000") && !err.contains("8812"), "{err}");
    drop(holder.stdin.take());
    holder.wait().unwrap();
    assert!(sundial(dir.path(), &["sql", "SELECT 1"]).status.success());
}

/// A server that cannot start (its port is taken) leaves no `.lock` file behind.
#[test]
fn a_failed_start_leaves_no_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let o = sundial(dir.path(), &["serve", "--ilp-tcp-addr", &addr]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot listen on"), "{}", stderr(&o));
    assert!(dir.path().is_dir());
    assert!(!dir.path().join(".lock").exists(), "a .lock file was left");
}

#[test]
fn import_detects_types_and_streams_rows() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    let mut f = std::fs::File::create(&csv).unwrap();
    writeln!(f, "ts,host,usage,ok,note").unwrap();
    for i in 0..20_000 {
        writeln!(
            f,
            "2016-01-0{}T00:00:{:02}Z,host_{},{}.5,{},\"n, {i}\"",
            1 + i % 3,
            i % 60,
            i % 7,
            i % 100,
            i % 2 == 0
        )
        .unwrap();
    }
    drop(f);
    let data = dir.path().join("data");
    let o = sundial(
        &data,
        &[
            "import",
            csv.to_str().unwrap(),
            "--table",
            "cpu",
            "--timestamp",
            "ts",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("imported 20000 rows"), "{}", stderr(&o));
    let o = sundial(
        &data,
        &[
            "sql",
            "--format",
            "csv",
            "SHOW COLUMNS FROM cpu; SELECT count(*), count(DISTINCT host), sum(usage) FROM cpu; SHOW PARTITIONS FROM cpu",
        ],
    );
    let out = stdout(&o);
    assert!(out.contains("ts,TIMESTAMP,false,0,false,0,0,true,false\nhost,SYMBOL,false,256,true,256,7,false,false\nusage,DOUBLE,false,0,false,0,0,false,false\nok,BOOLEAN,false,0,false,0,0,false,false\nnote,VARCHAR,false,0,false,0,0,false,false"), "{out}");
    assert!(out.contains("20000,7,1000000"), "{out}");
    assert!(out.contains("2016-01-03"), "{out}");
}

/// `ts,host,v` rows, one second apart; line 51 has a bad `v`, line 121 a bad timestamp, line
/// 151 a fourth field.
fn flawed_csv(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    writeln!(f, "ts,host,v").unwrap();
    for i in 1..=200 {
        let line = i + 1;
        let ts = if line == 121 {
            "abc".to_string()
        } else {
            format!("2016-01-01T00:{:02}:{:02}Z", i / 60, i % 60)
        };
        let v = if line == 51 {
            "oops".to_string()
        } else {
            i.to_string()
        };
        let extra = if line == 151 { ",x" } else { "" };
        writeln!(f, "{ts},host_{},{v}{extra}", i % 3).unwrap();
    }
}

fn query_csv(data: &Path, sql: &str) -> String {
    let o = sundial(data, &["sql", "--format", "csv", sql]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

#[test]
fn import_skips_bad_rows_by_default_and_names_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    flawed_csv(&csv);
    let data = dir.path().join("data");
    let args = [
        "import",
        csv.to_str().unwrap(),
        "--table",
        "t",
        "--timestamp",
        "ts",
    ];
    let o = sundial(&data, &args);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(
            "line 51: column 'v': cannot parse 'oops' as LONG\n\
             line 121: column 'ts': cannot parse 'abc' as TIMESTAMP\n\
             line 151: expected 3 fields, found 4\n"
        ),
        "{err}"
    );
    assert!(
        err.contains("imported 197 rows into 't'")
            && err.contains("3 rows rejected, 0 values stored as NULL (--atomicity skipRow)"),
        "{err}"
    );
    // One bad number did not make the column text.
    let out = query_csv(&data, "SHOW COLUMNS FROM t");
    assert!(out.contains("v,LONG"), "{out}");
    assert!(query_csv(&data, "SELECT count(*) FROM t").contains("197"));

    // Only the first N are printed; the rest are counted and point at --rejects.
    let more = dir.path().join("more");
    let mut args = args.to_vec();
    args.extend(["--max-reported-errors", "1"]);
    let o = sundial(&more, &args);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("line 51: column 'v'")
            && !err.contains("line 121")
            && err.contains("... and 2 more (--rejects FILE lists them all)"),
        "{err}"
    );
}

#[test]
fn import_skip_col_nulls_values_and_writes_every_rejection_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    flawed_csv(&csv);
    let data = dir.path().join("data");
    let rejects = dir.path().join("rejects.csv");
    let o = sundial(
        &data,
        &[
            "import",
            csv.to_str().unwrap(),
            "--table",
            "t",
            "--timestamp",
            "ts",
            "--atomicity",
            "skipCol",
            "--max-reported-errors",
            "0",
            "--rejects",
            rejects.to_str().unwrap(),
        ],
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("... and 3 more; all 3 are in ")
            && err.contains("imported 198 rows")
            && err.contains("2 rows rejected, 1 values stored as NULL (--atomicity skipCol)"),
        "{err}"
    );
    let written = std::fs::read_to_string(&rejects).unwrap();
    assert_eq!(
        written,
        "line,action,column,reason,record\n\
         51,valueNulled,v,column 'v': cannot parse 'oops' as LONG,\"2016-01-01T00:00:50Z,host_2,oops\"\n\
         121,rowSkipped,ts,column 'ts': cannot parse 'abc' as TIMESTAMP,\"abc,host_0,120\"\n\
         151,rowSkipped,,\"expected 3 fields, found 4\",\"2016-01-01T00:02:30Z,host_0,150,x\"\n"
    );
    assert!(
        query_csv(&data, "SELECT count(*), count(v) FROM t").contains("198,197"),
        "{}",
        query_csv(&data, "SELECT count(*), count(v) FROM t")
    );
}

#[test]
fn import_abort_stops_at_the_first_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    flawed_csv(&csv);
    let data = dir.path().join("data");
    let o = sundial(
        &data,
        &[
            "import",
            csv.to_str().unwrap(),
            "--table",
            "t",
            "--timestamp",
            "ts",
            "--atomicity",
            "abort",
        ],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("in.csv: line 51, column 'v': cannot parse 'oops' as LONG"),
        "{err}"
    );
    // The file fits in one chunk: nothing was imported.
    assert!(query_csv(&data, "SELECT count(*) FROM t").contains('0'));
    let o = sundial(
        &data,
        &[
            "import",
            csv.to_str().unwrap(),
            "--table",
            "t",
            "--atomicity",
            "sometimes",
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("'sometimes' is not one of skipRow, skipCol, abort"),
        "{}",
        stderr(&o)
    );
}

/// Imports `content` as a file into table `t` of a fresh data directory; returns the outcome.
fn import_bytes(content: &[u8], extra: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, content).unwrap();
    let mut args = vec!["import", csv.to_str().unwrap(), "--table", "t"];
    args.extend_from_slice(extra);
    sundial(&dir.path().join("data"), &args)
}

fn import_error(content: &[u8], extra: &[&str]) -> String {
    let o = import_bytes(content, extra);
    assert!(!o.status.success(), "{}", stderr(&o));
    stderr(&o)
}

#[test]
fn import_hostile_files_get_clear_answers() {
    // Empty; a first line that is data; bad header names.
    assert!(
        import_error(b"", &[]).contains("the input is empty: no header row and no data"),
        "empty"
    );
    let e = import_error(
        b"2016-01-01T00:00:00Z,host_1,0.5\n2016-01-01T00:00:01Z,host_2,0.7\n",
        &["--timestamp", "ts"],
    );
    assert!(
        e.contains("the first line looks like data, not a header row: '2016-01-01T00:00:00Z,host_1,0.5'; the file needs a header row naming the columns"),
        "{e}"
    );
    let e = import_error(b"a,,c\n1,2,3\n", &[]);
    assert!(
        e.contains("the header row has no name for column 2 (of 3)"),
        "{e}"
    );
    let e = import_error(b"a,b,A\n1,2,3\n", &[]);
    assert!(
        e.contains("the header row names two columns 'a' (columns 1 and 3"),
        "{e}"
    );
    let e = import_error(b"a,b/c\n1,2\n", &[]);
    assert!(
        e.contains("the header row's column 2 is not a valid name"),
        "{e}"
    );
    let e = import_error(b"time,v\n2016-01-01,1\n", &["--timestamp", "ts"]);
    assert!(
        e.contains("timestamp column 'ts' not found; the columns are 'time', 'v'"),
        "{e}"
    );
    // A 10 MB line: refused, not buffered.
    let mut huge = b"a,b\n1,".to_vec();
    huge.resize(huge.len() + (10 << 20), b'x');
    huge.push(b'\n');
    let e = import_error(&huge, &[]);
    assert!(
        e.contains("line 2: a record longer than 4194304 bytes"),
        "{}",
        &e[..e.len().min(500)]
    );
    // An unterminated quote.
    let e = import_error(b"a,b\n1,2\n3,\"open\n4,5\n", &[]);
    assert!(
        e.contains("malformed CSV at line 3: a quoted field is not closed"),
        "{e}"
    );

    // Header only: an empty table.
    let o = import_bytes(b"ts,v\r\n", &["--timestamp", "ts"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("imported 0 rows"), "{}", stderr(&o));
    // BOM, CRLF, invalid UTF-8, a timestamp far out of range, NULL-looking words: each bad
    // row named by its line.
    let mut content = b"\xEF\xBB\xBFts,name,n\r\n".to_vec();
    for i in 0..30 {
        content.extend_from_slice(format!("2016-01-01T00:00:{i:02}Z,n{i},{i}\r\n").as_bytes());
    }
    content.extend_from_slice(b"2016-01-02T00:00:00Z,caf\xE9,1\r\n");
    content.extend_from_slice(b"9999-12-31T00:00:00Z,far,2\r\n");
    content.extend_from_slice(b"2016-01-02T00:00:01Z,null,NULL\r\n");
    content.extend_from_slice(b"2016-01-02T00:00:02Z,,\r\n");
    let o = import_bytes(&content, &["--timestamp", "ts"]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("line 32: column 'name': cannot parse 'caf\u{FFFD}' as VARCHAR\n"),
        "{err}"
    );
    assert!(
        err.contains("line 33: column 'ts': timestamp '9999-12-31T00:00:00Z' is out of range"),
        "{err}"
    );
    assert!(
        err.contains("line 34: column 'n': cannot parse 'NULL' as LONG\n"),
        "{err}"
    );
    assert!(err.contains("imported 31 rows"), "{err}");
}

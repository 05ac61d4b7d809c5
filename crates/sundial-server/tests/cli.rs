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
        err.contains("No field named nope") && err.contains("line 3, column 3"),
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
        out.contains("| ts     | TIMESTAMP | false   | true       |"),
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
    drop(holder.stdin.take());
    holder.wait().unwrap();
    assert!(sundial(dir.path(), &["sql", "SELECT 1"]).status.success());
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
    assert!(out.contains("ts,TIMESTAMP,false,true,false\nhost,SYMBOL,false,false,false\nusage,DOUBLE,false,false,false\nok,BOOLEAN,false,false,false\nnote,VARCHAR,false,false,false"), "{out}");
    assert!(out.contains("20000,7,1000000"), "{out}");
    assert!(out.contains("2016-01-03"), "{out}");
}

"""Hostile and careless input against the real server: each test sends what used to take the
server down, hang it, lock others out or write outside the data directory, then checks that
the server still answers `SELECT 1` promptly on another connection and that nothing else
changed.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request

import psycopg
import pytest
from test_http_sql import get

# How long a healthy server may take to answer SELECT 1 while another statement runs: a
# liveness bound for a loaded debug build, not a speed measurement.
ALIVE_TIMEOUT_S = 10.0


def exec_sql(server, query: str, headers: dict | None = None, timeout: float = 60):
    status, _, body = get(server, "/exec", {"query": query}, headers, timeout)
    return status, json.loads(body) if body else {}


def assert_alive(server) -> None:
    """SELECT 1 over HTTP and over PostgreSQL, each within ALIVE_TIMEOUT_S."""
    started = time.monotonic()
    status, body = exec_sql(server, "SELECT 1 AS one", timeout=ALIVE_TIMEOUT_S)
    assert status == 200 and body["dataset"] == [[1]], body
    with psycopg.connect(server.dsn, connect_timeout=int(ALIVE_TIMEOUT_S)) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert time.monotonic() - started < 2 * ALIVE_TIMEOUT_S


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def assert_idle(server, within_s: float = 15.0) -> None:
    """The server stops burning CPU (a stopped statement no longer runs anywhere)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        before = cpu_seconds(server.proc.pid)
        time.sleep(1.0)
        if cpu_seconds(server.proc.pid) - before < 0.3:
            return
    pytest.fail(f"the server still uses CPU {within_s} s after the statement was stopped")


def make_table(server, rows: int = 100_000) -> None:
    for sql in [
        "CREATE TABLE t (ts TIMESTAMP, k SYMBOL, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY",
        f"INSERT INTO t SELECT to_timestamp_seconds(1451606400 + value), "
        f"'k' || (value % 10), value FROM generate_series(0, {rows - 1})",
    ]:
        status, body = exec_sql(server, sql)
        assert status == 200, body


CROSS_JOIN = "SELECT count(*) FROM t a CROSS JOIN t b"


# ---------------------------------------------------------------------------------------------
# Files and browsers
# ---------------------------------------------------------------------------------------------


def test_sql_cannot_write_server_files(start_server, tmp_path):
    server = start_server()
    target = tmp_path / "authorized_keys"
    copy = (
        f"COPY (SELECT 'ssh-ed25519 AAAA x' AS k) TO '{target}' STORED AS CSV "
        "OPTIONS ('format.has_header' 'false')"
    )
    status, body = exec_sql(server, copy)
    assert status == 403, body
    assert "--sql-file-dir" in body["error"]
    with psycopg.connect(server.dsn) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(copy)
    status, body = exec_sql(server, f"CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '{target}'")
    assert status == 400, body
    assert not target.exists()
    assert_alive(server)
    server.stop()

    # With a directory for files, COPY writes there and nowhere else.
    files = tmp_path / "exports"
    files.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (files / "link").symlink_to(outside)
    server = start_server(["--sql-file-dir", str(files)])
    status, body = exec_sql(server, "COPY (SELECT 1 AS one) TO 'one.csv' STORED AS CSV")
    assert status == 200, body
    assert (files / "one.csv").read_text().strip().splitlines()[-1] == "1"
    for bad in ["../escape.csv", str(outside / "x.csv"), "link/x.csv", "/etc/x.csv"]:
        status, body = exec_sql(server, f"COPY (SELECT 1 AS one) TO '{bad}' STORED AS CSV")
        assert status == 403, (bad, body)
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "escape.csv").exists()
    server.stop()


def test_pages_of_other_origins_cannot_change_data(start_server):
    server = start_server()
    make_table(server, 10)
    drop = {"query": "DROP TABLE t"}
    # A script of another origin (fetch sends Origin), and an <img> (no Origin, but every
    # current browser says Sec-Fetch-Site).
    for headers in [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ]:
        status, answer_headers, body = get(server, "/exec", drop, headers)
        assert status == 403, (headers, body)
        assert "Access-Control-Allow-Origin" not in answer_headers
        request = urllib.request.Request(
            f"{server.http_url}/write", data=b"t v=1\n", headers=headers, method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403
    # The server's own pages, and clients that are not browsers, are served.
    own = {"Origin": server.http_url, "Sec-Fetch-Site": "same-origin"}
    status, _, body = get(server, "/exec", {"query": "SELECT count(*) FROM t"}, own)
    assert status == 200, body
    assert json.loads(body)["dataset"] == [[10]]
    server.stop()

    allowed = start_server(["--http-allowed-origins", "https://console.example"])
    status, headers, _ = get(allowed, "/exec", {"query": "SELECT 1"},
                             {"Origin": "https://console.example"})
    assert status == 200
    assert headers["Access-Control-Allow-Origin"] == "https://console.example"
    status, _, _ = get(allowed, "/exec", {"query": "SELECT 1"}, {"Origin": "https://evil.example"})
    assert status == 403
    allowed.stop()


# ---------------------------------------------------------------------------------------------
# Statements that never end
# ---------------------------------------------------------------------------------------------


def test_a_runaway_join_is_stopped_by_timeout_cancel_and_hang_up(start_server):
    server = start_server(["--query-threads", "2"])
    make_table(server)

    # Statement timeout over HTTP: the answer comes, and the work stops. A join on a condition
    # that is no equality (a nested-loop join) used to test a whole probe batch in one go.
    for sql in [CROSS_JOIN, "SELECT count(*) FROM t a JOIN t b ON a.v + b.v < 0"]:
        status, body = exec_sql(server, sql, {"Statement-Timeout": "500"}, timeout=60)
        assert status == 400 and "timeout" in body["error"], body
        assert_idle(server)
        assert_alive(server)

    # Two runaway statements over PostgreSQL (as many as query threads) leave room for others,
    # and a CancelRequest stops each.
    conns = [psycopg.connect(server.dsn) for _ in range(2)]
    errors: list[BaseException] = []

    def run(conn):
        try:
            conn.execute(CROSS_JOIN)
        except BaseException as e:  # noqa: BLE001 - the cancel is what we expect
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    time.sleep(1.0)
    assert_alive(server)
    for c in conns:
        c.cancel()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a cancelled statement went on"
    assert len(errors) == 2 and all(
        isinstance(e, psycopg.errors.QueryCanceled) for e in errors
    ), errors
    for c in conns:
        c.close()
    assert_idle(server)

    # A client that hangs up: over HTTP and over PostgreSQL.
    def hang_up_http():
        try:
            get(server, "/exec", {"query": CROSS_JOIN}, timeout=1.0)
        except OSError:
            pass

    hang_up_http()
    conn = psycopg.connect(server.dsn)
    conn.pgconn.send_query(CROSS_JOIN.encode())
    time.sleep(0.5)
    conn.pgconn.finish()
    assert_idle(server)
    assert_alive(server)
    server.stop()


def test_sigterm_ends_the_server_with_statements_running(start_server):
    server = start_server(["--shutdown-timeout-ms", "1000"])
    make_table(server)
    conn = psycopg.connect(server.dsn)
    conn.pgconn.send_query(CROSS_JOIN.encode())

    def cut_by_the_stop():
        try:
            get(server, "/exec", {"query": CROSS_JOIN}, timeout=60)
        except OSError:
            pass  # The stop closes the connection without an answer, as it should.

    threading.Thread(target=cut_by_the_stop, daemon=True).start()
    time.sleep(1.0)
    started = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    server.exit_code = server.proc.wait(timeout=30)
    server._log_file.close()
    assert server.exit_code == 0, server.log()
    assert time.monotonic() - started < 20
    # The table is intact after the stop.
    assert server.sql("SELECT count(*) AS n FROM t") == [{"n": 100_000}]


# ---------------------------------------------------------------------------------------------
# Statements too large or too deep
# ---------------------------------------------------------------------------------------------


def test_deep_and_wide_sql_gets_an_answer_or_a_clean_error(start_server):
    server = start_server()
    make_table(server, 100)
    ok = [
        ("SELECT 1" + "+1" * 1_800, [[1_801]]),
        ("SELECT count(*) FROM t WHERE " + " AND ".join(["v >= 0"] * 1_000), [[100]]),
        ("SELECT count(*) FROM t WHERE " + " OR ".join([f"v = {i}" for i in range(1_500)]),
         [[100]]),
        ("SELECT count(*) FROM (" + " UNION ALL ".join(["SELECT 1 AS x"] * 300) + ")", [[300]]),
        ("WITH c0 AS (SELECT 1 AS x), "
         + ", ".join(f"c{i} AS (SELECT x + 1 AS x FROM c{i - 1})" for i in range(1, 300))
         + " SELECT x FROM c299", [[300]]),
        ("SELECT count(*) FROM (SELECT " + ", ".join(["1"] * 1_600) + ")", [[1]]),
    ]
    too_complex = [
        "SELECT 1" + "+1" * 100_000,
        "SELECT count(*) FROM t WHERE " + " AND ".join(["v >= 0"] * 20_000),
        "SELECT count(*) FROM t WHERE " + " OR ".join(["v = 1"] * 30_000),
        " UNION ALL ".join(["SELECT 1"] * 5_000),
        "WITH c0 AS (SELECT 1 AS x), "
        + ", ".join(f"c{i} AS (SELECT x FROM c{i - 1})" for i in range(1, 3_000))
        + " SELECT x FROM c2999",
    ]
    # Long texts go over PostgreSQL: a URL of over about 64 KiB is refused (414) before SQL.
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        for sql, expected in ok:
            rows = [list(r) for r in conn.execute(sql).fetchall()]
            assert rows == expected, sql[:80]
        for sql in too_complex:
            with pytest.raises(psycopg.errors.StatementTooComplex):
                conn.execute(sql)
        for width in [20_000, 300_000]:
            with pytest.raises(psycopg.errors.TooManyColumns):
                conn.execute("SELECT " + ", ".join(["1"] * width))
    status, body = exec_sql(server, "SELECT 1" + "+1" * 8_000)
    assert status == 400 and "too complex" in body["error"], body
    # A long statement (100 CTEs of 1,000 items each) plans without stalling others.
    wide = "WITH " + ", ".join(
        f"c{i} AS (SELECT " + ", ".join(f"{j} AS x{j}" for j in range(1_000)) + ")"
        for i in range(100)
    ) + " SELECT count(*) FROM c99"

    def run_wide():
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            try:
                conn.execute(wide)
            except psycopg.Error:
                pass
        done.set()

    done = threading.Event()
    threading.Thread(target=run_wide, daemon=True).start()
    time.sleep(0.5)
    assert_alive(server)
    assert done.wait(300)
    assert_alive(server)
    server.stop()


# ---------------------------------------------------------------------------------------------
# Memory and settings
# ---------------------------------------------------------------------------------------------


def test_functions_that_build_large_values_count_against_the_memory_limit(start_server):
    server = start_server(["--query-memory-bytes-max", str(1 << 30)])
    for sql in [
        "SELECT cardinality(range(1, 2000000000))",
        "SELECT length(repeat('x', 1000000000))",
        "SELECT length(lpad('x', 2000000000, 'ab'))",
        # A constant list, copied for every row: once killed the server (23 GB).
        "SELECT count(*) FROM (SELECT unnest(range(1, 100000)) FROM generate_series(1, 100000))",
    ]:
        status, body = exec_sql(server, sql)
        assert status == 500 or status == 400, body
        assert "memory limit" in body["error"], body
        with psycopg.connect(server.dsn) as conn:
            with pytest.raises(psycopg.errors.OutOfMemory):
                conn.execute(sql)
    # Well within the limit: answered.
    status, body = exec_sql(server, "SELECT length(repeat('x', 1000000))")
    assert status == 200 and body["dataset"] == [[1_000_000]], body
    assert_alive(server)
    server.stop()


def test_set_cannot_change_other_clients_settings(start_server):
    server = start_server()
    status, body = exec_sql(server, "SET datafusion.execution.batch_size = 1")
    assert status == 403, body
    status, body = exec_sql(server, "SET datafusion.execution.target_partitions = 100000")
    assert status == 403, body
    # A PostgreSQL session's SET stays in that session.
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("SET application_name = 'mine'")
        assert conn.execute("SHOW application_name").fetchone() == ("mine",)
    with psycopg.connect(server.dsn, autocommit=True) as other:
        assert other.execute("SHOW application_name").fetchone() != ("mine",)
    status, body = exec_sql(server, "SELECT count(*) FROM generate_series(1, 100000)")
    assert status == 200 and body["dataset"] == [[100_000]]
    server.stop()

"""End-to-end tests of the operations endpoints and logs: `GET /metrics` (Prometheus text format,
parsed with the official `prometheus_client` parser), `GET /status` and `/health`, the
failed-statement and slow-statement log lines, and `--log-format json`.

Counters are compared before and after the work, so they must move by exactly what the test
did. Values that only settle after a commit are waited for (with a deadline), never timed.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

WAIT_S = 30.0
LONG_QUERY = "SELECT count(*) FROM generate_series(1, 20000000000) AS g(x) WHERE x % 7 = 3"
SLOW_QUERY = "SELECT count(*) FROM generate_series(1, 20000000) AS g(x) WHERE x % 7 = 3"


def http(server, path: str, params: dict | None = None, data: bytes | None = None,
         headers: dict | None = None) -> tuple[int, dict, bytes]:
    url = f"{server.http_url}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    request = urllib.request.Request(url, data=data, headers=headers or {},
                                     method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


class Scrape:
    """One parsed `/metrics` answer: sample (name, labels) → value."""

    def __init__(self, text: str):
        self.samples: dict[tuple[str, frozenset], float] = {}
        self.types: dict[str, str] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            for s in family.samples:
                self.samples[(s.name, frozenset(s.labels.items()))] = s.value

    def get(self, name: str, **labels) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def has(self, name: str, **labels) -> bool:
        return (name, frozenset(labels.items())) in self.samples


def scrape(server) -> Scrape:
    status, headers, body = http(server, "/metrics")
    assert status == 200, body
    assert headers["content-type"].startswith("text/plain; version=0.0.4"), headers
    return Scrape(body.decode())


def wait_for(server, check, what: str) -> Scrape:
    """Scrapes until `check(scrape)` holds; fails after WAIT_S with the last scrape."""
    deadline = time.monotonic() + WAIT_S
    while True:
        s = scrape(server)
        if check(s):
            return s
        if time.monotonic() > deadline:
            pytest.fail(f"metrics never showed {what}; last samples: {s.samples}")
        time.sleep(0.05)


def pg_run(conn, sql: str) -> bool:
    """Runs `sql`; whether it succeeded."""
    try:
        conn.execute(sql)
        return True
    except psycopg.Error:
        return False


TCP_LINES = (
    b"m_cpu,host=a v=1 1000000000\n"
    b"m_cpu,host=b v=2 2000000000\n"
    b"m_cpu,host=a v=3 3000000000\n"
    # Rejected for m_cpu: v is a DOUBLE column.
    b'm_cpu,host=a v="text" 4000000000\n'
    # Rejected before any table exists: counted under table="".
    b"nosuch,host=a v=18446744073709551615u 1000\n"
)


def test_metrics_move_by_what_happened(start_server):
    srv = start_server(["--slow-query-ms", "1"])
    before = scrape(srv)
    for name in ("sundial_ilp_lines", "sundial_rows_ingested", "sundial_queries",
                 "sundial_commits"):
        assert before.types.get(name) == "counter", (name, before.types)
    assert before.types["sundial_commit_duration_seconds"] == "histogram"
    assert before.types["sundial_query_duration_seconds"] == "histogram"
    assert before.get("sundial_connections_active", protocol="pg") == 0
    assert before.get("process_resident_memory_bytes") > 0
    assert before.get("process_open_fds") > 0

    # ILP over TCP: the gauge counts the connection while it is open.
    with socket.create_connection((srv.host, srv.tcp_port)) as sock:
        wait_for(srv, lambda s: s.get("sundial_connections_active", protocol="ilp_tcp") == 1,
                 "one ILP/TCP connection")
        sock.sendall(TCP_LINES)
    after_tcp = wait_for(
        srv,
        lambda s: s.get("sundial_ilp_rows_total", transport="tcp", table="m_cpu",
                        outcome="accepted") == 3
        and s.get("sundial_connections_active", protocol="ilp_tcp") == 0,
        "the TCP lines committed and the connection closed",
    )
    assert after_tcp.get("sundial_ilp_lines_total", transport="tcp", outcome="accepted") == 3
    assert after_tcp.get("sundial_ilp_lines_total", transport="tcp", outcome="rejected") == 2
    assert after_tcp.get("sundial_ilp_rows_total", transport="tcp", table="m_cpu",
                         outcome="rejected") == 1
    assert after_tcp.get("sundial_ilp_rows_total", transport="tcp", table="",
                         outcome="rejected") == 1
    assert not any("nosuch" in str(key) for key in after_tcp.samples)

    # ILP over HTTP: answered after the commit, so counted by then.
    status, _, body = http(srv, "/write", data=b"m_mem,h=x v=1 1000\nm_mem,h=y v=2 2000\nbad\n")
    assert status == 400, body

    # SQL over PostgreSQL: good, failing, an INSERT, and a slow one; one connection counted.
    with psycopg.connect(srv.dsn, autocommit=True) as conn:
        wait_for(srv, lambda s: s.get("sundial_connections_active", protocol="pg") == 1,
                 "one PostgreSQL connection")
        assert pg_run(conn, "SELECT 1")
        assert not pg_run(conn, "SELECT * FROM no_such_table")
        assert pg_run(conn, "INSERT INTO m_cpu (timestamp, host, v) "
                            "VALUES ('2020-01-01T00:00:00Z', 'c', 4)")
        assert pg_run(conn, SLOW_QUERY)
    # SQL over HTTP: good, failing, cancelled by its statement timeout, and a password that
    # must not reach the log.
    assert http(srv, "/exec", {"query": "SELECT 1"})[0] == 200
    assert http(srv, "/exec", {"query": "SELEC 1"})[0] == 400
    status, _, body = http(srv, "/exec", {"query": LONG_QUERY},
                           headers={"Statement-Timeout": "50"})
    assert status == 400 and b"timeout" in body, body
    assert http(srv, "/exec", {"query": "ALTER USER bob WITH PASSWORD 'hunter2'"})[0] != 200

    after = wait_for(srv, lambda s: s.get("sundial_connections_active", protocol="pg") == 0,
                     "the PostgreSQL connection closed")

    def delta(name: str, **labels) -> float:
        return after.get(name, **labels) - before.get(name, **labels)

    assert delta("sundial_ilp_lines_total", transport="http", outcome="accepted") == 2
    assert delta("sundial_ilp_lines_total", transport="http", outcome="rejected") == 1
    assert delta("sundial_ilp_rows_total", transport="http", table="m_mem",
                 outcome="accepted") == 2
    assert delta("sundial_rows_ingested_total", source="ilp_tcp") == 3
    assert delta("sundial_rows_ingested_total", source="ilp_http") == 2
    assert delta("sundial_rows_ingested_total", source="insert") == 1
    assert delta("sundial_queries_total", protocol="pg", outcome="ok") == 3
    assert delta("sundial_queries_total", protocol="pg", outcome="error") == 1
    assert delta("sundial_queries_total", protocol="pg", outcome="cancelled") == 0
    assert delta("sundial_queries_total", protocol="http", outcome="ok") == 1
    assert delta("sundial_queries_total", protocol="http", outcome="error") == 2
    assert delta("sundial_queries_total", protocol="http", outcome="cancelled") == 1
    assert delta("sundial_query_duration_seconds_count", protocol="pg") == 4
    assert delta("sundial_query_duration_seconds_count", protocol="http") == 4
    commits = delta("sundial_commits_total")
    assert commits >= 3, commits  # TCP, HTTP, INSERT: at least one each
    assert delta("sundial_commit_duration_seconds_count") == commits
    assert delta("sundial_committed_rows_total") == 6
    assert after.get("sundial_commit_duration_seconds_bucket", le="+Inf") == \
        after.get("sundial_commit_duration_seconds_count")
    assert after.get("sundial_tables") == 2
    assert after.get("sundial_table_rows", table="m_cpu") == 4
    assert after.get("sundial_table_partitions", table="m_cpu") == 2  # 1970-01-01, 2020-01-01
    assert after.get("sundial_table_disk_bytes", table="m_cpu") > 0
    assert after.get("sundial_table_disk_bytes", table="m_mem") > 0
    assert after.has("sundial_ingest_pending_rows")
    assert after.has("sundial_query_memory_bytes")
    assert after.get("sundial_connections_active", protocol="http") >= 1  # this scrape
    assert after.get("sundial_uptime_seconds") > 0

    # /status and /health: the console reads exactly these fields.
    for path in ("/status", "/health"):
        status, headers, body = http(srv, path)
        assert status == 200, body
        assert headers["content-type"] == "application/json"
        doc = json.loads(body)
        assert set(doc) == {"status", "version", "uptime_ms", "tables", "rows_ingested"}, doc
        assert doc["status"] == "ok" and doc["version"]
        assert doc["tables"] == 2
        assert doc["rows_ingested"] == 6
        assert isinstance(doc["uptime_ms"], int) and doc["uptime_ms"] >= 0

    # A dropped table's series go.
    with psycopg.connect(srv.dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE m_mem")
    gone = scrape(srv)
    assert not any(("table", "m_mem") in key[1] for key in gone.samples), gone.samples
    assert gone.get("sundial_tables") == 1

    srv.stop()
    log = srv.log().splitlines()
    failed = [line for line in log if "statement failed" in line]
    pg_failed = [line for line in failed if 'protocol="pg"' in line and "no_such_table" in line]
    assert len(pg_failed) == 1, failed
    assert "client=127.0.0.1:" in pg_failed[0]
    assert "error=" in pg_failed[0] and "statement=" in pg_failed[0]
    http_failed = [line for line in failed if 'protocol="http"' in line and "SELEC 1" in line]
    assert len(http_failed) == 1, failed
    assert "SELEC" in http_failed[0].split("error=")[1], http_failed
    cancelled = [line for line in log if "statement cancelled" in line]
    assert not any("SELEC 1" in line for line in cancelled), cancelled
    assert any("timeout" in line and "generate_series" in line for line in cancelled), cancelled
    slow = [line for line in log if "slow statement" in line]
    assert any("WARN" in line and "generate_series(1, 20000000)" in line
               and 'protocol="pg"' in line and "duration_ms=" in line for line in slow), slow
    assert "hunter2" not in srv.log()
    assert any("PASSWORD '***'" in line for line in log), failed


def test_slow_query_log_is_off_at_zero_and_json_logs_are_json(start_server):
    srv = start_server(["--slow-query-ms", "0", "--log-format", "json"])
    assert http(srv, "/exec", {"query": SLOW_QUERY})[0] == 200
    assert http(srv, "/exec", {"query": "SELECT nothing FROM nowhere"})[0] == 400
    srv.stop()
    events = []
    for line in srv.log().splitlines():
        if line.startswith("sundial serving:"):  # the ready line, on standard output
            continue
        events.append(json.loads(line))
    assert events and all({"timestamp", "level", "target"} <= set(e) for e in events), events
    failed = [e for e in events if e.get("message") == "statement failed"]
    assert len(failed) == 1, events
    assert failed[0]["protocol"] == "http"
    assert failed[0]["statement"] == "SELECT nothing FROM nowhere"
    assert "nowhere" in failed[0]["error"]
    assert failed[0]["client"].startswith("127.0.0.1:")
    assert not [e for e in events if e.get("message") == "slow statement"], events


def test_log_level_is_validated_and_filters(start_server, tmp_path):
    import subprocess

    from conftest import sundial_bin

    done = subprocess.run(
        [str(sundial_bin()), "serve", "--data-dir", str(tmp_path / "d"), "--log-level", "info,=["],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode != 0
    assert "--log-level" in done.stderr, done.stderr
    help_text = subprocess.run([str(sundial_bin()), "serve", "--help"], capture_output=True,
                               text=True, timeout=60).stdout
    for flag in ("--log-level", "--log-format", "--slow-query-ms", "SUNDIAL_LOG"):
        assert flag in help_text, flag
    # warn: the failed statement (INFO) is not logged; the slow one (WARN) is.
    srv = start_server(["--log-level", "warn", "--slow-query-ms", "1"])
    assert http(srv, "/exec", {"query": "SELEC 1"})[0] == 400
    assert http(srv, "/exec", {"query": SLOW_QUERY})[0] == 200
    srv.stop()
    assert "statement failed" not in srv.log()
    assert "slow statement" in srv.log()

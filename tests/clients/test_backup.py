"""Online backup end to end: `sundial backup --to DIR` against a server that keeps ingesting
over ILP/TCP, twice, without stopping anything; each copy then opens in a second server (other
ports) with every table, a row count at least what was visible before the backup started, and
rows that are a prefix of what was sent (one connection commits in order); queries work on the
copy. Also `BACKUP DATABASE TO` over /exec with hostile targets, the CLI's errors, and the
offline backup of a stopped server's directory.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import Server, free_port, free_ports

BASE_NS = 1_700_000_000_000_000_000
POLL_TIMEOUT_S = 60.0
CLI_TIMEOUT_S = 300.0


def exec_sql(url: str, query: str) -> tuple[int, dict]:
    """GET /exec; returns the status and the JSON answer (errors included)."""
    request = urllib.request.Request(
        f"{url}/exec?{urllib.parse.urlencode({'query': query})}",
        headers={"Statement-Timeout": "0"},
    )
    try:
        with urllib.request.urlopen(request, timeout=CLI_TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def rows_of(url: str, query: str) -> list[list]:
    status, answer = exec_sql(url, query)
    assert status == 200, f"{query}: {answer}"
    return answer["dataset"]


def line(seq: int) -> str:
    # Every tenth row lands 5 s in the past: out-of-order rows merged into partitions.
    ts = BASE_NS + seq * 10_000_000 - (5_000_000_000 if seq % 10 == 9 else 0)
    return f"m,host=h{seq % 7} seq={seq}i,v={seq}.5 {ts}\n"


class Ingest(threading.Thread):
    """Sends rows `m` with seq 0, 1, 2, ... over one ILP/TCP connection until stopped."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.sent = 0
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port)) as s:
                while not self.stopping.is_set():
                    batch = "".join(line(self.sent + k) for k in range(500))
                    s.sendall(batch.encode())
                    self.sent += 500
                    time.sleep(0.005)
        except BaseException as e:  # reported by the test
            self.error = e

    def stop(self) -> int:
        self.stopping.set()
        self.join(timeout=30)
        assert self.error is None, f"ingestion failed: {self.error!r}"
        return self.sent


def visible_rows(url: str) -> int:
    status, answer = exec_sql(url, "SELECT count() FROM m")
    return answer["dataset"][0][0] if status == 200 else 0


def wait_for_rows(url: str, at_least: int) -> int:
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while True:
        n = visible_rows(url)
        if n >= at_least:
            return n
        assert time.monotonic() < deadline, f"only {n} rows became visible, waited for {at_least}"
        time.sleep(0.05)


def backup_cli(server: Server, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(server.binary), "backup", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        cwd=cwd,
    )


def check_prefix(url: str, at_least: int, context: str) -> int:
    """The copy's `m` holds seq 0..n-1 exactly once each, n >= at_least, values intact."""
    [[count, low, high, distinct]] = rows_of(
        url, "SELECT count(), min(seq), max(seq), count_distinct(seq) FROM m"
    )
    assert count >= at_least, f"{context}: {count} rows, {at_least} were visible before"
    assert (low, high, distinct) == (0, count - 1, count), f"{context}: not a prefix"
    [[bad]] = rows_of(url, "SELECT count() FROM m WHERE v <> seq + 0.5")
    assert bad == 0, f"{context}: {bad} rows with wrong values"
    return count


def copy_server(binary: Path, data_dir: Path, tmp_path: Path, n: int) -> Server:
    http_port, tcp_port, pg_port = free_ports(3)
    srv = Server(
        binary=binary,
        data_dir=data_dir,
        log_path=tmp_path / f"copy{n}.log",
        http_port=http_port,
        tcp_port=tcp_port,
        udp_port=free_port(socket.SOCK_DGRAM),
        pg_port=pg_port,
    )
    srv.start()
    return srv


def test_backups_while_ingesting_open_as_servers(start_server, tmp_path: Path):
    server = start_server()
    status, answer = exec_sql(
        server.http_url,
        "CREATE TABLE m (host SYMBOL, seq LONG, v DOUBLE, ts TIMESTAMP) "
        "TIMESTAMP(ts) PARTITION BY HOUR",
    )
    assert status == 200, answer
    # A second table, so the copy holds more than one.
    status, answer = exec_sql(
        server.http_url, "CREATE TABLE other AS (SELECT value AS n FROM generate_series(1, 100))"
    )
    assert status == 200, answer
    ingest = Ingest(server.tcp_port)
    ingest.start()
    try:
        wait_for_rows(server.http_url, 2_000)
        copies = []
        for k, (target, cwd) in enumerate(
            [(tmp_path / "backups" / "first", None), (Path("second"), tmp_path)]
        ):
            visible = visible_rows(server.http_url)
            done = backup_cli(server, "--to", str(target), "--url", server.http_url, cwd=cwd)
            assert done.returncode == 0, done.stderr
            assert "backed up 2 tables" in done.stdout, done.stdout
            path = target if cwd is None else cwd / target
            assert str(path) in done.stdout, done.stdout
            assert (path / "backup.json").is_file()
            assert not (path / "backup.incomplete").exists()
            copies.append((path, visible))
            # Ingestion went on during the backup.
            wait_for_rows(server.http_url, visible + 1_000)
        assert server.running
    finally:
        sent = ingest.stop()
    final = wait_for_rows(server.http_url, 1)
    counts = []
    for n, (path, visible) in enumerate(copies):
        copy = copy_server(server.binary, path, tmp_path, n)
        try:
            tables = {r[0] for r in rows_of(copy.http_url, "SHOW TABLES")}
            assert {"m", "other"} <= tables, tables
            counts.append(check_prefix(copy.http_url, visible, str(path)))
            assert rows_of(copy.http_url, "SELECT count() FROM other") == [[100]]
            hourly = rows_of(copy.http_url, "SELECT ts, count() FROM m SAMPLE BY 1h")
            assert sum(r[1] for r in hourly) == counts[-1]
            # The copy is a database of its own: it takes rows.
            status, answer = exec_sql(
                copy.http_url, f"INSERT INTO m VALUES ('h', -1, 0.0, {BASE_NS // 1000})"
            )
            assert status == 200, answer
        finally:
            copy.stop()
    assert counts[0] <= counts[1] <= final <= sent

    # The primary still runs; stop it and back its directory up offline.
    server.stop()
    closed = f"http://127.0.0.1:{free_port()}"
    offline = tmp_path / "offline"
    done = backup_cli(server, "--to", str(offline), "--url", closed,
                      "--data-dir", str(server.data_dir))
    assert done.returncode == 0, done.stderr
    assert "(offline)" in done.stdout, done.stdout
    [row] = Server.sql(
        Server(server.binary, offline, tmp_path / "x.log", 0, 0, 0), "SELECT count() AS n FROM m"
    )
    [primary] = server.sql("SELECT count() AS n FROM m")
    assert row["n"] == primary["n"] and final <= row["n"] <= sent, (row, primary, final, sent)


def test_hostile_backup_targets_are_refused(server: Server, tmp_path: Path):
    status, answer = exec_sql(
        server.http_url, "CREATE TABLE t AS (SELECT value AS x FROM generate_series(1, 10))"
    )
    assert status == 200, answer
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("x")
    plain_file = tmp_path / "file"
    plain_file.write_text("x")
    for target, message in [
        ("relative/dir", "must be an absolute path"),
        (str(server.data_dir), "inside the data directory"),
        (str(server.data_dir / "sub"), "inside the data directory"),
        (str(full), "exists and is not empty"),
        (str(plain_file), "is not a directory"),
        (str(plain_file / "below"), "I/O error"),
        (str(tmp_path / "a" / ".." / "b"), "must not contain '..'"),
        ("", "must be an absolute path"),
    ]:
        status, answer = exec_sql(server.http_url, f"BACKUP DATABASE TO '{target}'")
        assert status == 400 or status == 500, (target, answer)
        assert message in answer["error"], (target, answer)
    assert (full / "keep").read_text() == "x"
    assert not (server.data_dir / "sub").exists()
    status, answer = exec_sql(server.http_url, "BACKUP DATABASE TO /no/quotes")
    assert status == 400 and "quoted string" in answer["error"], answer

    # The CLI reports the server's refusal, and a server that is not there.
    done = backup_cli(server, "--to", str(full), "--url", server.http_url)
    assert done.returncode != 0 and "exists and is not empty" in done.stderr, done.stderr
    closed = f"http://127.0.0.1:{free_port()}"
    done = backup_cli(server, "--to", str(tmp_path / "never"), "--url", closed)
    assert done.returncode != 0, done.stdout
    assert "no Sundial server answers" in done.stderr, done.stderr
    assert not (tmp_path / "never").exists()
    # While the server holds the directory, an offline backup cannot take its lock.
    done = backup_cli(server, "--to", str(tmp_path / "never"), "--url", closed,
                      "--data-dir", str(server.data_dir))
    assert done.returncode != 0 and "locked" in done.stderr, done.stderr
    done = backup_cli(server, "--to", str(tmp_path / "ok"), "--url", "not a url")
    assert done.returncode != 0, done.stdout

    # One good backup after all that; a second into the same place is refused.
    status, answer = exec_sql(server.http_url, f"BACKUP DATABASE TO '{tmp_path / 'ok'}'")
    assert status == 200, answer
    assert [c["name"] for c in answer["columns"]] == [
        "path", "tables", "rows", "bytes", "duration_ms"
    ]
    assert answer["dataset"][0][1:3] == [1, 10]
    status, answer = exec_sql(server.http_url, f"BACKUP DATABASE TO '{tmp_path / 'ok'}'")
    assert status == 400 and "not empty" in answer["error"], answer


def test_backup_over_postgres(server: Server, tmp_path: Path):
    import psycopg

    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x LONG)")
        conn.execute("INSERT INTO t VALUES (1), (2)")
        # Extended protocol (psycopg binds parameters server-side only when given some).
        row = conn.execute(f"BACKUP DATABASE TO '{tmp_path / 'pg'}'").fetchone()
        assert row[0] == str(tmp_path / "pg") and row[1:3] == (1, 2), row
        with pytest.raises(psycopg.Error) as refused:
            conn.execute("BACKUP DATABASE TO 'relative'")
        assert "must be an absolute path" in str(refused.value)
        # Simple protocol.
        cur = conn.cursor()
        cur.execute(
            psycopg.sql.SQL("BACKUP DATABASE TO {}").format(
                psycopg.sql.Literal(str(tmp_path / "pg2"))
            ),
            prepare=False,
        )
        assert cur.fetchone()[1:3] == (1, 2)
    assert (tmp_path / "pg" / "backup.json").is_file()

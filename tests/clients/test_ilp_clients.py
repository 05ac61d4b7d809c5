"""End-to-end tests of Sundial's InfluxDB line protocol ingestion with real client libraries.

Each test starts `sundial serve` (fixture `server` in conftest.py), writes with a client, stops
the server gracefully (which commits everything received) and checks the rows with
`sundial sql`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from influxdb_client import InfluxDBClient, Point, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS
from influxdb_client.rest import ApiException
from questdb import QuestDBError, Sender, ServerTimestamp, TimestampNanos

import tsbs_data
from conftest import REPO_ROOT

# A base time well inside the supported range, with all nine fractional digits in use.
T0 = 1_700_000_000_123_456_789

# Values that need escaping in ILP: the client escapes them, the server must undo it.
TRICKY_SYMBOL = "host 1,rack=a"
TRICKY_STRING = 'say "hi", \\ back\\slash, a=b, tab\there, ünïcødé 🌞'


def now_ns() -> int:
    return time.time_ns()


def rows_by_ts(server, table: str, extra: str = "") -> list[dict]:
    """Every row of `table` with its designated timestamp as integer nanoseconds (`ts_ns`)."""
    return server.sql(
        f'SELECT *, arrow_cast("timestamp", \'Int64\') AS ts_ns FROM {table} {extra} ORDER BY ts_ns'
    )


def send_typed_rows(conf: str) -> tuple[int, int]:
    """Writes the rows `check_typed_rows` expects; returns the time window of the at-now row."""
    with Sender.from_conf(conf) as sender:
        sender.row(
            "readings",
            symbols={"host": "alpha", "region": "eu"},
            columns={"temp": 21.5, "count": 42, "ok": True, "note": "first"},
            at=TimestampNanos(T0),
        )
        sender.row(
            "readings",
            symbols={"host": "beta", "region": "us"},
            columns={"temp": -0.125, "count": -7, "ok": False, "note": "second"},
            at=TimestampNanos(T0 + 1),
        )
        sender.row(
            "readings",
            symbols={"host": TRICKY_SYMBOL, "region": "eu"},
            columns={"temp": 1e300, "count": 2**62, "ok": True, "note": TRICKY_STRING},
            at=TimestampNanos(T0 + 86_400_000_000_000),  # the next day: a second partition
        )
        # Missing columns are NULL; a row with only some of them.
        sender.row(
            "readings",
            symbols={"host": "gamma"},
            columns={"count": 0},
            at=TimestampNanos(T0 + 2),
        )
        sender.flush()
        before = now_ns()
        sender.row(
            "readings",
            symbols={"host": "now", "region": "eu"},
            columns={"temp": 3.0, "count": 3, "ok": False, "note": "server time"},
            at=ServerTimestamp,
        )
        sender.flush()
    after = now_ns()
    return before, after


def check_typed_rows(server, window: tuple[int, int]) -> None:
    assert server.columns("readings") == {
        "timestamp": "TIMESTAMP",
        "host": "SYMBOL",
        "region": "SYMBOL",
        "temp": "DOUBLE",
        "count": "LONG",
        "ok": "BOOLEAN",
        "note": "VARCHAR",
    }
    assert server.designated("readings") == "timestamp"

    rows = rows_by_ts(server, "readings")
    assert len(rows) == 5, rows
    for row in rows:
        del row["timestamp"]  # compared as ts_ns
    explicit, at_now = rows[:4], rows[4]
    assert explicit == [
        {"ts_ns": T0, "host": "alpha", "region": "eu", "temp": 21.5, "count": 42,
         "ok": True, "note": "first"},
        {"ts_ns": T0 + 1, "host": "beta", "region": "us", "temp": -0.125, "count": -7,
         "ok": False, "note": "second"},
        {"ts_ns": T0 + 2, "host": "gamma", "count": 0},
        {"ts_ns": T0 + 86_400_000_000_000, "host": TRICKY_SYMBOL, "region": "eu",
         "temp": 1e300, "count": 2**62, "ok": True, "note": TRICKY_STRING},
    ]
    # The server's clock stamps the at-now row when it arrives: within the send window
    # (same machine; 1 s of slack either way for clock steps and scheduling).
    before, after = window
    assert before - 1_000_000_000 <= at_now.pop("ts_ns") <= after + 1_000_000_000
    assert at_now == {"host": "now", "region": "eu", "temp": 3.0, "count": 3, "ok": False,
                      "note": "server time"}

    # Symbols are usable as such: filtering and grouping on them.
    assert server.sql(
        "SELECT region, count(*) AS n FROM readings WHERE region IS NOT NULL "
        "GROUP BY region ORDER BY region"
    ) == [{"region": "eu", "n": 3}, {"region": "us", "n": 1}]


@pytest.mark.parametrize("transport", ["tcp", "http"])
def test_questdb_sender_types_and_timestamps(server, transport):
    port = server.tcp_port if transport == "tcp" else server.http_port
    window = send_typed_rows(f"{transport}::addr=127.0.0.1:{port};")
    server.stop()
    check_typed_rows(server, window)


# A backslash in a symbol and a newline in a string: the QuestDB clients send `a\\b` for the
# symbol and a backslash before the newline in the string (their server unescapes both); the
# InfluxDB client sends the backslash as is and the newline raw inside the quotes.
BACKSLASH_SYMBOL = "dc\\rack 7"
MULTILINE_STRING = "line one\nline two \\ end\\"


@pytest.mark.parametrize("transport", ["tcp", "http"])
def test_questdb_sender_escaping_round_trips(server, transport):
    port = server.tcp_port if transport == "tcp" else server.http_port
    with Sender.from_conf(f"{transport}::addr=127.0.0.1:{port};") as sender:
        sender.row("esc", symbols={"sym": BACKSLASH_SYMBOL, "via": "questdb"},
                   columns={"text": MULTILINE_STRING, "n": 1}, at=TimestampNanos(T0))
        sender.row("esc", symbols={"sym": "plain", "via": "questdb"},
                   columns={"text": "after", "n": 2}, at=TimestampNanos(T0 + 1))
    with InfluxDBClient(url=server.http_url, token="x", org="o") as client:
        client.write_api(write_options=SYNCHRONOUS).write(
            bucket="b",
            record=Point("esc").tag("sym", BACKSLASH_SYMBOL).tag("via", "influxdb")
            .field("text", MULTILINE_STRING).field("n", 3).time(T0 + 2),
        )
    server.stop()
    assert server.sql('SELECT via, sym, text, n FROM esc ORDER BY "timestamp"') == [
        {"via": "questdb", "sym": BACKSLASH_SYMBOL, "text": MULTILINE_STRING, "n": 1},
        {"via": "questdb", "sym": "plain", "text": "after", "n": 2},
        {"via": "influxdb", "sym": BACKSLASH_SYMBOL, "text": MULTILINE_STRING, "n": 3},
    ]


def test_questdb_http_sender_type_conflict_raises(server):
    conf = f"http::addr=127.0.0.1:{server.http_port};retry_timeout=0;"
    with Sender.from_conf(conf) as sender:
        for i in range(3):
            sender.row("conflict", symbols={"k": "good"}, columns={"n": i, "s": f"v{i}"},
                       at=TimestampNanos(T0 + i))
        sender.flush()  # 204: the table exists now, `n` is a LONG

        # A string into the LONG column: the server answers 400, flush raises.
        sender.row("conflict", symbols={"k": "bad"}, columns={"n": "not a number"},
                   at=TimestampNanos(T0 + 10))
        with pytest.raises(QuestDBError) as raised:
            sender.flush()
        message = str(raised.value)
        assert "400" in message or "invalid" in message.lower(), message

        # The sender stays usable; a good row after the failure goes through.
        sender.row("conflict", symbols={"k": "after"}, columns={"n": 99, "s": "after"},
                   at=TimestampNanos(T0 + 20))
        sender.flush()

        # Good and bad lines in one request: 400 again, and (InfluxDB's policy, as the README
        # says) the good lines of that request are committed.
        sender.row("conflict", symbols={"k": "mixed-good-1"}, columns={"n": 100},
                   at=TimestampNanos(T0 + 30))
        sender.row("conflict", symbols={"k": "mixed-bad"}, columns={"n": "x"},
                   at=TimestampNanos(T0 + 31))
        sender.row("conflict", symbols={"k": "mixed-bad-2"}, columns={"s": True},
                   at=TimestampNanos(T0 + 32))
        sender.row("conflict", symbols={"k": "mixed-good-2"}, columns={"n": 101},
                   at=TimestampNanos(T0 + 33))
        with pytest.raises(QuestDBError):
            sender.flush()
    server.stop()

    assert server.columns("conflict") == {
        "timestamp": "TIMESTAMP", "k": "SYMBOL", "n": "LONG", "s": "VARCHAR",
    }
    rows = server.sql('SELECT k, n, s FROM conflict ORDER BY "timestamp"')
    assert rows == [
        {"k": "good", "n": 0, "s": "v0"},
        {"k": "good", "n": 1, "s": "v1"},
        {"k": "good", "n": 2, "s": "v2"},
        {"k": "after", "n": 99, "s": "after"},
        {"k": "mixed-good-1", "n": 100},
        {"k": "mixed-good-2", "n": 101},
    ]


def test_questdb_http_error_body_names_line(server):
    """The raw HTTP answer the QuestDB client turns into its error: 400 + JSON with `line`."""
    import urllib.error
    import urllib.request

    body = f"t2 n=1i {T0}\nt2 n=\"str\" {T0 + 1}\nt2 n=2i {T0 + 2}\n".encode()
    request = urllib.request.Request(
        f"{server.http_url}/write?precision=n", data=body, method="POST",
        headers={"Content-Type": "text/plain; charset=utf-8"},
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=10)
    assert raised.value.code == 400
    answer = json.loads(raised.value.read())
    assert answer["code"] == "invalid"
    assert answer["line"] == 2
    server.stop()
    assert [r["n"] for r in server.sql('SELECT n FROM t2 ORDER BY "timestamp"')] == [1, 2]


def post_lines(server, body: bytes, precision: str = "n") -> tuple[int, dict]:
    """POSTs ILP to /write; (status, JSON answer or {})."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"{server.http_url}/write?precision={precision}", data=body, method="POST",
        headers={"Content-Type": "text/plain; charset=utf-8"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {}
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_out_of_range_timestamps_and_nul_bytes_cost_only_their_lines(server):
    """A timestamp outside 1678..2262 (i64::MAX, i64::MIN, or one that overflows when scaled by
    the precision) and a NUL byte in any name or string reject their own line; the other lines
    of the batch, and later batches to the same table, are committed, and the server still stops
    on SIGTERM."""
    bad = [
        b"edge,k=max v=1i 9223372036854775807",
        b"edge,k=min v=1i -9223372036854775808",
        b"edge,k=end v=1i 9214646400000000000",
        b"edge,k=field v=1i,at=9223372036854775807t 1451606400000000000",
        b"edge,k=nul\x00tag v=1i 1451606400000000000",
        b"edge,k=nulstr v=1i,s=\"a\x00b\" 1451606400000000000",
        b"edge\x00m,k=nulmeasurement v=1i 1451606400000000000",
    ]
    good = [f"edge,k=good{i} v={i}i {T0 + i}".encode() for i in range(4)]
    body = b"\n".join([good[0], *bad[:4], good[1], *bad[4:], good[2]]) + b"\n"
    status, answer = post_lines(server, body)
    assert status == 400, answer
    assert answer["line"] == 2
    assert f"{len(bad)} line(s) rejected" in answer["message"], answer
    assert "timestamp 9223372036854775807 (precision ns) is out of range" in answer["message"]
    # Seconds that overflow i64 nanoseconds do not wrap into the range.
    status, answer = post_lines(server, b"edge,k=wrap v=1i 18446744074\n", precision="s")
    assert status == 400 and "18446744074" in answer["message"], answer
    # The same over TCP, then a later good line.
    with socket.create_connection(("127.0.0.1", server.tcp_port), timeout=10) as s:
        s.sendall(b"\n".join([*bad, good[3]]) + b"\n")
    time.sleep(1.0)  # the closed connection is read to its end
    server.stop()
    rows = server.sql('SELECT k, v FROM edge ORDER BY "timestamp"')
    assert rows == [{"k": f"good{i}", "v": i} for i in range(4)]
    assert f"ILP/TCP: 1 lines accepted, {len(bad)} rejected" in server.log()


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
def test_influxdb_v2_client_precisions(server, gzip):
    base_s = T0 // 1_000_000_000  # whole seconds
    with InfluxDBClient(url=server.http_url, token="x", org="o", enable_gzip=gzip,
                        timeout=10_000) as client:
        assert client.ping() is True
        write = client.write_api(write_options=SYNCHRONOUS)

        # Default precision: nanoseconds.
        write.write(bucket="b", record=[
            Point("weather").tag("station", "ns").field("temp", 1.25).field("hits", 1)
            .field("raw", "n").time(T0, WritePrecision.NS),
            Point("weather").tag("station", "ns").field("temp", 2.5).field("hits", 2)
            .field("raw", "n").time(T0 + 1, WritePrecision.NS),
        ])
        # Seconds.
        write.write(bucket="b", org="o", write_precision=WritePrecision.S, record=[
            Point("weather").tag("station", "s").field("temp", 3.0).field("hits", 3)
            .field("raw", "s").time(base_s + 10, WritePrecision.S),
        ])
        # Milliseconds, as an integer and as a datetime.
        write.write(bucket="b", org="o", write_precision=WritePrecision.MS, record=[
            Point("weather").tag("station", "ms").field("temp", 4.0).field("hits", 4)
            .field("raw", "ms").time(base_s * 1000 + 20_123, WritePrecision.MS),
            Point("weather").tag("station", "ms-dt").field("temp", 5.0).field("hits", 5)
            .field("raw", "ms").time(
                dt.datetime.fromtimestamp(base_s + 30, dt.timezone.utc)
                + dt.timedelta(milliseconds=456), WritePrecision.MS),
        ])
        # Raw line protocol strings go through too.
        write.write(bucket="b", record=f"weather,station=line temp=6.5,hits=6i,raw=\"l\" {T0 + 5}")

        # A type conflict: the client surfaces the 400 with the server's JSON.
        with pytest.raises(ApiException) as raised:
            write.write(bucket="b", record=f"weather,station=bad hits=\"oops\" {T0 + 6}")
        assert raised.value.status == 400
        assert json.loads(raised.value.body)["code"] == "invalid"
    server.stop()

    assert server.columns("weather") == {
        "timestamp": "TIMESTAMP", "station": "SYMBOL", "temp": "DOUBLE", "hits": "LONG",
        "raw": "VARCHAR",
    }
    rows = server.sql(
        'SELECT station, temp, hits, raw, arrow_cast("timestamp", \'Int64\') AS ts FROM weather '
        'ORDER BY ts'
    )
    assert rows == [
        {"station": "ns", "temp": 1.25, "hits": 1, "raw": "n", "ts": T0},
        {"station": "ns", "temp": 2.5, "hits": 2, "raw": "n", "ts": T0 + 1},
        {"station": "line", "temp": 6.5, "hits": 6, "raw": "l", "ts": T0 + 5},
        {"station": "s", "temp": 3.0, "hits": 3, "raw": "s", "ts": (base_s + 10) * 10**9},
        {"station": "ms", "temp": 4.0, "hits": 4, "raw": "ms",
         "ts": (base_s * 1000 + 20_123) * 10**6},
        {"station": "ms-dt", "temp": 5.0, "hits": 5, "raw": "ms",
         "ts": (base_s + 30) * 10**9 + 456 * 10**6},
    ]


def test_ilp_over_udp(server):
    lines = [
        # One line per datagram, with and without the trailing newline.
        f"udp_t,src=one v=1i,f=0.5 {T0}\n",
        f"udp_t,src=two v=2i,f=1.5 {T0 + 1}",
        # Several lines in one datagram; the last without a newline.
        f"udp_t,src=multi v=3i {T0 + 2}\n"
        f"udp_t,src=multi v=4i,s=\"x y\" {T0 + 3}\n"
        f"udp_t,src=multi v=5i {T0 + 4}",
        # A datagram with a bad line between good ones: only the bad line is dropped.
        f"udp_t,src=mixed v=6i {T0 + 5}\n"
        f"udp_t,src=mixed v=\"bad\" {T0 + 6}\n"
        f"udp_t,src=mixed v=7i {T0 + 7}\n",
    ]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for datagram in lines:
            sock.sendto(datagram.encode(), ("127.0.0.1", server.udp_port))
    # UDP has no acknowledgement: give the server a moment to read its socket before the stop
    # (datagrams left in the kernel's buffer at shutdown are not "received").
    time.sleep(1.0)
    server.stop()

    rows = server.sql(
        'SELECT src, v, f, s, arrow_cast("timestamp", \'Int64\') AS ts FROM udp_t ORDER BY ts'
    )
    assert rows == [
        {"src": "one", "v": 1, "f": 0.5, "ts": T0},
        {"src": "two", "v": 2, "f": 1.5, "ts": T0 + 1},
        {"src": "multi", "v": 3, "ts": T0 + 2},
        {"src": "multi", "v": 4, "s": "x y", "ts": T0 + 3},
        {"src": "multi", "v": 5, "ts": T0 + 4},
        {"src": "mixed", "v": 6, "ts": T0 + 5},
        {"src": "mixed", "v": 7, "ts": T0 + 7},
    ]
    assert "ILP/UDP: 7 lines accepted, 1 rejected" in server.log()


def test_tcp_line_cut_by_shutdown_is_not_ingested(server):
    """A connection still open at shutdown may be in the middle of a line: its unterminated
    tail is not a line (`v=12i` may be the start of `v=12i,w=3i 1700000000000000000`), unlike
    the tail of a connection the client closed, which is a last line without a newline."""
    with socket.create_connection(("127.0.0.1", server.tcp_port), timeout=10) as open_conn:
        open_conn.sendall(f"cut,k=complete v=1i {T0}\ncut,k=partial v=12i".encode())
        with socket.create_connection(("127.0.0.1", server.tcp_port), timeout=10) as closed:
            closed.sendall(
                f"cut,k=closed v=2i {T0 + 1}\ncut,k=closed-tail v=3i {T0 + 2}".encode()
            )
        time.sleep(1.0)  # both are read; the open one waits for the rest of its line
        server.stop()
    rows = server.sql('SELECT k, v FROM cut ORDER BY "timestamp"')
    assert rows == [
        {"k": "complete", "v": 1},
        {"k": "closed", "v": 2},
        {"k": "closed-tail", "v": 3},
    ]


SENDERS = 8
ROWS_PER_SENDER = 5_000


def test_concurrent_tcp_senders(server):
    errors: list[BaseException] = []
    start = threading.Barrier(SENDERS)

    def send(i: int) -> None:
        try:
            with Sender.from_conf(
                f"tcp::addr=127.0.0.1:{server.tcp_port};auto_flush_rows=1000;"
            ) as sender:
                start.wait(timeout=30)
                for j in range(ROWS_PER_SENDER):
                    sender.row(
                        "many",
                        symbols={"sender": f"s{i}"},
                        columns={"seq": j, "value": j * 0.5},
                        # Interleaved timestamps across senders: every row lands out of
                        # order relative to some other sender's.
                        at=TimestampNanos(T0 + j * SENDERS + i),
                    )
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(SENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a sender hung"
    assert not errors, errors
    # Every sender has flushed and closed its connection; stop right away: a graceful
    # shutdown commits everything the server received.
    server.stop()

    total = SENDERS * ROWS_PER_SENDER
    assert server.sql("SELECT count(*) AS n FROM many") == [{"n": total}]
    assert server.sql(
        "SELECT sender, count(*) AS n, count(DISTINCT seq) AS d, min(seq) AS lo, "
        "max(seq) AS hi FROM many GROUP BY sender ORDER BY sender"
    ) == [
        {"sender": f"s{i}", "n": ROWS_PER_SENDER, "d": ROWS_PER_SENDER, "lo": 0,
         "hi": ROWS_PER_SENDER - 1}
        for i in range(SENDERS)
    ]
    assert server.sql(
        'SELECT count(DISTINCT "timestamp") AS n, min(arrow_cast("timestamp", \'Int64\')) AS lo, '
        'max(arrow_cast("timestamp", \'Int64\')) AS hi FROM many'
    ) == [{"n": total, "lo": T0, "hi": T0 + total - 1}]
    assert f"ILP/TCP: {total} lines accepted, 0 rejected" in server.log()


@pytest.fixture(scope="module")
def tsbs_files(tmp_path_factory) -> dict[str, tuple[Path, dict[str, int]]]:
    """TSBS-shaped ILP files made by tsbs_data (devops cpu-only and iot), with the rows each
    table must end up with per load."""
    directory = tmp_path_factory.mktemp("tsbs")
    devops = directory / "devops-cpu.ilp"
    devops.write_bytes(tsbs_data.devops_lines())
    iot = directory / "iot.ilp"
    iot_bytes, iot_rows = tsbs_data.iot_lines()
    iot.write_bytes(iot_bytes)
    return {
        "devops": (devops, {"cpu": tsbs_data.DEVOPS_ROWS}),
        "iot": (iot, iot_rows),
    }


@pytest.mark.parametrize("shape", ["devops", "iot"])
def test_tsbs_files_over_tcp_and_http_with_our_loader(server, tsbs_files, shape):
    """Our loader sends a TSBS-shaped file over TCP, then again over HTTP, and waits until every
    table has exactly the rows of the file (twice), failing on a shortfall or an excess."""
    path, rows = tsbs_files[shape]
    loader = os.environ.get("SUNDIAL_BENCH_BIN", str(REPO_ROOT / "target" / "debug" / "sundial-bench"))
    for protocol in ["tcp", "http"]:
        run = subprocess.run(
            [
                loader, "load", "--file", str(path), "--protocol", protocol,
                "--workers", "2", "--batch-lines", "5000",
                "--ilp-addr", f"127.0.0.1:{server.tcp_port}",
                "--http-addr", f"127.0.0.1:{server.http_port}",
                "--queryable-timeout-s", "120",
            ],
            capture_output=True, text=True, timeout=900,
        )
        assert run.returncode == 0, f"{protocol}: {run.stderr}"
        assert "result:" in run.stdout
    server.stop()
    for table, n in rows.items():
        assert server.sql(f"SELECT count(*) AS n FROM {table}") == [{"n": 2 * n}]

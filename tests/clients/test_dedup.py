"""Exactly-once ingestion with DEDUP UPSERT KEYS, end to end with real clients.

A client sends batches, then all of them again shuffled (with rows out of order), as a client
retrying after a lost connection does, then a few corrections; the table must equal the model:
the last value sent for each (timestamp, host). Over ILP/TCP and ILP/HTTP with QuestDB's client,
and SQL INSERT with psycopg. Then the server is killed (SIGKILL) while an HTTP client sends, and
must keep every acknowledged row exactly once.
"""

from __future__ import annotations

import datetime as dt
import random
import threading
import time

import psycopg
import pytest
from questdb import Sender, TimestampNanos

T0 = 1_700_000_000_000_000_000
SECOND_NS = 1_000_000_000
HOSTS = 10
BATCHES = 30
ROWS_PER_BATCH = 40

# Each batch gets its own connection, as a client reconnecting would; the client warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:questdb.Sender. Detected a burst")

CREATE = (
    'CREATE TABLE m ("timestamp" TIMESTAMP, host SYMBOL, v DOUBLE, n LONG) '
    'TIMESTAMP("timestamp") PARTITION BY HOUR DEDUP UPSERT KEYS("timestamp", host)'
)


def make_batches(seed: int) -> list[list[tuple[int, str, float, int]]]:
    """Batches of (ts, host, v, n); keys repeat within and across batches."""
    rng = random.Random(seed)
    batches = []
    for b in range(BATCHES):
        rows = []
        for _ in range(ROWS_PER_BATCH):
            ts = T0 + rng.randrange(b * 20, b * 20 + 200) * SECOND_NS
            rows.append((ts, f"h{rng.randrange(HOSTS)}", rng.random(), b))
        batches.append(rows)
    return batches


def apply(model: dict, rows) -> None:
    for ts, host, v, n in rows:
        model[(ts, host)] = (v, n)


def send_ilp(conf: str, rows) -> None:
    with Sender.from_conf(conf) as sender:
        for ts, host, v, n in rows:
            sender.row("m", symbols={"host": host}, columns={"v": v, "n": n},
                       at=TimestampNanos(ts))


def iso(ts: int) -> str:
    """A timestamp literal for nanoseconds `ts` (whole seconds here)."""
    assert ts % SECOND_NS == 0
    return dt.datetime.fromtimestamp(ts // SECOND_NS, dt.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def send_insert(dsn: str, rows) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        values = ", ".join(f"('{iso(ts)}', '{host}', {v!r}, {n})" for ts, host, v, n in rows)
        conn.execute(f"INSERT INTO m VALUES {values}")


def wait_for(dsn: str, query: str, expected, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            got = conn.execute(query).fetchall()
            if got == expected:
                return
            assert time.monotonic() < deadline, f"{query}: {got}, waiting for {expected}"
            time.sleep(0.05)


def stored(server) -> dict:
    rows = server.sql('SELECT arrow_cast("timestamp", \'Int64\') AS ts, host, v, n FROM m')
    table = {}
    for r in rows:
        key = (r["ts"], r["host"])
        assert key not in table, f"{key} stored twice"
        table[key] = (r["v"], r["n"])
    return table


@pytest.mark.parametrize("transport", ["tcp", "http", "insert"])
def test_resent_batches_are_stored_once(start_server, transport):
    server = start_server()
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(CREATE)
    if transport == "insert":
        send = lambda rows: send_insert(server.dsn, rows)  # noqa: E731
    else:
        port = server.tcp_port if transport == "tcp" else server.http_port
        conf = f"{transport}::addr=127.0.0.1:{port};"
        send = lambda rows: send_ilp(conf, rows)  # noqa: E731
    batches = make_batches(seed=7)
    model: dict = {}
    for rows in batches:
        send(rows)
        apply(model, rows)
    # The client's retry: every batch again, in another order, rows shuffled within.
    rng = random.Random(11)
    again = [list(rows) for rows in batches]
    rng.shuffle(again)
    for rows in again:
        rng.shuffle(rows)
        send(rows)
        apply(model, rows)
    # Over TCP nothing acknowledges a line: wait until the retry is all visible before the
    # corrections, so they are the last to arrive. (A marker row, sent after it on one
    # connection, is visible only after it.)
    marker = [(T0 + 10**6 * SECOND_NS, "marker", 0.0, -1)]
    send(marker)
    apply(model, marker)
    wait_for(server.dsn, "SELECT count(*) FROM m WHERE host = 'marker'", [(1,)])
    corrections = [(ts, host, -1.0, 999) for (ts, host) in list(model)[::7]]
    send(corrections)
    apply(model, corrections)
    server.stop()
    assert stored(server) == model
    assert server.sql("SELECT count(*) AS c FROM m") == [{"c": len(model)}]


def test_ilp_created_tables_get_keys_from_their_tags(start_server):
    server = start_server(["--ilp-dedup-tags"])
    conf = f"tcp::addr=127.0.0.1:{server.tcp_port};"
    rows = [(T0 + i * SECOND_NS, f"h{i % 3}", float(i), i) for i in range(30)]
    send_ilp(conf, rows)
    send_ilp(conf, rows[::-1])
    server.stop()
    keys = [r["column"] for r in server.sql("SHOW COLUMNS FROM m") if r.get("upsertKey")]
    assert keys == ["timestamp", "host"]
    model: dict = {}
    apply(model, rows)
    assert stored(server) == model


def test_killed_server_keeps_acknowledged_rows_once(start_server):
    server = start_server()
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(CREATE)
    conf = f"http::addr=127.0.0.1:{server.http_port};retry_timeout=0;"
    batches = make_batches(seed=3) * 20
    acknowledged: list = []
    stop = threading.Event()

    def send_until_killed() -> None:
        for rows in batches:
            if stop.is_set():
                return
            try:
                send_ilp(conf, rows)
            except Exception:  # noqa: BLE001 - the server was killed mid-request
                return
            acknowledged.append(rows)

    sender = threading.Thread(target=send_until_killed)
    sender.start()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 25 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.kill()
    stop.set()
    sender.join(timeout=60)
    assert len(acknowledged) >= 25, "the sender made too little progress"
    # Restarted: every acknowledged row is there once, with its last acknowledged value or a
    # later one from the request in flight.
    server.start()
    server.stop()
    table = stored(server)
    model: dict = {}
    for rows in acknowledged:
        apply(model, rows)
    in_flight = batches[len(acknowledged)] if len(acknowledged) < len(batches) else []
    later = {(ts, host): (v, n) for ts, host, v, n in in_flight}
    for key, value in model.items():
        assert key in table, f"acknowledged row {key} lost"
        assert table[key] == value or table[key] == later.get(key), key
    assert set(table) <= set(model) | set(later)

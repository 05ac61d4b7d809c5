"""Soak test: 200 concurrent PostgreSQL connections (asyncpg) running a mix of prepared point
queries, small aggregates, catalog queries and INSERTs for a bounded time.

It checks that
- no operation fails, and every read sees this connection's own committed inserts;
- the server's resident memory stops growing once warmed up;
- afterwards every connection still answers, a fresh connection works, every inserted row is
  there exactly once (over PostgreSQL, and from disk after a clean shutdown), and the server's
  file descriptors go back down once the clients are gone.

SOAK_DURATION_S (default 20) sets how long the load runs; SOAK_CONNECTIONS (default 200) how
many connections run it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import random
import threading
import time
import traceback
from dataclasses import dataclass, field

import asyncpg
import pytest

DURATION_S = float(os.environ.get("SOAK_DURATION_S", "20"))
CONNECTIONS = int(os.environ.get("SOAK_CONNECTIONS", "200"))
SEED_PER_CONN = 20
MAX_OPS_PER_CONN = 1_000_000  # a bound on the loop besides the deadline
COMMAND_TIMEOUT_S = 60.0  # one statement taking longer than this counts as a hang
CONNECT_TIMEOUT_S = 60.0
CONNECT_CONCURRENCY = 50
VERIFY_TIMEOUT_S = 120.0
# Memory: after the warm-up (the first third of the load), the highest RSS over the last third
# may exceed the highest over the middle third by at most this much.
RSS_GROWTH_FACTOR = 1.25
RSS_GROWTH_SLACK_KIB = 32 * 1024
FD_SLACK = 32

BASE = dt.datetime(2024, 1, 1, 0, 30)
TAGS = [f"t{i}" for i in range(7)]

# Operation mix (weights in percent).
MIX = [
    ("insert", 20),
    ("point", 30),
    ("aggregate", 20),
    ("select1", 10),
    ("simple", 10),
    ("catalog", 10),
]

INSERT_SQL = "INSERT INTO soak VALUES ($1, $2, $3, $4, $5)"
POINT_SQL = "SELECT ts, v, tag FROM soak WHERE conn = $1 AND seq = $2"
AGGREGATE_SQL = "SELECT count(*), max(v) FROM soak WHERE conn = $1"
CATALOG_SQL = "SELECT tablename FROM pg_catalog.pg_tables WHERE tablename = $1"


def row_ts(conn: int, seq: int) -> dt.datetime:
    # One minute per sequence number: the run crosses HOUR partitions; the connection number
    # in the microseconds keeps timestamps distinct and interleaves the writers.
    return BASE + dt.timedelta(minutes=seq, microseconds=conn)


def row_v(conn: int, seq: int) -> float:
    return float(conn * 1_000_000 + seq)


def row_tag(seq: int) -> str:
    return TAGS[seq % len(TAGS)]


def row(conn: int, seq: int) -> tuple:
    return (row_ts(conn, seq), conn, seq, row_v(conn, seq), row_tag(seq))


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS/VmHWM/RssAnon/RssFile (KiB), thread count and open descriptors of a process."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                out[key] = int(value.split()[0])
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def fd_targets(pid: int) -> list[str]:
    """What each open descriptor of a process points at (sockets, files)."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


@dataclass
class Stats:
    ops: int = 0
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k, _ in MIX})

    def error(self, conn: int, what: str, exc: BaseException | None = None) -> None:
        self.error_count += 1
        kind = what.split()[0].rstrip(":")
        self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + 1
        if self.errors_by_kind[kind] <= 5:  # the first few of each kind
            detail = ""
            if exc is not None:
                detail = f": {type(exc).__name__}: {exc}"
                tb = "".join(traceback.format_exception(exc)[-3:]).strip()
                detail += f"\n    {tb}"
            self.errors.append(f"conn {conn}: {what}{detail}")


class Sampler(threading.Thread):
    """Samples the server's RSS (and threads, fds) every second, with the ops counter."""

    def __init__(self, pid: int, stats: Stats):
        super().__init__(daemon=True)
        self.pid = pid
        self.stats = stats
        self.samples: list[dict] = []  # t, phase, ops, VmRSS, VmHWM, Threads, fds
        self.phase = "connect"
        self.started_at = time.monotonic()
        self._halt = threading.Event()

    def sample(self) -> dict | None:
        try:
            s = rss_kib(self.pid)
        except (FileNotFoundError, ProcessLookupError):
            return None
        s["t"] = time.monotonic() - self.started_at
        s["phase"] = self.phase
        s["ops"] = self.stats.ops
        self.samples.append(s)
        return s

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(1.0)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)


async def connect(server) -> asyncpg.Connection:
    return await asyncpg.connect(
        host="127.0.0.1", port=server.pg_port, user="admin", password="quest", database="qdb",
        timeout=CONNECT_TIMEOUT_S, command_timeout=COMMAND_TIMEOUT_S,
    )


async def worker(conn_id: int, conn: asyncpg.Connection, deadline: float, stats: Stats,
                 inserted: list[int], rng: random.Random) -> None:
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    seq = 0
    max_v = row_v(conn_id, -1)  # the newest seed row
    ops = 0
    while time.monotonic() < deadline and ops < MAX_OPS_PER_CONN:
        kind = rng.choices(kinds, weights)[0]
        started = time.monotonic()
        try:
            if kind == "insert":
                status = await conn.execute(INSERT_SQL, *row(conn_id, seq))
                if status != "INSERT 0 1":
                    stats.error(conn_id, f"insert seq {seq}: status {status!r}")
                # Recorded even on an odd status: the final check shows whether it landed.
                inserted.append(seq)
                max_v = row_v(conn_id, seq)
                seq += 1
            elif kind == "point":
                # One of this connection's own rows (read-your-writes), or a seed row.
                pick = rng.choice(inserted) if inserted and rng.random() < 0.8 \
                    else -rng.randint(1, SEED_PER_CONN)
                rows = await conn.fetch(POINT_SQL, conn_id, pick)
                want = [(row_ts(conn_id, pick), row_v(conn_id, pick), row_tag(pick))]
                got = [tuple(r) for r in rows]
                if got != want:
                    stats.error(conn_id, f"point seq {pick}: got {got}, want {want}")
            elif kind == "aggregate":
                r = await conn.fetchrow(AGGREGATE_SQL, conn_id)
                want = (SEED_PER_CONN + len(inserted), max_v)
                if tuple(r) != want:
                    stats.error(conn_id, f"aggregate: got {tuple(r)}, want {want}")
            elif kind == "select1":
                # Not `$1::bigint + 1`: Sundial describes a parameter under a cast as text
                # (PostgreSQL: as the cast's type), and asyncpg then refuses an int.
                got = await conn.fetchval("SELECT $1 + 1", conn_id)
                if got != conn_id + 1:
                    stats.error(conn_id, f"select1: got {got!r}")
            elif kind == "simple":
                # No arguments: asyncpg sends a simple Query message.
                status = await conn.execute("SELECT 1")
                if status != "SELECT 1":
                    stats.error(conn_id, f"simple query: status {status!r}")
            elif kind == "catalog":
                got = await conn.fetchval(CATALOG_SQL, "soak")
                if got != "soak":
                    stats.error(conn_id, f"catalog: got {got!r}")
        except Exception as e:  # noqa: BLE001 - every failure is a finding
            stats.error(conn_id, f"{kind} failed", e)
            if conn.is_closed():
                return
        ops += 1
        stats.ops += 1
        stats.latencies[kind].append(time.monotonic() - started)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def test_soak_200_connections(server):
    assert server.running
    pid = server.proc.pid
    stats = Stats()
    sampler = Sampler(pid, stats)
    baseline = rss_kib(pid)
    print(f"\nsoak: {CONNECTIONS} connections, {DURATION_S:.0f} s, server pid {pid}, "
          f"RSS at start {mib(baseline['VmRSS'])} MiB, {baseline['fds']} fds")
    run_started = time.monotonic()
    sampler.start()
    inserted: dict[int, list[int]] = {c: [] for c in range(CONNECTIONS)}

    async def main():
        admin = await connect(server)
        await admin.execute(
            "CREATE TABLE soak (ts TIMESTAMP, conn INT, seq LONG, v DOUBLE, tag SYMBOL) "
            "TIMESTAMP(ts) PARTITION BY HOUR"
        )
        seed = [row(c, -k) for c in range(CONNECTIONS) for k in range(1, SEED_PER_CONN + 1)]
        status = await admin.copy_records_to_table("soak", records=seed)
        assert status == f"COPY {len(seed)}", status

        gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

        async def open_one(i: int) -> asyncpg.Connection:
            async with gate:
                return await connect(server)

        t0 = time.monotonic()
        results = await asyncio.gather(*(open_one(i) for i in range(CONNECTIONS)),
                                       return_exceptions=True)
        failed = [(i, r) for i, r in enumerate(results) if isinstance(r, BaseException)]
        conns = [r for r in results if not isinstance(r, BaseException)]
        if failed:
            for c in conns:
                await c.close()
            await admin.close()
            pytest.fail(f"{len(failed)} of {CONNECTIONS} connections failed, first: "
                        f"{failed[0][0]}: {failed[0][1]!r}")
        print(f"soak: {CONNECTIONS} connections open in {time.monotonic() - t0:.1f} s")

        sampler.phase = "load"
        load_started = time.monotonic()
        deadline = load_started + DURATION_S
        tasks = [worker(i, c, deadline, stats, inserted[i], random.Random(i))
                 for i, c in enumerate(conns)]
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=DURATION_S + 2 * COMMAND_TIMEOUT_S)
        except asyncio.TimeoutError:
            stats.error(-1, f"workers did not finish within {DURATION_S + 2 * COMMAND_TIMEOUT_S:.0f} s "
                            "of the start (server hang?)")
        load_s = time.monotonic() - load_started
        sampler.phase = "verify"

        async def verify():
            return await check_connections(conns), await fresh_counts()

        try:
            usable_errors, (got_rows, seed_count, total) = await asyncio.wait_for(
                verify(), timeout=VERIFY_TIMEOUT_S)
        except asyncio.TimeoutError:
            pytest.fail(f"checking the connections after the load took over {VERIFY_TIMEOUT_S:.0f} s "
                        f"(server hang?); errors during the load: {stats.errors[:5]}")
        for c in conns:
            await c.close()
        await admin.close()
        return load_s, usable_errors, got_rows, seed_count, total

    async def check_connections(conns):
        # Every connection still answers, and sees exactly its own rows.
        usable_errors: list[str] = []
        for i, c in enumerate(conns):
            try:
                n = await c.fetchval("SELECT count(*) FROM soak WHERE conn = $1 AND seq >= 0", i)
                if n != len(inserted[i]):
                    usable_errors.append(f"conn {i}: count {n}, inserted {len(inserted[i])}")
            except Exception as e:  # noqa: BLE001
                usable_errors.append(f"conn {i}: {type(e).__name__}: {e}")
        return usable_errors

    async def fresh_counts():
        # A fresh connection: every inserted row is there exactly once, with its values.
        fresh = await connect(server)
        try:
            got_rows = await fresh.fetch("SELECT ts, conn, seq, v, tag FROM soak WHERE seq >= 0")
            seed_count = await fresh.fetchval("SELECT count(*) FROM soak WHERE seq < 0")
            total = await fresh.fetchval("SELECT count(*) FROM soak")
        finally:
            await fresh.close()
        return got_rows, seed_count, total

    try:
        load_s, usable_errors, got_rows, seed_count, total = asyncio.run(main())
    finally:
        sampler.stop()

    # ---- report ---------------------------------------------------------------------------
    load = [s for s in sampler.samples if s["phase"] == "load"]
    print("soak: t(s)  phase    RSS(MiB)  anon  file  HWM(MiB) threads fds  ops/s")
    prev = None
    for s in sampler.samples:
        rate = ""
        if prev is not None and s["t"] > prev["t"]:
            rate = f"{(s['ops'] - prev['ops']) / (s['t'] - prev['t']):.0f}"
        print(f"soak: {s['t']:5.1f}  {s['phase']:<7} {mib(s['VmRSS']):>8} {mib(s['RssAnon']):>5} "
              f"{mib(s['RssFile']):>5}  {mib(s['VmHWM']):>8} "
              f"{s['Threads']:>7} {s['fds']:>4}  {rate}")
        prev = s
    n_inserted = sum(len(v) for v in inserted.values())
    print(f"soak: {stats.ops} ops in {load_s:.1f} s = {stats.ops / load_s:.0f} ops/s "
          f"({n_inserted} inserts, {n_inserted / load_s:.0f}/s)")
    for kind, lat in stats.latencies.items():
        print(f"soak:   {kind:<9} {len(lat):>6} ops, latency p50 {percentile(lat, 0.5) * 1000:7.1f} ms, "
              f"p99 {percentile(lat, 0.99) * 1000:7.1f} ms, max {max(lat, default=float('nan')) * 1000:7.1f} ms")

    # ---- checks ---------------------------------------------------------------------------
    assert stats.error_count == 0, (
        f"{stats.error_count} errors during the soak ({stats.errors_by_kind}); first ones:\n" + "\n".join(stats.errors)
        + f"\nserver log tail:\n{server.log()[-4000:]}"
    )
    assert not usable_errors, "after the load:\n" + "\n".join(usable_errors[:20])
    assert n_inserted > 0, "no INSERT ran"

    want = {(c, s) for c, seqs in inserted.items() for s in seqs}
    got = [(r["conn"], r["seq"]) for r in got_rows]
    assert len(got) == len(set(got)), "duplicate rows: " + str(
        sorted({k for k in got if got.count(k) > 1})[:20])
    missing = sorted(want - set(got))
    extra = sorted(set(got) - want)
    assert not missing and not extra, f"missing {missing[:20]} ({len(missing)}), extra {extra[:20]} ({len(extra)})"
    for r in got_rows:
        assert tuple(r) == row(r["conn"], r["seq"]), tuple(r)
    assert seed_count == CONNECTIONS * SEED_PER_CONN
    assert total == seed_count + n_inserted

    # Memory: thirds of the load phase; the first is warm-up.
    assert len(load) >= 6, f"too few RSS samples during the load: {len(load)}"
    third = len(load) // 3
    middle = max(s["VmRSS"] for s in load[third:2 * third])
    last = max(s["VmRSS"] for s in load[2 * third:])
    limit = middle * RSS_GROWTH_FACTOR + RSS_GROWTH_SLACK_KIB
    print(f"soak: RSS max middle third {mib(middle)} MiB, last third {mib(last)} MiB "
          f"(limit {mib(int(limit))} MiB)")
    assert last <= limit, (
        f"server RSS kept growing under a steady load: max {mib(middle)} MiB over the middle "
        f"third, {mib(last)} MiB over the last (limit {mib(int(limit))} MiB)"
    )

    # The clients are gone: the server closes their sockets (fds back near the baseline).
    assert server.running, f"server died; log:\n{server.log()[-4000:]}"
    deadline = time.monotonic() + 15
    while True:
        fds = rss_kib(pid)["fds"]
        if fds <= baseline["fds"] + FD_SLACK or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert fds <= baseline["fds"] + FD_SLACK, (
        f"server still holds {fds} fds after all clients closed (baseline {baseline['fds']}): "
        + ", ".join(sorted(fd_targets(pid)))
    )

    async def fresh_connection():
        c = await connect(server)
        try:
            return await c.fetchval("SELECT count(*) FROM soak")
        finally:
            await c.close()

    assert asyncio.run(fresh_connection()) == total
    after = rss_kib(pid)
    print(f"soak: after closing: RSS {mib(after['VmRSS'])} MiB, {after['fds']} fds, "
          f"{after['Threads']} threads")

    assert "panicked" not in server.log(), server.log()[-4000:]
    # A clean shutdown commits everything; the rows are on disk.
    server.stop()
    on_disk = server.sql("SELECT count(*) AS n, count(DISTINCT conn) AS c FROM soak WHERE seq >= 0")
    assert on_disk == [{"n": n_inserted, "c": sum(1 for v in inserted.values() if v)}], on_disk
    print(f"soak: total {time.monotonic() - run_started:.1f} s")

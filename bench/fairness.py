#!/usr/bin/env python3
"""Cheap statements beside many heavy ones: the same load against a release server without a
bound on running heavy queries (`--queries-running-max 0`) and with the default (two per core),
one after the other in one run.

    bench/fairness.sh            (builds the release server, then runs this)

Each server gets a table of ROWS rows; HEAVY clients (psycopg, one connection each) run a
GROUP BY over all of it in a loop, while one client times `SELECT 1`, one `SELECT ... LIMIT 1`
over the table and one a count over a 1,000-row slice of it, one after the other. After
WARMUP_S seconds the timings run for DURATION_S seconds.

Reports `result:` lines:
  latency_ms   p50, p99 and max of each light statement, per mode; ratio_to_unbounded
  heavy        heavy queries completed per second, per mode; ratio_to_unbounded
Needs target/test-venv (tests/clients/setup.sh makes it).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from release_server import BIN, Server  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ROWS = int(os.environ.get("ROWS", "10000000"))
HEAVY = int(os.environ.get("HEAVY", "100"))
WARMUP_S = float(os.environ.get("WARMUP_S", "5"))
DURATION_S = float(os.environ.get("DURATION_S", "30"))

HEAVY_SQL = "SELECT k % 1000 AS g, count(*), sum(i) FROM big GROUP BY 1 ORDER BY 1 LIMIT 3"
LIGHT = {
    "select_1": "SELECT 1",
    "limit_1": "SELECT k FROM big LIMIT 1",
    "slice_count": "SELECT count(*) FROM big WHERE ts < '1970-01-01T00:00:00.001Z'",
}


def connect(server: Server) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=server.pg, user="admin", password="quest",
                           dbname="qdb",
                           autocommit=True)


def load(server: Server) -> None:
    """ROWS rows, one per microsecond from the epoch (so the slice's 1,000 rows are the first)."""
    with connect(server) as conn:
        conn.execute("CREATE TABLE big (ts TIMESTAMP, k LONG, i LONG) TIMESTAMP(ts) "
                     "PARTITION BY HOUR")
        chunk = 1_000_000
        for first in range(0, ROWS, chunk):
            last = min(first + chunk, ROWS) - 1
            conn.execute(f"INSERT INTO big SELECT to_timestamp_micros(value), value, value % 7 "
                         f"FROM generate_series({first}, {last})")
        (count,) = conn.execute("SELECT count(*) FROM big").fetchone()
        assert count == ROWS, count


def run(server: Server) -> tuple[dict[str, list[float]], float]:
    """Latencies (ms) of each light statement, and heavy queries completed per second."""
    stop = threading.Event()
    measuring = threading.Event()
    completed = [0] * HEAVY
    errors: list[str] = []

    def heavy(slot: int) -> None:
        try:
            with connect(server) as conn:
                while not stop.is_set():
                    conn.execute(HEAVY_SQL).fetchall()
                    if measuring.is_set():
                        completed[slot] += 1
        except Exception as e:  # a failure is reported, not hidden
            errors.append(f"heavy: {e}")

    threads = [threading.Thread(target=heavy, args=(n,), daemon=True) for n in range(HEAVY)]
    for t in threads:
        t.start()
    latencies: dict[str, list[float]] = {name: [] for name in LIGHT}
    with connect(server) as conn:
        time.sleep(WARMUP_S)
        measuring.set()
        start = time.monotonic()
        while time.monotonic() - start < DURATION_S:
            for name, sql in LIGHT.items():
                began = time.perf_counter()
                conn.execute(sql).fetchall()
                latencies[name].append((time.perf_counter() - began) * 1000)
        elapsed = time.monotonic() - start
        measuring.clear()
    stop.set()
    for t in threads:
        t.join(timeout=600)
    if errors:
        sys.exit("\n".join(errors[:5]))
    return latencies, sum(completed) / elapsed


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> None:
    if not BIN.exists():
        sys.exit(f"{BIN} missing: cargo build --release -p sundial-server")
    work = Path(tempfile.mkdtemp(prefix="sundial-fairness-bench."))
    print(f"# bench/fairness.py on {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, "
          f"{os.cpu_count()} cores, release build; {ROWS} rows, {HEAVY} heavy clients "
          f"({HEAVY_SQL}), {DURATION_S:.0f} s measured after {WARMUP_S:.0f} s", flush=True)
    runs = {}
    connections = ["--pg-connections-max", str(HEAVY + 16)]
    for mode, flags, ports in [("unbounded", ["--queries-running-max", "0"], (29200, 29201, 29202)),
                               ("default", [], (29210, 29211, 29212))]:
        server = Server(work, mode, ports, [*connections, *flags])
        try:
            load(server)
            runs[mode] = run(server)
        finally:
            server.stop()
    base_latencies, base_heavy = runs["unbounded"]
    for mode, (latencies, heavy_rate) in runs.items():
        for name, values in latencies.items():
            for stat, value in [("p50", statistics.median(values)),
                                ("p99", percentile(values, 99)), ("max", max(values))]:
                base_values = base_latencies[name]
                base = {"p50": statistics.median(base_values), "p99": percentile(base_values, 99),
                        "max": max(base_values)}[stat]
                print(f"result: bench=latency_ms query={name} stat={stat} mode={mode} "
                      f"ms={value:.2f} samples={len(values)} ratio_to_unbounded={value / base:.3f}",
                      flush=True)
        print(f"result: bench=heavy mode={mode} queries_per_s={heavy_rate:.2f} "
              f"ratio_to_unbounded={heavy_rate / base_heavy:.3f}", flush=True)


if __name__ == "__main__":
    main()

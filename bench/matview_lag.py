#!/usr/bin/env python3
"""bench/matviews.sh's measurements over a server's HTTP /exec (Sundial or QuestDB alike),
with nothing but Python's standard library.

    matview_lag.py lag HOST:PORT VIEW... [--interval 0.1]
        Polls `materialized_views()` every --interval seconds until SIGTERM or SIGINT. For each
        view and each base_table_txn value T, first seen at t0, notes the first poll t1 at which
        the view's refresh_base_table_txn >= T; the refresh lag of T is t1 - t0. On the signal
        it prints one line per view: view=.. txns=.. p50_ms=.. p99_ms=.. max_ms=.. pending=..
        polls=.. (pending: values not refreshed yet; the resolution is the poll interval).

    matview_lag.py caught-up HOST:PORT VIEW... [--timeout 600] [--interval 0.02]
        Waits until every view is view_status = 'valid' with refresh_base_table_txn =
        base_table_txn and prints catchup_s=.. (exit status 1 on the timeout).

    matview_lag.py dashboard HOST:PORT --from TS --to TS [--runs 20] [--warmup 2]
                   [--host host_7]
        Times a dashboard query from raw rows (`SAMPLE BY 1h` over cpu) against the same from
        the view cpu_1h, for all hosts and for one, alternating raw and view: the time from
        sending the request until the whole answer is read. Prints one line per query:
        query=.. raw_median_ms=.. raw_p99_ms=.. view_median_ms=.. view_p99_ms=.. raw_rows=..
        view_rows=.. speedup=.. and a warning on stderr when the row counts differ.
"""

import argparse
import http.client
import json
import signal
import statistics
import sys
import time
import urllib.parse


class Exec:
    """One kept-alive HTTP connection to /exec; reconnects once on a broken connection."""

    def __init__(self, address, timeout=120):
        host, _, port = address.rpartition(":")
        self.host, self.port, self.timeout = host, int(port), timeout
        self.conn = None

    def raw(self, query):
        """The answer's bytes; raises on a non-200 status."""
        path = "/exec?" + urllib.parse.urlencode({"query": query})
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request("GET", path)
                resp = self.conn.getresponse()
                body = resp.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
                continue
            if resp.status != 200:
                raise RuntimeError(f"{query}: HTTP {resp.status}: {body[:300]!r}")
            return body
        raise AssertionError("unreachable")

    def query(self, query):
        """The answer as (column names, rows)."""
        doc = json.loads(self.raw(query))
        if "error" in doc:
            raise RuntimeError(f"{query}: {doc['error']}")
        return [c["name"] for c in doc.get("columns", [])], doc.get("dataset", [])


LISTING = ("SELECT view_name, view_status, refresh_base_table_txn, base_table_txn "
           "FROM materialized_views()")


def listing(ex, views):
    """{view: (status, refresh_txn, base_txn)} for the views asked about."""
    _, rows = ex.query(LISTING)
    return {r[0]: (r[1], r[2], r[3]) for r in rows if r[0] in views}


def percentile(sorted_values, p):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * p // 100))
    return sorted_values[int(rank) - 1]


def cmd_lag(args):
    ex = Exec(args.http, timeout=10)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    first_seen = {v: {} for v in args.views}  # view -> {base txn not refreshed yet: t0}
    newest = {v: None for v in args.views}  # the highest base txn seen
    lags = {v: [] for v in args.views}
    polls = errors = 0
    started = time.monotonic()
    while not stop:
        try:
            state = listing(ex, args.views)
        except Exception:  # a busy or restarting server: count it and poll again
            errors += 1
            state = {}
        now = time.monotonic()
        polls += 1
        for view, (_, refresh_txn, base_txn) in state.items():
            pending = first_seen[view]
            if base_txn is not None and (newest[view] is None or base_txn > newest[view]):
                newest[view] = base_txn
                pending[base_txn] = now
            if refresh_txn is not None:
                for txn in [t for t in pending if t <= refresh_txn]:
                    lags[view].append((txn, now - pending.pop(txn)))
        time.sleep(max(0.0, args.interval - (time.monotonic() - now)))
    span = time.monotonic() - started
    for view in args.views:
        values = sorted(lag for _, lag in lags[view])
        print(f"view={view} txns={len(values)} p50_ms={percentile(values, 50) * 1000:.0f} "
              f"p99_ms={percentile(values, 99) * 1000:.0f} "
              f"max_ms={(values[-1] if values else float('nan')) * 1000:.0f} "
              f"pending={len(first_seen[view])} polls={polls} poll_errors={errors} "
              f"poll_ms={span / max(polls, 1) * 1000:.0f}")
    sys.stdout.flush()


def cmd_caught_up(args):
    ex = Exec(args.http, timeout=10)
    started = time.monotonic()
    last = None
    while time.monotonic() - started < args.timeout:
        try:
            last = listing(ex, args.views)
        except Exception as e:  # noqa: BLE001 - report the last failure on the timeout
            last = e
        if isinstance(last, dict) and len(last) == len(args.views) and all(
                s == "valid" and r is not None and r == b for s, r, b in last.values()):
            print(f"catchup_s={time.monotonic() - started:.2f}")
            return 0
        time.sleep(args.interval)
    print(f"views not caught up after {args.timeout}s: {last}", file=sys.stderr)
    return 1


def timed(ex, query):
    """(ms, rows) of one query: the clock runs from the request to the answer's last byte."""
    t0 = time.perf_counter()
    body = ex.raw(query)
    ms = (time.perf_counter() - t0) * 1000
    doc = json.loads(body)
    if "error" in doc:
        raise RuntimeError(f"{query}: {doc['error']}")
    return ms, len(doc.get("dataset", []))


def cmd_dashboard(args):
    ex = Exec(args.http)
    window = f"timestamp >= '{args.start}' AND timestamp < '{args.end}'"
    host = f" AND hostname = '{args.host}'"
    pairs = [
        ("all-hosts",
         f"SELECT timestamp, hostname, avg(usage_user) FROM cpu WHERE {window} SAMPLE BY 1h",
         f"SELECT timestamp, hostname, usage_user FROM cpu_1h WHERE {window}"),
        (args.host,
         f"SELECT timestamp, hostname, avg(usage_user) FROM cpu WHERE {window}{host} SAMPLE BY 1h",
         f"SELECT timestamp, hostname, usage_user FROM cpu_1h WHERE {window}{host}"),
    ]
    for name, raw_q, view_q in pairs:
        times = {"raw": [], "view": []}
        rows = {}
        for i in range(args.warmup + args.runs):
            for side, q in (("raw", raw_q), ("view", view_q)):
                ms, n = timed(ex, q)
                rows.setdefault(side, n)
                if n != rows[side]:
                    print(f"warning: {name} {side}: {n} rows, earlier {rows[side]}",
                          file=sys.stderr)
                if i >= args.warmup:
                    times[side].append(ms)
        if rows["raw"] != rows["view"]:
            print(f"warning: {name}: raw rows answer {rows['raw']} rows, the view "
                  f"{rows['view']}", file=sys.stderr)
        raw, view = sorted(times["raw"]), sorted(times["view"])
        raw_med, view_med = statistics.median(raw), statistics.median(view)
        print(f"query={name} raw_median_ms={raw_med:.2f} raw_p99_ms={percentile(raw, 99):.2f} "
              f"view_median_ms={view_med:.2f} view_p99_ms={percentile(view, 99):.2f} "
              f"raw_rows={rows['raw']} view_rows={rows['view']} "
              f"speedup={raw_med / view_med if view_med > 0 else float('nan'):.1f}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    lag = sub.add_parser("lag")
    lag.add_argument("http")
    lag.add_argument("views", nargs="+")
    lag.add_argument("--interval", type=float, default=0.1)
    cu = sub.add_parser("caught-up")
    cu.add_argument("http")
    cu.add_argument("views", nargs="+")
    cu.add_argument("--timeout", type=float, default=600)
    cu.add_argument("--interval", type=float, default=0.02)
    d = sub.add_parser("dashboard")
    d.add_argument("http")
    d.add_argument("--from", dest="start", required=True)
    d.add_argument("--to", dest="end", required=True)
    d.add_argument("--runs", type=int, default=20)
    d.add_argument("--warmup", type=int, default=2)
    d.add_argument("--host", default="host_7")
    args = p.parse_args()
    if args.cmd == "lag":
        cmd_lag(args)
        return 0
    if args.cmd == "caught-up":
        return cmd_caught_up(args)
    return cmd_dashboard(args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError, http.client.HTTPException) as e:
        print(f"matview_lag.py: {e}", file=sys.stderr)
        sys.exit(1)

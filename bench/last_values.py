#!/usr/bin/env python3
"""bench/last_values.sh's timings over a server's HTTP /exec (Sundial or QuestDB alike).

    last_values.py time HOST:PORT [--runs 50] [--warmup 3] NAME=SQL...
        Runs each query --warmup times, then --runs times, the queries taking turns, and
        prints per query: query=NAME median_ms=.. p99_ms=.. rows=.. (the clock runs from the
        request to the answer's last byte).
"""

import argparse
import statistics
import sys

from matview_lag import Exec, timed


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def cmd_time(args):
    ex = Exec(args.http)
    queries = [q.split("=", 1) for q in args.queries]
    times = {name: [] for name, _ in queries}
    rows = {}
    for i in range(args.warmup + args.runs):
        for name, sql in queries:
            ms, n = timed(ex, sql)
            rows[name] = n
            if i >= args.warmup:
                times[name].append(ms)
    for name, _ in queries:
        t = times[name]
        print(f"query={name} median_ms={statistics.median(t):.3f} "
              f"p99_ms={percentile(t, 99):.3f} rows={rows[name]}")
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("time")
    t.add_argument("http")
    t.add_argument("--runs", type=int, default=50)
    t.add_argument("--warmup", type=int, default=3)
    t.add_argument("queries", nargs="+")
    args = p.parse_args()
    return cmd_time(args)


if __name__ == "__main__":
    sys.exit(main())

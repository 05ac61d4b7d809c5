#!/usr/bin/env python3
"""Writes bench/timeseries-queries.txt: a battery for bench/analytics.sh
(`QUERIES=bench/timeseries-queries.txt bench/analytics.sh`) generated from templates, not tuned
for: the time-series operators (LATEST ON, ASOF/LT/SPLICE joins, SAMPLE BY and time-bucket
grouping) and ad-hoc filters and aggregates, each template crossed with the TSBS tables (`cpu`,
`readings`, `diagnostics`), their keys and columns, constants of several selectivities, time
ranges and the shapes around them. A fixed seed makes the file the same on every run:
`python3 bench/timeseries_queries.py`.

Constants are drawn from values present at every scale bench/analytics.sh loads (the first 200
hosts, the first 500 trucks, the first two days), so one file serves both scales. Every
statement is sent unchanged to QuestDB and Sundial and their answers are compared; the
families are the query's name up to its first `_`.
"""

import random
from pathlib import Path

SEED = 38
OUT = Path(__file__).with_name("timeseries-queries.txt")

HOSTS = [f"host_{i}" for i in range(200)]
TRUCKS = [f"truck_{i}" for i in range(500)]
SYMBOLS = {
    "region": ["us-east-1", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1",
               "ap-southeast-1", "ap-southeast-2", "ap-northeast-1", "sa-east-1"],
    "datacenter": ["us-east-1a", "us-west-2b", "eu-west-1c", "ap-southeast-1a", "sa-east-1b"],
    "os": ["Ubuntu15.10", "Ubuntu16.04LTS", "Ubuntu16.10"],
    "arch": ["x64", "x86"],
    "team": ["CHI", "LON", "NYC", "SF"],
    "service_environment": ["production", "staging", "test"],
    "fleet": ["East", "West", "North", "South"],
    "driver": ["Albert", "Derek", "Andy", "Seth", "Trish", "Rodney"],
    "model": ["G-2000", "F-150", "H-2"],
    "device_version": ["v1.0", "v1.5", "v2.0", "v2.3"],
}
TABLES = {
    "cpu": {
        "key": ("hostname", HOSTS),
        "tags": ["region", "datacenter", "os", "arch", "team", "service_environment"],
        # column: (low, high) of its values; LONG percentages
        "fields": {f"usage_{c}": (0, 100) for c in
                   ["user", "system", "idle", "nice", "iowait", "irq", "softirq", "steal"]},
        "long": True,
    },
    "readings": {
        "key": ("name", TRUCKS),
        "tags": ["fleet", "driver", "model", "device_version"],
        "fields": {"velocity": (0, 100), "fuel_consumption": (0, 50), "grade": (0, 100),
                   "heading": (0, 360), "latitude": (0, 90), "longitude": (0, 180),
                   "elevation": (0, 2216), "load_capacity": (1500, 5000)},
        "long": False,
    },
    "diagnostics": {
        "key": ("name", TRUCKS),
        "tags": ["fleet", "driver", "model", "device_version"],
        "fields": {"fuel_state": (0, 1), "current_load": (0, 4999),
                   "load_capacity": (1500, 5000), "fuel_capacity": (150, 300)},
        "long": False,
    },
}
# Time ranges inside the first two days (every scale holds them).
RANGES = [
    "timestamp IN '2016-01-01'",
    "timestamp IN '2016-01-02T06'",
    "timestamp >= '2016-01-01T12:00:00.000000Z' AND timestamp < '2016-01-02T00:00:00.000000Z'",
    "timestamp BETWEEN '2016-01-01T00:00:00.000000Z' AND '2016-01-01T03:59:59.999999Z'",
    "timestamp > '2016-01-02T20:00:00.000000Z'",
]
INTERVALS = ["1m", "10m", "1h", "6h", "1d"]
AGGS = ["avg", "max", "min", "sum", "count"]
# first and last only per named series (not its NULL-named rows): TSBS's series share
# timestamps, and which of several rows at one timestamp comes first depends on how the
# loader's workers interleaved them.
SERIES_AGGS = AGGS + ["first", "last"]


def quote(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


class Battery:
    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.lines: list[str] = []
        self.names: set[str] = set()

    def add(self, family: str, sql: str, scanned: list[tuple[str, str, int]] | None = None):
        name = f"{family}_{sum(1 for n in self.names if n.startswith(family + '_')) + 1:03d}"
        assert name not in self.names
        self.names.add(name)
        cols = ",".join(f"{t}:{c}:{b}" for t, c, b in scanned) if scanned else "-"
        self.lines.append(f"{name} | {cols} | {sql}")

    # Helpers drawing from a table's domains.
    def keys(self, table: str, k: int) -> str:
        return ", ".join(quote(v) for v in self.rng.sample(TABLES[table]["key"][1], k))

    def tag(self, table: str) -> str:
        return self.rng.choice(TABLES[table]["tags"])

    def field(self, table: str, but: tuple[str, ...] = ()) -> str:
        return self.rng.choice([f for f in TABLES[table]["fields"] if f not in but])

    def threshold(self, table: str, field: str, share: float) -> str:
        """A constant `field > c` keeps about `share` of rows for (assumed uniform values)."""
        lo, hi = TABLES[table]["fields"][field]
        c = hi - (hi - lo) * share
        return str(int(c)) if TABLES[table]["long"] else f"{c:.3f}".rstrip("0").rstrip(".")

    def predicate(self, table: str, share: float) -> str:
        field = self.field(table)
        return f"{field} > {self.threshold(table, field, share)}"

    def tag_eq(self, table: str) -> str:
        tag = self.tag(table)
        return f"{tag} = {quote(self.rng.choice(SYMBOLS[tag]))}"


def latest(b: Battery) -> None:
    for table in TABLES:
        key, _ = TABLES[table]["key"]
        for k in (1, 3, 10, 40):
            op = f"= {b.keys(table, 1)}" if k == 1 else f"IN ({b.keys(table, k)})"
            b.add("latest", f"SELECT * FROM {table} WHERE {key} {op} "
                            f"LATEST ON timestamp PARTITION BY {key}")
        b.add("latest", f"SELECT * FROM {table} LATEST ON timestamp PARTITION BY {key}")
        for _ in range(2):
            b.add("latest", f"SELECT * FROM {table} WHERE {b.tag_eq(table)} "
                            f"LATEST ON timestamp PARTITION BY {key}")
        for share in (0.5, 0.05, 0.001):
            b.add("latest", f"SELECT * FROM {table} WHERE {b.predicate(table, share)} "
                            f"LATEST ON timestamp PARTITION BY {key}")
        b.add("latest", f"SELECT * FROM {table} WHERE {b.tag_eq(table)} AND "
                        f"{b.predicate(table, 0.1)} LATEST ON timestamp PARTITION BY {key}")
        b.add("latest", f"SELECT * FROM {table} WHERE {key} IN ({b.keys(table, 5)}) AND "
                        f"{b.predicate(table, 0.3)} LATEST ON timestamp PARTITION BY {key}")
        for _ in range(2):
            tag = b.tag(table)
            b.add("latest", f"SELECT * FROM {table} LATEST ON timestamp PARTITION BY {tag}")
        tags = b.rng.sample(TABLES[table]["tags"], 2)
        b.add("latest", f"SELECT * FROM {table} LATEST ON timestamp PARTITION BY {tags[0]}, "
                        f"{tags[1]}")
        b.add("latest", f"SELECT * FROM {table} WHERE {b.rng.choice(RANGES[:4])} "
                        f"LATEST ON timestamp PARTITION BY {key}")
        f1, f2 = b.field(table), b.field(table)
        b.add("latest", f"SELECT timestamp, {key}, {f1} FROM {table} WHERE "
                        f"{key} IN ({b.keys(table, 3)}) LATEST ON timestamp PARTITION BY {key}")
        tag = b.tag(table)
        b.add("latest", f"SELECT {tag}, count(*), avg({f2}) FROM (SELECT * FROM {table} "
                        f"LATEST ON timestamp PARTITION BY {key}) GROUP BY {tag}")


def sample(b: Battery) -> None:
    for table in TABLES:
        key, _ = TABLES[table]["key"]
        for interval in INTERVALS:
            f1, f2 = b.field(table), b.field(table)
            a1, a2 = b.rng.sample(AGGS, 2)
            # no key, a low-cardinality key, the series key, two keys
            b.add("sample", f"SELECT timestamp, {a1}({f1}), {a2}({f2}) FROM {table} "
                            f"SAMPLE BY {interval}")
            tag = b.tag(table)
            b.add("sample", f"SELECT timestamp, {tag}, {a1}({f1}) FROM {table} "
                            f"SAMPLE BY {interval}")
            s1 = b.rng.choice(SERIES_AGGS)
            if interval not in ("1m",):
                b.add("sample", f"SELECT timestamp, {key}, {a2}({f2}), count(*) FROM {table} "
                                f"SAMPLE BY {interval}")
            b.add("sample", f"SELECT timestamp, {key}, {s1}({f1}) FROM {table} "
                            f"WHERE {key} IN ({b.keys(table, 3)}) SAMPLE BY {interval}")
            b.add("sample", f"SELECT timestamp, {a1}({f1}) FROM {table} WHERE "
                            f"{b.tag_eq(table)} AND {b.predicate(table, 0.2)} "
                            f"SAMPLE BY {interval}")
            t1, t2 = b.rng.sample(TABLES[table]["tags"], 2)
            b.add("sample", f"SELECT timestamp, {t1}, {t2}, {a2}({f2}) FROM {table} "
                            f"WHERE {b.rng.choice(RANGES)} SAMPLE BY {interval}")
        for fill in ("NULL", "PREV", "0", "LINEAR"):
            f1 = b.field(table)
            b.add("sample", f"SELECT timestamp, avg({f1}) FROM {table} WHERE "
                            f"{key} = {b.keys(table, 1)} AND {b.predicate(table, 0.02)} "
                            f"SAMPLE BY 1h FILL({fill})")


def bucket(b: Battery) -> None:
    """Time buckets written as functions and GROUP BY, and regroupings over them."""
    for table in TABLES:
        key, _ = TABLES[table]["key"]
        for interval in ("15m", "1h", "1d"):
            f1 = b.field(table)
            tag = b.tag(table)
            b.add("bucket", f"SELECT timestamp_floor('{interval}', timestamp) AS t, {tag}, "
                            f"max({f1}), count(*) FROM {table} GROUP BY t, {tag}")
            b.add("bucket", f"SELECT timestamp_floor('{interval}', timestamp) AS t, {key}, "
                            f"avg({f1}) FROM {table} WHERE {b.tag_eq(table)} GROUP BY t, {key}")
        for unit in ("hour", "day"):
            f1 = b.field(table)
            b.add("bucket", f"SELECT date_trunc('{unit}', timestamp) AS t, min({f1}), "
                            f"max({f1}) FROM {table} WHERE {b.predicate(table, 0.5)} GROUP BY t")
        f1 = b.field(table)
        b.add("bucket", f"SELECT cast(timestamp AS long) / 3600000000 AS h, count(*), "
                        f"sum({f1}) FROM {table} GROUP BY h")
        for inner in ("10m", "1h"):
            f1, f2 = b.field(table), b.field(table)
            tag = b.tag(table)
            b.add("bucket", f"WITH s AS (SELECT timestamp, {key}, {tag}, max({f1}) AS m, "
                            f"avg({f2}) AS a FROM {table} WHERE {b.predicate(table, 0.6)} "
                            f"SAMPLE BY {inner}) SELECT timestamp_floor('1d', timestamp) AS d, "
                            f"{tag}, avg(m), max(a), count(*) FROM s GROUP BY d, {tag}")
            b.add("bucket", f"WITH s AS (SELECT timestamp_floor('{inner}', timestamp) AS t, "
                            f"{tag}, avg({f1}) AS a, count(*) AS c FROM {table} GROUP BY t, "
                            f"{tag}) SELECT {tag}, max(a), sum(c) FROM s WHERE a > "
                            f"{b.threshold(table, f1, 0.5)} GROUP BY {tag}")


def joins(b: Battery) -> None:
    # Two series of one table, keyless: a host against another, a truck against another.
    for table in TABLES:
        key, _ = TABLES[table]["key"]
        for kind in ("ASOF", "LT", "SPLICE"):
            k1, k2 = b.rng.sample(TABLES[table]["key"][1], 2)
            f1 = b.field(table)
            b.add("join", f"SELECT count(*), avg(b.{f1}), max(a.{f1}) FROM "
                          f"(SELECT * FROM {table} WHERE {key} = {quote(k1)}) a {kind} JOIN "
                          f"(SELECT * FROM {table} WHERE {key} = {quote(k2)}) b")
    # readings against diagnostics by truck (keyed), over ranges and with filters.
    for kind in ("ASOF", "LT"):
        for rng in RANGES[:3]:
            b.add("join", f"SELECT count(*), avg(d.fuel_state), max(r.velocity) FROM "
                          f"(SELECT * FROM readings WHERE {rng}) r {kind} JOIN "
                          f"(SELECT * FROM diagnostics WHERE {rng}) d ON (name)")
        b.add("join", f"SELECT count(*), avg(d.current_load) FROM readings r {kind} JOIN "
                      f"diagnostics d ON (name) WHERE r.{b.predicate('readings', 0.01)}")
        b.add("join", f"SELECT count(*), min(d.fuel_state) FROM readings r {kind} JOIN "
                      f"diagnostics d ON (name)")
        b.add("join", f"SELECT r.timestamp, r.name, r.velocity, d.fuel_state FROM "
                      f"(SELECT * FROM readings WHERE name IN ({b.keys('readings', 3)})) r "
                      f"{kind} JOIN diagnostics d ON (name)")
    b.add("join", "SELECT count(*), avg(d.fuel_state) FROM readings r ASOF JOIN diagnostics d "
                  "ON (name) TOLERANCE 30s")
    b.add("join", f"SELECT count(*), max(b.usage_user) FROM (SELECT * FROM cpu WHERE "
                  f"{RANGES[1]}) a ASOF JOIN (SELECT * FROM cpu WHERE {RANGES[1]}) b "
                  f"ON (hostname)")
    # Time-ordered inputs that are not tables: SAMPLE BY and LATEST-free subqueries.
    # (QuestDB wants a keyed SAMPLE BY declared as ordered, `((query) timestamp(ts)) alias`.)
    b.add("join", "SELECT count(*), avg(d.f) FROM ((SELECT timestamp, name, avg(velocity) v "
                  "FROM readings SAMPLE BY 1h) timestamp(timestamp)) r ASOF JOIN ((SELECT "
                  "timestamp, name, avg(fuel_state) f FROM diagnostics SAMPLE BY 1h) "
                  "timestamp(timestamp)) d ON (name)")
    b.add("join", f"SELECT count(*), avg(b.u) FROM ((SELECT timestamp, hostname, "
                  f"max(usage_user) u FROM cpu WHERE hostname IN ({b.keys('cpu', 5)}) "
                  f"SAMPLE BY 10m) timestamp(timestamp)) a ASOF JOIN ((SELECT timestamp, "
                  f"hostname, avg(usage_user) u FROM cpu SAMPLE BY 10m) timestamp(timestamp)) b "
                  f"ON (hostname)")


def adhoc(b: Battery) -> None:
    for table in TABLES:
        fields = list(TABLES[table]["fields"])
        size = 8

        def sc(*cols: str, t: str = table) -> list[tuple[str, str, int]]:
            return [(t, c, 4 if c in SYMBOLS or c in ("hostname", "name") else size)
                    for c in cols]

        # counts under filters of several selectivities and shapes
        for share in (0.9, 0.3, 0.01):
            f = b.field(table)
            b.add("filter", f"SELECT count(*) FROM {table} WHERE "
                            f"{f} > {b.threshold(table, f, share)}", sc(f))
        f1, f2 = b.rng.sample(fields, 2)
        lo, hi = b.threshold(table, f1, 0.6), b.threshold(table, f1, 0.4)
        # (QuestDB 9.3.4 takes BETWEEN for timestamps only)
        b.add("filter", f"SELECT count(*) FROM {table} WHERE {f1} >= {lo} AND {f1} <= {hi}",
              sc(f1))
        b.add("filter", f"SELECT count(*) FROM {table} WHERE {f1} > "
                        f"{b.threshold(table, f1, 0.5)} AND {f2} < "
                        f"{b.threshold(table, f2, 0.5)}", sc(f1, f2))
        b.add("filter", f"SELECT count(*) FROM {table} WHERE {f1} > "
                        f"{b.threshold(table, f1, 0.02)} OR {f2} > "
                        f"{b.threshold(table, f2, 0.02)}", sc(f1, f2))
        f3 = b.field(table, (f1, f2))
        b.add("filter", f"SELECT count(*) FROM {table} WHERE {f1} > "
                        f"{b.threshold(table, f1, 0.7)} AND {f2} > "
                        f"{b.threshold(table, f2, 0.7)} AND {f3} < "
                        f"{b.threshold(table, f3, 0.3)}", sc(f1, f2, f3))
        tag = b.tag(table)
        values = b.rng.sample(SYMBOLS[tag], 2)
        b.add("filter", f"SELECT count(*) FROM {table} WHERE {tag} IN "
                        f"({', '.join(quote(v) for v in values)})", sc(tag))
        b.add("filter", f"SELECT count(*) FROM {table} WHERE {b.tag_eq(table)} AND "
                        f"{f3} > {b.threshold(table, f3, 0.5)}")
        key, _ = TABLES[table]["key"]
        b.add("filter", f"SELECT count(*), max({f2}) FROM {table} WHERE {key} IN "
                        f"({b.keys(table, 10)})")
        b.add("filter", f"SELECT {key}, timestamp, {f1} FROM {table} WHERE {f1} > "
                        f"{b.threshold(table, f1, 0.0002)} AND {f2} < "
                        f"{b.threshold(table, f2, 0.5)}")
        b.add("filter", f"SELECT count(*), avg({f2}) FROM {table} WHERE "
                        f"{b.rng.choice(RANGES)} AND {f1} > {b.threshold(table, f1, 0.5)}")
        # global aggregates
        for n in (1, 3, 5):
            cols = b.rng.sample(fields, min(n, len(fields)))
            aggs = ", ".join(f"{b.rng.choice(['sum', 'avg', 'min', 'max'])}({c})"
                             for c in cols)
            b.add("aggregate", f"SELECT {aggs} FROM {table}", sc(*cols))
        f1, f2 = b.rng.sample(fields, 2)
        b.add("aggregate", f"SELECT count(*), avg({f1}), max({f2}) FROM {table} WHERE "
                           f"{f2} > {b.threshold(table, f2, 0.5)}", sc(f1, f2))
        b.add("aggregate", f"SELECT count({f1}), count(*) FROM {table}", sc(f1))
        # groupings by keys
        for keys in ([b.tag(table)], [key], b.rng.sample(TABLES[table]["tags"], 2)):
            f1 = b.field(table)
            agg = b.rng.choice(["sum", "avg", "min", "max"])
            k = ", ".join(keys)
            b.add("group", f"SELECT {k}, {agg}({f1}), count(*) FROM {table} GROUP BY {k}",
                  sc(*keys, f1))
            b.add("group", f"SELECT {k}, {agg}({f1}) FROM {table} WHERE {f1} > "
                           f"{b.threshold(table, f1, 0.3)} GROUP BY {k}")
        f1 = b.field(table)
        b.add("group", f"SELECT {key}, avg({f1}) FROM {table} GROUP BY {key} "
                       f"ORDER BY 2 DESC, 1 LIMIT 5", sc(key, f1))
        tag = b.tag(table)
        b.add("group", f"SELECT {tag}, count(DISTINCT {key}) FROM {table} GROUP BY {tag}",
              sc(tag, key))
        b.add("group", f"SELECT count(DISTINCT {key}) FROM {table} WHERE "
                       f"{b.predicate(table, 0.05)}")
        b.add("group", f"SELECT DISTINCT {b.tag(table)} FROM {table}")


def main() -> None:
    b = Battery()
    for family in (latest, sample, bucket, joins, adhoc):
        family(b)
    header = [
        "# Generated by bench/timeseries_queries.py (seed 38): time-series operators and ad-hoc",
        "# analytics from templates. name | columns a full scan reads (table:column:bytes) | SQL",
    ]
    OUT.write_text("\n".join(header + b.lines) + "\n")
    print(f"wrote {len(b.lines)} queries to {OUT}")


if __name__ == "__main__":
    main()

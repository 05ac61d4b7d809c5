"""Deterministic TSBS-shaped data and queries for the client tests, made here so that the tests
need nothing outside the repository.

`devops_rows()` has the shape of TSBS's devops `cpu-only` use case at scale 100 over one day:
100 hosts `host_0` .. `host_99`, each with TSBS's ten tags (hostname, region, datacenter, rack,
os, arch, team, service, service_version, service_environment) and ten integer fields
(usage_user .. usage_guest_nice), one row per host every 10 s from 2016-01-01T00:00:00Z to the
end of that day (864,000 rows, nanosecond timestamps), rows ordered by time then host. Each
field is a random walk that stays within 0..100. `iot_lines()` is a smaller set in the shape of
TSBS's iot use case (`readings` and `diagnostics` of trucks), with the gaps loaders must take:
rows missing a tag or a field, and exact duplicate points.

`devops_queries(kind, per_type)` writes the query shapes TSBS sends for the devops use case:
`kind="questdb"` (13 types, QuestDB dialect, timestamp column `timestamp`) or
`kind="timescaledb"` (15 types, PostgreSQL dialect, timestamp column `time`), with random hosts
and time windows inside the data's day.

Everything comes from a seeded `random.Random`: the same arguments give the same bytes.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator

START_NS = 1_451_606_400_000_000_000  # 2016-01-01T00:00:00Z
DAY_S = 86_400
INTERVAL_S = 10
HOSTS = 100
STEPS = DAY_S // INTERVAL_S
DEVOPS_ROWS = HOSTS * STEPS  # 864,000

TAGS = [
    "hostname", "region", "datacenter", "rack", "os", "arch", "team", "service",
    "service_version", "service_environment",
]
METRICS = [
    "usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq",
    "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice",
]
REGIONS = [
    "us-east-1", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1",
    "ap-southeast-2", "ap-northeast-1", "sa-east-1",
]
OSES = ["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"]
ARCHES = ["x64", "x86"]
TEAMS = ["SF", "NYC", "LON", "CHI"]
ENVIRONMENTS = ["production", "staging", "test"]


def host_tags(rng: random.Random, host: int) -> list[str]:
    """The ten tag values of one host, in `TAGS` order."""
    region = rng.choice(REGIONS)
    return [
        f"host_{host}",
        region,
        f"{region}{rng.choice('abc')}",
        str(rng.randrange(100)),
        rng.choice(OSES),
        rng.choice(ARCHES),
        rng.choice(TEAMS),
        str(rng.randrange(20)),
        str(rng.randrange(2)),
        rng.choice(ENVIRONMENTS),
    ]


def step(rng: random.Random, value: int) -> int:
    """One step of a random walk that stays within 0..100."""
    value += rng.randint(-5, 5)
    return min(100, max(0, value))


def devops_rows(seed: int = 123) -> Iterator[tuple[list[str], list[int], int]]:
    """(tag values, field values, timestamp in ns) of every row, by time then host. The lists
    are reused from row to row: copy what must outlive the iteration step."""
    rng = random.Random(seed)
    tags = [host_tags(rng, h) for h in range(HOSTS)]
    values = [[rng.randrange(101) for _ in METRICS] for _ in range(HOSTS)]
    for t in range(STEPS):
        ts = START_NS + t * INTERVAL_S * 1_000_000_000
        for h in range(HOSTS):
            row = values[h]
            for i in range(len(row)):
                row[i] = step(rng, row[i])
            yield tags[h], row, ts


def devops_lines(seed: int = 123) -> bytes:
    """`devops_rows` as ILP (integer fields), one line per row."""
    series_by_host: dict[str, str] = {}
    out: list[str] = []
    for tags, values, ts in devops_rows(seed):
        series = series_by_host.get(tags[0])
        if series is None:
            series = "cpu," + ",".join(f"{k}={v}" for k, v in zip(TAGS, tags))
            series_by_host[tags[0]] = series
        fields = ",".join(f"{k}={v}i" for k, v in zip(METRICS, values))
        out.append(f"{series} {fields} {ts}\n")
    return "".join(out).encode()


IOT_READINGS = [
    "latitude", "longitude", "elevation", "velocity", "heading", "grade", "fuel_consumption",
]
IOT_DIAGNOSTICS = ["current_load", "fuel_state", "status"]


def iot_lines(trucks: int = 40, hours: int = 24, seed: int = 123) -> tuple[bytes, dict[str, int]]:
    """ILP in the shape of TSBS's iot use case, one reading and one diagnostics row per truck
    per minute, and the rows each table must end up with. About one row in 50 lacks a tag and
    one in 50 a field; about one in 500 is sent twice (a duplicate point is a row of its own)."""
    rng = random.Random(seed)
    fleets = ["East", "West", "North", "South"]
    models = ["F-150", "G-2000", "H-2"]
    trucks_tags = [
        [
            ("name", f"truck_{i}"),
            ("fleet", rng.choice(fleets)),
            ("driver", f"driver_{rng.randrange(50)}"),
            ("model", rng.choice(models)),
            ("device_version", f"v{rng.randrange(1, 4)}.0"),
        ]
        for i in range(trucks)
    ]
    out: list[str] = []
    counts = {"readings": 0, "diagnostics": 0}
    for minute in range(hours * 60):
        ts = START_NS + minute * 60 * 1_000_000_000
        for tags in trucks_tags:
            for table, fields in (("readings", IOT_READINGS), ("diagnostics", IOT_DIAGNOSTICS)):
                kept_tags = [t for t in tags if t[0] == "name" or rng.random() >= 0.02 / 4]
                kept_fields = [f for f in fields if rng.random() >= 0.02 / len(fields)]
                if not kept_fields:
                    kept_fields = fields[:1]
                series = table + "".join(f",{k}={v}" for k, v in kept_tags)
                values = ",".join(f"{f}={rng.uniform(0, 100):.5f}" for f in kept_fields)
                line = f"{series} {values} {ts}\n"
                copies = 2 if rng.random() < 0.002 else 1
                out.extend([line] * copies)
                counts[table] += copies
    return "".join(out).encode(), counts


# ---------------------------------------------------------------------------------------------
# Queries

QUESTDB_TYPES = [
    "single-groupby-1-1-1", "single-groupby-1-1-12", "single-groupby-1-8-1",
    "single-groupby-5-1-1", "single-groupby-5-1-12", "single-groupby-5-8-1",
    "double-groupby-1", "double-groupby-5", "double-groupby-all",
    "high-cpu-1", "high-cpu-all", "lastpoint", "groupby-orderby-limit",
]
TIMESCALEDB_TYPES = [*QUESTDB_TYPES, "cpu-max-all-1", "cpu-max-all-8"]


class Window:
    """A random time window of `hours` inside the data's day, at microsecond resolution."""

    def __init__(self, rng: random.Random, hours: float):
        span_us = int(hours * 3600 * 1_000_000)
        self.start_us = rng.randrange(DAY_S * 1_000_000 - span_us + 1)
        self.end_us = self.start_us + span_us

    @staticmethod
    def _time(us: int) -> dt.datetime:
        return dt.datetime(2016, 1, 1) + dt.timedelta(microseconds=us)

    @staticmethod
    def questdb(us: int) -> str:
        return Window._time(us).strftime("%Y-%m-%dT%H:%M:%SZ")

    @staticmethod
    def timescaledb(us: int) -> str:
        return Window._time(us).strftime("%Y-%m-%d %H:%M:%S.%f +0000")


def hosts(rng: random.Random, n: int) -> list[str]:
    return [f"host_{h}" for h in rng.sample(range(HOSTS), n)]


def questdb_query(query_type: str, rng: random.Random) -> str:
    q = Window.questdb
    if query_type.startswith("single-groupby-"):
        metrics, nhosts, hours = (int(x) for x in query_type.split("-")[2:])
        w = Window(rng, hours)
        select = ", ".join(f"max({m}) AS max_{m}" for m in METRICS[:metrics])
        names = ", ".join(f"'{h}'" for h in hosts(rng, nhosts))
        return (
            f"SELECT timestamp, {select} FROM cpu WHERE hostname IN ({names}) AND "
            f"timestamp >= '{q(w.start_us)}' AND timestamp < '{q(w.end_us)}' SAMPLE BY 1m;"
        )
    if query_type.startswith("double-groupby-"):
        n = query_type.split("-")[2]
        metrics = METRICS if n == "all" else METRICS[: int(n)]
        w = Window(rng, 12)
        select = ", ".join(f"avg({m}) AS avg_{m}" for m in metrics)
        return (
            f"SELECT timestamp, hostname, {select} FROM cpu WHERE "
            f"timestamp >= '{q(w.start_us)}' AND timestamp < '{q(w.end_us)}' "
            f"SAMPLE BY 1h GROUP BY timestamp, hostname;"
        )
    if query_type.startswith("high-cpu-"):
        w = Window(rng, 12)
        hosts_filter = ""
        if query_type == "high-cpu-1":
            hosts_filter = f"hostname IN ('{hosts(rng, 1)[0]}') AND "
        return (
            f"SELECT * FROM cpu WHERE usage_user > 90.0 AND {hosts_filter}"
            f"timestamp >= '{q(w.start_us)}' AND timestamp < '{q(w.end_us)}';"
        )
    if query_type == "lastpoint":
        return "SELECT * FROM cpu latest by hostname;"
    if query_type == "groupby-orderby-limit":
        w = Window(rng, 0)
        return (
            f"SELECT timestamp AS minute, max(usage_user) FROM cpu WHERE "
            f"timestamp < '{q(w.end_us)}' SAMPLE BY 1m LIMIT 5;"
        )
    raise ValueError(f"no questdb form of {query_type}")


def timescaledb_query(query_type: str, rng: random.Random) -> str:
    q = Window.timescaledb
    if query_type.startswith("single-groupby-") or query_type.startswith("cpu-max-all-"):
        if query_type.startswith("cpu-max-all-"):
            metrics, nhosts, hours, bucket, alias = len(METRICS), int(query_type[12:]), 8, 3600, "hour"
        else:
            metrics, nhosts, hours = (int(x) for x in query_type.split("-")[2:])
            bucket, alias = 60, "minute"
        w = Window(rng, hours)
        select = ", ".join(f"max({m}) as max_{m}" for m in METRICS[:metrics])
        names = ",".join(f"'{h}'" for h in hosts(rng, nhosts))
        order = f"{alias} ASC" if alias == "minute" else alias
        return (
            f"SELECT time_bucket('{bucket} seconds', time) AS {alias}, {select} FROM cpu "
            f"WHERE hostname IN ({names}) AND time >= '{q(w.start_us)}' AND "
            f"time < '{q(w.end_us)}' GROUP BY {alias} ORDER BY {order};"
        )
    if query_type.startswith("double-groupby-"):
        n = query_type.split("-")[2]
        metrics = METRICS if n == "all" else METRICS[: int(n)]
        w = Window(rng, 12)
        inner = ", ".join(f"avg({m}) as mean_{m}" for m in metrics)
        outer = ", ".join(f"mean_{m}" for m in metrics)
        return (
            f"WITH cpu_avg AS ( SELECT time_bucket('3600 seconds', time) as hour, hostname, "
            f"{inner} FROM cpu WHERE time >= '{q(w.start_us)}' AND time < '{q(w.end_us)}' "
            f"GROUP BY 1, 2 ) SELECT hour, hostname, {outer} FROM cpu_avg ORDER BY hour, hostname;"
        )
    if query_type.startswith("high-cpu-"):
        w = Window(rng, 12)
        hosts_filter = ""
        if query_type == "high-cpu-1":
            hosts_filter = f" AND hostname IN ('{hosts(rng, 1)[0]}')"
        return (
            f"SELECT * FROM cpu WHERE usage_user > 90.0 and time >= '{q(w.start_us)}' AND "
            f"time < '{q(w.end_us)}'{hosts_filter};"
        )
    if query_type == "lastpoint":
        return "SELECT DISTINCT ON (hostname) * FROM cpu ORDER BY hostname, time DESC;"
    if query_type == "groupby-orderby-limit":
        w = Window(rng, 0)
        return (
            f"SELECT time_bucket('60 seconds', time) AS minute, max(usage_user) FROM cpu "
            f"WHERE time < '{q(w.end_us)}' GROUP BY minute ORDER BY minute DESC LIMIT 5;"
        )
    raise ValueError(f"no timescaledb form of {query_type}")


def devops_queries(kind: str, per_type: int, seed: int = 123) -> list[tuple[str, str]]:
    """(type, SQL) for `per_type` queries of every devops type TSBS has in `kind`'s form."""
    types, make = {
        "questdb": (QUESTDB_TYPES, questdb_query),
        "timescaledb": (TIMESCALEDB_TYPES, timescaledb_query),
    }[kind]
    rng = random.Random(f"{seed}-{kind}")
    return [(t, make(t, rng)) for t in types for _ in range(per_type)]

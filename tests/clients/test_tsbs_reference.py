"""TSBS's devops queries on Sundial, checked value for value against DuckDB over the same rows.

The data has the shape of TSBS's `devops-cpu-s100-1d` (864,000 `cpu` rows, 100 hosts, one day)
and the queries the shapes TSBS sends (13 QuestDB and 15 TimescaleDB types, 20 of each), all made
by `tsbs_data` in this directory, so the test needs nothing outside the repository. The lines go
to two servers over ILP/TCP: one keeps ILP's default timestamp column (`timestamp`, for the
QuestDB form) and indexes `hostname` (as QuestDB users do), so its host filters read
through the symbol index; the other names it `time` (`--ilp-timestamp-column time`, for the
TimescaleDB form) and has no index. DuckDB loads the same rows into a table with
Sundial's columns, and runs an equivalent of each query:

- TimescaleDB's SQL runs in DuckDB as written (its literals' `+0000` dropped and `time_bucket`'s
  width typed as an interval);
- QuestDB's `SAMPLE BY n` becomes `GROUP BY time_bucket(n, timestamp)` ordered by bucket,
  `LATEST BY hostname` becomes `DISTINCT ON (hostname) ... ORDER BY hostname, timestamp DESC`.

Rows are compared as sorted lists of normalised values (timestamps to the microsecond, numbers
to 1e-6 relative), so every value of every row must match.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

import duckdb
import psycopg
import pytest

import tsbs_data

ROWS = tsbs_data.DEVOPS_ROWS
QUERIES_PER_TYPE = 20


@pytest.fixture(scope="module")
def ilp_lines() -> bytes:
    return tsbs_data.devops_lines()


def load(server, lines: bytes, table: str = "cpu") -> None:
    with socket.create_connection((server.host, server.tcp_port)) as s:
        for i in range(0, len(lines), 1 << 20):
            s.sendall(lines[i : i + (1 << 20)])
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            count = http_rows(server, f"SELECT count(*) FROM {table}")[0][0]
        except AssertionError:
            count = 0
        if count == ROWS:
            return
        time.sleep(0.5)
    pytest.fail(f"{ROWS} rows not queryable within 300 s; log:\n{server.log()}")


def http_rows(server, query: str) -> list[list]:
    url = f"{server.http_url}/exec?" + urllib.parse.urlencode({"query": query, "count": "false"})
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{query}: HTTP {e.code}: {e.read()!r}") from e
    return body["dataset"]


def pg_rows(server, query: str) -> list[tuple]:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        return conn.execute(query).fetchall()


@pytest.fixture(scope="module")
def reference(servers, tmp_path_factory) -> duckdb.DuckDBPyConnection:
    """DuckDB with `main.cpu` (column `timestamp`) and `tsdb.cpu` (the same, as `time`), its
    columns in the order Sundial created them."""
    tags = tsbs_data.TAGS
    fields = {m: "BIGINT" for m in tsbs_data.METRICS}
    names = [*tags, *fields, "timestamp"]
    csv_path = tmp_path_factory.mktemp("reference") / "cpu.csv"
    rows = 0
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(names)
        for tag_values, values, ts in tsbs_data.devops_rows():
            writer.writerow([*tag_values, *values, ts // 1000])
            rows += 1
    assert rows == ROWS
    types = {**{t: "VARCHAR" for t in tags}, **fields, "timestamp": "BIGINT"}
    con = duckdb.connect()
    con.execute(
        f"CREATE TABLE raw AS SELECT * FROM read_csv('{csv_path}', header = true, "
        f"columns = {{{', '.join(f'{n!r}: {t!r}' for n, t in types.items())}}})"
    )
    order = [r[0] for r in http_rows(servers[0], "SHOW COLUMNS FROM cpu")]
    assert sorted(order) == sorted(names), order
    select = ", ".join(
        'make_timestamp("timestamp") AS "timestamp"' if c == "timestamp" else f'"{c}"'
        for c in order
    )
    con.execute(f"CREATE TABLE cpu AS SELECT {select} FROM raw")
    con.execute("DROP TABLE raw")
    con.execute("CREATE SCHEMA tsdb")
    con.execute('CREATE VIEW tsdb.cpu AS SELECT * RENAME ("timestamp" AS time) FROM main.cpu')
    return con


@pytest.fixture(scope="module")
def servers(tmp_path_factory, ilp_lines):
    """(questdb-form server, timescaledb-form server), both loaded."""
    from conftest import Server, free_port, free_ports, sundial_bin

    started = []
    try:
        for name, extra in (("qdb", []), ("tsdb", ["--ilp-timestamp-column", "time"])):
            http_port, tcp_port, pg_port = free_ports(3)
            base = tmp_path_factory.mktemp(name)
            srv = Server(
                binary=sundial_bin(),
                data_dir=base / "data",
                log_path=base / "serve.log",
                http_port=http_port,
                tcp_port=tcp_port,
                udp_port=free_port(socket.SOCK_DGRAM),
                pg_port=pg_port,
                extra_args=extra,
            )
            srv.start()
            started.append(srv)
            load(srv, ilp_lines)
            if name == "qdb":
                with psycopg.connect(srv.dsn, autocommit=True) as conn:
                    conn.execute("ALTER TABLE cpu ALTER COLUMN hostname ADD INDEX")
        yield started[0], started[1]
    finally:
        for srv in started:
            srv.kill()


def queries(kind: str) -> list[tuple[str, str]]:
    """(type, SQL) for every query of `kind`'s form."""
    return tsbs_data.devops_queries(kind, QUERIES_PER_TYPE)


def value(v):
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat(timespec="microseconds")
    if isinstance(v, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", v):
        return value(dt.datetime.fromisoformat(v.replace("Z", "+00:00")))
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        f = float(v)
        if f == 0 or math.isnan(f):
            return f
        return round(f, 6 - int(math.floor(math.log10(abs(f)))))
    return v


def normalised(rows) -> list[tuple]:
    return sorted((tuple(value(v) for v in row) for row in rows), key=repr)


SAMPLE_BY = re.compile(
    r"^SELECT (?P<select>.*) FROM cpu WHERE (?P<where>.*) SAMPLE BY (?P<n>\d+)(?P<unit>[smh])"
    r"(?: GROUP BY [^;]*?)?(?: LIMIT (?P<limit>\d+))?;?$"
)
UNITS = {"s": "second", "m": "minute", "h": "hour"}


def questdb_literals(sql: str) -> str:
    return re.sub(r"'(\d{4}-\d\d-\d\dT[\d:.]+)Z'", r"TIMESTAMP '\1'", sql)


def duckdb_for_questdb(sql: str) -> str:
    if re.fullmatch(r"SELECT \* FROM cpu latest by hostname;?", sql, re.IGNORECASE):
        return 'SELECT DISTINCT ON (hostname) * FROM cpu ORDER BY hostname, "timestamp" DESC'
    m = SAMPLE_BY.match(sql)
    if m is None:
        return questdb_literals(sql.rstrip(";"))
    items = [i.strip() for i in m["select"].split(",")]
    bucket = f"time_bucket(INTERVAL '{m['n']} {UNITS[m['unit']]}', \"timestamp\")"
    first = re.sub(r"^timestamp\b", bucket, items[0])
    select = ", ".join([first, *items[1:]])
    keys = len([i for i in items[1:] if "(" not in i])
    group = ", ".join(str(i + 1) for i in range(1 + keys))
    limit = f" LIMIT {m['limit']}" if m["limit"] else ""
    return (
        f"SELECT {select} FROM cpu WHERE {questdb_literals(m['where'])} "
        f"GROUP BY {group} ORDER BY 1{limit}"
    )


def duckdb_for_timescaledb(sql: str) -> str:
    sql = re.sub(
        r"'(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) \+0000'", r"TIMESTAMP '\1'", sql
    )
    sql = re.sub(r"time_bucket\('(\d+) seconds'", r"time_bucket(INTERVAL '\1 seconds'", sql)
    return sql.rstrip(";")


def check(query_type: str, sql: str, got, expected_sql: str, con) -> int:
    """Compares one query's rows with the reference's; returns how many there were."""
    expected = con.execute(expected_sql).fetchall()
    got, expected = normalised(got), normalised(expected)
    assert len(got) == len(expected), (
        f"{query_type}: {len(got)} rows, the reference {len(expected)}\n{sql}"
    )
    for g, e in zip(got, expected):
        assert g == e, f"{query_type}: row {g} differs from the reference {e}\n{sql}"
    return len(expected)


def test_questdb_queries_over_http_and_pg_match_the_reference(servers, reference):
    qdb, _ = servers
    reference.execute("SET schema = 'main'")
    rows: dict[str, int] = {}
    for query_type, sql in queries("questdb"):
        expected_sql = duckdb_for_questdb(sql)
        n = check(query_type, sql, http_rows(qdb, sql), expected_sql, reference)
        check(query_type, sql, pg_rows(qdb, sql), expected_sql, reference)
        rows[query_type] = rows.get(query_type, 0) + n
    # Every type ran, and (high-cpu aside, whose filter may match nothing) returned rows.
    assert len(rows) == 13, rows
    assert all(n > 0 for t, n in rows.items() if not t.startswith("high-cpu")), rows


def test_timescaledb_queries_over_pg_match_the_reference(servers, reference):
    _, tsdb = servers
    reference.execute("SET schema = 'tsdb'")
    rows: dict[str, int] = {}
    for query_type, sql in queries("timescaledb"):
        n = check(query_type, sql, pg_rows(tsdb, sql), duckdb_for_timescaledb(sql), reference)
        rows[query_type] = rows.get(query_type, 0) + n
    assert len(rows) == 15, rows
    assert all(n > 0 for t, n in rows.items() if not t.startswith("high-cpu")), rows

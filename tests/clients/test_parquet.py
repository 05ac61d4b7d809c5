"""End-to-end tests of cold partitions kept as Parquet: converted by SQL and by the COLD AFTER
policy in the background of a running server, answered the same over HTTP, and readable as they
are by another engine (DuckDB), with SYMBOLs as strings and timestamps as timestamps.
"""

from __future__ import annotations

import datetime
import json
import time
import urllib.parse
import urllib.request

import duckdb

DAY_NS = 86_400_000_000_000
BASE_NS = 1_451_606_400_000_000_000  # 2016-01-01


def exec_json(server, query: str) -> dict:
    url = f"{server.http_url}/exec?{urllib.parse.urlencode({'query': query})}"
    with urllib.request.urlopen(url, timeout=60) as response:
        body = json.loads(response.read())
    assert "error" not in body, body
    return body


def rows(server, query: str) -> list[dict]:
    body = exec_json(server, query)
    names = [c["name"] for c in body["columns"]]
    return [dict(zip(names, r)) for r in body["dataset"]]


def partitions(server, table: str) -> list[dict]:
    return rows(
        server,
        f"SELECT name, \"numRows\", format, parts, location, \"parquetFileSize\" "
        f"FROM table_partitions('{table}')",
    )


def create_weather(server, days: int) -> None:
    exec_json(
        server,
        "CREATE TABLE weather (ts TIMESTAMP, city SYMBOL, temp DOUBLE, rain LONG, note VARCHAR) "
        "TIMESTAMP(ts) PARTITION BY DAY",
    )
    # A row every 36 seconds; every seventh rain NULL, every fifth note NULL.
    n = days * 2400
    exec_json(
        server,
        "INSERT INTO weather SELECT "
        f"to_timestamp_nanos({BASE_NS} + value * 36000000000), "
        "'city' || CAST(value % 9 AS VARCHAR), value / 10.0, "
        "CASE WHEN value % 7 = 0 THEN NULL ELSE value END, "
        "CASE WHEN value % 5 = 0 THEN NULL ELSE 'n' || CAST(value % 3 AS VARCHAR) END "
        f"FROM generate_series(0, {n - 1})",
    )


def iso_utc(text: str) -> datetime.datetime:
    """A timestamp as /exec writes it (ISO 8601, UTC), as an aware datetime."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_converted_partitions_are_parquet_files_other_engines_read(server):
    create_weather(server, days=4)
    before = rows(server, "SELECT * FROM weather ORDER BY ts")
    converted = exec_json(
        server, "ALTER TABLE weather CONVERT PARTITION TO PARQUET WHERE ts < '2016-01-04'"
    )
    parts = partitions(server, "weather")
    assert [p["format"] for p in parts] == ["parquet", "parquet", "parquet", "native"], parts
    # Queries answer as before.
    assert rows(server, "SELECT * FROM weather ORDER BY ts") == before
    assert rows(
        server,
        "SELECT city, count(*) AS n, sum(rain) AS r, count(note) AS notes FROM weather "
        "GROUP BY city ORDER BY city",
    ) == [
        {"city": f"city{i}", "n": n, "r": r, "notes": notes}
        for i, n, r, notes in _per_city(4 * 2400)
    ]

    # DuckDB reads the table's cold files as they are.
    # Locations are relative to the data directory.
    files = [str(server.data_dir / p["location"]) for p in parts if p["format"] == "parquet"]
    for f in files:
        assert f.endswith("data.parquet"), f
    con = duckdb.connect()
    relation = con.sql(f"SELECT * FROM read_parquet({files!r})")
    types = dict(zip(relation.columns, [str(t) for t in relation.types]))
    assert types["city"] == "VARCHAR", types
    assert types["ts"].startswith("TIMESTAMP"), types
    assert types["temp"] == "DOUBLE" and types["rain"] == "BIGINT", types
    # As nanoseconds: a TIMESTAMP WITH TIME ZONE would need pytz to become a Python value.
    cold = con.sql(
        f"SELECT epoch_ns(ts), city, temp, rain, note FROM read_parquet({files!r}) ORDER BY ts"
    ).fetchall()
    cutoff = datetime.datetime(2016, 1, 4, tzinfo=datetime.timezone.utc)
    expected = [r for r in before if iso_utc(r["ts"]) < cutoff]
    assert len(cold) == len(expected) == 3 * 2400
    for got, want in zip(cold, expected):
        want_ns = int(iso_utc(want["ts"]).timestamp()) * 1_000_000_000
        assert got == (want_ns, want["city"], want["temp"], want.get("rain"), want.get("note")), (
            got,
            want,
        )
    sizes = [p["parquetFileSize"] for p in parts if p["format"] == "parquet"]
    assert all(s > 0 for s in sizes), parts

    # Back to native: the same rows again.
    exec_json(server, "ALTER TABLE weather CONVERT PARTITION TO NATIVE WHERE ts < '2016-01-04'")
    assert [p["format"] for p in partitions(server, "weather")] == ["native"] * 4
    assert rows(server, "SELECT * FROM weather ORDER BY ts") == before


def _per_city(n: int) -> list[tuple[int, int, int, int]]:
    out = []
    for city in range(9):
        values = [v for v in range(n) if v % 9 == city]
        rain = sum(v for v in values if v % 7 != 0)
        notes = sum(1 for v in values if v % 5 != 0)
        out.append((city, len(values), rain, notes))
    return out


def test_cold_after_converts_in_the_background_while_rows_arrive(start_server):
    server = start_server(["--cold-check-interval-ms", "200"])
    create_weather(server, days=3)
    exec_json(server, "ALTER TABLE weather SET COLD AFTER 1 DAY")
    # The newest row is late on day 2: day 0 ends more than a day before it.
    deadline = time.monotonic() + 60
    while True:
        formats = [p["format"] for p in partitions(server, "weather")]
        if formats[0] == "parquet":
            break
        assert time.monotonic() < deadline, formats
        time.sleep(0.1)
    assert formats == ["parquet", "native", "native"], formats
    # Rows for a new day make day 1 cold too; a late row for day 0 lands beside its Parquet part
    # and the next check merges it back in.
    exec_json(
        server,
        "INSERT INTO weather VALUES ('2016-01-04T12:00:00Z', 'city1', 1.5, 1, 'x'), "
        "('2016-01-01T23:59:59Z', 'late', 2.5, 2, 'late')",
    )
    deadline = time.monotonic() + 60
    while True:
        parts = partitions(server, "weather")
        if [(p["format"], p["parts"]) for p in parts[:2]] == [("parquet", 1), ("parquet", 1)]:
            break
        assert time.monotonic() < deadline, parts
        time.sleep(0.1)
    assert rows(server, "SELECT count(*) AS n FROM weather") == [{"n": 3 * 2400 + 2}]
    assert rows(server, "SELECT city, rain FROM weather WHERE city = 'late'") == [
        {"city": "late", "rain": 2}
    ]
    server.stop()
    # The setting and the formats survive a restart.
    assert "COLD AFTER 1 DAY" in server.sql("SHOW CREATE TABLE weather")[0]["ddl"]

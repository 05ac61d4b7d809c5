"""End-to-end tests of Sundial's SQL over HTTP, QuestDB's REST API: /exec (JSON), /exp (CSV
export) and /imp (CSV upload), with plain HTTP from the standard library (urllib): neither
QuestDB's Python client nor `requests` is needed to use it.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

LONG_QUERY = "SELECT count(*) FROM generate_series(1, 20000000000) AS g(x) WHERE x % 7 = 3"


def get(server, path: str, params: dict, headers: dict | None = None, timeout: float = 60):
    """GET `path` with `params`; returns (status, headers, body bytes)."""
    url = f"{server.http_url}{path}?{urllib.parse.urlencode(params)}"
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def exec_json(server, query: str, **params) -> dict:
    status, _, body = get(server, "/exec", {"query": query, **params})
    assert status == 200, body
    return json.loads(body)


def upload(server, params: dict, data: bytes, file_name: str = "data.csv",
           schema: list | None = None) -> tuple[int, bytes]:
    """POST /imp with a multipart body, as `curl -F schema=... -F data=@file` sends it."""
    boundary = uuid.uuid4().hex
    parts = []
    if schema is not None:
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="schema"\r\n\r\n'.encode()
            + json.dumps(schema).encode() + b"\r\n"
        )
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="data"; '
        f'filename="{file_name}"\r\nContent-Type: text/csv\r\n\r\n'.encode() + data + b"\r\n"
    )
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    request = urllib.request.Request(
        f"{server.http_url}/imp?{urllib.parse.urlencode(params)}",
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_exec_timestamp_index_timings_and_errors(server):
    assert exec_json(server, "CREATE TABLE trades (sym SYMBOL, ts TIMESTAMP, price DOUBLE) "
                             "TIMESTAMP(ts) PARTITION BY DAY") == {"ddl": "OK"}
    assert exec_json(server, "INSERT INTO trades VALUES ('a', '2024-01-01T00:00:00Z', 1.5), "
                             "('b', '2024-01-02T00:00:00.123456Z', 2.0)") == {"dml": "OK"}
    answer = exec_json(server, "SELECT sym, ts, price FROM trades ORDER BY ts", timings="true")
    assert answer["columns"] == [
        {"name": "sym", "type": "SYMBOL"},
        {"name": "ts", "type": "TIMESTAMP"},
        {"name": "price", "type": "DOUBLE"},
    ]
    assert answer["timestamp"] == 1
    assert answer["dataset"] == [["a", "2024-01-01T00:00:00.000000Z", 1.5],
                                 ["b", "2024-01-02T00:00:00.123456Z", 2.0]]
    assert answer["count"] == 2
    timings = answer["timings"]
    assert set(timings) == {"authentication", "compiler", "execute", "count"}
    assert timings["compiler"] > 0 and timings["execute"] >= timings["compiler"]
    assert exec_json(server, "SELECT sym, count(*) FROM trades GROUP BY sym")["timestamp"] == -1
    paged = exec_json(server, "SELECT price FROM trades ORDER BY ts", limit="2,2", count="true")
    assert paged["dataset"] == [[2.0]] and paged["count"] == 2
    assert exec_json(server, "SELECT 1 AS x", nm="true") == {"dataset": [[1]], "count": 1}

    status, _, body = get(server, "/exec", {"query": "SELECT missing FROM trades"})
    assert status == 400
    error = json.loads(body)
    assert error["position"] == 7 and "missing" in error["error"]


def test_statement_timeout_stops_a_long_query(server):
    started = time.monotonic()
    status, _, body = get(server, "/exec", {"query": LONG_QUERY}, {"Statement-Timeout": "500"})
    assert status == 400, body
    assert "timeout" in json.loads(body)["error"]
    assert time.monotonic() - started < 15
    # The server is free again at once.
    assert exec_json(server, "SELECT 2 AS two")["dataset"] == [[2]]


def test_exp_csv_and_a_large_streamed_export(server):
    exec_json(server, "CREATE TABLE notes (ts TIMESTAMP, n LONG, note VARCHAR) TIMESTAMP(ts)")
    exec_json(server, "INSERT INTO notes VALUES ('2024-01-01T00:00:00Z', 1, 'plain'), "
                      "('2024-01-01T00:00:01Z', NULL, 'with \"quotes\", and a comma')")
    status, headers, body = get(server, "/exp", {"query": "SELECT * FROM notes ORDER BY ts"})
    assert status == 200
    assert headers["Content-Type"].startswith("text/csv")
    assert headers["Content-Disposition"].startswith('attachment; filename="questdb-query-')
    rows = list(csv.reader(io.StringIO(body.decode(), newline="")))
    assert rows == [["ts", "n", "note"],
                    ["2024-01-01T00:00:00.000000Z", "1", "plain"],
                    ["2024-01-01T00:00:01.000000Z", "", 'with "quotes", and a comma']]
    status, _, body = get(server, "/exp", {"query": "DROP TABLE notes"})
    assert status == 400 and b"only accepts SELECT" in body

    # A million rows stream out while the server's memory stays flat.
    pid = server.proc.pid
    before = rss_kib(pid)
    url = f"{server.http_url}/exp?" + urllib.parse.urlencode(
        {"query": "SELECT x, x * 2 AS y FROM generate_series(1, 1000000) AS g(x)"})
    lines = 0
    peak = before
    total = 0
    rest = b""
    with urllib.request.urlopen(url, timeout=300) as response:
        while chunk := response.read(1 << 16):
            lines += chunk.count(b"\n")
            *complete, rest = (rest + chunk).split(b"\r\n")
            total += sum(int(line.split(b",")[0]) for line in complete if line[:1] != b'"')
            peak = max(peak, rss_kib(pid))
    # Rows come in no particular order (no ORDER BY): all of them, once each.
    assert lines == 1_000_001 and rest == b""
    assert total == 1_000_000 * 1_000_001 // 2
    assert (peak - before) / 1024 < 100, f"the server grew by {(peak - before) / 1024:.0f} MiB"


def test_imp_with_and_without_schema(server):
    data = b"ts,visMiles,tempF\n2010-01-01T00:00:00.000000Z,8.8,34\n2010-01-01T00:51:00Z,9.1,35\n"
    status, body = upload(server, {"fmt": "json"}, data, file_name="weather.csv")
    assert status == 200, body
    report = json.loads(body)
    assert report["status"] == "OK" and report["location"] == "weather.csv"
    assert report["rowsImported"] == 2 and report["rowsRejected"] == 0 and report["header"]
    assert [(c["name"], c["type"]) for c in report["columns"]] == [
        ("ts", "TIMESTAMP"), ("visMiles", "DOUBLE"), ("tempF", "LONG")]
    assert exec_json(server, 'SELECT count(*) FROM "weather.csv"')["dataset"] == [[2]]

    # The text answer QuestDB gives by default.
    status, body = upload(server, {"name": "weather_text"}, data)
    assert status == 200
    assert b"Rows imported" in body and b"weather_text" in body

    # A schema with a timestamp pattern, a designated timestamp, partitions, overwrite.
    schema = [{"name": "ts", "type": "TIMESTAMP", "pattern": "yyyy-MM-dd - HH:mm:ss"},
              {"name": "tempF", "type": "INT"}]
    odd = b"ts,tempF\n2010-01-01 - 00:00:00,34\n2010-02-01 - 00:51:00,35\n"
    status, body = upload(server, {"name": "weather", "timestamp": "ts", "partitionBy": "MONTH",
                                   "overwrite": "true", "fmt": "json"}, odd, schema=schema)
    assert status == 200, body
    report = json.loads(body)
    assert report["timestamp"] == "ts" and report["partitionBy"] == "MONTH"
    assert report["columns"][1] == {"name": "tempF", "type": "INT", "size": 4, "errors": 0}
    answer = exec_json(server, "SELECT * FROM weather")
    assert answer["timestamp"] == 0
    assert sorted(answer["dataset"]) == [["2010-01-01T00:00:00.000000Z", 34],
                                         ["2010-02-01T00:51:00.000000Z", 35]]
    assert len(exec_json(server, "SHOW PARTITIONS FROM weather")["dataset"]) == 2
    status, body = upload(server, {"name": "weather", "overwrite": "true", "fmt": "json"},
                          b"a,b\nx,1\n")
    assert status == 200, body
    assert exec_json(server, "SELECT * FROM weather")["dataset"] == [["x", 1]]


def test_imp_atomicity_and_rejected_rows(server):
    bad = b"k,v\n1,10\n2,oops\n3,30\nonly-one-field\n"
    schema = [{"name": "v", "type": "LONG"}]
    status, body = upload(server, {"name": "rows", "atomicity": "skipRow", "fmt": "json"}, bad,
                          schema=schema)
    report = json.loads(body)
    assert status == 200, body
    assert report["rowsImported"] == 2 and report["rowsRejected"] == 2
    assert report["columns"][1]["errors"] == 1
    # Each refused row by line and reason.
    assert report["errorsTotal"] == 2
    assert report["errors"] == [
        {"line": 3, "column": "v", "action": "rowSkipped",
         "reason": "column 'v': cannot parse 'oops' as LONG"},
        {"line": 5, "column": None, "action": "rowSkipped",
         "reason": "expected 2 fields, found 1"}]

    status, body = upload(server, {"name": "cols", "fmt": "json"}, bad, schema=schema)
    report = json.loads(body)
    assert report["rowsImported"] == 3 and report["rowsRejected"] == 1
    assert sorted(exec_json(server, "SELECT k, v FROM cols")["dataset"]) == [
        [1, 10], [2, None], [3, 30]]

    exec_json(server, "CREATE TABLE strict (k LONG, v LONG)")
    status, body = upload(server, {"name": "strict", "atomicity": "abort", "fmt": "json"}, bad)
    assert status == 400
    # The first bad line, in line order (the short line 5 comes later).
    assert json.loads(body)["status"] == "line 3, column 'v': cannot parse 'oops' as LONG"
    assert exec_json(server, "SELECT count(*) FROM strict")["dataset"] == [[0]]


def test_imp_header_detection_errors_say_so(server):
    headless = b"2016-01-01T00:00:00Z,host_1,0.5\n2016-01-01T00:00:01Z,host_2,0.7\n"
    status, body = upload(server, {"name": "nh", "timestamp": "ts", "fmt": "json"}, headless)
    assert status == 400
    message = json.loads(body)["status"]
    assert message.startswith("could not detect a header row (the first line looks like data: "
                              "'2016-01-01T00:00:00Z,host_1,0.5')"), message
    assert "pass forceHeader=true" in message


def test_gzip_and_cors(start_server):
    always = start_server(["--http-gzip", "always", "--http-allowed-origins", "*"])
    status, headers, body = get(always, "/exec", {"query": "SELECT 7 AS seven"},
                                {"Accept-Encoding": "gzip", "Origin": "http://localhost:3000"})
    assert status == 200
    assert "Content-Encoding" not in headers, "small answers are not worth compressing"
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert json.loads(body)["dataset"] == [[7]]

    large = {"query": "SELECT value FROM generate_series(1, 200000)"}
    status, headers, body = get(always, "/exec", large, {"Accept-Encoding": "gzip"})
    assert status == 200
    assert headers["Content-Encoding"] == "gzip"
    assert json.loads(gzip.decompress(body))["count"] == 200000

    # By default only clients on other hosts get gzip: this one is on loopback.
    server = start_server()
    status, headers, body = get(server, "/exec", large, {"Accept-Encoding": "gzip"})
    assert status == 200
    assert "Content-Encoding" not in headers
    assert json.loads(body)["count"] == 200000

    # No origin is allowed by default: a page of another origin is refused, even its preflight.
    status, headers, _ = get(server, "/exec", {"query": "SELECT 1"},
                             {"Origin": "http://localhost:3000"})
    assert status == 403
    assert "Access-Control-Allow-Origin" not in headers
    server.stop()

    server = start_server(["--http-allowed-origins", "http://localhost:3000"])
    preflight = urllib.request.Request(
        f"{server.http_url}/exec?query=x", method="OPTIONS",
        headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "statement-timeout"})
    with urllib.request.urlopen(preflight, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
        assert "GET" in response.headers["Access-Control-Allow-Methods"]

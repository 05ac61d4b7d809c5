"""End-to-end tests of cold partitions in an S3-compatible object store: a real S3 server (moto,
from PyPI, in server mode) and the real server with `--cold-store s3://bucket/prefix`. Converted
partitions go to the bucket as plain Parquet files, queries read them back through the local
cache (downloading what is missing), and with the store unreachable only the cold partitions
fail, with an error naming the store, while rows keep arriving in the hot ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import boto3
import duckdb
import pytest

from conftest import free_port
from test_parquet import create_weather, exec_json, partitions, rows

BUCKET = "sundial-cold"
PREFIX = "tables"


@pytest.fixture
def s3(tmp_path, monkeypatch):
    """A moto S3 server on a free port, with the bucket made and AWS_* set for the server."""
    port = free_port()
    moto = Path(sys.executable).with_name("moto_server")
    log = open(tmp_path / "moto.log", "wb")
    proc = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except urllib.error.HTTPError:
            break
        except OSError:
            assert proc.poll() is None, (tmp_path / "moto.log").read_text()
            assert time.monotonic() < deadline, "moto did not start"
            time.sleep(0.1)
    for key, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)

    class S3:
        def __init__(self):
            self.endpoint = endpoint
            self.client = client
            self.proc = proc

        def keys(self) -> list[str]:
            listed = client.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX + "/")
            return sorted(o["Key"] for o in listed.get("Contents", []))

        def stop(self):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)

    s3 = S3()
    try:
        yield s3
    finally:
        s3.stop()
        log.close()


def cold_args(s3) -> list[str]:
    return [
        "--cold-store", f"s3://{BUCKET}/{PREFIX}",
        "--cold-store-endpoint", s3.endpoint,
        "--cold-check-interval-ms", "0",
    ]


def local_copies(server) -> list[Path]:
    return sorted(server.data_dir.rglob("data.parquet"))


def exec_raw(server, query: str) -> tuple[int, dict]:
    url = f"{server.http_url}/exec?{urllib.parse.urlencode({'query': query})}"
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            import json

            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        import json

        return e.code, json.loads(e.read())


def test_cold_partitions_live_in_the_bucket(start_server, s3, tmp_path):
    server = start_server(cold_args(s3))
    create_weather(server, days=4)
    before = rows(server, "SELECT * FROM weather ORDER BY ts")
    exec_json(server, "ALTER TABLE weather CONVERT PARTITION TO PARQUET WHERE ts < '2016-01-04'")
    parts = partitions(server, "weather")
    assert [p["format"] for p in parts] == ["parquet"] * 3 + ["native"], parts
    for p in parts[:3]:
        assert p["location"].startswith(f"s3://{BUCKET}/{PREFIX}/weather-"), p
        assert p["location"].endswith("/data.parquet"), p
    keys = s3.keys()
    assert len(keys) == 3, keys
    assert sorted(p["location"].removeprefix(f"s3://{BUCKET}/") for p in parts[:3]) == keys
    assert rows(server, "SELECT * FROM weather ORDER BY ts") == before

    # An object as it is in the bucket is a Parquet file another engine reads.
    copy = tmp_path / "object.parquet"
    s3.client.download_file(BUCKET, keys[0], str(copy))
    count, cities = duckdb.sql(
        f"SELECT count(*), count(DISTINCT city) FROM read_parquet('{copy}')"
    ).fetchone()
    assert (count, cities) == (2400, 9)

    # Without local copies, a restarted server downloads what its queries read.
    server.stop()
    for f in local_copies(server):
        f.unlink()
    server.start()
    assert rows(server, "SELECT * FROM weather ORDER BY ts") == before
    assert len(local_copies(server)) == 3

    # Back to native: the objects go.
    exec_json(server, "ALTER TABLE weather CONVERT PARTITION TO NATIVE WHERE ts < '2016-01-04'")
    deadline = time.monotonic() + 30
    while s3.keys():
        assert time.monotonic() < deadline, s3.keys()
        time.sleep(0.1)
    assert rows(server, "SELECT * FROM weather ORDER BY ts") == before


def test_an_unreachable_store_fails_only_cold_partitions(start_server, s3):
    server = start_server(cold_args(s3))
    create_weather(server, days=3)
    exec_json(server, "ALTER TABLE weather CONVERT PARTITION TO PARQUET LIST '2016-01-01'")
    server.stop()
    for f in local_copies(server):
        f.unlink()
    s3.stop()
    server.start()
    status, body = exec_raw(server, "SELECT sum(rain) FROM weather")
    assert status >= 400, body
    assert f"cold store s3://{BUCKET}/{PREFIX}" in body["error"], body
    assert rows(server, "SELECT count(*) AS n FROM weather WHERE ts >= '2016-01-02'") == [
        {"n": 2 * 2400}
    ]
    exec_json(server, "INSERT INTO weather VALUES ('2016-01-03T12:00:00.5Z', 'new', 1.0, 1, 'x')")
    assert rows(server, "SELECT count(*) AS n FROM weather WHERE ts >= '2016-01-02'") == [
        {"n": 2 * 2400 + 1}
    ]
    status, body = exec_raw(
        server, "ALTER TABLE weather CONVERT PARTITION TO PARQUET LIST '2016-01-02'"
    )
    assert status >= 400 and "cold store" in body["error"], body
    assert [p["format"] for p in partitions(server, "weather")] == ["parquet", "native", "native"]

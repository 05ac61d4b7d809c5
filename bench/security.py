#!/usr/bin/env python3
"""What logins and TLS cost: the same requests against one release server with `--auth off` and
plain TCP, and against one with `--auth required` and TLS, side by side in one run.

    bench/security.sh            (builds the release server, then runs this)

Reports `result:` lines (rates, and each one's ratio to the open, plain baseline):
  http_small   GET /exec?query=SELECT 1 on one keep-alive connection: open; Basic; Bearer token;
               HTTPS + Basic
  pg_small     SELECT 1 round trips over one psycopg connection: plain; TLS (sslmode=require)
  pg_copy      COPY (SELECT ... 2M rows) TO STDOUT, MB/s: plain; TLS
  pg_connect   new connections per second (SCRAM-SHA-256 login): plain; TLS
  ilp_tcp      rows/s through QuestDB's Python client (a 10,000-row buffer sent 200 times):
               open; signed key (tcp:: with auth); TLS + signed key (tcps::)
Needs target/test-venv (tests/clients/setup.sh makes it) and openssl.
"""

from __future__ import annotations

import base64
import http.client
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from release_server import BIN, Server  # noqa: E402
from questdb import Sender, TimestampNanos

ROOT = Path(__file__).resolve().parents[1]
HTTP_REQUESTS = int(os.environ.get("HTTP_REQUESTS", "3000"))
PG_QUERIES = int(os.environ.get("PG_QUERIES", "3000"))
PG_CONNECTS = int(os.environ.get("PG_CONNECTS", "200"))
COPY_ROWS = int(os.environ.get("COPY_ROWS", "2000000"))
ILP_SENDS = int(os.environ.get("ILP_SENDS", "200"))
ILP_BUFFER_ROWS = 10_000


def make_certificate(work: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate for localhost and 127.0.0.1 signed by it."""
    ca, ca_key = work / "ca.pem", work / "ca.key"
    cert, key, csr = work / "server.pem", work / "server.key", work / "server.csr"
    ext = work / "san.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for args in [
        ["req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=bench-ca"],
        ["req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=localhost"],
        ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
         "-days", "2", "-extfile", ext],
    ]:
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)
    return cert, key, ca


def rate(n: int, f) -> float:
    started = time.perf_counter()
    f()
    return n / (time.perf_counter() - started)


def http_loop(conn: http.client.HTTPConnection, headers: dict) -> None:
    for _ in range(HTTP_REQUESTS):
        conn.request("GET", "/exec?query=SELECT%201", headers=headers)
        response = conn.getresponse()
        body = response.read()
        assert response.status == 200, body


def pg_connect(port: int, tls: bool, ca: Path) -> psycopg.Connection:
    extra = {"sslmode": "verify-full", "sslrootcert": str(ca)} if tls else {"sslmode": "disable"}
    return psycopg.connect(host="localhost" if tls else "127.0.0.1", port=port, dbname="qdb",
                           user="admin", password="bench-password", autocommit=True, **extra)


def result(kind: str, mode: str, value: float, unit: str, base: float) -> None:
    print(f"result: bench={kind} mode={mode} {unit}={value:.1f} ratio_to_open={value / base:.3f}",
          flush=True)


def main() -> None:
    if not BIN.exists():
        sys.exit(f"{BIN} missing: cargo build --release -p sundial-server")
    if shutil.which("openssl") is None:
        sys.exit("openssl is needed to make the test certificate")
    work = Path(tempfile.mkdtemp(prefix="sundial-security-bench."))
    cert, key, ca = make_certificate(work)
    print(f"# bench/security.py on {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, "
          f"{os.cpu_count()} cores, release build", flush=True)
    password = ["--admin-password", "bench-password"]
    open_server = Server(work, "open", (29100, 29101, 29102), ["--auth", "off", *password])
    closed = Server(work, "closed", (29110, 29111, 29112),
                    ["--auth", "required", "--tls-cert", str(cert), "--tls-key", str(key), *password])
    try:
        basic = {"Authorization": "Basic " + base64.b64encode(b"admin:bench-password").decode()}
        with pg_connect(closed.pg, False, ca) as conn:
            conn.execute("CREATE USER bench WITH PASSWORD 'bench-user-password'")
            conn.execute("GRANT ADMIN TO bench")
            (token,) = conn.execute("ALTER USER bench CREATE TOKEN TYPE REST").fetchone()
            kid, d, x, y = conn.execute("ALTER USER bench CREATE TOKEN TYPE JWK").fetchone()
        bearer = {"Authorization": f"Bearer {token}"}

        # HTTP: one keep-alive connection each.
        runs = {}
        conn = http.client.HTTPConnection("127.0.0.1", open_server.http)
        runs["open"] = rate(HTTP_REQUESTS, lambda: http_loop(conn, {}))
        conn = http.client.HTTPConnection("127.0.0.1", closed.http)
        runs["basic"] = rate(HTTP_REQUESTS, lambda: http_loop(conn, basic))
        runs["bearer"] = rate(HTTP_REQUESTS, lambda: http_loop(conn, bearer))
        context = ssl.create_default_context(cafile=str(ca))
        conn = http.client.HTTPSConnection("localhost", closed.http, context=context)
        runs["https_basic"] = rate(HTTP_REQUESTS, lambda: http_loop(conn, basic))
        for mode, value in runs.items():
            result("http_small", mode, value, "requests_per_s", runs["open"])

        # PostgreSQL round trips, COPY out, and logins.
        runs = {}
        for mode, server, tls in [("plain", open_server, False), ("tls", closed, True)]:
            with pg_connect(server.pg, tls, ca) as conn:
                runs[mode] = rate(PG_QUERIES, lambda: [conn.execute("SELECT 1").fetchone()
                                                        for _ in range(PG_QUERIES)])
        for mode, value in runs.items():
            result("pg_small", mode, value, "queries_per_s", runs["plain"])
        runs = {}
        for mode, server, tls in [("plain", open_server, False), ("tls", closed, True)]:
            with pg_connect(server.pg, tls, ca) as conn:
                def copy() -> None:
                    total = 0
                    with conn.cursor().copy(
                        f"COPY (SELECT x, x * 1.5 AS y, 'host_' || (x % 100) AS h FROM "
                        f"generate_series(1, {COPY_ROWS}) AS g(x)) TO STDOUT"
                    ) as out:
                        for chunk in out:
                            total += len(chunk)
                    runs[mode + "_bytes"] = total
                runs[mode] = rate(1, copy)
        for mode in ["plain", "tls"]:
            mb_per_s = runs[mode] * runs[mode + "_bytes"] / 1e6
            result("pg_copy", mode, mb_per_s, "mb_per_s",
                   runs["plain"] * runs["plain_bytes"] / 1e6)
        runs = {}
        for mode, server, tls in [("plain", open_server, False), ("tls", closed, True)]:
            runs[mode] = rate(PG_CONNECTS, lambda: [pg_connect(server.pg, tls, ca).close()
                                                     for _ in range(PG_CONNECTS)])
        for mode, value in runs.items():
            result("pg_connect", mode, value, "connections_per_s", runs["plain"])

        # ILP over TCP: the same buffer sent ILP_SENDS times.
        runs = {}
        auth = f"username={kid};token={d};token_x={x};token_y={y};"
        for mode, conf, server in [
            ("open", f"tcp::addr=127.0.0.1:{open_server.ilp};", open_server),
            ("signed_key", f"tcp::addr=127.0.0.1:{closed.ilp};{auth}", closed),
            ("tls_signed_key", f"tcps::addr=localhost:{closed.ilp};{auth}tls_roots={ca};", closed),
        ]:
            table = f"ilp_{mode}"
            with Sender.from_conf(conf) as sender:
                buffer = sender.new_buffer()
                now = TimestampNanos.now().value
                for i in range(ILP_BUFFER_ROWS):
                    buffer.row(table, symbols={"host": f"host_{i % 100}"},
                               columns={"usage": float(i), "n": i}, at=TimestampNanos(now + i))
                started = time.perf_counter()
                for _ in range(ILP_SENDS):
                    sender.flush(buffer, clear=False)
            want = ILP_SENDS * ILP_BUFFER_ROWS
            with pg_connect(server.pg, False, ca) as conn:
                while conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] < want:
                    time.sleep(0.01)
            runs[mode] = want / (time.perf_counter() - started)
        for mode, value in runs.items():
            result("ilp_tcp", mode, value, "rows_per_s", runs["open"])
    finally:
        open_server.stop()
        closed.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

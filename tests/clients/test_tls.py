"""TLS on every TCP listener of `sundial serve`, with real clients.

The test makes its own CA and server certificates (for localhost and 127.0.0.1) with the
`openssl` command line, starts the server with `--tls-cert` / `--tls-key`, and connects over TLS
with psql (sslmode=require and verify-full), psycopg, asyncpg, pgjdbc, pgx and node-postgres,
the QuestDB Python client (`tcps::` and `https::`) and curl. `--tls-require all` must refuse
plain PostgreSQL (SQLSTATE 28000), plain HTTP (403) and plain ILP while TLS works, and SIGHUP
must swap in a new certificate, keeping the old one when the new files are bad.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import test_drivers as drivers
from conftest import sundial_bin

CLIENT_TIMEOUT_S = 60
# Log lines and rows are waited for at most this long (never asserted on timing).
WAIT_S = 60


def openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        ["openssl", *args], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=CLIENT_TIMEOUT_S,
    )
    assert done.returncode == 0, f"openssl {' '.join(args)} failed:\n{done.stderr}"


class Pki:
    """A CA and the server certificates it signs, as PEM files in `dir`."""

    def __init__(self, dir: Path):
        if shutil.which("openssl") is None:
            pytest.skip("the openssl command line is not installed")
        self.dir = dir
        dir.mkdir(parents=True, exist_ok=True)
        self.ca = dir / "ca.crt"
        self.ca_key = dir / "ca.key"
        openssl(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(self.ca_key), "-out", str(self.ca), "-days", "30",
            "-subj", "/CN=Sundial test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=dir,
        )
        self.serial = 1000

    def server_cert(self, name: str) -> tuple[Path, Path]:
        """A new key and certificate for localhost and 127.0.0.1: (certificate, key)."""
        self.serial += 1
        key, csr, cert = (self.dir / f"{name}.key", self.dir / f"{name}.csr", self.dir / f"{name}.crt")
        ext = self.dir / f"{name}.ext"
        ext.write_text(
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\n"
        )
        openssl(
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost",
            cwd=self.dir,
        )
        openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(self.ca), "-CAkey", str(self.ca_key),
            "-set_serial", str(self.serial), "-days", "30", "-out", str(cert),
            "-extfile", str(ext),
            cwd=self.dir,
        )
        return cert, key

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki")


def tls_args(cert: Path, key: Path, require: str = "off") -> list[str]:
    return ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-require", require]


def start_tls(start_server, pki: Pki, require: str = "off"):
    cert, key = pki.server_cert("server")
    return start_server(tls_args(cert, key, require))


def fingerprint(pki: Pki, port: int) -> str:
    """SHA-256 of the certificate a new TLS connection to `port` is served (verified)."""
    with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S) as raw:
        with pki.context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
    return hashlib.sha256(der).hexdigest()


def file_fingerprint(cert: Path) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert.read_text())).hexdigest()


def psql(server, conninfo: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    if shutil.which("psql") is None:
        pytest.skip("psql is not installed")
    done = subprocess.run(
        ["psql", f"host=127.0.0.1 port={server.pg_port} user=admin dbname=qdb {conninfo}",
         "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", *args],
        env=dict(os.environ, PGPASSWORD="quest", PGCONNECT_TIMEOUT="30"),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S,
    )
    if check:
        assert done.returncode == 0, f"psql failed:\n{done.stdout}\n{done.stderr}\n{server.log()[-3000:]}"
    return done


def https_get(server, pki: Pki, path: str, params: dict | None = None) -> tuple[int, str]:
    url = f"https://127.0.0.1:{server.http_port}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, context=pki.context(), timeout=CLIENT_TIMEOUT_S) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def exec_count(server, pki: Pki, table: str) -> int:
    status, body = https_get(server, pki, "/exec", {"query": f"SELECT count(*) FROM {table}"})
    if status != 200:
        return -1
    return json.loads(body)["dataset"][0][0]


def wait_for(what: str, done) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"waited {WAIT_S} s for {what}"
        time.sleep(0.05)


def test_psql_psycopg_and_asyncpg_over_tls(start_server, pki):
    server = start_tls(start_server, pki, require="all")

    out = psql(server, "sslmode=require", "-c", "\\conninfo").stdout
    assert "SSL connection (protocol: TLSv1.3" in out, out
    rows = psql(
        server, f"sslmode=verify-full sslrootcert={pki.ca}",
        "-c", "CREATE TABLE psql_tls (ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY DAY",
        "-c", "INSERT INTO psql_tls VALUES ('2024-01-01T00:00:00Z', 1), ('2024-01-01T00:00:01Z', 2)",
        "-c", "SELECT sum(v) FROM psql_tls",
    ).stdout
    assert rows.strip().splitlines()[-1] == "3", rows
    # verify-full by name too.
    done = subprocess.run(
        ["psql", f"host=localhost hostaddr=127.0.0.1 port={server.pg_port} user=admin dbname=qdb "
         f"sslmode=verify-full sslrootcert={pki.ca}", "-X", "-A", "-t", "-c", "SELECT 7"],
        env=dict(os.environ, PGPASSWORD="quest"), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S,
    )
    assert done.returncode == 0 and done.stdout.strip() == "7", done.stderr
    # A CA the server's certificate is not from: verify-full refuses.
    other = Pki(pki.dir.parent / "other")
    refused = psql(server, f"sslmode=verify-full sslrootcert={other.ca}", "-c", "SELECT 1", check=False)
    assert refused.returncode != 0
    assert "certificate verify failed" in refused.stderr, refused.stderr

    import psycopg

    with psycopg.connect(
        f"{server.dsn} sslmode=verify-full sslrootcert={pki.ca}", connect_timeout=30
    ) as conn:
        assert conn.pgconn.ssl_in_use
        with conn.cursor() as cur:
            cur.execute("SELECT sum(v) FROM psql_tls")
            assert cur.fetchone()[0] == 3
            # An answer of many TLS records.
            cur.execute("SELECT value, repeat('x', 200) FROM generate_series(1, 20000)")
            assert len(cur.fetchall()) == 20000

    import asyncpg

    async def run_asyncpg() -> int:
        conn = await asyncpg.connect(
            host="127.0.0.1", port=server.pg_port, user="admin", password="quest",
            database="qdb", ssl=pki.context(), timeout=30,
        )
        try:
            return await conn.fetchval("SELECT sum(v) FROM psql_tls")
        finally:
            await conn.close()

    assert asyncio.run(run_asyncpg()) == 3
    server.stop()


DRIVERS = {
    "pgjdbc": lambda: _pgjdbc_command(),
    "pgx": lambda: _pgx_command(),
    "node-postgres": lambda: _node_command(),
}


def _pgjdbc_command():
    drivers.need_tools("java")
    lib, classes = drivers.BUILT / "java" / "lib", drivers.BUILT / "java" / "classes"
    if not (classes / "PgJdbcTest.class").exists():
        drivers.need_tools("javac", "mvn")
    drivers.need_built(lib, classes / "PgJdbcTest.class")
    classpath = os.pathsep.join([str(classes), str(lib / "*")])
    return ["java", "-XX:TieredStopAtLevel=1", "-cp", classpath, "PgJdbcTest"], None


def _pgx_command():
    binary = drivers.BUILT / "go" / "pgx-test"
    if not binary.exists():
        drivers.need_tools("go")
    drivers.need_built(binary)
    return [str(binary)], None


def _node_command():
    drivers.need_tools("node")
    if not (drivers.CLIENTS / "node" / "node_modules" / "pg").exists():
        drivers.need_tools("npm")
    drivers.need_built(drivers.CLIENTS / "node" / "node_modules" / "pg")
    node = drivers.CLIENTS / "node"
    return ["node", str(node / "pg_test.js")], node


@pytest.mark.parametrize("driver", list(DRIVERS))
def test_drivers_over_tls(start_server, pki, monkeypatch, driver):
    """The driver programs of test_drivers.py, once more with TLS required and verified."""
    command, cwd = DRIVERS[driver]()
    server = start_tls(start_server, pki, require="all")
    monkeypatch.setenv("PGSSLMODE", "verify-full")
    monkeypatch.setenv("PGSSLROOTCERT", str(pki.ca))
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(pki.ca))
    drivers.run_driver(server, command, cwd=cwd)
    server.stop()
    tables = {
        "pgjdbc": {"trades": 1000, "jdbc_types": 3},
        "pgx": {"pgx_trades": 1000, "pgx_pool": 200},
        "node-postgres": {"node_trades": 500, "node_pool": 202},
    }[driver]
    for table, n in tables.items():
        assert drivers.count(server, table) == n


def test_questdb_client_tcps_and_https_and_curl(start_server, pki):
    from questdb import Sender, TimestampNanos

    server = start_tls(start_server, pki, require="all")
    base = 1_700_000_000_000_000_000
    with Sender.from_conf(
        f"tcps::addr=127.0.0.1:{server.tcp_port};tls_roots={pki.ca};"
    ) as sender:
        for i in range(100):
            sender.row("tls_tcps", symbols={"host": f"h{i % 3}"}, columns={"v": float(i)},
                       at=TimestampNanos(base + i))
    with Sender.from_conf(
        f"https::addr=127.0.0.1:{server.http_port};tls_roots={pki.ca};"
    ) as sender:
        for i in range(50):
            sender.row("tls_https", symbols={"host": "a"}, columns={"v": float(i)},
                       at=TimestampNanos(base + i))
    # HTTP answers only once committed; TCP rows commit within the pause after the close.
    assert exec_count(server, pki, "tls_https") == 50
    wait_for("the tcps:: rows", lambda: exec_count(server, pki, "tls_tcps") == 100)

    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    done = subprocess.run(
        ["curl", "-sS", "--fail", "--cacert", str(pki.ca), "-G",
         f"https://127.0.0.1:{server.http_port}/exec",
         "--data-urlencode", "query=SELECT sum(v) FROM tls_https"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["dataset"] == [[sum(range(50)) * 1.0]]
    # By name as well.
    done = subprocess.run(
        ["curl", "-sS", "--fail", "--cacert", str(pki.ca),
         "--resolve", f"localhost:{server.http_port}:127.0.0.1",
         f"https://localhost:{server.http_port}/status"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S,
    )
    assert done.returncode == 0 and '"status":"ok"' in done.stdout, done.stderr
    server.stop()
    assert server.sql("SELECT count(*) AS n FROM tls_tcps")[0]["n"] == 100


def test_tls_require_all_refuses_plain_connections(start_server, pki):
    server = start_tls(start_server, pki, require="all")

    # PostgreSQL: FATAL 28000 naming the peer and what to do.
    import psycopg

    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(f"{server.dsn} sslmode=disable", connect_timeout=30)
    text = str(refused.value)
    assert "TLS is required for connections from 127.0.0.1:" in text, text
    assert "connect with sslmode=require" in text, text
    plain = psql(server, "sslmode=disable", "-c", "SELECT 1", check=False)
    assert plain.returncode != 0
    assert "TLS is required for connections from 127.0.0.1:" in plain.stderr, plain.stderr
    # The raw protocol: the ErrorResponse carries SQLSTATE 28000.
    with socket.create_connection(("127.0.0.1", server.pg_port), timeout=CLIENT_TIMEOUT_S) as s:
        body = (3 << 16).to_bytes(4, "big") + b"user\0admin\0database\0qdb\0\0"
        s.sendall((len(body) + 4).to_bytes(4, "big") + body)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    assert answer[:1] == b"E" and b"C28000\0" in answer and b"SFATAL\0" in answer, answer

    # HTTP: a plain-text 403 on the same port that serves HTTPS.
    with pytest.raises(urllib.error.HTTPError) as forbidden:
        urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/status", timeout=CLIENT_TIMEOUT_S)
    assert forbidden.value.code == 403
    assert "HTTPS is required for connections from 127.0.0.1:" in forbidden.value.read().decode()
    status, body = https_get(server, pki, "/status")
    assert status == 200 and '"status":"ok"' in body

    # ILP over TCP: the plain connection is closed unread, with a WARN line; TLS goes through.
    with socket.create_connection(("127.0.0.1", server.tcp_port), timeout=CLIENT_TIMEOUT_S) as s:
        s.sendall(b"plain_ilp,host=a v=1 1700000000000000000\n")
        s.settimeout(CLIENT_TIMEOUT_S)
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass
    wait_for("the ILP refusal in the log",
             lambda: "TLS is required for connections from 127.0.0.1:" in server.log()
             and "ILP/TCP" in server.log())
    with socket.create_connection(("127.0.0.1", server.tcp_port), timeout=CLIENT_TIMEOUT_S) as raw:
        with pki.context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b"tls_ilp,host=a v=1 1700000000000000000\n")
    assert psql(server, "sslmode=require", "-c", "SELECT 1").stdout.strip() == "1"
    wait_for("the TLS ILP row", lambda: exec_count(server, pki, "tls_ilp") == 1)
    server.stop()
    tables = [r["table_name"] for r in server.sql("SHOW TABLES")]
    assert "plain_ilp" not in tables and "tls_ilp" in tables, tables


def test_tls_require_remote_lets_loopback_use_plain_tcp(start_server, pki):
    server = start_tls(start_server, pki, require="remote")
    assert psql(server, "sslmode=disable", "-c", "SELECT 1").stdout.strip() == "1"
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/status", timeout=CLIENT_TIMEOUT_S) as r:
        assert r.status == 200
    status, _ = https_get(server, pki, "/status")
    assert status == 200
    server.stop()


def test_tls_flags_that_do_not_fit_stop_the_server_with_a_message(start_server, pki, tmp_path):
    cert, key = pki.server_cert("server")
    _, other_key = pki.server_cert("other")
    binary = sundial_bin()
    cases = [
        (["--tls-cert", str(cert)], "--tls-cert needs --tls-key"),
        (["--tls-require", "all"], "--tls-require all needs a certificate"),
        (["--tls-cert", str(cert), "--tls-key", str(other_key)], "does not belong to the certificate"),
        (["--tls-cert", str(tmp_path / "nope.crt"), "--tls-key", str(key)], "nope.crt"),
    ]
    for i, (args, message) in enumerate(cases):
        done = subprocess.run(
            [str(binary), "serve", "--data-dir", str(tmp_path / f"d{i}"),
             "--http-addr", "127.0.0.1:0", "--pg-addr", "127.0.0.1:0", "--ilp-tcp-addr", "127.0.0.1:0",
             *args],
            env=dict(os.environ, SUNDIAL_AUTH="off"), stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S,
        )
        assert done.returncode != 0, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)


def test_sighup_reloads_the_certificate_and_keeps_it_when_the_files_are_bad(start_server, pki):
    first_cert, first_key = pki.server_cert("first")
    cert, key = pki.dir / "live.crt", pki.dir / "live.key"
    shutil.copy(first_cert, cert)
    shutil.copy(first_key, key)
    server = start_server(tls_args(cert, key))
    ports = [server.pg_port, server.http_port, server.tcp_port]
    first = file_fingerprint(first_cert)
    assert [fingerprint(pki, p) for p in ports] == [first] * 3

    second_cert, second_key = pki.server_cert("second")
    second = file_fingerprint(second_cert)
    assert second != first
    # Replaced whole (as certificate tools do), key first.
    for src, dst in [(second_key, key), (second_cert, cert)]:
        shutil.copy(src, dst.with_suffix(".new"))
        os.replace(dst.with_suffix(".new"), dst)
    server.proc.send_signal(signal.SIGHUP)
    wait_for("the reload", lambda: "TLS certificate reloaded" in server.log())
    assert [fingerprint(pki, p) for p in ports] == [second] * 3

    # A broken certificate file: the reload fails, says why, and the second one goes on serving.
    cert.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n")
    server.proc.send_signal(signal.SIGHUP)
    wait_for("the failed reload", lambda: "TLS certificate not reloaded" in server.log())
    failed = [l for l in server.log().splitlines() if "TLS certificate not reloaded" in l]
    assert "ERROR" in failed[0] and str(cert) in failed[0], failed
    assert [fingerprint(pki, p) for p in ports] == [second] * 3
    assert psql(server, "sslmode=require", "-c", "SELECT 1").stdout.strip() == "1"
    assert server.running
    server.stop()

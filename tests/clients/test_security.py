"""Users, roles and logins end to end (`--auth required`): HTTP Basic, bearer tokens and console
sessions; PostgreSQL logins of users made in SQL; ILP over TCP signed with QuestDB's client keys;
ILP over HTTP with QuestDB's and InfluxDB's clients; read-only and write users refused what their
role does not allow over every protocol; a user dropped while connected; the throttle of failed
logins; and no password in clear in the logs or the data directory.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import psycopg
import pytest
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS
from questdb import QuestDBError as IngressError, Sender, TimestampNanos

from conftest import sundial_bin, free_ports

ADMIN = ("admin", "quest")
AUTH = ["--auth", "required"]


def basic(user: str, password: str) -> dict:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def request(server, method: str, path: str, params: dict | None = None, headers: dict | None = None,
            data: bytes | None = None) -> tuple[int, dict, bytes]:
    url = f"{server.http_url}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, lower(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, lower(e.headers), e.read()


def lower(headers) -> dict:
    return {k.lower(): v for k, v in headers.items()}


def multipart(data: bytes) -> tuple[bytes, dict]:
    boundary = uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="data"; filename="t.csv"\r\n'
        f"Content-Type: text/csv\r\n\r\n".encode() + data + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def pg(server, user: str = "admin", password: str = "quest", **kw) -> psycopg.Connection:
    return psycopg.connect(
        host="127.0.0.1", port=server.pg_port, dbname="qdb", user=user, password=password,
        autocommit=True, **kw,
    )


def admin_sql(server, *statements: str) -> list:
    """Runs statements as the built-in admin over PostgreSQL; the last one's rows."""
    rows: list = []
    with pg(server) as conn:
        for s in statements:
            cur = conn.execute(s)
            rows = cur.fetchall() if cur.description else []
    return rows


def make_user(server, name: str, password: str, role: str | None) -> None:
    statements = [f"CREATE USER {name} WITH PASSWORD '{password}'"]
    if role:
        statements.append(f"GRANT {role} TO {name}")
    admin_sql(server, *statements)


def ilp_key(server, name: str) -> tuple[str, str, str, str]:
    (row,) = admin_sql(server, f"ALTER USER {name} CREATE TOKEN TYPE JWK")
    return tuple(row)


def metric(server, name: str, labels: str) -> float:
    status, _, body = request(server, "GET", "/metrics", headers=basic(*ADMIN))
    assert status == 200, body
    for line in body.decode().splitlines():
        if line.startswith(f"{name}{{{labels}}} "):
            return float(line.split()[-1])
    raise AssertionError(f"{name}{{{labels}}} not in /metrics")


def count_rows(server, table: str) -> int:
    status, _, body = request(server, "GET", "/exec", {"query": f"SELECT count(*) FROM {table}"},
                             basic(*ADMIN))
    if status != 200:
        return 0
    return json.loads(body)["dataset"][0][0]


def wait_rows(server, table: str, n: int, timeout_s: float = 10) -> int:
    deadline = time.monotonic() + timeout_s
    while True:
        got = count_rows(server, table)
        if got >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


# -- HTTP ----------------------------------------------------------------------------------------

def test_every_http_endpoint_asks_for_credentials(start_server):
    srv = start_server(AUTH)
    admin_sql(srv, "CREATE TABLE t (ts TIMESTAMP, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY")
    body, headers = multipart(b"ts,v\n2024-01-01T00:00:00Z,1\n")
    endpoints = [
        ("GET", "/exec", {"query": "SELECT 1"}, None, {}),
        ("GET", "/exp", {"query": "SELECT 1"}, None, {}),
        ("POST", "/imp", {"name": "imported"}, body, headers),
        ("POST", "/write", None, b"ilp v=1\n", {}),
        ("POST", "/api/v2/write", None, b"ilp v=2\n", {}),
        ("GET", "/metrics", None, None, {}),
        ("GET", "/status", None, None, {}),
    ]
    for method, path, params, data, extra in endpoints:
        status, head, answer = request(srv, method, path, params, dict(extra), data)
        assert status == 401, (path, status, answer)
        assert head.get("www-authenticate", "").startswith("Basic realm="), (path, head)
        assert "authentication required" in json.loads(answer)["error"]
        status, _, answer = request(srv, method, path, params, {**extra, **basic("admin", "nope")}, data)
        assert status == 401, (path, status, answer)
        status, _, answer = request(srv, method, path, params, {**extra, **basic(*ADMIN)}, data)
        assert status in (200, 204), (path, status, answer)
    # Liveness and the console's page need no credentials.
    for path in ["/ping", "/health", "/"]:
        status, _, _ = request(srv, "GET", path)
        assert status in (200, 204), path
    # A console request gets no Basic challenge (the page logs in itself).
    status, head, _ = request(srv, "GET", "/exec", {"query": "SELECT 1"}, {"X-Sundial-Console": "1"})
    assert status == 401 and "www-authenticate" not in head
    # Malformed credentials are refused with a reason.
    for bad in ["Basic !!!", "Digest abc", "Basic " + base64.b64encode(b"no-colon").decode()]:
        status, _, answer = request(srv, "GET", "/exec", {"query": "SELECT 1"}, {"Authorization": bad})
        assert status == 401, bad
        assert json.loads(answer)["error"], bad


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_with_and_without_credentials(start_server):
    srv = start_server(AUTH)
    url = f"{srv.http_url}/exec?query=SELECT%2042"

    def curl(*args: str) -> tuple[int, str]:
        out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", *args, url],
                             capture_output=True, text=True, timeout=60).stdout
        body, _, code = out.rpartition("\n")
        return int(code), body

    assert curl()[0] == 401
    assert curl("-u", "admin:wrong")[0] == 401
    code, body = curl("-u", "admin:quest")
    assert code == 200 and json.loads(body)["dataset"] == [[42]]
    make_user(srv, "tok", "pw-tok", "READ")
    (token,) = admin_sql(srv, "ALTER USER tok CREATE TOKEN TYPE REST")[0]
    code, body = curl("-H", f"Authorization: Bearer {token}")
    assert code == 200, body
    assert curl("-H", f"Authorization: Bearer {token}x")[0] == 401
    admin_sql(srv, "ALTER USER tok DROP TOKEN TYPE REST")
    assert curl("-H", f"Authorization: Bearer {token}")[0] == 401


def test_console_session_cookie(start_server):
    srv = start_server(AUTH)
    status, _, body = request(srv, "GET", "/login")
    assert json.loads(body) == {"auth": "required", "user": None, "role": None}
    status, _, body = request(srv, "POST", "/login", data=json.dumps({"user": "admin", "password": "x"}).encode())
    assert status == 401
    status, head, body = request(srv, "POST", "/login",
                                 data=json.dumps({"user": "admin", "password": "quest"}).encode())
    assert status == 200, body
    cookie = head["set-cookie"]
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"]:
        assert attribute in cookie, cookie
    session = cookie.split(";")[0]
    status, _, body = request(srv, "GET", "/exec", {"query": "SELECT 7"}, {"Cookie": session})
    assert status == 200 and json.loads(body)["dataset"] == [[7]]
    status, _, body = request(srv, "GET", "/login", headers={"Cookie": session})
    assert json.loads(body)["user"] == "admin"
    assert request(srv, "POST", "/logout", headers={"Cookie": session})[0] == 204
    assert request(srv, "GET", "/exec", {"query": "SELECT 7"}, {"Cookie": session})[0] == 401
    # A forged cookie is no session.
    assert request(srv, "GET", "/exec", {"query": "SELECT 7"},
                   {"Cookie": "sundial_session=forged"})[0] == 401


# -- Roles over every protocol --------------------------------------------------------------------

def test_roles_are_enforced_over_every_protocol(start_server):
    srv = start_server(AUTH)
    admin_sql(srv, "CREATE TABLE t (ts TIMESTAMP, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY",
              "INSERT INTO t VALUES ('2024-01-01T00:00:00Z', 1)")
    make_user(srv, "reader", "pw-reader", "READ")
    make_user(srv, "writer", "pw-writer", "WRITE")
    make_user(srv, "nobody", "pw-nobody", None)

    # PostgreSQL: 42501 with a clear message, and the session goes on.
    with pg(srv, "reader", "pw-reader") as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)
        for statement, needs in [
            ("INSERT INTO t VALUES ('2024-01-01T00:00:01Z', 2)", "write"),
            ("CREATE TABLE u (ts TIMESTAMP) TIMESTAMP(ts)", "admin"),
            ("DROP TABLE t", "admin"),
            ("BACKUP DATABASE TO '/tmp/never'", "admin"),
            ("CREATE USER eve WITH PASSWORD 'x'", "admin"),
        ]:
            with pytest.raises(psycopg.Error) as e:
                conn.execute(statement)
            assert e.value.sqlstate == "42501", (statement, e.value)
            assert f"needs {needs}" in str(e.value) and "reader" in str(e.value), str(e.value)
        with pytest.raises(psycopg.Error) as e:
            with conn.cursor().copy("COPY t FROM STDIN") as copy:
                copy.write("2024-01-01T00:00:02Z\t3\n")
        assert e.value.sqlstate == "42501", e.value
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)
        # Anyone may change their own password.
        conn.execute("ALTER USER reader WITH PASSWORD 'pw-reader-2'")
    with pg(srv, "reader", "pw-reader-2") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pg(srv, "writer", "pw-writer") as conn:
        conn.execute("INSERT INTO t VALUES ('2024-01-01T00:00:01Z', 2)")
        with conn.cursor().copy("COPY t FROM STDIN") as copy:
            copy.write("2024-01-01T00:00:02Z\t3\n")
        with pytest.raises(psycopg.Error) as e:
            conn.execute("ALTER TABLE t ADD COLUMN w DOUBLE")
        assert e.value.sqlstate == "42501"
        with pytest.raises(psycopg.Error) as e:
            conn.execute("ALTER USER reader WITH PASSWORD 'stolen'")
        assert e.value.sqlstate == "42501"
    with pg(srv, "nobody", "pw-nobody") as conn:
        with pytest.raises(psycopg.Error) as e:
            conn.execute("SELECT count(*) FROM t")
        assert e.value.sqlstate == "42501" and "has no role" in str(e.value)
    assert admin_sql(srv, "SELECT count(*) FROM t") == [(3,)]

    # HTTP: 403 with the reason.
    reader = basic("reader", "pw-reader-2")
    writer = basic("writer", "pw-writer")
    status, _, body = request(srv, "GET", "/exec", {"query": "SELECT count(*) FROM t"}, reader)
    assert status == 200 and json.loads(body)["dataset"] == [[3]]
    assert request(srv, "GET", "/exp", {"query": "SELECT * FROM t"}, reader)[0] == 200
    for query in ["INSERT INTO t VALUES ('2024-01-02T00:00:00Z', 9)", "DROP TABLE t"]:
        status, _, body = request(srv, "GET", "/exec", {"query": query}, reader)
        assert status == 403, body
        assert "permission denied" in json.loads(body)["error"]
    data, headers = multipart(b"ts,v\n2024-01-01T00:00:00Z,1\n")
    assert request(srv, "POST", "/imp", {"name": "imp_r"}, {**headers, **reader}, data)[0] == 403
    assert request(srv, "POST", "/write", None, reader, b"ilp_r v=1\n")[0] == 403
    assert request(srv, "POST", "/write", None, writer, b"ilp_w v=1\n")[0] == 204
    assert request(srv, "POST", "/imp", {"name": "imp_w"}, {**headers, **writer}, data)[0] == 200
    status, _, body = request(srv, "GET", "/exec", {"query": "CREATE TABLE x (a INT)"}, writer)
    assert status == 403, body
    assert request(srv, "GET", "/metrics", None, reader)[0] == 200

    # ILP over HTTP with QuestDB's client (user and password) and InfluxDB's (token).
    conf = f"http::addr=127.0.0.1:{srv.http_port};username=writer;password=pw-writer;"
    with Sender.from_conf(conf) as sender:
        sender.row("qdb_http", symbols={"h": "a"}, columns={"v": 1.0}, at=TimestampNanos.now())
    with pytest.raises(IngressError):
        conf = f"http::addr=127.0.0.1:{srv.http_port};username=reader;password=pw-reader-2;"
        with Sender.from_conf(conf) as sender:
            sender.row("qdb_http_r", symbols={"h": "a"}, columns={"v": 1.0}, at=TimestampNanos.now())
    (token,) = admin_sql(srv, "ALTER USER writer CREATE TOKEN TYPE REST")[0]
    with InfluxDBClient(url=srv.http_url, token=token, org="o") as client:
        client.write_api(write_options=SYNCHRONOUS).write("b", "o", "influx_tok v=1i")
    assert count_rows(srv, "qdb_http") == 1
    assert count_rows(srv, "influx_tok") == 1
    assert count_rows(srv, "qdb_http_r") == 0

    # ILP over TCP: a writer's signed key gets in; a reader's key does not.
    w_key = ilp_key(srv, "writer")
    r_key = ilp_key(srv, "reader")

    def tcp_conf(key) -> str:
        kid, d, x, y = key
        return f"tcp::addr=127.0.0.1:{srv.tcp_port};username={kid};token={d};token_x={x};token_y={y};"

    with Sender.from_conf(tcp_conf(w_key)) as sender:
        sender.row("ilp_tcp_w", symbols={"h": "a"}, columns={"v": 1.0}, at=TimestampNanos.now())
    try:
        with Sender.from_conf(tcp_conf(r_key)) as sender:
            sender.row("ilp_tcp_r", symbols={"h": "a"}, columns={"v": 1.0}, at=TimestampNanos.now())
    except IngressError:
        pass  # The server closed the connection: the client may or may not notice.
    assert wait_rows(srv, "ilp_tcp_w", 1) == 1
    # A key replaced by a new one no longer works; a client without keys is refused.
    ilp_key(srv, "writer")
    try:
        with Sender.from_conf(tcp_conf(w_key)) as sender:
            sender.row("ilp_tcp_old", symbols={"h": "a"}, columns={"v": 1.0}, at=TimestampNanos.now())
    except IngressError:
        pass
    try:
        with Sender.from_conf(f"tcp::addr=127.0.0.1:{srv.tcp_port};") as sender:
            sender.row("ilp_tcp_anon", symbols={"h": "a"}, columns={"v": 1.0}, at=TimestampNanos.now())
    except IngressError:
        pass
    time.sleep(0.5)
    for table in ["ilp_tcp_r", "ilp_tcp_old", "ilp_tcp_anon"]:
        assert count_rows(srv, table) == 0, table
    assert metric(srv, "sundial_auth_failures_total", 'protocol="ilp_tcp"') >= 3
    srv.stop()
    log = srv.log()
    assert "ILP/TCP" in log and "refused" in log, log


def test_a_dropped_or_revoked_user_loses_access_at_the_next_statement(start_server):
    srv = start_server(AUTH)
    admin_sql(srv, "CREATE TABLE t (ts TIMESTAMP, v DOUBLE) TIMESTAMP(ts) PARTITION BY DAY")
    make_user(srv, "bob", "pw-bob", "WRITE")
    make_user(srv, "carol", "pw-carol", "WRITE")
    with pg(srv, "bob", "pw-bob") as bob, pg(srv, "carol", "pw-carol") as carol:
        prepared = "INSERT INTO t VALUES ('2024-01-01T00:00:00Z', %s)"
        bob.execute(prepared, (1,), prepare=True)
        carol.execute("SELECT count(*) FROM t")
        admin_sql(srv, "DROP USER bob", "REVOKE WRITE FROM carol")
        with pytest.raises(psycopg.Error) as e:
            bob.execute(prepared, (2,), prepare=True)
        assert e.value.sqlstate == "28000" and "bob" in str(e.value), e.value
        # A role change ends carol's session too (28000); logged in again, she reads only.
        with pytest.raises(psycopg.Error) as e:
            carol.execute("SELECT count(*) FROM t")
        assert e.value.sqlstate == "28000", e.value
    with pg(srv, "carol", "pw-carol") as carol:
        with pytest.raises(psycopg.Error) as e:
            carol.execute("INSERT INTO t VALUES ('2024-01-01T00:00:01Z', 3)")
        assert e.value.sqlstate == "42501", e.value
        assert carol.execute("SELECT count(*) FROM t").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError):
        pg(srv, "bob", "pw-bob")

    # A console session and an ILP/TCP connection of a dropped user stop working too.
    make_user(srv, "dave", "pw-dave", "WRITE")
    status, head, _ = request(srv, "POST", "/login",
                              data=json.dumps({"user": "dave", "password": "pw-dave"}).encode())
    session = {"Cookie": head["set-cookie"].split(";")[0]}
    assert request(srv, "GET", "/exec", {"query": "SELECT 1"}, session)[0] == 200
    kid, d, x, y = ilp_key(srv, "dave")
    conf = f"tcp::addr=127.0.0.1:{srv.tcp_port};username={kid};token={d};token_x={x};token_y={y};"
    sender = Sender.from_conf(conf)
    sender.establish()
    sender.row("dave_rows", symbols={"h": "a"}, columns={"v": 1.0}, at=TimestampNanos.now())
    sender.flush()
    assert wait_rows(srv, "dave_rows", 1) == 1
    admin_sql(srv, "DROP USER dave")
    status, _, body = request(srv, "GET", "/exec", {"query": "SELECT 1"}, session)
    assert status in (401, 403), body
    try:
        for _ in range(3):
            sender.row("dave_rows", symbols={"h": "b"}, columns={"v": 2.0}, at=TimestampNanos.now())
            sender.flush()
            time.sleep(0.2)
    except IngressError:
        pass
    finally:
        try:
            sender.close()
        except IngressError:
            pass
    time.sleep(0.5)
    assert count_rows(srv, "dave_rows") == 1


# -- Logins, secrets, exposure ---------------------------------------------------------------------

def test_failed_logins_are_counted_and_slowed(start_server):
    srv = start_server(AUTH)
    before_http = metric(srv, "sundial_auth_failures_total", 'protocol="http"')
    before_pg = metric(srv, "sundial_auth_failures_total", 'protocol="pg"')
    took = []
    for _ in range(6):
        started = time.monotonic()
        assert request(srv, "GET", "/exec", {"query": "SELECT 1"}, basic("admin", "guess"))[0] == 401
        took.append(time.monotonic() - started)
    # Every failure waits; past three from one address, each waits longer.
    assert min(took) >= 0.2, took
    assert took[-1] >= 0.2 + 0.5, took
    for _ in range(2):
        with pytest.raises(psycopg.OperationalError) as e:
            pg(srv, "admin", "guess")
        assert "password authentication failed" in str(e.value)
    # A success clears the record of its (address, user), not another user's.
    assert request(srv, "GET", "/exec", {"query": "SELECT 1"}, basic(*ADMIN))[0] == 200
    started = time.monotonic()
    assert request(srv, "GET", "/exec", {"query": "SELECT 1"}, basic("admin", "guess"))[0] == 401
    assert metric(srv, "sundial_auth_failures_total", 'protocol="http"') == before_http + 7
    assert metric(srv, "sundial_auth_failures_total", 'protocol="pg"') == before_pg + 2


def test_no_password_in_clear_in_logs_or_data_directory(start_server):
    admin_secret = "Adm1n-Secret-Pw"
    srv = start_server([*AUTH, "--admin-password", admin_secret, "--log-level", "debug"])
    secrets = ["Us3r-Secret-One", "Us3r-Secret-Two", "Wr0ng-Secret-Guess"]
    with pg(srv, "admin", admin_secret) as conn:
        conn.execute(f"CREATE USER sec WITH PASSWORD '{secrets[0]}'")
        conn.execute("GRANT WRITE TO sec")
        conn.execute(f"ALTER USER sec WITH PASSWORD '{secrets[1]}'")
        # A failing statement is logged: its password must not be.
        with pytest.raises(psycopg.Error):
            conn.execute(f"CREATE USER sec WITH PASSWORD '{secrets[1]}'")
        (token,) = conn.execute("ALTER USER sec CREATE TOKEN TYPE REST").fetchone()
        key = conn.execute("ALTER USER sec CREATE TOKEN TYPE JWK").fetchone()
    with pytest.raises(psycopg.OperationalError):
        pg(srv, "sec", secrets[2])
    assert request(srv, "GET", "/exec", {"query": "SELECT 1"}, basic("sec", secrets[2]))[0] == 401
    assert request(srv, "GET", "/exec", {"query": "SELECT 1"}, basic("sec", secrets[1]))[0] == 200
    srv.stop()
    clear = [admin_secret, *secrets, token, key[1]]
    log = srv.log()
    for secret in clear:
        assert secret not in log, f"{secret} in the log"
    for path in srv.data_dir.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            for secret in clear:
                assert secret.encode() not in content, f"{secret} in {path}"
    users_file = srv.data_dir / ".users.json"
    assert users_file.stat().st_mode & 0o077 == 0, oct(users_file.stat().st_mode)
    stored = json.loads(users_file.read_text())
    assert stored["users"][0]["password"].startswith("SCRAM-SHA-256$")


def test_users_survive_a_restart(start_server):
    srv = start_server(AUTH)
    make_user(srv, "kept", "pw-kept", "READ")
    srv.stop()
    srv.start()
    with pg(srv, "kept", "pw-kept") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.Error) as e:
            conn.execute("CREATE TABLE z (a INT)")
        assert e.value.sqlstate == "42501"
    rows = admin_sql(srv, "SHOW USERS")
    names = [r[0] for r in rows]
    assert "admin" in names and "kept" in names, rows


def test_exposed_listeners_need_a_real_password(tmp_path):
    http, pg_port, tcp = free_ports(3)

    def serve(*flags: str) -> subprocess.CompletedProcess | None:
        args = [str(sundial_bin()), "serve", "--data-dir", str(tmp_path / "d"),
                "--pg-addr", f"127.0.0.1:{pg_port}", "--ilp-tcp-addr", f"127.0.0.1:{tcp}", *flags]
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = proc.communicate(timeout=5)
            return subprocess.CompletedProcess(args, proc.returncode, out)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.communicate(timeout=30)
            return None

    done = serve("--http-addr", f"0.0.0.0:{http}")
    assert done is not None and done.returncode != 0
    assert "default password" in done.stdout and "--admin-password" in done.stdout, done.stdout
    done = serve("--http-addr", f"0.0.0.0:{http}", "--admin-password", "long-and-random", "--auth", "off")
    assert done is not None and done.returncode != 0
    assert "--auth off" in done.stdout, done.stdout
    # With a password of its own it serves (and is stopped after the timeout).
    assert serve("--http-addr", f"0.0.0.0:{http}", "--admin-password", "long-and-random") is None


def test_hostile_user_statements(start_server):
    srv = start_server(AUTH)
    with pg(srv) as conn:
        for statement, sqlstate in [
            ("CREATE USER \"a b\" WITH PASSWORD 'x'", "22023"),
            (f"CREATE USER {'x' * 5000} WITH PASSWORD 'x'", "22023"),
            ("CREATE USER e WITH PASSWORD ''", "22023"),
            ("DROP USER admin", "55000"),
            ("ALTER USER admin WITH PASSWORD 'x'", "55000"),
            ("DROP USER ghost", "42704"),
            ("GRANT ROOT TO admin", None),
        ]:
            with pytest.raises(psycopg.Error) as e:
                conn.execute(statement)
            if sqlstate:
                assert e.value.sqlstate == sqlstate, (statement, e.value.sqlstate, str(e.value))
        conn.execute("CREATE USER q WITH PASSWORD 'it''s \u00fcn\u00efc\u00f8d\u00e9 \U0001f511'")
        conn.execute("GRANT READ TO q")
    with pg(srv, "q", "it's \u00fcn\u00efc\u00f8d\u00e9 \U0001f511") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert request(srv, "GET", "/exec", {"query": "SELECT 1"},
                   basic("q", "it's \u00fcn\u00efc\u00f8d\u00e9 \U0001f511"))[0] == 200

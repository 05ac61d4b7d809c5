"""Sessions end to end with psycopg and the console's cookie (`--auth required`): SQL-level
PREPARE / EXECUTE / DEALLOCATE belong to the session that made them, for three users on two
sessions and over HTTP; a console session and an open PostgreSQL connection end when their
user's password changes or the user is dropped and made again.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request

import psycopg
import pytest

AUTH = ["--auth", "required"]


def pg(server, user: str = "admin", password: str = "quest") -> psycopg.Connection:
    return psycopg.connect(
        host="127.0.0.1", port=server.pg_port, dbname="qdb", user=user, password=password,
        autocommit=True,
    )


def request(server, method: str, path: str, params: dict | None = None,
            headers: dict | None = None, data: bytes | None = None) -> tuple[int, dict, bytes]:
    url = f"{server.http_url}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def basic(user: str, password: str) -> dict:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def sqlstate(run) -> str:
    with pytest.raises(psycopg.Error) as e:
        run()
    return e.value.sqlstate


def console_login(server, user: str, password: str) -> dict:
    status, head, body = request(server, "POST", "/login",
                                 data=json.dumps({"user": user, "password": password}).encode())
    assert status == 200, body
    return {"Cookie": head["set-cookie"].split(";")[0]}


def test_prepared_statements_belong_to_their_session(start_server):
    srv = start_server(AUTH)
    with pg(srv) as admin:
        admin.execute("CREATE TABLE t (ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY DAY")
        for name, role in (("writer", "WRITE"), ("reader", "READ")):
            admin.execute(f"CREATE USER {name} WITH PASSWORD 'pw-{name}'")
            admin.execute(f"GRANT {role} TO {name}")
        with pg(srv, "writer", "pw-writer") as writer, pg(srv, "reader", "pw-reader") as reader:
            # psycopg sends statements without parameters by the simple protocol: EXECUTE's
            # rows come with their RowDescription, and PREPARE's types type the value.
            admin.execute("PREPARE a(bigint) AS SELECT $1 + 1 AS n")
            cur = admin.execute("EXECUTE a(41)")
            assert [d.name for d in cur.description] == ["n"]
            assert cur.fetchall() == [(42,)]
            # The admin's statement is not the others'.
            assert sqlstate(lambda: writer.execute("EXECUTE a(1)")) == "26000"
            assert sqlstate(lambda: writer.execute("DEALLOCATE a")) == "26000"
            reader.execute("PREPARE a AS SELECT 'mine' AS s")
            assert reader.execute("EXECUTE a").fetchall() == [("mine",)]
            assert admin.execute("EXECUTE a(1)").fetchall() == [(2,)]
            # Each EXECUTE is checked against the role its statement needs.
            reader.execute("PREPARE ins(bigint) AS INSERT INTO t VALUES ('2024-01-01', $1)")
            assert sqlstate(lambda: reader.execute("EXECUTE ins(1)")) == "42501"
            writer.execute("PREPARE ins(bigint) AS INSERT INTO t VALUES ('2024-01-01', $1)")
            writer.execute("EXECUTE ins(7)")
            assert admin.execute("SELECT v FROM t").fetchall() == [(7,)]
            # DEALLOCATE removes, and an unknown name is 26000.
            admin.execute("DEALLOCATE a")
            assert sqlstate(lambda: admin.execute("EXECUTE a(1)")) == "26000"
            assert sqlstate(lambda: admin.execute("DEALLOCATE a")) == "26000"
            writer.execute("DEALLOCATE ALL")
            assert sqlstate(lambda: writer.execute("EXECUTE ins(8)")) == "26000"
            assert reader.execute("EXECUTE a").fetchall() == [("mine",)]
        # psycopg's own prepared statements (prepare=True) still work beside SQL-level ones.
        for v in range(3):
            admin.execute("SELECT %s::bigint", (v,), prepare=True)
    # Nothing persists past an HTTP request.
    status, _, body = request(srv, "GET", "/exec", {"query": "PREPARE h AS SELECT 1"},
                              basic("admin", "quest"))
    assert status == 200, body
    status, _, body = request(srv, "GET", "/exec", {"query": "EXECUTE h"}, basic("admin", "quest"))
    assert status == 400 and b"does not exist" in body, body


def test_sessions_end_when_credentials_change(start_server):
    srv = start_server(AUTH)
    with pg(srv) as admin:
        admin.execute("CREATE USER s WITH PASSWORD 'first-pw'")
        admin.execute("GRANT READ TO s")
        cookie = console_login(srv, "s", "first-pw")
        assert request(srv, "GET", "/exec", {"query": "SELECT 1"}, cookie)[0] == 200
        conn = pg(srv, "s", "first-pw")
        conn.execute("SELECT 1")
        # A password change ends both.
        admin.execute("ALTER USER s WITH PASSWORD 'second-pw'")
        assert request(srv, "GET", "/exec", {"query": "SELECT 1"}, cookie)[0] == 401
        assert sqlstate(lambda: conn.execute("SELECT 1")) == "28000"
        assert conn.closed
        # A user dropped and made again, even as an admin, is not the old session's.
        cookie = console_login(srv, "s", "second-pw")
        conn = pg(srv, "s", "second-pw")
        admin.execute("DROP USER s")
        admin.execute("CREATE USER s WITH PASSWORD 'third-pw'")
        admin.execute("GRANT ADMIN TO s")
        status, _, body = request(srv, "GET", "/exec", {"query": "SHOW USERS"}, cookie)
        assert status == 401, body
        assert sqlstate(lambda: conn.execute("SHOW USERS")) == "28000"
        assert conn.closed
        cookie = console_login(srv, "s", "third-pw")
        assert request(srv, "GET", "/exec", {"query": "SHOW USERS"}, cookie)[0] == 200

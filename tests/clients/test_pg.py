"""PostgreSQL wire protocol against real clients: psql, psycopg 3 and asyncpg."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import threading
import time

import asyncpg
import psycopg
import pytest

LONG_QUERY = "SELECT count(*) FROM generate_series(1, 20000000000) AS g(x) WHERE x % 7 = 3"


def psql(server, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, PGPASSWORD="quest", PGCONNECT_TIMEOUT="10")
    done = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "admin", "-d", "qdb",
         "-X", "-v", "ON_ERROR_STOP=1", *args],
        input=stdin, capture_output=True, text=True, env=env, timeout=60,
    )
    if check and done.returncode != 0:
        pytest.fail(f"psql {args} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def make_table(conn) -> None:
    conn.execute(
        "CREATE TABLE trades (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG, ok BOOLEAN) "
        "TIMESTAMP(ts) PARTITION BY DAY"
    )
    conn.execute(
        "INSERT INTO trades VALUES "
        "('2024-01-01T00:00:00Z', 'BTC', 42000.5, 3, true), "
        "('2024-01-01T00:00:01.25Z', 'ETH', 2500.25, 10, false), "
        "('2024-01-02T12:00:00Z', 'BTC', 43000, NULL, NULL)"
    )


def test_psql_queries_errors_and_several_statements(server):
    out = psql(server, "-c", "CREATE TABLE t (ts TIMESTAMP, v DOUBLE) TIMESTAMP(ts)",
               "-c", "INSERT INTO t VALUES ('2024-05-01T10:00:00.5Z', 1.5), ('2024-05-01T10:00:01Z', -2)",
               "-A", "-F", ",", "-c", "SELECT ts, v FROM t ORDER BY ts").stdout
    assert "2024-05-01 10:00:00.5,1.5" in out and "2024-05-01 10:00:01,-2" in out, out
    # Several statements in one simple query: all run, and the last one's rows print.
    out = psql(server, "-A", "-t", "-c", "SELECT 1; SELECT 2 AS two").stdout
    assert out.split() == ["1", "2"] or out.split() == ["2"], out
    bad = psql(server, "-c", "SELECT nope FROM t", check=False)
    assert bad.returncode != 0
    assert "nope" in bad.stderr and "LINE 1" in bad.stderr, bad.stderr
    # The session survives an error and the next statement runs.
    out = psql(server, "-A", "-t", "-v", "ON_ERROR_STOP=0", stdin="SELECT nope;\nSELECT 40 + 2;\n", check=False).stdout
    assert "42" in out


def test_psycopg_prepared_binary_and_types(server):
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        make_table(conn)
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            for _ in range(3):  # prepare=True makes psycopg reuse a named server-side statement
                cur.execute("SELECT ts, sym, price, qty, ok FROM trades WHERE sym = %s AND price > %s ORDER BY ts",
                            ("BTC", 100.0), prepare=True)
                rows = cur.fetchall()
                assert rows == [
                    (dt.datetime(2024, 1, 1, 0, 0), "BTC", 42000.5, 3, True),
                    (dt.datetime(2024, 1, 2, 12, 0), "BTC", 43000.0, None, None),
                ], rows
            cur.execute("SELECT %s::bigint + 1 AS n, %s AS s, %s::timestamp AS t, %s::boolean AS b",
                        (41, "x", dt.datetime(2020, 2, 29, 1, 2, 3, 456789), True))
            assert cur.fetchone() == (42, "x", dt.datetime(2020, 2, 29, 1, 2, 3, 456789), True)
            cur.execute("SELECT CAST(1 AS SMALLINT), CAST(2 AS INT), CAST(0.5 AS REAL), CAST(NULL AS BIGINT), "
                        "CAST('2024-03-04' AS DATE), 'é✓'")
            assert cur.fetchone() == (1, 2, 0.5, None, dt.date(2024, 3, 4), "é✓")
            assert [d.name for d in cur.description] == ["Int64(1)", "Int64(2)", "Float64(0.5)", "NULL",
                                                         "Utf8(\"2024-03-04\")", "Utf8(\"é✓\")"] or len(cur.description) == 6


def test_psycopg_executemany_transactions_and_errors(server):
    with psycopg.connect(server.dsn) as conn:  # not autocommit: psycopg sends BEGIN
        make_table(conn)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.commit()
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO trades VALUES (%s, %s, %s, %s, %s)",
                [(dt.datetime(2024, 1, 3, 0, 0, i), f"S{i}", float(i), i, i % 2 == 0) for i in range(50)],
            )
            cur.execute("SELECT count(*), sum(qty) FROM trades")
            assert cur.fetchone() == (53, 13 + sum(range(50)))
        conn.commit()
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM missing")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert conn.execute("SELECT 7").fetchone() == (7,)
        with pytest.raises(psycopg.errors.SyntaxError) as e:
            conn.execute("SELEC 1")
        assert e.value.diag.statement_position is not None
        conn.rollback()
        with pytest.raises(psycopg.errors.UndefinedColumn):
            conn.execute("SELECT nope FROM trades")


def test_session_settings(server):
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("SET application_name = 'tests'")
        assert conn.execute("SHOW application_name").fetchone() == ("tests",)
        assert conn.execute("SHOW transaction isolation level").fetchone() == ("read committed",)
        assert conn.info.parameter_status("server_version").startswith("15")
        with pytest.raises(psycopg.errors.UndefinedObject if hasattr(psycopg.errors, "UndefinedObject") else psycopg.Error):
            conn.execute("SHOW no_such_setting")


def test_statement_timeout_and_cancel(server):
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("SET statement_timeout = 300")
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute(LONG_QUERY)
        assert time.monotonic() - started < 20
        # The session is fine afterwards.
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.execute("SET statement_timeout = 0")
        timer = threading.Timer(0.5, conn.cancel)
        timer.start()
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute(LONG_QUERY)
        assert time.monotonic() - started < 20
        assert conn.execute("SELECT 2").fetchone() == (2,)
    # A client killed mid-query: the server notices the closed socket, stops the query and
    # keeps answering others.
    env = dict(os.environ, PGPASSWORD="quest")
    victim = subprocess.Popen(
        ["psql", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "admin", "-d", "qdb", "-X",
         "-c", LONG_QUERY],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    time.sleep(1.0)
    victim.kill()
    victim.wait()
    with psycopg.connect(server.dsn, autocommit=True, connect_timeout=10) as conn:
        assert conn.execute("SELECT 3").fetchone() == (3,)


@pytest.mark.parametrize("method", ["md5", "password", "scram-sha-256"])
def test_authentication_methods(start_server, method):
    srv = start_server(["--pg-auth-method", method, "--pg-user", "reader", "--pg-password", "s3cret"])
    dsn = f"host=127.0.0.1 port={srv.pg_port} dbname=qdb user=reader"
    with psycopg.connect(dsn + " password=s3cret") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError) as e:
        psycopg.connect(dsn + " password=wrong")
    assert "password authentication failed" in str(e.value)


def test_connection_limit(start_server):
    srv = start_server(["--pg-connections-max", "2"])
    held = [psycopg.connect(srv.dsn) for _ in range(2)]
    with pytest.raises(psycopg.OperationalError) as e:
        psycopg.connect(srv.dsn)
    assert "too many clients" in str(e.value)
    held[0].close()
    with psycopg.connect(srv.dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    held[1].close()


def test_asyncpg_prepared_cursor_and_types(server):
    async def main():
        conn = await asyncpg.connect(host="127.0.0.1", port=server.pg_port, user="admin",
                                     password="quest", database="qdb")
        await conn.execute("CREATE TABLE m (ts TIMESTAMP, dev SYMBOL, temp DOUBLE, n INT) TIMESTAMP(ts)")
        await conn.executemany(
            "INSERT INTO m VALUES ($1, $2, $3, $4)",
            [(dt.datetime(2024, 6, 1, 0, 0, i), f"d{i % 3}", 20.0 + i, i) for i in range(20)],
        )
        stmt = await conn.prepare("SELECT ts, dev, temp, n FROM m WHERE n >= $1 ORDER BY ts")
        rows = await stmt.fetch(15)
        assert [r["n"] for r in rows] == [15, 16, 17, 18, 19]
        assert rows[0]["ts"] == dt.datetime(2024, 6, 1, 0, 0, 15)
        assert rows[0]["temp"] == 35.0 and rows[0]["dev"] == "d0"
        # A cursor fetches in chunks: Execute with a row limit, PortalSuspended between.
        async with conn.transaction():
            seen = [r["n"] async for r in conn.cursor("SELECT n FROM m ORDER BY ts", prefetch=3)]
        assert seen == list(range(20))
        assert await conn.fetchval("SELECT count(*) FROM m WHERE dev = $1", "d1") == 7
        await conn.close()

    asyncio.run(main())

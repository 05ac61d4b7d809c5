"""PostgreSQL wire protocol against real clients: psql, psycopg 3 and asyncpg."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
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
            # Named as QuestDB names them: calls by their function, literals by their text.
            assert [d.name for d in cur.description] == ["cast", "cast1", "cast2", "cast3", "cast4", "'é✓'"]


def test_arrays_as_parameters_and_literals(server):
    """Multi-get by an array: `= ANY(%s)` with a list, as psycopg sends it in text (`{...}`, type
    left to the server) and in binary (int2[] for small ints, text[]), and inlined by a
    client-side binding cursor (`'{...}'`); `<> ALL` too. The answers are PostgreSQL 15's."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        make_table(conn)
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            for _ in range(3):
                cur.execute("SELECT price FROM trades WHERE qty = ANY(%s) ORDER BY ts", ([10, 3, 99, None],),
                            prepare=True)
                assert cur.fetchall() == [(42000.5,), (2500.25,)]
            cur.execute("SELECT count(*) FROM trades WHERE sym = ANY(%s)", (["BTC", "none"],))
            assert cur.fetchone() == (2,)
            cur.execute("SELECT count(*) FROM trades WHERE qty = ANY(%s)", ([],))
            assert cur.fetchone() == (0,)
            cur.execute("SELECT qty FROM trades WHERE qty <> ALL(%s) ORDER BY ts", ([3],))
            assert cur.fetchall() == [(10,)]
        described = conn.pgconn.prepare(b"any_qty", b"SELECT price FROM trades WHERE qty = ANY($1)")
        assert described.status == psycopg.pq.ExecStatus.COMMAND_OK, described.error_message
        # `qty = ANY($1)` is described with the column's array type, bigint[].
        assert conn.pgconn.describe_prepared(b"any_qty").param_type(0) == 1016
        bad = psycopg.ClientCursor(conn)
        for sql, want in [
            ("SELECT price FROM trades WHERE qty = ANY(%s) ORDER BY ts", [(42000.5,), (2500.25,)]),
            ("SELECT price FROM trades WHERE qty <> ALL(%s) ORDER BY ts", [(2500.25,)]),
        ]:
            bad.execute(sql, ([3, 10] if "ANY" in sql else [3],))
            assert bad.fetchall() == want, sql
        with pytest.raises(psycopg.errors.DataError, match="x"):
            conn.execute("SELECT price FROM trades WHERE qty = ANY(%s)", (["3", "x"],))


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


def test_a_pipelined_answer_does_not_wait_for_the_next_statement(server):
    """The server writes a round trip's answer once it has handled what it already received;
    a statement still running behind it in the pipeline must not hold that answer back."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        watchdog_fired = threading.Event()

        def watchdog():
            watchdog_fired.set()
            conn.cancel()

        timer = threading.Timer(60, watchdog)
        first, slow = conn.cursor(), conn.cursor()
        with pytest.raises(psycopg.errors.QueryCanceled):
            with conn.pipeline() as pipeline:
                first.execute("SELECT 41 + 1")
                pipeline.sync()
                slow.execute(LONG_QUERY)
                timer.start()
                try:
                    assert first.fetchone() == (42,)
                    assert not watchdog_fired.is_set(), "the answer waited for the next statement"
                finally:
                    timer.cancel()
                # A cancel that reaches the session before it has read the slow statement
                # finds it idle and does nothing (as in PostgreSQL): repeat it until the
                # statement ends.
                done = threading.Event()

                def cancel_until_done():
                    while not done.wait(0.2):
                        conn.cancel()

                canceller = threading.Thread(target=cancel_until_done, daemon=True)
                conn.cancel()
                canceller.start()
                try:
                    pipeline.sync()
                finally:
                    done.set()
                    canceller.join()
        assert conn.execute("SELECT 1").fetchone() == (1,)


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
    # The server frees the slot once it sees the closed socket: retry briefly.
    deadline = time.monotonic() + 10
    while True:
        try:
            conn = psycopg.connect(srv.dsn)
            break
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    held[1].close()


def test_query_memory_limit(start_server):
    srv = start_server(["--query-memory-bytes-max", str(4 << 20)])
    with psycopg.connect(srv.dsn, autocommit=True) as conn:
        # Grouping two million distinct keys needs far more than 4 MiB.
        with pytest.raises(psycopg.Error) as e:
            conn.execute(
                "SELECT x, count(*) FROM generate_series(1, 2000000) AS g(x) GROUP BY x ORDER BY x"
            ).fetchall()
        assert e.value.sqlstate == "53200", e.value
        assert "Resources exhausted" in str(e.value) or "memory" in str(e.value).lower()
        # Small queries still run, in this session and in a new one.
        assert conn.execute("SELECT count(*) FROM generate_series(1, 1000)").fetchone() == (1000,)
    with psycopg.connect(srv.dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


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


# ---- catalog commands, COPY and cursors -------------------------------------------------------


def make_copy_table(conn, name: str = "c") -> None:
    conn.execute(
        f"CREATE TABLE {name} (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG, ok BOOLEAN, note VARCHAR) "
        "TIMESTAMP(ts) PARTITION BY DAY"
    )


def rows_of(conn, name: str = "c") -> list[tuple]:
    return conn.execute(f"SELECT ts, sym, price, qty, ok, note FROM {name} ORDER BY ts").fetchall()


def test_psql_catalog_commands(server):
    psql(server, "-c", "CREATE TABLE weather (ts TIMESTAMP, city SYMBOL, note VARCHAR, temp DOUBLE, "
                       "n LONG, k INT, ok BOOLEAN) TIMESTAMP(ts) PARTITION BY DAY")
    out = psql(server, "-c", r"\dt").stdout
    assert "weather" in out and "table" in out, out
    out = psql(server, "-c", r"\d weather").stdout
    for column, type_name in [("ts", "timestamp without time zone"), ("city", "character varying"),
                              ("note", "character varying"), ("temp", "double precision"),
                              ("n", "bigint"), ("k", "integer"), ("ok", "boolean")]:
        assert any(line.split("|")[0].strip() == column and line.split("|")[1].strip() == type_name
                   for line in out.splitlines() if "|" in line), (column, type_name, out)
    out = psql(server, "-c", r"\l").stdout
    assert "List of databases" in out and "UTF8" in out, out


def test_views_and_materialized_views_through_drivers(server):
    r"""Views and materialized views as psql's catalog commands and psycopg see them: \dv
    lists views, \dm materialized views, \d describes a view's columns; both are read like
    tables, refresh through the driver, and writes to them fail with the reason."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE readings (ts TIMESTAMP, site SYMBOL, temp DOUBLE) "
                     "TIMESTAMP(ts) PARTITION BY DAY")
        conn.execute("INSERT INTO readings VALUES ('2024-01-01T00:10:00Z', 'a', 1.5), "
                     "('2024-01-01T00:40:00Z', 'a', 2.5), ('2024-01-01T01:10:00Z', 'b', 4.0)")
        conn.execute("CREATE VIEW warm AS (SELECT ts, site, temp FROM readings WHERE temp > 2)")
        conn.execute("CREATE MATERIALIZED VIEW hourly REFRESH MANUAL AS "
                     "(SELECT ts, site, avg(temp) AS temp FROM readings SAMPLE BY 1h)")
        cur = conn.execute("SELECT site, temp FROM warm ORDER BY ts")
        assert cur.fetchall() == [("a", 2.5), ("b", 4.0)]
        assert [d.name for d in cur.description] == ["site", "temp"]
        conn.execute("INSERT INTO readings VALUES ('2024-01-01T01:20:00Z', 'b', 6.0)")
        conn.execute("REFRESH MATERIALIZED VIEW hourly")
        cur = conn.execute("SELECT ts, site, temp FROM hourly ORDER BY ts, site")
        assert cur.fetchall() == [(dt.datetime(2024, 1, 1, 0, 0), "a", 2.0),
                                  (dt.datetime(2024, 1, 1, 1, 0), "b", 5.0)]
        with pytest.raises(psycopg.Error, match="is a view"):
            conn.execute("INSERT INTO warm VALUES ('2024-01-02T00:00:00Z', 'c', 9.0)")
        with pytest.raises(psycopg.Error, match="is a materialized view"):
            conn.execute("INSERT INTO hourly VALUES ('2024-01-02T00:00:00Z', 'c', 9.0)")
    out = psql(server, "-c", r"\dv").stdout
    assert "warm" in out and "view" in out and "hourly" not in out, out
    out = psql(server, "-c", r"\dm").stdout
    assert "hourly" in out and "materialized view" in out, out
    out = psql(server, "-c", r"\d warm").stdout
    for column, type_name in [("ts", "timestamp without time zone"), ("site", "character varying"),
                              ("temp", "double precision")]:
        assert any(line.split("|")[0].strip() == column and line.split("|")[1].strip() == type_name
                   for line in out.splitlines() if "|" in line), (column, type_name, out)


def test_last_value_cache_through_psycopg(server):
    """A last-value cache used through the driver as dashboards use it: a template variable's
    SELECT DISTINCT, LATEST ON with a bound key (extended protocol), and last_cache() with
    IGNORE NULLS; each answers what the table answers without the cache."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE meters (ts TIMESTAMP, site SYMBOL, kw DOUBLE, note VARCHAR) "
                     "TIMESTAMP(ts) PARTITION BY DAY")
        conn.execute("INSERT INTO meters VALUES ('2024-01-01T00:00:00Z', 'a', 1.5, 'x'), "
                     "('2024-01-01T00:10:00Z', 'b', 2.5, NULL), "
                     "('2024-01-02T00:00:00Z', 'a', NULL, 'y'), "
                     "('2024-01-01T12:00:00Z', 'b', 3.0, 'z')")
        plain = {
            "distinct": conn.execute("SELECT DISTINCT site FROM meters ORDER BY site").fetchall(),
            "latest": conn.execute("SELECT ts, site, kw FROM meters WHERE site = %s "
                                   "LATEST ON ts PARTITION BY site", ("b",)).fetchall(),
        }
        conn.execute("CREATE LAST VALUE CACHE by_site ON meters (site)")
        conn.execute("CREATE LAST VALUE CACHE non_null ON meters (site) IGNORE NULLS")
        assert conn.execute("SELECT DISTINCT site FROM meters ORDER BY site").fetchall() \
            == plain["distinct"] == [("a",), ("b",)]
        assert conn.execute("SELECT ts, site, kw FROM meters WHERE site = %s "
                            "LATEST ON ts PARTITION BY site", ("b",)).fetchall() \
            == plain["latest"] == [(dt.datetime(2024, 1, 1, 12, 0), "b", 3.0)]
        cur = conn.execute("SELECT ts, site, kw, note FROM last_cache('meters', 'non_null') "
                           "ORDER BY site")
        assert cur.fetchall() == [(dt.datetime(2024, 1, 2, 0, 0), "a", 1.5, "y"),
                                  (dt.datetime(2024, 1, 1, 12, 0), "b", 3.0, "z")]
        cur = conn.execute("SELECT cache_name, key_columns, ignore_nulls, status, keys "
                           "FROM last_value_caches() ORDER BY cache_name")
        assert cur.fetchall() == [("by_site", "site", False, "ready", 2),
                                  ("non_null", "site", True, "ready", 2)]


def test_psql_copy_from_file_stdin_and_to_file(server, tmp_path):
    psql(server, "-c", "CREATE TABLE c (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG, ok BOOLEAN, "
                       "note VARCHAR) TIMESTAMP(ts) PARTITION BY DAY")
    src = tmp_path / "in.csv"
    src.write_text(
        "ts,sym,price,qty,ok,note\n"
        "2024-01-01T00:00:00Z,BTC,42000.5,3,true,\"hello, world\"\n"
        "2024-01-01 00:00:01,ETH,2500.25,,f,\"two\nlines\"\n"
        "2024-01-02T12:00:00Z,BTC,43000,7,,\n"
    )
    out = psql(server, "-c", rf"\copy c from '{src}' with csv header").stdout
    assert "COPY 3" in out, out
    # Text format from psql's stdin: tabs, \N, backslash escapes, and the \. end marker.
    data = ("2024-01-03 00:00:00\tSOL\t99.5\t1\tt\ttab\\there\n"
            "2024-01-03 00:00:01\t\\N\t\\N\t\\N\t\\N\tback\\\\slash\n"
            "\\.\n")
    out = psql(server, "-c", r"\copy c from stdin", stdin=data).stdout
    assert "COPY 2" in out, out
    out = psql(server, "-A", "-t", "-F", "|", "-c", "SELECT sym, qty, note FROM c ORDER BY ts").stdout
    assert out.splitlines() == [
        "BTC|3|hello, world", "ETH||two", "lines", "BTC|7|", "SOL|1|tab\there", "|" + "|back\\slash",
    ], out
    dst = tmp_path / "out.csv"
    out = psql(server, "-c",
               rf"\copy (SELECT sym, qty, note FROM c WHERE qty IS NOT NULL ORDER BY ts) to '{dst}' with csv header"
               ).stdout
    assert "COPY 3" in out, out
    assert dst.read_text() == "sym,qty,note\nBTC,3,\"hello, world\"\nBTC,7,\nSOL,1,tab\there\n"
    # COPY TO in text format, whole table with a column list.
    out = psql(server, "-c", r"\copy c (sym, ok) to stdout").stdout
    assert sorted(out.splitlines()) == ["BTC\t\\N", "BTC\tt", "ETH\tf", "SOL\tt", "\\N\t\\N"], out


def test_copy_bad_rows_leave_the_table_unchanged(server):
    psql(server, "-c", "CREATE TABLE c (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG, ok BOOLEAN, "
                       "note VARCHAR) TIMESTAMP(ts) PARTITION BY DAY")
    good = "2024-01-01 00:00:00\tA\t1\t1\tt\tx\n"
    psql(server, "-c", r"\copy c from stdin", stdin=good)
    bad = good + "2024-01-01 00:00:01\tB\t2\tnot-a-number\tt\ty\n" + good
    done = psql(server, "-c", r"\copy c from stdin", stdin=bad, check=False)
    assert done.returncode != 0
    assert 'invalid input syntax for type bigint: "not-a-number"' in done.stderr, done.stderr
    assert "line 2" in done.stderr, done.stderr
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM c").fetchone() == (1,)
        cur = conn.cursor()
        with pytest.raises(psycopg.errors.BadCopyFileFormat) as e:
            with cur.copy("COPY c FROM STDIN") as copy:
                copy.write(good)
                copy.write("2024-01-01 00:00:02\tC\t3\n")
        assert "missing data for column" in str(e.value) and "line 2" in str(e.value.diag.context)
        with pytest.raises(psycopg.errors.BadCopyFileFormat) as e:
            with cur.copy("COPY c (ts, sym) FROM STDIN WITH (FORMAT csv)") as copy:
                copy.write("2024-01-01,A\n2024-01-01,B,extra\n")
        assert "extra data after last expected column" in str(e.value)
        # An exception inside the block makes psycopg send CopyFail (and re-raise it).
        with pytest.raises(RuntimeError):
            with cur.copy("COPY c FROM STDIN") as copy:
                copy.write(good)
                raise RuntimeError("client gave up")
        with pytest.raises(psycopg.errors.UndefinedTable):
            cur.copy("COPY nope FROM STDIN").__enter__()
        with pytest.raises(psycopg.errors.UndefinedColumn):
            cur.copy("COPY c (ts, nope) FROM STDIN").__enter__()
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            with cur.copy("COPY c FROM STDIN (FORMAT csv, HEADER true)") as copy:
                copy.write("ts,sym,price,qty,ok,note\n2024-01-01,A,1,1,maybe,x\n")
        assert conn.execute("SELECT count(*) FROM c").fetchone() == (1,)
        # The session is usable after every failure.
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_psycopg_copy_write_row_and_read(server):
    rows = [
        (dt.datetime(2024, 1, 1, 0, 0, i), f"S{i % 3}", i + 0.5, i * 10, i % 2 == 0, f"note\t{i}\n\\")
        for i in range(50)
    ] + [(dt.datetime(2024, 1, 2), None, None, None, None, None)]
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        make_copy_table(conn)
        cur = conn.cursor()
        with cur.copy("COPY c (ts, sym, price, qty, ok, note) FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
        assert cur.rowcount == 51
        assert rows_of(conn) == rows
        # Only the named columns get values; the others are NULL.
        with cur.copy("COPY c (ts, qty) FROM STDIN") as copy:
            copy.write_row((dt.datetime(2024, 1, 3), 7))
        assert rows_of(conn)[-1] == (dt.datetime(2024, 1, 3), None, None, 7, None, None)
        # COPY TO: raw data, and parsed rows.
        with cur.copy("COPY (SELECT qty, note FROM c WHERE qty < 20 ORDER BY ts) TO STDOUT") as copy:
            data = b"".join(bytes(chunk) for chunk in copy)
        assert data == b"0\tnote\\t0\\n\\\\\n10\tnote\\t1\\n\\\\\n7\t\\N\n"
        with cur.copy("COPY c TO STDOUT") as copy:
            copy.set_types(["timestamp", "varchar", "float8", "int8", "bool", "varchar"])
            got = list(copy.rows())
        assert sorted(got, key=lambda r: r[0]) == rows_of(conn)  # partitions scan in parallel
        with cur.copy("COPY c (sym, qty) TO STDOUT WITH (FORMAT csv, HEADER true)") as copy:
            first = bytes(copy.read())
            rest = b"".join(bytes(chunk) for chunk in copy)
        assert first == b"sym,qty\n" and rest.count(b"\n") == 52
        # Binary both ways.
        with cur.copy("COPY (SELECT ts, sym, price, qty, ok, note FROM c ORDER BY ts) TO STDOUT (FORMAT binary)") as copy:
            copy.set_types(["timestamp", "varchar", "float8", "int8", "bool", "varchar"])
            binary_rows = list(copy.rows())
        assert binary_rows == rows_of(conn)
        conn.execute("CREATE TABLE c2 (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG, ok BOOLEAN, note VARCHAR) "
                     "TIMESTAMP(ts) PARTITION BY DAY")
        with cur.copy("COPY c2 FROM STDIN (FORMAT binary)") as copy:
            copy.set_types(["timestamp", "varchar", "float8", "int8", "bool", "varchar"])
            for r in binary_rows:
                copy.write_row(r)
        assert rows_of(conn, "c2") == binary_rows


def test_psycopg_server_side_cursors(server):
    with psycopg.connect(server.dsn) as conn:  # a transaction block, as named cursors need
        conn.execute("CREATE TABLE n (ts TIMESTAMP, v LONG) TIMESTAMP(ts)")
        conn.execute("INSERT INTO n SELECT to_timestamp_nanos(x * 1000000000), x FROM generate_series(0, 99) AS g(x)")
        conn.commit()
        with conn.cursor(name="c") as cur:
            cur.execute("SELECT v, v * 2 AS w FROM n WHERE v >= %s ORDER BY v", (90,))
            assert [d.name for d in cur.description] == ["v", "w"]
            assert cur.fetchmany(2) == [(90, 180), (91, 182)]
            assert cur.fetchone() == (92, 184)
            cur.scroll(2)  # MOVE 2
            assert cur.fetchall() == [(v, 2 * v) for v in range(95, 100)]
            assert cur.fetchall() == []
        with conn.cursor(name="it") as cur:
            cur.itersize = 7
            cur.execute("SELECT v FROM n ORDER BY v")
            assert [r[0] for r in cur] == list(range(100))
        with conn.cursor(name="bin", binary=True) as cur:
            cur.execute("SELECT ts, v FROM n ORDER BY v LIMIT 3")
            assert cur.fetchall() == [(dt.datetime(1970, 1, 1, 0, 0, i), i) for i in range(3)]
        conn.commit()
        # WITH HOLD survives the commit.
        cur = conn.cursor(name="held", withhold=True)
        cur.execute("SELECT v FROM n ORDER BY v")
        conn.commit()
        assert cur.fetchmany(3) == [(0,), (1,), (2,)]
        cur.close()
        conn.commit()
        # Plain SQL: FETCH returns rows and a FETCH n tag; errors for unknown cursors.
        with conn.cursor() as plain:
            plain.execute("DECLARE x CURSOR FOR SELECT v FROM n ORDER BY v")
            plain.execute("FETCH 3 FROM x")
            assert plain.fetchall() == [(0,), (1,), (2,)] and plain.statusmessage == "FETCH 3"
            plain.execute("MOVE FORWARD 90 IN x")
            assert plain.statusmessage == "MOVE 90"
            plain.execute("FETCH ALL FROM x")
            assert plain.rowcount == 7
            plain.execute("CLOSE x")
            with pytest.raises(psycopg.errors.InvalidCursorName):
                plain.execute("FETCH 1 FROM x")
        conn.rollback()
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.NoActiveSqlTransaction):
            conn.execute("DECLARE y CURSOR FOR SELECT 1")
        # One simple query is an implicit transaction block.
        cur = conn.cursor()
        cur.execute("DECLARE y CURSOR FOR SELECT 1 AS one UNION ALL SELECT 2 ORDER BY one; FETCH 5 FROM y")
        assert cur.statusmessage == "DECLARE CURSOR" and cur.nextset()
        assert cur.fetchall() == [(1,), (2,)]
        # ... and its cursors end with it.
        with pytest.raises(psycopg.errors.InvalidCursorName):
            conn.execute("FETCH 1 FROM y")


def test_asyncpg_copy(server, tmp_path):
    async def main():
        conn = await asyncpg.connect(host="127.0.0.1", port=server.pg_port, user="admin",
                                     password="quest", database="qdb")
        await conn.execute("CREATE TABLE a (ts TIMESTAMP, sym SYMBOL, price DOUBLE, qty LONG, ok BOOLEAN) "
                           "TIMESTAMP(ts) PARTITION BY DAY")
        records = [(dt.datetime(2024, 6, 1) + dt.timedelta(seconds=i), f"s{i % 4}", i * 1.5, i, i % 3 == 0) for i in range(200)]
        # asyncpg sends binary COPY.
        status = await conn.copy_records_to_table("a", records=records)
        assert status == "COPY 200"
        status = await conn.copy_records_to_table("a", records=[(dt.datetime(2024, 6, 2), 5)],
                                                  columns=["ts", "qty"])
        assert status == "COPY 1"
        got = await conn.fetch("SELECT ts, sym, price, qty, ok FROM a ORDER BY ts")
        assert [tuple(r) for r in got] == records + [(dt.datetime(2024, 6, 2), None, None, 5, None)]
        csv_data = b"ts,sym,qty\n2024-06-03T00:00:00Z,csv,1\n2024-06-03T00:00:01Z,csv,2\n"
        status = await conn.copy_to_table("a", source=io.BytesIO(csv_data), columns=["ts", "sym", "qty"],
                                          format="csv", header=True)
        assert status == "COPY 2"
        assert await conn.fetchval("SELECT sum(qty) FROM a WHERE sym = 'csv'") == 3
        out = io.BytesIO()
        status = await conn.copy_from_query("SELECT sym, qty FROM a WHERE sym = 'csv' ORDER BY ts",
                                            output=out, format="csv")
        assert status == "COPY 2" and out.getvalue() == b"csv,1\ncsv,2\n"
        dst = tmp_path / "a.txt"
        status = await conn.copy_from_table("a", columns=["sym", "qty"], output=str(dst))
        assert status == "COPY 203"
        assert "s0\t0" in dst.read_text().splitlines()
        await conn.close()

    asyncio.run(main())


class RawPg:
    """A bare protocol v3 client (cleartext password), for message sequences drivers do not send."""

    def __init__(self, port: int):
        import socket
        import struct
        self.struct = struct
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        params = b"user\0admin\0database\0qdb\0\0"
        self.sock.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
        tag, body = self.recv()
        assert tag == b"R" and struct.unpack("!i", body[:4])[0] == 3, (tag, body)
        self.send(b"p", b"quest\0")
        self.until(b"Z")

    def send(self, tag: bytes, body: bytes = b"") -> None:
        self.sock.sendall(tag + self.struct.pack("!i", len(body) + 4) + body)

    def recv(self) -> tuple[bytes, bytes]:
        while True:
            if len(self.buf) >= 5:
                n = self.struct.unpack("!i", self.buf[1:5])[0]
                if len(self.buf) >= n + 1:
                    tag, body, self.buf = self.buf[:1], self.buf[5:n + 1], self.buf[n + 1:]
                    return tag, body
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk

    def until(self, last: bytes) -> list[tuple[bytes, bytes]]:
        """Messages up to and including the first `last` one."""
        got = []
        while True:
            tag, body = self.recv()
            got.append((tag, body))
            if tag == last:
                return got

    def query(self, sql: str) -> None:
        self.send(b"Q", sql.encode() + b"\0")


def tags(messages) -> str:
    return "".join(t.decode() for t, _ in messages)


def error_code(messages) -> str:
    body = next(b for t, b in messages if t == b"E")
    fields = {f[:1]: f[1:].decode() for f in body.split(b"\0") if f}
    return fields[b"C"]


def test_copy_and_fetch_at_the_protocol_level(start_server):
    srv = start_server(["--pg-auth-method", "password"])
    pg = RawPg(srv.pg_port)
    pg.query("CREATE TABLE r (ts TIMESTAMP, v LONG) TIMESTAMP(ts)")
    pg.until(b"Z")
    # A COPY in the middle of a script: the statements after it run once the data is in.
    pg.query("SELECT 1; COPY r FROM STDIN; SELECT count(*) FROM r")
    assert tags(pg.until(b"G")) == "TDCG"
    pg.send(b"d", b"2024-01-01 00:00:00\t1\n2024-01-01")
    pg.send(b"H")  # Flush is allowed during COPY
    pg.send(b"d", b" 00:00:01\t2\n")
    pg.send(b"c")
    got = pg.until(b"Z")
    assert tags(got) == "CTDCZ" and got[0][1] == b"COPY 2\0" and got[2][1][-1:] == b"2", got
    # Extended protocol: Parse/Bind/Execute/Sync, data, CopyDone, Sync (libpq's order).
    pg.send(b"P", b"\0COPY r (ts, v) FROM STDIN WITH (FORMAT csv)\0\0\0")
    pg.send(b"B", b"\0\0\0\0\0\0\0\0")
    pg.send(b"E", b"\0\0\0\0\0")
    pg.send(b"S")
    assert tags(pg.until(b"G")) == "12G"
    pg.send(b"d", b"2024-01-02,3\n")
    pg.send(b"c")
    pg.send(b"S")
    got = pg.until(b"Z")
    assert tags(got) == "CZ" and got[0][1] == b"COPY 1\0", got
    # A bad row in the extended protocol: the error, then everything up to Sync is skipped.
    pg.send(b"P", b"\0COPY r FROM STDIN\0\0\0")
    pg.send(b"B", b"\0\0\0\0\0\0\0\0")
    pg.send(b"E", b"\0\0\0\0\0")
    pg.send(b"S")
    pg.until(b"G")
    pg.send(b"d", b"2024-01-03 00:00:00\tx\n")
    pg.send(b"c")
    pg.send(b"S")
    got = pg.until(b"Z")
    assert tags(got) == "EZ" and error_code(got) == "22P02", got
    # FETCH described through the extended protocol takes the cursor's columns.
    pg.query("BEGIN; DECLARE cur CURSOR FOR SELECT v, v + 1 AS w FROM r ORDER BY v")
    pg.until(b"Z")
    pg.send(b"P", b"f\0FETCH 2 FROM cur\0\0\0")
    pg.send(b"D", b"Sf\0")
    pg.send(b"B", b"\0f\0\0\0\0\0\0\0")
    pg.send(b"E", b"\0\0\0\0\0")
    pg.send(b"S")
    got = pg.until(b"Z")
    assert tags(got) == "1tT2DDCZ", got
    row_description = got[2][1]
    assert b"v\0" in row_description and b"w\0" in row_description
    assert got[6][1] == b"FETCH 2\0"
    pg.query("COMMIT")
    pg.until(b"Z")
    # CopyFail: nothing is committed, and the session goes on.
    pg.query("COPY r FROM STDIN")
    pg.until(b"G")
    pg.send(b"d", b"2024-01-04 00:00:00\t9\n")
    pg.send(b"f", b"changed my mind\0")
    got = pg.until(b"Z")
    assert error_code(got) == "57014" and b"changed my mind" in got[0][1], got
    pg.query("SELECT count(*) FROM r")
    got = pg.until(b"Z")
    assert got[1][1][-1:] == b"3", got
    # Any other message during COPY breaks the protocol: FATAL 08P01.
    pg.query("COPY r FROM STDIN")
    pg.until(b"G")
    pg.query("SELECT 1")
    got = pg.until(b"E")
    assert error_code(got) == "08P01", got
    pg.sock.close()

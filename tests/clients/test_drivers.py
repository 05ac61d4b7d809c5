"""PostgreSQL drivers of other languages against `sundial serve`: pgjdbc (Java), pgx v5 (Go) and
node-postgres (JavaScript).

Each driver's test is a small program under tests/clients/java, go and node that setup.sh fetches
the driver for and builds (into target/clients and node/node_modules). The program reads the
connection from PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE, runs its checks as named steps
and prints one line per step: `ok`, `FAIL` (with the reason), or `XFAIL` for a step that fails on
a known server bug (`XPASS` when such a step passes: the mark must go). It exits 0 only when no
step failed. After the program, the server must stop cleanly and `sundial sql` must see the rows
the driver wrote.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT

CLIENTS = REPO_ROOT / "tests" / "clients"
BUILT = REPO_ROOT / "target" / "clients"
DRIVER_TIMEOUT_S = 120


def need_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (tests/clients/setup.sh skipped this driver)")


def need_built(*paths) -> None:
    for path in paths:
        if not path.exists():
            pytest.fail(f"{path} is missing: run tests/clients/setup.sh first")


def run_driver(server, command: list[str], cwd=None) -> str:
    """Runs one driver program against `server` and fails with its output unless it exits 0."""
    env = dict(
        os.environ,
        PGHOST=server.host,
        PGPORT=str(server.pg_port),
        PGUSER="admin",
        PGPASSWORD="quest",
        PGDATABASE="qdb",
        TZ="UTC",
    )
    try:
        done = subprocess.run(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=DRIVER_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(
            f"{command[0]} did not finish within {DRIVER_TIMEOUT_S} s;\nstdout:\n{out}\nstderr:\n{err}\n"
            f"server log (end):\n{server.log()[-5000:]}"
        )
    output = done.stdout + (f"\nstderr:\n{done.stderr}" if done.stderr.strip() else "")
    print(output)  # pytest shows it with -s, or with the failure below
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited with {done.returncode}:\n{output}\n"
            f"server log (end):\n{server.log()[-5000:]}"
        )
    assert "all steps passed" in done.stdout, output
    return done.stdout


def count(server, table: str) -> int:
    return server.sql(f"SELECT count(*) AS n FROM {table}")[0]["n"]


def test_pgjdbc(server):
    need_tools("java")
    lib, classes = BUILT / "java" / "lib", BUILT / "java" / "classes"
    if not (classes / "PgJdbcTest.class").exists():
        need_tools("javac", "mvn")
    need_built(lib, classes / "PgJdbcTest.class")
    classpath = os.pathsep.join([str(classes), str(lib / "*")])
    run_driver(server, ["java", "-XX:TieredStopAtLevel=1", "-cp", classpath, "PgJdbcTest"])
    server.stop()
    assert count(server, "trades") == 1000
    assert count(server, "jdbc_types") == 3


def test_pgx(server):
    binary = BUILT / "go" / "pgx-test"
    if not binary.exists():
        need_tools("go")
    need_built(binary)
    run_driver(server, [str(binary)])
    server.stop()
    assert count(server, "pgx_trades") == 1000
    assert count(server, "pgx_pool") == 200


def test_node_postgres(server):
    need_tools("node")
    if not (CLIENTS / "node" / "node_modules" / "pg").exists():
        need_tools("npm")
    need_built(CLIENTS / "node" / "node_modules" / "pg")
    run_driver(server, ["node", str(CLIENTS / "node" / "pg_test.js")], cwd=CLIENTS / "node")
    server.stop()
    assert count(server, "node_trades") == 500
    assert count(server, "node_pool") == 202

"""Differential test against the real PostgreSQL 15: what tools ask the catalogs.

The same tables and rows go into Sundial and into a throwaway PostgreSQL 15 (Debian's binaries in
/usr/lib/postgresql/15/bin). Then every statement of pg_corpus.py (pgjdbc's DatabaseMetaData,
Grafana's and DBeaver's introspection, information_schema, pg_catalog, the data) and every query
psql's backslash commands send (captured with `psql -E` from that PostgreSQL, so verbatim) runs on
both, in the extended protocol and in the simple protocol, and the answers are compared:
column names, column type OIDs, then the values (as PostgreSQL's text format), in order when
the statement orders its rows. psql's rendered output is compared as well.

Deliberate normalisations (nothing else is normalised):
  - Object OIDs differ between the servers. A value is replaced by a symbol (`<rel cpu>`,
    `<nsp information_schema>`, `<db>`, `<role admin>`) when it is the OID of one of our tables,
    of a shared schema, of the database or of the role on that server: in every column where
    PostgreSQL's column type is `oid`, and in any column for the OIDs of our tables (pgjdbc
    inlines them as integers). Other OIDs in `oid` columns above 16383 (objects PostgreSQL made
    after initdb) become `<oid>`; built-in OIDs (types, access methods) stay as they are.
  - Storage and statistics columns (pg_corpus.PHYSICAL_COLUMNS: relpages, reltuples, sizes, ...)
    and columns of PostgreSQL type xid compare as `<physical>`.
  - Rows about PostgreSQL's own objects (its other databases, schemas such as pg_toast, the
    plpgsql extension, index access methods, the catalogs' types) are filtered out by each
    statement's `keep`, on both sides.
  - Both servers name the user `admin` (PostgreSQL's initdb superuser is called admin) and the
    database `qdb`, so owners and current_database() compare as they are.

DEVIATIONS lists the differences that are left, with the reason: deliberate ones say why,
"not yet" ones what closing them would take. A statement listed there that shows no difference
any more fails too (remove it from the list).

Run: tests/clients/run.sh -k pg_differential. Skips when PostgreSQL 15's binaries are missing.
As root (as here and in CI) PostgreSQL runs as the `postgres` user, which refuses root; its
directory is then made outside pytest's temporary directory (run.sh's is private to root, and
postgres could not reach it) and removed at the end.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from psycopg import pq

from conftest import Server, free_port, free_ports, sundial_bin
from pg_corpus import (
    PHYSICAL_COLUMNS, PSQL_COMMANDS, SHARED_SCHEMAS, STATEMENTS, TABLES, TABLE_NAMES, PsqlCommand,
    Stmt,
)

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PSQL = PG_BIN / "psql"
START_TIMEOUT_S = 60.0

# Reasons shared by several statements. "Not yet" ones say what closing them would take.
DESCRIPTIONS = (
    "Deliberate: pg_description has no rows, so built-in objects have no comment ('standard "
    "public schema', the types' descriptions). PostgreSQL's comments are its own text, which "
    "Sundial does not copy; no tool reads them for anything but display.")
COLLATE = (
    "Deliberate: Sundial compares strings byte by byte, which is the C collation, and says so "
    "(datcollate/datctype 'C'); the test's PostgreSQL was initialised with the C.UTF-8 locale.")

# statement id (or "psql <command>") -> (the kinds of difference excused, why they are deliberate).
# Other kinds of difference in the same statement still fail.
DEVIATIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "SELECT * FROM cpu (row order)": (
        ("row order",),
        "PostgreSQL returns a heap table in insertion order; Sundial returns a table with a "
        "designated timestamp in timestamp order (its storage order). Neither is promised without "
        "ORDER BY; 'SELECT * FROM cpu ORDER BY ts' compares the same rows in a defined order.",
    ),
    "grafana: server_version_num": (
        ("column types",),
        "Deliberate: integer literals are LONG (QuestDB's dialect; see docs/query.md), so "
        "`int4 / 100` is int8 where PostgreSQL's is int4; Grafana reads a number either way. "
        "The statement reads no relation, so nothing tells it apart from a QuestDB statement "
        "(PostgreSQL's typing applies to statements of its catalogs or of table functions: "
        "result_names::postgres_statement).",
    ),
    "dbeaver: database": (("values",), COLLATE),
    "dbeaver: schemas": (("values",), DESCRIPTIONS),
    "dbeaver: tables of public": (
        ("values",),
        "Deliberate: Sundial has no TOAST tables (long values live in its own column files), so "
        "reltoastrelid is 0.",
    ),
    "dbeaver: data types of pg_catalog (our column types)": (("values",), DESCRIPTIONS),
    "psql \\dn+": (("query #1 values", "output"), DESCRIPTIONS),
    "psql \\l": (("query #1 values",), COLLATE),
    "psql \\l+": (("query #1 values",), COLLATE),
}
for _t in ("cpu", "typ", "Mixed Case"):
    DEVIATIONS[f"dbeaver: columns of {_t}"] = (
        ("column types",),
        "Deliberate: pg_attribute.attmissingval is anyarray in PostgreSQL, which has no Arrow "
        "counterpart; Sundial's is text[] and always NULL (no column has a missing value).")

MODES = ("extended", "simple")


# ---------------------------------------------------------------------------------------------
# PostgreSQL 15
# ---------------------------------------------------------------------------------------------


@dataclass
class Postgres:
    port: int
    root: Path
    proc: subprocess.Popen

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=admin dbname=qdb"

    def psql_args(self) -> tuple[list[str], dict]:
        return (["-h", "127.0.0.1", "-p", str(self.port), "-U", "admin", "-d", "qdb"],
                {"PGPASSWORD": ""})


def _as_postgres_user() -> dict:
    """Popen arguments that run a child as `postgres` when we are root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        pytest.fail("running as root and there is no `postgres` user to run PostgreSQL as")
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    if not (PG_BIN / "postgres").is_file() or not (PG_BIN / "initdb").is_file() or not PSQL.is_file():
        pytest.skip(f"PostgreSQL 15 is not installed ({PG_BIN}; tests/clients/setup.sh installs it)")
    as_pg = _as_postgres_user()
    if as_pg:
        root = Path(tempfile.mkdtemp(prefix="sundial-pgdiff-"))
        os.chown(root, as_pg["user"], as_pg["group"])
    else:
        root = tmp_path_factory.mktemp("postgres")
    data = root / "data"
    env = dict(os.environ, LC_ALL="C.UTF-8", LANG="C.UTF-8", TZ="UTC")
    # The superuser is named admin, as Sundial's user: owners compare as they are.
    init = subprocess.run(
        [str(PG_BIN / "initdb"), "-D", str(data), "-U", "admin", "-A", "trust", "-E", "UTF8",
         "--locale=C.UTF-8", "--no-sync"],
        capture_output=True, text=True, env=env, timeout=300, cwd=root, **as_pg)
    if init.returncode != 0:
        pytest.fail(f"initdb failed ({init.returncode}):\n{init.stdout}\n{init.stderr}")
    port = free_ports(1)[0]
    log = open(root / "postgres.log", "wb")
    proc = subprocess.Popen(
        [str(PG_BIN / "postgres"), "-D", str(data), "-p", str(port), "-h", "127.0.0.1",
         "-k", str(root), "-c", "fsync=off", "-c", "timezone=UTC", "-c", "log_timezone=UTC"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root,
        **as_pg)
    pg = Postgres(port=port, root=root, proc=proc)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with psycopg.connect(f"host=127.0.0.1 port={port} user=admin dbname=postgres",
                                     autocommit=True, connect_timeout=5) as conn:
                    conn.execute("CREATE DATABASE qdb")
                break
            except psycopg.OperationalError as e:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"PostgreSQL did not start: {e}\n"
                                f"{(root / 'postgres.log').read_text(errors='replace')}")
                time.sleep(0.1)
        yield pg
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        if as_pg:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def sundial(tmp_path_factory):
    binary = sundial_bin()
    if not binary.is_file():
        pytest.fail(f"sundial binary not found at {binary} (set SUNDIAL_BIN)")
    directory = tmp_path_factory.mktemp("sundial")
    http_port, tcp_port, pg_port = free_ports(3)
    srv = Server(binary=binary, data_dir=directory / "data", log_path=directory / "serve.log",
                 http_port=http_port, tcp_port=tcp_port, udp_port=free_port(socket.SOCK_DGRAM),
                 pg_port=pg_port)
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()


# ---------------------------------------------------------------------------------------------
# One side: a connection, its OIDs, and running statements on it.
# ---------------------------------------------------------------------------------------------


@dataclass
class Answer:
    names: list[str] = field(default_factory=list)
    types: list[int] = field(default_factory=list)
    origins: list[tuple[int, int]] = field(default_factory=list)  # (table OID, column number)
    rows: list[tuple] = field(default_factory=list)
    error: str | None = None  # "SQLSTATE: message"


class Side:
    def __init__(self, name: str, dsn: str, psql_args: list[str], psql_env: dict):
        self.name = name
        self.conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        self.psql_args = psql_args
        self.psql_env = psql_env
        self.table_oids: dict[str, int] = {}
        self.nsp_oids: dict[str, int] = {}
        self.symbols: dict[str, str] = {}  # OID text -> symbol

    def load_oids(self) -> None:
        for t in TABLE_NAMES:
            a = self.run("SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                         "ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relname = $1",
                         ((t, 1043),), "extended")
            assert a.error is None and len(a.rows) == 1, f"{self.name}: no pg_class row for {t}: {a}"
            self.table_oids[t] = int(a.rows[0][0])
            self.symbols[a.rows[0][0]] = f"<rel {t}>"
        a = self.run("SELECT nspname, oid FROM pg_catalog.pg_namespace", (), "simple")
        assert a.error is None, f"{self.name}: {a.error}"
        for nspname, oid in a.rows:
            self.nsp_oids[nspname] = int(oid)
            if nspname in SHARED_SCHEMAS:
                self.symbols[oid] = f"<nsp {nspname}>"
        for sql, symbol in (("SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()", "<db>"),
                            ("SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user", "<role admin>")):
            a = self.run(sql, (), "simple")
            if a.error is None and len(a.rows) == 1:
                self.symbols[a.rows[0][0]] = symbol

    def substitute(self, text: str) -> str:
        text = re.sub(r"@oid:([^@]+)@", lambda m: str(self.table_oids[m.group(1)]), text)
        return re.sub(r"@nsp:([^@]+)@", lambda m: str(self.nsp_oids[m.group(1)]), text)

    def run(self, sql: str, params: tuple, mode: str) -> Answer:
        pgconn = self.conn.pgconn
        sql = self.substitute(sql)
        values = [None if p[0] is None else self.substitute(str(p[0])) for p in params]
        if mode == "extended":
            res = pgconn.exec_params(sql.encode(), [None if x is None else x.encode() for x in values],
                                     [p[1] for p in params] or None)
        else:
            for i in range(len(values), 0, -1):  # $10 before $1
                literal = "NULL" if values[i - 1] is None else "'" + values[i - 1].replace("'", "''") + "'"
                sql = sql.replace(f"${i}", literal)
            res = pgconn.exec_(sql.encode())
        answer = Answer()
        if res.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
            state = (res.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
            msg = (res.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or res.error_message or b"")
            answer.error = f"{state}: {msg.decode(errors='replace').strip()}"
            return answer
        for i in range(res.nfields):
            answer.names.append((res.fname(i) or b"").decode())
            answer.types.append(res.ftype(i))
            answer.origins.append((res.ftable(i), res.ftablecol(i)))
        for r in range(res.ntuples):
            answer.rows.append(tuple(
                None if (x := res.get_value(r, c)) is None else bytes(x).decode(errors="replace")
                for c in range(res.nfields)))
        return answer

    def psql(self, command: str, echo: bool = False) -> subprocess.CompletedProcess:
        env = dict(os.environ, PGCONNECT_TIMEOUT="10", LC_ALL="C.UTF-8", PAGER="", PSQL_PAGER="",
                   COLUMNS="200", **self.psql_env)
        return subprocess.run(
            [str(PSQL), "-X", "-P", "pager=off", *self.psql_args, *(["-E"] if echo else []),
             "-c", command],
            capture_output=True, text=True, env=env, timeout=60)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(scope="module")
def sides(postgres, sundial):
    pg = Side("PostgreSQL", postgres.dsn, *postgres.psql_args())
    sd = Side("Sundial", sundial.dsn,
              ["-h", "127.0.0.1", "-p", str(sundial.pg_port), "-U", "admin", "-d", "qdb"],
              {"PGPASSWORD": "quest"})
    try:
        for t in TABLES:
            for side, ddl in ((pg, t.pg_ddl), (sd, t.sundial_ddl)):
                side.conn.execute(ddl)
                for insert in t.inserts:
                    side.conn.execute(insert)
        for side in (pg, sd):
            side.load_oids()
        yield pg, sd
    finally:
        pg.close()
        sd.close()


# ---------------------------------------------------------------------------------------------
# Comparing
# ---------------------------------------------------------------------------------------------

OID_TYPE = 26
XID_TYPES = (28, 5069)
FIRST_NORMAL_OID = 16384


def _normalise(side: Side, pg_answer: Answer, names: list[str], row: tuple, index: dict) -> tuple:
    out = []
    for name in names:
        value = row[index[name]]
        pg_type = pg_answer.types[pg_answer.names.index(name)]
        if value is None:
            out.append(None)
        elif name in PHYSICAL_COLUMNS or pg_type in XID_TYPES:
            out.append("<physical>")
        elif value in side.symbols and (pg_type == OID_TYPE or side.symbols[value].startswith("<rel ")):
            out.append(side.symbols[value])
        elif pg_type == OID_TYPE and value.isdigit() and int(value) >= FIRST_NORMAL_OID:
            out.append("<oid>")
        else:
            out.append(value)
    return tuple(out)


def _rows(side: Side, answer: Answer, pg_answer: Answer, names: list[str], stmt_keep) -> list[tuple]:
    index = {n: i for i, n in enumerate(answer.names)}
    rows = answer.rows
    if stmt_keep is not None:
        rows = [r for r in rows if stmt_keep(dict(zip(answer.names, r)))]
    return [_normalise(side, pg_answer, names, r, index) for r in rows]


def _show(row: tuple, names: list[str]) -> str:
    return "(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, row)) + ")"


def compare(pg: Side, sd: Side, sql: str, params: tuple, mode: str, keep, ordered: bool,
            check_origin: bool = False) -> list[tuple[str, str]]:
    """The differences between the two answers, as (kind, description) pairs."""
    a = pg.run(sql, params, mode)
    if a.error is not None:
        pytest.fail(f"PostgreSQL rejects a corpus statement ({mode}): {a.error}\n{sql}")
    b = sd.run(sql, params, mode)
    if b.error is not None:
        return [("error", f"Sundial fails: {b.error}")]
    diffs = []
    if a.names != b.names:
        missing = [n for n in a.names if n not in b.names]
        extra = [n for n in b.names if n not in a.names]
        detail = f"PostgreSQL {a.names}\n      Sundial    {b.names}"
        if missing or extra:
            detail += f"\n      missing in Sundial: {missing}; only in Sundial: {extra}"
        diffs.append(("column names", detail))
    common = [n for n in a.names if n in b.names]
    type_diffs = [f"{n}: PostgreSQL {a.types[a.names.index(n)]}, Sundial {b.types[b.names.index(n)]}"
                  for n in common if a.types[a.names.index(n)] != b.types[b.names.index(n)]]
    if type_diffs:
        diffs.append(("column types", "; ".join(type_diffs)))
    if check_origin:
        def origin(side, ans, n):
            table, col = ans.origins[ans.names.index(n)]
            return (side.symbols.get(str(table), table), col)
        origin_diffs = [f"{n}: PostgreSQL {origin(pg, a, n)}, Sundial {origin(sd, b, n)}"
                        for n in common if origin(pg, a, n) != origin(sd, b, n)]
        if origin_diffs:
            diffs.append(("column origin (RowDescription table OID, column number)",
                          "; ".join(origin_diffs)))
    ra = _rows(pg, a, a, common, keep)
    rb = _rows(sd, b, a, common, keep)
    if len(ra) == len(rb) and sorted(ra, key=repr) != sorted(rb, key=repr):
        # As many rows: pair them (in order, or both sorted) and say which columns differ.
        pairs = zip(ra, rb) if ordered else zip(sorted(ra, key=repr), sorted(rb, key=repr))
        by_column: dict[str, list[tuple]] = {}
        for x, y in pairs:
            for name, vx, vy in zip(common, x, y):
                if vx != vy and (vx, vy) not in by_column.setdefault(name, []):
                    by_column[name].append((vx, vy))
        lines = [f"{len(ra)} rows on both; columns that differ:"]
        for name, examples in by_column.items():
            if examples:
                shown = "; ".join(f"PostgreSQL {vx!r}, Sundial {vy!r}" for vx, vy in examples[:3])
                lines.append(f"      {name}: {shown}" + (" ..." if len(examples) > 3 else ""))
        diffs.append(("values", "\n".join(lines)))
    elif sorted(ra, key=repr) != sorted(rb, key=repr):
        only_a = [r for r in ra if r not in rb]
        only_b = [r for r in rb if r not in ra]
        lines = [f"{len(ra)} rows in PostgreSQL, {len(rb)} in Sundial"]
        lines += [f"      only PostgreSQL: {_show(r, common)}" for r in only_a[:8]]
        lines += [f"      only Sundial:    {_show(r, common)}" for r in only_b[:8]]
        if len(only_a) > 8 or len(only_b) > 8:
            lines.append("      ...")
        diffs.append(("values", "\n".join(lines)))
    elif ordered and ra != rb:
        diffs.append(("row order", f"PostgreSQL {[_show(r, common) for r in ra]}\n"
                                   f"      Sundial    {[_show(r, common) for r in rb]}"))
    return diffs


@dataclass
class Diff:
    mode: str  # extended, simple or psql
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"  [{self.mode}] {self.kind}: {self.detail}"


def _record(key: str, sql: str, diffs: list[Diff]) -> None:
    """Appends the differences to $SUNDIAL_PG_DIFF_REPORT (JSON lines), when set."""
    path = os.environ.get("SUNDIAL_PG_DIFF_REPORT")
    if path and diffs:
        with open(path, "a") as f:
            for d in diffs:
                f.write(json.dumps({"key": key, "mode": d.mode, "kind": d.kind, "detail": d.detail,
                                    "sql": sql}) + "\n")


def verdict(key: str, diffs: list[Diff], context: str) -> None:
    """Fails on undocumented differences, and on documented ones that no longer happen."""
    excused_kinds, reason = DEVIATIONS.get(key, ((), ""))
    excused = [d for d in diffs if d.kind in excused_kinds]
    unexplained = [d for d in diffs if d.kind not in excused_kinds]
    if unexplained:
        pytest.fail(f"{key}: Sundial differs from PostgreSQL 15\n"
                    + "\n".join(map(str, unexplained)) + "\n" + context, pytrace=False)
    if excused_kinds and not excused:
        pytest.fail(f"{key!r} is listed in DEVIATIONS but now matches PostgreSQL: remove it")
    if excused:
        pytest.xfail(f"deliberate deviation: {reason}\n" + "\n".join(map(str, excused)))


@pytest.mark.parametrize("stmt", STATEMENTS, ids=[s.id for s in STATEMENTS])
def test_statement(sides, stmt: Stmt):
    pg, sd = sides
    diffs = [Diff(mode, kind, detail)
             for mode in MODES
             for kind, detail in compare(pg, sd, stmt.sql, stmt.params, mode, stmt.keep,
                                         stmt.is_ordered, stmt.check_origin)]
    _record(stmt.id, stmt.sql, diffs)
    context = f"  statement: {stmt.sql.strip()}"
    if stmt.params:
        context += f"\n  parameters: {[p[0] for p in stmt.params]}"
    verdict(stmt.id, diffs, context)


# ---------------------------------------------------------------------------------------------
# psql's backslash commands
# ---------------------------------------------------------------------------------------------

QUERY_BLOCK = re.compile(r"\*{9} QUERY \*{10}\n(.*?)\n\*{26}\n", re.S)


def capture(pg: Side, command: str) -> tuple[list[str], str]:
    """The queries psql sends for `command` (from `psql -E`), with our tables' OIDs as
    placeholders, and psql's output without them."""
    done = pg.psql(command, echo=True)
    assert done.returncode == 0, f"psql {command} failed on PostgreSQL: {done.stderr}"
    queries = QUERY_BLOCK.findall(done.stdout)
    assert queries, f"psql -E printed no query for {command}:\n{done.stdout}"
    by_oid = {str(oid): name for name, oid in pg.table_oids.items()}
    queries = [re.sub(r"\b(\d{5,})\b", lambda m: f"@oid:{by_oid[m.group(1)]}@" if m.group(1) in by_oid
                      else m.group(1), q) for q in queries]
    return queries, QUERY_BLOCK.sub("", done.stdout)


@pytest.mark.parametrize("cmd", PSQL_COMMANDS, ids=[c.command for c in PSQL_COMMANDS])
def test_psql_command(sides, cmd: PsqlCommand):
    pg, sd = sides
    queries, _ = capture(pg, cmd.command)
    diffs: list[Diff] = []
    context = []
    for n, sql in enumerate(queries, 1):
        ordered = "order by" in sql.lower().rsplit(")", 1)[-1]
        found = [Diff(mode, f"query #{n} {kind}", detail)
                 for mode in MODES
                 for kind, detail in compare(pg, sd, sql, (), mode, cmd.keep, ordered)]
        _record(f"psql {cmd.command} #{n}", sql, found)
        if found:
            context.append(f"  query #{n}: {sql.strip()}")
        diffs += found
    if cmd.compare_output:
        a, b = pg.psql(cmd.command), sd.psql(cmd.command)
        if (a.stdout, a.stderr.strip()) != (b.stdout, b.stderr.strip()):
            found = [Diff("psql", "output", f"\n--- PostgreSQL\n{a.stdout}{a.stderr}"
                                             f"--- Sundial\n{b.stdout}{b.stderr}---")]
            _record(f"psql {cmd.command} output", cmd.command, found)
            diffs += found
    verdict(f"psql {cmd.command}", diffs, "\n".join(context))

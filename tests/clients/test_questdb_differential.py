"""Sundial against the real QuestDB (9.3.4), statement for statement.

Both servers get the same `CREATE TABLE` text over HTTP /exec and then the same ILP lines over
TCP (the generated iot-shaped data of `questdb_corpus`, with NULL tags and fields, duplicates,
gaps and out-of-order lines). Then every statement of the generated corpus (several hundred,
QuestDB dialect: SAMPLE BY with every FILL and alignment, LATEST ON, ASOF/LT/SPLICE JOIN,
timestamps as integers, interval literals, implicit GROUP BY, DISTINCT, ORDER BY/LIMIT,
aggregates, unaliased expressions) runs on both through `/exec`, and the answers are compared:

- column names and QuestDB's type names as /exec reports them;
- values: numbers to 1e-9 relative, everything else (timestamps as strings) exactly;
- row order where the statement defines it (its `order` columns: ORDER BY keys, SAMPLE BY's
  timestamp, a plain SELECT's designated timestamp): rows must come in the same sequence of
  order-key values, and rows that tie on the order key are compared as a multiset (so equal
  timestamps, e.g. exact duplicate points or SAMPLE BY's keyed rows of one bucket, may come in
  any order); without one the rows are compared as sorted multisets;
- an error on both sides counts as agreement; an error on one side is a difference.

A difference fails the test unless a `DEVIATIONS` entry (family or regex over the statement ->
reason) explains it. The failure message, and `questdb_differential_report.txt` in the test's
temporary directory (or $QDB_DIFF_REPORT when set), list each difference: statement, kind
(error/name/type/rows/value/order) and a short diff.

Run it alone with `tests/clients/run.sh -k differential`. It needs `java` (QuestDB's jar comes from
tests/clients/setup.sh); without `java` it skips. The module also runs as a script against two
servers already loaded elsewhere, which is handy for minimising a difference:

    python tests/clients/test_questdb_differential.py --questdb 9000 --sundial 9100 [--load] [-k REGEX]
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import questdb_corpus as qc  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
QUESTDB_SH = REPO_ROOT / "bench" / "peers" / "questdb.sh"
LOAD_TIMEOUT_S = 180
QUERY_TIMEOUT_S = 60
REL_TOL = 1e-9
STABLE_S = 10

# Differences written down in docs/query.md ("Differences from QuestDB"), each with its reason.
#
# TYPE_EQUIVALENT: (QuestDB's type, Sundial's type) pairs compared as equal, for any column.
TYPE_EQUIVALENT: dict[tuple[str, str], str] = {
    ("INT", "LONG"): "integer literals and arithmetic on them are LONG (64-bit) in Sundial, "
                     "INT when they fit in QuestDB; values agree",
    ("STRING", "VARCHAR"): "Sundial has one text type, VARCHAR (UTF-8); QuestDB's functions "
                           "return its older UTF-16 STRING",
    ("CHAR", "VARCHAR"): "a one-character literal is VARCHAR; Sundial has no CHAR type",
    ("STRING", "SYMBOL"): "a function of a SYMBOL that returns its argument's values "
                          "(coalesce) keeps Sundial's SYMBOL type",
}

# Names are compared with a cast's type and IS NULL's NULL in lower case: the parsed statement
# does not keep the case they were written in (see sundial_sql::questdb::column_names).
_NAME_CASE = re.compile(r"(::\w+|= NULL)", re.IGNORECASE)


def comparable_name(name: str) -> str:
    return _NAME_CASE.sub(lambda m: m.group(0).lower(), name)


# DEVIATIONS: (family or None, regex over the statement or None, kinds of difference it may
# show, reason). A difference is explained when an entry matches its statement and every kind
# it shows is one of the entry's; any other difference in that statement still fails.
DEVIATIONS: list[tuple[str | None, str | None, set[str], str]] = [
    ("join", r"SPLICE JOIN .*\bON\b", {"value", "rows", "order"},
     "deliberate: QuestDB 9.3.4's keyed SPLICE JOIN pairs a row with an older row of the other "
     "side than the newest with its key whenever the row it has read ahead on that side has "
     "another key (left x@5s gets right x@3s though right x@4s exists), and emits rows whose "
     "keys differ at one timestamp in a different order; Sundial pairs each row with the newest "
     "row of its key (exec::splice_join). Without keys the answers are equal"),
    ("ts_int", r"timestamp \* |timestamp / |timestamp - '", {"error-on-one-side"},
     "deliberate: multiplying or dividing a TIMESTAMP, or subtracting a string from one, is "
     "refused (QuestDB treats the timestamp as its microseconds)"),
    ("ts_int", r"^SELECT cast\(1704153600000000 AS TIMESTAMP\), 1704153600000000::timestamp$",
     {"error-on-one-side"},
     "deliberate: a statement without a table names its items as PostgreSQL tools expect, "
     "so two casts get one name and are refused as duplicates"),
    ("names", r"^SELECT (cast\(1 AS LONG\)|1 \+ 1)", {"name", "name/type"},
     "deliberate: a statement without a table names its items as PostgreSQL tools expect "
     "(cast, column)"),
    ("ts_int", r"^SELECT (systimestamp\(\) > |to_timestamp\()", {"name"},
     "deliberate: a statement without a table names its items as PostgreSQL tools expect"),
    (None, r"\bok\b|^SELECT \* FROM events", {"rows", "value", "type/value", "order", "name/type/value"},
     "deliberate: BOOLEAN keeps NULL (a field an ILP line leaves out is NULL); QuestDB "
     "stores false"),
    ("functions", r"^SELECT nullif\(status, 0\), count\(\) FROM diagnostics ORDER BY 1$", {"order"},
     "deliberate: an expression's NULL sorts as SQL's default; its type, which decides "
     "QuestDB's order, is not known before planning"),
    ("names", r"price::float", {"name/type"},
     "deliberate: QuestDB answers a cast of a DOUBLE to FLOAT as the DOUBLE (named ::double); "
     "Sundial makes the FLOAT asked for"),
    ("sample_by", r" FROM '[^']*' TO '[^']*' FILL\((PREV|LINEAR)\)", {"rows"},
     "deliberate: with FROM/TO, FILL(PREV) and FILL(LINEAR) fill every bucket of the range, as "
     "FILL(NULL) and FILL(value) do on both. QuestDB 9.3.4's FILL(PREV) stops at the last row "
     "and gives the buckets before the first row uninitialised values (7238537380690472815 "
     "for a LONG sum), and its FILL(LINEAR) ignores FROM/TO"),
]


# ---------------------------------------------------------------------------------------------
# HTTP


@dataclass
class Answer:
    columns: list[tuple[str, str]] | None = None
    rows: list[list] | None = None
    error: str | None = None


def exec_http(port: int, sql: str) -> Answer:
    url = f"http://127.0.0.1:{port}/exec?" + urllib.parse.urlencode({"query": sql})
    try:
        with urllib.request.urlopen(url, timeout=QUERY_TIMEOUT_S) as r:
            body = r.read()
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            doc = json.loads(body)
        except ValueError:
            return Answer(error=f"HTTP {e.code}: {body[:300]!r}")
        return Answer(error=str(doc.get("error", doc))[:300])
    except (OSError, TimeoutError) as e:
        return Answer(error=f"request failed: {e}")
    try:
        doc = json.loads(body)
    except ValueError:
        return Answer(error=f"not JSON: {body[:300]!r}")
    if "error" in doc:
        return Answer(error=str(doc["error"])[:300])
    if "columns" not in doc:
        return Answer(columns=[], rows=[])  # DDL
    return Answer(
        columns=[(c.get("name"), c.get("type")) for c in doc["columns"]],
        rows=doc.get("dataset", []),
    )


def send_ilp(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        for i in range(0, len(payload), 1 << 16):
            s.sendall(payload[i : i + (1 << 16)])


def wait_counts(ports: dict[str, int], data: qc.Data, log=lambda: "") -> list[str]:
    """Waits until every server has every line's row; returns what is still missing when QuestDB
    has them all but the other side stopped changing for STABLE_S (a load difference)."""
    want = {t: data.count(t) for t in data.lines}
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    got: dict = {}
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        got = {}
        for who, port in ports.items():
            for t in want:
                a = exec_http(port, f"SELECT count() FROM {t}")
                got[(who, t)] = a.rows[0][0] if a.rows else a.error
        if all(got[(w, t)] == want[t] for w in ports for t in want):
            return []
        if got != last:
            last, since = got, time.monotonic()
        elif all(got[("questdb", t)] == want[t] for t in want) and time.monotonic() - since > STABLE_S:
            return [f"{w}.{t}: {got[(w, t)]} rows of {want[t]} sent"
                    for w in ports for t in want if got[(w, t)] != want[t]]
        time.sleep(0.5)
    pytest.fail(f"row counts not reached within {LOAD_TIMEOUT_S}s: want {want}, got {got}\n{log()}")


def load(ports: dict[str, int], ilp_ports: dict[str, int], data: qc.Data, log=lambda: "") -> list[str]:
    for who, port in ports.items():
        for table, ddl in qc.DDL.items():
            a = exec_http(port, ddl)
            assert a.error is None, f"{who} refused the DDL of {table}: {a.error}"
    payload = data.payload()
    for who, port in ilp_ports.items():
        send_ilp(port, payload)
    return wait_counts(ports, data, log)


# ---------------------------------------------------------------------------------------------
# Comparison


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def values_equal(a, b) -> bool:
    if _num(a) and _num(b):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=REL_TOL, abs_tol=1e-12)
    if _num(a) != _num(b) or isinstance(a, bool) != isinstance(b, bool):
        return False
    return a == b


def rows_equal(a: list, b: list) -> bool:
    return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))


def sort_key(row: list) -> tuple:
    out = []
    for v in row:
        if v is None:
            out.append((0, ""))
        elif isinstance(v, bool):
            out.append((1, str(v)))
        elif _num(v):
            f = float(v)
            # By value rounded to 9 digits, so float noise does not reorder rows.
            out.append((4, 0.0) if math.isnan(f) else (2, float(f"{f:.8e}")))
        else:
            out.append((5, str(v)))
    return tuple(out)


def multiset_diff(a: list[list], b: list[list]) -> tuple[list, list] | None:
    """None when equal as multisets (numbers with tolerance); else (only in a, only in b)."""
    sa, sb = sorted(a, key=sort_key), sorted(b, key=sort_key)
    if len(sa) == len(sb) and all(rows_equal(x, y) for x, y in zip(sa, sb)):
        return None
    # Greedy matching for a readable diff (tolerant of float noise).
    rest_b = list(sb)
    only_a = []
    for r in sa:
        for i, s in enumerate(rest_b):
            if rows_equal(r, s):
                del rest_b[i]
                break
        else:
            only_a.append(r)
    return only_a, rest_b


def runs(rows: list[list], order: list[int]) -> list[tuple[list, list[list]]]:
    """Consecutive rows grouped by their order-key values."""
    out: list[tuple[list, list[list]]] = []
    for r in rows:
        k = [r[i] if i < len(r) else None for i in order]
        if out and rows_equal(out[-1][0], k):
            out[-1][1].append(r)
        else:
            out.append((k, [r]))
    return out


@dataclass
class Diff:
    stmt: qc.Stmt
    kind: str
    detail: str
    explained: str | None = None


def fmt_rows(rows: list[list], limit: int = 6) -> str:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"... ({len(rows)} rows)")
    return "\n".join("      " + x for x in lines) or "      (none)"


def compare(stmt: qc.Stmt, q: Answer, s: Answer) -> Diff | None:
    if q.error is not None or s.error is not None:
        if q.error is not None and s.error is not None:
            return None
        if q.error is not None:
            return Diff(stmt, "error-on-one-side",
                        f"QuestDB: ERROR {q.error}\n    Sundial: {len(s.rows)} rows, columns "
                        f"{s.columns}\n{fmt_rows(s.rows, 3)}")
        return Diff(stmt, "error-on-one-side",
                    f"Sundial: ERROR {s.error}\n    QuestDB: {len(q.rows)} rows, columns "
                    f"{q.columns}\n{fmt_rows(q.rows, 3)}")
    qn = [comparable_name(c[0]) for c in q.columns]
    sn = [comparable_name(c[0]) for c in s.columns]
    qt, st = [c[1] for c in q.columns], [c[1] for c in s.columns]
    st = [q_t if (q_t, s_t) in TYPE_EQUIVALENT else s_t for q_t, s_t in zip(qt, st)]
    if len(qn) != len(sn):
        return Diff(stmt, "name", f"QuestDB columns {q.columns}\n    Sundial columns {s.columns}")
    problems = []
    if qn != sn:
        problems.append(("name", f"QuestDB names {qn}\n    Sundial names {sn}"))
    if qt != st:
        pairs = [f"{qn[i]}: {qt[i]} vs {st[i]}" for i in range(len(qt)) if qt[i] != st[i]]
        problems.append(("type", "QuestDB vs Sundial: " + "; ".join(pairs)))
    md = multiset_diff(q.rows, s.rows)
    if md is not None:
        only_q, only_s = md
        kind = "rows" if len(q.rows) != len(s.rows) else "value"
        problems.append((kind,
            f"QuestDB {len(q.rows)} rows, Sundial {len(s.rows)}; only in QuestDB:\n"
            f"{fmt_rows(only_q)}\n    only in Sundial:\n{fmt_rows(only_s)}"))
    elif stmt.order is not None:
        rq, rs = runs(q.rows, stmt.order), runs(s.rows, stmt.order)
        bad = None
        for i, (a, b) in enumerate(zip(rq, rs)):
            if not rows_equal(a[0], b[0]) or multiset_diff(a[1], b[1]) is not None:
                bad = i
                break
        if bad is None and len(rq) != len(rs):
            bad = min(len(rq), len(rs))
        if bad is not None:
            qi = sum(len(r[1]) for r in rq[:bad])
            problems.append(("order",
                f"rows equal as a multiset but ordered differently (order keys at columns "
                f"{stmt.order}) from row {qi}:\n    QuestDB:\n{fmt_rows(q.rows[qi:qi + 4], 4)}\n"
                f"    Sundial:\n{fmt_rows(s.rows[qi:qi + 4], 4)}"))
    if not problems:
        return None
    return Diff(stmt, "/".join(p[0] for p in problems), "\n    ".join(p[1] for p in problems))


def explain(d: Diff) -> None:
    for family, pattern, kinds, reason in DEVIATIONS:
        if family is not None and family != d.stmt.family:
            continue
        if pattern is not None and not re.search(pattern, d.stmt.sql):
            continue
        if d.kind not in kinds and not set(d.kind.split("/")) <= kinds:
            continue
        d.explained = reason
        return


def run_corpus(qdb_port: int, sundial_port: int, stmts: list[qc.Stmt]) -> tuple[list[Diff], list[str]]:
    """(differences, statements QuestDB refused). Each statement runs twice on QuestDB: one
    whose two answers differ is reported as unstable (explained, not compared) rather than held
    against Sundial."""
    diffs = []
    refused = []
    for stmt in stmts:
        q = exec_http(qdb_port, stmt.sql)
        if q.error is not None:
            refused.append(f"{stmt.sql}: {q.error}")
        again = compare(stmt, q, exec_http(qdb_port, stmt.sql))
        if again is not None:
            diffs.append(Diff(stmt, "questdb-unstable", again.detail.replace("Sundial", "2nd run"),
                              "QuestDB itself answered differently on a second run"))
            continue
        s = exec_http(sundial_port, stmt.sql)
        d = compare(stmt, q, s)
        if d is not None:
            explain(d)
            diffs.append(d)
    return diffs, refused


def report(stmts: list[qc.Stmt], diffs: list[Diff], seconds: float) -> str:
    fam = Counter(s.family for s in stmts)
    bad = Counter(d.stmt.family for d in diffs if d.explained is None)
    lines = [f"QuestDB differential: {len(stmts)} statements in {seconds:.1f} s; "
             f"{sum(bad.values())} unexplained differences, "
             f"{sum(1 for d in diffs if d.explained)} explained by DEVIATIONS"]
    for f, n in fam.items():
        lines.append(f"  {f:12} {n:4} statements, {bad.get(f, 0):3} differ")
    kinds = Counter(d.kind for d in diffs if d.explained is None)
    lines.append("  by kind: " + ", ".join(f"{k}={n}" for k, n in kinds.most_common()))
    for d in sorted(diffs, key=lambda d: (d.explained is not None, d.kind, d.stmt.family)):
        tag = f"EXPLAINED ({d.explained})" if d.explained else "DIFF"
        lines.append(f"\n[{tag}] [{d.stmt.family}] [{d.kind}] {d.stmt.sql}\n    {d.detail}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Fixtures and the test


@pytest.fixture(scope="module")
def data() -> qc.Data:
    return qc.generate()


@pytest.fixture(scope="module")
def questdb(tmp_path_factory):
    """A QuestDB 9.3.4 on free loopback ports with its root under pytest's temporary directory;
    yields (http port, ILP/TCP port); stopped at the end of the module."""
    from conftest import free_ports

    if shutil.which(os.environ.get("QDB_JAVA", "java")) is None and not (
        os.environ.get("JAVA_HOME") and Path(os.environ["JAVA_HOME"], "bin", "java").exists()
    ):
        pytest.skip("java is not installed: the QuestDB differential test needs a JVM (Java 17)")
    root = tmp_path_factory.mktemp("questdb")
    http, pg, ilp = free_ports(3)
    env = dict(os.environ, QDB_HTTP_PORT=str(http), QDB_PG_PORT=str(pg),
               QDB_ILP_PORT=str(ilp), QDB_HEAP="1g",
               # QuestDB's cache of compiled statements makes some SAMPLE BY ... FILL answers
               # depend on the statements run before; every statement is compiled afresh.
               QDB_CONF_EXTRA="http.query.cache.enabled=false\npg.select.cache.enabled=false")
    started = subprocess.run(["bash", str(QUESTDB_SH), "start", str(root)], env=env,
                             capture_output=True, text=True, timeout=180)
    if started.returncode != 0:
        pytest.fail(f"questdb.sh start failed ({started.returncode}):\n{started.stdout}\n"
                    f"{started.stderr}")
    try:
        yield http, ilp, root
    finally:
        subprocess.run(["bash", str(QUESTDB_SH), "stop", str(root)], env=env,
                       capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def sundial(tmp_path_factory):
    from conftest import Server, free_port, free_ports, sundial_bin

    base = tmp_path_factory.mktemp("sundial")
    http_port, tcp_port, pg_port = free_ports(3)
    srv = Server(binary=sundial_bin(), data_dir=base / "data", log_path=base / "serve.log",
                 http_port=http_port, tcp_port=tcp_port, udp_port=free_port(socket.SOCK_DGRAM),
                 pg_port=pg_port)
    if not srv.binary.is_file():
        pytest.fail(f"sundial binary not found at {srv.binary} (set SUNDIAL_BIN)")
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()


@pytest.fixture(scope="module")
def loaded(questdb, sundial, data):
    """Loads the corpus's tables into both servers once; the load's differences, if any."""
    qdb_http, qdb_ilp, qdb_root = questdb

    def logs() -> str:
        qlog = Path(qdb_root, "questdb.log")
        tail = qlog.read_text(errors="replace")[-3000:] if qlog.exists() else ""
        return f"sundial log:\n{sundial.log()[-3000:]}\nquestdb log tail:\n{tail}"

    return load({"questdb": qdb_http, "sundial": sundial.http_port},
                {"questdb": qdb_ilp, "sundial": sundial.tcp_port}, data, logs)


def test_questdb_differential(questdb, sundial, loaded, tmp_path):
    t0 = time.monotonic()
    qdb_http = questdb[0]
    missing = loaded
    loaded = time.monotonic()
    stmts = qc.corpus()
    assert len(stmts) >= 300, len(stmts)
    diffs, refused = run_corpus(qdb_http, sundial.http_port, stmts)
    # Errors on both sides count as agreement: a corpus QuestDB mostly refuses would test nothing.
    assert len(refused) <= len(stmts) // 20, (
        f"QuestDB refused {len(refused)} of {len(stmts)} statements:\n" + "\n".join(refused))
    text = report(stmts, diffs, time.monotonic() - t0)
    text += f"\n\n(load took {loaded - t0:.1f} s)"
    if missing:
        text = "LOAD DIFFERENCE: " + "; ".join(missing) + "\n" + text
    out = Path(os.environ.get("QDB_DIFF_REPORT") or tmp_path / "questdb_differential_report.txt")
    out.write_text(text)
    print(text.split("\n\n[")[0])
    unexplained = [d for d in diffs if d.explained is None]
    assert not unexplained and not missing, text


# Materialized views over the corpus's tables: (name, query, key column).
MATVIEWS = [
    ("mv_readings_1h",
     "SELECT timestamp, name, avg(velocity) AS v, sum(fuel_consumption) AS f, count() AS n, "
     "min(grade) AS g, max(heading) AS h FROM readings SAMPLE BY 1h", "name"),
    ("mv_readings_1d",
     "SELECT timestamp, fleet, max(load_capacity) AS m, count(velocity) AS c FROM readings "
     "SAMPLE BY 1d", "fleet"),
    ("mv_diagnostics_15m",
     "SELECT timestamp, name, avg(current_load) AS c, max(status) AS s FROM diagnostics "
     "SAMPLE BY 15m", "name"),
    ("mv_events_1h",
     "SELECT timestamp, kind, sum(qty) AS q, min(price) AS p, count() AS n FROM events "
     "SAMPLE BY 1h", "kind"),
    # Buckets on a time zone's calendar: New York's days.
    ("mv_readings_ny",
     "SELECT timestamp, fleet, max(load_capacity) AS m, count() AS n FROM readings "
     "SAMPLE BY 1d ALIGN TO CALENDAR TIME ZONE 'America/New_York'", "fleet"),
]


def wait_views_caught_up(ports: dict[str, int], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    sql = ("SELECT count() FROM materialized_views() WHERE view_status = 'valid' "
           "AND refresh_base_table_txn = base_table_txn")
    while True:
        counts = {k: exec_http(p, sql) for k, p in ports.items()}
        if all(a.rows == [[len(MATVIEWS)]] for a in counts.values()):
            return
        assert time.monotonic() < deadline, f"views not caught up: {counts}"
        time.sleep(0.2)


def test_materialized_views_agree(questdb, sundial, loaded, data):
    """The same CREATE MATERIALIZED VIEW statements on both servers: the views' rows, their
    SHOW CREATE text, and materialized_views()'s columns agree, after the load and after more
    rows (out of order too) arrive while the views refresh IMMEDIATE."""
    assert not loaded, loaded
    ports = {"questdb": questdb[0], "sundial": sundial.http_port}
    ilp = {"questdb": questdb[1], "sundial": sundial.tcp_port}
    for name, query, _ in MATVIEWS:
        for server, port in ports.items():
            a = exec_http(port, f"CREATE MATERIALIZED VIEW {name} AS ({query})")
            assert a.error is None, (server, name, a.error)
    diffs: list[Diff] = []

    def compare_views(round_: str) -> None:
        wait_views_caught_up(ports)
        for name, query, key in MATVIEWS:
            stmt = qc.Stmt("matview", f"SELECT * FROM {name} ORDER BY timestamp, {key}", [0, 1])
            q, s = (exec_http(p, stmt.sql) for p in ports.values())
            assert q.error is None and s.error is None, (round_, stmt.sql, q.error, s.error)
            assert len(q.rows) > 0, (round_, name)
            d = compare(stmt, q, s)
            if d is not None:
                diffs.append(d)
            show = [exec_http(p, f"SHOW CREATE MATERIALIZED VIEW {name}") for p in ports.values()]
            assert show[0].rows == show[1].rows, (round_, name, show[0], show[1])

    compare_views("after the load")
    # More rows for every table, some older than the newest (out of order), on both.
    late: dict[str, list[str]] = {}
    for table, lines in data.lines.items():
        late[table] = [shift_line(line, -3600) for line in lines[-200:]]
    payload = "".join(line + "\n" for lines in late.values() for line in lines).encode()
    before = {server: table_counts(port, late) for server, port in ports.items()}
    for server in ports:
        send_ilp(ilp[server], payload)
    # ILP over TCP commits in batches: the views are compared only once every late row is
    # committed, or a view caught up with a partial commit would differ.
    for server, port in ports.items():
        want = {t: n + len(late[t]) for t, n in before[server].items()}
        deadline = time.monotonic() + 60
        while (got := table_counts(port, late)) != want:
            assert time.monotonic() < deadline, (server, got, want)
            time.sleep(0.2)
    compare_views("after late rows")
    q, s = (exec_http(p, "SELECT * FROM materialized_views() LIMIT 0") for p in ports.values())
    same = [
        qc_ == sc or (qc_[0] == sc[0] and (qc_[1], sc[1]) in TYPE_EQUIVALENT)
        for qc_, sc in zip(q.columns, s.columns)
    ]
    assert len(q.columns) == len(s.columns) and all(same), (q.columns, s.columns)
    unexplained = [d for d in diffs if d.explained is None]
    for d in diffs:
        explain(d)
    assert not unexplained, "\n".join(f"{d.stmt.sql}: {d.kind}\n{d.detail}" for d in unexplained)


def table_counts(port: int, tables) -> dict[str, int]:
    """Each table's committed row count on the server at `port`."""
    counts = {}
    for table in tables:
        a = exec_http(port, f"SELECT count() FROM {table}")
        assert a.error is None, (table, a.error)
        counts[table] = a.rows[0][0]
    return counts


def shift_line(line: str, seconds: int) -> str:
    """An ILP line with its timestamp (the last field, nanoseconds) moved."""
    head, ts = line.rsplit(" ", 1)
    return f"{head} {int(ts) + seconds * 1_000_000_000}"


# ---------------------------------------------------------------------------------------------
# Script mode: run the corpus against servers started elsewhere.


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--questdb", type=int, required=True, help="QuestDB HTTP port")
    p.add_argument("--sundial", type=int, required=True, help="Sundial HTTP port")
    p.add_argument("--load", nargs=2, type=int, metavar=("QDB_ILP", "SUNDIAL_ILP"),
                   help="create the tables and send the data first")
    p.add_argument("-k", default=None, help="only statements matching this regex")
    p.add_argument("--family", default=None)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    ports = {"questdb": a.questdb, "sundial": a.sundial}
    if a.load:
        missing = load(ports, {"questdb": a.load[0], "sundial": a.load[1]}, qc.generate())
        if missing:
            print("LOAD DIFFERENCE: " + "; ".join(missing))
    stmts = [s for s in qc.corpus()
             if (a.k is None or re.search(a.k, s.sql)) and (a.family is None or s.family == a.family)]
    t0 = time.monotonic()
    diffs, refused = run_corpus(a.questdb, a.sundial, stmts)
    text = report(stmts, diffs, time.monotonic() - t0)
    text += f"\n\nQuestDB refused {len(refused)} statements:\n" + "\n".join(refused)
    if a.out:
        Path(a.out).write_text(text)
    print(text)
    return 1 if any(d.explained is None for d in diffs) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Checks bench/chart.py on synthetic result files: python3 bench/test_chart.py

Each case writes a small results file, runs chart.py's main() on it and parses the SVG:
the bars (<rect> with a <title>), their value labels and the ratios must be the expected
ones, and a file without result lines must be refused.
"""

import io
import os
import sys
import tempfile
import xml.dom.minidom
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chart  # noqa: E402

TSBS = """\
protocol type sundial_p50 questdb_p50
# bench/tsbs.sh 2026-11-25T11:44:17Z: data=devops-cpu-s100-1d.ilp.zst workers=1 rounds=1
result: label=server file=devops.ilp.zst protocol=tcp workers=2 rows=864000 rows_per_s=607805
result: label=sundial protocol=http type=lastpoint queries=20 failed=0 median_ms=0.10 mean_ms=0.20
result: label=sundial protocol=http type=high-cpu-all queries=20 failed=0 median_ms=8.00 mean_ms=9.00
result: label=sundial protocol=http type=double-groupby-1 queries=20 failed=0 median_ms=1.67 mean_ms=2
result: label=questdb protocol=http type=lastpoint queries=20 failed=0 median_ms=0.44 mean_ms=1.37
result: label=questdb protocol=http type=high-cpu-all queries=20 failed=0 median_ms=24.00 mean_ms=27
result: label=questdb protocol=http type=double-groupby-1 queries=0 failed=20 median_ms=0.00 mean_ms=0
result: label=sundial protocol=pg type=lastpoint queries=20 failed=0 median_ms=0.09 mean_ms=0.16
result: label=questdb protocol=pg type=lastpoint queries=20 failed=0 median_ms=0.27 mean_ms=0.71
"""

INGEST = """\
# bench/ingest.sh 2026-11-26T20:16:00Z: tsbs_load_questdb --batch-size=10000, workers: 2 4
result: server=sundial set=cpu workers=2 rows=3456000 rows_per_s=1060773 cpu_us_per_row=0.88
result: server=questdb set=cpu workers=2 rows=3456000 rows_per_s=399445 cpu_us_per_row=4.05
result: server=sundial set=cpu workers=4 rows=3456000 rows_per_s=1100000 cpu_us_per_row=0.80
result: server=questdb set=cpu workers=4 rows=3456000 rows_per_s=440000 cpu_us_per_row=4.02
result: server=sundial set=iot workers=2 rows=9075670 rows_per_s=1415198 cpu_us_per_row=0.80
"""

COLD = """\
result: label=hot query=q1_seed median_ms=5.0 rows=23
result: label=hot tsbs=lastpoint median_ms=0.36
result: label=cold query=q1_seed median_ms=10.0 rows=23 answer=same
result: label=cold tsbs=lastpoint median_ms=0.90
result: label=uncached query=q1_seed median_ms=100.0 rows=23 answer=same
result: label=hot query=q1_seed median_ms=5.0 rows=23
"""


def run(text, *flags):
    """chart.py's exit status, the parsed SVG (or None) and what it wrote to stderr."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "case-20261125-114417.txt")
        with open(path, "w") as f:
            f.write(text)
        err = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            status = chart.main([path, *flags])
        svg = os.path.join(d, "case-20261125-114417.svg")
        doc = xml.dom.minidom.parse(svg) if os.path.exists(svg) else None
        return status, doc, err.getvalue()


def bars(doc):
    """{'Series: value'} of every bar's tooltip."""
    return [r.getElementsByTagName("title")[0].firstChild.data
            for r in doc.getElementsByTagName("rect") if r.getElementsByTagName("title")]


def texts(doc):
    return [t.firstChild.data for t in doc.getElementsByTagName("text") if t.firstChild]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def test_tsbs():
    status, doc, _ = run(TSBS)
    check(status == 0, "tsbs: exit 0")
    b, t = bars(doc), texts(doc)
    # 3 types x 2 servers over HTTP, less QuestDB's failed one, plus lastpoint over PG.
    check(sorted(b) == sorted(["Sundial: 0.10", "Sundial: 8.00", "Sundial: 1.67",
                               "QuestDB: 0.44", "QuestDB: 24.0", "Sundial: 0.09",
                               "QuestDB: 0.27"]), "tsbs bars: %s" % b)
    # lastpoint 0.44 / 0.10 over HTTP, high-cpu-all 24 / 8, lastpoint 0.27 / 0.09 over PG.
    check("4.40x" in t and t.count("3.00x") == 2, "tsbs ratios: %s" % t)
    check(sum(x.startswith("fails") for x in t) == 1, "one failed type: %s" % t)
    check(any("lower is better" in x for x in t), "title says lower is better")
    check(any("HTTP" in x for x in t) and any("PostgreSQL" in x for x in t), "one panel each")
    check(any("log scale" in x for x in t), "0.09 to 24 ms: log scale")
    check("rows/s" not in " ".join(t), "the load line is not charted")
    check(any("2026-11-25 11:44 UTC" in x for x in t), "the run's date is shown")
    # --metric mean_ms and --linear: other values, no log scale.
    status, doc, _ = run(TSBS, "--metric", "mean_ms", "--linear")
    check("QuestDB: 1.37" in bars(doc), "mean_ms drawn")
    check(not any("log scale" in x for x in texts(doc)), "--linear honoured")


def test_ingest():
    status, doc, _ = run(INGEST)
    check(status == 0, "ingest: exit 0")
    b, t = bars(doc), texts(doc)
    check(sorted(b) == sorted(["Sundial: 1.06M", "QuestDB: 399k", "Sundial: 1.10M",
                               "QuestDB: 440k", "Sundial: 1.42M"]), "ingest bars: %s" % b)
    check("2.66x" in t and "2.50x" in t, "ingest ratios: %s" % t)
    check(sum(x.endswith("x") and x[0].isdigit() for x in t) == 2, "no ratio without QuestDB")
    check(any("higher is better" in x for x in t), "title says higher is better")
    check("2 workers" in t and "4 workers" in t, "groups per worker count")
    check(not any("log scale" in x for x in t), "linear for values within 4x")


def test_cold():
    status, doc, _ = run(COLD)
    check(status == 0, "cold: exit 0")
    b, t = bars(doc), texts(doc)
    check(len(b) == 5, "duplicate lines drawn once: %s" % b)
    check("2.00x" in t and "20.0x" in t and "2.50x" in t, "cold ratios: %s" % t)


def test_distribution():
    """A battery of more than DISTRIBUTION_MIN queries: one bar per query with both medians,
    sorted by Sundial/QuestDB, the worst ten named, a failed query left out."""
    lines = ["# bench/analytics.sh 2026-11-28T07:27:52Z: scale=small, queries=x.txt"]
    for i in range(50):
        family = "latest" if i % 2 else "sample"
        lines.append("result: label=questdb query=%s_%03d median_ms=1.000 rows=1" % (family, i))
        lines.append("result: label=sundial query=%s_%03d median_ms=%.3f rows=1"
                     % (family, i, 0.1 * (i + 1)))
    lines.append("result: label=questdb query=join_001 failed: 00000: no")
    status, doc, _ = run("\n".join(lines) + "\n")
    check(status == 0, "distribution: exit 0")
    b, t = bars(doc), texts(doc)
    check(len(b) == 50, "a bar per query with both medians: %d" % len(b))
    check(b[0].startswith("latest_049 5.00"),
          "worst first: %s" % b[0])
    check(any(x.startswith("median 2.") for x in t), "summary line: %s" % t)
    check("worst ten:" in t and any("5.00  latest_049" == x for x in t), "worst named: %s" % t)


LOOKUP = """\
# bench/lookup.sh 2026-12-07T13:00:00Z: rows=1000000 widths=wide clients=1,16 transports=plain tls
result: server=sundial rows=1000000 width=wide transport=plain clients=1 qps=15000 p50_us=60 p99_us=120 max_us=900
result: server=sundial rows=1000000 width=wide transport=plain clients=16 qps=27000 p50_us=500 p99_us=1500 max_us=9000
result: server=sundial rows=1000000 width=wide transport=tls clients=16 qps=20000 p50_us=700 p99_us=2000 max_us=9000
result: server=postgres rows=1000000 width=wide transport=plain clients=1 qps=12000 p50_us=70 p99_us=150 max_us=800
result: server=postgres rows=1000000 width=wide transport=plain clients=16 qps=72000 p50_us=200 p99_us=600 max_us=5000
pair: rows=1000000 width=wide transport=plain clients=1 sundial_qps=15000 postgres_qps=12000 ratio=1.25
result: server=sundial rows=1000000 width=wide transport=plain clients=16 shape=in10 qps=90000 p50_us=900 p99_us=2000 max_us=9000
result: server=postgres rows=1000000 width=wide transport=plain clients=16 shape=in10 qps=45000 p50_us=900 p99_us=2000 max_us=9000
"""


def test_lookup():
    status, doc, _ = run(LOOKUP)
    check(status == 0, "lookup: exit 0")
    b, t = bars(doc), texts(doc)
    check(sorted(b) == sorted(["Sundial: 15.0k", "Sundial: 27.0k", "Sundial: 20.0k",
                               "PostgreSQL: 12.0k", "PostgreSQL: 72.0k",
                               "Sundial: 90.0k", "PostgreSQL: 45.0k"]), "lookup bars: %s" % b)
    # 15,000 / 12,000 and 27,000 / 72,000; no ratio where PostgreSQL has no TLS figure; the
    # multi-get shape in a panel of its own (90,000 / 45,000).
    check("1.25x" in t and "0.38x" in t and "2.00x" in t, "lookup ratios: %s" % t)
    check(any("in10" in x for x in t), "a panel per shape: %s" % t)
    check(any("plain" in x for x in t) and any("tls" in x for x in t), "a panel per transport")
    check(any("higher is better" in x for x in t), "title says higher is better")
    status, doc, _ = run(LOOKUP, "--metric", "p99_us")
    check("PostgreSQL: 600" in bars(doc), "p99 drawn: %s" % bars(doc))


MATVIEWS = """\
# bench/matviews.sh 2026-12-07T21:52:23Z: cpu-s200-3d.ilp (5184000 rows)
result: server=sundial kind=ingest run=1 views=0 rows=5184000 rows_per_s=1256727
result: server=sundial kind=lag run=1 view=cpu_1m txns=38 p50_ms=102 p99_ms=208 max_ms=208
result: server=sundial kind=lag run=2 view=cpu_1m txns=38 p50_ms=100 p99_ms=300 max_ms=300
result: server=questdb kind=lag run=1 view=cpu_1m txns=30 p50_ms=104 p99_ms=416 max_ms=416
result: server=sundial kind=dashboard run=1 query=all-hosts raw_median_ms=7.00 view_median_ms=2.00
result: server=sundial_unrouted kind=dashboard run=1 query=all-hosts raw_median_ms=22.00 view_median_ms=2.50
result: server=questdb kind=dashboard run=1 query=all-hosts raw_median_ms=154.00 view_median_ms=6.00
"""


def test_matviews():
    status, doc, _ = run(MATVIEWS)
    check(status == 0, "matviews: exit 0")
    b, t = bars(doc), texts(doc)
    # Medians over rounds: the lag p99 of rounds 1 and 2 (208, 300) is 254.
    check("Sundial: 254" in b, "median over rounds: %s" % b)
    check("Sundial: 22.0" in b and "QuestDB: 154" in b, "raw rows: %s" % b)
    check("7.00x" in t and "3.00x" in t, "raw and view ratios: %s" % t)
    check(any("routed to the view" in x for x in t), "the routed raw query is its own group")


def test_refuses():
    status, doc, err = run("protocol type\n# nothing measured\n")
    check(status == 1 and doc is None and "no `result:` lines" in err, "refused: %r" % err)
    status, doc, err = run("result: membw threads=1 gb_per_s=37.4\n")
    check(status == 1 and doc is None and "no result lines of a known kind" in err,
          "unknown kind refused: %r" % err)


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
            print("ok", name)

#!/usr/bin/env python3
"""Charts of Sundial's benchmark results, as SVG, with nothing but Python's standard library.

    python3 bench/chart.py bench/results/tsbs-20261125-114417.txt [-o OUT.svg] [--log|--linear]
                           [--metric mean_ms]

Reads the `result:` lines (`key=value` pairs) a bench script wrote, works out which script
wrote them, and draws grouped horizontal bars, one bar per server (or label) in each group,
with each bar's value, and where both servers have a value the ratio between them:

- tsbs-*      (bench/tsbs.sh): median ms per TSBS query type, one panel per protocol; ratio
               QuestDB / Sundial. A type a server rejected shows "fails".
- ingest-*    (bench/ingest.sh): rows/s until queryable per set and worker count; Sundial / QuestDB.
- analytics-* (bench/analytics.sh): median ms per query of the battery; QuestDB / Sundial.
               A battery of more than DISTRIBUTION_MIN queries (a generated one) is drawn as
               the distribution of Sundial / QuestDB ratios instead: one bar per query, sorted,
               coloured by family, on a log scale with the goal (0.5) and parity (1) marked,
               and the worst ten named below.
- cold-*      (bench/cold.sh): hot, cold (cached) and uncached medians per query; cold / hot
               and uncached / hot.
- ilp-*       (bench/ilp.sh): rows/s per file and protocol; Sundial / QuestDB.
- query-*     (bench/query.sh): queries/s per protocol and client count; Sundial / QuestDB.
- lookup-*    (bench/lookup.sh): pgbench queries/s per client count, one panel per table size,
               row width and transport; Sundial / PostgreSQL (--metric p99_us: latency).
- udp-*       (bench/udp.sh): share of lines captured per sending rate; Sundial / QuestDB.
- fairness-*  (bench/fairness.sh): light statements' p50 ms (--metric p99, max) beside heavy
               clients, and heavy queries/s; without (unbounded) and with (default) turns.
- matviews-*  (bench/matviews.sh): the dashboard's median ms from raw rows and from the view
               (Sundial's raw rows with routing off, and its raw query routed to the view), and
               the views' refresh lag p50/p99 ms; medians over rounds; QuestDB / Sundial.

Values that span more than CHART_LOG_SPAN times (smallest to largest) are drawn on a log
scale unless --linear is given. Writes OUT (default: the results file with .svg for .txt).
Exits with status 1 and a message if the file has no `result:` lines it can chart.
"""

import argparse
import math
import os
import re
import sys
from xml.sax.saxutils import escape, quoteattr

CHART_LOG_SPAN = 30
DISTRIBUTION_MIN = 40
WIDTH = 980
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
COLOURS = {"sundial": "#E69F00", "questdb": "#0072B2", "hot": "#D55E00",
           "cold": "#0072B2", "uncached": "#8C8C8C"}
PALETTE = ["#009E73", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
NAMES = {"sundial": "Sundial", "questdb": "QuestDB", "postgres": "PostgreSQL",
         "hot": "hot (native files)",
         "cold": "cold (Parquet, decoded chunks cached)", "uncached": "cold, no cache"}


class ChartError(Exception):
    pass


# --- reading ------------------------------------------------------------------------------

def read_results(path):
    """The file's `result:` lines as dicts (words without '=' under '_words'), each line once
    (bench/cold.sh writes its result lines twice), and the script's `# bench/...` header."""
    records, seen, header = [], set(), ""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("# bench/") and not header:
                header = line[2:]
            if not line.startswith("result:") or line in seen:
                continue
            seen.add(line)
            rec = {"_words": []}
            for token in line.split()[1:]:
                key, eq, value = token.partition("=")
                if eq:
                    rec[key] = value
                else:
                    rec["_words"].append(token)
            records.append(rec)
    return records, header


def number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def run_description(path, header):
    """'file, date UTC, settings' for the subtitle: from the script's header, else the name."""
    name = os.path.basename(path)
    m = re.search(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(?::\d{2})?Z?[:,]?\s*(.*)", header)
    if m:
        date, settings = "%s %s UTC" % (m.group(1), m.group(2)), m.group(3)
    else:
        m = re.search(r"(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})", name)
        date, settings = ("%s-%s-%s %s:%s" % m.groups() if m else ""), ""
    return " · ".join(p for p in (name, date, settings) if p)


def series_order(labels):
    """Sundial first, QuestDB second, the rest as they came."""
    known = ["sundial", "questdb", "postgres", "hot", "cold", "uncached"]
    return sorted(dict.fromkeys(labels), key=lambda s: known.index(s) if s in known else 99)


def grouped(records, group_of, series_of, value_of):
    """[(group, {series: value})] in the order groups first appear."""
    groups = {}
    for rec in records:
        g, s = group_of(rec), series_of(rec)
        if g is None or s is None:
            continue
        groups.setdefault(g, {})[s] = value_of(rec)
    return list(groups.items())


# --- chart kinds --------------------------------------------------------------------------

def chart_tsbs(records, metric):
    recs = [r for r in records if "type" in r and "label" in r]
    metric = metric or "median_ms"

    def value(r):
        if number(r.get("failed")) and not number(r.get("queries")):
            return "fails"
        return number(r.get(metric))

    panels = []
    for protocol in dict.fromkeys(r.get("protocol", "?") for r in recs):
        title = {"http": "over HTTP /exec (as TSBS's questdb runner)",
                 "pg": "over PostgreSQL's extended protocol"}.get(protocol, protocol)
        mine = [r for r in recs if r.get("protocol", "?") == protocol]
        panels.append((title, grouped(mine, lambda r: r["type"], lambda r: r["label"], value)))
    what = metric.replace("_ms", "")
    return dict(kind="tsbs", higher=False, unit="%s latency, ms" % what,
                title="TSBS devops queries: %s ms per query type (lower is better)" % what,
                note="Ratio: QuestDB's %s ÷ Sundial's (above 1: Sundial is faster)." % what,
                series=series_order(r["label"] for r in recs), panels=panels,
                ratios=[("questdb", "sundial", "QuestDB ÷ Sundial")])


def chart_ingest(records, metric):
    recs = [r for r in records if "server" in r and "set" in r]
    metric = metric or "rows_per_s"
    set_names = {"cpu": "devops (200 hosts x 2 days)", "iot": "iot (500 trucks x 7 days)",
                 "cpu1000": "devops (1000 hosts x 3 days)"}
    panels = []
    for s in dict.fromkeys(r["set"] for r in recs):
        base, dedup = s.split("-dedup")[0], s.endswith("-dedup")
        title = set_names.get(base, base) + (", DEDUP UPSERT KEYS" if dedup else "")
        mine = [r for r in recs if r["set"] == s]
        panels.append((title, grouped(mine, lambda r: "%s workers" % r.get("workers", "?"),
                                      lambda r: r["server"], lambda r: number(r.get(metric)))))
    return dict(kind="ingest", higher=True, unit=metric.replace("_per_s", "/s"),
                title="Ingest with TSBS's tsbs_load_questdb: rows/s until queryable "
                      "(higher is better)" if metric == "rows_per_s" else metric,
                note="Ratio: Sundial ÷ QuestDB (above 1: Sundial is faster).",
                series=series_order(r["server"] for r in recs), panels=panels,
                ratios=[("sundial", "questdb", "Sundial ÷ QuestDB")])


def chart_cold(records, metric):
    recs = [r for r in records if r.get("label") and ("query" in r or "tsbs" in r)]
    metric = metric or "median_ms"
    battery = [r for r in recs if "query" in r]
    tsbs = [r for r in recs if "tsbs" in r]
    panels = []
    if battery:
        panels.append(("analytics battery over PostgreSQL (bench/analytics-queries.txt)",
                       grouped(battery, lambda r: r["query"], lambda r: r["label"],
                               lambda r: number(r.get(metric)))))
    if tsbs:
        panels.append(("TSBS devops query types (tsbs_run_queries_questdb over HTTP)",
                       grouped(tsbs, lambda r: r["tsbs"], lambda r: r["label"],
                               lambda r: number(r.get(metric)))))
    return dict(kind="cold", higher=False, unit="median ms",
                title="Cold (Parquet) against hot (native) partitions: median ms per query "
                      "(lower is better)",
                note="Ratios: each cold median ÷ the hot one (1.0: as fast as native files).",
                series=series_order(r["label"] for r in recs), panels=panels,
                ratios=[("cold", "hot", "cold ÷ hot"), ("uncached", "hot", "uncached ÷ hot")])


def chart_analytics(records, metric):
    recs = [r for r in records if "query" in r and "label" in r]
    metric = metric or "median_ms"
    panels = [("%d ad-hoc queries over PostgreSQL" % len({r["query"] for r in recs}),
               grouped(recs, lambda r: r["query"], lambda r: r["label"],
                       lambda r: "fails" if "failed:" in r["_words"] else number(r.get(metric))))]
    return dict(kind="analytics", higher=False, unit="median ms",
                title="Analytics battery: median ms per query (lower is better)",
                note="Ratio: QuestDB's median ÷ Sundial's (above 1: Sundial is faster).",
                series=series_order(r["label"] for r in recs), panels=panels,
                ratios=[("questdb", "sundial", "QuestDB ÷ Sundial")])


def chart_ilp(records, metric):
    recs = [r for r in records if "file" in r and "label" in r and "protocol" in r]
    metric = metric or "rows_per_s"
    panels = []
    for f in dict.fromkeys(r["file"] for r in recs):
        mine = [r for r in recs if r["file"] == f]
        panels.append((f, grouped(mine, lambda r: "%s, %s workers" % (r["protocol"].upper(),
                                                                       r.get("workers", "?")),
                                  lambda r: r["label"], lambda r: number(r.get(metric)))))
    return dict(kind="ilp", higher=True, unit=metric.replace("_per_s", "/s"),
                title="ILP ingestion with sundial-bench load: rows/s sent (higher is better)",
                note="Ratio: Sundial ÷ QuestDB (above 1: Sundial is faster).",
                series=series_order(r["label"] for r in recs), panels=panels,
                ratios=[("sundial", "questdb", "Sundial ÷ QuestDB")])


def chart_query(records, metric):
    recs = [r for r in records if "clients" in r and "label" in r]
    metric = metric or "qps"
    titles = {"pg": "over PostgreSQL (prepared)", "http": "over HTTP /exec"}
    clients = lambda r: "%s client%s" % (r["clients"], "" if r["clients"] == "1" else "s")
    panels = []
    for protocol in dict.fromkeys(r.get("protocol", "?") for r in recs):
        mine = [r for r in recs if r.get("protocol", "?") == protocol]
        panels.append((titles.get(protocol, protocol), grouped(
            mine, clients, lambda r: r["label"], lambda r: number(r.get(metric)))))
    return dict(kind="query", higher=True, unit="queries/s",
                title="Point lookups (bench/query.sh): queries per second (higher is better)",
                note="Ratio: Sundial ÷ QuestDB (above 1: Sundial answers more).",
                series=series_order(r["label"] for r in recs), panels=panels,
                ratios=[("sundial", "questdb", "Sundial ÷ QuestDB")])


def chart_lookup(records, metric):
    recs = [r for r in records if "transport" in r and "server" in r and "qps" in r]
    metric = metric or "qps"
    clients = lambda r: "%s client%s" % (r["clients"], "" if r["clients"] == "1" else "s")
    panels = []
    # One panel per table, transport and statement shape (point lookups unless the line says).
    panel = lambda r: (r["rows"], r["width"], r["transport"], r.get("shape", "point"))
    for table in dict.fromkeys(panel(r) for r in recs):
        mine = [r for r in recs if panel(r) == table]
        title = "%s rows, %s, %s" % (format_tick(number(table[0]) or 0), table[1], table[2])
        if table[3] != "point":
            title += ", " + table[3]
        panels.append((title, grouped(mine, clients, lambda r: r["server"],
                                      lambda r: number(r.get(metric)))))
    higher = metric == "qps"
    return dict(kind="lookup", higher=higher, unit="queries/s" if higher else "µs",
                title="Point lookups by key (bench/lookup.sh, pgbench -M prepared): %s" %
                ("queries per second (higher is better)" if higher else metric),
                note="Ratio: Sundial ÷ PostgreSQL%s." %
                (" (above 1: Sundial answers more)" if higher else ""),
                series=series_order(r["server"] for r in recs), panels=panels,
                ratios=[("sundial", "postgres", "Sundial ÷ PostgreSQL")])


def chart_udp(records, metric):
    recs = [r for r in records if "target_lines_per_s" in r and "label" in r]
    metric = metric or "captured_pct"

    def group(r):
        t = number(r["target_lines_per_s"]) or 0
        return "%s lines/s" % format_tick(t) if t else "unpaced"
    panels = [("2M lines per rate over loopback UDP", grouped(recs, group, lambda r: r["label"],
                                                              lambda r: number(r.get(metric))))]
    return dict(kind="udp", higher=True, unit="% of lines captured", percent=True,
                title="UDP overload: share of lines captured per sending rate (higher is better)",
                note="Ratio: Sundial ÷ QuestDB.",
                series=series_order(r["label"] for r in recs), panels=panels,
                ratios=[("sundial", "questdb", "Sundial ÷ QuestDB")])


def chart_fairness(records, metric):
    recs = [r for r in records if r.get("bench") == "latency_ms" and "mode" in r]
    stat = metric or "p50"
    mine = [r for r in recs if r.get("stat") == stat]
    panels = [("%s latency of each light statement beside 100 heavy clients" % stat,
               grouped(mine, lambda r: r["query"], lambda r: r["mode"],
                       lambda r: number(r.get("ms"))))]
    heavy = [r for r in records if r.get("bench") == "heavy"]
    panels.append(("heavy queries completed per second (higher is better)",
                   grouped(heavy, lambda r: "heavy GROUP BY", lambda r: r["mode"],
                           lambda r: number(r.get("queries_per_s")))))
    return dict(kind="fairness", higher=False, unit="ms (heavy: queries/s)",
                title="Light statements beside heavy ones (bench/fairness.sh): %s ms" % stat,
                note="Ratio: unbounded ÷ default --queries-running-max (above 1: turns help).",
                series=["unbounded", "default"], panels=panels,
                ratios=[("unbounded", "default", "unbounded ÷ default")])


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    m = len(values) // 2
    return values[m] if len(values) % 2 else (values[m - 1] + values[m]) / 2


def chart_matviews(records, metric):
    recs = [r for r in records if r.get("kind") in ("dashboard", "lag") and "server" in r]
    # (panel, group, series) -> values over rounds
    found = {}

    def add(panel, group, series, value):
        found.setdefault((panel, group, series), []).append(number(value))
    for r in recs:
        server = r["server"]
        if r["kind"] == "lag":
            for stat in ("p50", "p99"):
                add("refresh lag while loading (100 ms polls)", "%s %s" % (r.get("view"), stat),
                    server, r.get("%s_ms" % stat))
            continue
        panel = "3-day hourly dashboard, %s: median ms" % r.get("query", "?")
        if server == "sundial_unrouted":
            add(panel, "raw rows", "sundial", r.get("raw_median_ms"))
        elif server == "sundial":
            add(panel, "raw query, routed to the view", "sundial", r.get("raw_median_ms"))
            add(panel, "from the view", "sundial", r.get("view_median_ms"))
        else:
            add(panel, "raw rows", server, r.get("raw_median_ms"))
            add(panel, "from the view", server, r.get("view_median_ms"))
    panels = {}
    for (panel, group, series), values in found.items():
        panels.setdefault(panel, {}).setdefault(group, {})[series] = median(values)
    return dict(kind="matviews", higher=False, unit="ms",
                title="Materialized views under TSBS load (bench/matviews.sh): ms "
                      "(lower is better)",
                note="Ratio: QuestDB ÷ Sundial (above 1: Sundial is faster). Sundial's raw "
                     "query is answered from the view (rollup routing); its raw rows are "
                     "timed with --rollup-routing false.",
                series=series_order(r["server"] for r in recs
                                    if r["server"] != "sundial_unrouted"),
                panels=[(p, list(g.items())) for p, g in panels.items()],
                ratios=[("questdb", "sundial", "QuestDB ÷ Sundial")])


KINDS = [  # (name, test on one record, builder): the first kind any record passes wins
    ("matviews", lambda r: r.get("kind") in ("dashboard", "lag") and "server" in r,
     chart_matviews),
    ("fairness", lambda r: r.get("bench") in ("latency_ms", "heavy") and "mode" in r,
     chart_fairness),
    ("tsbs", lambda r: "type" in r and "protocol" in r and "label" in r, chart_tsbs),
    ("ingest", lambda r: "server" in r and "set" in r, chart_ingest),
    ("cold", lambda r: r.get("label") in ("hot", "cold", "uncached"), chart_cold),
    ("analytics", lambda r: "query" in r and "median_ms" in r, chart_analytics),
    ("udp", lambda r: "target_lines_per_s" in r, chart_udp),
    ("lookup", lambda r: "qps" in r and "transport" in r and "server" in r, chart_lookup),
    ("query", lambda r: "qps" in r and "clients" in r, chart_query),
    ("ilp", lambda r: "file" in r and "rows_per_s" in r and "label" in r, chart_ilp),
]


def build_chart(records, metric=None):
    for name, test, builder in KINDS:
        if any(test(r) for r in records):
            chart = builder(records, metric)
            chart["panels"] = [(t, g) for t, g in chart["panels"] if g]
            if not chart["panels"]:
                break
            return chart
    raise ChartError("no result lines of a known kind")


# --- drawing ------------------------------------------------------------------------------

def format_value(v, percent=False):
    if percent:
        return "%.1f%%" % v
    a = abs(v)
    if a >= 1e6:
        return "%.2fM" % (v / 1e6)
    if a >= 1e5:
        return "%.0fk" % (v / 1e3)
    if a >= 1e3:
        return "%.1fk" % (v / 1e3)
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 0.01 or a == 0:
        return "%.2f" % v
    return "%.3g" % v


def format_tick(v, percent=False):
    """Shorter than format_value: no trailing zeros (0.1, 1, 1.5M, 500k)."""
    if percent:
        return "%g%%" % v
    for limit, div, suffix in ((1e6, 1e6, "M"), (1e3, 1e3, "k"), (0, 1, "")):
        if abs(v) >= limit:
            return "%g%s" % (round(v / div, 6), suffix)


def format_ratio(r):
    return "%.1fx" % r if r >= 10 else "%.2fx" % r


class Scale:
    """Maps values to x between x0 and x1, linear from 0 or logarithmic over whole decades."""

    def __init__(self, values, x0, x1, log):
        self.x0, self.x1, self.log = x0, x1, log
        hi = max(values)
        if log:  # from a 1-2-5 step below the smallest value to one at or above the largest
            steps = [(m, m * 10 ** d) for d in range(-6, 13) for m in (1, 2, 5)]
            # below the smallest value, so that its bar is seen
            self.lo = max(t for _, t in steps if t <= min(v for v in values if v > 0) / 1.5)
            self.hi = min(t for _, t in steps if t >= hi and t > self.lo)
            wide = math.log10(self.hi / self.lo) > 3  # then ticks at decades and the ends only
            self.ticks = [t for m, t in steps if self.lo <= t <= self.hi and
                          (not wide or m == 1 or t in (self.lo, self.hi))]
        else:
            raw = hi / 5 if hi > 0 else 1
            mag = 10 ** math.floor(math.log10(raw))
            step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
            self.hi = step * math.ceil(hi / step) if hi > 0 else 1
            self.lo = 0
            self.ticks = [i * step for i in range(int(round(self.hi / step)) + 1)]

    def x(self, v):
        if self.log:
            v = max(v, self.lo)
            f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = v / self.hi
        return self.x0 + f * (self.x1 - self.x0)


def text(x, y, s, size=12, anchor="start", weight="normal", fill="#222", style=""):
    extra = ' font-style="%s"' % style if style else ""
    return ('<text x="%.1f" y="%.1f" font-size="%s" text-anchor="%s" font-weight="%s" '
            'fill="%s"%s>%s</text>' % (x, y, size, anchor, weight, fill, extra, escape(s)))


def text_width(s, size=12):
    return len(s) * size * 0.6


def render_svg(chart, subtitle, log=None):
    """The chart as an SVG document (a string)."""
    series = chart["series"]
    colours = {}
    for i, s in enumerate(series):
        colours[s] = COLOURS.get(s) or PALETTE[i % len(PALETTE)]
    ratios = [(n, d, h) for n, d, h in chart["ratios"] if n in series and d in series]
    percent = chart.get("percent", False)
    values = [v for _, groups in chart["panels"] for _, vs in groups
              for v in vs.values() if isinstance(v, float) and v > 0]
    if not values:
        raise ChartError("no positive values to draw")
    if log is None:
        log = max(values) / min(values) > CHART_LOG_SPAN
    names = [g for _, groups in chart["panels"] for g, _ in groups]
    label_w = min(260, max(text_width(n) for n in names) + 12)
    ratio_w = 116
    plot_x0 = 20 + label_w
    plot_x1 = WIDTH - 20 - ratio_w * len(ratios) - 62
    scale = Scale(values, plot_x0, plot_x1, log)
    bar_h, bar_gap, group_gap = 13, 2, 10
    group_h = len(series) * (bar_h + bar_gap) - bar_gap + group_gap

    out, y = [], 30
    out.append(text(20, y, chart["title"], size=17, weight="bold"))
    y += 20
    out.append(text(20, y, subtitle, size=12, fill="#555"))
    y += 17
    if ratios:
        out.append(text(20, y, chart["note"], size=12, fill="#555"))
        y += 17
    x = 20
    y += 6
    for s in series:  # legend
        out.append('<rect x="%.1f" y="%.1f" width="14" height="12" fill="%s"/>'
                   % (x, y - 10, colours[s]))
        name = NAMES.get(s, s)
        out.append(text(x + 19, y, name, size=12))
        x += 19 + text_width(name) + 22
    y += 12

    axis_label = chart["unit"] + (", log scale" if log else "")
    for title, groups in chart["panels"]:
        y += 20
        out.append(text(20, y, title, size=13, weight="bold"))
        for i, (_, _, header) in enumerate(ratios):
            out.append(text(WIDTH - 20 - ratio_w * (len(ratios) - i - 1) - ratio_w / 2, y,
                            header, size=11, anchor="middle", fill="#555"))
        top = y + 8
        bottom = top + group_h * len(groups)
        for t in scale.ticks:
            tx = scale.x(t)
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e3e3e3"/>'
                       % (tx, top, tx, bottom))
        gy = top + group_gap / 2
        for gi, (name, vs) in enumerate(groups):
            if gi % 2:
                out.append('<rect x="20" y="%.1f" width="%d" height="%d" fill="#000" '
                           'fill-opacity="0.03"/>' % (gy - group_gap / 2, WIDTH - 40, group_h))
            mid = gy + (group_h - group_gap) / 2
            out.append(text(plot_x0 - 8, mid + 4, name, anchor="end"))
            for si, s in enumerate(series):
                by = gy + si * (bar_h + bar_gap)
                v = vs.get(s)
                if v == "fails":
                    out.append(text(plot_x0 + 4, by + bar_h - 2, "fails (query rejected)",
                                    size=11, fill="#888", style="italic"))
                elif isinstance(v, float):
                    bx = scale.x(v) if v > 0 else plot_x0
                    out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s">'
                               '<title>%s: %s</title></rect>'
                               % (plot_x0, by, max(bx - plot_x0, 1), bar_h, colours[s],
                                  escape(NAMES.get(s, s)), escape(format_value(v, percent))))
                    out.append(text(bx + 4, by + bar_h - 2, format_value(v, percent), size=11,
                                    fill="#333"))
            for i, (num, den, _) in enumerate(ratios):
                a, b = vs.get(num), vs.get(den)
                if isinstance(a, float) and isinstance(b, float) and a > 0 and b > 0:
                    rx = WIDTH - 20 - ratio_w * (len(ratios) - i - 1) - ratio_w / 2
                    out.append(text(rx, mid + 4, format_ratio(a / b), size=12, anchor="middle",
                                    weight="bold"))
            gy += group_h
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/>'
                   % (plot_x0, top, plot_x0, bottom))
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/>'
                   % (plot_x0, bottom, plot_x1, bottom))
        for t in scale.ticks:
            out.append(text(scale.x(t), bottom + 14, format_tick(t, percent), size=10,
                            anchor="middle", fill="#555"))
        out.append(text((plot_x0 + plot_x1) / 2, bottom + 30, axis_label, size=12,
                        anchor="middle", fill="#333"))
        y = bottom + 34
    height = int(y + 16)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'viewBox="0 0 %d %d" font-family=%s>\n'
            '<rect width="100%%" height="100%%" fill="#fff"/>\n%s\n</svg>\n'
            % (WIDTH, height, WIDTH, height, quoteattr(FONT), "\n".join(out)))


def distribution_svg(records, subtitle):
    """Sundial / QuestDB median ratios of every query both ran, sorted, as one bar each."""
    medians = {}
    for r in records:
        if "query" in r and "median_ms" in r and "failed:" not in r["_words"]:
            medians.setdefault(r["query"], {})[r.get("label")] = number(r["median_ms"])
    ratios = sorted(((m["sundial"] / m["questdb"], q) for q, m in medians.items()
                     if m.get("sundial") and m.get("questdb")), reverse=True)
    if not ratios:
        raise ChartError("no query with both servers' medians")
    families = list(dict.fromkeys(sorted(q.rsplit("_", 1)[0] for _, q in ratios)))
    palette = PALETTE + [COLOURS["questdb"], COLOURS["sundial"], "#8C8C8C"]
    colour = {f: palette[i % len(palette)] for i, f in enumerate(families)}
    lo = min(0.05, min(r for r, _ in ratios))
    hi = max(2.0, max(r for r, _ in ratios))
    x0, x1, top, plot_h = 70, WIDTH - 20, 70, 360
    bottom = top + plot_h
    y = lambda v: bottom - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * plot_h
    step = (x1 - x0) / len(ratios)
    out = [text(20, 26, "Sundial ÷ QuestDB median time per query, %d generated queries "
                        "(lower is better)" % len(ratios), size=16, weight="bold"),
           text(20, 46, subtitle, size=11, fill="#555")]
    for t in [v for v in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200)
              if lo <= v <= hi]:
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>' % (x0, y(t), x1, y(t)))
        out.append(text(x0 - 6, y(t) + 4, format_tick(t), size=10, anchor="end", fill="#555"))
    for i, (r, q) in enumerate(ratios):
        bar_top, base = sorted((y(r), y(1)))
        out.append('<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"><title>%s</title></rect>'
                   % (x0 + i * step, bar_top, max(step - 0.3, 0.5), max(base - bar_top, 0.5),
                      colour[q.rsplit("_", 1)[0]], escape("%s %.2f" % (q, r))))
    for v, label, dash in ((1, "parity", ""), (0.5, "goal: half of QuestDB's time", "6,4")):
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222" stroke-dasharray="%s"/>'
                   % (x0, y(v), x1, y(v), dash))
        out.append(text(x1 - 4, y(v) - 4, label, size=10, anchor="end", fill="#222"))
    n = len(ratios)
    at_goal = sum(1 for r, _ in ratios if r <= 0.5)
    at_par = sum(1 for r, _ in ratios if r <= 1)
    median = sorted(r for r, _ in ratios)[n // 2]
    ly = bottom + 24
    out.append(text(x0, ly, "median %.2f; at most 0.5: %d of %d; at most 1: %d; above 1: %d"
                    % (median, at_goal, n, at_par, n - at_par), size=12))
    lx = x0
    ly += 22
    for f in families:
        count = sum(1 for _, q in ratios if q.rsplit("_", 1)[0] == f)
        label = "%s (%d)" % (f, count)
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (lx, ly - 10, colour[f]))
        out.append(text(lx + 16, ly, label, size=11))
        lx += 16 + text_width(label, 11) + 18
    ly += 24
    out.append(text(x0, ly, "worst ten:", size=12, weight="bold"))
    for r, q in ratios[:10]:
        ly += 16
        out.append(text(x0, ly, "%.2f  %s" % (r, q), size=11))
    height = ly + 16
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'viewBox="0 0 %d %d" font-family=%s>\n'
            '<rect width="100%%" height="100%%" fill="#fff"/>\n%s\n</svg>\n'
            % (WIDTH, height, WIDTH, height, quoteattr(FONT), "\n".join(out)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", help="a bench/results/*.txt file")
    p.add_argument("-o", "--output", help="SVG to write (default: RESULTS with .svg)")
    scale = p.add_mutually_exclusive_group()
    scale.add_argument("--log", action="store_true", help="log scale")
    scale.add_argument("--linear", action="store_true", help="linear scale")
    p.add_argument("--metric", help="the key to draw (default per kind: median_ms, rows_per_s...)")
    args = p.parse_args(argv)
    try:
        records, header = read_results(args.results)
        if not records:
            raise ChartError("no `result:` lines")
        chart = build_chart(records, args.metric)
        queries = {r["query"] for r in records if "query" in r}
        if chart["kind"] == "analytics" and len(queries) > DISTRIBUTION_MIN:
            svg = distribution_svg(records, run_description(args.results, header))
        else:
            svg = render_svg(chart, run_description(args.results, header),
                             log=True if args.log else False if args.linear else None)
    except (ChartError, OSError) as e:
        print("chart.py: %s: %s" % (args.results, e), file=sys.stderr)
        return 1
    out = args.output or re.sub(r"\.txt$", "", args.results) + ".svg"
    with open(out, "w", encoding="utf-8") as f:
        f.write(svg)
    print("chart in %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

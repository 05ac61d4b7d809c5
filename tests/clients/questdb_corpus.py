"""Deterministic data and a QuestDB-dialect statement corpus for the QuestDB differential test
(test_questdb_differential.py).

Data (`tables()`): three tables in the shape of TSBS's iot use case, over 2024-01-01 .. 2024-01-04
(four daily partitions, the last one partial):

- `readings`: trucks `truck_0` .. `truck_19` with symbol tags name, fleet, driver, model and
  nine DOUBLE fields, one point every 1..11 minutes (irregular, microsecond jitter);
- `diagnostics`: the same trucks' name, fleet, model and current_load, fuel_state (DOUBLE),
  status (LONG), partly at exactly the timestamps of readings (so ASOF and LT JOIN differ);
- `events`: a small table with INT, LONG, VARCHAR, BOOLEAN, DOUBLE columns and a symbol.

What breaks things is in on purpose: a truck without a fleet, a truck whose driver and model are
often missing, rows without a name at all, fields left out (NULL), exact duplicate lines, trucks
that stop early, one that starts late and one with a six-hour gap, and lines sent out of order.
Timestamps of different trucks never coincide (the last two digits of the microseconds are the
truck's number; rows without a name end in 99), so every "latest"/ASOF answer is unique and
`ORDER BY timestamp` only ties between exact duplicates.

Statements (`corpus()`): several hundred, made by crossing templates with columns, keys,
filters and parameters using a seeded `random.Random`, each a `Stmt` that says which output
columns define its row order (None: compare as a multiset).

Everything is seeded: the same code gives the same bytes and the same statements.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

START_S = 1_704_067_200  # 2024-01-01T00:00:00Z
END_S = START_S + 3 * 86_400 + 12 * 3_600  # 2024-01-04T12:00:00Z
US = 1_000_000
TRUCKS = 20
FLEETS = ["East", "North", "South", "West"]
MODELS = ["F-150", "G-2000", "H-2"]
DRIVERS = ["Albert", "Andy", "Derek", "Rodney", "Trish"]
READING_FIELDS = [
    "latitude", "longitude", "elevation", "velocity", "heading", "grade",
    "fuel_consumption", "load_capacity", "fuel_capacity",
]
DIAG_FIELDS = ["current_load", "fuel_state", "status"]
NO_FLEET = 18  # truck_18 never has a fleet tag
SPARSE_TAGS = 19  # truck_19 often lacks driver and model
STOPS_EARLY = {3: START_S + 86_400 + 12 * 3_600, 7: START_S + 86_400}  # truck -> last second
STARTS_LATE = {12: START_S + 86_400 + 3 * 3_600}
GAP = {5: (START_S + 86_400 + 6 * 3_600, START_S + 86_400 + 12 * 3_600)}

DDL = {
    "readings": (
        "CREATE TABLE readings (name SYMBOL, fleet SYMBOL, driver SYMBOL, model SYMBOL, "
        "latitude DOUBLE, longitude DOUBLE, elevation DOUBLE, velocity DOUBLE, heading DOUBLE, "
        "grade DOUBLE, fuel_consumption DOUBLE, load_capacity DOUBLE, fuel_capacity DOUBLE, "
        "timestamp TIMESTAMP) TIMESTAMP(timestamp) PARTITION BY DAY"
    ),
    "diagnostics": (
        "CREATE TABLE diagnostics (name SYMBOL, fleet SYMBOL, model SYMBOL, "
        "current_load DOUBLE, fuel_state DOUBLE, status LONG, timestamp TIMESTAMP) "
        "TIMESTAMP(timestamp) PARTITION BY DAY"
    ),
    "events": (
        "CREATE TABLE events (kind SYMBOL, code INT, qty LONG, note VARCHAR, ok BOOLEAN, "
        "price DOUBLE, timestamp TIMESTAMP) TIMESTAMP(timestamp) PARTITION BY DAY"
    ),
}


@dataclass
class Truck:
    idx: int
    name: str
    fleet: str
    model: str
    driver: str


def trucks(rng: random.Random) -> list[Truck]:
    return [
        Truck(i, f"truck_{i}", FLEETS[i % 4], MODELS[rng.randrange(3)], rng.choice(DRIVERS))
        for i in range(TRUCKS)
    ]


def _tags(pairs: list[tuple[str, str | None]]) -> str:
    return "".join(f",{k}={v}" for k, v in pairs if v is not None)


def _fields(pairs: list[tuple[str, str | None]]) -> str:
    return ",".join(f"{k}={v}" for k, v in pairs if v is not None)


def _f(rng: random.Random, lo: float, hi: float, nulls: float = 0.03) -> str | None:
    if rng.random() < nulls:
        return None
    return repr(round(rng.uniform(lo, hi), 3))


def _times(rng: random.Random, t: Truck) -> list[int]:
    """Microsecond timestamps of one truck's readings (ending in the truck's number)."""
    out = []
    s = STARTS_LATE.get(t.idx, START_S) + rng.randrange(0, 300)
    last = STOPS_EARLY.get(t.idx, END_S)
    gap = GAP.get(t.idx)
    while s < last:
        if gap is None or not gap[0] <= s < gap[1]:
            out.append(s * US + rng.randrange(0, 10_000) * 100 + t.idx)
        s += rng.randrange(60, 660)
    return out


@dataclass
class Data:
    lines: dict[str, list[str]] = field(default_factory=dict)  # table -> ILP lines (in send order)

    def count(self, table: str) -> int:
        return len(self.lines[table])

    def payload(self) -> bytes:
        return "".join(line + "\n" for t in self.lines for line in self.lines[t]).encode()


def _shuffle_late(rng: random.Random, rows: list[tuple[int, str]]) -> list[str]:
    """Rows by time, with 2% of them sent up to a few hundred lines late (out of order)."""
    rows.sort()
    out: list[str] = [r[1] for r in rows]
    for _ in range(len(out) // 50):
        i = rng.randrange(len(out))
        line = out.pop(i)
        out.insert(min(len(out), i + rng.randrange(1, 400)), line)
    return out


def _with_duplicates(rng: random.Random, rows: list[tuple[int, str]]) -> None:
    for r in list(rows):
        if rng.random() < 0.01:
            rows.append(r)


def generate(seed: int = 20240101) -> Data:
    rng = random.Random(seed)
    ts = trucks(rng)
    readings: list[tuple[int, str]] = []
    diagnostics: list[tuple[int, str]] = []
    for t in ts:
        fleet = None if t.idx == NO_FLEET else t.fleet
        times = _times(rng, t)
        lat, lon, load = rng.uniform(-60, 60), rng.uniform(-170, 170), rng.uniform(0, 5000)
        for i, us in enumerate(times):
            sparse = t.idx == SPARSE_TAGS and i % 3 != 0
            tags = _tags([
                ("name", t.name), ("fleet", fleet),
                ("driver", None if sparse else t.driver), ("model", None if sparse else t.model),
            ])
            lat += rng.uniform(-0.05, 0.05)
            lon += rng.uniform(-0.05, 0.05)
            fields = _fields([
                ("latitude", repr(round(lat, 5))),
                ("longitude", repr(round(lon, 5))),
                ("elevation", _f(rng, 0, 500)),
                ("velocity", _f(rng, 0, 100)),
                ("heading", _f(rng, 0, 360)),
                ("grade", _f(rng, 0, 100)),
                ("fuel_consumption", _f(rng, 0, 50)),
                ("load_capacity", "5000.0" if rng.random() > 0.03 else None),
                ("fuel_capacity", "300.0" if t.idx % 2 else "150.0"),
            ])
            readings.append((us, f"readings{tags} {fields} {us * 1000}"))
            # Diagnostics every third reading at exactly its timestamp, sometimes in between.
            if i % 3 == 0 or rng.random() < 0.1:
                d_us = us if i % 3 == 0 else us + rng.randrange(1, 50) * US
                load = min(5000.0, max(0.0, load + rng.uniform(-500, 500)))
                dtags = _tags([("name", t.name), ("fleet", fleet),
                               ("model", None if sparse else t.model)])
                dfields = _fields([
                    ("current_load", repr(round(load, 2)) if rng.random() > 0.03 else None),
                    ("fuel_state", _f(rng, 0, 1)),
                    ("status", f"{rng.randrange(0, 5)}i" if rng.random() > 0.05 else None),
                ]) or "status=0i"  # a line needs a field
                diagnostics.append((d_us, f"diagnostics{dtags} {dfields} {d_us * 1000}"))
    # Rows without a name (fleet and model only), timestamps ending in 99.
    for k in range(120):
        us = (START_S + rng.randrange(0, END_S - START_S)) * US + rng.randrange(10_000) * 100 + 99
        tags = _tags([("fleet", rng.choice(FLEETS)), ("model", rng.choice(MODELS))])
        readings.append((us, f"readings{tags} velocity={rng.uniform(0, 100):.3f},"
                             f"fuel_capacity=150.0 {us * 1000}"))
        if k % 3 == 0:
            diagnostics.append((us, f"diagnostics{tags} current_load={rng.uniform(0, 5000):.2f},"
                                    f"status={rng.randrange(5)}i {us * 1000}"))
    _with_duplicates(rng, readings)
    _with_duplicates(rng, diagnostics)

    events: list[tuple[int, str]] = []
    s = START_S
    kinds = ["alpha", "beta", "gamma"]
    notes = ["ok", "late", "very late", "Früh", "a,b", "x y", ""]
    for i in range(1500):
        s += rng.randrange(30, 480)
        us = s * US + rng.randrange(1000) * 1000
        tags = _tags([("kind", rng.choice(kinds) if rng.random() > 0.05 else None)])
        note = rng.choice(notes)
        fields = _fields([
            ("code", f"{rng.randrange(-50, 1000)}i" if rng.random() > 0.05 else None),
            ("qty", f"{rng.randrange(-10**12, 10**12)}i" if rng.random() > 0.05 else None),
            ("note", '"' + note.replace('"', '\\"') + '"' if rng.random() > 0.05 else None),
            ("ok", ("t" if rng.random() < 0.6 else "f") if i % 40 else None),
            ("price", _f(rng, -100, 100, nulls=0.05)),
        ])
        if not fields:
            fields = "price=1.0"
        events.append((us, f"events{tags} {fields} {us * 1000}"))
    _with_duplicates(rng, events)

    data = Data()
    data.lines["readings"] = _shuffle_late(rng, readings)
    data.lines["diagnostics"] = _shuffle_late(rng, diagnostics)
    data.lines["events"] = _shuffle_late(rng, events)
    return data


# ---------------------------------------------------------------------------------------------
# Statements


@dataclass
class Stmt:
    family: str
    sql: str
    # Output column positions that define the row order (rows compared in order, ties as
    # multisets); None when the order is not defined (compared as a multiset).
    order: list[int] | None = None


def ts_lit(s: int) -> str:
    import datetime as dt

    return "'" + dt.datetime.fromtimestamp(s, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + "Z'"


def _names(rng: random.Random, n: int) -> list[str]:
    return [f"truck_{i}" for i in sorted(rng.sample(range(TRUCKS), n))]


def _in(values: list[str]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


def _window(rng: random.Random, hours_lo: int = 2, hours_hi: int = 30) -> tuple[int, int]:
    a = START_S + rng.randrange(0, 80) * 3600 + rng.choice([0, 0, 1800, 123])
    return a, a + rng.randrange(hours_lo, hours_hi) * 3600


def sample_by(rng: random.Random) -> list[Stmt]:
    out = []
    aggs_sets = [
        "avg(velocity)",
        "avg(velocity), max(fuel_consumption), count()",
        "min(latitude), max(latitude), sum(grade)",
        "first(velocity), last(velocity)",
        "count(), count(velocity)",
    ]
    fills = [None, "NONE", "NULL", "PREV", "LINEAR", "0", "7"]
    keys = [None, "fleet", "model", "name", "fleet, model"]
    filters = [
        "", "WHERE name = 'truck_5'", "WHERE name IN ('truck_3', 'truck_12')",
        "WHERE fleet = 'North'", "WHERE velocity > 50",
        None,  # a time window
    ]
    intervals = ["1h", "30m", "1d", "4h"]
    for iv in intervals:
        for fill in fills:
            for key in (None, "fleet") if iv in ("1h", "1d") else (None,):
                aggs = rng.choice(aggs_sets)
                if fill is not None and fill not in ("NONE", "NULL", "PREV", "LINEAR"):
                    # QuestDB wants one constant per aggregate.
                    fill = ", ".join([fill] * (aggs.count("(") ))
                flt = rng.choice(filters)
                if flt is None:
                    a, b = _window(rng)
                    flt = f"WHERE timestamp >= {ts_lit(a)} AND timestamp < {ts_lit(b)}"
                if iv == "30m" and not flt:
                    flt = "WHERE name = 'truck_5'"
                sel = "timestamp, " + (key + ", " if key else "") + aggs
                fill_s = f" FILL({fill})" if fill else ""
                out.append(Stmt("sample_by", f"SELECT {sel} FROM readings {flt} SAMPLE BY {iv}{fill_s}".replace("  ", " "), [0]))
    # Keys x fills on a gap-y series selection, plus alignment.
    for key in keys[1:]:
        for fill in ("NULL", "PREV", "LINEAR", "0, 0", "NULL, PREV"):
            flt = "WHERE name IN ('truck_3', 'truck_5', 'truck_12', 'truck_18')"
            sel = f"timestamp, {key}, avg(velocity), max(load_capacity)"
            out.append(Stmt("sample_by", f"SELECT {sel} FROM readings {flt} SAMPLE BY 2h FILL({fill})", [0]))
    aligns = [
        "ALIGN TO CALENDAR", "ALIGN TO FIRST OBSERVATION",
        "ALIGN TO CALENDAR WITH OFFSET '00:30'", "ALIGN TO CALENDAR TIME ZONE 'Europe/Berlin'",
        "ALIGN TO CALENDAR TIME ZONE 'America/New_York' WITH OFFSET '01:15'",
    ]
    for align in aligns:
        for iv in ("1h", "1d", "90m"):
            a, b = _window(rng, 5, 40)
            flt = f"WHERE timestamp >= {ts_lit(a)} AND timestamp < {ts_lit(b)}"
            key = rng.choice([None, "model"])
            sel = "timestamp, " + (key + ", " if key else "") + "avg(fuel_consumption), count()"
            out.append(Stmt("sample_by", f"SELECT {sel} FROM readings {flt} SAMPLE BY {iv} {align}", [0]))
    # FROM / TO
    for fill in (None, "NULL", "PREV", "0, 0", "LINEAR", "PREV, 1.5"):
        # QuestDB 9.3.4 fills the buckets before a series' first row with FILL(PREV) with
        # values left over from earlier queries, so truck_12 (starts late) gets no PREV.
        for name in ("truck_3",) if "PREV" in (fill or "") else ("truck_3", "truck_12"):
            a, b = START_S + 86_400 - 3 * 3600, START_S + 2 * 86_400 + 3600
            fill_s = f" FILL({fill})" if fill else ""
            out.append(Stmt(
                "sample_by",
                f"SELECT timestamp, avg(velocity), min(heading) FROM readings WHERE name = '{name}' "
                f"SAMPLE BY 1h FROM {ts_lit(a)} TO {ts_lit(b)}{fill_s}", [0]))
    # Diagnostics, LONG aggregates.
    for iv in ("1h", "6h", "1d"):
        for fill in (None, "NULL", "PREV", "0, 0, 0", "LINEAR"):
            out.append(Stmt(
                "sample_by",
                f"SELECT timestamp, sum(status), max(status), avg(current_load) FROM diagnostics "
                f"WHERE fleet = '{rng.choice(FLEETS)}' SAMPLE BY {iv}" + (f" FILL({fill})" if fill else ""),
                [0]))
    # FILL(LINEAR) of LONG and DOUBLE aggregates per key, over series with gaps, late starts and
    # early ends: interpolation, extrapolation before a key's first row and after its last.
    for key in ("name", "fleet", "name, fleet"):
        for iv in ("1h", "3h"):
            names = _in(["truck_3", "truck_12", "truck_18", rng.choice(["truck_1", "truck_7"])])
            aggs = rng.choice(["count(), sum(status)", "max(status), avg(fuel_state)",
                               "min(status), last(current_load)"])
            out.append(Stmt(
                "sample_by",
                f"SELECT timestamp, {key}, {aggs} FROM diagnostics WHERE name IN {names} "
                f"SAMPLE BY {iv} FILL(LINEAR)", [0]))
    # Timestamp not first / not selected.
    out.append(Stmt("sample_by", "SELECT avg(velocity), timestamp FROM readings SAMPLE BY 1d", [1]))
    out.append(Stmt("sample_by", "SELECT fleet, count() FROM readings SAMPLE BY 1d", None))
    out.append(Stmt("sample_by", "SELECT timestamp t, count() c FROM readings SAMPLE BY 12h", [0]))
    out.append(Stmt("sample_by", "SELECT timestamp, fleet, count() FROM readings SAMPLE BY 1d ORDER BY timestamp, fleet", [0, 1]))
    out.append(Stmt("sample_by", "SELECT timestamp, count(), count_distinct(name) FROM readings SAMPLE BY 1d", [0]))
    out.append(Stmt("sample_by", "SELECT timestamp, name, last(latitude), last(longitude) FROM readings WHERE fleet = 'South' SAMPLE BY 6h", [0]))
    return out


def latest_on(rng: random.Random) -> list[Stmt]:
    out = []
    parts = ["name", "fleet", "model", "driver", "name, fleet", "fleet, model"]
    sels = ["*", "name, fleet, velocity, timestamp", "timestamp, {p}, latitude, longitude"]
    filters = ["", "WHERE name = 'truck_3'", "WHERE name IN {names}", "WHERE fleet = 'West'",
               "WHERE velocity > 90", "WHERE timestamp < {t}", "WHERE name IN {names} AND velocity < 20",
               "WHERE fleet IN ('North', 'South') AND timestamp IN '2024-01-02'",
               "WHERE model = 'H-2' AND fleet != 'East'"]
    for p in parts:
        for flt in filters:
            if rng.random() < 0.45 and flt:
                continue
            sel = rng.choice(sels).format(p=p)
            f = flt.format(names=_in(_names(rng, 3)), t=ts_lit(START_S + 86_400 + rng.randrange(86_400)))
            out.append(Stmt("latest_on", f"SELECT {sel} FROM readings {f} LATEST ON timestamp PARTITION BY {p}".replace("  ", " ")))
    for p in ("name", "fleet, name", "model"):
        out.append(Stmt("latest_on", f"SELECT * FROM diagnostics LATEST ON timestamp PARTITION BY {p}"))
        out.append(Stmt("latest_on", f"SELECT name, status, timestamp FROM diagnostics WHERE status = 3 LATEST ON timestamp PARTITION BY {p}"))
    # Ordered, limited, aggregated over a LATEST ON subquery.
    out.append(Stmt("latest_on", "SELECT name, timestamp, velocity FROM readings LATEST ON timestamp PARTITION BY name ORDER BY name", [0]))
    out.append(Stmt("latest_on", "SELECT name, timestamp FROM readings LATEST ON timestamp PARTITION BY name ORDER BY timestamp DESC LIMIT 5", [1]))
    out.append(Stmt("latest_on", "SELECT fleet, count(), avg(velocity) FROM (SELECT * FROM readings LATEST ON timestamp PARTITION BY name) ORDER BY fleet", [0]))
    out.append(Stmt("latest_on", "SELECT * FROM readings LATEST BY name"))
    out.append(Stmt("latest_on", "SELECT * FROM (SELECT * FROM readings WHERE velocity > 50) LATEST ON timestamp PARTITION BY fleet"))
    out.append(Stmt("latest_on", "SELECT * FROM events LATEST ON timestamp PARTITION BY kind"))
    # LATEST ON over subqueries: filtered, projected, sampled, aliased, with an outer WHERE.
    subs = ["SELECT * FROM readings WHERE fleet = '{f}'",
            "SELECT name, fleet, model, velocity, timestamp FROM readings WHERE velocity < {v}",
            "SELECT name, fleet, timestamp FROM diagnostics WHERE status = {s}",
            "SELECT timestamp, name, avg(velocity) v FROM readings WHERE fleet = '{f}' SAMPLE BY 6h"]
    for sub in subs:
        for p in ("name", "fleet", "name, fleet"):
            if "fleet" in p and "avg(" in sub:
                continue
            q = sub.format(f=rng.choice(FLEETS), v=rng.randrange(10, 90), s=rng.randrange(5))
            alias = rng.choice(["", " x"])
            where = rng.choice(["", " WHERE name != 'truck_1'"])
            out.append(Stmt("latest_on",
                f"SELECT * FROM ({q}){alias}{where} LATEST ON timestamp PARTITION BY {p}"))
    return out


def joins(rng: random.Random) -> list[Stmt]:
    out = []
    kinds = ["ASOF", "LT", "SPLICE"]
    ons = ["", "ON (name)", "ON r.name = d.name", "ON (name, fleet)"]
    for kind in kinds:
        for on in ons:
            if kind == "SPLICE" and on == "ON (name, fleet)":
                continue
            a, b = _window(rng, 1, 4)
            name = rng.choice(["truck_1", "truck_5", "truck_18", "truck_19"])
            # Raw rows of one truck, in left order.
            out.append(Stmt(
                "join",
                f"SELECT r.timestamp, r.name, r.velocity, d.timestamp, d.name, d.current_load "
                f"FROM (SELECT * FROM readings WHERE name = '{name}' AND timestamp >= {ts_lit(a)} "
                f"AND timestamp < {ts_lit(b)}) r {kind} JOIN diagnostics d {on}".replace("  ", " "),
                None if kind == "SPLICE" else [0]))
            # SELECT * (duplicate column names) on a small window.
            a, b = _window(rng, 1, 2)
            out.append(Stmt(
                "join",
                f"SELECT * FROM (SELECT name, fleet, velocity, timestamp FROM readings WHERE "
                f"timestamp >= {ts_lit(a)} AND timestamp < {ts_lit(a + 1800)}) r {kind} JOIN "
                f"(SELECT name, fleet, current_load, status, timestamp FROM diagnostics) d {on}".replace("  ", " "),
                None if kind == "SPLICE" else [3]))
            # Aggregated afterwards (the TSBS iot shape).
            for grp in ("r.fleet, r.model", "r.fleet", "r.name"):
                a, b = _window(rng, 3, 30)
                dflt = rng.choice(["", "WHERE current_load > 1000", "WHERE status != 0",
                                   f"WHERE fleet = '{rng.choice(FLEETS)}'"])
                agg = rng.choice(["avg(d.current_load)", "max(d.current_load), count()",
                                  "sum(d.status), min(d.fuel_state)"])
                gcols = grp.replace("r.", "")
                cols = ", ".join(f"r.{c.strip()}" for c in gcols.split(","))
                out.append(Stmt(
                    "join",
                    f"SELECT {cols}, {agg} FROM (SELECT fleet, model, name, timestamp FROM readings "
                    f"WHERE timestamp >= {ts_lit(a)} AND timestamp < {ts_lit(b)}) r {kind} JOIN "
                    f"(SELECT name, current_load, status, fuel_state, timestamp FROM diagnostics {dflt}) d "
                    f"{on if on != 'ON (name, fleet)' else 'ON (name)'} GROUP BY {cols} ORDER BY {cols}".replace("  ", " "),
                    list(range(len(gcols.split(","))))))
    # Subqueries on either side: LATEST ON, SAMPLE BY.
    out.append(Stmt("join",
        "SELECT r.name, r.timestamp, d.current_load, d.timestamp FROM (SELECT * FROM readings "
        "LATEST ON timestamp PARTITION BY name) r ASOF JOIN diagnostics d ON (name) ORDER BY r.name", [0]))
    out.append(Stmt("join",
        "SELECT r.timestamp, r.v, d.l FROM (SELECT timestamp, avg(velocity) v FROM readings "
        "WHERE name = 'truck_5' SAMPLE BY 1h) r ASOF JOIN (SELECT timestamp, avg(current_load) l "
        "FROM diagnostics WHERE name = 'truck_5' SAMPLE BY 30m) d", [0]))
    out.append(Stmt("join",
        "SELECT r.timestamp, r.v, d.l FROM (SELECT timestamp, avg(velocity) v FROM readings "
        "WHERE name = 'truck_5' SAMPLE BY 1h) r LT JOIN (SELECT timestamp, avg(current_load) l "
        "FROM diagnostics WHERE name = 'truck_5' SAMPLE BY 1h) d", [0]))
    out.append(Stmt("join",
        "SELECT d.name, d.timestamp, r.velocity FROM (SELECT * FROM diagnostics WHERE status = 4 "
        "AND timestamp IN '2024-01-02') d ASOF JOIN readings r ON (name)", [1]))
    out.append(Stmt("join",
        "SELECT d.fleet, count(), avg(r.velocity) FROM diagnostics d ASOF JOIN readings r ON (name) "
        "ORDER BY 1", [0]))
    out.append(Stmt("join",
        "SELECT d.fleet, count(), avg(r.velocity) FROM diagnostics d LT JOIN readings r ON (name) "
        "ORDER BY 1", [0]))
    out.append(Stmt("join",
        "SELECT count(), count(r.name), count(d.name) FROM readings r ASOF JOIN diagnostics d ON (name)"))
    out.append(Stmt("join",
        "SELECT count(), count(r.name), count(d.name) FROM readings r LT JOIN diagnostics d ON (name)"))
    out.append(Stmt("join",
        "SELECT count(), count(r.name), count(d.name) FROM readings r SPLICE JOIN diagnostics d ON (name)"))
    out.append(Stmt("join",
        "SELECT r.timestamp, e.timestamp, e.kind, e.code FROM (SELECT * FROM readings WHERE name = 'truck_2' "
        "AND timestamp IN '2024-01-01T10;3h') r ASOF JOIN events e", [0]))
    out.append(Stmt("join",
        "SELECT r.timestamp, r.name, d.name, d.status FROM (SELECT * FROM readings WHERE name IS NULL) r "
        "ASOF JOIN diagnostics d ON (name) ORDER BY r.timestamp", [0]))
    out.append(Stmt("join",
        "SELECT r.timestamp, r.name, d.timestamp, d.current_load FROM (SELECT * FROM readings WHERE "
        "fleet IS NULL AND timestamp IN '2024-01-03T00;6h') r ASOF JOIN diagnostics d ON (fleet)", [0]))
    out.append(Stmt("join",
        "SELECT r.timestamp, d.timestamp FROM readings r ASOF JOIN diagnostics d ON (name) "
        "WHERE r.name = 'truck_7' AND r.timestamp >= '2024-01-01T22:00:00Z' LIMIT -5", [0]))
    out.append(Stmt("join",
        "SELECT r.timestamp, d.timestamp, d.current_load FROM (SELECT * FROM readings WHERE "
        "name = 'truck_9' LIMIT 20) r ASOF JOIN (SELECT * FROM diagnostics WHERE name = 'truck_9') d "
        "TOLERANCE 1m", [0]))
    return out


def timestamps(rng: random.Random) -> list[Stmt]:
    out = []
    for _ in range(12):
        a = (START_S + rng.randrange(0, 3 * 86_400)) * US + rng.randrange(US)
        b = a + rng.randrange(1, 20) * 3600 * US
        op = rng.choice(["count()", "min(timestamp), max(timestamp)", "sum(velocity)"])
        out.append(Stmt("ts_int", f"SELECT {op} FROM readings WHERE timestamp >= {a} AND timestamp < {b}"))
        out.append(Stmt("ts_int", f"SELECT {op} FROM readings WHERE timestamp BETWEEN {a} AND {b}"))
    out += [Stmt("ts_int", s, o) for s, o in [
        ("SELECT timestamp, timestamp + 1000000, timestamp - 3600000000 FROM readings WHERE name = 'truck_4' LIMIT 5", [0]),
        ("SELECT timestamp, cast(timestamp AS LONG), timestamp::long, cast(timestamp AS DATE) FROM readings WHERE name = 'truck_4' LIMIT 5", [0]),
        ("SELECT cast(1704153600000000 AS TIMESTAMP), 1704153600000000::timestamp", None),
        ("SELECT count() FROM readings WHERE timestamp > 1704153600000000", None),
        ("SELECT count() FROM readings WHERE timestamp = 1704153600000000", None),
        ("SELECT count() FROM readings WHERE 1704153600000000 < timestamp", None),
        ("SELECT count() FROM readings WHERE cast(timestamp AS LONG) % 100 = 99", None),
        ("SELECT count() FROM readings WHERE timestamp > '2024-01-02T00:00:00Z' AND timestamp < 1704240000000000", None),
        ("SELECT timestamp, timestamp * 2 FROM readings WHERE name = 'truck_1' LIMIT 2", [0]),
        ("SELECT timestamp / 1000000 FROM readings WHERE name = 'truck_1' LIMIT 3", None),
        ("SELECT timestamp FROM readings WHERE name = 'truck_1' AND timestamp < 1704067200000000 + 3600000000", [0]),
        ("SELECT timestamp - '2024-01-01T00:00:00Z' FROM readings WHERE name = 'truck_1' LIMIT 3", None),
        ("SELECT max(timestamp) - min(timestamp) FROM readings", None),
        ("SELECT name, max(timestamp) FROM readings WHERE timestamp < 1704240000000000 ORDER BY name", [0]),
        ("SELECT to_timestamp('2024-01-02 10:00:00', 'yyyy-MM-dd HH:mm:ss')", None),
        ("SELECT count() FROM readings WHERE timestamp >= to_timestamp('2024-01-02', 'yyyy-MM-dd')", None),
        ("SELECT systimestamp() > '2024-01-01', now() > 0", None),
        ("SELECT count() FROM readings WHERE timestamp::long BETWEEN 1704153600000000 AND 1704160800000000", None),
    ]]
    return out


def functions(rng: random.Random) -> list[Stmt]:
    out = []
    for unit in ("h", "d", "m", "15m", "s", "M", "y", "w"):
        out.append(Stmt("functions",
            f"SELECT timestamp_floor('{unit}', timestamp) tf, count() FROM readings WHERE name = 'truck_{rng.randrange(20)}' "
            f"GROUP BY tf ORDER BY tf", [0]))
    for unit, n in (("h", 2), ("d", -1), ("m", 90), ("s", 30), ("M", 1), ("w", 1), ("y", -1)):
        out.append(Stmt("functions",
            f"SELECT timestamp, dateadd('{unit}', {n}, timestamp) FROM readings WHERE name = 'truck_2' LIMIT 4", [0]))
    for unit in ("s", "m", "h", "d", "w", "M", "y"):
        out.append(Stmt("functions",
            f"SELECT timestamp, datediff('{unit}', timestamp, '2024-01-02T00:00:00Z') FROM readings WHERE name = 'truck_6' LIMIT -3", [0]))
    for unit in ("U", "T", "s", "m", "h", "d", "w", "M", "y"):
        out.append(Stmt("functions",
            f"SELECT timestamp, timestamp_ceil('{unit}', timestamp) FROM readings WHERE name = 'truck_{rng.randrange(20)}' "
            f"LIMIT {rng.randrange(2, 6)}", [0]))
    # QuestDB 9.3.4 prints a wrong day name after `D` or `w` in the same pattern ('D E' of
    # 2024-01-01 is '1 Sun') and fails on some `w E`; the patterns keep them apart.
    patterns = ["yyyy-MM-dd HH:mm:ss.SSSUUU", "y yy yyy M MM MMM MMMM", "d dd E EE u", "D", "w ww",
                "h hh H HH k kk K KK a", "m mm s ss S SSS U UUU N NNN", "G z", "dd/MM/yyyy",
                "yyyy-MM-ddTHH:mm:ss.SSSz", "MMM d, yyyy h:mm a", "EE, yyyy.MM.dd"]
    for pattern in patterns:
        out.append(Stmt("functions",
            f"SELECT timestamp, to_str(timestamp, '{pattern}') FROM readings WHERE name = 'truck_{rng.randrange(20)}' "
            f"LIMIT 4", [0]))
    for text, pattern in [("2024-01-02 10:00:00", "yyyy-MM-dd HH:mm:ss"), ("2024-1-2", "yyyy-M-d"),
                          ("20240102", "yyyyMMdd"), ("2024-01-02x", "yyyy-MM-dd"),
                          ("2024-02-30", "yyyy-MM-dd"), ("02 Jan 2024", "dd MMM yyyy"),
                          ("Tue, 02 January 2024 5 PM", "E, dd MMMM yyyy h a"),
                          ("2024-01-02T10:11:12.123456Z", "yyyy-MM-ddTHH:mm:ss.SSSUUUz"),
                          ("2024-01-02T10:11:12+01:00", "yyyy-MM-ddTHH:mm:ssz"),
                          ("2024-01-02 1:2:3.45", "yyyy-MM-dd H:m:s.S"),
                          ("2024-01-02 10:00 Europe/Berlin", "yyyy-MM-dd HH:mm z"),
                          ("1/2/2024 12 AM", "M/d/yyyy h a")]:
        out.append(Stmt("functions",
            f"SELECT count() c, to_timestamp('{text}', '{pattern}') t FROM readings WHERE timestamp < to_timestamp('{text}', '{pattern}')"))
    out.append(Stmt("functions",
        "SELECT to_timestamp(to_str(timestamp, 'yyyy-MM-dd HH:mm:ss.SSSUUU'), 'yyyy-MM-dd HH:mm:ss.SSSUUU') = timestamp, count() "
        "FROM readings ORDER BY 1", [0]))
    out += [Stmt("functions", s, o) for s, o in [
        ("SELECT count() FROM readings WHERE timestamp < now()", None),
        ("SELECT count() FROM readings WHERE timestamp > now()", None),
        ("SELECT count() FROM readings WHERE timestamp > dateadd('y', -100, now())", None),
        ("SELECT count() FROM readings WHERE timestamp < dateadd('d', -1, now())", None),
        ("SELECT timestamp_ceil('h', timestamp), timestamp FROM readings WHERE name = 'truck_8' LIMIT 3", [1]),
        ("SELECT hour(timestamp) h, count() FROM readings GROUP BY h ORDER BY h", [0]),
        ("SELECT day_of_week(timestamp) d, count() FROM readings GROUP BY d ORDER BY d", [0]),
        ("SELECT year(timestamp), month(timestamp), day(timestamp), minute(timestamp), second(timestamp) FROM readings WHERE name = 'truck_8' LIMIT 3", None),
        ("SELECT extract(hour FROM timestamp), extract(day FROM timestamp) FROM readings WHERE name = 'truck_8' LIMIT 3", None),
        ("SELECT to_str(timestamp, 'yyyy-MM-dd HH') k, count() FROM readings WHERE name = 'truck_0' GROUP BY k ORDER BY k LIMIT 10", [0]),
        ("SELECT timestamp_floor('h', timestamp), avg(velocity) FROM readings WHERE fleet = 'North' ORDER BY 1", [0]),
        ("SELECT date_trunc('day', timestamp) d, count() FROM readings GROUP BY d ORDER BY d", [0]),
        ("SELECT round(velocity, 1), floor(velocity), ceil(velocity), abs(grade - 50) FROM readings WHERE name = 'truck_10' LIMIT 5", None),
        ("SELECT concat(name, '/', fleet), length(name), upper(fleet) FROM readings WHERE name = 'truck_11' LIMIT 3", None),
        ("SELECT coalesce(fleet, 'none'), count() FROM readings ORDER BY 1", [0]),
        ("SELECT nullif(status, 0), count() FROM diagnostics ORDER BY 1", [0]),
        ("SELECT CASE WHEN velocity > 50 THEN 'fast' WHEN velocity IS NULL THEN 'unknown' ELSE 'slow' END, count() FROM readings ORDER BY 1", [0]),
    ]]
    return out


def intervals(rng: random.Random) -> list[Stmt]:
    out = []
    lits = [
        "'2024-01-02'", "'2024-01-02T10;2h'", "'2024-01-01T23:30;1h'", "'2024-01'", "'2024'",
        "'2024-01-03T05'", "'2024-01-02T10:15:00.000000Z'", "'2024-01-01;1d;1d;2'",
        "'2024-01-01T12:00;30m;1d;3'", "'2024-01-02T10;-2h'", "'2023-12-31'", "'2024-01-04T11:59'",
    ]
    for lit in lits:
        out.append(Stmt("interval", f"SELECT count(), min(timestamp), max(timestamp) FROM readings WHERE timestamp IN {lit}"))
    for lit in rng.sample(lits, 5):
        out.append(Stmt("interval", f"SELECT name, count() FROM readings WHERE timestamp IN {lit} AND fleet = 'East' ORDER BY name", [0]))
        out.append(Stmt("interval", f"SELECT count() FROM diagnostics WHERE timestamp NOT IN {lit}"))
    out += [Stmt("interval", s, o) for s, o in [
        ("SELECT count() FROM readings WHERE timestamp BETWEEN '2024-01-02' AND '2024-01-02T06:00:00Z'", None),
        ("SELECT count() FROM readings WHERE timestamp >= '2024-01-02' AND timestamp < '2024-01-03'", None),
        ("SELECT count() FROM readings WHERE timestamp > '2024-01-02T12'", None),
        ("SELECT count() FROM readings WHERE timestamp IN ('2024-01-02', '2024-01-03')", None),
        ("SELECT * FROM readings WHERE timestamp IN '2024-01-02T10;2h' AND name = 'truck_0'", [13]),
        ("SELECT timestamp, name FROM readings WHERE timestamp IN '2024-01-02T10:00;10m'", [0]),
    ]]
    return out


def group_by(rng: random.Random) -> list[Stmt]:
    out = []
    keys = ["fleet", "model", "driver", "name", "fleet, model", "name, fleet, driver"]
    aggs = [
        "count()", "count(*)", "count(velocity)", "sum(velocity)", "avg(velocity)", "min(velocity)",
        "max(velocity)", "first(velocity)", "last(velocity)", "count_distinct(name)",
        "min(timestamp)", "max(timestamp)", "first(timestamp)", "last(latitude)",
    ]
    filters = ["", "WHERE velocity > 10", "WHERE fleet = 'South'", "WHERE timestamp IN '2024-01-03'",
               "WHERE name IN ('truck_18', 'truck_19')", "WHERE fleet IS NULL", "WHERE model IS NOT NULL"]
    for key in keys:
        for _ in range(5):
            ag = ", ".join(rng.sample(aggs, rng.randrange(1, 4)))
            flt = rng.choice(filters)
            if rng.random() < 0.5:
                out.append(Stmt("group_by", f"SELECT {key}, {ag} FROM readings {flt}".replace("  ", " ")))
            else:
                n = len(key.split(","))
                out.append(Stmt("group_by", f"SELECT {key}, {ag} FROM readings {flt} GROUP BY {key} ORDER BY {key}".replace("  ", " "), list(range(n))))
    for key in ("fleet", "model", "name", "status"):
        ag = rng.choice(["count(), sum(status), avg(current_load)", "min(fuel_state), max(current_load)",
                         "first(status), last(status), count(status)"])
        out.append(Stmt("group_by", f"SELECT {key}, {ag} FROM diagnostics"))
    out += [Stmt("group_by", s, o) for s, o in [
        ("SELECT kind, count(), sum(code), sum(qty), avg(price), min(note), max(note) FROM events", None),
        ("SELECT ok, count(), sum(code), max(qty) FROM events", None),
        ("SELECT note, count() FROM events ORDER BY note", [0]),
        ("SELECT kind, ok, count() FROM events ORDER BY kind, ok", [0, 1]),
        ("SELECT fleet, count() c FROM readings WHERE velocity > 20 ORDER BY c DESC", [1]),
        ("SELECT fleet, model, count() FROM readings GROUP BY fleet, model ORDER BY 3 DESC, 1, 2", [2, 0, 1]),
        ("SELECT count() FROM (SELECT DISTINCT name FROM readings)", None),
    ]]
    return out


def distinct(rng: random.Random) -> list[Stmt]:
    cols = ["fleet", "model", "driver", "name", "fleet, model", "name, fleet", "status", "fleet, status"]
    out = []
    for c in cols:
        table = "diagnostics" if "status" in c else "readings"
        flt = rng.choice(["", "WHERE timestamp IN '2024-01-02'", "WHERE fleet != 'North'"])
        out.append(Stmt("distinct", f"SELECT DISTINCT {c} FROM {table} {flt}".rstrip()))
        out.append(Stmt("distinct", f"SELECT DISTINCT {c} FROM {table} {flt} ORDER BY {c}".replace("  ", " "),
                        list(range(len(c.split(","))))))
    out += [Stmt("distinct", s, o) for s, o in [
        ("SELECT count_distinct(name), count_distinct(fleet), count_distinct(driver) FROM readings", None),
        ("SELECT fleet, count_distinct(name) FROM readings", None),
        ("SELECT DISTINCT kind, ok FROM events", None),
        ("SELECT DISTINCT note FROM events ORDER BY note LIMIT 3", [0]),
        ("SELECT count(DISTINCT name) FROM readings", None),
    ]]
    return out


def order_limit(rng: random.Random) -> list[Stmt]:
    out = []
    for col in ("velocity", "latitude", "fuel_consumption", "heading"):
        for direction in ("", " DESC"):
            lim = rng.choice(["10", "-5", "3, 8", "0", "1"])
            out.append(Stmt("order_limit",
                f"SELECT name, timestamp, {col} FROM readings WHERE name IS NOT NULL ORDER BY {col}{direction}, timestamp LIMIT {lim}",
                [2, 1]))
    for lim in ("5", "-5", "10, 15", "-10, -5", "0, 3", "100000"):
        name = rng.choice(["truck_3", "truck_7", "truck_12", "truck_19"])
        out.append(Stmt("order_limit", f"SELECT * FROM readings WHERE name = '{name}' LIMIT {lim}", [13]))
        out.append(Stmt("order_limit", f"SELECT name, timestamp, velocity FROM readings LIMIT {lim}", [1]))
        out.append(Stmt("order_limit", f"SELECT * FROM diagnostics WHERE fleet = 'West' ORDER BY timestamp DESC LIMIT {lim}", [6]))
    out += [Stmt("order_limit", s, o) for s, o in [
        ("SELECT * FROM readings WHERE name = 'truck_3' AND timestamp > '2024-01-02T11'", [13]),
        ("SELECT * FROM events", [6]),
        ("SELECT * FROM events WHERE code IS NULL OR qty IS NULL OR note IS NULL", [6]),
        ("SELECT kind, code, qty, note, ok, price FROM events ORDER BY code, qty LIMIT 20", [1, 2]),
        ("SELECT kind, code FROM events ORDER BY code DESC, timestamp LIMIT 7", [1]),
        ("SELECT * FROM events ORDER BY note, timestamp LIMIT 10", [3, 6]),
        ("SELECT name, velocity FROM readings WHERE name = 'truck_14' ORDER BY velocity, timestamp LIMIT 5", [1]),
        ("SELECT name, velocity FROM readings WHERE name = 'truck_14' ORDER BY velocity DESC, timestamp LIMIT 5", [1]),
        ("SELECT name, fleet FROM readings ORDER BY fleet, timestamp LIMIT 3", [1]),
        ("SELECT name, fleet, timestamp FROM readings ORDER BY fleet DESC, timestamp DESC LIMIT 3", [1, 2]),
        ("SELECT * FROM diagnostics WHERE name = 'truck_0' ORDER BY status, timestamp LIMIT 10", [5, 6]),
        ("SELECT timestamp, name FROM readings WHERE name IS NULL ORDER BY timestamp DESC LIMIT 4", [0]),
    ]]
    return out


def aggregates(rng: random.Random) -> list[Stmt]:
    out = []
    cols = ["velocity", "latitude", "fuel_consumption", "grade", "load_capacity", "elevation"]
    fns = ["count({c})", "sum({c})", "avg({c})", "min({c})", "max({c})", "first({c})", "last({c})",
           "stddev_samp({c})", "variance({c})"]
    filters = ["", "WHERE fleet = 'North'", "WHERE name = 'truck_19'", "WHERE velocity < 5",
               "WHERE timestamp IN '2024-01-02T10;2h'", "WHERE model IN ('F-150', 'H-2') AND grade > 50",
               "WHERE fleet IS NULL", "WHERE name IS NULL", "WHERE velocity IS NULL", "WHERE 1 = 0"]
    for flt in filters:
        for _ in range(3):
            c = rng.choice(cols)
            fs = ", ".join(f.format(c=c) for f in rng.sample(fns, 3))
            out.append(Stmt("aggregate", f"SELECT count(), {fs} FROM readings {flt}".rstrip()))
    for c in ("code", "qty", "price", "note", "kind"):
        out.append(Stmt("aggregate", f"SELECT count({c}), min({c}), max({c}), first({c}), last({c}) FROM events"))
    out.append(Stmt("aggregate", "SELECT first(ok), last(ok) FROM events"))
    for c in ("code", "qty"):
        out.append(Stmt("aggregate", f"SELECT sum({c}), avg({c}), count_distinct({c}) FROM events WHERE kind = 'beta'"))
    out.append(Stmt("aggregate", "SELECT sum(price), avg(price), count_distinct(kind) FROM events WHERE kind = 'beta'"))
    for c in ("name", "fleet", "driver", "model"):
        out.append(Stmt("aggregate", f"SELECT count_distinct({c}), count({c}) FROM readings WHERE velocity > {rng.randrange(90)}"))
    out += [Stmt("aggregate", s, None) for s in [
        "SELECT count(), sum(status), avg(status), min(status), max(status) FROM diagnostics",
        "SELECT count(name), count(fleet), count(model), count(driver) FROM readings",
        "SELECT sum(qty) FROM events",
        "SELECT sum(code), sum(code * 1000000) FROM events",
        "SELECT count() FROM events WHERE ok",
        "SELECT count() FROM events WHERE NOT ok",
        "SELECT count() FROM events WHERE note = ''",
        "SELECT count() FROM events WHERE note LIKE '%late%'",
        "SELECT count() FROM events WHERE note ILIKE 'f%'",
        "SELECT first(timestamp), last(timestamp), min(timestamp), max(timestamp) FROM diagnostics",
    ]]
    return out


def names(rng: random.Random) -> list[Stmt]:
    exprs = [
        "max(velocity)", "min(velocity)", "velocity * 2", "cast(velocity AS INT)", "velocity::int",
        "velocity + latitude", "fleet", "name", "timestamp", "count()", "count(*)", "sum(grade)",
        "avg(velocity) * 2", "abs(latitude)", "-velocity", "velocity > 50", "fleet = 'North'",
        "1", "1.5", "'x'", "true", "null", "cast(status AS DOUBLE)", "status::string", "concat(name, fleet)",
        "cast(timestamp AS LONG)", "now() > timestamp", "velocity IS NULL",
    ]
    out = []
    plain = [e for e in exprs if "(" not in e or e.startswith(("cast", "abs", "concat", "now"))]
    aggs = [e for e in exprs if e not in plain and not e.startswith(("cast", "abs", "concat"))]
    for _ in range(14):
        cols = rng.sample([e for e in plain if "status" not in e], 3)
        out.append(Stmt("names", f"SELECT {', '.join(cols)} FROM readings WHERE name = 'truck_1' LIMIT 3", None))
    for _ in range(8):
        cols = rng.sample([a for a in aggs], 2)
        out.append(Stmt("names", f"SELECT {', '.join(cols)} FROM readings"))
    out += [Stmt("names", s, o) for s, o in [
        ("SELECT max(velocity), max(velocity), max(velocity) FROM readings", None),
        ("SELECT name, name, fleet FROM readings WHERE name = 'truck_2' LIMIT 2", None),
        ("SELECT velocity v, velocity FROM readings WHERE name = 'truck_2' LIMIT 2", None),
        ("SELECT r.name, d.name FROM readings r ASOF JOIN diagnostics d ON (name) LIMIT 2", None),
        ("SELECT cast(status AS DOUBLE), status::string, status::int FROM diagnostics LIMIT 3", None),
        ('SELECT "count()", "sum(status)" FROM (SELECT count(), sum(status) FROM diagnostics)', None),
        ("SELECT x FROM (SELECT max(velocity) x FROM readings)", None),
        ("SELECT 1 + 1, 2 * 3.0, 'a' || 'b', 10 / 4, 10 % 3, 7 / 2.0", None),
        ("SELECT cast(1 AS LONG), cast(1.9 AS INT), cast('12' AS INT), cast(2 AS DOUBLE)", None),
        ("SELECT code::long + qty, code * 2, qty / 1000, price::float FROM events LIMIT 3", None),
        ("SELECT code + 1, code::double / 3, cast(code AS STRING), cast(qty AS VARCHAR) FROM events WHERE code IS NOT NULL LIMIT 3", None),
        ("SELECT ok, NOT ok, ok AND true, cast(ok AS INT) FROM events LIMIT 4", None),
        ("SELECT note, length(note), upper(note), left(note, 2) FROM events LIMIT 5", None),
    ]]
    return out


def null_semantics(rng: random.Random) -> list[Stmt]:
    """NULL in comparisons, filters and expressions (QuestDB's NULL is a value of its own)."""
    out = []
    preds = [
        "velocity != 1", "velocity <> 1", "fleet != 'North'", "fleet <> 'North'", "velocity = NULL",
        "fleet = NULL", "fleet != NULL", "velocity != NULL", "fleet IS NULL", "velocity IS NOT NULL",
        "fleet NOT IN ('North', 'South')", "NOT (fleet = 'North')", "NOT (velocity > 50)",
        "velocity > NULL", "name != 'truck_1' AND fleet != 'East'", "driver != model",
    ]
    for p in preds:
        out.append(Stmt("null", f"SELECT count() FROM readings WHERE {p}"))
    for p in ("status != 0", "status = NULL", "status NOT IN (1, 2)", "current_load != 5000"):
        out.append(Stmt("null", f"SELECT count() FROM diagnostics WHERE {p}"))
    for p in ("code != 5", "qty != 0", "note != 'ok'", "note = NULL", "ok != true", "price != 0"):
        out.append(Stmt("null", f"SELECT count() FROM events WHERE {p}"))
    out += [Stmt("null", s, o) for s, o in [
        ("SELECT timestamp, velocity, velocity = NULL, velocity != 1, velocity + 1, coalesce(velocity, -1) v "
         "FROM readings WHERE name = 'truck_6' AND velocity IS NULL", [0]),
        ("SELECT timestamp, fleet, fleet = NULL, fleet != 'North', concat(fleet, 'x') FROM readings "
         "WHERE name = 'truck_18' LIMIT 3", [0]),
        ("SELECT timestamp, code, qty, note, code + 1, qty * 2, note || '!' FROM events "
         "WHERE code IS NULL OR qty IS NULL OR note IS NULL LIMIT 10", [0]),
        ("SELECT count(), sum(velocity), avg(velocity), min(velocity) FROM readings WHERE velocity IS NULL", None),
        ("SELECT name, count() FROM readings WHERE velocity != 1 ORDER BY name", [0]),
    ]]
    return out


FAMILIES = [sample_by, latest_on, joins, timestamps, functions, intervals, group_by, distinct,
            order_limit, aggregates, names, null_semantics]


def corpus(seed: int = 7) -> list[Stmt]:
    out: list[Stmt] = []
    for fam in FAMILIES:
        out += fam(random.Random(f"{seed}-{fam.__name__}"))
    seen: set[str] = set()
    unique = []
    for s in out:
        if s.sql not in seen:
            seen.add(s.sql)
            unique.append(s)
    return unique

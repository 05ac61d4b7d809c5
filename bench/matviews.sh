#!/usr/bin/env bash
# Materialized views under ingestion (issue 40), Sundial and QuestDB side by side. TSBS devops
# cpu-only data (SCALE hosts x DAYS days at 10 s; 200 x 3 = 5,184,000 rows by default), made
# with tsbs_generate_data, is loaded with tsbs_load_questdb into a fresh server twice, one
# server at a time: once without views, and once into another fresh server where two views are
# created over /exec as soon as the loader has created `cpu` (the loader refuses to start if
# `cpu` exists), refreshed IMMEDIATE (the default) while it loads:
#   cpu_1m: SELECT timestamp, hostname, avg(usage_user) AS usage_user, max(usage_system) AS
#           usage_system, min(usage_idle) AS usage_idle FROM cpu SAMPLE BY 1m
#   cpu_1h: the same, SAMPLE BY 1h
# Per server it reports:
#   - rows/s from the loader's start until `count(*)` shows every row, without and with the
#     views, and their ratio (goal: at most 15% lower with the views, ratio >= 0.85);
#   - the time from then until both views are caught up (view_status = 'valid' and
#     refresh_base_table_txn = base_table_txn in materialized_views());
#   - the views' refresh lag during the load, p50/p99/max: bench/matview_lag.py polls
#     materialized_views() every POLL_MS and, for each base_table_txn T first seen at t0, takes
#     the first poll t1 at which refresh_base_table_txn >= T (lag = t1 - t0);
#   - a dashboard query over DASH_DAYS days (hourly avg(usage_user) per host), from raw rows
#     (SAMPLE BY 1h over cpu) and from cpu_1h, for all hosts and for DASH_HOST: median and p99
#     of RUNS runs after WARMUP, and the speed-up (goal: 100x from the view); a warning if the
#     two answers' row counts differ.
# A table at the end puts the servers side by side with Sundial/QuestDB ratios.
#
#   bench/matviews.sh
#   SERVERS=questdb bench/matviews.sh
#   SCALE=50 RUNS=5 NO_BUILD=1 bench/matviews.sh          # a quick try (1,296,000 rows)
#   REPEATS=3 bench/matviews.sh                           # medians of 3 rounds
#
# Environment (defaults):
#   SCALE=200 DAYS=3 WORKERS=2 SERVERS="sundial questdb" POLL_MS=100 RUNS=20 WARMUP=2
#   DASH_DAYS=3 DASH_HOST=host_7
#   REPEATS=1   rounds of both loads on every server, servers taking turns; the table shows
#               the medians over the rounds
#   NO_BUILD=   1: no cargo build (target/release/sundial must exist)
#   TSBS_BIN=../shared/tsbs/bin  DATA_DIR=/tmp/sundial-analytics-data (the generated set stays
#   there for the next run)  WORK= (the servers' directories: a temporary one, removed at exit,
#   unless given)
# Figures go to bench/results/matviews-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
TSBS_BIN=${TSBS_BIN:-../shared/tsbs/bin}
DATA_DIR=${DATA_DIR:-/tmp/sundial-analytics-data}
SCALE=${SCALE:-200}
DAYS=${DAYS:-3}
WORKERS=${WORKERS:-2}
SERVERS=${SERVERS:-"sundial questdb"}
POLL_MS=${POLL_MS:-100}
RUNS=${RUNS:-20}
WARMUP=${WARMUP:-2}
DASH_DAYS=${DASH_DAYS:-3}
DASH_HOST=${DASH_HOST:-host_7}
REPEATS=${REPEATS:-1}
NO_BUILD=${NO_BUILD:-}
KEEP_WORK=${WORK:+1}
WORK=${WORK:-$(mktemp -d /tmp/sundial-matviews-bench.XXXXXX)}
mkdir -p bench/results "$WORK"
OUT=bench/results/matviews-$(date +%Y%m%d-%H%M%S).txt
TSBS_DATA_LAZY=1
source bench/tsbs-data.sh
FILE=$(tsbs_cpu "$SCALE" "$DAYS")
ROWS=$(grep -c '^cpu,' "$FILE")
DASH_FROM=2016-01-01T00:00:00.000000Z
DASH_TO=$(date -u -d "2016-01-01 00:00:00 UTC + $DASH_DAYS days" +%FT%T.000000Z)
VIEWS="cpu_1m cpu_1h"

[[ -n $NO_BUILD ]] || cargo build --release -p sundial-server -p sundial-bench
bench/peers/questdb.sh install >/dev/null
export QDB_HTTP_PORT=19000 QDB_ILP_PORT=19009 QDB_PG_PORT=18812
LOADER= POLLER=
# A failed run leaves no loader, poller or server behind, and no data directories unless WORK
# was given. The runs happen in a subshell (the pipe into tee), which stops its own loader and
# poller.
stop_children() {
    [[ -z $LOADER ]] || kill "$LOADER" 2>/dev/null || true
    [[ -z $POLLER ]] || kill "$POLLER" 2>/dev/null || true
}
trap 'bench/peers/sundial.sh stop "$WORK/sundial" >/dev/null 2>&1 || true
      bench/peers/questdb.sh stop "$WORK/questdb-root" >/dev/null 2>&1 || true
      [[ -n $KEEP_WORK ]] || rm -rf "$WORK"' EXIT

now_ms() { date +%s%3N; }

# The body of /exec's answer to a statement; fails (printing the answer) on an error.
exec_sql() { # http statement
    local body
    body=$(curl -sG "http://$1/exec" --data-urlencode "query=$2") || {
        echo "/exec failed: $2" >&2
        return 1
    }
    if [[ $body == *'"error"'* ]]; then
        echo "$2: $body" >&2
        return 1
    fi
    printf '%s\n' "$body"
}

# Waits until SHOW TABLES lists the table; notes in the results if the loader was done first
# (a set too small for the server: the views then see no load).
wait_table() { # http table
    local tries=0 said=
    until curl -sfG "http://$1/exec" --data-urlencode "query=SHOW TABLES" 2>/dev/null |
        grep -q "\[\"$2\"\]"; do
        if [[ -z $said ]] && ! kill -0 "$LOADER" 2>/dev/null; then
            echo "# the loader finished before $2 was listed: the views were created after the load"
            said=1
        fi
        (( tries++ < 12000 )) || { echo "table $2 never appeared" >&2; return 1; }
        sleep 0.005
    done
}

create_views() { # http
    local view every tries err
    for view in $VIEWS; do
        every=${view#cpu_}
        tries=0
        # A table the loader has only just created may not take a view at once: retry for up to
        # 5 s, and report the last error.
        until err=$(exec_sql "$1" "CREATE MATERIALIZED VIEW $view AS (SELECT timestamp, hostname, avg(usage_user) AS usage_user, max(usage_system) AS usage_system, min(usage_idle) AS usage_idle, sum(usage_user) AS usage_user_sum, count(usage_user) AS usage_user_n FROM cpu SAMPLE BY $every)" 2>&1 >/dev/null); do
            (( tries++ < 50 )) || { echo "$err" >&2; return 1; }
            sleep 0.1
        done
    done
}

# Waits until `count(*)` shows every row of the set.
wait_rows() { # http server
    local waited=0 n
    while :; do
        n=$(count "$1" cpu)
        [[ ${n:-0} -ge $ROWS ]] && return 0
        (( waited++ < 60000 )) || { echo "$2: ${n:-0} of $ROWS rows after 600 s" >&2; return 1; }
        sleep 0.01
    done
}

# One load into a fresh server, with VIEWS=0 or 2: prints `result:` lines.
load() { # server views http ilp
    local server=$1 views=$2 http=$3 ilp=$4
    local start sent done_ms created=-1 at_create=- catchup=- log=$WORK/loader-$1-$2.log view
    start=$(now_ms)
    "$TSBS_BIN/tsbs_load_questdb" --file="$FILE" --workers="$WORKERS" --batch-size=10000 \
        --url="http://$http/" --ilp-bind-to="$ilp" >"$log" 2>&1 &
    LOADER=$!
    if [[ $views == 2 ]]; then
        wait_table "$http" cpu
        create_views "$http"
        created=$(( $(now_ms) - start ))
        at_create=$(count "$http" cpu)
        python3 bench/matview_lag.py lag "$http" $VIEWS \
            --interval "$(awk -v m="$POLL_MS" 'BEGIN { print m / 1000 }')" \
            >"$WORK/lag.txt" 2>"$WORK/lag.err" &
        POLLER=$!
    fi
    wait "$LOADER" || { echo "$server: the loader failed:" >&2; tail -5 "$log" >&2; return 1; }
    LOADER=
    sent=$(now_ms)
    wait_rows "$http" "$server"
    done_ms=$(now_ms)
    if [[ $views == 2 ]]; then
        catchup=$(python3 bench/matview_lag.py caught-up "$http" $VIEWS --timeout 1200)
        catchup=${catchup#catchup_s=}
        kill -TERM "$POLLER"
        wait "$POLLER" || true
        POLLER=
    fi
    awk -v s="$server" -v run="$RUN" -v v="$views" -v r="$ROWS" -v t0="$start" -v ts="$sent" \
        -v td="$done_ms" -v c="$created" -v ac="${at_create:--}" -v cu="$catchup" 'BEGIN {
        printf "result: server=%s kind=ingest run=%d views=%d rows=%d send_s=%.2f queryable_s=%.2f rows_per_s=%d",
            s, run, v, r, (ts - t0) / 1000, (td - t0) / 1000, r / ((td - t0) / 1000)
        if (v > 0) printf " views_created_ms=%d rows_at_create=%s catchup_s=%s", c, ac, cu
        printf "\n" }'
    [[ $views == 2 ]] || return 0
    sed "s/^/result: server=$server kind=lag run=$RUN /" "$WORK/lag.txt"
    [[ ! -s $WORK/lag.err ]] || sed 's/^/# lag poller: /' "$WORK/lag.err"
    # The views as the server lists them, for the record.
    exec_sql "$http" "SELECT view_name, refresh_type, view_status, refresh_base_table_txn, base_table_txn FROM materialized_views()" |
        sed -n 's/.*"dataset":\(\[.*\]\)\(,"count".*\|}\)$/# '"$server"' materialized_views(): \1/p'
    for view in $VIEWS; do
        echo "# $server $view rows: $(count "$http" "$view")"
    done
    # Warnings (row counts that differ) go to the results as comments.
    python3 bench/matview_lag.py dashboard "$http" --from "$DASH_FROM" --to "$DASH_TO" \
        --runs "$RUNS" --warmup "$WARMUP" --host "$DASH_HOST" 2>&1 |
        sed -e "/^query=/s/^/result: server=$server kind=dashboard run=$RUN /" -e '/^result: /!s/^/# /'
}

run_sundial() {
    local root=$WORK/sundial views
    for views in 0 2; do
        bench/peers/sundial.sh start "$root" >/dev/null
        load sundial "$views" 127.0.0.1:29000 127.0.0.1:29009
        bench/peers/sundial.sh stop "$root"
    done
    # With rollup routing (the default) Sundial answers the "raw" dashboard query from the
    # view too; the same data served with routing off gives the raw-rows figure
    # (server=sundial_unrouted).
    SUNDIAL_KEEP_DATA=1 bench/peers/sundial.sh start "$root" --rollup-routing false >/dev/null
    python3 bench/matview_lag.py dashboard 127.0.0.1:29000 --from "$DASH_FROM" --to "$DASH_TO" \
        --runs "$RUNS" --warmup "$WARMUP" --host "$DASH_HOST" 2>&1 |
        sed -e "/^query=/s/^/result: server=sundial_unrouted kind=dashboard run=$RUN /" \
            -e '/^result: /!s/^/# /'
    bench/peers/sundial.sh stop "$root"
}

run_questdb() {
    local root=$WORK/questdb-root views
    for views in 0 2; do
        rm -rf "$root"
        bench/peers/questdb.sh start "$root" >/dev/null
        load questdb "$views" 127.0.0.1:$QDB_HTTP_PORT 127.0.0.1:$QDB_ILP_PORT
        bench/peers/questdb.sh stop "$root"
    done
    rm -rf "$root"
}

# Metrics down, servers across, Sundial/QuestDB on the right; with REPEATS > 1 each figure is
# the median over the runs (the with/without ratio is that of the median rates).
table() {
    awk -v host="$DASH_HOST" '
        function num(x) { return x != "" && x != "-" && x != "nan" }
        function add(s, k, x) { if (num(x)) L[s, k] = ((s, k) in L) ? L[s, k] " " x : x }
        function median(list,    a, m, i, j, t) {
            m = split(list, a, " ")
            for (i = 2; i <= m; i++)
                for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
        }
        /^result: / {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            s = f["server"]
            if (f["kind"] == "ingest" && f["views"] == 0) add(s, "rate0", f["rows_per_s"])
            if (f["kind"] == "ingest" && f["views"] > 0) {
                add(s, "rate2", f["rows_per_s"]); add(s, "created", f["views_created_ms"])
                add(s, "catchup", f["catchup_s"]); add(s, "at_create", f["rows_at_create"])
            }
            if (f["kind"] == "lag")
                for (m in f) if (m ~ /_ms$/ || m == "txns") add(s, "lag " f["view"] " " m, f[m])
            if (f["kind"] == "dashboard") {
                q = f["query"]
                add(s, q " raw", f["raw_median_ms"]); add(s, q " view", f["view_median_ms"])
                add(s, q " raw p99", f["raw_p99_ms"]); add(s, q " view p99", f["view_p99_ms"])
                add(s, q " speedup", f["speedup"])
                rows[s, q] = f["raw_rows"] "/" f["view_rows"]
            }
        }
        END {
            for (k in L) {
                split(k, sk, SUBSEP); x = median(L[k])
                v[sk[1], sk[2]] = x == int(x) ? x + 0 : x >= 1000 ? sprintf("%d", x + 0.5) : sprintf("%.2f", x)
            }
            for (k in rows) v[k " rows"] = rows[k]
            # Sundial answers the "raw" query from the view by rollup routing; its raw-rows
            # figures come from the same data served with routing off.
            split("all-hosts " host, dq, " ")
            for (i = 1; i <= 2; i++) {
                x = v["sundial_unrouted", dq[i] " raw"]
                if (num(x)) {
                    v["sundial", dq[i] " raw_off"] = x
                    if (num(v["sundial", dq[i] " view"]) && v["sundial", dq[i] " view"] > 0)
                        v["sundial", dq[i] " speedup_off"] = sprintf("%.1f", x / v["sundial", dq[i] " view"])
                }
            }
            split("sundial questdb", servers, " ")
            for (i = 1; i <= 2; i++) {
                s = servers[i]
                if (num(v[s, "rate0"]) && num(v[s, "rate2"]) && v[s, "rate0"] > 0)
                    v[s, "keep"] = sprintf("%.2f", v[s, "rate2"] / v[s, "rate0"])
            }
            n = 0
            label[++n] = "ingest rows/s, no views";                key[n] = "rate0"
            label[++n] = "ingest rows/s, 2 views";                 key[n] = "rate2"
            label[++n] = "with/without views (goal >= 0.85)";      key[n] = "keep"
            label[++n] = "views created, after loader start (ms)"; key[n] = "created"
            label[++n] = "rows in cpu then (count(*))";            key[n] = "at_create"
            label[++n] = "views caught up, after all rows (s)";    key[n] = "catchup"
            split("cpu_1m cpu_1h", views, " ")
            for (i = 1; i <= 2; i++) {
                label[++n] = "lag " views[i] " p50 (ms)"; key[n] = "lag " views[i] " p50_ms"
                label[++n] = "lag " views[i] " p99 (ms)"; key[n] = "lag " views[i] " p99_ms"
                label[++n] = "lag " views[i] " max (ms)"; key[n] = "lag " views[i] " max_ms"
                label[++n] = "lag " views[i] " commits seen"; key[n] = "lag " views[i] " txns"
            }
            split("all-hosts " host, qs, " ")
            for (i = 1; i <= 2; i++) {
                label[++n] = "dashboard " qs[i] ", raw (median ms)"; key[n] = qs[i] " raw"
                label[++n] = "dashboard " qs[i] ", raw (p99 ms)"; key[n] = qs[i] " raw p99"
                label[++n] = "dashboard " qs[i] ", view (median ms)"; key[n] = qs[i] " view"
                label[++n] = "dashboard " qs[i] ", view (p99 ms)"; key[n] = qs[i] " view p99"
                label[++n] = "dashboard " qs[i] ", speed-up (goal >= 100)"; key[n] = qs[i] " speedup"
                label[++n] = "dashboard " qs[i] ", raw, Sundial routing off (median ms)"; key[n] = qs[i] " raw_off"
                label[++n] = "dashboard " qs[i] ", speed-up over routing off"; key[n] = qs[i] " speedup_off"
                label[++n] = "dashboard " qs[i] ", rows raw/view"; key[n] = qs[i] " rows"
            }
            printf "%-44s %12s %12s %16s\n", "metric", "sundial", "questdb", "sundial/questdb"
            for (i = 1; i <= n; i++) {
                a = v["sundial", key[i]]; b = v["questdb", key[i]]
                r = (num(a) && num(b) && a !~ /\// && b + 0 > 0) ? sprintf("%.2f", a / b) : "-"
                printf "%-44s %12s %12s %16s\n", label[i], (a == "" ? "-" : a), \
                    (b == "" ? "-" : b), r
            }
        }'
}


{
    trap stop_children EXIT
    echo "# bench/matviews.sh $(date -u +%FT%TZ): $(basename "$FILE") ($ROWS rows), tsbs_load_questdb --workers=$WORKERS --batch-size=10000; views $VIEWS REFRESH IMMEDIATE; lag polled every $POLL_MS ms; dashboard $DASH_FROM to $DASH_TO, $RUNS runs after $WARMUP warm-ups"
    echo "# sundial $(git rev-parse --short HEAD 2>/dev/null), binary of $(date -u -r target/release/sundial +%FT%TZ 2>/dev/null || echo '(missing)'); questdb $(basename "$(bench/peers/questdb.sh jar)" .jar)"
    for ((RUN = 1; RUN <= REPEATS; RUN++)); do
        for server in $SERVERS; do
            "run_$server"
        done
    done
} | tee "$OUT.raw"
table <"$OUT.raw" | tee "$OUT"
cat "$OUT.raw" >>"$OUT"
rm "$OUT.raw"
echo "results in $OUT"

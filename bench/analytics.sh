#!/usr/bin/env bash
# The analytics battery (bench/analytics-queries.txt), Sundial and QuestDB side by side: TSBS's
# devops (200 hosts x 2 days) and iot (500 trucks x 7 days) data, generated with
# tsbs_generate_data and loaded with TSBS's own tsbs_load_questdb into one server at a time,
# then every query of the battery over PostgreSQL's protocol: medians, the GB/s each full scan
# reaches, and each answer checked against QuestDB's. Also this machine's memory read rate
# (a sum over 1 GiB on one thread and on two), the ceiling of any scan.
#
#   bench/analytics.sh
#   RUNS=25 SERVERS=sundial bench/analytics.sh
#   QUERIES=bench/negation-queries.txt bench/analytics.sh   # another battery (bench/negation_queries.py)
#   QUERIES=bench/timeseries-queries.txt RUNS=7 BUDGET_MS=1500 bench/analytics.sh
#                                        # the generated time-series battery (timeseries_queries.py)
#   SCALE=large ...                      # devops 1000 hosts x 3 days, iot 1000 trucks x 7 days
#   TOGETHER=1 ...                       # both servers loaded at once, taking turns query by
#                                        # query (sundial-bench analytics --peer-addr)
#
# Each server's data is deleted once its battery ran (KEEP_DATA=1 keeps it in WORK): the
# larger scale needs about 5 GB per server besides its 13 GB of generated lines.
# On a machine whose speed drifts, batteries run one after the other compare two machines:
# TOGETHER=1 loads both servers, then runs each query on one and then the other (which goes
# first alternating, a pause between), so both see the same moment.
# BUDGET_MS bounds the time one query's runs may take (at least 3 timed runs), so batteries of
# slow statements finish. Results of batteries with many queries are summarised by
# bench/ratios.py: the distribution of Sundial/QuestDB ratios and the worst queries.
#
# Needs TSBS's commands (TSBS_BIN, default ../shared/tsbs/bin). Figures go to
# bench/results/analytics-<time>.txt: one line per query with both medians and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
TSBS_BIN=${TSBS_BIN:-../shared/tsbs/bin}
DATA_DIR=${DATA_DIR:-/tmp/sundial-analytics-data}
RUNS=${RUNS:-15}
BUDGET_MS=${BUDGET_MS:-0}
SCALE=${SCALE:-small}
QUERIES=${QUERIES:-bench/analytics-queries.txt}
SERVERS=${SERVERS:-"questdb sundial"}
WORK=${WORK:-$(mktemp -d /tmp/sundial-analytics-bench.XXXXXX)}
mkdir -p bench/results
OUT=bench/results/analytics-$(date +%Y%m%d-%H%M%S).txt
source bench/tsbs-data.sh
case $SCALE in
    small) CPU_FILE=cpu-s200-2d.ilp IOT_FILE=iot-s500-7d.ilp ;;
    large) tsbs_large; tsbs_large_iot; CPU_FILE=cpu-s1000-3d.ilp IOT_FILE=iot-s1000-7d.ilp ;;
    *) echo "SCALE is small or large, not $SCALE" >&2; exit 1 ;;
esac
CPU_ROWS=$(grep -c '^cpu,' "$DATA_DIR/$CPU_FILE")
READINGS_ROWS=$(grep -c '^readings,' "$DATA_DIR/$IOT_FILE")

cargo build --release -p sundial-server -p sundial-bench
bench/peers/questdb.sh install >/dev/null
export QDB_HTTP_PORT=19000 QDB_ILP_PORT=19009 QDB_PG_PORT=18812

# TSBS's loader refuses to run while a table `cpu` exists: iot first.
load() { # http ilp
    for file in "$IOT_FILE" "$CPU_FILE"; do
        "$TSBS_BIN/tsbs_load_questdb" --file="$DATA_DIR/$file" --workers=2 \
            --batch-size=10000 --url="http://$1/" --ilp-bind-to="$2" | tail -1
    done
    local waited=0
    until [[ $(count "$1" cpu) == "$CPU_ROWS" && $(count "$1" readings) == "$READINGS_ROWS" ]]; do
        (( waited++ < 600 )) || { echo "rows not queryable after 60 s" >&2; return 1; }
        sleep 0.1
    done
}

# CPU time process $1 has used, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# Waits until process $1 uses under a tenth of a core over a second: what the load left
# running (QuestDB applying its WAL, Sundial writing zone maps and merging) finishes before
# the battery measures queries. At most 120 s.
settle() { # pid
    local waited=0 before after ticks
    ticks=$(getconf CLK_TCK)
    while (( waited++ < 120 )); do
        before=$(cpu_ticks "$1")
        sleep 1
        after=$(cpu_ticks "$1")
        (( (after - before) * 10 < ticks )) && return 0
    done
    echo "process $1 still busy 120 s after loading" >&2
}

run_battery() { # label pg
    local reference=()
    [[ $1 == questdb || ! -d $WORK/answers/questdb ]] ||
        reference=(--reference "$WORK/answers/questdb")
    target/release/sundial-bench analytics --label "$1" --pg-addr "$2" \
        --queries "$QUERIES" --runs "$RUNS" --budget-ms "$BUDGET_MS" \
        --answers "$WORK/answers/$1" "${reference[@]}"
}

# Starts a server on fresh data, loads it and waits until it is idle.
start_sundial() {
    bench/peers/sundial.sh start "$WORK/sundial"
    load 127.0.0.1:29000 127.0.0.1:29009
    settle "$(bench/peers/sundial.sh pid "$WORK/sundial")"
}

start_questdb() {
    rm -rf "$WORK/questdb-root"
    bench/peers/questdb.sh start "$WORK/questdb-root" >/dev/null
    load 127.0.0.1:$QDB_HTTP_PORT 127.0.0.1:$QDB_ILP_PORT
    settle "$(tr -d '[:space:]' <"$WORK/questdb-root/questdb.pid")"
}

stop_sundial() {
    bench/peers/sundial.sh stop "$WORK/sundial"
    [[ -n ${KEEP_DATA:-} ]] || rm -rf "$WORK/sundial/data"
}

stop_questdb() {
    bench/peers/questdb.sh stop "$WORK/questdb-root"
    [[ -n ${KEEP_DATA:-} ]] || rm -rf "$WORK/questdb-root"
}

run_sundial() {
    start_sundial
    run_battery sundial 127.0.0.1:28812
    stop_sundial
}

run_questdb() {
    start_questdb
    run_battery questdb 127.0.0.1:$QDB_PG_PORT
    stop_questdb
}

run_together() {
    start_questdb
    start_sundial
    target/release/sundial-bench analytics --label sundial --pg-addr 127.0.0.1:28812 \
        --peer-label questdb --peer-addr 127.0.0.1:$QDB_PG_PORT \
        --queries "$QUERIES" --runs "$RUNS" --budget-ms "$BUDGET_MS" --answers "$WORK/answers"
    stop_sundial
    stop_questdb
}

# Joins the servers' `result:` lines: both medians, Sundial's time as a share of QuestDB's,
# the GB/s Sundial's scan reached, and whether the answers agree.
table() {
    awk '
        /^result: membw/ { for (i = 2; i <= NF; i++) print "# " $i; next }
        /^result: / && / query=/ {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            q = f["query"]; median[f["label"], q] = f["median_ms"]
            if (f["label"] == "sundial") { rate[q] = f["gb_per_s"]; answer[q] = f["answer"] }
            if (/ failed: /) failed[f["label"], q] = 1
            if (!(q in seen)) { seen[q] = 1; order[++n] = q }
        }
        /^pair: / {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            answer[f["query"]] = f["answer"]
        }
        END {
            printf "%-26s %12s %12s %14s %10s %10s\n", "query", "sundial_ms", "questdb_ms", \
                "sundial/questdb", "gb_per_s", "answer"
            for (i = 1; i <= n; i++) {
                q = order[i]; s = median["sundial", q]; d = median["questdb", q]
                share = (s > 0 && d > 0) ? sprintf("%.2f", s / d) : "-"
                if (failed["sundial", q]) s = "failed"
                if (failed["questdb", q]) d = "failed"
                printf "%-26s %12s %12s %14s %10s %10s\n", q, s, d, share, \
                    rate[q] == "" ? "-" : rate[q], answer[q] == "" ? "-" : answer[q]
            }
        }'
}

{
    echo "# bench/analytics.sh $(date -u +%FT%TZ): scale=$SCALE, cpu $CPU_ROWS rows, readings $READINGS_ROWS rows, runs=$RUNS, budget_ms=$BUDGET_MS, queries=$QUERIES"
    target/release/sundial-bench membw
    if [[ -n ${TOGETHER:-} ]]; then
        run_together
    else
        for server in $SERVERS; do
            "run_$server"
        done
    fi
} | tee "$OUT.raw"
table <"$OUT.raw" | tee "$OUT"
cat "$OUT.raw" >>"$OUT"
rm "$OUT.raw"
# The ratios' distribution, and a chart of the results next to them (bench/chart.py); a
# failure there loses no figures.
python3 bench/ratios.py "$OUT" | tee -a "$OUT" || true
python3 bench/chart.py "$OUT" || echo "no chart for $OUT" >&2
echo "results in $OUT"

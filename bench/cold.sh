#!/usr/bin/env bash
# Cold against hot: the same queries on the same server, before and after every partition is
# converted to Parquet. TSBS's devops (200 hosts x 2 days) and iot (500 trucks x 7 days) data,
# generated with tsbs_generate_data and loaded with TSBS's own tsbs_load_questdb; then
#
#   1. hot: the analytics battery (bench/analytics-queries.txt, over PostgreSQL's protocol) and
#      TSBS's devops query types (tsbs_generate_queries, run by tsbs_run_queries_questdb over
#      HTTP, as TSBS runs QuestDB);
#   2. ALTER TABLE ... CONVERT PARTITION TO PARQUET for every table, timed: rows/s;
#   3. cold: the same queries (the battery's answers checked against the hot ones), once as
#      they run (decoded column chunks cached, `--decoded-cache-mb` 512) and once after a
#      restart with no cache (`--decoded-cache-mb 0`: every read decodes its chunks);
#   4. bytes per point per table and per column type (`sundial-bench cold` on the stopped data
#      directory, whose partitions are now Parquet) and bytes on disk per table.
#
# Every data partition must be older than the table's newest one to be converted, so one
# sentinel row is added to each table in a partition of its own (2016-03-01) before step 1:
# hot and cold answer over the same rows.
#
#   bench/cold.sh
#   RUNS=5 TSBS_QUERIES=20 bench/cold.sh
#   LARGE=1 bench/cold.sh     # also the 1000-host, 3-day devops set (conversion and bytes only)
#
# Needs TSBS's commands (TSBS_BIN, default ../shared/tsbs/bin). Figures go to
# bench/results/cold-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
TSBS_BIN=${TSBS_BIN:-../shared/tsbs/bin}
DATA_DIR=${DATA_DIR:-/tmp/sundial-analytics-data}
RUNS=${RUNS:-9}
TSBS_QUERIES=${TSBS_QUERIES:-40}
LARGE=${LARGE:-}
WORK=${WORK:-$(mktemp -d /tmp/sundial-cold-bench.XXXXXX)}
HTTP=127.0.0.1:29000
PG=127.0.0.1:28812
ILP=127.0.0.1:29009
mkdir -p bench/results
OUT=bench/results/cold-$(date +%Y%m%d-%H%M%S).txt
source bench/tsbs-data.sh
[[ -z $LARGE ]] || tsbs_large
CPU_ROWS=$(grep -c '^cpu,' "$DATA_DIR/cpu-s200-2d.ilp")
READINGS_ROWS=$(grep -c '^readings,' "$DATA_DIR/iot-s500-7d.ilp")

TSBS_TYPES=${TSBS_TYPES:-"single-groupby-1-1-1 single-groupby-1-1-12 single-groupby-1-8-1 \
single-groupby-5-1-1 single-groupby-5-1-12 single-groupby-5-8-1 double-groupby-1 \
double-groupby-5 double-groupby-all high-cpu-1 high-cpu-all lastpoint groupby-orderby-limit"}

cargo build --release -p sundial-server -p sundial-bench

sql() { # query: prints the JSON answer, fails on an error
    local answer
    answer=$(curl -sfG "http://$HTTP/exec" --data-urlencode "query=$1")
    [[ $answer != *'"error"'* ]] || { echo "$1: $answer" >&2; return 1; }
    echo "$answer"
}

# TSBS's query files for the 200-host, 2-day set: generated once.
tsbs_queries() {
    local dir=$DATA_DIR/queries-s200-2d
    mkdir -p "$dir"
    for type in $TSBS_TYPES; do
        [[ -s $dir/$type.gob ]] || "$TSBS_BIN/tsbs_generate_queries" --format=questdb \
            --use-case=cpu-only --scale=200 --seed=123 --timestamp-start=2016-01-01T00:00:00Z \
            --timestamp-end=2016-01-03T00:00:01Z --query-type="$type" \
            --queries="$TSBS_QUERIES" --file="$dir/$type.gob" 2>/dev/null
    done
    echo "$dir"
}

# One `result:` line per TSBS query type: the runner's median over all its queries.
run_tsbs() { # label dir
    for type in $TSBS_TYPES; do
        local out
        out=$("$TSBS_BIN/tsbs_run_queries_questdb" --file="$2/$type.gob" --urls="http://$HTTP/" \
            --workers=1 --max-queries="$TSBS_QUERIES" --burn-in=2 --print-interval=0 2>&1) ||
            { echo "result: label=$1 tsbs=$type failed"; continue; }
        local med
        med=$(awk '/^all queries/ { all = 1; next } all && /med:/ {
            for (i = 1; i <= NF; i++) if ($i == "med:") { v = $(i + 1); sub(/ms,?/, "", v); print v; exit } }' <<<"$out")
        echo "result: label=$1 tsbs=$type median_ms=${med:-?}"
    done
}

run_battery() { # label [reference label]
    local reference=()
    [[ -z ${2:-} ]] || reference=(--reference "$WORK/answers/$2")
    target/release/sundial-bench analytics --label "$1" --pg-addr "$PG" \
        --queries bench/analytics-queries.txt --runs "$RUNS" \
        --answers "$WORK/answers/$1" "${reference[@]}"
}

# Converts every partition of `table` but the sentinel's; prints rows, seconds and rows/s.
convert() { # table timestamp-column
    local rows start end
    rows=$(count "$HTTP" "$1")
    start=$(date +%s.%N)
    sql "ALTER TABLE $1 CONVERT PARTITION TO PARQUET WHERE $2 < '2016-02-01'" >/dev/null
    end=$(date +%s.%N)
    awk -v t="$1" -v r="$rows" -v a="$start" -v b="$end" \
        'BEGIN { s = b - a; printf "result: convert table=%s rows=%d seconds=%.2f rows_per_s=%.0f\n", t, r, s, r / s }'
}

disk() { # table
    sql "SELECT sum(\"numRows\"), sum(\"diskSize\"), sum(\"parquetFileSize\") FROM table_partitions('$1')" |
        sed -n "s/.*\"dataset\":\[\[\([0-9]*\),\([0-9]*\),\([0-9null]*\)\]\].*/result: disk table=$1 rows=\1 bytes=\2 parquet_bytes=\3/p"
}

sentinels() {
    sql "INSERT INTO cpu (timestamp, hostname, usage_user) VALUES ('2016-03-01T00:00:00Z', 'sentinel', 0)" >/dev/null
    for t in readings diagnostics; do
        sql "INSERT INTO $t (timestamp, name, fuel_capacity) VALUES ('2016-03-01T00:00:00Z', 'sentinel', 0)" >/dev/null
    done
}

load() { # files...
    for file in "$@"; do
        "$TSBS_BIN/tsbs_load_questdb" --file="$DATA_DIR/$file" --workers=2 \
            --batch-size=10000 --url="http://$HTTP/" --ilp-bind-to="$ILP" | tail -1
    done
}

main() {
    local queries
    queries=$(tsbs_queries)
    bench/peers/sundial.sh start "$WORK/sundial" --cold-check-interval-ms 0
    # TSBS's loader refuses to run while a table `cpu` exists: iot first.
    load iot-s500-7d.ilp cpu-s200-2d.ilp
    local waited=0
    until [[ $(count "$HTTP" cpu) == "$CPU_ROWS" && $(count "$HTTP" readings) == "$READINGS_ROWS" ]]; do
        (( waited++ < 600 )) || { echo "rows not queryable after 60 s" >&2; return 1; }
        sleep 0.1
    done
    sentinels
    for t in cpu readings diagnostics; do disk "$t"; done
    run_battery hot
    run_tsbs hot "$queries"
    for t in cpu readings diagnostics; do convert "$t" timestamp; done
    for t in cpu readings diagnostics; do disk "$t"; done
    run_battery cold hot
    run_tsbs cold "$queries"
    bench/peers/sundial.sh stop "$WORK/sundial"
    SUNDIAL_KEEP_DATA=1 bench/peers/sundial.sh start "$WORK/sundial" \
        --cold-check-interval-ms 0 --decoded-cache-mb 0
    run_battery uncached hot
    run_tsbs uncached "$queries"
    bench/peers/sundial.sh stop "$WORK/sundial"
    target/release/sundial-bench cold --data-dir "$WORK/sundial/data" --out-dir "$WORK/cold-out"
    if [[ -n $LARGE ]]; then
        bench/peers/sundial.sh start "$WORK/large" --cold-check-interval-ms 0
        load cpu-s1000-3d.ilp
        sql "INSERT INTO cpu (timestamp, hostname, usage_user) VALUES ('2016-03-01T00:00:00Z', 'sentinel', 0)" >/dev/null
        disk cpu
        convert cpu timestamp
        disk cpu
        bench/peers/sundial.sh stop "$WORK/large"
        target/release/sundial-bench cold --data-dir "$WORK/large/data" --out-dir "$WORK/cold-out"
    fi
}

# Joins hot and cold: each query's two medians and cold / hot.
table() {
    awk '
        /^result: / && (/ query=/ || / tsbs=/) {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            q = (f["query"] != "") ? f["query"] : "tsbs:" f["tsbs"]
            median[f["label"], q] = f["median_ms"]
            if (f["label"] != "hot" && f["answer"] != "") answer[q] = answer[q] f["answer"] " "
            if (!(q in seen)) { seen[q] = 1; order[++n] = q }
        }
        END {
            printf "%-34s %9s %9s %9s %9s %9s  %s\n", "query", "hot_ms", "cold_ms", "cold/hot", \
                "uncached", "unc/hot", "answers"
            for (i = 1; i <= n; i++) {
                q = order[i]; h = median["hot", q]; c = median["cold", q]; u = median["uncached", q]
                r = (h > 0 && c > 0) ? sprintf("%.2f", c / h) : "-"
                ru = (h > 0 && u > 0) ? sprintf("%.2f", u / h) : "-"
                printf "%-34s %9s %9s %9s %9s %9s  %s\n", q, h, c, r, u, ru, \
                    answer[q] == "" ? "-" : answer[q]
            }
        }'
}

{
    echo "# bench/cold.sh $(date -u +%FT%TZ): cpu $CPU_ROWS rows, readings $READINGS_ROWS rows, runs=$RUNS, tsbs queries=$TSBS_QUERIES per type"
    main
} 2>&1 | tee "$OUT.raw"
table <"$OUT.raw" | tee "$OUT"
grep -E '^result: (convert|disk)|bytes per point|^ *(table|cpu|readings|diagnostics|type|LONG|DOUBLE|SYMBOL|TIMESTAMP|VARCHAR)' "$OUT.raw" >>"$OUT" || true
echo >>"$OUT"
cat "$OUT.raw" >>"$OUT"
rm "$OUT.raw"
# A chart of the results next to them (bench/chart.py); a failure there loses no figures.
python3 bench/chart.py "$OUT" || echo "no chart for $OUT" >&2
echo "results in $OUT"

#!/usr/bin/env bash
# Last-value caches (issue 40), Sundial and QuestDB side by side. TSBS devops cpu-only data
# (SCALE hosts x DAYS days at 10 s; 200 x 3 = 5,184,000 rows by default) is loaded with
# tsbs_load_questdb into a fresh server, one server at a time; Sundial loads it twice: once
# without a cache and once with `CREATE LAST VALUE CACHE by_host ON cpu (hostname)` made as soon
# as the loader has created `cpu` (kept up while the rows arrive). Then each server answers,
# RUNS times after WARMUP, the queries taking turns:
#   lastpoint:  SELECT * FROM cpu LATEST ON timestamp PARTITION BY hostname   (TSBS lastpoint)
#   hosts:      SELECT DISTINCT hostname FROM cpu      (Grafana's template variable query)
#   three:      SELECT * FROM cpu WHERE hostname IN ('host_1','retired_3','host_7')
#               LATEST ON timestamp PARTITION BY hostname
#   filtered:   SELECT * FROM cpu WHERE usage_user > 90 LATEST ON timestamp PARTITION BY hostname
#               (a filter on a value: never from the cache, for comparison)
# then again (`_retired`) after RETIRED hosts that stopped reporting at the start of the data
# get one row each at 2016-01-01 (INSERT): their newest rows are the table's oldest, which a
# search from the newest rows back only finds at the end of the table.
# Sundial answers them without the cache (first load) and with it (second load); QuestDB has
# no such cache. The table shows median ms per query and server, the speed-up the cache gives
# and the Sundial/QuestDB ratios, and the ingest rates with and without the cache.
#
#   bench/last_values.sh
#   SCALE=50 NO_BUILD=1 bench/last_values.sh          # a quick try
#
# Environment (defaults): SCALE=200 DAYS=3 WORKERS=2 RUNS=50 WARMUP=3 RETIRED=10
#   SERVERS="sundial questdb" REPEATS=1 (rounds; the table shows medians over them)
#   NO_BUILD= TSBS_BIN=../shared/tsbs/bin DATA_DIR=/tmp/sundial-analytics-data WORK=
# Figures go to bench/results/last_values-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
TSBS_BIN=${TSBS_BIN:-../shared/tsbs/bin}
DATA_DIR=${DATA_DIR:-/tmp/sundial-analytics-data}
SCALE=${SCALE:-200}
DAYS=${DAYS:-3}
WORKERS=${WORKERS:-2}
RUNS=${RUNS:-50}
WARMUP=${WARMUP:-3}
SERVERS=${SERVERS:-"sundial questdb"}
RETIRED=${RETIRED:-10}
REPEATS=${REPEATS:-1}
NO_BUILD=${NO_BUILD:-}
KEEP_WORK=${WORK:+1}
WORK=${WORK:-$(mktemp -d /tmp/sundial-last-values-bench.XXXXXX)}
mkdir -p bench/results "$WORK"
OUT=bench/results/last_values-$(date +%Y%m%d-%H%M%S).txt
TSBS_DATA_LAZY=1
source bench/tsbs-data.sh
FILE=$(tsbs_cpu "$SCALE" "$DAYS")
ROWS=$(grep -c '^cpu,' "$FILE")

[[ -n $NO_BUILD ]] || cargo build --release -p sundial-server
bench/peers/questdb.sh install >/dev/null
export QDB_HTTP_PORT=19000 QDB_ILP_PORT=19009 QDB_PG_PORT=18812
trap 'bench/peers/sundial.sh stop "$WORK/sundial" >/dev/null 2>&1 || true
      bench/peers/questdb.sh stop "$WORK/questdb-root" >/dev/null 2>&1 || true
      [[ -n $KEEP_WORK ]] || rm -rf "$WORK"' EXIT

now_ms() { date +%s%3N; }

exec_sql() { # http statement
    local body
    body=$(curl -sG "http://$1/exec" --data-urlencode "query=$2")
    if [[ $body == *'"error"'* ]]; then
        echo "$2: $body" >&2
        return 1
    fi
    printf '%s\n' "$body"
}

wait_rows() { # http [rows]
    local waited=0 n want=${2:-$ROWS}
    while :; do
        n=$(count "$1" cpu)
        [[ ${n:-0} -ge $want ]] && return 0
        (( waited++ < 60000 )) || { echo "${n:-0} of $ROWS rows after 600 s" >&2; return 1; }
        sleep 0.01
    done
}

# Loads the set; with cache=1 creates the cache as soon as `cpu` exists. Prints a result line.
load() { # server cache http ilp
    local server=$1 cache=$2 http=$3 ilp=$4 start loader tries=0
    start=$(now_ms)
    "$TSBS_BIN/tsbs_load_questdb" --file="$FILE" --workers="$WORKERS" --batch-size=10000 \
        --url="http://$http/" --ilp-bind-to="$ilp" >"$WORK/loader.log" 2>&1 &
    loader=$!
    if [[ $cache == 1 ]]; then
        until exec_sql "$http" "CREATE LAST VALUE CACHE by_host ON cpu (hostname)" >/dev/null 2>&1; do
            (( tries++ < 12000 )) || { echo "no cpu table to cache" >&2; return 1; }
            sleep 0.005
        done
    fi
    wait "$loader"
    wait_rows "$http"
    awk -v s="$server" -v c="$cache" -v r="$ROWS" -v t0="$start" -v t1="$(now_ms)" 'BEGIN {
        printf "result: server=%s kind=ingest cache=%d rows=%d rows_per_s=%d\n", s, c, r, r / ((t1 - t0) / 1000) }'
}

queries() { # server cache http suffix
    (cd bench && python3 last_values.py time "$3" --runs "$RUNS" --warmup "$WARMUP" \
        "lastpoint$4=SELECT * FROM cpu LATEST ON timestamp PARTITION BY hostname" \
        "hosts$4=SELECT DISTINCT hostname FROM cpu" \
        "three$4=SELECT * FROM cpu WHERE hostname IN ('host_1','retired_3','host_7') LATEST ON timestamp PARTITION BY hostname" \
        "filtered$4=SELECT * FROM cpu WHERE usage_user > 90 LATEST ON timestamp PARTITION BY hostname") |
        sed "s/^/result: server=$1 kind=query cache=$2 /"
}

# Hosts that stopped reporting at the start of the data: their newest rows are the oldest,
# so a search from the newest row back reads the whole table to find them.
retire() { # http
    local i
    for i in $(seq 0 $((RETIRED - 1))); do
        exec_sql "$1" "INSERT INTO cpu (timestamp, hostname, usage_user) VALUES ('2016-01-01T00:00:0$((i % 10)).000000Z', 'retired_$i', 1.0)" >/dev/null
    done
    wait_rows "$1" $((ROWS + RETIRED))
}

# All queries on a loaded server: as loaded, then with retired hosts.
measure() { # server cache http
    queries "$1" "$2" "$3" ""
    retire "$3"
    queries "$1" "$2" "$3" "_retired"
}

run_sundial() {
    local root=$WORK/sundial cache order="0 1"
    # Rounds take turns on which load goes first: the machine's drift falls on both.
    (( RUN % 2 )) || order="1 0"
    for cache in $order; do
        rm -rf "$root"
        bench/peers/sundial.sh start "$root" >/dev/null
        load sundial "$cache" 127.0.0.1:29000 127.0.0.1:29009
        measure sundial "$cache" 127.0.0.1:29000
        if [[ $cache == 1 ]]; then
            echo "# sundial last_value_caches(): $(exec_sql 127.0.0.1:29000 "SELECT cache_name, status, keys, memory_bytes FROM last_value_caches()" | sed -n 's/.*"dataset":\(\[.*\]\).*/\1/p')"
        fi
        bench/peers/sundial.sh stop "$root"
    done
}

run_questdb() {
    local root=$WORK/questdb-root
    rm -rf "$root"
    bench/peers/questdb.sh start "$root" >/dev/null
    load questdb 0 127.0.0.1:$QDB_HTTP_PORT 127.0.0.1:$QDB_ILP_PORT
    measure questdb 0 127.0.0.1:$QDB_HTTP_PORT
    bench/peers/questdb.sh stop "$root"
}

table() {
    awk '
        function add(k, c, x) { L[k, c] = ((k, c) in L) ? L[k, c] " " x : x }
        function median(list,    a, m, i, j, t) {
            m = split(list, a, " ")
            for (i = 2; i <= m; i++)
                for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
        }
        /^result: / {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            col = f["server"] (f["server"] == "sundial" ? (f["cache"] ? "_cache" : "_plain") : "")
            if (f["kind"] == "ingest") add("ingest rows/s", col, f["rows_per_s"])
            if (f["kind"] == "query") add(f["query"] " (median ms)", col, f["median_ms"])
        }
        END {
            for (k in L) { x = median(L[k]); v[k] = x >= 1000 ? sprintf("%d", x + 0.5) : x }
            printf "%-26s %14s %14s %10s %10s %10s\n", "metric", "sundial", "sundial+cache", "questdb", "cache x", "+cache/qdb"
            n = split("ingest rows/s,lastpoint (median ms),hosts (median ms),three (median ms),filtered (median ms),lastpoint_retired (median ms),hosts_retired (median ms),three_retired (median ms),filtered_retired (median ms)", m, ",")
            for (i = 1; i <= n; i++) {
                a = v[m[i], "sundial_plain"]; b = v[m[i], "sundial_cache"]; c = v[m[i], "questdb"]
                x = (a != "" && b + 0 > 0) ? sprintf("%.2f", i == 1 ? b / a : a / b) : "-"
                r = (b != "" && c + 0 > 0) ? sprintf("%.3f", b / c) : "-"
                printf "%-26s %14s %14s %10s %10s %10s\n", m[i], a == "" ? "-" : a, b == "" ? "-" : b, c == "" ? "-" : c, x, r
            }
            print "# cache x: plain/cache time (speed-up; for ingest, cache/plain rate); +cache/qdb: Sundial with the cache over QuestDB (time ratio; lower is faster, for ingest higher)"
        }'
}

{
    echo "# bench/last_values.sh $(date -u +%FT%TZ): $(basename "$FILE") ($ROWS rows), tsbs_load_questdb --workers=$WORKERS; $RUNS runs after $WARMUP warm-ups per query"
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

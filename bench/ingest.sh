#!/usr/bin/env bash
# Ingestion under TSBS's own loader, Sundial and QuestDB side by side: TSBS devops (200 hosts x
# 2 days) and iot (500 trucks x 7 days) generated with tsbs_generate_data, each loaded with
# tsbs_load_questdb into a fresh server, one server at a time. Per run: the loader's send time,
# the time from its start until `count(*)` shows every row (rows/s until queryable), the lag
# from the loader's exit until then, the server's CPU seconds per row, its peak RSS, and the
# bytes on disk after a clean stop.
#
#   bench/ingest.sh
#   WORKERS="2 4 8" SETS=cpu SERVERS=sundial bench/ingest.sh
#   DEDUP=1 SETS=cpu bench/ingest.sh     # into tables with DEDUP UPSERT KEYS(timestamp, hostname)
#   SETS=cpu1000 bench/ingest.sh         # 1000 hosts x 3 days (IoTDB's published set)
#
# With DEDUP=1 each table gets its keys as soon as the loader has created it (the loader refuses
# to start if its tables exist), so all but the first few thousand rows go through
# deduplication; the set is reported as <set>-dedup.
# Needs TSBS's commands (TSBS_BIN, default ../shared/tsbs/bin). Figures go to
# bench/results/ingest-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
TSBS_BIN=${TSBS_BIN:-../shared/tsbs/bin}
DATA_DIR=${DATA_DIR:-/tmp/sundial-analytics-data}
WORKERS=${WORKERS:-2}
SETS=${SETS:-"cpu iot"}
SERVERS=${SERVERS:-"sundial questdb"}
KEEP_WORK=${WORK:+1}
WORK=${WORK:-$(mktemp -d /tmp/sundial-ingest-bench.XXXXXX)}
mkdir -p bench/results
OUT=bench/results/ingest-$(date +%Y%m%d-%H%M%S).txt
source bench/tsbs-data.sh

cargo build --release -p sundial-server -p sundial-bench
bench/peers/questdb.sh install >/dev/null
export QDB_HTTP_PORT=19000 QDB_ILP_PORT=19009 QDB_PG_PORT=18812
# A failed run leaves no server behind to block the next, and no data directories (gigabytes
# for the large set) unless WORK was given.
trap 'bench/peers/sundial.sh stop "$WORK/sundial" >/dev/null 2>&1 || true
      bench/peers/questdb.sh stop "$WORK/questdb-root" >/dev/null 2>&1 || true
      [[ -n $KEEP_WORK ]] || rm -rf "$WORK"' EXIT

file_of() {
    case $1 in
        cpu) echo cpu-s200-2d.ilp ;; cpu1000) echo cpu-s1000-3d.ilp ;; iot) echo iot-s500-7d.ilp ;;
    esac
}
tables_of() { case $1 in cpu | cpu1000) echo cpu ;; iot) echo "readings diagnostics" ;; esac; }
keys_of() {
    case $1 in cpu | cpu1000) echo "timestamp, hostname" ;; iot) echo "timestamp, name" ;; esac
}
[[ " $SETS " == *" cpu1000 "* ]] && tsbs_large
DEDUP=${DEDUP:-0}

# With DEDUP=1: gives the set's tables their keys as soon as they exist.
dedup_when_created() { # set http
    local t tries
    for t in $(tables_of "$1"); do
        tries=0
        until [[ $(count "$2" "$t") -ge 1 ]]; do
            (( tries++ < 6000 )) || { echo "table $t never appeared" >&2; return 1; }
            sleep 0.005
        done
        curl -sfG "http://$2/exec" \
            --data-urlencode "query=ALTER TABLE $t DEDUP ENABLE UPSERT KEYS($(keys_of "$1"))" \
            >/dev/null || echo "ALTER TABLE $t DEDUP failed" >&2
    done
}

now_ms() { date +%s%3N; }

# CPU seconds (user + system) and peak RSS (KiB) of a process.
cpu_s() {
    local f
    read -r -a f <<<"$(sed 's/.*) //' "/proc/$1/stat")"
    echo "scale=3; (${f[11]} + ${f[12]}) / $(getconf CLK_TCK)" | bc
}
peak_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

# One load: prints a `result:` line.
load_once() { # server set workers http ilp pid
    local server=$1 set=$2 workers=$3 http=$4 ilp=$5 pid=$6
    local file=$DATA_DIR/$(file_of "$set") rows=0 t
    for t in $(tables_of "$set"); do
        rows=$((rows + $(grep -c "^$t," "$file")))
    done
    local cpu0 start sent done_ms waited=0
    cpu0=$(cpu_s "$pid")
    start=$(now_ms)
    local dedup_pid=
    if [[ $DEDUP == 1 ]]; then
        dedup_when_created "$set" "$http" &
        dedup_pid=$!
    fi
    "$TSBS_BIN/tsbs_load_questdb" --file="$file" --workers="$workers" --batch-size=10000 \
        --url="http://$http/" --ilp-bind-to="$ilp" >"$WORK/loader.log"
    sent=$(now_ms)
    [[ -z $dedup_pid ]] || wait "$dedup_pid"
    while :; do
        local seen=0
        for t in $(tables_of "$set"); do
            local n
            n=$(count "$http" "$t")
            seen=$((seen + ${n:-0}))
        done
        [[ $seen -ge $rows ]] && break
        (( waited++ < 30000 )) || { echo "$server $set: $seen of $rows rows after 300 s" >&2; return 1; }
        sleep 0.01
    done
    done_ms=$(now_ms)
    local cpu1 peak
    cpu1=$(cpu_s "$pid")
    peak=$(peak_kib "$pid")
    [[ $DEDUP == 1 ]] && set=$set-dedup
    awk -v s="$server" -v set="$set" -v w="$workers" -v r="$rows" -v t0="$start" -v ts="$sent" \
        -v td="$done_ms" -v c0="$cpu0" -v c1="$cpu1" -v p="$peak" 'BEGIN {
        printf "result: server=%s set=%s workers=%d rows=%d send_s=%.2f queryable_s=%.2f lag_ms=%d rows_per_s=%d cpu_us_per_row=%.2f peak_rss_mib=%d",
            s, set, w, r, (ts - t0) / 1000, (td - t0) / 1000, td - ts, r / ((td - t0) / 1000),
            (c1 - c0) * 1e6 / r, p / 1024 }'
}

run_sundial() { # set workers
    local root=$WORK/sundial
    bench/peers/sundial.sh start "$root" >/dev/null
    load_once sundial "$1" "$2" 127.0.0.1:29000 127.0.0.1:29009 "$(bench/peers/sundial.sh pid "$root")"
    bench/peers/sundial.sh stop "$root"
    echo " disk_mib=$(( $(du -sb "$root/data" | cut -f1) / 1048576 ))"
}

run_questdb() { # set workers
    local root=$WORK/questdb-root
    rm -rf "$root"
    bench/peers/questdb.sh start "$root" >/dev/null
    load_once questdb "$1" "$2" 127.0.0.1:$QDB_HTTP_PORT 127.0.0.1:$QDB_ILP_PORT \
        "$(bench/peers/questdb.sh status "$root")"
    bench/peers/questdb.sh stop "$root"
    echo " disk_mib=$(( $(bench/peers/questdb.sh disk "$root" | cut -d= -f2) / 1048576 ))"
}

table() {
    awk '
        /^result: / {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            k = f["set"] " " f["workers"]
            if (!(k in seen)) { seen[k] = 1; order[++n] = k }
            rate[f["server"], k] = f["rows_per_s"]; cpu[f["server"], k] = f["cpu_us_per_row"]
            lag[f["server"], k] = f["lag_ms"]; rss[f["server"], k] = f["peak_rss_mib"]
            disk[f["server"], k] = f["disk_mib"]
        }
        END {
            printf "%-10s %8s %14s %14s %7s %12s %12s %10s %10s %9s %9s\n", "set", "workers", \
                "sundial_rows/s", "questdb_rows/s", "ratio", "sundial_us/row", "questdb_us/row", \
                "s_lag_ms", "q_lag_ms", "s_rss_mib", "q_rss_mib"
            for (i = 1; i <= n; i++) {
                k = order[i]; split(k, p, " ")
                s = rate["sundial", k]; q = rate["questdb", k]
                printf "%-10s %8s %14s %14s %7s %12s %12s %10s %10s %9s %9s\n", p[1], p[2], s, q, \
                    (s > 0 && q > 0) ? sprintf("%.2f", s / q) : "-", cpu["sundial", k], \
                    cpu["questdb", k], lag["sundial", k], lag["questdb", k], rss["sundial", k], \
                    rss["questdb", k]
            }
        }'
}

{
    echo "# bench/ingest.sh $(date -u +%FT%TZ): tsbs_load_questdb --batch-size=10000, workers: $WORKERS, dedup: $DEDUP"
    for set in $SETS; do
        for workers in $WORKERS; do
            for server in $SERVERS; do
                "run_$server" "$set" "$workers"
            done
        done
    done
} | tee "$OUT.raw"
table <"$OUT.raw" | tee "$OUT"
cat "$OUT.raw" >>"$OUT"
rm "$OUT.raw"
# A chart of the results next to them (bench/chart.py); a failure there loses no figures.
python3 bench/chart.py "$OUT" || echo "no chart for $OUT" >&2
echo "results in $OUT"

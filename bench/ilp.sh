#!/usr/bin/env bash
# ILP ingestion, Sundial and QuestDB side by side: the same TSBS files, the same loader
# (`sundial-bench load`), the same workers and batch size, one server at a time on this machine.
#
#   bench/ilp.sh                      both TSBS files, over TCP and HTTP, 2 workers
#   WORKERS=4 PROTOCOLS=tcp bench/ilp.sh
#
# Prints one `result:` line per run (rows/s, time until queryable, server CPU seconds, peak RSS)
# plus the bytes on disk after a clean stop, then a table of Sundial / QuestDB ratios. Figures
# also go to bench/results/ilp-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS=${WORKERS:-2}
BATCH_LINES=${BATCH_LINES:-10000}
PROTOCOLS=${PROTOCOLS:-"tcp http"}
TSBS=${TSBS:-../shared/tsbs}
FILES=${FILES:-"$TSBS/devops-cpu-s100-1d.ilp.zst $TSBS/iot-s100-3d.ilp.zst"}
SERVERS=${SERVERS:-"sundial questdb"}
WORK=${WORK:-$(mktemp -d /tmp/sundial-ilp-bench.XXXXXX)}
mkdir -p bench/results
OUT=bench/results/ilp-$(date +%Y%m%d-%H%M%S).txt

cargo build --release -p sundial-server -p sundial-bench
bench/peers/questdb.sh install >/dev/null

SUNDIAL_HTTP=127.0.0.1:29000
SUNDIAL_ILP=127.0.0.1:29009
export QDB_HTTP_PORT=19000 QDB_ILP_PORT=19009 QDB_PG_PORT=18812

# Allocated bytes under a directory.
disk_bytes() { du -s --block-size=1 "$1" | cut -f1; }

run_sundial() { # file protocol
    local root=$WORK/sundial
    bench/peers/sundial.sh start "$root"
    target/release/sundial-bench load --file "$1" --protocol "$2" --workers "$WORKERS" \
        --batch-lines "$BATCH_LINES" --ilp-addr $SUNDIAL_ILP --http-addr $SUNDIAL_HTTP \
        --server-pid "$(bench/peers/sundial.sh pid "$root")" --label sundial | tr -d '\n'
    bench/peers/sundial.sh stop "$root"
    echo " disk_mib_stopped=$(( $(disk_bytes "$root/data") / 1048576 ))"
}

run_questdb() { # file protocol
    local root=$WORK/questdb-root
    rm -rf "$root"
    bench/peers/questdb.sh start "$root" >/dev/null
    local pid
    pid=$(cat "$root/questdb.pid")
    target/release/sundial-bench load --file "$1" --protocol "$2" --workers "$WORKERS" \
        --batch-lines "$BATCH_LINES" --ilp-addr 127.0.0.1:$QDB_ILP_PORT \
        --http-addr 127.0.0.1:$QDB_HTTP_PORT --server-pid "$pid" --label questdb | tr -d '\n'
    bench/peers/questdb.sh stop "$root"
    echo " disk_mib_stopped=$(( $(disk_bytes "$root/db") / 1048576 ))"
}

{
    echo "# bench/ilp.sh on $(date -u +%FT%TZ), $(nproc) cores; WORKERS=$WORKERS BATCH_LINES=$BATCH_LINES"
    for file in $FILES; do
        for protocol in $PROTOCOLS; do
            for server in $SERVERS; do
                "run_$server" "$file" "$protocol"
            done
        done
    done
} | tee "$OUT"

# Ratios: Sundial over QuestDB for rows/s; QuestDB over Sundial for CPU per row.
awk '
/^result:/ {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    key = v["file"] " " v["protocol"]
    rate[key, v["label"]] = v["rows_per_s"]; cpu[key, v["label"]] = v["cpu_us_per_row"]
    q[key, v["label"]] = v["queryable_s"]; keys[key] = 1
}
END {
    printf "\n%-32s %-5s %14s %14s %8s %16s %16s\n", "file", "proto", "sundial rows/s", "questdb rows/s", "ratio", "cpu us/row S:Q", "queryable s S:Q"
    for (k in keys) {
        split(k, p, " ")
        s = rate[k, "sundial"]; qd = rate[k, "questdb"]
        printf "%-32s %-5s %14s %14s %8.2f %16s %16s\n", p[1], p[2], s, qd, (qd > 0 ? s / qd : 0), cpu[k, "sundial"] ":" cpu[k, "questdb"], q[k, "sundial"] ":" q[k, "questdb"]
    }
}' "$OUT" | tee -a "$OUT"
# A chart of the results next to them (bench/chart.py); a failure there loses no figures.
python3 bench/chart.py "$OUT" || echo "no chart for $OUT" >&2
echo "figures in $OUT"

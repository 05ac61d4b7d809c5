#!/usr/bin/env bash
# TSBS's devops queries, Sundial and QuestDB side by side: the same TSBS-generated data
# (devops-cpu-s100-1d, sent over ILP/TCP) and the same `.questdb.sql` query files, run with
# `sundial-bench tsbs-queries` over HTTP /exec (as TSBS's questdb runner does), one server at a
# time on this machine.
#
#   bench/tsbs.sh
#   WORKERS=2 PROTOCOLS="http pg" bench/tsbs.sh
#   INDEX= bench/tsbs.sh          # without the symbol index on hostname
#
# Prints every `result:` line, then a table per protocol: each query type's median and p99 (ms)
# on both servers and Sundial's speed-up (QuestDB's median / Sundial's). Everything also goes to
# bench/results/tsbs-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

TSBS_DIR=${TSBS_DIR:-../shared/tsbs}
DATA=${DATA:-$TSBS_DIR/devops-cpu-s100-1d.ilp.zst}
WORKERS=${WORKERS:-1}
ROUNDS=${ROUNDS:-1}
PROTOCOLS=${PROTOCOLS:-http}
# Both servers get this symbol index after loading (QuestDB users index the filtered symbol).
INDEX=${INDEX-hostname}
SERVERS=${SERVERS:-"sundial questdb"}
WORK=${WORK:-$(mktemp -d /tmp/sundial-tsbs-bench.XXXXXX)}
mkdir -p bench/results
OUT=bench/results/tsbs-$(date +%Y%m%d-%H%M%S).txt
FILES=$(ls "$TSBS_DIR"/queries/devops-*.questdb.sql | paste -sd, -)

cargo build --release -p sundial-server -p sundial-bench
bench/peers/questdb.sh install >/dev/null
export QDB_HTTP_PORT=19000 QDB_ILP_PORT=19009 QDB_PG_PORT=18812

run_suite() { # label pg http ilp
    target/release/sundial-bench load --file "$DATA" --ilp-addr "$4" \
        --http-addr "$3"
    if [ -n "$INDEX" ]; then
        curl -sfG "http://$3/exec" \
            --data-urlencode "query=ALTER TABLE cpu ALTER COLUMN $INDEX ADD INDEX" >/dev/null
    fi
    for protocol in $PROTOCOLS; do
        target/release/sundial-bench tsbs-queries --label "$1" --protocol "$protocol" \
            --pg-addr "$2" --http-addr "$3" --workers "$WORKERS" --rounds "$ROUNDS" \
            --files "$FILES" || echo "result: label=$1 protocol=$protocol failed (see above)"
    done
}

run_sundial() {
    bench/peers/sundial.sh start "$WORK/sundial"
    run_suite sundial 127.0.0.1:28812 127.0.0.1:29000 127.0.0.1:29009
    bench/peers/sundial.sh stop "$WORK/sundial"
}

run_questdb() {
    local root=$WORK/questdb-root
    rm -rf "$root"
    bench/peers/questdb.sh start "$root" >/dev/null
    run_suite questdb 127.0.0.1:$QDB_PG_PORT 127.0.0.1:$QDB_HTTP_PORT 127.0.0.1:$QDB_ILP_PORT
    bench/peers/questdb.sh stop "$root"
}

# Joins the two servers' `result:` lines into one table per protocol.
ratios() {
    awk '
        /^result: / && / type=/ {
            delete f
            for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
            key = f["protocol"] SUBSEP f["type"]
            median[f["label"], key] = f["median_ms"]; p99[f["label"], key] = f["p99_ms"]
            failed[f["label"], key] = f["failed"]
            if (!(key in seen)) { seen[key] = 1; order[++n] = key }
        }
        END {
            printf "%-8s %-24s %12s %12s %12s %12s %8s\n", "protocol", "type", \
                "sundial_p50", "questdb_p50", "sundial_p99", "questdb_p99", "speedup"
            for (i = 1; i <= n; i++) {
                split(order[i], k, SUBSEP)
                s = median["sundial", order[i]]; q = median["questdb", order[i]]
                ratio = (s > 0 && q > 0) ? sprintf("%.2fx", q / s) : "-"
                if (failed["sundial", order[i]] > 0 || failed["questdb", order[i]] > 0) ratio = ratio " (failures)"
                printf "%-8s %-24s %12s %12s %12s %12s %8s\n", k[1], k[2], s, q, \
                    p99["sundial", order[i]], p99["questdb", order[i]], ratio
            }
        }'
}

{
    echo "# bench/tsbs.sh $(date -u +%FT%TZ): data=$(basename "$DATA") workers=$WORKERS rounds=$ROUNDS index=${INDEX:-none}"
    for server in $SERVERS; do
        "run_$server"
    done
} | tee "$OUT.raw"
ratios <"$OUT.raw" | tee "$OUT"
cat "$OUT.raw" >>"$OUT"
rm "$OUT.raw"
# A chart of the results next to them (bench/chart.py); a failure there loses no figures.
python3 bench/chart.py "$OUT" || echo "no chart for $OUT" >&2
echo "results in $OUT"

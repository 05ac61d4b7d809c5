#!/usr/bin/env bash
# Zone maps, measured: the same range filters on a column that follows the row order (`id`,
# where zones let the scan skip all but a few runs of 65,536 rows) and on one that does not
# (`r`, a permutation of the same values: every zone holds every range, so all rows are read).
# 10M rows in one partition, Sundial alone, over PostgreSQL with psql; medians of RUNS.
#
#   bench/zones.sh
#   ROWS=20000000 RUNS=21 bench/zones.sh
#
# Figures go to bench/results/zones-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-10000000}
RUNS=${RUNS:-11}
WORK=${WORK:-$(mktemp -d /tmp/sundial-zones-bench.XXXXXX)}
mkdir -p bench/results
OUT=bench/results/zones-$(date +%Y%m%d-%H%M%S).txt
cargo build --release -p sundial-server
export PGPASSWORD=quest
PSQL=(psql -h 127.0.0.1 -p 28812 -U admin -d qdb -X -q -v ON_ERROR_STOP=1)

bench/peers/sundial.sh start "$WORK/sundial" >/dev/null
trap 'bench/peers/sundial.sh stop "$WORK/sundial" >/dev/null' EXIT
"${PSQL[@]}" -c "CREATE TABLE z (ts TIMESTAMP, id LONG, r LONG, x DOUBLE) TIMESTAMP(ts) PARTITION BY DAY"
"${PSQL[@]}" -c "INSERT INTO z SELECT to_timestamp_nanos(1704067200000000000 + value * 1000000), \
    value, (value * 7919) % $ROWS, value / 1000.0 FROM generate_series(0, $ROWS - 1)"

median_ms() { # sql
    for _ in $(seq "$RUNS"); do
        "${PSQL[@]}" -c '\timing on' -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
    done | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

{
    echo "# bench/zones.sh $(date -u +%FT%TZ): $ROWS rows, runs=$RUNS"
    printf "%-44s %12s %12s %8s\n" "filter" "id_ms" "r_ms" "r/id"
    for filter in "\$c BETWEEN 1000000 AND 1001000" "\$c > $ROWS - 50000" \
        "\$c < 70000 OR \$c >= $ROWS - 1000" "\$c IN (5, 5000000)"; do
        a=$(median_ms "SELECT count(*), sum(x) FROM z WHERE ${filter//\$c/id}")
        b=$(median_ms "SELECT count(*), sum(x) FROM z WHERE ${filter//\$c/r}")
        printf "%-44s %12s %12s %8.1f\n" "$filter" "$a" "$b" "$(echo "$b / $a" | bc -l)"
    done
    echo "# plan: $("${PSQL[@]}" -At -c "EXPLAIN SELECT count(*) FROM z WHERE id > $ROWS - 50000" | grep -o 'SundialScanExec[^,]*, frames=[^,]*, rows=[^,]*, zones_skipped_rows=[0-9]*' | head -1)"
} | tee "$OUT"
echo "results in $OUT"

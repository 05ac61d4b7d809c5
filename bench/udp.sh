#!/usr/bin/env bash
# UDP overload test, Sundial and QuestDB side by side (after QuestDB's published test): the same
# sender blasts ILP over loopback UDP at rising rates; reports the share of rows that arrived.
#
#   bench/udp.sh                       2M lines at 100k, 250k, 500k, 1M lines/s and unpaced
#   LINES=5000000 RATES=500000,0 bench/udp.sh
set -euo pipefail
cd "$(dirname "$0")/.."

LINES=${LINES:-2000000}
RATES=${RATES:-100000,250000,500000,1000000,0}
RCVBUF=${RCVBUF:-8388608}
WORK=${WORK:-$(mktemp -d /tmp/sundial-udp-bench.XXXXXX)}
mkdir -p bench/results
OUT=bench/results/udp-$(date +%Y%m%d-%H%M%S).txt

cargo build --release -p sundial-server -p sundial-bench
bench/peers/questdb.sh install >/dev/null
export QDB_HTTP_PORT=19000 QDB_ILP_PORT=19009 QDB_PG_PORT=18812 QDB_UDP=1 QDB_UDP_PORT=19009
export QDB_UDP_RCVBUF=$RCVBUF

{
    echo "# bench/udp.sh on $(date -u +%FT%TZ), $(nproc) cores; LINES=$LINES RCVBUF=$RCVBUF"
    bench/peers/sundial.sh start "$WORK/sundial" --ilp-udp-addr 127.0.0.1:29009 \
        --ilp-udp-recv-buffer-bytes "$RCVBUF"
    target/release/sundial-bench udp --udp-addr 127.0.0.1:29009 --http-addr 127.0.0.1:29000 \
        --lines "$LINES" --rates "$RATES" --label sundial
    bench/peers/sundial.sh stop "$WORK/sundial"

    bench/peers/questdb.sh start "$WORK/questdb-root" >/dev/null
    target/release/sundial-bench udp --udp-addr 127.0.0.1:$QDB_UDP_PORT \
        --http-addr 127.0.0.1:$QDB_HTTP_PORT --lines "$LINES" --rates "$RATES" --label questdb
    bench/peers/questdb.sh stop "$WORK/questdb-root"
} | tee "$OUT"
# A chart of the results next to them (bench/chart.py); a failure there loses no figures.
python3 bench/chart.py "$OUT" || echo "no chart for $OUT" >&2
echo "figures in $OUT"

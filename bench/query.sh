#!/usr/bin/env bash
# Short queries, Sundial and QuestDB side by side: the same 100k-row table (sent over ILP), the
# same prepared query over PostgreSQL's protocol and the same query over HTTP /exec, with 1, 16
# and 100 clients, one server at a time on this machine.
#
#   bench/query.sh
#   CLIENTS=1,16 DURATION_S=5 PROTOCOLS=pg bench/query.sh
#
# Prints one `result:` line per run (queries per second, p50/p99/max latency in µs). Figures also
# go to bench/results/query-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-1,16,100}
DURATION_S=${DURATION_S:-10}
ROWS=${ROWS:-100000}
PROTOCOLS=${PROTOCOLS:-"pg http"}
QUERY=${QUERY:-'SELECT timestamp, sym, price FROM qps WHERE id = $1'}
SERVERS=${SERVERS:-"sundial questdb"}
WORK=${WORK:-$(mktemp -d /tmp/sundial-query-bench.XXXXXX)}
mkdir -p bench/results
OUT=bench/results/query-$(date +%Y%m%d-%H%M%S).txt

cargo build --release -p sundial-server -p sundial-bench
bench/peers/questdb.sh install >/dev/null
export QDB_HTTP_PORT=19000 QDB_ILP_PORT=19009 QDB_PG_PORT=18812
# QuestDB serves 64 PostgreSQL and HTTP connections by default; the 100-client runs need more.
export QDB_CONF_EXTRA=$'pg.net.connection.limit=256\nhttp.net.connection.limit=256'

run_queries() { # label pg http ilp
    local setup=--setup
    for protocol in $PROTOCOLS; do
        target/release/sundial-bench query $setup --protocol "$protocol" --label "$1" \
            --pg-addr "$2" --http-addr "$3" --ilp-addr "$4" --rows "$ROWS" \
            --clients "$CLIENTS" --duration-s "$DURATION_S" --query "$QUERY" ||
            echo "result: label=$1 protocol=$protocol failed (see above)"
        setup=
    done
}

run_sundial() {
    bench/peers/sundial.sh start "$WORK/sundial"
    run_queries sundial 127.0.0.1:28812 127.0.0.1:29000 127.0.0.1:29009
    bench/peers/sundial.sh stop "$WORK/sundial"
}

run_questdb() {
    local root=$WORK/questdb-root
    rm -rf "$root"
    bench/peers/questdb.sh start "$root" >/dev/null
    run_queries questdb 127.0.0.1:$QDB_PG_PORT 127.0.0.1:$QDB_HTTP_PORT 127.0.0.1:$QDB_ILP_PORT
    bench/peers/questdb.sh stop "$root"
}

{
    echo "# bench/query.sh $(date -u +%FT%TZ): rows=$ROWS clients=$CLIENTS duration_s=$DURATION_S"
    echo "# query: $QUERY"
    for server in $SERVERS; do
        "run_$server"
    done
} | tee "$OUT"
# A chart of the results next to them (bench/chart.py); a failure there loses no figures.
python3 bench/chart.py "$OUT" || echo "no chart for $OUT" >&2
echo "results in $OUT"

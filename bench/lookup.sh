#!/usr/bin/env bash
# Point lookups by key, Sundial and PostgreSQL 15 side by side, measured by pgbench itself:
# `pgbench -M prepared` running `SELECT * FROM kv WHERE id = :id` with `\set id random(1, rows)`
# against the same table on each server (PostgreSQL with a primary key on id), one server at a
# time, for each table size, row width, client count and transport.
#
#   bench/lookup.sh
#   ROWS="1000000 50000000" CLIENTS=1,16,64,256 WIDTHS="narrow wide" TRANSPORTS="plain tls" bench/lookup.sh
#   SERVERS=sundial CLIENTS=16 DURATION_S=5 bench/lookup.sh
#   SHAPES="point pipeline in10 range" TRANSPORTS=plain WIDTHS=wide bench/lookup.sh
#
# SHAPES (default: point) are the statements each transaction sends:
#   point     SELECT * FROM kv WHERE id = :id
#   pipeline  ten of those in one pipeline (\startpipeline .. \endpipeline): one round trip
#   in10      one multi-get, SELECT * FROM kv WHERE id IN (ten random ids)
#   range     a key within a time range: id = :id AND ts >= '2024-01-02' AND ts < '2024-01-09'
#             (about 7 days of rows: a lookup outside it finds nothing)
#   paced     point at a fixed offered rate, PACED_QPS (default 20000) over all clients
#             (pgbench -R): latency at the same load on both servers, where the other shapes
#             measure it at each server's own saturation
#   any10     one multi-get by an array parameter, SELECT * FROM kv WHERE id = ANY($1) with
#             ten random ids as a binary bigint[], sent by bench/multiget (pgx; pgbench has no
#             array parameters)
# qps counts lookups (keys asked for) per second: ten per transaction for pipeline, in10 and
# any10.
#
# Tables: wide is the 7 columns of issue 39 (id LONG, a LONG, b LONG, s VARCHAR, x DOUBLE,
# t VARCHAR, ts TIMESTAMP; PostgreSQL: bigint, text, double precision, timestamp), narrow is
# (id, v, ts). Rows have ids 1..rows, one second apart, so Sundial's daily partitions number
# rows / 86,400 (12 for 1M, 579 for 50M): a lookup must not cost more with more partitions.
#
# Prints one line per step and writes them to bench/results/lookup-<time>.txt:
#   result: server=.. rows=.. width=.. transport=.. clients=.. [shape=..] qps=.. p50_us=.. p99_us=.. max_us=..
#   pair: rows=.. width=.. transport=.. clients=.. [shape=..] sundial_qps=.. postgres_qps=.. ratio=..
# (ratio: Sundial's QPS over PostgreSQL's; latencies, of whole transactions, from pgbench's
# per-transaction log; shape is shown when it is not point).
# Chart: python3 bench/chart.py --lookup -o bench/charts/lookup.svg bench/results/lookup-<time>.txt
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-1000000}
CLIENTS=${CLIENTS:-1,16,64,256}
WIDTHS=${WIDTHS:-"narrow wide"}
TRANSPORTS=${TRANSPORTS:-"plain tls"}
DURATION_S=${DURATION_S:-8}
SERVERS=${SERVERS:-"sundial postgres"}
SHAPES=${SHAPES:-point}
PACED_QPS=${PACED_QPS:-20000}
WORK=${WORK:-$(mktemp -d /tmp/sundial-lookup-bench.XXXXXX)}
# The rows each INSERT ... SELECT loads: a bounded statement, however many rows in all.
LOAD_ROWS=${LOAD_ROWS:-5000000}
# The postgres user (the cluster's owner when this runs as root) works under WORK too.
chmod 755 "$WORK"
mkdir -p bench/results
OUT=${OUT:-bench/results/lookup-$(date +%Y%m%d-%H%M%S).txt}
export PG_PORT=${PG_PORT:-15432} PG_TLS=1
SUNDIAL_PG_ADDR=${SUNDIAL_PG_ADDR:-127.0.0.1:28812}
export SUNDIAL_PG_ADDR

cargo build --release -p sundial-server
bench/peers/postgres.sh install
if [[ " $SHAPES " == *" any10 "* ]]; then
    (cd bench/multiget && go build -mod=readonly -buildvcs=false -o "$WORK/multiget" .)
fi

die() { echo "lookup.sh: $*" >&2; exit 1; }

# Whatever server is running when the script ends (a failed step included) is stopped.
RUNNING=
cleanup() {
    case $RUNNING in
        sundial) bench/peers/sundial.sh stop "$WORK/sundial" || true ;;
        postgres) bench/peers/postgres.sh stop "$WORK/postgres" || true ;;
    esac
}
trap cleanup EXIT

# Both servers serve TLS with a self-signed certificate made here.
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=127.0.0.1 \
    -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null

columns() { # server width -> the CREATE TABLE's column list
    case $1/$2 in
        sundial/wide) echo "id LONG, a LONG, b LONG, s VARCHAR, x DOUBLE, t VARCHAR, ts TIMESTAMP" ;;
        sundial/narrow) echo "id LONG, v LONG, ts TIMESTAMP" ;;
        postgres/wide) echo "id bigint, a bigint, b bigint, s text, x double precision, t text, ts timestamp" ;;
        postgres/narrow) echo "id bigint, v bigint, ts timestamp" ;;
    esac
}

values() { # server width first last -> an INSERT's SELECT of ids first..last
    local n=g select
    case $2 in
        wide) select="$n, $n * 7, $n % 1000, 'name_' || $n, $n * 0.25, 'text of row ' || $n || ' and some more words', " ;;
        narrow) select="$n, $n * 7, " ;;
    esac
    case $1 in
        sundial) echo "SELECT ${select}to_timestamp_seconds(1704067200 + g) FROM generate_series($3, $4) AS s(g)" ;;
        postgres) echo "SELECT ${select}timestamp '2024-01-01' + g * interval '1 second' FROM generate_series($3, $4) g" ;;
    esac
}

psql_to() { # server sql
    local port=${SUNDIAL_PG_ADDR##*:}
    [[ $1 == postgres ]] && port=$PG_PORT
    PGOPTIONS="$([[ $1 == postgres ]] && echo "-c client_min_messages=warning")" PGPASSWORD=quest \
        psql -h 127.0.0.1 -p "$port" -U admin -d qdb -qAtX -v ON_ERROR_STOP=1 -c "$2"
}

load() { # server rows width
    local server=$1 rows=$2 width=$3
    psql_to "$server" "DROP TABLE IF EXISTS kv"
    case $server in
        sundial) psql_to sundial "CREATE TABLE kv ($(columns sundial "$width")) TIMESTAMP(ts) PARTITION BY DAY" ;;
        postgres) psql_to postgres "CREATE TABLE kv ($(columns postgres "$width"))" ;;
    esac
    local first=1 last
    while (( first <= rows )); do
        last=$(( first + LOAD_ROWS - 1 ))
        (( last <= rows )) || last=$rows
        psql_to "$server" "INSERT INTO kv $(values "$server" "$width" "$first" "$last")"
        first=$(( last + 1 ))
    done
    if [[ $server == postgres ]]; then
        psql_to postgres "ALTER TABLE kv ADD PRIMARY KEY (id)"
        psql_to postgres "VACUUM ANALYZE kv"
    fi
    local count
    count=$(psql_to "$server" "SELECT count(*) FROM kv")
    [[ $count == "$rows" ]] || die "$server holds $count rows of kv, not $rows"
}

script() { # shape rows -> pgbench's script of one transaction; LOOKUPS: keys it asks for
    local shape=$1 rows=$2 i
    case $shape in
        point)
            LOOKUPS=1
            printf '\\set id random(1, %d)\nSELECT * FROM kv WHERE id = :id;\n' "$rows" ;;
        pipeline)
            LOOKUPS=10
            for i in $(seq 10); do printf '\\set id%d random(1, %d)\n' "$i" "$rows"; done
            echo '\startpipeline'
            for i in $(seq 10); do printf 'SELECT * FROM kv WHERE id = :id%d;\n' "$i"; done
            echo '\endpipeline' ;;
        in10)
            LOOKUPS=10
            for i in $(seq 10); do printf '\\set id%d random(1, %d)\n' "$i" "$rows"; done
            printf 'SELECT * FROM kv WHERE id IN (%s);\n' "$(seq -s ', ' -f ':id%g' 10)" ;;
        range)
            LOOKUPS=1
            printf '\\set id random(1, %d)\n' "$rows"
            echo "SELECT * FROM kv WHERE id = :id AND ts >= '2024-01-02' AND ts < '2024-01-09';" ;;
        paced) script point "$rows" ;;
        *) die "unknown shape $shape" ;;
    esac
}

run_steps() { # server rows width
    local server=$1 rows=$2 width=$3
    for shape in $SHAPES; do
        if [[ $shape == any10 ]]; then
            run_multiget "$server" "$rows" "$width"
            continue
        fi
        script "$shape" "$rows" >"$WORK/lookup.sql"
        run_shape "$server" "$rows" "$width" "$shape" "$LOOKUPS"
    done
}

run_multiget() { # server rows width: the any10 shape, by bench/multiget
    local server=$1 rows=$2 width=$3 port=${SUNDIAL_PG_ADDR##*:}
    [[ $server == postgres ]] && port=$PG_PORT
    for transport in $TRANSPORTS; do
        local sslmode=disable
        [[ $transport == tls ]] && sslmode=require
        "$WORK/multiget" -url "postgres://admin:quest@127.0.0.1:$port/qdb?sslmode=$sslmode" \
            -rows "$rows" -keys 10 -clients "$CLIENTS" -seconds "$DURATION_S" |
            while read -r line; do
                local c=${line#clients=}
                c=${c%% *}
                local rest=${line#clients=$c }
                echo "result: server=$server rows=$rows width=$width transport=$transport clients=$c shape=any10 ${rest% rows_per=*}"
            done
    done
}

run_shape() { # server rows width shape lookups-per-transaction
    local server=$1 rows=$2 width=$3 shape=$4 lookups=$5 port=${SUNDIAL_PG_ADDR##*:} tag=
    local pace=()
    [[ $server == postgres ]] && port=$PG_PORT
    [[ $shape == point ]] || tag=" shape=$shape"
    [[ $shape == paced ]] && pace=(-R "$PACED_QPS")
    for transport in $TRANSPORTS; do
        local sslmode=disable
        [[ $transport == tls ]] && sslmode=require
        for clients in ${CLIENTS//,/ }; do
            local threads=2 logs=$WORK/log-$server-$rows-$width-$transport-$clients
            (( clients > 1 )) || threads=1
            rm -rf "$logs" && mkdir -p "$logs"
            # A short warm-up (connections, prepared statements, caches), then the step.
            PGSSLMODE=$sslmode PGPASSWORD=quest pgbench -n -M prepared -h 127.0.0.1 -p "$port" \
                -U admin -c "$clients" -j "$threads" -T 1 -f "$WORK/lookup.sql" qdb >/dev/null 2>&1 || true
            local out
            out=$(cd "$logs" && PGSSLMODE=$sslmode PGPASSWORD=quest pgbench -n -M prepared \
                -h 127.0.0.1 -p "$port" -U admin -c "$clients" -j "$threads" -T "$DURATION_S" \
                "${pace[@]}" -l -f "$WORK/lookup.sql" qdb 2>&1) || {
                echo "result: server=$server rows=$rows width=$width transport=$transport clients=$clients$tag failed"
                echo "$out" | tail -5 >&2
                continue
            }
            local qps
            qps=$(echo "$out" | awk -v n="$lookups" '/^tps = / { printf "%.0f", $3 * n }')
            # pgbench's log: client, transaction, latency in µs, script, epoch s, µs.
            cat "$logs"/pgbench_log.* | awk '{ print $3 }' | sort -n | awk -v s="$server" -v r="$rows" \
                -v w="$width" -v t="$transport" -v c="$clients" -v q="$qps" -v g="$tag" '
                { v[NR] = $1 }
                END {
                    if (NR == 0) { print "result: server=" s " failed: empty log"; exit }
                    printf "result: server=%s rows=%d width=%s transport=%s clients=%d%s qps=%d p50_us=%d p99_us=%d max_us=%d\n",
                        s, r, w, t, c, g, q, v[int(NR * 0.50) + 1], v[int(NR * 0.99) + 1], v[NR]
                }'
            rm -rf "$logs"
        done
    done
}

run_server() { # server
    local server=$1
    RUNNING=$server
    case $server in
        sundial) bench/peers/sundial.sh start "$WORK/sundial" --tls-cert "$WORK/tls.crt" --tls-key "$WORK/tls.key" ;;
        postgres) bench/peers/postgres.sh start "$WORK/postgres" ;;
        *) die "unknown server $server" ;;
    esac
    for rows in $ROWS; do
        for width in $WIDTHS; do
            load "$server" "$rows" "$width"
            run_steps "$server" "$rows" "$width"
        done
    done
    case $server in
        sundial) bench/peers/sundial.sh stop "$WORK/sundial" ;;
        postgres) bench/peers/postgres.sh stop "$WORK/postgres" ;;
    esac
    RUNNING=
}

{
    echo "# bench/lookup.sh $(date -u +%FT%TZ): rows=$ROWS widths=$WIDTHS clients=$CLIENTS transports=$TRANSPORTS duration_s=$DURATION_S, pgbench -M prepared, one server at a time"
    echo "# machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
    for server in $SERVERS; do
        run_server "$server"
    done
} | tee "$OUT.partial"
awk '
    /^result: / && !/failed/ {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        key = f["rows"] " " f["width"] " " f["transport"] " " f["clients"] " " ("shape" in f ? f["shape"] : "point")
        q[f["server"], key] = f["qps"]; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    }
    END {
        for (i = 1; i <= n; i++) {
            if (!((("sundial", order[i]) in q) && (("postgres", order[i]) in q))) continue
            split(order[i], k, " ")
            s = q["sundial", order[i]]; p = q["postgres", order[i]]
            printf "pair: rows=%s width=%s transport=%s clients=%s%s sundial_qps=%s postgres_qps=%s ratio=%.2f\n",
                k[1], k[2], k[3], k[4], (k[5] == "point" ? "" : " shape=" k[5]), s, p, (p > 0 ? s / p : 0)
        }
    }' "$OUT.partial" | tee -a "$OUT.partial"
mv "$OUT.partial" "$OUT"
echo "results: $OUT"

# Sourced by bench/analytics.sh and bench/ingest.sh: TSBS's devops (200 hosts x 2 days) and iot
# (500 trucks x 7 days) data, generated once with tsbs_generate_data into DATA_DIR, and the
# helpers both scripts use; `tsbs_large` generates IoTDB's published devops set (1000 hosts x
# 3 days, 25.92M rows, about 9 GB) on first use, `tsbs_large_iot` iot at 1000 trucks. Needs TSBS_BIN and DATA_DIR.
# With TSBS_DATA_LAZY=1 nothing is generated on sourcing; `tsbs_cpu SCALE DAYS` generates (once)
# and prints the path of a devops cpu-only set of SCALE hosts over DAYS days (bench/matviews.sh).
mkdir -p "$DATA_DIR"

tsbs_generate() { # file flags...
    local file=$DATA_DIR/$1
    shift
    [[ -s $file ]] || "$TSBS_BIN/tsbs_generate_data" "$@" --seed=123 --format=questdb \
        --timestamp-start=2016-01-01T00:00:00Z >"$file"
}
if [[ ${TSBS_DATA_LAZY:-0} != 1 ]]; then
    tsbs_generate cpu-s200-2d.ilp --use-case=cpu-only --scale=200 \
        --timestamp-end=2016-01-03T00:00:00Z --log-interval=10s
    tsbs_generate iot-s500-7d.ilp --use-case=iot --scale=500 \
        --timestamp-end=2016-01-08T00:00:00Z --log-interval=60s
fi

# devops cpu-only, SCALE hosts x DAYS days from 2016-01-01 at 10 s: cpu-s<SCALE>-<DAYS>d.ilp
# (the names above follow the same pattern; 200 x 3 days is 5,184,000 rows, about 1.8 GB).
tsbs_cpu() { # scale days
    local file=cpu-s$1-$2d.ilp
    tsbs_generate "$file" --use-case=cpu-only --scale="$1" \
        --timestamp-end="$(date -u -d "2016-01-01 00:00:00 UTC + $2 days" +%FT%TZ)" \
        --log-interval=10s
    echo "$DATA_DIR/$file"
}

tsbs_large() {
    tsbs_generate cpu-s1000-3d.ilp --use-case=cpu-only --scale=1000 \
        --timestamp-end=2016-01-04T00:00:00Z --log-interval=10s
}
# The iot set at twice the trucks (1000 x 7 days, about 9M readings and as many diagnostics,
# 4.3 GB), bench/analytics.sh's larger scale with tsbs_large.
tsbs_large_iot() {
    tsbs_generate iot-s1000-7d.ilp --use-case=iot --scale=1000 \
        --timestamp-end=2016-01-08T00:00:00Z --log-interval=60s
}

# `SELECT count(*) FROM table` over a server's HTTP /exec; empty if it fails.
count() { # http table
    curl -sfG "http://$1/exec" --data-urlencode "query=SELECT count(*) FROM $2" 2>/dev/null |
        sed -n 's/.*"dataset":\[\[\([0-9]*\)\]\].*/\1/p'
}

#!/usr/bin/env bash
# PostgreSQL 15 as a benchmark peer: install (Debian's packages), start and stop one cluster on
# loopback, the counterpart of questdb.sh and sundial.sh for the scripts in bench/.
#
#   postgres.sh install          apt-get install postgresql-15 (and pgbench) if missing
#   postgres.sh start ROOT       initdb ROOT/data if empty (superuser admin, trust), start in
#                                background, wait until it accepts connections; database qdb
#   postgres.sh stop ROOT        fast shutdown, wait
#   postgres.sh pid ROOT         print the postmaster's PID
#
# Environment (defaults):
#   PG_PORT=15432  PG_BIN=/usr/lib/postgresql/15/bin
#   PG_TLS=0 (1: ssl=on with a self-signed certificate made in ROOT, so clients may choose TLS)
#   PG_CONF_EXTRA=  (extra postgresql.conf lines, newline separated, appended last)
# The cluster runs as the `postgres` user when this runs as root (PostgreSQL refuses root).
# Settings are Debian's defaults but for those a benchmark of reads needs: fsync off (loading
# is not measured), max_connections 300 (the 256-client step), shared_buffers 4GB (the tables
# fit), listen on 127.0.0.1 only.
set -euo pipefail
PG_PORT=${PG_PORT:-15432}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_TLS=${PG_TLS:-0}
PG_CONF_EXTRA=${PG_CONF_EXTRA:-}

die() { echo "postgres.sh: $*" >&2; exit 1; }

as_pg() { # command...: run as the postgres user when root
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

install() {
    [[ -x $PG_BIN/postgres && -x $(command -v pgbench || echo /nonexistent) ]] && return 0
    local sudo=
    [[ $(id -u) -eq 0 ]] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql-15 postgresql-client-15 >/dev/null
    # Debian's package starts a cluster of its own on 5432; the benchmark runs its own.
    $sudo pg_ctlcluster 15 main stop 2>/dev/null || true
}

start() { # root
    local root=$1
    install
    mkdir -p "$root"
    [[ $(id -u) -ne 0 ]] || chown postgres: "$root"
    as_pg test -w "$root" || die "the postgres user cannot write $root (are its parents traversable?)"
    if [[ ! -f $root/data/PG_VERSION ]]; then
        as_pg env LC_ALL=C.UTF-8 "$PG_BIN/initdb" -D "$root/data" -U admin -A trust -E UTF8 \
            --locale=C.UTF-8 --no-sync >"$root/initdb.log" 2>&1 || die "initdb failed: see $root/initdb.log"
        {
            echo "listen_addresses = '127.0.0.1'"
            echo "port = $PG_PORT"
            echo "unix_socket_directories = '$root'"
            echo "max_connections = 300"
            echo "shared_buffers = 4GB"
            echo "fsync = off"
            echo "synchronous_commit = off"
            echo "full_page_writes = off"
            echo "timezone = 'UTC'"
            if [[ $PG_TLS == 1 ]]; then
                echo "ssl = on"
                echo "ssl_cert_file = '$root/server.crt'"
                echo "ssl_key_file = '$root/server.key'"
            fi
            [[ -z $PG_CONF_EXTRA ]] || printf '%s\n' "$PG_CONF_EXTRA"
        } | as_pg tee -a "$root/data/postgresql.conf" >/dev/null
        # TLS connections from loopback are trusted as plain ones are.
        echo "hostssl all all 127.0.0.1/32 trust" | as_pg tee -a "$root/data/pg_hba.conf" >/dev/null
        if [[ $PG_TLS == 1 ]]; then
            as_pg openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=127.0.0.1 \
                -keyout "$root/server.key" -out "$root/server.crt" 2>/dev/null
            as_pg chmod 600 "$root/server.key"
        fi
    fi
    as_pg "$PG_BIN/pg_ctl" -D "$root/data" -l "$root/postgres.log" -w -t 60 start >/dev/null ||
        die "did not start: see $root/postgres.log"
    psql -h 127.0.0.1 -p "$PG_PORT" -U admin -d postgres -qAtc \
        "SELECT 1 FROM pg_database WHERE datname = 'qdb'" | grep -q 1 ||
        psql -h 127.0.0.1 -p "$PG_PORT" -U admin -d postgres -qc "CREATE DATABASE qdb" >/dev/null
}

stop() { # root
    [[ -f $1/data/postmaster.pid ]] || return 0
    as_pg "$PG_BIN/pg_ctl" -D "$1/data" -m fast -w -t 60 stop >/dev/null
}

case ${1:-} in
    install) install ;;
    start) [[ $# -eq 2 ]] || die "start ROOT"; start "$2" ;;
    stop) [[ $# -eq 2 ]] || die "stop ROOT"; stop "$2" ;;
    pid) [[ $# -eq 2 ]] || die "pid ROOT"; head -1 "$2/data/postmaster.pid" ;;
    *) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Sundial as a benchmark side: start and stop one fresh release server on loopback, the
# counterpart of questdb.sh for the scripts in bench/.
#
#   sundial.sh start ROOT [serve flags]   empty ROOT/data (kept with SUNDIAL_KEEP_DATA=1), start
#                                         in background, wait until serving
#   sundial.sh stop ROOT                  SIGTERM and wait for the process to exit
#   sundial.sh pid ROOT                   print the server's PID
#
# Environment (defaults):
#   SUNDIAL_HTTP_ADDR=127.0.0.1:29000  SUNDIAL_PG_ADDR=127.0.0.1:28812
#   SUNDIAL_ILP_ADDR=127.0.0.1:29009 (ILP over TCP)
#   SUNDIAL_START_TIMEOUT=30  SUNDIAL_STOP_TIMEOUT=60  (seconds)
#   SUNDIAL_AUTH=off: the peers' loaders send no credentials (QuestDB's open edition has none);
#   pass --auth required among the serve flags to measure with logins.
# The binary is target/release/sundial (build it first); its log is ROOT/sundial.log.
set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
BIN=$REPO_ROOT/target/release/sundial
SUNDIAL_HTTP_ADDR=${SUNDIAL_HTTP_ADDR:-127.0.0.1:29000}
SUNDIAL_PG_ADDR=${SUNDIAL_PG_ADDR:-127.0.0.1:28812}
SUNDIAL_ILP_ADDR=${SUNDIAL_ILP_ADDR:-127.0.0.1:29009}
SUNDIAL_START_TIMEOUT=${SUNDIAL_START_TIMEOUT:-30}
SUNDIAL_STOP_TIMEOUT=${SUNDIAL_STOP_TIMEOUT:-60}

die() { echo "sundial.sh: $*" >&2; exit 1; }

start() { # root [serve flags]
    local root=$1
    shift
    [[ -x $BIN ]] || die "$BIN missing: cargo build --release -p sundial-server"
    [[ -n ${SUNDIAL_KEEP_DATA:-} ]] || rm -rf "$root/data"
    mkdir -p "$root"
    SUNDIAL_AUTH=${SUNDIAL_AUTH:-off} "$BIN" serve --data-dir "$root/data" --http-addr "$SUNDIAL_HTTP_ADDR" \
        --pg-addr "$SUNDIAL_PG_ADDR" --ilp-tcp-addr "$SUNDIAL_ILP_ADDR" "$@" \
        >"$root/sundial.out" 2>"$root/sundial.log" &
    echo $! >"$root/sundial.pid"
    local waited=0
    until grep -q "sundial serving" "$root/sundial.log" 2>/dev/null; do
        kill -0 "$(cat "$root/sundial.pid")" 2>/dev/null ||
            die "the server exited; see $root/sundial.log"
        (( waited++ < SUNDIAL_START_TIMEOUT * 20 )) || die "not serving after ${SUNDIAL_START_TIMEOUT}s"
        sleep 0.05
    done
}

stop() { # root
    local pid
    pid=$(cat "$1/sundial.pid")
    kill -TERM "$pid" 2>/dev/null || return 0
    local waited=0
    while kill -0 "$pid" 2>/dev/null; do
        (( waited++ < SUNDIAL_STOP_TIMEOUT * 20 )) || die "PID $pid still running after ${SUNDIAL_STOP_TIMEOUT}s"
        sleep 0.05
    done
    rm -f "$1/sundial.pid"
}

case ${1:-} in
    start) [[ $# -ge 2 ]] || die "start ROOT [serve flags]"; shift; start "$@" ;;
    stop) [[ $# -eq 2 ]] || die "stop ROOT"; stop "$2" ;;
    pid) [[ $# -eq 2 ]] || die "pid ROOT"; cat "$2/sundial.pid" ;;
    *) sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac

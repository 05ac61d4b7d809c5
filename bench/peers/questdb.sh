#!/usr/bin/env bash
# QuestDB as a benchmark peer: install, start, stop and measure one server on loopback.
#
#   questdb.sh install          download questdb-$QUESTDB_VERSION.jar (SHA-1 checked) if missing
#   questdb.sh start ROOT       write ROOT/conf/server.conf, start in background, wait for /exec
#   questdb.sh stop ROOT        SIGTERM and wait; prints nothing on success
#   questdb.sh stats ROOT       cpu_s=.. peak_rss_kib=.. disk_bytes=..
#   questdb.sh disk ROOT        disk_bytes=..  (works stopped; see README for why that matters)
#   questdb.sh status ROOT      exit 0 (and print the PID) when running, 1 otherwise
#   questdb.sh jar              print the jar's path (after install)
#
# Environment (defaults):
#   QUESTDB_VERSION=9.3.4        Maven artifact org.questdb:questdb
#   BENCH_PEERS_DIR=<repo>/target/peers   jar goes to $BENCH_PEERS_DIR/questdb/
#   MAVEN_REPO_URL=https://repo1.maven.org/maven2
#   QDB_HTTP_PORT=19000  QDB_PG_PORT=18812  QDB_ILP_PORT=19009 (TCP)
#   QDB_UDP=0 (1 enables ILP over UDP)  QDB_UDP_PORT=19009  QDB_UDP_RCVBUF=8m
#   QDB_HEAP=8g (-Xmx)  QDB_JAVA_OPTS=  (extra JVM flags)  QDB_JAVA=java
#   QDB_CONF_EXTRA=  (extra server.conf lines, newline separated, appended last so they win)
#   QDB_START_TIMEOUT=60  QDB_STOP_TIMEOUT=60  (seconds)
# All listeners bind to 127.0.0.1; the min-HTTP (health) server and telemetry are off, so
# nothing collides with a Sundial on 9000/9009/8812 or anything on 9003.
set -euo pipefail

QUESTDB_VERSION=${QUESTDB_VERSION:-9.3.4}
MAVEN_REPO_URL=${MAVEN_REPO_URL:-https://repo1.maven.org/maven2}
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
PEERS_DIR=${BENCH_PEERS_DIR:-$REPO_ROOT/target/peers}
QDB_DIR=$PEERS_DIR/questdb
JAR=$QDB_DIR/questdb-$QUESTDB_VERSION.jar

QDB_HTTP_PORT=${QDB_HTTP_PORT:-19000}
QDB_PG_PORT=${QDB_PG_PORT:-18812}
QDB_ILP_PORT=${QDB_ILP_PORT:-19009}
QDB_UDP=${QDB_UDP:-0}
QDB_UDP_PORT=${QDB_UDP_PORT:-19009}
QDB_UDP_RCVBUF=${QDB_UDP_RCVBUF:-8m}
QDB_HEAP=${QDB_HEAP:-8g}
QDB_JAVA_OPTS=${QDB_JAVA_OPTS:-}
QDB_CONF_EXTRA=${QDB_CONF_EXTRA:-}
QDB_START_TIMEOUT=${QDB_START_TIMEOUT:-60}
QDB_STOP_TIMEOUT=${QDB_STOP_TIMEOUT:-60}
if [[ -n ${QDB_JAVA:-} ]]; then
    JAVA=$QDB_JAVA
elif [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
    JAVA=$JAVA_HOME/bin/java
else
    JAVA=java
fi

die() { echo "questdb.sh: $*" >&2; exit 1; }

usage() {
    sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# ---------------------------------------------------------------------------------------------
# install

sha1_of() { sha1sum "$1" | cut -d' ' -f1; }

install_curl() {
    local url="$MAVEN_REPO_URL/org/questdb/questdb/$QUESTDB_VERSION/questdb-$QUESTDB_VERSION.jar"
    local part="$JAR.part" want got
    want=$(curl -fsSL --retry 3 "$url.sha1") || return 1
    want=${want%% *}
    want=$(printf '%s' "$want" | tr -d '[:space:]')
    [[ $want =~ ^[0-9a-f]{40}$ ]] || die "unexpected .sha1 content from $url.sha1: '$want'"
    curl -fsSL --retry 3 -o "$part" "$url" || { rm -f "$part"; return 1; }
    got=$(sha1_of "$part")
    if [[ $got != "$want" ]]; then
        rm -f "$part"
        die "SHA-1 mismatch for $url: got $got, published $want"
    fi
    mv "$part" "$JAR"
}

install_mvn() {
    # Fallback: Maven verifies checksums itself (-C fails on a mismatch); check again against the
    # .sha1 it stored beside the artifact when there is one.
    command -v mvn >/dev/null || return 1
    mvn -B -q -C dependency:get -Dtransitive=false \
        -Dartifact="org.questdb:questdb:$QUESTDB_VERSION" >&2 || return 1
    local repo src
    # Maven wraps even -DforceStdout output in colour escapes; strip them.
    repo=$(mvn -B -q help:evaluate -Dexpression=settings.localRepository -DforceStdout \
        2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | tr -d '\r\n')
    [[ -d $repo ]] || repo=$HOME/.m2/repository
    src=$repo/org/questdb/questdb/$QUESTDB_VERSION/questdb-$QUESTDB_VERSION.jar
    [[ -f $src ]] || return 1
    if [[ -f $src.sha1 ]]; then
        local want
        want=$(tr -d '[:space:]' <"$src.sha1" | cut -c1-40)
        [[ $(sha1_of "$src") == "$want" ]] || die "SHA-1 mismatch for $src"
    fi
    cp "$src" "$JAR.part" && mv "$JAR.part" "$JAR"
}

cmd_install() {
    [[ -s $JAR ]] && return 0
    mkdir -p "$QDB_DIR"
    install_curl || {
        echo "questdb.sh: curl download failed, trying mvn dependency:get" >&2
        install_mvn || die "could not download org.questdb:questdb:$QUESTDB_VERSION"
    }
}

# ---------------------------------------------------------------------------------------------
# process helpers

pid_file() { echo "$1/questdb.pid"; }

# PID of the QuestDB serving ROOT, or nothing. Checks that the PID still is our server (PIDs
# are reused) by looking for ServerMain and the root in its command line.
running_pid() {
    local root=$1 pf pid
    pf=$(pid_file "$root")
    [[ -f $pf ]] || return 0
    pid=$(tr -d '[:space:]' <"$pf")
    [[ $pid =~ ^[0-9]+$ ]] || return 0
    [[ -r /proc/$pid/cmdline ]] || return 0
    if tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qx 'io.questdb/io.questdb.ServerMain' &&
        tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF "$root"; then
        # A zombie (exited, not yet reaped) is not running.
        [[ $(state_of "$pid") != Z ]] && echo "$pid"
    fi
    return 0
}

state_of() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0; s=${s##*) }; echo "${s%% *}"; }

# Absolute path of ROOT; `start` creates it, the other commands only resolve it.
abs_root() {
    [[ -n ${1:-} ]] || usage
    [[ ${2:-} == create ]] && mkdir -p "$1"
    if [[ -d $1 ]]; then (cd "$1" && pwd); else realpath -m "$1"; fi
}

http_ok() {
    curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$QDB_HTTP_PORT/exec?query=select%201" 2>/dev/null
}

log_tail() {
    local root=$1
    echo "---- tail of $root/questdb.log ----" >&2
    tail -n 40 "$root/questdb.log" >&2 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------------
# start

write_conf() {
    local root=$1 udp_enabled=false
    [[ $QDB_UDP == 1 || $QDB_UDP == true ]] && udp_enabled=true
    mkdir -p "$root/conf"
    cat >"$root/conf/server.conf" <<EOF
# Written by bench/peers/questdb.sh; rewritten on every start.
http.enabled=true
http.net.bind.to=127.0.0.1:$QDB_HTTP_PORT
# The min-HTTP (health check) server would listen on 0.0.0.0:9003.
http.min.enabled=false
pg.enabled=true
pg.net.bind.to=127.0.0.1:$QDB_PG_PORT
line.tcp.enabled=true
line.tcp.net.bind.to=127.0.0.1:$QDB_ILP_PORT
line.udp.enabled=$udp_enabled
line.udp.bind.to=127.0.0.1:$QDB_UDP_PORT
# Without unicast the UDP receiver joins multicast group 232.1.2.3 instead of taking datagrams
# sent to the bound address.
line.udp.unicast=true
line.udp.receive.buffer.size=$QDB_UDP_RCVBUF
telemetry.enabled=false
metrics.enabled=false
EOF
    if [[ -n $QDB_CONF_EXTRA ]]; then
        printf '# QDB_CONF_EXTRA\n%s\n' "$QDB_CONF_EXTRA" >>"$root/conf/server.conf"
    fi
}

cmd_start() {
    local root pid deadline
    root=$(abs_root "${1:-}" create)
    pid=$(running_pid "$root")
    [[ -z $pid ]] || die "already running in $root (pid $pid)"
    [[ -s $JAR ]] || cmd_install
    command -v "$JAVA" >/dev/null || die "java not found (set QDB_JAVA or JAVA_HOME)"
    if http_ok; then
        die "something already answers on 127.0.0.1:$QDB_HTTP_PORT; set QDB_HTTP_PORT"
    fi
    write_conf "$root"
    mkdir -p "$root/db"
    rm -f "$(pid_file "$root")"

    # setsid detaches the server from the caller's process group (a Ctrl-C in the benchmark
    # does not reach it; use `stop`). The inner shell writes its own PID and execs java, so the
    # PID file holds the JVM's PID whether or not setsid forked.
    # shellcheck disable=SC2086
    setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$(pid_file "$root")" \
        "$JAVA" -Xmx"$QDB_HEAP" -XX:+UseParallelGC \
        -XX:ErrorFile="$root/hs_err_pid%p.log" $QDB_JAVA_OPTS \
        -p "$JAR" -m io.questdb/io.questdb.ServerMain -d "$root" \
        </dev/null >"$root/questdb.log" 2>&1 &

    deadline=$((SECONDS + QDB_START_TIMEOUT))
    while ((SECONDS < deadline)); do
        if [[ -s $(pid_file "$root") ]]; then
            # Liveness from the raw PID: until the exec, its command line is still bash's.
            pid=$(tr -d '[:space:]' <"$(pid_file "$root")")
            if [[ ! -e /proc/$pid || $(state_of "$pid") == Z ]]; then
                rm -f "$(pid_file "$root")"
                log_tail "$root"
                die "QuestDB exited during start-up"
            fi
            if [[ -n $(running_pid "$root") ]] && http_ok; then
                return 0
            fi
        fi
        sleep 0.25
    done
    log_tail "$root"
    pid=$(running_pid "$root")
    [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null || true
    die "QuestDB did not answer on 127.0.0.1:$QDB_HTTP_PORT within ${QDB_START_TIMEOUT}s"
}

# ---------------------------------------------------------------------------------------------
# stop

cmd_stop() {
    local root pid deadline
    root=$(abs_root "${1:-}")
    pid=$(running_pid "$root")
    if [[ -z $pid ]]; then
        rm -f "$(pid_file "$root")"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + QDB_STOP_TIMEOUT))
    while ((SECONDS < deadline)); do
        if [[ ! -e /proc/$pid || $(state_of "$pid") == Z ]]; then
            rm -f "$(pid_file "$root")"
            return 0
        fi
        sleep 0.2
    done
    echo "questdb.sh: pid $pid ignored SIGTERM for ${QDB_STOP_TIMEOUT}s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$(pid_file "$root")"
    return 1
}

# ---------------------------------------------------------------------------------------------
# stats

cmd_stats() {
    local root pid stat ticks cpu_ticks hwm disk
    root=$(abs_root "${1:-}")
    pid=$(running_pid "$root")
    [[ -n $pid ]] || die "QuestDB is not running in $root"
    stat=$(cat "/proc/$pid/stat")
    # Fields after "pid (comm) ": state ppid pgrp session tty tpgid flags minflt cminflt majflt
    # cmajflt utime stime ...
    read -r -a f <<<"${stat##*) }"
    cpu_ticks=$((f[11] + f[12]))
    ticks=$(getconf CLK_TCK)
    hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
    disk=$(du -sb "$root/db" 2>/dev/null | cut -f1)
    awk -v t="$cpu_ticks" -v hz="$ticks" -v r="${hwm:-0}" -v d="${disk:-0}" \
        'BEGIN { printf "cpu_s=%.2f peak_rss_kib=%d disk_bytes=%d\n", t / hz, r, d }'
}

# Bytes under ROOT/db, server running or not. While it runs QuestDB holds preallocated append
# pages (16 MiB per column file, WAL segments), so a figure taken after `stop` is the data's size.
cmd_disk() {
    local root disk
    root=$(abs_root "${1:-}")
    [[ -d $root/db ]] || die "no $root/db"
    disk=$(du -sb "$root/db" | cut -f1)
    echo "disk_bytes=$disk"
}

cmd_status() {
    local root pid
    root=$(abs_root "${1:-}")
    pid=$(running_pid "$root")
    [[ -n $pid ]] || return 1
    echo "$pid"
}

case ${1:-} in
install) cmd_install ;;
start) cmd_start "${2:-}" ;;
stop) cmd_stop "${2:-}" ;;
stats) cmd_stats "${2:-}" ;;
disk) cmd_disk "${2:-}" ;;
status) cmd_status "${2:-}" ;;
jar) echo "$JAR" ;;
*) usage ;;
esac

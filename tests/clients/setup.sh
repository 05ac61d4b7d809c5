#!/usr/bin/env bash
# Installs what the end-to-end tests in tests/clients need, from the package registries. Each part
# keeps a stamp holding the hash of its inputs and is skipped when nothing changed, so a second run
# takes well under a second:
#   - Python: a venv at ${SUNDIAL_TEST_VENV:-target/test-venv} with requirements.txt;
#   - Java: pgjdbc from Maven Central (java/pom.xml) into target/clients/java/lib, and
#     java/src/*.java compiled into target/clients/java/classes;
#   - Go: pgx from the Go module proxy (go/go.mod, go/go.sum), the test built as
#     target/clients/go/pgx-test;
#   - Node: node-postgres from npm (`npm ci` of node/package-lock.json) into node/node_modules.
#   - Browser: Chromium and chromedriver from Debian (apt-get, with sudo when not root) for the
#     web console's test (test_console.py), when they are missing.
#   - Peers for the differential tests: QuestDB's jar from Maven Central (bench/peers/questdb.sh
#     install, cached under target/peers) and PostgreSQL 15 from Debian (apt-get), when missing.
# Paths are relative to the repository root. A driver whose toolchain (javac + mvn, go, node + npm)
# is missing is skipped with a warning, and its test in test_drivers.py skips too.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
clients="$root/target/clients"

# hash FILE...: one hash over the files' names and contents.
hash_files() {
    local f
    for f in "$@"; do
        printf '%s\n' "${f#"$root"/}"
        sha256sum <"$f"
    done | sha256sum | cut -d' ' -f1
}

# fresh STAMP HASH: whether STAMP holds HASH.
fresh() {
    [[ -f "$1" && "$(cat "$1")" == "$2" ]]
}

setup_python() {
    local venv="${SUNDIAL_TEST_VENV:-target/test-venv}"
    case "$venv" in
        /*) ;;
        *) venv="$root/$venv" ;;
    esac
    local requirements="$here/requirements.txt"
    local stamp="$venv/.sundial-requirements.sha256"
    local python="${PYTHON:-python3}"
    local want
    want="$(sha256sum "$requirements" | cut -d' ' -f1)"
    if [[ -x "$venv/bin/python" ]] && fresh "$stamp" "$want"; then
        return 0
    fi
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "setup.sh: creating venv $venv" >&2
        "$python" -m venv "$venv"
    fi
    echo "setup.sh: installing $requirements" >&2
    rm -f "$stamp"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
    echo "$want" >"$stamp"
}

setup_java() {
    if ! command -v javac >/dev/null || ! command -v mvn >/dev/null; then
        echo "setup.sh: WARNING: javac or mvn not found; the pgjdbc test will be skipped" >&2
        return 0
    fi
    local out="$clients/java"
    local stamp="$out/.stamp"
    local want
    want="$(hash_files "$here/java/pom.xml" "$here"/java/src/*.java)"
    if fresh "$stamp" "$want"; then
        return 0
    fi
    echo "setup.sh: fetching pgjdbc with Maven and compiling the Java client test" >&2
    rm -rf "$stamp" "$out/lib" "$out/classes"
    local mvn_args=(-q -B -f "$here/java/pom.xml" "-Dlib.dir=$out/lib" dependency:copy-dependencies)
    # Offline first: no registry round trips when the local repository (~/.m2) has everything.
    # Maven writes terminal escape codes even in batch mode: its output is shown only when it
    # fails.
    mkdir -p "$out"
    if ! mvn -o "${mvn_args[@]}" >/dev/null 2>&1 && ! mvn "${mvn_args[@]}" >"$out/mvn.log" 2>&1; then
        cat "$out/mvn.log" >&2
        return 1
    fi
    javac -encoding UTF-8 -d "$out/classes" -cp "$out/lib/*" "$here"/java/src/*.java
    echo "$want" >"$stamp"
}

setup_go() {
    if ! command -v go >/dev/null; then
        echo "setup.sh: WARNING: go not found; the pgx test will be skipped" >&2
        return 0
    fi
    local out="$clients/go"
    local stamp="$out/.stamp"
    local want
    want="$(hash_files "$here/go/go.mod" "$here/go/go.sum" "$here"/go/*.go)"
    if [[ -x "$out/pgx-test" ]] && fresh "$stamp" "$want"; then
        return 0
    fi
    echo "setup.sh: fetching pgx and building the Go client test" >&2
    rm -f "$stamp"
    mkdir -p "$out"
    # go.sum is committed: -mod=readonly downloads what it lists and changes nothing.
    (cd "$here/go" && go build -mod=readonly -buildvcs=false -o "$out/pgx-test" .)
    echo "$want" >"$stamp"
}

setup_node() {
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "setup.sh: WARNING: node or npm not found; the node-postgres test will be skipped" >&2
        return 0
    fi
    local stamp="$here/node/node_modules/.sundial-lock.sha256"
    local want
    want="$(hash_files "$here/node/package.json" "$here/node/package-lock.json")"
    if fresh "$stamp" "$want"; then
        return 0
    fi
    echo "setup.sh: installing node-postgres with npm ci" >&2
    (cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error) >&2
    echo "$want" >"$stamp"
}

setup_browser() {
    if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
        return 0
    fi
    echo "setup.sh: installing Chromium and chromedriver with apt-get" >&2
    apt_install chromium chromium-driver ||
        echo "setup.sh: WARNING: could not install Chromium and chromedriver; the web console test will be skipped" >&2
}

# apt_install PACKAGE...: Debian packages, with sudo when not root; false when that is impossible.
apt_install() {
    local sudo=()
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null || return 1
        sudo=(sudo)
    fi
    command -v apt-get >/dev/null || return 1
    # Quiet: dpkg's progress goes to standard output even with -qq; errors still show.
    "${sudo[@]}" apt-get update -qq >/dev/null
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

setup_questdb() {
    if ! command -v java >/dev/null; then
        echo "setup.sh: WARNING: java not found; the QuestDB differential test will be skipped" >&2
        return 0
    fi
    bash "$root/bench/peers/questdb.sh" install
}

setup_postgres() {
    if [[ -x /usr/lib/postgresql/15/bin/postgres ]]; then
        return 0
    fi
    echo "setup.sh: installing PostgreSQL 15 with apt-get" >&2
    apt_install postgresql-15 ||
        echo "setup.sh: WARNING: could not install PostgreSQL 15; its differential test will be skipped" >&2
}

setup_python
setup_java
setup_go
setup_node
setup_browser
setup_questdb
setup_postgres

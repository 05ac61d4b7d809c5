#!/usr/bin/env bash
# Runs the end-to-end client tests (tests/clients) against the built `sundial` binary
# ($SUNDIAL_BIN, default target/debug/sundial). Extra arguments go to pytest. The tests' data
# directories live in a temporary directory removed at exit (pytest would otherwise keep the
# last runs' under the system temp directory, about a gigabyte each).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${SUNDIAL_TEST_VENV:-target/test-venv}"
case "$venv" in
    /*) ;;
    *) venv="$root/$venv" ;;
esac

bash "$here/setup.sh"
cd "$root"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/sundial-clients.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
"$venv/bin/python" -m pytest -q -p no:cacheprovider --basetemp "$scratch/pytest" "$here" "$@"

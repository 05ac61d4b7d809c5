#!/usr/bin/env bash
# Creates (once) the Python venv for tests/clients and installs requirements.txt into it.
# The venv lives at ${SUNDIAL_TEST_VENV:-target/test-venv} (relative to the repository root);
# a stamp file holding the hash of requirements.txt skips the install when nothing changed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${SUNDIAL_TEST_VENV:-target/test-venv}"
case "$venv" in
    /*) ;;
    *) venv="$root/$venv" ;;
esac
requirements="$here/requirements.txt"
stamp="$venv/.sundial-requirements.sha256"
python="${PYTHON:-python3}"

want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
    echo "setup.sh: creating venv $venv" >&2
    "$python" -m venv "$venv"
fi
echo "setup.sh: installing $requirements" >&2
rm -f "$stamp"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
echo "$want" > "$stamp"

#!/usr/bin/env bash
# Checks that the console bundle checked in under crates/sundial-http/console is what the sources
# in console/ build: installs the locked packages (npm ci), builds into a temporary directory and
# compares. Needs node and npm; exits 0 with a warning without them. Run from anywhere.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
built="$here/../crates/sundial-http/console"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "console/check.sh: WARNING: node or npm not found; the console bundle is not checked" >&2
    exit 0
fi

cd "$here"
stamp="node_modules/.sundial-lock.sha256"
want="$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    npm ci --no-audit --no-fund --loglevel=error >&2
    echo "$want" >"$stamp"
fi
npm test --silent >&2

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
node build.mjs "$out" >/dev/null
if ! diff -r "$out" "$built" >/dev/null; then
    diff -r -q "$out" "$built" >&2 || true
    echo "console/check.sh: crates/sundial-http/console differs from what console/ builds;" \
        "run 'npm ci && npm run build' in console/ and commit the result" >&2
    exit 1
fi
echo "console/check.sh: the console bundle matches its sources" >&2

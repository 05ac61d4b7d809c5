#!/usr/bin/env bash
# Runs every test: unit and integration tests, sqllogictest files, crash and concurrency tests,
# end-to-end tests of the `sundial` binary, and the real client libraries (QuestDB's and
# InfluxDB's Python clients) against the real server. Installs what the tests need first.
# Every part runs even when an earlier one fails (and every test binary, `--no-fail-fast`); the
# script exits non-zero at the end if any failed, naming them.
set -uo pipefail
cd "$(dirname "$0")"
failed=()
# Builds target/debug/sundial too (the integration tests run it), with the features the tests
# unify: the client tests below use that binary, so nothing is built twice.
cargo test --workspace --all-targets --no-fail-fast || failed+=("cargo test")
# The web console's bundle checked in under crates/sundial-http/console is what console/ builds.
console/check.sh || failed+=("console/check.sh")
if [[ -x target/debug/sundial ]]; then
    SUNDIAL_BIN="$PWD/target/debug/sundial" tests/clients/run.sh || failed+=("tests/clients")
else
    failed+=("tests/clients (target/debug/sundial was not built)")
fi
if ((${#failed[@]})); then
    printf 'test.sh: FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "test.sh: every test passed" >&2

#!/usr/bin/env bash
# Runs every test: unit and integration tests, sqllogictest files, crash and concurrency tests,
# end-to-end tests of the `sundial` binary, the benchmark charts, and the real client libraries (QuestDB's and
# InfluxDB's Python clients) against the real server. Installs what the tests need first.
# Every part runs even when an earlier one fails (and every test binary, `--no-fail-fast`); the
# script exits non-zero at the end if any failed, naming them.
set -uo pipefail
cd "$(dirname "$0")"
failed=()
# `cargo build --all-targets` resolves the same features as the tests, so this builds every
# binary the client tests below run (target/debug/sundial, target/debug/sundial-bench) and every
# test binary once; `cargo test` then only runs them. (`cargo test` alone links a package's
# binaries only when that package has integration tests, and sundial-bench has none.)
cargo build --workspace --all-targets || failed+=("cargo build")
cargo test --workspace --all-targets --no-fail-fast || failed+=("cargo test")
# The web console's bundle checked in under crates/sundial-http/console is what console/ builds.
console/check.sh || failed+=("console/check.sh")
# The benchmark charts drawn from synthetic results.
python3 bench/test_chart.py >/dev/null || failed+=("bench/test_chart.py")
if [[ -x target/debug/sundial && -x target/debug/sundial-bench ]]; then
    SUNDIAL_BIN="$PWD/target/debug/sundial" tests/clients/run.sh || failed+=("tests/clients")
else
    failed+=("tests/clients (target/debug/sundial or sundial-bench was not built)")
fi
if ((${#failed[@]})); then
    printf 'test.sh: FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "test.sh: every test passed" >&2

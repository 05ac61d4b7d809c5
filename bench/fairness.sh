#!/usr/bin/env bash
# Cheap statements beside a hundred heavy ones, with and without --queries-running-max:
# bench/fairness.py against the release server, one mode after the other.
#
#   bench/fairness.sh
#   ROWS=20000000 HEAVY=200 DURATION_S=60 bench/fairness.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/results
OUT=bench/results/fairness-$(date +%Y%m%d-%H%M%S).txt
cargo build --release -p sundial-server
[[ -x target/test-venv/bin/python ]] || tests/clients/setup.sh
target/test-venv/bin/python bench/fairness.py | tee "$OUT"
echo "figures in $OUT"

#!/usr/bin/env bash
# What logins and TLS cost: bench/security.py against two release servers side by side, one
# open on plain TCP (--auth off) and one with --auth required and TLS on every listener.
#
#   bench/security.sh
#   HTTP_REQUESTS=10000 COPY_ROWS=5000000 bench/security.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/results
OUT=bench/results/security-$(date +%Y%m%d-%H%M%S).txt
cargo build --release -p sundial-server
[[ -x target/test-venv/bin/python ]] || tests/clients/setup.sh
target/test-venv/bin/python bench/security.py | tee "$OUT"
echo "figures in $OUT"

#!/usr/bin/env bash
# Every test on a fresh machine: install what is missing, build everything, run ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test-peers
scripts/build.sh | tail -n 1
cd build
ctest --output-on-failure -j2 "$@"

#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, and walk the built-in
# example module through xlens (see the README).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh --target xlens | tail -n 1
./build/compiler/cli/xlens demo --out out/demo

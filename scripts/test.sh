#!/usr/bin/env bash
# Every test on a fresh machine: install what is missing, build everything, run ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test-peers
# Chromium and the Python consumers of our traces (Perfetto UI's local copy, HolisticTraceAnalysis),
# so that every run checks our timelines in tools that are not ours; the test skips, saying so,
# where they cannot be installed.
scripts/install_trace_consumers.sh ||
  echo "test: the trace consumers could not be installed; trace_loads_in_perfetto_and_hta will skip" >&2
# A tree configured here compiles its libraries in batches (in about half the time).
XLENS_UNITY_BUILD=ON scripts/build.sh | tail -n 1
# The Python package, installed from this clone into a fresh virtual environment (no second
# compile: pip reuses build/); the python_package test runs its pytest suite there.
scripts/install_python_package.sh
cd build
# A run leaves nothing in the temporary folder: what it does leave is named, and the run fails.
exec ../scripts/tmp_leftovers.sh ctest --output-on-failure -j2 "$@"

#!/usr/bin/env bash
# Every test on a fresh machine: install what is missing, build what the tests run (the benchmarks
# only where named: scripts/bench.sh), run ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
# What the build needs first (Debian's packages, nanobind).
scripts/setup.sh
# What only the tests need is installed while the tree builds: the peers they compare against
# (jax, jaxlib, numpy, tensorflow-cpu; the aarch64 cross compiler and qemu-user) and Chromium and
# the Python consumers of our traces, so that every run checks our timelines in tools that are not
# ours (that test skips, saying so, where they cannot be installed). On a machine that has none of
# them this is minutes of downloads, which the build no longer waits for: nothing the build reads
# comes from them.
mkdir -p build
peers_log=build/test-peers.log
(
  scripts/setup.sh --test-peers
  scripts/install_trace_consumers.sh ||
    echo "test: the trace consumers could not be installed; trace_loads_in_perfetto_and_hta will skip" >&2
) >"$peers_log" 2>&1 &
peers=$!
# A tree configured here compiles its libraries in batches (in about half the time). Of the build's
# stdout only the last line is kept; if a batch does not compile, build.sh puts its first error on
# stderr before it goes on file by file. The benchmarks, which no test runs, are left out of the
# default target (scripts/bench.sh builds them by name): 50 s of CPU less to compile.
build_status=0
XLENS_UNITY_BUILD=ON XLENS_BENCHMARKS_IN_ALL=OFF scripts/build.sh | tail -n 1 || build_status=$?
# The installs finish (an apt or pip run is never cut off halfway) and say what they did.
peers_status=0
wait "$peers" || peers_status=$?
cat "$peers_log"
if [ "$build_status" -ne 0 ]; then exit "$build_status"; fi
if [ "$peers_status" -ne 0 ]; then
  echo "test: installing the test peers failed (exit $peers_status; output above)" >&2
  exit "$peers_status"
fi
# The Python package, installed from this clone into a fresh virtual environment (no second
# compile: pip reuses build/); the python_package test runs its pytest suite there.
scripts/install_python_package.sh
cd build
# A run leaves nothing in the temporary folder: what it does leave is named, and the run fails.
exec ../scripts/tmp_leftovers.sh ctest --output-on-failure -j2 "$@"

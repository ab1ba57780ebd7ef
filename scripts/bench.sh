#!/usr/bin/env bash
# Builds and runs the benchmarks (by hand, not in CI). Extra arguments go to Google Benchmark,
# e.g. scripts/bench.sh --benchmark_filter=Parse
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh --target hlo_bench pipeline_bench codegen_bench profiler_bench graph_bench cluster_bench | tail -n 1
./build/tests/bench/hlo_bench "$@"
./build/tests/bench/pipeline_bench "$@"
./build/tests/bench/codegen_bench "$@"
./build/tests/bench/profiler_bench "$@"
./build/tests/bench/graph_bench "$@"
./build/tests/bench/cluster_bench "$@"

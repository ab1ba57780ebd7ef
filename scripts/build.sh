#!/usr/bin/env bash
# Configures (once) and builds xlens with Ninja into build/ (ccache makes rebuilds fast).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  # XLENS_UNITY_BUILD=ON (scripts/test.sh's fresh build): the libraries compile in batches.
  # XLENS_BENCHMARKS_IN_ALL=OFF (scripts/test.sh's too): the benchmarks build only when named.
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DXLENS_UNITY_BUILD="${XLENS_UNITY_BUILD:-OFF}" \
    -DXLENS_BENCHMARKS_IN_ALL="${XLENS_BENCHMARKS_IN_ALL:-ON}" >/dev/null
fi
status=0
unity=false
if grep -q '^XLENS_UNITY_BUILD:BOOL=ON$' build/CMakeCache.txt; then unity=true; fi
if ! "$unity"; then
  cmake --build build "$@" || status=$?
  exit "$status"
fi
# A batched build keeps its output (build/unity_build.log, removed when it passes) so that, when it
# fails, the first error can be shown on stderr: scripts/test.sh keeps only the last line of stdout.
log=build/unity_build.log
cmake --build build "$@" | tee "$log" || status=$?
if [ "$status" -eq 0 ]; then
  rm -f "$log"
  exit 0
fi
# Two files of a library whose file-local names clash compile alone but not in one batch: the
# build says why (the first failed command's first error, with its file) and goes on file by file,
# so such a clash costs time, not the run.
{
  echo "build: ==== the batched (unity) build failed; its first error (all of it in $log): ===="
  # Ninja prints "FAILED: <output>", the command line, then the compiler's message, until its next
  # status line. From the message: the first error (or, if none says so, its start) and what follows;
  # with no failed command (CMake's regeneration failed), the log's last lines.
  sed 's/\x1b\[[0-9;]*[mK]//g' "$log" | awk '
    !failed && /^FAILED: / { failed = 1; print; getline; next }
    !failed { tail[NR % 8] = $0; next }
    # Read on to the end rather than exit: sed, earlier in the pipe, would die of SIGPIPE on a long
    # log, and pipefail would end the script before it falls back.
    done { next }
    /^(FAILED: |ninja: |\[[0-9]+\/[0-9]+\] )/ { done = 1; next }
    { message[++n] = $0; if (!first && /error:|undefined reference|multiple definition/) first = n }
    END {
      if (!failed) { for (i = NR - 7; i <= NR; ++i) if (i > 0) print tail[i % 8]; exit }
      if (!first) first = 1
      for (i = first; i <= n && i < first + 8; ++i) print message[i]
    }'
  echo "build: ==== building the libraries file by file instead (put a file whose anonymous-namespace" \
    "names clash with another's on CMakeLists.txt's list) ===="
} >&2
cmake -DXLENS_UNITY_BUILD=OFF build >/dev/null
cmake --build build "$@"

#!/usr/bin/env bash
# Configures (once) and builds xlens with Ninja into build/ (ccache makes rebuilds fast).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  # XLENS_UNITY_BUILD=ON (scripts/test.sh's fresh build): the libraries compile in batches.
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DXLENS_UNITY_BUILD="${XLENS_UNITY_BUILD:-OFF}" >/dev/null
fi
status=0
cmake --build build "$@" || status=$?
# Two files of a library whose file-local names clash compile alone but not in one batch: the
# build says so and goes on file by file, so such a clash costs time, not the run.
if [ "$status" -ne 0 ] && grep -q '^XLENS_UNITY_BUILD:BOOL=ON$' build/CMakeCache.txt; then
  echo "build: the batched (unity) build failed; building the libraries file by file instead" \
    "(put a file whose anonymous-namespace names clash with another's on CMakeLists.txt's list)" >&2
  cmake -DXLENS_UNITY_BUILD=OFF build >/dev/null
  cmake --build build "$@"
  exit
fi
exit "$status"

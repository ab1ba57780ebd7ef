#!/usr/bin/env bash
# Configures (once) and builds xlens with Ninja into build/ (ccache makes rebuilds fast).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build build "$@"

#!/usr/bin/env bash
# Fuzzes the HLO parser with libFuzzer (clang, AddressSanitizer, UndefinedBehaviorSanitizer).
#   scripts/fuzz.sh [SECONDS]      fuzz for SECONDS (default 300); findings go to out/fuzz/
#   scripts/fuzz.sh --smoke        a short run for the test suite (20 s)
# The seed corpus is every HLO file of the tests plus ../shared/corpus/hlo when it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=300
if [ "${1:-}" = "--smoke" ]; then seconds=20; elif [ -n "${1:-}" ]; then seconds=$1; fi

clangxx=$(command -v clang++-19 || command -v clang++ || true)
if [ -z "$clangxx" ]; then
  echo "fuzz: clang++ is not installed (scripts/setup.sh installs clang-19)" >&2
  exit 1
fi

build=build-fuzz
if [ ! -f $build/build.ninja ]; then
  flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$clangxx" \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DXLENS_BUILD_TESTS=OFF -DXLENS_BUILD_FUZZERS=ON >/dev/null
fi
cmake --build $build --target hlo_parser_fuzz | tail -n 1

seeds=out/fuzz/seeds
mkdir -p $seeds out/fuzz/findings
find tests -name '*.hlo' -exec cp {} $seeds/ \;
if [ -d ../shared/corpus/hlo ]; then
  find ../shared/corpus/hlo -maxdepth 2 -name '*.hlo' -size -64k -exec cp {} $seeds/ \;
fi
echo "fuzz: $(ls $seeds | wc -l) seeds, ${seconds}s"
# -rss_limit_mb guards against inputs that make the parser allocate without bound.
$build/tests/fuzz/hlo_parser_fuzz $seeds -max_total_time="$seconds" -max_len=65536 \
  -rss_limit_mb=2048 -timeout=10 -artifact_prefix=out/fuzz/findings/ -print_final_stats=1 2>&1 |
  grep -E "^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY|fuzz:)" || true
exit "${PIPESTATUS[0]}"

#!/usr/bin/env bash
# Builds xlens and its tests with AddressSanitizer and UndefinedBehaviorSanitizer and runs the
# test suite there, so a test that passes by luck over freed memory, an overflow or a misaligned
# load fails instead.
#   scripts/sanitize.sh [--clang] [--leaks] [--build-only] [--target T ...] [-- CTEST_ARGS...]
#     --clang       clang++-19 instead of the system g++ (build-asan-clang/ instead of build-asan/)
#     --leaks       also report leaks (off by default: LLVM keeps its globals until exit)
#     --build-only  configure and build, run nothing
#     --target T... build only these targets (then pass ctest a -R that selects their tests)
#   after --, arguments go to ctest (e.g. -R npy); the slow peer tests (jaxlib, Perfetto, the
#   fuzz smoke run with its own build) are excluded unless -E is given.
# Prints one summary: tests passed and failed, and each test with a sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."

compiler=gcc
leaks=0
build_only=0
targets=()
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --clang) compiler=clang ;;
    --leaks) leaks=1 ;;
    --build-only) build_only=1 ;;
    --target)
      while [ $# -gt 1 ] && [ "${2#-}" = "$2" ]; do targets+=("$2"); shift; done ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "sanitize: unknown argument '$1' (see the top of $0)" >&2; exit 1 ;;
  esac
  shift
done

if [ $compiler = clang ]; then
  build=build-asan-clang
  cxx=$(command -v clang++-19 || command -v clang++ || true)
  if [ -z "$cxx" ]; then echo "sanitize: clang++ is not installed" >&2; exit 1; fi
else
  build=build-asan
  cxx=$(command -v g++ || true)
  if [ -z "$cxx" ]; then echo "sanitize: g++ is not installed" >&2; exit 1; fi
fi

if [ ! -f $build/build.ninja ]; then
  sanitizers="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  # -O1 keeps the suite fast enough to run while the sanitizers still see every access.
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_CXX_FLAGS="$sanitizers" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DXLENS_BUILD_BENCHMARKS=OFF >/dev/null
fi
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build $build --target "${targets[@]}" | tail -n 1
else
  cmake --build $build | tail -n 1
fi
if [ $build_only = 1 ]; then exit 0; fi

# halt_on_error: the first report fails the test. The sweep (hostile_inputs) sees the
# instrumented binary and lifts its address-space limit by itself (ASan reserves terabytes).
export ASAN_OPTIONS="detect_leaks=$leaks:halt_on_error=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

has_exclude=0
for a in "${ctest_args[@]}"; do [ "$a" = -E ] && has_exclude=1; done
if [ $has_exclude = 0 ]; then
  ctest_args+=(-E "^(xla_parses_xlens_output|xla_differential_evaluator|trace_loads_in_perfetto_and_hta|fuzz_readers_smoke)$")
fi

log=$build/sanitize-ctest.log
set +e
(cd $build && ctest --output-on-failure --timeout 1200 -j2 "${ctest_args[@]}") >"$log" 2>&1
code=$?
set -e

# The summary: ctest's own line, the failed tests, and which of them a sanitizer flagged.
echo "sanitize: $compiler, $build, ctest log in $log"
grep -E "tests passed|tests failed|No tests were found" "$log" | tail -n 1 || true
grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Child aborted|Exception)" "$log" || true
reports=$(grep -cE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$log" || true)
echo "sanitize: $reports sanitizer report(s)"
grep -E "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|^SUMMARY: " "$log" | sort | uniq -c | sort -rn | head -n 40 || true
exit $code

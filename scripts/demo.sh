#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, walk the built-in example
# module through xlens, then trace the MNIST softmax training step of TensorFlow's XLA tutorial
# with fusion off and on (see the README).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh --target xlens | tail -n 1
# The viewer is built where Qt 6 and Graphviz are (XLENS_WITH_VIEWER=auto).
viewer=""
if grep -q '^build viewer/xlens-viewer:' build/build.ninja 2>/dev/null; then
  scripts/build.sh --target xlens-viewer | tail -n 1
  viewer=./build/viewer/xlens-viewer
fi
scripts/build.sh --target mnist_softmax | tail -n 1
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
rm -rf out/demo/step
run run $step --iterations 20 --xla_hlo_profile --xla_dump_to=out/demo/step --xla_dump_hlo_pass_re='.*' \
  --trace out/demo/step/timeline.ctf.json | grep -v '^out'
run trace summary out/demo/step/timeline.ctf.json --top 5
echo
echo "Open out/demo/timeline_unfused.ctf.json and out/demo/step/timeline.ctf.json in Perfetto UI"
echo "(https://ui.perfetto.dev, 'Open trace file') or chrome://tracing ('Load'): each run is one"
echo "'execute' span; under it, one span per kernel: many small ones without fusion, a few with."

echo
echo "xlens demo: the same story from a TensorFlow graph (the tutorial's mnist_softmax_xla, samples/mnist_softmax.cc),"
echo "100 training steps on Fashion-MNIST op by op, then with TensorFlow's auto-clustering and the JIT"
sample=./build/samples/mnist_softmax
data=()
if [ ! -d /usr/share/datasets/fashion-mnist ]; then data=(--tiny); fi
rm -rf out/demo/tf
echo
echo "\$ mnist_softmax --jit=off --steps 100 --trace out/demo/tf_op_by_op.ctf.json"
$sample "${data[@]}" --jit=off --steps 100 --trace out/demo/tf_op_by_op.ctf.json 2>&1 |
  grep -E '^(mnist_softmax: /|test accuracy|time per step|last step)'
echo
echo "\$ TF_XLA_FLAGS=--tf_xla_clustering_debug TF_DUMP_GRAPH_PREFIX=out/demo/tf/graphs mnist_softmax --jit=auto --steps 100 --xla_dump_to=out/demo/tf --xla_dump_hlo_pass_re=.* --trace out/demo/tf/timeline.ctf.json"
# As in TensorFlow, the clustering graphs are written only with --tf_xla_clustering_debug.
TF_XLA_FLAGS=--tf_xla_clustering_debug TF_DUMP_GRAPH_PREFIX=out/demo/tf/graphs $sample "${data[@]}" --jit=auto --steps 100 --xla_dump_to=out/demo/tf \
  --xla_dump_hlo_pass_re='.*' --trace out/demo/tf/timeline.ctf.json 2>&1 |
  grep -E '^(test accuracy|time per step|last step|  .*\((cpu_kernel|library_call)\))'
run cluster samples/graphs/mnist_softmax/graph.pbtxt --jit-level=ON_1 --tf_xla_cpu_global_jit | sed -n 1,6p
echo "  ..."
# The training step's cluster (the one that applies the gradient), as the JIT compiled it: its
# per-HLO profile, and the same module for an NVIDIA GPU: compiling
# needs no GPU, and the dump holds the GPU pipeline's module, its LLVM IR and the PTX.
train=$(grep -l ResourceApplyGradientDescent out/demo/tf/module_*.before_optimizations.txt | head -n 1)
rm -rf out/demo/tf/gpu
echo
echo "\$ xlens run out/demo/tf/${train##*/} --iterations 20 --xla_hlo_profile"
$xlens run "$train" --iterations 20 --xla_hlo_profile 2>&1 | sed -n '/^Execution profile/,$p'
echo
echo "\$ xlens compile out/demo/tf/${train##*/} --emit=ptx --gpu_arch=sm_90 --xla_dump_to=out/demo/tf/gpu -o out/demo/tf/gpu/train_step.ptx"
$xlens compile "$train" --emit=ptx --gpu_arch=sm_90 --xla_dump_to=out/demo/tf/gpu -o out/demo/tf/gpu/train_step.ptx
echo "  $(grep -c '^.visible .entry' out/demo/tf/gpu/train_step.ptx) GPU kernels:" \
  "$(sed -n 's/^.visible .entry \([A-Za-z0-9_]*\)(.*/\1/p' out/demo/tf/gpu/train_step.ptx | tr '\n' ' ')"
echo
echo "The clustering graphs are in out/demo/tf/graphs/; the cluster's module after every pass, its LLVM IR"
echo "(*.ir-no-opt.ll, *.ir-with-opt.ll) and manifest.json in out/demo/tf/; the same"
echo "module through the GPU pipeline, its LLVM IR and its PTX (*.ptx) in out/demo/tf/gpu/; the timelines"
echo "are out/demo/tf_op_by_op.ctf.json (many op-by-op boxes) and out/demo/tf/timeline.ctf.json (one"
echo "cluster launch holding a few fused kernels)."

if [ -n "$viewer" ]; then
  echo
  echo "xlens-viewer: the fused step's dump (every pass, the kernels, the timeline) in one window"
  run_viewer() {
    echo
    echo "\$ xlens-viewer $*"
    $viewer "$@" 2>&1
  }
  run_viewer out/demo/step --stage fusion --diff --screenshot out/demo/viewer_fusion_diff.png
  # The softmax's kernel (its max, exp and sum), by what it computes: fusions are numbered as the
  # passes leave them, and a pass that folds an instruction renumbers them.
  softmax=$(sed -n 's/^ *%\(fusion[.0-9]*\) = .*kind=kInput.*op_name="softmax_cross_entropy\/Max.*/\1/p' \
    out/demo/step/*.cpu_after_optimizations.txt | head -n 1)
  run_viewer out/demo/step --select "$softmax" --screenshot out/demo/viewer_kernel.png
  run_viewer out/demo/tf --stage fusion --diff --screenshot out/demo/viewer_tf_fusion.png
  echo
  echo "Look through them yourself (d: diff, ]/[: next/previous changed pass, ./,: fusion decisions,"
  echo "f: fit, /: search; W/A/S/D on the timeline):"
  echo "  $viewer out/demo/step"
  echo "  $viewer out/demo/tf"
else
  echo
  echo "(xlens-viewer was not built: scripts/setup.sh installs Qt 6 and Graphviz, then rerun.)"
fi

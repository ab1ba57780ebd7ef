#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, walk the built-in example
# module through xlens, then trace the MNIST softmax training step of TensorFlow's XLA tutorial
# with fusion off and on (see the README).
#
# Usage: scripts/demo.sh [--built BUILD_DIR] [--out DIR]
#   --built  run the binaries already built in BUILD_DIR and install or build nothing (the
#            main_job test runs the job so, in the tree scripts/test.sh built)
#   --out    where the job writes (default out/demo)
set -euo pipefail
cd "$(dirname "$0")/.."
build=""
out=out/demo
while [ $# -gt 0 ]; do
  case "$1" in
    --built) build=${2:?--built needs a build folder}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    *) echo "demo.sh: unknown argument '$1' (usage: scripts/demo.sh [--built BUILD_DIR] [--out DIR])" >&2; exit 1 ;;
  esac
done
viewer=""
if [ -z "$build" ]; then
  build=./build
  scripts/setup.sh
  scripts/build.sh --target xlens | tail -n 1
  # The viewer is built where Qt 6 and Graphviz are (XLENS_WITH_VIEWER=auto).
  if grep -q '^build viewer/xlens-viewer:' build/build.ninja 2>/dev/null; then
    scripts/build.sh --target xlens-viewer | tail -n 1
    viewer=./build/viewer/xlens-viewer
  fi
  scripts/build.sh --target mnist_softmax | tail -n 1
elif [ -x "$build/viewer/xlens-viewer" ]; then
  viewer=$build/viewer/xlens-viewer
fi
xlens=$build/compiler/cli/xlens
"$xlens" demo --out "$out"

step=samples/mnist_softmax_train_step.hlo
echo
echo "xlens demo: the MNIST softmax training step ($step), traced with fusion off and on"
# The step's outputs (out0: ..., out1: ...) are left out of what xlens run prints.
run() {
  echo
  echo "\$ xlens $*"
  "$xlens" "$@" 2>&1
}
run run $step --iterations 20 --xla_disable_hlo_passes=fusion,multi-output-fusion \
  --trace "$out"/timeline_unfused.ctf.json | grep -v '^out[0-9]*: '
run trace summary "$out"/timeline_unfused.ctf.json --top 5
rm -rf "$out"/step
run run $step --iterations 20 --xla_hlo_profile --xla_dump_to="$out"/step --xla_dump_hlo_pass_re='.*' \
  --trace "$out"/step/timeline.ctf.json | grep -v '^out[0-9]*: '
run trace summary "$out"/step/timeline.ctf.json --top 5
echo
echo "Open $out/timeline_unfused.ctf.json and $out/step/timeline.ctf.json in Perfetto UI"
echo "(https://ui.perfetto.dev, 'Open trace file') or chrome://tracing ('Load'): each run is one"
echo "'execute' span; under it, one span per kernel: many small ones without fusion, a few with."

echo
echo "xlens demo: the same story from a TensorFlow graph (the tutorial's mnist_softmax_xla, samples/mnist_softmax.cc),"
echo "100 training steps on Fashion-MNIST op by op, then with TensorFlow's auto-clustering and the JIT"
sample=$build/samples/mnist_softmax
data=()
if [ ! -d /usr/share/datasets/fashion-mnist ]; then data=(--tiny); fi
rm -rf "$out"/tf
echo
echo "\$ mnist_softmax --jit=off --steps 100 --trace $out/tf_op_by_op.ctf.json"
"$sample" "${data[@]}" --jit=off --steps 100 --trace "$out"/tf_op_by_op.ctf.json 2>&1 |
  grep -E '^(mnist_softmax: /|test accuracy|time per step|last step)'
echo
echo "\$ TF_XLA_FLAGS=--tf_xla_clustering_debug TF_DUMP_GRAPH_PREFIX=$out/tf/graphs mnist_softmax --jit=auto --steps 100 --xla_dump_to=$out/tf --xla_dump_hlo_pass_re=.* --trace $out/tf/timeline.ctf.json"
# As in TensorFlow, the clustering graphs are written only with --tf_xla_clustering_debug.
TF_XLA_FLAGS=--tf_xla_clustering_debug TF_DUMP_GRAPH_PREFIX="$out"/tf/graphs "$sample" "${data[@]}" --jit=auto --steps 100 --xla_dump_to="$out"/tf \
  --xla_dump_hlo_pass_re='.*' --trace "$out"/tf/timeline.ctf.json 2>&1 |
  grep -E '^(test accuracy|time per step|last step|  .*\((cpu_kernel|library_call)\))'
run cluster samples/graphs/mnist_softmax/graph.pbtxt --jit-level=ON_1 --tf_xla_cpu_global_jit | sed -n 1,6p
echo "  ..."
# The training step's cluster (the one that applies the gradient), as the JIT compiled it: its
# per-HLO profile, and the same module for an NVIDIA GPU: compiling
# needs no GPU, and the dump holds the GPU pipeline's module, its LLVM IR and the PTX.
train=$(grep -l ResourceApplyGradientDescent "$out"/tf/module_*.before_optimizations.txt | head -n 1)
rm -rf "$out"/tf/gpu
echo
echo "\$ xlens run $out/tf/${train##*/} --iterations 20 --xla_hlo_profile"
"$xlens" run "$train" --iterations 20 --xla_hlo_profile 2>&1 | sed -n '/^Execution profile/,$p'
echo
echo "\$ xlens compile $out/tf/${train##*/} --emit=ptx --gpu_arch=sm_90 --xla_dump_to=$out/tf/gpu -o $out/tf/gpu/train_step.ptx"
"$xlens" compile "$train" --emit=ptx --gpu_arch=sm_90 --xla_dump_to="$out"/tf/gpu -o "$out"/tf/gpu/train_step.ptx
echo "  $(grep -c '^.visible .entry' "$out"/tf/gpu/train_step.ptx) GPU kernels:" \
  "$(sed -n 's/^.visible .entry \([A-Za-z0-9_]*\)(.*/\1/p' "$out"/tf/gpu/train_step.ptx | tr '\n' ' ')"
echo
echo "The clustering graphs are in $out/tf/graphs/; the cluster's module after every pass, its LLVM IR"
echo "(*.ir-no-opt.ll, *.ir-with-opt.ll) and manifest.json in $out/tf/; the same"
echo "module through the GPU pipeline, its LLVM IR and its PTX (*.ptx) in $out/tf/gpu/; the timelines"
echo "are $out/tf_op_by_op.ctf.json (many op-by-op boxes) and $out/tf/timeline.ctf.json (one"
echo "cluster launch holding a few fused kernels)."

if [ -n "$viewer" ]; then
  echo
  echo "xlens-viewer: the fused step's dump (every pass, the kernels, the timeline) in one window"
  run_viewer() {
    echo
    echo "\$ xlens-viewer $*"
    "$viewer" "$@" 2>&1
  }
  run_viewer "$out"/step --stage fusion --diff --screenshot "$out"/viewer_fusion_diff.png
  # The softmax's kernel (its max, exp and sum), by what it computes: fusions are numbered as the
  # passes leave them, and a pass that folds an instruction renumbers them.
  softmax=$(sed -n 's/^ *%\(fusion[.0-9]*\) = .*kind=kInput.*op_name="softmax_cross_entropy\/Max.*/\1/p' \
    "$out"/step/*.cpu_after_optimizations.txt | head -n 1)
  run_viewer "$out"/step --select "$softmax" --screenshot "$out"/viewer_kernel.png
  run_viewer "$out"/tf --stage fusion --diff --screenshot "$out"/viewer_tf_fusion.png
  echo
  echo "Look through them yourself (d: diff, ]/[: next/previous changed pass, ./,: fusion decisions,"
  echo "f: fit, /: search; W/A/S/D on the timeline):"
  echo "  $viewer $out/step"
  echo "  $viewer $out/tf"
else
  echo
  echo "(xlens-viewer was not built: scripts/setup.sh installs Qt 6 and Graphviz, then rerun.)"
fi

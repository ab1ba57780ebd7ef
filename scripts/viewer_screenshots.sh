#!/usr/bin/env bash
# Makes the README's pictures of xlens-viewer, with the viewer's own --screenshot, from a dump of
# the project's samples (tests/viewer/make_test_dump.sh: the MNIST softmax training step with every
# pass dumped and a trace of three runs, and TensorFlow's clustering of the TF1 linear regression).
# Usage: scripts/viewer_screenshots.sh [OUT_DIR]   (default docs/images)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/images}
scripts/build.sh --target xlens --target xlens-viewer | tail -n 1
dump=out/viewer_screenshots_dump
tests/viewer/make_test_dump.sh ./build/compiler/cli/xlens "$PWD" "$dump"
mkdir -p "$out"
viewer=./build/viewer/xlens-viewer
shot() {
  local name=$1
  shift
  $viewer "$dump" "$@" --size 1600x1000 --screenshot "$out/$name"
}
shot viewer_stages_graph.png
shot viewer_diff_fusion.png --stage fusion --diff
# The softmax's kernel (its max, exp and sum), found by what it computes, not by its number.
softmax=$(sed -n 's/^ *%\(fusion[.0-9]*\) = .*kind=kInput.*op_name="softmax_cross_entropy\/Max.*/\1/p' \
  "$dump"/*.cpu_after_optimizations.txt | head -n 1)
shot viewer_kernel_selected.png --select "$softmax"
shot viewer_clustering.png --stage mark_for_compilation --select weights/Initializer/random_uniform/mul

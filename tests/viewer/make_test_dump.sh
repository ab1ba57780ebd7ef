#!/usr/bin/env bash
# Makes the dump the viewer's tests open, as a user makes one: the MNIST softmax training step
# compiled with every pass dumped and run three times with a trace, and the TF1 linear regression
# clustered by TensorFlow's auto-clustering with its graphs dumped into the same directory.
# Usage: make_test_dump.sh XLENS SOURCE_DIR OUT_DIR
set -euo pipefail
xlens=$1 src=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
"$xlens" run "$src/samples/mnist_softmax_train_step.hlo" --inputs=random --iterations=3 \
  --xla_dump_to="$out" --xla_dump_hlo_pass_re='.*' --trace "$out/timeline.ctf.json" >/dev/null
S=$src/samples/graphs/linreg_tf1
TF_DUMP_GRAPH_PREFIX="$out/graphs" "$xlens" graph run "$S/graph.pbtxt" --init init \
  --feed x_observed="$S/x_observed.npy" --feed y_observed="$S/y_observed.npy" --fetch Mean \
  --target GradientDescent --steps 2 --jit=auto --jit-level=ON_1 --tf_xla_cpu_global_jit \
  --xla_dump_to="$out" --xla_dump_hlo_pass_re='.*' --tf_xla_clustering_debug >/dev/null
test -s "$out/manifest.json"

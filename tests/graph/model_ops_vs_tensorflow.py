#!/usr/bin/env python3
"""The ops Keras models and TensorFlow's runtime graphs use, against TensorFlow itself.

For each case (Einsum in every equation form TensorFlow accepts, Erfc and the special functions,
the bilinear and nearest resizes with align_corners and half_pixel_centers, Concat's gradient
through ConcatOffset) TensorFlow computes the outputs and the gradients of sum(output *
cotangent) with a GradientTape inside one tf.function; its graph holds TensorFlow's own gradient
ops (Einsum, ResizeBilinearGrad, ResizeNearestNeighborGrad, ConcatOffset, Digamma, ...). xlens
runs that graph op by op (--jit=off) and as one must-compile function (--jit=compile, the XLA
lowerings), and every output must agree with TensorFlow's within 1e-4 of its largest value.

Grappler's fused ops come from TensorFlow's own optimizer: the script builds Conv2D + BiasAdd +
Relu, Conv2D + FusedBatchNorm + Relu6, MatMul + BiasAdd + activation and FusedBatchNorm + Relu
(training and inference) on the CPU, runs grappler's remapper on it (tf_optimizer.OptimizeGraph,
the pass TensorFlow runs on every function before execution; TF_DUMP_GRAPH_PREFIX shows the same
graph as TensorFlow runs it), checks that _FusedConv2D, _FusedMatMul and _FusedBatchNormEx came
out, and runs the fused graph in xlens against the unfused graph's numbers in TensorFlow.

    python3 tests/graph/model_ops_vs_tensorflow.py --xlens build/compiler/cli/xlens [-v]

Exit 0 when every output agrees, 1 otherwise, 77 (skipped) without TensorFlow.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tf_driver  # noqa: E402

TOLERANCE = 1e-4
# float16 and bfloat16 results: within one unit in the last place of bfloat16 (2^-8).
HALF_TOLERANCE = 4e-3


def build_cases(tf, np):
    """(name, fn, inputs, differentiable input indices) for the graph xlens compiles too."""
    rng = np.random.default_rng(7)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def uniform(lo, hi, *shape):
        return rng.uniform(lo, hi, shape).astype(np.float32)

    E = tf.raw_ops.Einsum
    cases = [
        # MultiHeadAttention's projections and scores, as Keras writes them.
        ("einsum_proj", lambda x, w: E(inputs=[x, w], equation="abc,cde->abde"),
         [normal(2, 5, 8), normal(8, 2, 4)]),
        ("einsum_scores", lambda q, k: E(inputs=[q, k], equation="aecd,abcd->acbe"),
         [normal(2, 5, 2, 4), normal(2, 6, 2, 4)]),
        ("einsum_context", lambda p, v: E(inputs=[p, v], equation="acbe,aecd->abcd"),
         [normal(2, 2, 5, 6), normal(2, 6, 2, 4)]),
        ("einsum_out", lambda x, w: E(inputs=[x, w], equation="abcd,cde->abe"),
         [normal(2, 5, 2, 4), normal(2, 4, 8)]),
        # Ellipsis with broadcasting batch dimensions, on one side and on both.
        ("einsum_bcast", lambda x, y: E(inputs=[x, y], equation="...ij,...jk->...ik"),
         [normal(2, 1, 3, 4), normal(5, 4, 2)]),
        ("einsum_ell_one_side", lambda x, y: E(inputs=[x, y], equation="...ij,jk->...ik"),
         [normal(3, 2, 4), normal(4, 5)]),
        # Repeated labels (diagonals), labels summed out of one operand, a trace, an outer
        # product, an output diagonal, a transpose with a reduction, an ellipsis in the middle.
        ("einsum_diag", lambda x, y: E(inputs=[x, y], equation="iij,jk->ki"),
         [normal(3, 3, 2), normal(2, 4)]),
        ("einsum_sum_out", lambda x, y: E(inputs=[x, y], equation="bij,jk->b"),
         [normal(2, 3, 4), normal(4, 5)]),
        ("einsum_trace", lambda x: E(inputs=[x], equation="ii->"), [normal(4, 4)]),
        ("einsum_outer", lambda x, y: E(inputs=[x, y], equation="i,j->ij"),
         [normal(3), normal(4)]),
        ("einsum_out_diag", lambda x: E(inputs=[x], equation="ij->iij"), [normal(3, 2)]),
        ("einsum_transpose_sum", lambda x: E(inputs=[x], equation="abc->ca"),
         [normal(2, 3, 4)]),
        ("einsum_ell_mid", lambda x: E(inputs=[x], equation="a...b->b...a"),
         [normal(2, 3, 4, 5)]),
        ("einsum_upper", lambda x, y: E(inputs=[x, y], equation="aB,Bc->ca"),
         [normal(3, 4), normal(4, 2)]),
        # Exact GELU as Keras writes it, and the special functions.
        ("gelu_exact", lambda x: 0.5 * x * tf.math.erfc(-x / np.sqrt(2.0).astype(np.float32)),
         [normal(4, 7) * 3]),
        ("erfc_wide", lambda x: tf.math.erfc(x), [np.linspace(-6, 6, 25).astype(np.float32)]),
        ("erfinv", lambda x: tf.math.erfinv(x), [uniform(-0.999, 0.999, 30)]),
        ("ndtri", lambda x: tf.math.ndtri(x), [uniform(0.001, 0.999, 30)]),
        ("lgamma", lambda x: tf.math.lgamma(x),
         [np.concatenate([uniform(0.1, 8, 20), uniform(-3.9, -0.1, 10)])]),
        ("digamma", lambda x: tf.math.digamma(x),
         [np.concatenate([uniform(0.1, 8, 20), uniform(-3.9, -0.1, 10)])]),
        ("zeta", lambda x, q: tf.math.zeta(x, q),
         [uniform(1.5, 6, 2, 5), uniform(0.2, 5, 5)]),
        ("polygamma", lambda x: tf.math.polygamma(
            tf.constant([[0.], [1.], [2.], [3.]], tf.float32), x), [uniform(0.3, 6, 4, 6)]),
        # FusedBatchNormV3 (tf.compat.v1 and tf_keras layers) in training and inference, NHWC
        # and NCHW, through FusedBatchNormGradV3.
        ("batch_norm_train", lambda x, sc, of: tf.compat.v1.nn.fused_batch_norm(
            x, sc, of, epsilon=0.01, is_training=True)[0],
         [normal(2, 4, 5, 3), uniform(0.5, 1.5, 3), normal(3)]),
        ("batch_norm_train_stats", lambda x, sc, of: tf.concat(
            tf.compat.v1.nn.fused_batch_norm(x, sc, of, is_training=True)[1:], 0),
         [normal(2, 4, 5, 3), uniform(0.5, 1.5, 3), normal(3)]),
        ("batch_norm_infer_nchw", lambda x, sc, of, m, v: tf.compat.v1.nn.fused_batch_norm(
            x, sc, of, m, v, is_training=False, data_format="NCHW")[0],
         [normal(2, 3, 4, 5), uniform(0.5, 1.5, 3), normal(3), normal(3),
          uniform(0.5, 1.5, 3)]),
        ("batch_norm_train_nchw", lambda x, sc, of: tf.compat.v1.nn.fused_batch_norm(
            x, sc, of, is_training=True, data_format="NCHW")[0],
         [normal(2, 3, 4, 5), uniform(0.5, 1.5, 3), normal(3)]),
        # Concat's gradient: ConcatOffset and Slice.
        ("concat_grad", lambda a, b, c: tf.concat([a, b, c], axis=1),
         [normal(2, 3, 4), normal(2, 1, 4), normal(2, 5, 4)]),
    ]
    image = normal(2, 5, 7, 3)
    for ac, hp in [(False, False), (True, False), (False, True)]:
        for size in [(9, 11), (3, 4), (5, 14)]:
            tag = f"{'ac' if ac else ''}{'hp' if hp else ''}{size[0]}x{size[1]}"
            cases.append((f"bilinear_{tag}",
                          lambda x, s=size, a=ac, h=hp: tf.compat.v1.image.resize_bilinear(
                              x, s, align_corners=a, half_pixel_centers=h),
                          [image]))
            cases.append((f"nearest_{tag}",
                          lambda x, s=size, a=ac, h=hp: tf.compat.v1.image.resize_nearest_neighbor(
                              x, s, align_corners=a, half_pixel_centers=h),
                          [image]))
    cases.append(("resize_v2_bilinear",
                  lambda x: tf.image.resize(x, (8, 10), method="bilinear"), [image]))
    cases.append(("upsampling2d_nearest",
                  lambda x: tf.image.resize(x, (10, 14), method="nearest"), [image]))
    return cases


def half_cases(tf, np):
    """Keras' mixed precision: the same ops in float16 and bfloat16 (inputs as float16 arrays;
    bfloat16 ones cast inside)."""
    rng = np.random.default_rng(5)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float16)

    E = tf.raw_ops.Einsum
    bf16 = tf.bfloat16
    return [
        ("half_einsum", lambda x, w: E(inputs=[x, w], equation="abc,cde->abde"),
         [normal(2, 5, 8), normal(8, 2, 4)]),
        ("bf16_einsum", lambda x, w: E(inputs=[tf.cast(x, bf16), tf.cast(w, bf16)],
                                       equation="...ij,...jk->...ik"),
         [normal(2, 1, 3, 4), normal(5, 4, 2)]),
        ("half_erfc", lambda x: tf.math.erfc(x), [normal(3, 7)]),
        ("bf16_gelu", lambda x: tf.nn.gelu(tf.cast(x, bf16), approximate=False), [normal(3, 7)]),
        ("half_bilinear", lambda x: tf.compat.v1.image.resize_bilinear(x, (7, 9),
                                                                         half_pixel_centers=True),
         [normal(1, 4, 5, 2)]),
        ("half_nearest", lambda x: tf.compat.v1.image.resize_nearest_neighbor(x, (7, 9)),
         [normal(1, 4, 5, 2)]),
    ]


def make_graph(tf, np, cases, with_grads):
    """One tf.function over every case; returns (graph_def, feeds, fetches, reference)."""
    rng = np.random.default_rng(11)
    specs, values, names = [], [], []
    for name, _, inputs in cases:
        for i, v in enumerate(inputs):
            names.append(f"{name}_in{i}")
            specs.append(tf.TensorSpec(v.shape, tf.as_dtype(v.dtype), name=names[-1]))
            values.append(v)
    out_names = []

    def body(*args):
        outs = []
        out_names.clear()
        k = 0
        for name, fn, inputs in cases:
            xs = list(args[k:k + len(inputs)])
            k += len(inputs)
            with tf.GradientTape() as tape:
                for x in xs:
                    tape.watch(x)
                y = fn(*xs)
                y = tf.cast(y, tf.float32)
                cot = tf.constant(rng.standard_normal(y.shape.as_list()).astype(np.float32))
                loss = tf.reduce_sum(y * cot)
            outs.append(y)
            out_names.append(name)
            if with_grads:
                for i, g in enumerate(tape.gradient(loss, xs)):
                    if g is not None:
                        outs.append(g)
                        out_names.append(f"{name}/grad{i}")
        return outs

    fn = tf.function(body, input_signature=specs, autograph=False)
    cf = fn.get_concrete_function()
    reference = [t.numpy() for t in fn(*values)]
    fetches = [t.name for t in cf.outputs]
    return cf.graph.as_graph_def(), list(zip(names, values)), fetches, list(out_names), reference


def make_fused_graph(tf, np, batch_norm_only=False):
    """A CPU graph grappler's remapper fuses; returns (graph_def, feeds, fetches, names,
    reference). batch_norm_only: the _FusedBatchNormEx part alone (it compiles)."""
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.framework import meta_graph
    from tensorflow.python.grappler import tf_optimizer

    rng = np.random.default_rng(3)

    def const(*shape, lo=None, hi=None):
        v = (rng.uniform(lo, hi, shape) if lo is not None else rng.standard_normal(shape))
        return tf.constant(v.astype(np.float32))

    fetch = []
    g = tf.Graph()
    with g.as_default(), tf.device("/CPU:0"):
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3], name="x")
        a = tf.compat.v1.placeholder(tf.float32, [4, 6], name="a")
        w, b = const(3, 3, 3, 4), const(4)
        sc, of, mu, var = (const(4, lo=0.5, hi=1.5) for _ in range(4))
        tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b), name="conv_bias_relu")
        tf.nn.elu(tf.nn.bias_add(tf.nn.conv2d(x, w, 2, "VALID"), b), name="conv_bias_elu")
        bn, _, _ = tf.compat.v1.nn.fused_batch_norm(tf.nn.conv2d(x, w, 1, "VALID"), sc, of, mu,
                                                    var, is_training=False, epsilon=0.01)
        tf.nn.relu6(bn, name="conv_bn_relu6")
        m, mb = const(6, 5), const(5)
        tf.nn.relu(tf.nn.bias_add(tf.matmul(a, m), mb), name="matmul_bias_relu")
        tf.identity(tf.nn.leaky_relu(tf.nn.bias_add(tf.matmul(a, m), mb), 0.3),
                    name="matmul_bias_leaky")
        tf.identity(tf.nn.bias_add(tf.matmul(a, m, transpose_b=False), mb), name="matmul_bias")
        s3, o3, m3, v3 = (const(3, lo=0.5, hi=1.5) for _ in range(4))
        y, bmean, bvar = tf.compat.v1.nn.fused_batch_norm(x, s3, o3, is_training=True)
        tf.nn.relu(y, name="bn_train_relu")
        tf.identity(bmean, name="bn_train_mean")
        tf.identity(bvar, name="bn_train_var")
        y2, _, _ = tf.compat.v1.nn.fused_batch_norm(x, s3, o3, m3, v3, is_training=False)
        tf.nn.relu(y2, name="bn_infer_relu")
        # oneDNN activations and Keras' LayerNormalization as tf.nn writes it.
        tf.identity(a * tf.sigmoid(a), name="swish")
        tf.identity(a * tf.tanh(tf.math.softplus(a)), name="mish")
        mean, variance = tf.nn.moments(a, axes=[-1], keepdims=True)
        inv = tf.math.rsqrt(variance + 0.001) * const(6)
        ln = a * inv + (-mean * inv + const(6))
        tf.identity(ln, name="layer_norm")
        fetch = ["bn_train_relu", "bn_train_mean", "bn_train_var", "bn_infer_relu"]
        if not batch_norm_only:
            fetch += ["swish", "mish", "layer_norm", "conv_bias_relu", "conv_bias_elu", "conv_bn_relu6", "matmul_bias_relu",
                      "matmul_bias_leaky", "matmul_bias"]
    feeds = [("x", rng.standard_normal((2, 8, 8, 3)).astype(np.float32)),
             ("a", rng.standard_normal((4, 6)).astype(np.float32))]
    with tf.compat.v1.Session(graph=g) as sess:
        reference = sess.run([f + ":0" for f in fetch], {k + ":0": v for k, v in feeds})
    mg = meta_graph.create_meta_graph_def(graph=g)
    mg.collection_def["train_op"].node_list.value.extend(fetch)
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.optimizers[:] = ["remap"]
    rewrite.min_graph_nodes = -1
    fused = tf_optimizer.OptimizeGraph(config, mg)
    return fused, feeds, [f + ":0" for f in fetch], fetch, reference


def run_xlens(np, xlens, graph_def, feeds, fetches, jit, work, verbose):
    path = os.path.join(work, f"graph_{jit}.pb")
    with open(path, "wb") as f:
        f.write(graph_def.SerializeToString())
    saved = tf_driver.save_feeds(np, work, feeds)
    p = tf_driver.graph_run(xlens, path, saved, fetches, os.path.join(work, jit), ["--jit", jit],
                            env=dict(os.environ, TF_XLA_FLAGS=""), timeout=300)
    if p.returncode != 0:
        return None, (p.stderr.strip() or p.stdout.strip())[-2000:]
    return tf_driver.load_outputs(np, os.path.join(work, jit), len(fetches)), ""


def compare(np, what, names, got, want, verbose, tolerance=TOLERANCE):
    bad = 0
    for name, g, w in zip(names, got, want):
        w = np.asarray(w, dtype=np.float64)
        g = np.asarray(g, dtype=np.float64)
        if g.shape != w.shape:
            print(f"FAIL {what} {name}: shape {g.shape}, TensorFlow {w.shape}")
            bad += 1
            continue
        err, scale = tf_driver.max_error(np, g, w, 1e-30)
        err /= scale
        if not np.isfinite(err) or err > tolerance:
            print(f"FAIL {what} {name}: max error {err:.3g} of the largest value {scale:.3g}")
            bad += 1
        elif verbose:
            print(f"ok   {what} {name}: {err:.2g}")
    return bad


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xlens", required=True)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    tf, np = tf_driver.tensorflow_or_skip()
    failures = 0
    cases = build_cases(tf, np)
    # ResizeNearestNeighborGrad has no XLA kernel in TensorFlow: the nearest resizes' gradients
    # run op by op only; their forward passes compile with the rest.
    compiled = [c for c in cases if not c[0].startswith(("nearest", "upsampling"))]
    nearest = [c for c in cases if c[0].startswith(("nearest", "upsampling"))]
    with tempfile.TemporaryDirectory(prefix="xlens_model_ops_") as work:
        runs = [
            ("cases", make_graph(tf, np, compiled, with_grads=True), ["off", "compile"]),
            ("nearest", make_graph(tf, np, nearest, with_grads=True), ["off"]),
            ("nearest_forward", make_graph(tf, np, nearest, with_grads=False), ["compile"]),
            # 16-bit floats: outputs within their rounding (forward only: ResizeNearestNeighborGrad
            # has no XLA kernel, and the gradients' rounding compounds).
            ("half", make_graph(tf, np, half_cases(tf, np), with_grads=False), ["off", "compile"]),
        ]
        fused = make_fused_graph(tf, np)
        ops = {n.op for n in fused[0].node}
        missing = {"_FusedConv2D", "_FusedMatMul", "_FusedBatchNormEx"} - ops
        if args.verbose:
            print("grappler's fused ops:", sorted(op for op in ops if op.startswith("_")))
        if missing:
            print(f"FAIL grappler's remapper did not make {sorted(missing)} (ops: {sorted(ops)})")
            failures += 1
        runs.append(("fused", fused, ["off"]))
        # TensorFlow's XLA compiles _FusedBatchNormEx (not the float _FusedConv2D/_FusedMatMul).
        runs.append(("fused_batch_norm", make_fused_graph(tf, np, batch_norm_only=True),
                     ["off", "compile"]))
        for label, (graph_def, feeds, fetches, names, reference), jits in runs:
            for jit in jits:
                got, err = run_xlens(np, args.xlens, graph_def, feeds, fetches, jit, work,
                                     args.verbose)
                what = f"{label} --jit={jit}"
                if got is None:
                    print(f"FAIL {what}: xlens failed: {err}")
                    failures += 1
                    continue
                bad = compare(np, what, names, got, reference, args.verbose,
                              HALF_TOLERANCE if label == "half" else TOLERANCE)
                failures += bad
                print(f"{what}: {len(names) - bad} of {len(names)} outputs agree with TensorFlow")
    print("PASS" if failures == 0 else f"{failures} failures")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

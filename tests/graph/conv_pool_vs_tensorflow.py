#!/usr/bin/env python3
"""Depthwise and 3-D convolutions and 3-D poolings give TensorFlow's numbers, op by op and with
the JIT.

TensorFlow 2.21 builds one graph of many cases (DepthwiseConv2dNative, Conv3D, AvgPool3D,
MaxPool3D with their backprops, over shapes, strides, paddings including EXPLICIT, dilations,
depth multipliers and both data formats, plus tf.gradients through each forward op: TensorFlow's
own gradient functions) and computes every fetch. xlens runs the same GraphDef with
`xlens graph run` op by op and with `--jit=compile` (the whole graph as one XLA function), and
each fetch must be within 1e-4 of TensorFlow's, relative to the fetch's largest value.
Exits 77 (skipped) when TensorFlow or NumPy cannot be imported.

usage: conv_pool_vs_tensorflow.py --xlens path/to/xlens [--keep DIR]
"""
import atexit
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tf_driver  # noqa: E402

TOLERANCE = 1e-4


def build_cases(tf, np):
    """Returns (graph_def, feeds {name: array}, fetches [(label, tensor_name)])."""
    rng = np.random.default_rng(7)
    raw = tf.raw_ops
    feeds, fetches = {}, []
    graph = tf.Graph()

    def placeholder(shape, dtype=np.float32):
        name = f"in{len(feeds)}"
        value = rng.standard_normal(shape).astype(dtype)
        feeds[name] = value
        return tf.compat.v1.placeholder(tf.as_dtype(dtype), shape, name=name)

    def fetch(label, t):
        fetches.append((label, t.name))

    def nchw(shape):
        return [shape[0], shape[3], shape[1], shape[2]]

    with graph.as_default():
        # DepthwiseConv2dNative: input NHWC shape, filter [kh, kw, c, m], strides, padding,
        # explicit paddings (NHWC order), dilations, data format.
        depthwise = [
            ((2, 9, 9, 4), (3, 3, 4, 1), (1, 1), "SAME", None, (1, 1), "NHWC"),
            ((1, 10, 8, 3), (3, 3, 3, 2), (2, 2), "SAME", None, (1, 1), "NHWC"),
            ((1, 11, 11, 5), (5, 5, 5, 1), (2, 2), "VALID", None, (1, 1), "NHWC"),
            ((2, 7, 9, 4), (3, 2, 4, 3), (2, 2), "EXPLICIT", (1, 2, 0, 3), (1, 1), "NHWC"),
            ((1, 9, 9, 6), (3, 3, 6, 1), (1, 1), "SAME", None, (2, 2), "NHWC"),
            ((1, 12, 10, 2), (3, 3, 2, 2), (2, 2), "VALID", None, (2, 3), "NHWC"),
            ((2, 8, 8, 4), (3, 3, 4, 2), (2, 2), "SAME", None, (1, 1), "NCHW"),
            ((1, 7, 7, 3), (2, 3, 3, 1), (1, 1), "EXPLICIT", (2, 0, 1, 1), (1, 2), "NCHW"),
        ]
        for i, (xs, fs, st, pad, exp, dil, fmt) in enumerate(depthwise):
            x = placeholder(nchw(xs) if fmt == "NCHW" else xs)
            f = placeholder(fs)
            spatial = lambda v: [1, 1, v[0], v[1]] if fmt == "NCHW" else [1, v[0], v[1], 1]
            explicit = []
            if exp:
                explicit = [0, 0, 0, 0, exp[0], exp[1], exp[2], exp[3]] if fmt == "NCHW" else \
                    [0, 0, exp[0], exp[1], exp[2], exp[3], 0, 0]
            attrs = dict(strides=spatial(st), padding=pad, explicit_paddings=explicit,
                         dilations=spatial(dil), data_format=fmt)
            y = raw.DepthwiseConv2dNative(input=x, filter=f, **attrs)
            fetch(f"depthwise{i}", y)
            if dil != (1, 1):
                # TensorFlow's CPU backprops ignore the dilations (their results are not the
                # forward op's adjoint); ours are checked as adjoints in the unit tests.
                continue
            dy = tf.constant(rng.standard_normal(y.shape).astype(np.float32))
            dx, df = tf.gradients(y, [x, f], grad_ys=dy)
            fetch(f"depthwise{i}/d_input", dx)
            fetch(f"depthwise{i}/d_filter", df)
            if i == 1:
                # Second order: the backprops' own gradients.
                ddx = tf.gradients(tf.reduce_sum(dx * dx), [f, dy])
                fetch(f"depthwise{i}/dd_filter", ddx[0])
                fetch(f"depthwise{i}/dd_dy", ddx[1])
        # The mobile-network block: depthwise 3x3 stride 2, float64.
        x = placeholder((1, 16, 16, 8), np.float64)
        f = placeholder((3, 3, 8, 1), np.float64)
        fetch("depthwise_f64", raw.DepthwiseConv2dNative(input=x, filter=f, strides=[1, 2, 2, 1],
                                                         padding="SAME"))

        # Mixed precision: half and bfloat16 run in float and round once, as TensorFlow's CPU
        # kernels do (compared at 16-bit precision).
        for dtype in (tf.float16, tf.bfloat16):
            x = placeholder((1, 9, 9, 4))
            f = placeholder((3, 3, 4, 2))
            xh, fh = tf.cast(x, dtype), tf.cast(f, dtype)
            y = raw.DepthwiseConv2dNative(input=xh, filter=fh, strides=[1, 2, 2, 1], padding="SAME")
            fetch(f"depthwise_{dtype.name}", tf.cast(y, tf.float32))
            dx, df = tf.gradients(y, [xh, fh], grad_ys=tf.ones_like(y))
            fetch(f"depthwise_{dtype.name}/d_input", tf.cast(dx, tf.float32))
            fetch(f"depthwise_{dtype.name}/d_filter", tf.cast(df, tf.float32))
            if dtype == tf.float16:
                continue  # TensorFlow's CPU MaxPool3D has no half kernel
            x = placeholder((1, 4, 4, 4, 2))
            y = raw.MaxPool3D(input=tf.cast(x, dtype), ksize=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1],
                              padding="VALID")
            fetch(f"maxpool3d_{dtype.name}", tf.cast(y, tf.float32))

        # Conv3D: input NDHWC, filter [kd, kh, kw, in, out], strides, padding, dilations, format.
        conv3d = [
            ((1, 6, 6, 6, 3), (3, 3, 3, 3, 4), (1, 1, 1), "SAME", (1, 1, 1), "NDHWC"),
            ((2, 7, 6, 5, 2), (2, 3, 2, 2, 3), (2, 1, 2), "VALID", (1, 1, 1), "NDHWC"),
            ((1, 8, 8, 8, 2), (3, 3, 3, 2, 2), (2, 2, 2), "SAME", (1, 1, 1), "NDHWC"),
            ((1, 7, 7, 7, 2), (2, 2, 2, 2, 3), (1, 1, 1), "SAME", (2, 1, 2), "NDHWC"),
            ((1, 6, 5, 6, 3), (3, 2, 3, 3, 2), (1, 2, 1), "SAME", (1, 1, 1), "NCDHW"),
        ]
        for i, (xs, fs, st, pad, dil, fmt) in enumerate(conv3d):
            cf = fmt == "NCDHW"
            x = placeholder([xs[0], xs[4], xs[1], xs[2], xs[3]] if cf else xs)
            f = placeholder(fs)
            spatial = lambda v: [1, 1, *v] if cf else [1, *v, 1]
            attrs = dict(strides=spatial(st), padding=pad, dilations=spatial(dil), data_format=fmt)
            y = raw.Conv3D(input=x, filter=f, **attrs)
            fetch(f"conv3d{i}", y)
            dy = tf.constant(rng.standard_normal(y.shape).astype(np.float32))
            dx, df = tf.gradients(y, [x, f], grad_ys=dy)
            fetch(f"conv3d{i}/d_input", dx)
            fetch(f"conv3d{i}/d_filter", df)
        # Conv3DTranspose as Keras builds it, and its gradients.
        x = placeholder((1, 3, 3, 3, 4))
        f = placeholder((2, 2, 2, 3, 4))
        y = raw.Conv3DBackpropInputV2(input_sizes=[1, 6, 6, 6, 3], filter=f, out_backprop=x,
                                      strides=[1, 2, 2, 2, 1], padding="VALID")
        fetch("conv3d_transpose", y)
        dy = tf.constant(rng.standard_normal(y.shape).astype(np.float32))
        dx, df = tf.gradients(y, [x, f], grad_ys=dy)
        fetch("conv3d_transpose/d_input", dx)
        fetch("conv3d_transpose/d_filter", df)

        # 3-D pooling: input NDHWC, ksize, strides, padding, format.
        pools = [
            ((1, 6, 6, 6, 3), (2, 2, 2), (2, 2, 2), "VALID", "NDHWC"),
            ((2, 5, 7, 6, 2), (3, 3, 2), (2, 2, 1), "SAME", "NDHWC"),
            ((1, 4, 5, 6, 3), (2, 3, 3), (1, 2, 2), "SAME", "NCDHW"),
        ]
        for i, (xs, ks, st, pad, fmt) in enumerate(pools):
            cf = fmt == "NCDHW"
            x = placeholder([xs[0], xs[4], xs[1], xs[2], xs[3]] if cf else xs)
            spatial = lambda v: [1, 1, *v] if cf else [1, *v, 1]
            attrs = dict(ksize=spatial(ks), strides=spatial(st), padding=pad, data_format=fmt)
            for kind, op in (("avg", raw.AvgPool3D), ("max", raw.MaxPool3D)):
                y = op(input=x, **attrs)
                fetch(f"{kind}pool3d{i}", y)
                dy = tf.constant(rng.standard_normal(y.shape).astype(np.float32))
                (dx,) = tf.gradients(y, [x], grad_ys=dy)
                fetch(f"{kind}pool3d{i}/d_input", dx)
    return graph.as_graph_def(), feeds, fetches, graph


def compare(np, label, ours, theirs, failures):
    # 16-bit results agree to their precision (a rounding of the float sum apart).
    tolerance = 1e-2 if "float16" in label or "bfloat16" in label else TOLERANCE
    if ours.shape != theirs.shape:
        failures.append(f"{label}: shape {list(ours.shape)}, TensorFlow {list(theirs.shape)}")
        return 0.0
    err, scale = tf_driver.max_error(np, ours, theirs, 1e-30)
    err /= scale
    if not err <= tolerance:
        failures.append(f"{label}: max error {err:.3g} relative to the largest value")
    return err


def main():
    args = tf_driver.parse_args("write the graph, feeds and outputs here")
    tf, np = tf_driver.tensorflow_or_skip()
    tf.compat.v1.disable_eager_execution()

    graph_def, feeds, fetches, graph = build_cases(tf, np)
    with tf.compat.v1.Session(graph=graph) as session:
        expected = session.run([name for _, name in fetches],
                               {f"{name}:0": value for name, value in feeds.items()})

    work = args.keep or tempfile.mkdtemp(prefix="conv_pool_vs_tf.")
    if not args.keep:
        # What this check writes is scratch unless the user asked to keep it.
        atexit.register(shutil.rmtree, work, True)
    os.makedirs(work, exist_ok=True)
    graph_path = os.path.join(work, "cases.pb")
    with open(graph_path, "wb") as f:
        f.write(graph_def.SerializeToString())
    saved = tf_driver.save_feeds(np, work, feeds.items())

    failures = []
    worst = {}
    for jit in ("off", "compile"):
        out_dir = os.path.join(work, f"out_{jit}")
        os.makedirs(out_dir, exist_ok=True)
        run = tf_driver.graph_run(args.xlens, graph_path, saved, [name for _, name in fetches],
                                  out_dir, ["--jit", jit], timeout=600)
        if run.returncode != 0:
            failures.append(f"--jit={jit}: xlens failed: {run.stderr.strip()[:2000]}")
            continue
        for i, ((label, _), theirs) in enumerate(zip(fetches, expected)):
            ours = np.load(os.path.join(out_dir, f"out{i}.npy"))
            err = compare(np, f"--jit={jit} {label}", ours, theirs, failures)
            key = "16-bit" if "float16" in label else "32- and 64-bit"
            worst.setdefault((jit, key), 0.0)
            worst[(jit, key)] = max(worst[(jit, key)], err)
    for (jit, key), err in sorted(worst.items()):
        print(f"--jit={jit}: worst error {err:.3g} of the largest value over the {key} fetches")
    if failures:
        print("\n".join(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Keras 3's dropout under `xlens graph run --jit=compile` gives TensorFlow's must-compiled numbers
bit for bit: StatelessRandomGetKeyCounter and StatelessRandomUniformV2 (what
tf.random.stateless_uniform and tf.nn.experimental.stateless_dropout build, and Keras 3's Dropout
calls with the seed its SeedGenerator draws) are lowered as TensorFlow's XLA lowers them on CPU.

Cases, each a TF1-style graph for xlens and the same body as tf.function(jit_compile=True) for the
reference: the key, counter and uniform floats for int32 and int64 seeds (a negative int32 one
too, whose words XLA zero-extends); the V1 uniform and normal and the V2 normal (Box-Muller on
pairs of uniforms: within the tolerance); the V1 and V2 truncated normals (erfinv of uniforms,
within the tolerance), uniform integers V2 of 32 and 64 bits and StatelessRandomGetAlg; stateless_dropout of an activation; and a training step of a
dense layer with dropout (loss and gradients, the weights fed). Uniforms, keys, counters and the
dropped elements must be identical; other values (tanh's last bit may differ) agree within 1e-6
of the largest reference value.
TensorFlow's op-by-op kernels give other uniforms from the same key (they take the low 23 bits of
each Philox word, XLA the high ones); that difference is printed, not checked.

Exits 77 (skipped) when tensorflow cannot be imported."""

import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tf_driver  # noqa: E402

TOLERANCE = 1e-6


def cases(tf, np):
    """(name, feeds {name: array}, body(*placeholders) -> list of tensors, check) tuples; check is
    "bits" (identical), "mask" (the same elements dropped, the rest close) or "close"."""
    rng = np.random.RandomState(3)
    f32 = np.float32
    x = rng.randn(8, 6).astype(f32)
    w = (rng.randn(6, 4) * 0.5).astype(f32)
    y = rng.randn(8, 4).astype(f32)

    def raw(seed):
        key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
        u = tf.raw_ops.StatelessRandomUniformV2(shape=[4, 5], key=key, counter=counter, alg=3)
        return [key, counter, u]

    def v1_and_normals(seed):
        key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
        return [tf.raw_ops.StatelessRandomUniform(shape=[3, 7], seed=seed),
                tf.raw_ops.StatelessRandomNormal(shape=[3, 7], seed=seed),
                tf.raw_ops.StatelessRandomNormalV2(shape=[64], key=key, counter=counter, alg=3)]

    def truncated_and_ints(seed):
        key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
        alg = tf.raw_ops.StatelessRandomGetAlg()
        return [tf.raw_ops.StatelessTruncatedNormalV2(shape=[5, 9], key=key, counter=counter,
                                                      alg=alg),
                tf.raw_ops.StatelessTruncatedNormal(shape=[257], seed=seed),
                tf.raw_ops.StatelessRandomUniformIntV2(shape=[6, 5], key=key, counter=counter,
                                                       alg=alg, minval=-7, maxval=1000),
                tf.raw_ops.StatelessRandomUniformIntV2(
                    shape=[9], key=key, counter=counter, alg=3,
                    minval=tf.constant(-(1 << 40), tf.int64), maxval=tf.constant(1 << 41, tf.int64)),
                alg]

    def dropout(seed, x):
        return [tf.nn.experimental.stateless_dropout(tf.tanh(x), rate=0.3, seed=seed)]

    def step(seed, x, w, y):
        with tf.GradientTape() as tape:
            tape.watch(w)
            h = tf.nn.experimental.stateless_dropout(tf.nn.relu(tf.matmul(x, w)), 0.25, seed=seed)
            loss = tf.reduce_mean(tf.square(h - y))
        return [loss, tape.gradient(loss, w)]

    out = []
    for seed in (np.array([1, 2], np.int32), np.array([-3, 7], np.int32),
                 np.array([123456789012, -5], np.int64)):
        out.append((f"key_counter_uniform{seed.tolist()}", {"seed": seed}, raw, "bits"))
    out.append(("v1_uniform_and_normals", {"seed": np.array([5, -9], np.int32)},
                v1_and_normals, "close"))
    # tf.random.stateless_truncated_normal (Keras's TruncatedNormal initializer) and
    # stateless_uniform's integers: the integers and the algorithm identical, the truncated
    # normals (erfinv of the uniforms) within the tolerance.
    out.append(("truncated_normal_and_ints", {"seed": np.array([17, -4], np.int32)},
                truncated_and_ints, "close"))
    out.append(("stateless_dropout", {"seed": np.array([42, 0], np.int64), "x": x}, dropout,
                "mask"))
    out.append(("dropout_training_step",
                {"seed": np.array([7, 11], np.int64), "x": x, "w": w, "y": y}, step, "close"))
    return out


def main():
    args = tf_driver.parse_args("write the graphs and arrays here")
    tf, np = tf_driver.tensorflow_or_skip()
    tf.get_logger().setLevel("ERROR")

    failures, passed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        for name, feeds, body, check in cases(tf, np):
            specs = [tf.TensorSpec(v.shape, tf.as_dtype(v.dtype), name=k) for k, v in feeds.items()]
            compiled = tf.function(body, jit_compile=True, input_signature=specs)
            reference = [t.numpy() for t in compiled(*feeds.values())]
            plain = tf.function(body, input_signature=specs)
            op_by_op = [t.numpy() for t in plain(*feeds.values())]
            g = tf.Graph()
            with g.as_default():
                placeholders = [tf.compat.v1.placeholder(tf.as_dtype(v.dtype), v.shape, name=k)
                                for k, v in feeds.items()]
                outs = [tf.identity(t, name=f"out_{i}") for i, t in enumerate(body(*placeholders))]
            stem = "".join(c if c.isalnum() else "_" for c in name)
            graph_file = os.path.join(work, f"{stem}.pb")
            with open(graph_file, "wb") as f:
                f.write(g.as_graph_def().SerializeToString())
            outdir = os.path.join(work, f"{stem}_out")
            saved = tf_driver.save_feeds(np, work, feeds.items(), stem=f"{stem}.")
            r = tf_driver.graph_run(args.xlens, graph_file, saved, [t.op.name for t in outs],
                                    outdir, ["--jit=compile", "--timeout=60"])
            if r.returncode != 0:
                failures.append(f"{name}: xlens exited {r.returncode}: {r.stderr.strip()[-400:]}")
                continue
            bad = []
            for i, ref in enumerate(reference):
                before = len(bad)
                ours = np.load(os.path.join(outdir, f"out{i}.npy"))
                if ours.shape != ref.shape or ours.dtype != ref.dtype:
                    bad.append(f"out{i}: {ours.dtype}{list(ours.shape)} vs "
                               f"{ref.dtype}{list(ref.shape)}")
                elif check == "bits" and not np.array_equal(ours, ref):
                    bad.append(f"out{i}: {int(np.sum(ours != ref))} of {ref.size} differ")
                elif check == "mask" and not np.array_equal(ours == 0, ref == 0):
                    bad.append(f"out{i}: {int(np.sum((ours == 0) != (ref == 0)))} of {ref.size} "
                               "dropped differently")
                if check != "bits" and len(bad) == before:
                    err, scale = tf_driver.max_error(np, ours, ref, 1e-30)
                    if err > TOLERANCE * scale:
                        bad.append(f"out{i}: off by {err:.3g} (scale {scale:.3g})")
            differ = sum(int(not np.array_equal(a, b)) for a, b in zip(op_by_op, reference))
            print(f"{name}: TensorFlow op by op differs from its jit_compile in {differ} of "
                  f"{len(reference)} outputs")
            (failures.append(f"{name}: {'; '.join(bad)}") if bad else passed.append(name))
    return tf_driver.finish(failures, f"{len(passed)} cases agree with TensorFlow's jit_compile "
                                      f"({', '.join(passed)}); {len(failures)} failures")


if __name__ == "__main__":
    sys.exit(main())

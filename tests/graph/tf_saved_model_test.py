#!/usr/bin/env python3
"""SavedModels as TensorFlow writes them run in xlens to TensorFlow's numbers.

TensorFlow 2.21 saves: a tf.Module with variables of several dtypes and shapes (float32, float64,
float16, int32, int64, bool), a module whose large variables are split across checkpoint shards
and into slices (MaxShardSizePolicy), a module with two signatures, a TF1 simple_save of a
Session (a reference variable, no object graph), and a Keras model through model.export(). For
each signature, `xlens graph run DIR --signature KEY` with the inputs as .npy files gives
TensorFlow's outputs (within 1e-5, relative to the largest) op by op, with --jit=auto and with
--jit=compile, and every variable xlens reads (`xlens graph run` of a signature that returns it)
equals tf.train.load_checkpoint's value. A TF2 function graph whose variables are captured
resource Placeholders runs with `--assign CAPTURE=FILE.npy` to the function's result.

Exits 77 (skipped) when tensorflow cannot be imported."""

import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tf_driver  # noqa: E402

TOLERANCE = 1e-5


def run_xlens(xlens, args, outputs_dir):
    """`xlens graph run ARGS` (the graph first) into `outputs_dir`; raises when it fails."""
    os.makedirs(outputs_dir, exist_ok=True)
    proc = tf_driver.graph_run(xlens, args[0], [], [], outputs_dir, args[1:])
    if proc.returncode != 0:
        raise RuntimeError(f"xlens graph run {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def close(want, got):
    want = np.asarray(want)
    got = np.asarray(got)
    if want.dtype.kind in "SUO" or got.dtype.kind in "SUO":
        return want.tolist() == got.tolist(), "strings"
    if want.shape != got.shape:
        return False, f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind == "b" or want.dtype.kind in "iu":
        return np.array_equal(want, got), "exact"
    err, scale = tf_driver.max_error(np, got, want, 1.0)
    return err <= TOLERANCE * scale, f"max error {err:.3g} (scale {scale:.3g})"


def build_models(tf, root):
    """Saves the models; returns [(name, dir, signature, {input: array}, {output: array})]."""
    cases = []
    rng = np.random.default_rng(7)

    class Typed(tf.Module):
        def __init__(self):
            self.w = tf.Variable(rng.standard_normal((4, 3)).astype(np.float32), name="w")
            self.b = tf.Variable(np.array([0.5, -1.0, 2.0], np.float32), name="b")
            self.d = tf.Variable(np.float64(2.25), name="d")
            self.i = tf.Variable(np.arange(6, dtype=np.int32).reshape(2, 3), name="i")
            self.l = tf.Variable(np.array([7, -3, 1 << 40], np.int64), name="l")
            self.m = tf.Variable(np.array([True, False, True]), name="m")
            self.h = tf.Variable(rng.standard_normal((2, 2)).astype(np.float16), name="h")

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def __call__(self, x):
            y = tf.nn.relu(tf.matmul(x, self.w) + self.b)
            masked = tf.where(self.m, y, tf.zeros_like(y))
            return {"y": masked, "s": tf.cast(tf.reduce_sum(self.i), tf.float64) * self.d,
                    "l": self.l * 2, "h": tf.cast(self.h, tf.float32) + 1.0}

        @tf.function(input_signature=[])
        def variables_out(self):
            return {"w": self.w.read_value(), "b": self.b.read_value(), "d": self.d.read_value(),
                    "i": self.i.read_value(), "l": self.l.read_value(), "m": self.m.read_value(),
                    "h": self.h.read_value()}

    typed = Typed()
    path = os.path.join(root, "typed")
    tf.saved_model.save(typed, path, signatures={"serving_default": typed.__call__,
                                                 "variables": typed.variables_out})
    x = rng.standard_normal((5, 4)).astype(np.float32)
    cases.append(("typed", path, "serving_default", {"x": x},
                  {k: v.numpy() for k, v in typed(tf.constant(x)).items()}))
    cases.append(("typed", path, "variables", {}, {k: v.numpy() for k, v in typed.variables_out().items()}))

    # Large variables split across shards and into slices.
    big = tf.Module()
    big.v = tf.Variable(tf.random.stateless_normal([300, 400], seed=[1, 2]))
    big.u = tf.Variable(tf.random.stateless_normal([400, 50], seed=[3, 4]))
    big.f = tf.function(lambda x: tf.matmul(tf.matmul(x, big.v), big.u),
                        input_signature=[tf.TensorSpec([2, 300], tf.float32, name="x")])
    big.g = tf.function(lambda: {"v": big.v.read_value(), "u": big.u.read_value()}, input_signature=[])
    path = os.path.join(root, "sharded")
    options = tf.saved_model.SaveOptions(
        experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(max_shard_size=200000))
    tf.saved_model.save(big, path, signatures={"serving_default": big.f, "variables": big.g}, options=options)
    x = rng.standard_normal((2, 300)).astype(np.float32)
    cases.append(("sharded", path, "serving_default", {"x": x}, {"output_0": big.f(tf.constant(x)).numpy()}))
    cases.append(("sharded", path, "variables", {}, {k: v.numpy() for k, v in big.g().items()}))

    # Two signatures over shared variables.
    class Two(tf.Module):
        def __init__(self):
            self.scale = tf.Variable(3.0)
            self.table = tf.Variable(rng.standard_normal((10, 4)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="ids")])
        def lookup(self, ids):
            return {"rows": tf.gather(self.table, ids) * self.scale}

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32, name="a"),
                                      tf.TensorSpec([3], tf.float32, name="b")])
        def mix(self, a, b):
            return {"out": a * b + self.scale, "norm": tf.reduce_sum(self.table ** 2)}

    two = Two()
    path = os.path.join(root, "two_signatures")
    tf.saved_model.save(two, path, signatures={"lookup": two.lookup, "mix": two.mix})
    ids = np.array([3, 0, 9, 3], np.int32)
    cases.append(("two_signatures", path, "lookup", {"ids": ids},
                  {"rows": two.lookup(tf.constant(ids))["rows"].numpy()}))
    a, b = np.float32(1.5), np.array([1, -2, 0.25], np.float32)
    cases.append(("two_signatures", path, "mix", {"a": a, "b": b},
                  {k: v.numpy() for k, v in two.mix(tf.constant(a), tf.constant(b)).items()}))

    # A TF1 SavedModel (simple_save of a Session): a resource and a reference variable, checkpoint
    # keys by variable name, no object graph.
    with tf.Graph().as_default():
        x1 = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        w1 = tf.compat.v1.get_variable("dense/kernel", initializer=rng.standard_normal((3, 2)).astype(np.float32))
        r1 = tf.compat.v1.get_variable("ref", initializer=np.float32(2.0), use_resource=False)
        y1 = tf.matmul(x1, w1) * r1
        path = os.path.join(root, "tf1")
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            if os.path.exists(path):
                import shutil
                shutil.rmtree(path)
            tf.compat.v1.saved_model.simple_save(session, path, {"x": x1}, {"y": y1})
            x = rng.standard_normal((4, 3)).astype(np.float32)
            cases.append(("tf1", path, "serving_default", {"x": x}, {"y": session.run(y1, {x1: x})}))

    # A Keras model through model.export(), its endpoint named serve.
    import keras
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((8,), name="features"), keras.layers.Dense(16, activation="tanh"),
                              keras.layers.Dense(4)])
    path = os.path.join(root, "keras_export")
    model.export(path, verbose=False)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    loaded = tf.saved_model.load(path)
    sig = loaded.signatures["serving_default"]
    input_name = list(sig.structured_input_signature[1].keys())[0]
    want = sig(**{input_name: tf.constant(x)})
    cases.append(("keras_export", path, "serving_default", {input_name: x},
                  {k: v.numpy() for k, v in want.items()}))
    return cases


def function_graph_case(tf, root):
    """A TF2 function graph whose variables are captured resource Placeholders."""
    w = tf.Variable(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))

    @tf.function
    def step(x):
        w.assign_add(tf.ones_like(w))
        return tf.matmul(x, w)

    x = np.array([[1.0, -1.0]], np.float32)
    concrete = step.get_concrete_function(tf.TensorSpec([1, 2], tf.float32, name="x"))
    graph_def = concrete.graph.as_graph_def()
    captures = [n.name for n in graph_def.node if n.op == "Placeholder"
                and n.attr["dtype"].type == tf.resource.as_datatype_enum]
    path = os.path.join(root, "step.pb")
    with open(path, "wb") as f:
        f.write(graph_def.SerializeToString())
    initial = w.numpy()
    want = step(tf.constant(x)).numpy()
    outputs = [t.name.split(":")[0] for t in concrete.outputs]
    return path, captures, x, initial, outputs[0], want


def main():
    args = tf_driver.parse_args("save the models here (and reuse them) instead of a temporary "
                                "directory")
    tf, _ = tf_driver.tensorflow_or_skip()

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        os.makedirs(root, exist_ok=True)
        cases = build_models(tf, root)
        for index, (name, path, signature, inputs, want) in enumerate(cases):
            work = os.path.join(tmp, f"case{index}")
            os.makedirs(work, exist_ok=True)
            cmd = [path, "--signature", signature]
            for key, value in inputs.items():
                file = os.path.join(work, f"in_{key}.npy")
                np.save(file, np.asarray(value))
                cmd += ["--feed", f"{key}={file}"]
            keys = sorted(want)
            for key in keys:
                cmd += ["--fetch", key]
            # Op by op, with TensorFlow's auto-clustering, and as one must-compile function.
            modes = [[]] if signature == "variables" else [
                [], ["--jit=auto", "--tf_xla_cpu_global_jit"], ["--jit=compile"]]
            for mode in modes:
                label = f"{name}/{signature}" + (f" {mode[0]}" if mode else "")
                out = os.path.join(work, "out" + (mode[0][6:] if mode else ""))
                try:
                    run_xlens(args.xlens, cmd + mode, out)
                except Exception as e:  # report every case, not only the first
                    failures.append(f"{label}: {e}")
                    continue
                for i, key in enumerate(keys):
                    got = np.load(os.path.join(out, f"out{i}.npy"))
                    ok, detail = close(want[key], got)
                    print(f"{label}/{key}: {'ok' if ok else 'WRONG'} ({detail})")
                    if not ok:
                        failures.append(f"{label}/{key}: {detail}")

        # Every variable read from the checkpoint equals tf.train.load_checkpoint's value.
        for name in ("typed", "sharded", "two_signatures", "keras_export"):
            reader = tf.train.load_checkpoint(os.path.join(root, name, "variables", "variables"))
            keys = [k for k in reader.get_variable_to_shape_map() if k.endswith("VARIABLE_VALUE")]
            print(f"{name}: {len(keys)} checkpoint variables")
        for name, signature in (("typed", "variables"), ("sharded", "variables")):
            reader = tf.train.load_checkpoint(os.path.join(root, name, "variables", "variables"))
            for key in reader.get_variable_to_shape_map():
                if not key.endswith("/.ATTRIBUTES/VARIABLE_VALUE"):
                    continue
                var = key.split("/")[0]
                out = os.path.join(tmp, f"{name}_var_{var}")
                try:
                    run_xlens(args.xlens, [os.path.join(root, name), "--signature", signature, "--fetch", var], out)
                except Exception as e:
                    failures.append(f"{name}: variable {var}: {e}")
                    continue
                ok, detail = close(reader.get_tensor(key), np.load(os.path.join(out, "out0.npy")))
                print(f"{name}: checkpoint {key}: {'ok' if ok else 'WRONG'} ({detail})")
                if not ok:
                    failures.append(f"{name}: checkpoint {key}: {detail}")

        # A TF2 function graph run with its captured variable assigned by capture name.
        path, captures, x, initial, output, want = function_graph_case(tf, tmp)
        np.save(os.path.join(tmp, "fx.npy"), x)
        np.save(os.path.join(tmp, "fw.npy"), initial)
        try:
            run_xlens(args.xlens, [path, "--feed", f"x={os.path.join(tmp, 'fx.npy')}", "--fetch", output,
                                   "--assign", f"{captures[0]}={os.path.join(tmp, 'fw.npy')}"],
                      os.path.join(tmp, "fout"))
            ok, detail = close(want, np.load(os.path.join(tmp, "fout", "out0.npy")))
            print(f"function graph with --assign {captures[0]}: {'ok' if ok else 'WRONG'} ({detail})")
            if not ok:
                failures.append(f"function graph: {detail}")
        except Exception as e:
            failures.append(f"function graph: {e}")

    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"all {len(cases)} signatures match TensorFlow")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Builds the model corpus with TensorFlow: the Keras models people run, small, in every form
they reach xlens in, with TensorFlow's own numbers and clustering dumps beside them.

    make_model_corpus.py OUT [--models a,b,...|ci|all] [--list]
    make_model_corpus.py OUT --serve      builds the models named on each line of stdin (a batch,
                                          names separated by spaces) and prints "batch made"

For each model, OUT/<model>/ holds:

  meta.json        what the files are: kind (inference or train), the feeds and fetches of each
                   graph, the signature's input and output names, the captured inputs' files,
                   the steps a training step runs, the Keras model's ops
  inputs/*.npy     the arguments (seeded)
  frozen.pb        inference models: the function with its variables folded into constants
                   (convert_variables_to_constants_v2, as TensorFlow's own freeze does)
  function.pb      the TF2 concrete function's graph: variables are captured resource
                   Placeholders, bound by meta["captures"] to captures/*.npy
  saved_model/     tf.saved_model.save: saved_model.pb with its signatures (an inference model's
                   serving_default takes any batch size) and the TensorBundle variables/
  expected/        TensorFlow's results op by op (its executor, grappler on): out<i>.npy for
                   inference models, per-step losses and the final variables for training steps
  expected_jit/    the same under tf.function(jit_compile=True)
  expected_auto/   the same with TensorFlow's auto-clustering on (TF_XLA_FLAGS
                   --tf_xla_auto_jit=2 --tf_xla_cpu_global_jit), from the SavedModel
  tf_dump/         what TensorFlow's auto-clustering wrote for that run (TF_DUMP_GRAPH_PREFIX):
                   before_mark_for_compilation*.pbtxt and mark_for_compilation*.pbtxt

and OUT/xla_dump/{jit_compile,auto_clustering}/ hold the HLO modules XLA dumped
(XLA_FLAGS=--xla_dump_to) for the jit_compile runs and the auto-clustered runs.

A training step has no frozen form (freezing turns its variables into constants: there would be
nothing left to train); it comes as a function graph and a SavedModel.

The auto-clustering run is a child process: TF_XLA_FLAGS is read once, when TensorFlow starts.
With --serve one process builds every batch, so that TensorFlow starts once (a new child still
runs each batch's auto-clustering).
Exits 77 (skipped) when TensorFlow cannot be imported."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

SKIP = 77
STEPS = 3
# What --serve prints once a batch is built.
SERVED = "batch made"

# name -> (builder, input spec list: (name, shape, dtype, low, high)). Sizes are the smallest
# the architectures accept, to keep the corpus quick to build and to run.
def _apps(keras):
    A = keras.applications
    image = lambda s: [("x", (1, s, s, 3), "float32", 0.0, 1.0)]
    return {
        "mobilenet_v2": (lambda: A.MobileNetV2(input_shape=(64, 64, 3), alpha=0.35, weights=None,
                                               classes=10), image(64)),
        "mobilenet_v3_small": (lambda: A.MobileNetV3Small(input_shape=(64, 64, 3), weights=None,
                                                          classes=10, minimalistic=False,
                                                          include_preprocessing=False), image(64)),
        "efficientnet_b0": (lambda: A.EfficientNetB0(input_shape=(64, 64, 3), weights=None,
                                                     classes=10), image(64)),
        "efficientnet_v2_b0": (lambda: A.EfficientNetV2B0(input_shape=(64, 64, 3), weights=None,
                                                          classes=10,
                                                          include_preprocessing=False), image(64)),
        "resnet50": (lambda: A.ResNet50(input_shape=(64, 64, 3), weights=None, classes=10),
                     image(64)),
        "densenet121": (lambda: A.DenseNet121(input_shape=(64, 64, 3), weights=None, classes=10),
                        image(64)),
        "xception": (lambda: A.Xception(input_shape=(71, 71, 3), weights=None, classes=10),
                     image(71)),
        "inception_v3": (lambda: A.InceptionV3(input_shape=(75, 75, 3), weights=None, classes=10),
                         image(75)),
        "nasnet_mobile": (lambda: A.NASNetMobile(input_shape=(64, 64, 3), weights=None,
                                                 classes=10), image(64)),
        "convnext_tiny": (lambda: A.ConvNeXtTiny(input_shape=(32, 32, 3), weights=None, classes=10,
                                                 include_preprocessing=False), image(32)),
        "vgg16": (lambda: A.VGG16(input_shape=(32, 32, 3), weights=None, classes=10), image(32)),
    }


def _gelu(keras, approximate):
    return lambda t: keras.activations.gelu(t, approximate=approximate)


def _transformer_block(keras, tokens=None):
    """One encoder block: multi-head attention (Einsum), layer norms, an MLP with exact GELU
    (Erfc) and one with tanh GELU. With tokens, an embedding (ResourceGather) in front."""
    L = keras.layers
    if tokens:
        inp = keras.Input((16,), dtype="int32")
        x = L.Embedding(tokens, 32)(inp)
    else:
        inp = keras.Input((16, 32))
        x = inp
    a = L.MultiHeadAttention(num_heads=4, key_dim=8)(x, x)
    x = L.LayerNormalization()(x + a)
    f = L.Dense(64, activation=_gelu(keras, False))(x)
    f = L.Dense(32, activation=_gelu(keras, True))(f)
    x = L.LayerNormalization()(x + f)
    if tokens:
        x = L.Dense(10)(L.GlobalAveragePooling1D()(x))
    return keras.Model(inp, x)


def _layers(keras):
    L = keras.layers
    return {
        "transformer_block": (lambda: _transformer_block(keras),
                              [("x", (2, 16, 32), "float32", -1.0, 1.0)]),
        "lstm": (lambda: keras.Sequential([keras.Input((12, 8)), L.LSTM(16, return_sequences=True),
                                           L.LSTM(8)]),
                 [("x", (2, 12, 8), "float32", -1.0, 1.0)]),
        "gru": (lambda: keras.Sequential([keras.Input((12, 8)), L.GRU(16, return_sequences=True),
                                          L.SimpleRNN(8)]),
                [("x", (2, 12, 8), "float32", -1.0, 1.0)]),
    }


def _small_cnn(keras):
    L = keras.layers
    return keras.Sequential([
        keras.Input((16, 16, 3)), L.Conv2D(8, 3, padding="same"), L.BatchNormalization(),
        L.ReLU(), L.MaxPooling2D(), L.SeparableConv2D(16, 3, padding="same"),
        L.BatchNormalization(), L.ReLU(), L.GlobalAveragePooling2D(), L.Dense(10)])


def _training_steps(keras):
    return {
        # Conv, batch norm in training, depthwise-separable conv, SGD with momentum.
        "cnn_train": (lambda: (_small_cnn(keras), keras.optimizers.SGD(0.05, momentum=0.9)),
                      [("x", (4, 16, 16, 3), "float32", 0.0, 1.0), ("y", (4,), "int32", 0, 10)]),
        # Embedding (ResourceGather and its gradient), attention, exact GELU, Adam.
        "transformer_train": (lambda: (_transformer_block(keras, tokens=50),
                                       keras.optimizers.Adam(1e-3)),
                              [("x", (2, 16), "int32", 0, 50), ("y", (2,), "int32", 0, 10)]),
        # Recurrences under their gradient: the forward While's EmptyTensorList accumulators,
        # the backward While's TensorListReserve/PopBack, Adam/SGD on the cell's weights.
        "lstm_train": (lambda: (keras.Sequential([keras.Input((9, 5)), keras.layers.LSTM(12),
                                                  keras.layers.Dense(10)]),
                                keras.optimizers.Adam(1e-2)),
                       [("x", (4, 9, 5), "float32", -1.0, 1.0), ("y", (4,), "int32", 0, 10)]),
        "gru_train": (lambda: (keras.Sequential([keras.Input((9, 5)), keras.layers.GRU(12),
                                                 keras.layers.Dense(10)]),
                               keras.optimizers.SGD(0.1, momentum=0.9)),
                      [("x", (4, 9, 5), "float32", -1.0, 1.0), ("y", (4,), "int32", 0, 10)]),
    }


# What CI builds and checks: eight Keras applications, the layers, the training steps. The
# other applications (NASNet's 500 separable convolutions, Inception, EfficientNetV2) use the
# same ops and cost minutes more; `--models all` makes them. model_corpus_test.py makes and checks
# them four at a time in this order, so each four holds one of the large applications
# (ResNet50, Xception, ConvNeXt, VGG16: 300-500 MB each in their three forms).
CI_MODELS = ["mobilenet_v2", "resnet50", "transformer_block", "cnn_train",
             "mobilenet_v3_small", "xception", "lstm", "transformer_train",
             "efficientnet_b0", "convnext_tiny", "gru", "lstm_train",
             "densenet121", "vgg16", "gru_train"]


def model_names():
    # The builders need keras only when called; list the names without importing TensorFlow.
    class Stub:
        applications = None
        layers = None
        optimizers = None
    names = []
    for table in (_apps, _layers, _training_steps):
        try:
            names += list(table(Stub).keys())
        except AttributeError:
            pass
    return names


def _inputs(np, specs, seed):
    rng = np.random.RandomState(seed)
    out = []
    for name, shape, dtype, low, high in specs:
        if dtype.startswith("int"):
            out.append((name, rng.randint(low, high, size=shape).astype(dtype)))
        else:
            out.append((name, rng.uniform(low, high, size=shape).astype(dtype)))
    return out


def _save_outputs(np, directory, values):
    os.makedirs(directory, exist_ok=True)
    for i, v in enumerate(values):
        np.save(os.path.join(directory, f"out{i}.npy"), np.asarray(v))


def _graph_ops(graph_def):
    ops = {n.op for n in graph_def.node}
    for f in graph_def.library.function:
        ops |= {n.op for n in f.node_def}
    return sorted(ops)


def _write_captures(np, directory, concrete, variables):
    """Each captured input of the function graph: its Placeholder's name and a .npy of the value
    it stands for (the variable's for resource captures)."""
    by_handle = {id(v.handle): v for v in variables}
    os.makedirs(os.path.join(directory, "captures"), exist_ok=True)
    captures = []
    for i, (external, internal) in enumerate(concrete.graph.captures):
        name = internal.name.split(":")[0]
        if external.dtype.name == "resource":
            variable = by_handle.get(id(external))
            if variable is None:
                raise RuntimeError(f"capture {name}: no variable of the model has this handle")
            value, kind = variable.numpy(), "variable"
        else:
            value, kind = external.numpy(), "tensor"
        path = f"captures/{i}.npy"
        np.save(os.path.join(directory, path), value)
        captures.append({"placeholder": name, "kind": kind, "file": path,
                         "variable": getattr(variable, "name", None) if kind == "variable" else None})
    return captures


def _tf_variables(model, optimizer=None):
    out = [v.value for v in model.variables]
    if optimizer is not None:
        out += [v.value for v in optimizer.variables]
    return out


def _signature_io(saved_dir, signature):
    """The signature's input and output names, read from saved_model.pb (loading the model would
    cost seconds a model)."""
    from tensorflow.core.protobuf import saved_model_pb2
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    sig = saved.meta_graphs[0].signature_def[signature]
    return sorted(sig.inputs.keys()), sorted(sig.outputs.keys())


def build_inference(tf, keras, np, name, make, specs, out):
    keras.utils.set_random_seed(0)
    model = make()
    args = _inputs(np, specs, seed=1)
    tensor_specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype), name=n) for n, a in args]
    os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
    for n, a in args:
        np.save(os.path.join(out, "inputs", f"{n}.npy"), a)

    def forward(x):
        return model(x, training=False)
    concrete = tf.function(forward, autograph=False).get_concrete_function(*tensor_specs)
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    frozen = convert_variables_to_constants_v2(concrete)
    frozen_def = frozen.graph.as_graph_def()
    with open(os.path.join(out, "frozen.pb"), "wb") as f:
        f.write(frozen_def.SerializeToString())
    function_def = concrete.graph.as_graph_def()
    with open(os.path.join(out, "function.pb"), "wb") as f:
        f.write(function_def.SerializeToString())
    captures = _write_captures(np, out, concrete, _tf_variables(model))

    feeds = [t.name.split(":")[0] for t in frozen.inputs]
    fetches = [t.name for t in frozen.outputs]
    values = [tf.constant(a) for _, a in args]
    _save_outputs(np, os.path.join(out, "expected"), [frozen(*values)[0].numpy()])
    jit = tf.function(forward, jit_compile=True, autograph=False)
    _save_outputs(np, os.path.join(out, "expected_jit"), [jit(*values).numpy()])

    # The SavedModel serves the model over any batch size, as Keras's model.export does (its
    # graph computes the shapes the batch leaves open), from the variables alone: model.export
    # also traced and tracked the model for its own endpoint, and took twice the CPU.
    saved = os.path.join(out, "saved_model")
    module = tf.Module()
    module.model_variables = _tf_variables(model)
    any_batch = [tf.TensorSpec((None, *s.shape[1:]), s.dtype, name=s.name) for s in tensor_specs]
    serve = tf.function(forward, autograph=False).get_concrete_function(*any_batch)
    tf.saved_model.save(module, saved, signatures={"serving_default": serve})
    sig_inputs, sig_outputs = _signature_io(saved, "serving_default")
    return {
        "kind": "inference",
        "inputs": [n for n, _ in args],
        "frozen": {"feeds": feeds, "fetches": fetches},
        "function": {"feeds": [t.name.split(":")[0] for t in concrete.inputs[:len(args)]],
                     "fetches": [t.name for t in concrete.outputs]},
        "captures": captures,
        # The signature's inputs are the function's, named by their TensorSpecs.
        "signature": {"name": "serving_default", "inputs": sig_inputs, "outputs": sig_outputs,
                      "feeds": dict(zip(sig_inputs, [n for n, _ in args]))},
        "ops": {"frozen": _graph_ops(frozen_def), "function": _graph_ops(function_def)},
    }


class _TrainModule:
    pass


def build_training_step(tf, keras, np, name, make, specs, out):
    keras.utils.set_random_seed(0)
    model, optimizer = make()
    args = _inputs(np, specs, seed=1)
    os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
    for n, a in args:
        np.save(os.path.join(out, "inputs", f"{n}.npy"), a)
    tensor_specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype), name=n) for n, a in args]
    model(tf.constant(args[0][1]), training=False)  # builds the weights
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    module = tf.Module()
    module.model = model
    module.optimizer_variables = [v.value for v in optimizer.variables]
    module.train_step = tf.function(step, input_signature=tensor_specs)
    variables = _tf_variables(model, optimizer)
    initial = [v.numpy() for v in variables]

    saved = os.path.join(out, "saved_model")
    tf.saved_model.save(module, saved, signatures={"train_step": module.train_step})
    concrete = module.train_step.get_concrete_function()
    function_def = concrete.graph.as_graph_def()
    with open(os.path.join(out, "function.pb"), "wb") as f:
        f.write(function_def.SerializeToString())
    captures = _write_captures(np, out, concrete, variables)
    sig_inputs, sig_outputs = _signature_io(saved, "train_step")

    values = [tf.constant(a) for _, a in args]

    def run(fn, directory):
        for v, init in zip(variables, initial):
            v.assign(init)
        losses = [float(fn(*values)["loss"].numpy()) for _ in range(STEPS)]
        os.makedirs(directory, exist_ok=True)
        np.save(os.path.join(directory, "losses.npy"), np.asarray(losses, np.float32))
        trained = {c["placeholder"]: c for c in captures if c["kind"] == "variable"}
        by_handle = {id(v.handle): v for v in variables}
        for i, (external, internal) in enumerate(concrete.graph.captures):
            if external.dtype.name == "resource":
                np.save(os.path.join(directory, f"capture{i}.npy"), by_handle[id(external)].numpy())
        return trained

    run(module.train_step, os.path.join(out, "expected"))
    run(tf.function(step, input_signature=tensor_specs, jit_compile=True),
        os.path.join(out, "expected_jit"))
    for v, init in zip(variables, initial):
        v.assign(init)
    return {
        "kind": "train",
        "steps": STEPS,
        "inputs": [n for n, _ in args],
        "function": {"feeds": [t.name.split(":")[0] for t in concrete.inputs[:len(args)]],
                     "fetches": [t.name for t in concrete.outputs]},
        "captures": captures,
        "signature": {"name": "train_step", "inputs": sig_inputs, "outputs": sig_outputs,
                      "feeds": {n: n for n in sig_inputs}},
        "ops": {"function": _graph_ops(function_def)},
    }


# The child that runs each SavedModel under auto-clustering, dumping its graphs.
AUTO_CLUSTERING_CHILD = r'''
import json, os, sys
import numpy as np
import tensorflow as tf
root = sys.argv[1]
for name in sys.argv[2:]:
    d = os.path.join(root, name)
    meta = json.load(open(os.path.join(d, "meta.json")))
    os.environ["TF_DUMP_GRAPH_PREFIX"] = os.path.join(d, "tf_dump")
    loaded = tf.saved_model.load(os.path.join(d, "saved_model"))
    sig = loaded.signatures[meta["signature"]["name"]]
    args = {n: tf.constant(np.load(os.path.join(d, "inputs", f"{i}.npy")))
            for n, i in meta["signature"]["feeds"].items()}
    out = os.path.join(d, "expected_auto")
    os.makedirs(out, exist_ok=True)
    if meta["kind"] == "inference":
        result = sig(**args)
        for i, key in enumerate(meta["signature"]["outputs"]):
            np.save(os.path.join(out, f"out{i}.npy"), result[key].numpy())
    else:
        losses = [float(sig(**args)["loss"].numpy()) for _ in range(meta["steps"])]
        np.save(os.path.join(out, "losses.npy"), np.asarray(losses, np.float32))
    print("auto-clustered", name, flush=True)
'''


def run_auto_clustering(out, names):
    """Runs `names`' SavedModels under auto-clustering in a new process, for each batch: the flags
    are read when TensorFlow starts, and a process that had run an earlier batch dumped fewer of
    the graphs mark_for_compilation saw (46 for MobileNetV3-Small where a new one dumps 65)."""
    env = dict(os.environ)
    env["TF_XLA_FLAGS"] = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug"
    env["XLA_FLAGS"] = f"--xla_dump_to={os.path.join(os.path.abspath(out), 'xla_dump', 'auto_clustering')}"
    start = time.time()
    subprocess.run([sys.executable, "-c", AUTO_CLUSTERING_CHILD, out, *names], env=env,
                   check=True)
    # Only the clustering pass's own dumps are kept: before_increase_dynamism is a pass xlens
    # does not run.
    for name in names:
        dump = os.path.join(out, name, "tf_dump")
        for f in os.listdir(dump) if os.path.isdir(dump) else []:
            if f.startswith("before_increase_dynamism"):
                os.remove(os.path.join(dump, f))
    print(f"auto-clustering runs and dumps in {time.time() - start:.1f} s", flush=True)


def build(tf, keras, np, tables, out, names):
    """Builds `names` into OUT, then their auto-clustering runs."""
    # Each batch starts from Keras's state in a new process, so that layer and model names (the
    # graphs' node names) do not depend on what was built before.
    keras.backend.clear_session()
    os.makedirs(out, exist_ok=True)
    for name in names:
        kind, make, specs = tables[name]
        directory = os.path.join(out, name)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        start = time.time()
        builder = build_inference if kind == "inference" else build_training_step
        meta = builder(tf, keras, np, name, make, specs, directory)
        meta["name"] = name
        with open(os.path.join(directory, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(f"built {name} ({kind}) in {time.time() - start:.1f} s", flush=True)
    run_auto_clustering(out, names)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?")
    parser.add_argument("--models", default="all",
                        help="comma-separated names, 'ci' (CI's set) or 'all' (the default)")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    parser.add_argument("--serve", action="store_true",
                        help="build the models named on each line of stdin (separated by spaces) "
                             f"into OUT, answering each line with '{SERVED}'")
    args = parser.parse_args()
    if args.list:
        print("\n".join(model_names()))
        return 0
    if not args.out:
        parser.error("OUT is required")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # Read when XLA first compiles, so set before TensorFlow starts.
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={os.path.join(os.path.abspath(args.out), 'xla_dump', 'jit_compile')}"
    try:
        import numpy as np
        import tensorflow as tf
        import keras
    except Exception as e:  # noqa: BLE001 - any import failure means no TensorFlow here
        print(f"skipped: tensorflow/keras are not importable ({type(e).__name__}: {e})")
        return SKIP
    tables = {}
    for kind, table in (("inference", _apps(keras)), ("inference", _layers(keras)),
                        ("train", _training_steps(keras))):
        for name, (make, specs) in table.items():
            tables[name] = (kind, make, specs)
    wanted = {"all": list(tables), "ci": CI_MODELS}.get(args.models, args.models.split(","))
    unknown = [w for w in wanted if w not in tables]
    if unknown:
        print(f"make_model_corpus: unknown model(s) {', '.join(unknown)}; known: "
              f"{', '.join(tables)}", file=sys.stderr)
        return 2
    if not args.serve:
        build(tf, keras, np, tables, args.out, wanted)
        return 0
    for line in sys.stdin:
        batch = line.split()
        unknown = [w for w in batch if w not in tables]
        if unknown:
            print(f"make_model_corpus: unknown model(s) {', '.join(unknown)}", file=sys.stderr)
            return 2
        build(tf, keras, np, tables, args.out, batch)
        print(SERVED, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

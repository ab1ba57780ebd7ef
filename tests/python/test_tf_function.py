"""xlens.tf.function against tf.function: a TF2 function's results, a training step with
variables (by hand and with an optimizer on a Keras model) giving TensorFlow's losses and leaving
the variables as TensorFlow leaves them, must-compile and auto-clustering, the dump and the
trace."""

import glob
import json
import os

import numpy as np
import pytest

import xlens

tf = pytest.importorskip("tensorflow")

RNG = np.random.RandomState(3)
X = RNG.randn(8, 4).astype(np.float32)
Y = RNG.randn(8, 3).astype(np.float32)
W0 = (RNG.randn(4, 3) * 0.5).astype(np.float32)
B0 = (RNG.randn(3) * 0.1).astype(np.float32)
STEPS = 4


def close(ours, reference, tolerance=1e-5):
    ours, reference = np.asarray(ours, np.float64), np.asarray(reference, np.float64)
    scale = max(float(np.max(np.abs(reference))), 1e-30)
    return float(np.max(np.abs(ours - reference))) <= tolerance * scale


def model(x, w, b):
    return tf.tanh(tf.matmul(x, w) + b)


@pytest.mark.parametrize("jit_compile", [None, True])
def test_function_results_in_its_structure(jit_compile):
    def f(x, y):
        h = tf.matmul(x, tf.transpose(x)) + 1.0
        return {"h": h, "pair": (tf.reduce_sum(y, axis=0), tf.shape(x)), "const": 3}

    expected = tf.function(f)(tf.constant(X), tf.constant(Y))
    got = xlens.tf.function(f, jit_compile=jit_compile)(X, tf.constant(Y))
    assert set(got) == {"h", "pair", "const"} and got["const"] == 3
    assert isinstance(got["h"], np.ndarray) and isinstance(got["pair"], tuple)
    assert close(got["h"], expected["h"].numpy())
    assert close(got["pair"][0], expected["pair"][0].numpy())
    np.testing.assert_array_equal(got["pair"][1], [8, 4])


def test_decorator_with_input_signature_and_retracing():
    calls = []

    @xlens.tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def norm(x):
        calls.append(1)
        return tf.reduce_sum(x * x, axis=1)

    np.testing.assert_allclose(norm(X), (X * X).sum(1), rtol=1e-6)
    np.testing.assert_allclose(norm(X[:3]), (X[:3] * X[:3]).sum(1), rtol=1e-6)
    assert len(calls) == 1  # one trace for the signature, as tf.function

    @xlens.tf.function
    def double(x):
        return x * 2

    np.testing.assert_array_equal(double(np.arange(3, dtype=np.int32)), [0, 2, 4])
    np.testing.assert_array_equal(double(np.arange(4, dtype=np.float32)), [0, 2, 4, 6])


def manual_step(w, b):
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, w, b) - y))
        gw, gb = tape.gradient(loss, [w, b])
        w.assign_sub(0.1 * gw)
        b.assign_add(-0.1 * gb)
        return loss
    return step


@pytest.mark.parametrize("jit_compile", [None, True])
def test_variables_training_step_leaves_tensorflows_variables(jit_compile):
    w_ref, b_ref = tf.Variable(W0), tf.Variable(B0)
    reference = tf.function(manual_step(w_ref, b_ref), jit_compile=jit_compile)
    ref_losses = [float(reference(X, Y)) for _ in range(STEPS)]
    w, b = tf.Variable(W0), tf.Variable(B0)
    step = xlens.tf.function(manual_step(w, b), jit_compile=jit_compile)
    losses = [float(step(X, Y)) for _ in range(STEPS)]
    assert close(losses, ref_losses)
    assert close(w.numpy(), w_ref.numpy()) and close(b.numpy(), b_ref.numpy())
    # A change TensorFlow makes between calls is seen by the next call.
    w.assign(W0)
    w_ref.assign(W0)
    assert close(float(step(X, Y)), float(reference(X, Y)))


def keras_step(keras_model, optimizer):
    loss_fn = tf.keras.losses.MeanSquaredError()

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, keras_model(x, training=True))
        grads = tape.gradient(loss, keras_model.trainable_variables)
        optimizer.apply_gradients(zip(grads, keras_model.trainable_variables))
        return loss
    return step


def make_keras(optimizer_class):
    keras_model = tf.keras.Sequential([tf.keras.Input((4,)),
                                       tf.keras.layers.Dense(5, activation="tanh"),
                                       tf.keras.layers.Dense(3)])
    weights = [np.linspace(-0.5, 0.5, int(np.prod(v.shape)), dtype=np.float32).reshape(v.shape)
               for v in keras_model.weights]
    keras_model.set_weights(weights)
    optimizer = optimizer_class(learning_rate=0.05)
    optimizer.build(keras_model.trainable_variables)
    return keras_model, optimizer


@pytest.mark.parametrize("optimizer_class", [tf.keras.optimizers.SGD, tf.keras.optimizers.Adam])
def test_keras_training_step_with_an_optimizer(optimizer_class):
    ref_model, ref_opt = make_keras(optimizer_class)
    reference = tf.function(keras_step(ref_model, ref_opt))
    ref_losses = [float(reference(X, Y)) for _ in range(STEPS)]
    ours_model, ours_opt = make_keras(optimizer_class)
    step = xlens.tf.function(keras_step(ours_model, ours_opt), jit_compile=True)
    losses = [float(step(X, Y)) for _ in range(STEPS)]
    assert close(losses, ref_losses)
    for ours, ref in zip(ours_model.weights, ref_model.weights):
        assert close(ours.numpy(), ref.numpy(), 1e-5), ours.name
    assert int(ours_opt.iterations.numpy()) == int(ref_opt.iterations.numpy()) == STEPS


def test_dump_and_trace(tmp_path):
    w, b = tf.Variable(W0), tf.Variable(B0)
    step = xlens.tf.function(manual_step(w, b), jit_compile=True, dump_to=tmp_path / "dump",
                             trace=tmp_path / "trace.json")
    step(X, Y)
    names = [os.path.basename(p) for p in glob.glob(str(tmp_path / "dump" / "*"))]
    assert any(n.endswith(".before_optimizations.txt") for n in names), names
    assert any(n.endswith(".cpu_after_optimizations.txt") for n in names), names
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert any(e.get("cat") in ("cpu_kernel", "library_call") for e in events)


def test_function_forms():
    v = tf.Variable(1.0)
    c = tf.constant([1.0, 2.0])

    @xlens.tf.function
    def bump(x):  # no result: its effect on the variable is what runs
        v.assign_add(x)

    assert bump(np.float32(2.0)) is None and v.numpy() == 3.0

    @xlens.tf.function(jit_compile=True)
    def captured(x):  # a captured constant beside a variable
        return x * c + v

    np.testing.assert_array_equal(captured(np.ones(2, np.float32)), [4, 5])

    class Model(tf.Module):
        def __init__(self):
            self.w = tf.Variable([[1.0, 2.0]])

        @xlens.tf.function
        def __call__(self, x):
            return tf.matmul(x, self.w)

    np.testing.assert_array_equal(Model()(np.ones((2, 1), np.float32)), [[1, 2], [1, 2]])

    @xlens.tf.function
    def scaled(x, scale=2.0):  # a Python value is part of the trace, not an input
        return x * scale

    assert scaled(np.float32(3.0)) == 6 and scaled(np.float32(3.0), scale=3.0) == 9
    assert scaled(x=np.float32(1.0)) == 2

    s = tf.Variable("hello")

    @xlens.tf.function
    def joined(x):
        return tf.strings.join([x, s])

    assert joined(tf.constant("a ")) == b"a hello"

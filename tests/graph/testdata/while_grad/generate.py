"""A forward graph of TensorFlow 2.21 with a functional While over TensorLists (a TensorArray
recurrence under maximum_iterations, weights frozen in), for while_grad_test: xlens builds the
gradient of its loss itself and must give the gradient TensorFlow's GradientTape gives.

Writes rnn_forward.pbtxt (feed "x", fetch "loss"), x.npy and dloss_dx.npy here.
usage: python3 generate.py"""
import os

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

HERE = os.path.dirname(os.path.abspath(__file__))

rng = np.random.RandomState(5)
w = tf.constant(rng.randn(3, 4).astype(np.float32) * 0.5)
u = tf.constant(rng.randn(4, 4).astype(np.float32) * 0.5)
x = rng.randn(5, 2, 3).astype(np.float32)


def loss_of(t):
    inputs = tf.TensorArray(tf.float32, size=5).unstack(t)
    outputs = tf.TensorArray(tf.float32, size=5)

    def body(i, h, out):
        h = tf.tanh(tf.matmul(inputs.read(i), w) + tf.matmul(h, u))
        return i + 1, h, out.write(i, h)

    _, h, out = tf.while_loop(lambda i, h, out: i < 5, body,
                              (tf.constant(0), tf.zeros([2, 4]), outputs), maximum_iterations=5)
    return tf.identity(tf.reduce_sum(tf.square(out.stack())) + tf.reduce_sum(h), name="loss")


forward = tf.function(loss_of).get_concrete_function(tf.TensorSpec(x.shape, tf.float32, name="x"))
frozen = convert_variables_to_constants_v2(forward, lower_control_flow=False)
tf.io.write_graph(frozen.graph.as_graph_def(), HERE, "rnn_forward.pbtxt", as_text=True)
t = tf.constant(x)
with tf.GradientTape() as tape:
    tape.watch(t)
    loss = loss_of(t)
np.save(os.path.join(HERE, "x.npy"), x)
np.save(os.path.join(HERE, "dloss_dx.npy"), tape.gradient(loss, t).numpy())
print("loss", float(loss), "fetch", frozen.outputs[0].name)

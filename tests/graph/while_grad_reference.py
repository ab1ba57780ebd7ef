"""TensorFlow's gradients of the two loops of while_grad_test.cc (prints the values that test
holds): a recurrence v <- tanh(v @ w + x) run four times, and v <- 1.5 v + x * x while
sum(v) < 10, each differentiated under tf.GradientTape."""
import numpy as np
import tensorflow as tf

v0 = np.array([[0.1, 0.2, 0.3], [-0.4, 0.5, -0.6]], np.float32)
w = (0.1 * (np.arange(9) - 4)).reshape(3, 3).astype(np.float32)
x = np.array([[0.3, -0.2, 0.1], [0.05, 0.0, -0.1]], np.float32)
c = np.array([[1.0, -2.0, 0.5], [0.25, 1.5, -1.0]], np.float32)


@tf.function
def recurrence(v0, w, x):
    with tf.GradientTape() as tape:
        tape.watch([v0, w, x])
        _, v = tf.while_loop(lambda i, v: i < 4,
                             lambda i, v: (i + 1, tf.tanh(tf.matmul(v, w) + x)), (0, v0))
        loss = tf.reduce_sum(v * c)
    return (v,) + tuple(tape.gradient(loss, [v0, w, x]))


@tf.function
def grow_until(v0, x):
    with tf.GradientTape() as tape:
        tape.watch([v0, x])
        (v,) = tf.while_loop(lambda v: tf.reduce_sum(v) < 10.0, lambda v: (v * 1.5 + x * x,),
                             (v0,))
        loss = tf.reduce_sum(v * v)
    return (v,) + tuple(tape.gradient(loss, [v0, x]))


if __name__ == "__main__":
    for r in recurrence(v0, w, x):
        print(r.numpy().ravel().tolist())
    for r in grow_until(np.array([0.2, 0.7, 0.4], np.float32),
                        np.array([0.6, 0.9, 0.5], np.float32)):
        print(r.numpy().ravel().tolist())

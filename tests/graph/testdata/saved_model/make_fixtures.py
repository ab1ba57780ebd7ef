#!/usr/bin/env python3
"""Writes the SavedModels the unit tests and the hostile-input cases read (TensorFlow 2.21):
small/  a tf.Module with variables w f32[2,3], b f32[3], i i32[2,2], d f64[]; serving_default
        takes x f32[?,2] and returns y = x @ w + b and s = sum(i) * d.
sliced/ one variable v f32[6,5] = arange(30) saved in slices across three shards
        (MaxShardSizePolicy of 64 bytes); serving_default takes x f32[1,6] and returns x @ v.
Run from this directory: python3 make_fixtures.py"""
import numpy as np
import tensorflow as tf


class Small(tf.Module):
    def __init__(self):
        self.w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3) / 7, name="w")
        self.b = tf.Variable(np.array([1.5, -2, 3], np.float32), name="b")
        self.i = tf.Variable(np.array([[1, 2], [3, 4]], np.int32), name="i")
        self.d = tf.Variable(np.float64(2.25), name="d")

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def __call__(self, x):
        return {"y": tf.matmul(x, self.w) + self.b,
                "s": tf.cast(tf.reduce_sum(self.i), tf.float64) * self.d}


tf.saved_model.save(Small(), "small")
sliced = tf.Module()
sliced.v = tf.Variable(np.arange(30, dtype=np.float32).reshape(6, 5))
sliced.f = tf.function(lambda x: tf.matmul(x, sliced.v), input_signature=[tf.TensorSpec([1, 6], tf.float32, name="x")])
policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=64)
tf.saved_model.save(sliced, "sliced", signatures=sliced.f,
                    options=tf.saved_model.SaveOptions(experimental_sharding_callback=policy))

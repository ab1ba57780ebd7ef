#!/usr/bin/env python3
"""Regenerates expected.json: what TensorFlow's CPU kernels draw for the random ops.

Run with TensorFlow installed (the values were taken with 2.21):
    python3 generate.py > expected.json
Floats are written as their bit patterns (uint32 for float32, uint64 for float64) so that the
C++ test can compare them exactly; integers are written as they are.
"""
import json
import struct

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()

DTYPES = {"float32": tf.float32, "float64": tf.float64, "int32": tf.int32, "int64": tf.int64}


def encode(array, dtype):
    flat = np.asarray(array).reshape(-1)
    if dtype == "float32":
        return [int(v) for v in flat.astype(np.float32).view(np.uint32)]
    if dtype == "float64":
        return [int(v) for v in flat.astype(np.float64).view(np.uint64)]
    return [int(v) for v in flat]


def stateful_cases():
    cases = []
    float_seeds = [(0, 2147483647), (0, 1), (87654321, 12345), (-1, 5), (7, 0)]
    for op in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal"):
        for dtype in ("float32", "float64"):
            for seed, seed2 in float_seeds:
                for n in (1, 3, 7, 10):
                    cases.append(dict(op=op, dtype=dtype, shape=[n], seed=seed, seed2=seed2))
            cases.append(dict(op=op, dtype=dtype, shape=[3, 67], seed=3, seed2=4))
    for dtype, lo, hi in (("int32", -5, 17), ("int32", -2**31, 2**31 - 1),
                          ("int64", -(1 << 40), (1 << 40) + 3), ("int64", 0, 1000)):
        for n in (1, 3, 7, 10, 100):
            cases.append(dict(op="RandomUniformInt", dtype=dtype, shape=[n], seed=11, seed2=22,
                              minval=lo, maxval=hi))
    return cases


def run_stateful(cases, draws=3):
    graph = tf.Graph()
    with graph.as_default():
        nodes = []
        for c in cases:
            kw = dict(shape=tf.constant(c["shape"], tf.int32), seed=c["seed"], seed2=c["seed2"])
            if c["op"] == "RandomUniformInt":
                nodes.append(tf.raw_ops.RandomUniformInt(
                    minval=tf.constant(c["minval"], DTYPES[c["dtype"]]),
                    maxval=tf.constant(c["maxval"], DTYPES[c["dtype"]]), **kw))
            else:
                nodes.append(getattr(tf.raw_ops, c["op"])(dtype=DTYPES[c["dtype"]], **kw))
    with tf1.Session(graph=graph) as sess:
        for c in cases:
            c["draws"] = []
        for _ in range(draws):
            # One node per run, so each run advances only that node's generator.
            for c, node in zip(cases, nodes):
                c["draws"].append(encode(sess.run(node), c["dtype"]))
    return cases


def stateless_cases():
    cases = []
    seeds = [([1, 2], "int32"), ([-3, 7], "int32"), ([0, 0], "int32"),
             ([123456789012, -5], "int64"), ([-1, -1], "int64")]
    for op in ("StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal"):
        for dtype in ("float32", "float64"):
            for i, (seed, seed_dtype) in enumerate(seeds):
                for n in (1, 3, 7, 10, 1000) if i == 0 else (1, 3, 7, 10):
                    cases.append(dict(op=op, dtype=dtype, shape=[n], seed=seed,
                                      seed_dtype=seed_dtype))
    for dtype, lo, hi in (("int32", -5, 17), ("int64", -(1 << 40), (1 << 40) + 3)):
        for i, (seed, seed_dtype) in enumerate(seeds):
            for n in (1, 3, 7, 10, 1000) if i == 0 else (1, 3, 7, 10):
                cases.append(dict(op="StatelessRandomUniformInt", dtype=dtype, shape=[n],
                                  seed=seed, seed_dtype=seed_dtype, minval=lo, maxval=hi))
    return cases


def v2_cases():
    cases = []
    keys = [([0x1234567890ABCDEF], [5, 0xFFFFFFFFFFFFFFFF]),
            ([0], [0, 0]),
            ([0xFFFFFFFFFFFFFFFF], [0xFFFFFFFFFFFFFFF0, 3])]
    for op in ("StatelessRandomUniformV2", "StatelessRandomNormalV2",
               "StatelessTruncatedNormalV2"):
        for dtype in ("float32", "float64"):
            for i, (key, counter) in enumerate(keys):
                for n in (1, 7, 1000) if i == 0 else (1, 7):
                    cases.append(dict(op=op, dtype=dtype, shape=[n], key=key, counter=counter,
                                      alg=1))
    for dtype, lo, hi in (("int32", -5, 17), ("int64", -(1 << 40), (1 << 40) + 3)):
        for i, (key, counter) in enumerate(keys):
            for n in (1, 7, 1000) if i == 0 else (1, 7):
                cases.append(dict(op="StatelessRandomUniformIntV2", dtype=dtype, shape=[n],
                                  key=key, counter=counter, alg=1, minval=lo, maxval=hi))
    return cases


def key_counter_cases():
    return [dict(seed=s, seed_dtype=d) for s, d in
            [([1, 2], "int32"), ([-3, 7], "int32"), ([0, 0], "int32"),
             ([123456789012, -5], "int64"), ([-1, -1], "int64")]]


def run_stateless(stateless, v2, key_counter):
    graph = tf.Graph()
    with graph.as_default():
        fetches = []
        for c in stateless:
            kw = dict(shape=tf.constant(c["shape"], tf.int32),
                      seed=tf.constant(c["seed"], DTYPES[c["seed_dtype"]]))
            if "minval" in c:
                fetches.append(tf.raw_ops.StatelessRandomUniformInt(
                    minval=tf.constant(c["minval"], DTYPES[c["dtype"]]),
                    maxval=tf.constant(c["maxval"], DTYPES[c["dtype"]]), **kw))
            else:
                fetches.append(getattr(tf.raw_ops, c["op"])(dtype=DTYPES[c["dtype"]], **kw))
        for c in v2:
            kw = dict(shape=tf.constant(c["shape"], tf.int32),
                      key=tf.constant(np.array(c["key"], np.uint64)),
                      counter=tf.constant(np.array(c["counter"], np.uint64)),
                      alg=tf.constant(c["alg"], tf.int32))
            if "minval" in c:
                fetches.append(tf.raw_ops.StatelessRandomUniformIntV2(
                    minval=tf.constant(c["minval"], DTYPES[c["dtype"]]),
                    maxval=tf.constant(c["maxval"], DTYPES[c["dtype"]]), **kw))
            else:
                fetches.append(getattr(tf.raw_ops, c["op"])(dtype=DTYPES[c["dtype"]], **kw))
        for c in key_counter:
            fetches.append(tf.raw_ops.StatelessRandomGetKeyCounter(
                seed=tf.constant(c["seed"], DTYPES[c["seed_dtype"]])))
    with tf1.Session(graph=graph) as sess:
        values = sess.run(fetches)
    i = 0
    for c in stateless + v2:
        c["values"] = encode(values[i], c["dtype"])
        i += 1
    for c in key_counter:
        key, counter = values[i]
        c["key"] = [int(v) for v in key]
        c["counter"] = [int(v) for v in counter]
        i += 1




def main():
    stateful = run_stateful(stateful_cases())
    stateless, v2, kc = stateless_cases(), v2_cases(), key_counter_cases()
    run_stateless(stateless, v2, kc)
    out = dict(tf_version=tf.__version__, stateful=stateful, stateless=stateless,
               stateless_v2=v2, get_key_counter=kc)
    print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()

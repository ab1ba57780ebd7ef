#!/usr/bin/env python3
"""v1 control flow compiled whole: TF1 loops and conditionals under --jit=compile give TensorFlow's numbers.

TensorFlow 2.21 builds the graphs here with control flow v2 off (tf.compat.v1.while_loop and
tf.cond write Enter/Merge/Switch/LoopCond/NextIteration/Exit), plus a TF2 function frozen with
convert_variables_to_constants_v2 (which lowers its While and If the same way). `xlens graph run
--jit=compile` must make them While and If again (functionalize_control_flow.h) and compile them
whole; each output must be within 1e-4 of TensorFlow's largest value. The trip counts and the
branches taken are computed from the input, so a wrong trip count or a wrong branch gives a wrong
number, not only a crash. Two graphs read a branch's value after the conditional without a
Merge (one of them the Switch itself, beside its Merge): each must be refused in one line naming
the node that reads it.

Exits 77 (skipped) when tensorflow cannot be imported.

usage: functionalize_vs_tensorflow.py --xlens path/to/xlens [--workdir DIR]
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tf_driver  # noqa: E402

TOLERANCE = 1e-4


def build_graphs(out_dir):
    """Writes NAME.pb, NAME.in.npy, NAME.ref<k>.npy and NAME.meta for every case."""
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2)

    tf.compat.v1.disable_control_flow_v2()
    v1 = tf.compat.v1
    x_value = np.array([0.7, -1.3, 0.4, 2.1], np.float32)

    def save(name, graph_def, fetches, refs, expect="ok", init=""):
        tf_driver.save_case(np, out_dir, name, graph_def, x_value, refs,
                            [",".join(fetches), expect, init])

    def v1_case(name, build, expect="ok"):
        g = tf.Graph()
        with g.as_default():
            x = v1.placeholder(tf.float32, [4], name="x")
            outs = build(x)
            outs = [tf.identity(o, name=f"out{k}") for k, o in enumerate(outs)]
            with v1.Session(graph=g) as s:
                refs = s.run(outs, {x: x_value})
        save(name, g.as_graph_def(), [o.name for o in outs], refs, expect)

    def trips(x):  # 2..6 iterations, from the input
        return tf.cast(tf.math.floormod(tf.reduce_sum(tf.abs(x)) * 3.0, 5.0), tf.int32) + 2

    def loop_with_invariants(x):
        w = tf.constant([0.9, 1.1, -0.8, 0.5])
        n = trips(x)
        i, acc = v1.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * w + x),
                               [tf.constant(0), x])
        return [acc, i]

    def cond_in_loop(x):
        def body(i, a):
            a = tf.cond(tf.reduce_sum(a) > 0.0, lambda: a * 0.5 - 1.0,
                        lambda: a * -1.5 + tf.cast(i, tf.float32))
            return i + 1, a
        return list(v1.while_loop(lambda i, a: i < trips(x), body, [tf.constant(0), x]))[::-1]

    def nested_loops(x):
        def outer(i, a):
            _, a = v1.while_loop(lambda j, b: j < i + 1,
                                 lambda j, b: (j + 1, b + tf.cast(j, tf.float32) * x),
                                 [tf.constant(0), a])
            return i + 1, a
        return [v1.while_loop(lambda i, a: i < 3, outer, [tf.constant(0), tf.zeros([4])])[1]]

    def nested_conds(x):
        def then():
            return tf.cond(x[0] > 0.5, lambda: tf.sin(x), lambda: tf.cos(x) * 2.0)
        return [tf.cond(tf.reduce_max(x) > 0.3, then, lambda: x - 1.0),
                tf.cond(x[1] > 0.0, lambda: x * 3.0, lambda: x * 5.0)]

    def conds_on_one_predicate(x):
        # TF1 layers testing one flag each: the second conditional reads the first's result.
        p = tf.reduce_sum(x) > 1.0
        a = tf.cond(p, lambda: x * 2.0, lambda: x - 4.0)
        b = tf.cond(p, lambda: a + tf.reduce_max(a), lambda: a * -0.5)
        return [b, tf.cond(tf.logical_not(p), lambda: b * 3.0, lambda: b / 4.0)]

    def branch_read_outside(x):
        # A value of the then branch read after the conditional, not through a Merge: TensorFlow's
        # executor propagates deadness into it; no functional If can express it.
        p = x[0] > 0.0
        s_false, s_true = v1.raw_ops.Switch(data=x, pred=p)
        inside = s_true * 2.0
        merged = v1.raw_ops.Merge(inputs=[s_false + 1.0, inside])[0]
        return [merged, tf.identity(inside)]

    # tf.cond captures its predicate into each branch through a Switch of its own, so these two
    # read p directly in a branch with raw Switch and Merge, as rewritten graphs do.
    def cond_in_cond_on_one_predicate(x):
        # The inner Switch tests p again inside p's true branch: its false branch never runs.
        p = tf.reduce_sum(x) > 1.0
        s_false, s_true = v1.raw_ops.Switch(data=x, pred=p)
        i_false, i_true = v1.raw_ops.Switch(data=s_true * 1.5, pred=p)
        inner = v1.raw_ops.Merge(inputs=[i_false - 2.0, tf.sin(i_true)])[0]
        return [v1.raw_ops.Merge(inputs=[s_false + 1.0, inner])[0]]

    def conds_on_p_inside_and_outside_q(x):
        # p's conditional inside q's untaken branch and another on p outside it: one If for both
        # would read q's branch and lose the second's value.
        q, p = x[0] > 1.0, x[1] < 0.0
        q_false, q_true = v1.raw_ops.Switch(data=x, pred=q)
        p_false, p_true = v1.raw_ops.Switch(data=q_true, pred=p)
        inner = v1.raw_ops.Merge(inputs=[p_false * 3.0, p_true * 2.0])[0]
        outer = v1.raw_ops.Merge(inputs=[q_false - 1.0, inner])[0]
        c_false, c_true = v1.raw_ops.Switch(data=x, pred=p)
        return [outer, v1.raw_ops.Merge(inputs=[tf.cos(c_false), tf.sin(c_true)])[0]]

    def switch_read_beside_merge(x):
        # The Switch's true output read again after the Merge: under no branch of an If.
        p = x[0] > 0.0
        s_false, s_true = v1.raw_ops.Switch(data=x, pred=p)
        merged = v1.raw_ops.Merge(inputs=[s_false + 1.0, s_true * 2.0])[0]
        return [merged, tf.add(s_true, merged, name="beside")]

    # A resource variable updated in the loop body and read in a conditional there: the While
    # carries the variable, the If reads its value, the update is written back.
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [4], name="x")
        var = v1.get_variable("v", initializer=tf.constant([1.0, 2.0, 3.0, -1.0]),
                              use_resource=True)

        def body(i, a):
            with tf.control_dependencies([var.assign_add(a * 0.5)]):
                a = tf.cond(tf.reduce_sum(a) > 0.5, lambda: a * 0.5 + var.read_value(),
                            lambda: a - 1.0)
            return i + 1, a
        out = tf.identity(v1.while_loop(lambda i, a: i < trips(x), body,
                                        [tf.constant(0), x])[1], name="out0")
        init = v1.global_variables_initializer()
        with v1.Session(graph=g) as s:
            s.run(init)
            ref = s.run(out, {x: x_value})
    save("variable_in_while", g.as_graph_def(), [out.name], [ref], init=init.name)

    v1_case("while_invariants", loop_with_invariants)
    v1_case("cond_in_while", cond_in_loop)
    v1_case("nested_while", nested_loops)
    v1_case("nested_cond", nested_conds)
    v1_case("conds_on_one_predicate", conds_on_one_predicate)
    v1_case("cond_in_cond_on_one_predicate", cond_in_cond_on_one_predicate)
    v1_case("conds_on_p_inside_and_outside_q", conds_on_p_inside_and_outside_q)
    for name, build, reader in [("branch_read_outside", branch_read_outside, "mul"),
                                ("switch_read_beside_merge", switch_read_beside_merge, "beside")]:
        g = tf.Graph()
        with g.as_default():
            x = v1.placeholder(tf.float32, [4], name="x")
            outs = build(x)
            outs = [tf.identity(o, name=f"out{k}") for k, o in enumerate(outs)]
        save(name, g.as_graph_def(), [o.name for o in outs], [], "refused:" + reader)

    # A TF2 function frozen: its While and If lowered by convert_variables_to_constants_v2.
    tf.compat.v1.enable_control_flow_v2()
    v = tf.Variable([0.5, -0.25, 1.0, 0.75])

    @tf.function(input_signature=[tf.TensorSpec([4], tf.float32)])
    def f(x):
        def body(i, a):
            a = tf.cond(tf.reduce_sum(a) > 1.0, lambda: a * v, lambda: a + v)
            return i + 1, a
        return tf.while_loop(lambda i, a: i < trips(x), body, [0, x])[1]

    concrete = f.get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete)
    save("frozen_function", frozen.graph.as_graph_def(),
         [t.name for t in frozen.outputs], [f(tf.constant(x_value)).numpy()])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--workdir")
    parser.add_argument("--build-only", action="store_true")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="functionalize_")
    os.makedirs(workdir, exist_ok=True)
    if args.build_only:
        build_graphs(workdir)
        return 0
    try:
        # CTest gives the whole test 120 s: a TensorFlow build still running at 100 s is stopped.
        cases = tf_driver.built_cases(__file__, args.xlens, workdir, timeout=100)
        if isinstance(cases, int):
            return cases
        import numpy as np
        failures = []
        for name in cases:
            with open(os.path.join(workdir, name + ".meta")) as f:
                fetches, expect, init = f.read().split("\n")
            fetches = fetches.split(",")
            out_dir = tempfile.mkdtemp(prefix=f"{name}_", dir=workdir)
            proc = tf_driver.graph_run(
                args.xlens, os.path.join(workdir, name + ".pb"),
                [("x", os.path.join(workdir, name + ".in.npy"))], fetches, out_dir,
                ["--jit", "compile", "--timeout", "60"] + (["--init", init] if init else []),
                timeout=None)
            if expect.startswith("refused:"):
                reader = expect.split(":", 1)[1]
                if not tf_driver.refused_in_one_line(proc) or f"'{reader}'" not in proc.stderr:
                    failures.append(f"{name}: expected one line naming the node '{reader}', got "
                                    f"exit {proc.returncode}: {proc.stderr[-400:]}")
                print(f"{name} --jit=compile: refused: {proc.stderr.strip()[-200:]}")
                continue
            if proc.returncode != 0:
                failures.append(f"{name}: exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
                continue
            errors = tf_driver.compare_to_references(np, name, workdir, out_dir, len(fetches),
                                                     TOLERANCE)
            failures += [f"{name}: {e}" for e in errors]
            print(f"{name} --jit=compile: " + ("ok" if not errors else "FAILED"))
        return tf_driver.finish(failures, f"{len(cases)} graphs, {len(failures)} failures")
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

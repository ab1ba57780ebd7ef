#!/usr/bin/env python3
"""Training steps with resource variables run under `xlens graph run --jit=compile` as TensorFlow
runs them must-compiled: the variables are parameters of the compiled computation, their updates
extra results written back after each step.

TensorFlow builds each step twice from the same numbers: once as a plain graph for xlens, once
must-compiled for the reference. TF1 graphs (tf.compat.v1, resource variables, the step built by
GradientDescentOptimizer, MomentumOptimizer and AdamOptimizer's minimize, and one of plain assigns)
are run by TensorFlow inside tf.compat.v1.xla.experimental.compile; their initializers run first
(`--init init`). TF2 function graphs (tf.function(jit_compile=True): the variables are captured
resource placeholders; optimizers' steps, assign_sub/assign_add, a descent loop updating the
variables in a While, updates in the branches of an If) are run by TensorFlow as the jit_compile
function, and by xlens with each captured variable assigned by its capture's name. After every
step the graph reads each variable back (ordered after the update), so the compiled body reads
variables after their own updates.

Each case runs N steps in both; the losses of every step and the variables' final values must
agree within 1e-4 of the largest reference value. The TF2 cases are reported as skipped when this
xlens cannot bind a captured variable (`--assign CAPTURE=FILE`).

Exits 77 (skipped) when tensorflow cannot be imported."""

import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tf_driver  # noqa: E402

STEPS = 5
TOLERANCE = 1e-4


def tf1_cases(tf, np):
    """(name, build) pairs; build(compiled) makes the TF1 graph, returns its tensors by role."""
    v1 = tf.compat.v1
    rng = np.random.RandomState(7)
    f32 = np.float32
    w1 = (rng.randn(6, 5) * 0.5).astype(f32)
    b1 = (rng.randn(5) * 0.1).astype(f32)
    w2 = (rng.randn(5, 2) * 0.5).astype(f32)
    x_value = rng.randn(8, 6).astype(f32)
    y_value = rng.randn(8, 2).astype(f32)

    def model(optimizer):
        def build(compiled):
            g = tf.Graph()
            with g.as_default():
                x = v1.placeholder(tf.float32, [8, 6], name="x")
                y = v1.placeholder(tf.float32, [8, 2], name="y")
                variables = [v1.get_variable(n, initializer=v, use_resource=True)
                             for n, v in (("w1", w1), ("b1", b1), ("w2", w2))]
                global_step = v1.train.get_or_create_global_step()
                opt = optimizer()

                def step(x, y):
                    h = tf.tanh(tf.matmul(x, variables[0]) + variables[1])
                    loss = tf.reduce_mean(tf.square(tf.matmul(h, variables[2]) - y))
                    train = opt.minimize(loss, global_step=global_step)
                    with tf.control_dependencies([train]):
                        reads = [tf.identity(v.read_value(), name=f"final_{v.op.name}")
                                 for v in variables]
                        return [tf.identity(loss, name="loss_out")] + reads

                outs = v1.xla.experimental.compile(step, [x, y]) if compiled else step(x, y)
                init = v1.global_variables_initializer()
            return g, x, y, outs, init, variables
        return build

    def assigns(compiled):
        # Two assigns to one variable in a step and a read after each, and a variable only read.
        g = tf.Graph()
        with g.as_default():
            x = v1.placeholder(tf.float32, [8, 6], name="x")
            y = v1.placeholder(tf.float32, [8, 2], name="y")
            c = v1.get_variable("c", initializer=w1[:, :2].copy(), use_resource=True)
            k = v1.get_variable("k", initializer=w2[:2, :].copy(), use_resource=True)

            def step(x, y):
                first = c.assign(c * 0.5 + tf.matmul(tf.transpose(x), y) * 0.01)
                with tf.control_dependencies([first]):
                    mid = c.read_value()
                    second = c.assign_add(tf.tanh(mid) * 0.1)
                with tf.control_dependencies([second]):
                    loss = tf.reduce_sum(tf.matmul(c.read_value(), k) * mid)
                    final = tf.identity(c.read_value(), name="final_c")
                return [tf.identity(loss, name="loss_out"), final]

            outs = v1.xla.experimental.compile(step, [x, y]) if compiled else step(x, y)
            init = v1.global_variables_initializer()
        return g, x, y, outs, init, [c, k]

    cases = [
        ("tf1_gradient_descent", model(lambda: v1.train.GradientDescentOptimizer(0.1))),
        ("tf1_momentum", model(lambda: v1.train.MomentumOptimizer(0.05, 0.9))),
        ("tf1_momentum_nesterov",
         model(lambda: v1.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True))),
        ("tf1_adam", model(lambda: v1.train.AdamOptimizer(0.02))),
        ("tf1_assigns", assigns),
    ]
    return cases, x_value, y_value


def run_tf1(tf, np, build, x_value, y_value):
    """TensorFlow's reference: the step inside xla.compile, run STEPS times."""
    g, x, y, outs, init, variables = build(True)
    with tf.compat.v1.Session(graph=g) as sess:
        sess.run(init)
        losses = []
        for _ in range(STEPS):
            values = sess.run(outs, {x: x_value, y: y_value})
            losses.append(values[0])
        finals = sess.run([v.read_value() for v in variables])
    return np.array(losses, np.float64), {v.op.name: f for v, f in zip(variables, finals)}


def tf2_cases(tf, np):
    """(name, make) pairs; make() returns (step function, variables, optimizer or None)."""
    rng = np.random.RandomState(11)
    f32 = np.float32
    w = (rng.randn(4, 3) * 0.5).astype(f32)
    b = (rng.randn(3) * 0.1).astype(f32)
    x_value = rng.randn(6, 4).astype(f32)
    y_value = rng.randn(6, 3).astype(f32)

    # The optimizers made, whose slots become variables of their own while the step is traced.
    optimizers = []

    def optimizer_step(make_optimizer):
        def make():
            wv = tf.Variable(w, name="w")
            bv = tf.Variable(b, name="b")
            opt = make_optimizer()
            optimizers.append(opt)

            def step(x, y):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(tf.tanh(tf.matmul(x, wv) + bv) - y))
                grads = tape.gradient(loss, [wv, bv])
                opt.apply_gradients(zip(grads, [wv, bv]))
                return loss, wv.read_value(), bv.read_value()
            return step, [wv, bv]
        return make

    def manual():
        # assign_sub/assign_add by hand: AssignSubVariableOp, AssignAddVariableOp.
        wv = tf.Variable(w, name="w")
        bv = tf.Variable(b, name="b")

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, wv) + bv - y))
            gw, gb = tape.gradient(loss, [wv, bv])
            wv.assign_sub(0.1 * gw)
            bv.assign_add(-0.1 * gb)
            return loss, wv.read_value(), bv.read_value()
        return step, [wv, bv]

    def loop():
        # Three descent steps in a loop of the function: the variables are updated in a While
        # body and carried through it.
        wv = tf.Variable(w, name="w")
        bv = tf.Variable(b, name="b")

        def step(x, y):
            total = tf.constant(0.0)
            for _ in tf.range(3):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(tf.matmul(x, wv) + bv - y))
                gw, gb = tape.gradient(loss, [wv, bv])
                wv.assign_sub(0.05 * gw)
                bv.assign_sub(0.05 * gb)
                total += loss
            return total, wv.read_value(), bv.read_value()
        return step, [wv, bv]

    def branches():
        # A step that updates w on even steps and b on odd ones, in the branches of an If whose
        # predicate is a variable of its own: each branch writes a variable the other does not.
        wv = tf.Variable(w, name="w")
        bv = tf.Variable(b, name="b")
        count = tf.Variable(0, name="count")

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.tanh(tf.matmul(x, wv) + bv) - y))
            gw, gb = tape.gradient(loss, [wv, bv])

            def even():
                wv.assign_sub(0.2 * gw)
                return loss * 1.0

            def odd():
                bv.assign_sub(0.2 * gb)
                return loss * 2.0
            out = tf.cond(count % 2 == 0, even, odd)
            count.assign_add(1)
            return out, wv.read_value(), bv.read_value()
        return step, [wv, bv]

    v1 = tf.compat.v1
    cases = [
        ("tf2_gradient_descent", optimizer_step(lambda: v1.train.GradientDescentOptimizer(0.1))),
        ("tf2_momentum", optimizer_step(lambda: v1.train.MomentumOptimizer(0.05, 0.9))),
        ("tf2_adam", optimizer_step(lambda: v1.train.AdamOptimizer(0.02))),
        ("tf2_assign_sub_add", manual),
        ("tf2_while_loop", loop),
        ("tf2_if_branches", branches),
    ]
    return cases, x_value, y_value, optimizers


def compare(name, what, ours, reference, np):
    ours = np.asarray(ours, np.float64)
    reference = np.asarray(reference, np.float64)
    if ours.shape != reference.shape:
        return [f"{name}: {what}: shape {ours.shape}, TensorFlow's is {reference.shape}"]
    err, scale = tf_driver.max_error(np, ours, reference, 1e-30)
    if err > TOLERANCE * scale:
        return [f"{name}: {what}: off by {err:.3g} (largest reference value {scale:.3g})"]
    return []


STEP_LINE = re.compile(r"^step (\d+): (.*)$")


def step_losses(stdout, fetch):
    losses = []
    for line in stdout.splitlines():
        m = STEP_LINE.match(line)
        if not m:
            continue
        for part in m.group(2).split(", "):
            key, _, value = part.partition(" = ")
            if key == fetch:
                losses.append(float(value))
    return losses


def run_xlens(xlens, graph_file, feeds, fetches, outdir, init=None, assigns=()):
    extra = ["--jit=compile", f"--steps={STEPS}", "--timeout=60"]
    if init:
        extra.append(f"--init={init}")
    extra += [f"--assign={name}={path}" for name, path in assigns]
    return tf_driver.graph_run(xlens, graph_file, feeds, fetches, outdir, extra)


def run_tf1_cases(tf, np, xlens, work, failures, passed):
    cases, x_value, y_value = tf1_cases(tf, np)
    feeds = tf_driver.save_feeds(np, work, [("x", x_value), ("y", y_value)])
    for name, build in cases:
        ref_losses, ref_vars = run_tf1(tf, np, build, x_value, y_value)
        g, _, _, outs, init, variables = build(False)
        graph_file = os.path.join(work, f"{name}.pbtxt")
        with open(graph_file, "w") as f:
            f.write(str(g.as_graph_def()))
        fetches = [t.name for t in outs]
        outdir = os.path.join(work, f"{name}.out")
        run = run_xlens(xlens, graph_file, feeds, fetches, outdir, init=init.name)
        if run.returncode != 0:
            failures.append(f"{name}: xlens failed: {run.stderr.strip()[-600:]}")
            continue
        errors = compare(name, "losses", step_losses(run.stdout, fetches[0]), ref_losses, np)
        for i, fetch in enumerate(fetches[1:], start=1):
            var = fetch.split(":")[0].rsplit("/", 1)[-1][len("final_"):]
            ours = np.load(os.path.join(outdir, f"out{i}.npy"))
            errors += compare(name, f"variable {var}", ours, ref_vars[var], np)
        failures += errors
        if not errors:
            passed.append(name)


def run_tf2_cases(tf, np, xlens, work, failures, passed, skipped):
    cases, x_value, y_value, optimizers = tf2_cases(tf, np)
    (_, x_path), (_, y_path) = tf_driver.save_feeds(np, work, [("x2", x_value), ("y2", y_value)])
    spec = [tf.TensorSpec(x_value.shape, tf.float32), tf.TensorSpec(y_value.shape, tf.float32)]
    for name, make in cases:
        step, variables = make()
        # Tracing makes the optimizer's slots; the graph xlens runs is the traced function's,
        # its variables captured, their values as they are before the first call.
        concrete = tf.function(step, jit_compile=True).get_concrete_function(*spec)
        slots = [v for opt in optimizers for v in opt.variables()]
        captured = {id(v.handle): v for v in list(concrete.graph.variables) + variables + slots}
        assigns = []
        for outer, inner in concrete.graph.captures:
            if outer.dtype != tf.resource:
                continue
            v = captured.get(id(outer))
            if v is None:
                failures.append(f"{name}: the capture {inner.op.name} is no variable known here")
                continue
            path = os.path.join(work, f"{name}.{inner.op.name.replace('/', '_')}.npy")
            np.save(path, v.numpy())
            assigns.append((inner.op.name, path))
        graph_file = os.path.join(work, f"{name}.pbtxt")
        with open(graph_file, "w") as f:
            f.write(str(concrete.graph.as_graph_def()))
        ref_losses = []
        for _ in range(STEPS):
            out = concrete(tf.constant(x_value), tf.constant(y_value))
            ref_losses.append(out[0].numpy())
        ref_vars = [v.numpy() for v in variables]
        feeds = [(concrete.inputs[0].op.name, x_path), (concrete.inputs[1].op.name, y_path)]
        fetches = [t.name for t in concrete.outputs]
        outdir = os.path.join(work, f"{name}.out")
        run = run_xlens(xlens, graph_file, feeds, fetches, outdir, assigns=assigns)
        if run.returncode != 0:
            if "--assign" in run.stderr and "not a variable" in run.stderr:
                skipped.append(f"{name}: this xlens does not bind captured variables (--assign)")
                continue
            failures.append(f"{name}: xlens failed: {run.stderr.strip()[-600:]}")
            continue
        errors = compare(name, "losses", step_losses(run.stdout, fetches[0]),
                         np.array(ref_losses, np.float64), np)
        for i, v in enumerate(variables):
            ours = np.load(os.path.join(outdir, f"out{i + 1}.npy"))
            errors += compare(name, f"variable {v.name}", ours, ref_vars[i], np)
        failures += errors
        if not errors:
            passed.append(name)


def main():
    args = tf_driver.parse_args("write the graphs and arrays here (default: a temporary "
                                "directory)")
    tf, np = tf_driver.tensorflow_or_skip()

    failures, passed, skipped = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        run_tf1_cases(tf, np, args.xlens, work, failures, passed)
        run_tf2_cases(tf, np, args.xlens, work, failures, passed, skipped)
    for s in skipped:
        print(f"skipped: {s}")
    return tf_driver.finish(failures, f"{len(passed)} cases agree with TensorFlow over {STEPS} "
                                      f"steps ({', '.join(passed)}); {len(failures)} failures, "
                                      f"{len(skipped)} skipped")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Real XLA in: the HLO that jaxlib and TensorFlow write today, read, printed back and run.

Makes, at test time, real dumps (XLA_FLAGS=--xla_dump_to) of small programs with jax (a training
step, a convolution, attention, a scan and a while loop, FFTs, top-k and sorts, random numbers,
prefix scans, layer norm with exact GELU, the exact GELU alone and after a product, a bf16 product, segment sums, resizing, a program
sharded over 4 host devices)
and, when TensorFlow is installed, of tf.function(jit_compile=True) functions (a dense layer,
top_k, rfft, cholesky, a fused batch norm, a while loop and a cond). Then checks:

- every HLO text file of the dumps parses with `xlens print`;
- what xlens prints parses with XLA's own parser (from jaxlib) into the same module as the file;
- the exact GELU, alone and after a product, is compiled as one erfc (jax's expansion of it is
  recognized: one divide in its loop, oneDNN's gelu_erf after the product);
- the ReLU gradient (jnp.maximum's, ties split by a divide of selects) is compiled without a
  divide (passes/algebraic_simplifier.h), its ties at 0 and -0 still jax's;
- every unsharded before_optimizations module runs (`xlens run --reference`), to the outputs jax
  computed from the same .npy inputs where the script saved them; TensorFlow's modules with
  elided constants ({...}) are refused naming the constant, and run once filled.

Prints the counts and exits 1 on any failure, 77 (skipped) when jax is not installed.
"""
import argparse
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

SKIP = 77

# Run in a child process: XLA_FLAGS must be set before jax starts.
JAX_PROGRAMS = r'''
import json, os, sys
import numpy as np
import jax, jax.numpy as jnp
from jax import lax

out = sys.argv[1]
rng = np.random.RandomState(0)
def arr(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)

def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)

def train_step(w1, b1, w2, b2, x, y):
    loss, grads = jax.value_and_grad(mlp_loss)((w1, b1, w2, b2), x, y)
    new = [p - 0.05 * g for p, g in zip((w1, b1, w2, b2), grads)]
    return (*new, loss)

def conv(x, k):
    y = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(y)
    return lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

def attention(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

def rnn_scan(xs, w, h0):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h.sum(-1)
    return lax.scan(step, h0, xs)

def newton_sqrt(a):
    def cond(c):
        return c[1] < 20
    def body(c):
        x, i = c
        return 0.5 * (x + a / x), i + 1
    return lax.while_loop(cond, body, (a + 1.0, 0))[0]

def spectrum(x):
    return jnp.abs(jnp.fft.rfft(x, axis=-1)), jnp.fft.ifft(jnp.fft.fft2(x) * 2).real

def top_scores(x):
    values, indices = lax.top_k(x, 3)
    return values, indices, jnp.argsort(x, axis=-1)

def sort_two_keys(a, b):
    return lax.sort((jnp.round(a * 4), b), num_keys=2)

def dropout_noise(x):
    key = jax.random.key(7)
    keep = jax.random.bernoulli(key, 0.8, x.shape)
    return jnp.where(keep, x / 0.8, 0.0) + jax.random.normal(jax.random.fold_in(key, 1), x.shape)

def prefix_sums(x):
    return jnp.cumsum(x, axis=0), lax.cummax(x, axis=1), lax.associative_scan(jnp.multiply, x, axis=0)

def layer_norm_gelu(x, g, b):
    mean = x.mean(-1, keepdims=True)
    y = (x - mean) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b
    return jax.nn.gelu(y, approximate=False)

def exact_gelu(x):
    return jax.nn.gelu(x, approximate=False)

def dense_exact_gelu(x, w, b):
    return jax.nn.gelu(x @ w + b, approximate=False)

def bf16_matmul(a, b):
    return (a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16)).astype(jnp.float32)

def segments_and_one_hot(x, ids):
    return jax.ops.segment_sum(x, ids, 4), jax.nn.one_hot(ids, 4)

def upsample(x):
    return jax.image.resize(x, (2, 12, 12, 3), "bilinear")

def relu_grad(x, g):
    # jnp.maximum's gradient splits it between tied operands (x == 0 gets half) as a divide of
    # two selects between constants.
    return jax.grad(lambda x: jnp.sum(jnp.maximum(x, 0.0) * g))(x)

programs = {
    "spectrum": (spectrum, [arr(4, 16)]),
    "top_scores": (top_scores, [arr(6, 10)]),
    "sort_two_keys": (sort_two_keys, [arr(32), arr(32)]),
    "dropout_noise": (dropout_noise, [arr(8, 8)]),
    "prefix_sums": (prefix_sums, [arr(6, 5)]),
    "layer_norm_gelu": (layer_norm_gelu, [arr(4, 32), arr(32), arr(32)]),
    "exact_gelu": (exact_gelu, [arr(256)]),
    "dense_exact_gelu": (dense_exact_gelu, [arr(8, 32), arr(32, 16), arr(16)]),
    # Both sum in f32 and round to bf16 once, in different orders: a sum can land one bf16 step
    # (2^-8 relative) either side.
    "bf16_matmul": (bf16_matmul, [arr(8, 16), arr(16, 4)], 8e-3),
    "segments_and_one_hot": (segments_and_one_hot, [arr(10, 3), (np.arange(10) % 4).astype(np.int32)]),
    "upsample": (upsample, [arr(2, 6, 6, 3)]),
    "relu_grad": (relu_grad, [np.concatenate([arr(28), np.array([0, -0.0, 0, 2], np.float32)]), arr(32)]),
    "train_step": (train_step, [arr(8, 16), arr(16), arr(16, 4), arr(4), arr(32, 8), arr(32, 4)]),
    "conv": (conv, [arr(2, 10, 10, 3), arr(3, 3, 3, 4)]),
    "attention": (attention, [arr(2, 4, 8, 16), arr(2, 4, 8, 16), arr(2, 4, 8, 16)]),
    "rnn_scan": (rnn_scan, [arr(10, 4, 8), arr(8, 8), arr(4, 8)]),
    "newton_sqrt": (newton_sqrt, [np.abs(arr(16)) + 0.5]),
}
io = {}
for name, (fn, args, *rtol) in programs.items():
    results = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    d = os.path.join(out, "io", name)
    os.makedirs(d, exist_ok=True)
    if rtol:
        with open(os.path.join(d, "rtol.txt"), "w") as f:
            f.write(str(rtol[0]))
    for i, a in enumerate(args):
        np.save(os.path.join(d, f"arg{i}.npy"), a)
    for i, r in enumerate(results):
        np.save(os.path.join(d, f"out{i}.npy"), np.asarray(r))
    io["jit_" + fn.__name__] = d
with open(os.path.join(out, "io.json"), "w") as f:
    json.dump(io, f)
'''

SHARDED_PROGRAM = r'''
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((4,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
rows = NamedSharding(mesh, P("x"))
def sharded(a, b):
    c = jnp.sin(a) @ b
    c = jax.lax.with_sharding_constraint(c, NamedSharding(mesh, P(None, "x")))
    return c.sum(0)
f = jax.jit(sharded, out_shardings=rows)
f(jax.device_put(jnp.ones((8, 8)), rows), jnp.ones((8, 8)))
'''

TF_PROGRAM = r'''
import numpy as np
import tensorflow as tf
rng = np.random.RandomState(1)
# A weight in the graph, large enough that XLA's dump elides it as {...}.
weight = rng.uniform(-1, 1, size=(64, 32)).astype(np.float32)
@tf.function(jit_compile=True)
def tf_dense(x, b):
    return tf.nn.relu(tf.matmul(x, tf.constant(weight)) + b) * 2.0
tf_dense(tf.ones((4, 64)), tf.zeros((32,)))
# What TensorFlow's bridge lowers its own way: top_k (a sort and a set-dimension-size), rfft,
# cholesky, a fused batch norm in training, a while loop and a cond.
x = tf.constant(rng.uniform(-1, 1, size=(8, 8)).astype(np.float32))
for fn in [lambda a: tf.math.top_k(a, 3),
           lambda a: tf.abs(tf.signal.rfft(a)),
           lambda a: tf.linalg.cholesky(tf.matmul(a, a, transpose_b=True) + tf.eye(8)),
           lambda a: tf.compat.v1.nn.fused_batch_norm(tf.reshape(a, (1, 8, 4, 2)), [1.0, 2.0],
                                                      [0.0, 0.5], is_training=True)[0],
           lambda a: tf.while_loop(lambda i, v: i < 5, lambda i, v: (i + 1, v * 1.1), (0, a))[1],
           lambda a: tf.cond(tf.reduce_sum(a) > 0, lambda: tf.sin(a), lambda: tf.cos(a))]:
    tf.function(fn, jit_compile=True)(x)
'''


def is_hlo_text(path):
    if not path.endswith(".txt"):
        return False
    with open(path, "rb") as f:
        return f.read(10) == b"HloModule "


def make_dumps(work):
    """Runs the programs; returns {kind: dump dir} for those that ran."""
    dumps = {}
    jobs = [("jax", JAX_PROGRAMS, "--xla_dump_to={d}"),
            ("sharded", SHARDED_PROGRAM, "--xla_dump_to={d} --xla_force_host_platform_device_count=4")]
    if importlib.util.find_spec("tensorflow") is not None:
        jobs.append(("tf", TF_PROGRAM, "--xla_dump_to={d}"))
    else:
        print("note: TensorFlow is not installed; its dumps are not checked")
    procs = []
    for kind, source, flags in jobs:
        d = os.path.join(work, kind)
        os.makedirs(d)
        env = dict(os.environ, XLA_FLAGS=flags.format(d=d), JAX_PLATFORMS="cpu",
                   TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        procs.append((kind, d, subprocess.Popen([sys.executable, "-c", source, d], env=env,
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
    for kind, d, proc in procs:
        out, _ = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"the {kind} program failed:\n{out.decode(errors='replace')[-3000:]}")
        dumps[kind] = d
    return dumps


def xla_print(xla_hlo, text):
    options = xla_hlo.HloPrintOptions()
    options.print_large_constants = False  # XLA fills {...} with arbitrary values when parsing it
    return xla_hlo.hlo_module_from_text(text).to_string(options)


def check_parse(xlens, xla_hlo, path, stats, failures):
    run = subprocess.run([xlens, "print", path], capture_output=True, text=True)
    if run.returncode != 0:
        failures.append(f"{path}: xlens print failed: {run.stderr.strip()[:400]}")
        return
    stats["parsed"] += 1
    with open(path, encoding="utf-8") as f:
        original = f.read()
    if run.stdout == original:
        stats["printed_identically"] += 1
    try:
        expected = xla_print(xla_hlo, original)
    except Exception as e:  # XLA reports parse errors as generic exceptions.
        stats["xla_cannot_parse_original"] += 1
        print(f"note: {os.path.basename(path)}: XLA's parser refuses the file itself: {str(e)[:200]}")
        return
    try:
        ours = xla_print(xla_hlo, run.stdout)
    except Exception as e:
        failures.append(f"{path}: XLA cannot parse what xlens printed: {str(e)[:400]}")
        return
    if ours != expected:
        failures.append(f"{path}: XLA sees a different module in what xlens printed")
        return
    stats["xla_same_module"] += 1


def compare_npy(expected_dir, actual_dir, count):
    import numpy as np
    rtol = 2e-3
    if os.path.exists(os.path.join(expected_dir, "rtol.txt")):
        with open(os.path.join(expected_dir, "rtol.txt"), encoding="utf-8") as f:
            rtol = float(f.read())
    for i in range(count):
        want = np.load(os.path.join(expected_dir, f"out{i}.npy"))
        path = os.path.join(actual_dir, f"out{i}.npy")
        if not os.path.exists(path):
            return f"xlens wrote no out{i}.npy"
        got = np.load(path)
        if got.shape != want.shape:
            return f"out{i}: shape {got.shape}, jax computed {want.shape}"
        if not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=2e-4):
            worst = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
            return f"out{i}: differs from jax's by up to {worst:g}"
    return None


def check_run(xlens, path, io_dir, work, stats, failures):
    """Runs a before_optimizations module; against jax's outputs when io_dir is given."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    name = os.path.basename(path)
    args = [xlens, "run", path, "--reference", "--timeout", "60"]
    if "constant({...})" in text:
        refused = subprocess.run(args, capture_output=True, text=True)
        lines = refused.stderr.strip().splitlines()
        if refused.returncode != 1 or len(lines) != 1 or "elided" not in lines[0]:
            failures.append(f"{path}: expected one line refusing the elided constant, got exit "
                            f"{refused.returncode}: {refused.stderr.strip()[:300]}")
            return
        stats["elided_refused"] += 1
        args.append("--fill_elided_constants=zeros")
    if io_dir:
        out_dir = os.path.join(work, "out", name)
        args += ["--inputs", io_dir, "--outputs", out_dir]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        failures.append(f"{path}: xlens run failed: {run.stderr.strip()[:400]}")
        return
    if io_dir:
        count = len(glob.glob(os.path.join(io_dir, "out*.npy")))
        problem = compare_npy(io_dir, out_dir, count)
        if problem:
            failures.append(f"{path}: {problem}")
            return
        stats["ran_to_jax_outputs"] += 1
    stats["ran"] += 1


def optimized_dump(xlens, jax_dir, module, out, failures):
    """xlens's dump (--xla_dump_to=`out`) of jax's before_optimizations module `module`; None
    (with a failure) where jax wrote no such module or xlens cannot run it."""
    paths = glob.glob(os.path.join(jax_dir, f"*.{module}.before_optimizations.txt"))
    if len(paths) != 1:
        failures.append(f"{module}: jax wrote {len(paths)} before_optimizations modules")
        return None
    run = subprocess.run([xlens, "run", paths[0], f"--xla_dump_to={out}"], capture_output=True, text=True)
    if run.returncode != 0:
        failures.append(f"{paths[0]}: xlens run failed: {run.stderr.strip()[:400]}")
        return None
    return paths[0]


def ir_divides(out):
    """(divides, files) in the unoptimized LLVM IR of a dump."""
    ir = glob.glob(os.path.join(out, "*.ir-no-opt.ll"))
    return sum(open(p, encoding="utf-8").read().count(" fdiv ") for p in ir), len(ir)


def check_relu_gradient_folded(xlens, jax_dir, work, stats, failures):
    """jnp.maximum's gradient as today's jax writes it, select(x == max, 1, 0) / select(0 == max,
    2, 1), runs with no divide: the algebraic simplifier folds the quotients (its numbers, ties
    included, check_run compares with jax's)."""
    out = os.path.join(work, "relu_dumps")
    path = optimized_dump(xlens, jax_dir, "jit_relu_grad", out, failures)
    if path is None:
        return
    divides, files = ir_divides(out)
    if not files or divides:
        failures.append(f"{path}: the ReLU gradient's divide was not folded ({divides} divides in its "
                        f"LLVM IR, {files} files): passes/algebraic_simplifier.cc")
        return
    stats["relu_folded"] += 1


def check_exact_gelu_recognized(xlens, jax_dir, work, stats, failures):
    """The exact GELU as today's jax lowers it is still compiled as one erfc.

    jax.nn.gelu(x, approximate=False) reaches HLO with erfc spelled out in some ninety
    instructions (compiler/passes/erfc_expansion.h); xlens finds that expansion by its structure
    and constants. A jax that spells it otherwise keeps the numbers right (check_run) and loses
    only the speed, so this checks the match itself, on both of its users: the GELU alone is
    one loop with one divide (the expansion as written has two: 1/|z| and 1/z^2), and after a
    product it is the oneDNN call's gelu_erf post-op.
    """
    for module, expect in (("jit_exact_gelu", "one divide"), ("jit_dense_exact_gelu", "gelu_erf")):
        out = os.path.join(work, "gelu_dumps", module)
        path = optimized_dump(xlens, jax_dir, module, out, failures)
        if path is None:
            continue
        if expect == "one divide":
            divides, files = ir_divides(out)
            if not files or divides > 1:
                failures.append(f"{path}: the exact GELU was not compiled as one erfc "
                                f"({divides} divides in its LLVM IR, {files} files): jax's erfc "
                                f"expansion is no longer recognized (passes/erfc_expansion.cc)")
                continue
        else:
            listing = "".join(open(p, encoding="utf-8").read()
                              for p in glob.glob(os.path.join(out, "*.thunk_sequence.txt")))
            if "+ gelu_erf" not in listing:
                failures.append(f"{path}: the exact GELU after a product is not oneDNN's gelu_erf "
                                f"post-op (listing: {listing.strip()[:300]!r}): jax's erfc expansion is "
                                f"no longer recognized (passes/erfc_expansion.cc)")
                continue
        stats["gelu_recognized"] += 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--keep", help="make the dumps in this directory and keep them")
    args = parser.parse_args()
    try:
        import jax  # noqa: F401
        import numpy  # noqa: F401
        from jaxlib import _hlo as xla_hlo
    except ImportError as e:
        print(f"SKIPPED: jax is not installed ({e}); scripts/setup.sh installs it")
        return SKIP
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="xlens-real-dumps-") as scratch:
        work = args.keep or scratch
        os.makedirs(work, exist_ok=True)
        dumps = make_dumps(work)
        made = time.time() - start
        io = {}
        if os.path.exists(os.path.join(dumps["jax"], "io.json")):
            with open(os.path.join(dumps["jax"], "io.json")) as f:
                io = json.load(f)
        stats = dict.fromkeys(["files", "with_stack_frames", "parsed", "printed_identically",
                               "xla_same_module", "xla_cannot_parse_original", "before_optimizations",
                               "ran", "ran_to_jax_outputs", "elided_refused", "sharded",
                               "gelu_recognized", "relu_folded"], 0)
        failures = []
        for kind, d in sorted(dumps.items()):
            for path in sorted(glob.glob(os.path.join(d, "*.txt"))):
                if not is_hlo_text(path):
                    continue
                stats["files"] += 1
                with open(path, encoding="utf-8") as f:
                    head = f.read(1 << 16)
                stats["with_stack_frames"] += "\nStackFrames\n" in head
                check_parse(args.xlens, xla_hlo, path, stats, failures)
                if not path.endswith(".before_optimizations.txt"):
                    continue
                stats["before_optimizations"] += 1
                first = head.split("\n", 1)[0]
                if "num_partitions=" in first and "num_partitions=1," not in first + ",":
                    # Sharded: runs on one device only when its custom calls are annotations.
                    stats["sharded"] += 1
                    if "xla.sdy.GlobalToLocalShape" in head or "SPMDFullToShardShape" in head:
                        continue
                module = os.path.basename(path).split(".")[1]
                check_run(args.xlens, path, io.get(module) if kind == "jax" else None, work,
                          stats, failures)
        check_exact_gelu_recognized(args.xlens, dumps["jax"], work, stats, failures)
        check_relu_gradient_folded(args.xlens, dumps["jax"], work, stats, failures)
    for failure in failures:
        print("FAIL " + failure)
    print(f"{stats['files']} HLO files ({stats['with_stack_frames']} with stack-frame tables): "
          f"{stats['parsed']} parse with xlens, {stats['printed_identically']} print back "
          f"byte for byte, {stats['xla_same_module']} print back to the same module for XLA's "
          f"parser ({stats['xla_cannot_parse_original']} XLA itself refuses)")
    print(f"{stats['before_optimizations']} before_optimizations modules ({stats['sharded']} "
          f"sharded): {stats['ran']} run with --reference, {stats['ran_to_jax_outputs']} to jax's "
          f"own outputs; {stats['elided_refused']} with elided constants refused until filled")
    print(f"{stats['gelu_recognized']} of 2 exact GELUs as jax lowers them today compiled as one erfc; "
          f"{stats['relu_folded']} of 1 ReLU gradients without a divide")
    print(f"dumps made in {made:.1f} s, checked in {time.time() - start - made:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""xlens' CPU code against XLA's CPU backend (jaxlib) on the very same HLO, workload by workload.

Each workload is a JAX function and its arguments. JAX lowers it to HLO text
(`jax.jit(f).lower(*args).as_text(dialect="hlo")`), so both compilers get the identical module;
the arguments go to `xlens run --inputs DIR` as .npy files and to the jitted function as arrays.
In the same run, on the same inputs, the script times XLA's compiled call (the median of N calls
after a warm-up, each waited for) and `xlens run --iterations N` (its printed run median), checks
that the outputs agree, and prints per workload both times, the ratio XLA / xlens (above 1:
xlens is faster), both compile times (XLA: `Lowered.compile()`; xlens: the `compile ... ms` that
`xlens run` prints), and the geometric mean of the ratios.

Every `xlens run` of a workload (and `% pair`'s process, below) shares one persistent cache
(`--xla_xlens_persistent_cache_dir`, a 0700 folder of the run's own, removed at its end, one per
workload): a kernel xlens chooses by timing at compile time (the depthwise convolution's) is
timed once, in the first round, and every round runs that same pick, where each process timing
it again could pick another under load. Later processes compile from that cache, so the `xlens
comp` column is the first round's compile alone: the whole compile, its timings included, as
in a process without a cache; XLA's is its one `Lowered.compile()`.

A shared 2-core machine is noisy: a neighbour can slow down either side for a second or two. So
each workload is timed in R rounds (`--rounds`, default 3) that alternate xlens and XLA; the
printed times are the medians over the rounds, and the `range` column gives the lowest and
highest per-round ratio, so a reader sees how far one run could have swung. The rounds of the
workloads are interleaved (round 1 of every workload, then round 2 of every workload, ...), so
that a slow spell of the machine meets one round of a workload rather than all of them. On a
virtual machine the host itself takes the CPUs for a share of the time (steal, which Linux counts
in /proc/stat); the `steal` column is that share over the row's rounds (its floors, xlens's runs
and XLA's), and a line under the table gives it over them all, so that a row whose median swung
reads beside what the host took meanwhile (roofline.steal_share).

Each workload is also held to what this machine can do (roofline.py): before the workloads, the
same run measures the machine's limits with tests/bench/machine_limits (STREAM copy and triad,
cache bandwidth by working set, peak f32 FLOP/s, oneDNN's standalone time for every product and
convolution of the suite), and each row gives what xlens achieves (GB/s of its arguments and
results, or GFLOP/s of its products and convolutions) and its time as a percentage of the bound
that applies: bytes over the bandwidth of a working set that size (memory's copy, triad, or the
rate of the workload's own mix of reads and writes between them, or the cache that holds it),
oneDNN's standalone time for its products and convolutions and, beside them, its softmaxes,
reductions and weight updates each at the faster of oneDNN's primitive and its own bytes and
arithmetic, with the arithmetic of the rest (the module as a oneDNN program), or the module's own
floating-point operations (counted as XLA's HloCostAnalysis counts them) over the FMA units' peak,
whichever is longest. The `bound` column says which. Each floor is the best of many runs, so
`% bound` holds xlens's best run of each round to it (what `xlens run` prints as its best), taken
over as many runs as machine_limits takes for a floor (up to 0.2 s of them: the round's runs and,
for a short workload, a second `xlens run` for the rest; roofline.executions_to_match_floor); the
`median` column beside it gives the same share for the round's median run, which the machine's
noise lowers as well. A memory-bound row also gives `% triad`: the same bytes at STREAM triad's rate
over its working set whatever its mix of reads and writes (the work item's criterion, "memory-bound
workloads reach 90% of triad"), stricter than the mix-matched bound wherever triad measured faster
than that; the summary counts the rows at 90% of each. Beside them `% pair` answers whether xlens
moves bytes as fast as the stream kernels do in the same moment: after each round's runs one
process (`machine_limits --paired`) compiles the module as `xlens run` does and alternates, 30
times, one run of it with one pass of each stream kernel its bound's rule reads over the same
bytes (copy and triad, or the read-only sum; where the last-level cache holds those bytes, each
timed run and each timed pass right after three untimed ones of its own, so that both sides find
the cache and the pool as back-to-back runs do); each pair's share is that rule's floor at the rates
of the pair's passes against the pair's run, and `% pair` is the median over every pair of the
rounds (roofline.pair_shares; quartiles and the best of each, the best pass against the best run,
printed under the counts). The memory's speed here changes by half between minutes (STREAM copy
50-89 GB/s from run to run), so `% bound` and `% triad`, held to the run's best minute, partly
read that phase; `% pair` cannot, and is never counted in their place. A row at its floor has
about half its pairs over 100%, so a row is flagged only where its median pair is over 100% by
more than the error of a median of pairs spread as a control's measured the same way
(roofline.CONTROL, triad's b + 3c against its own triad floor; roofline.pair_beaten_over), the
limit printed under the counts. Floors are also
measured right before each round: the stream kernels over the workload's working set, or its
library calls and the FMA and transcendental rates (`machine_limits --floors`). The run's best is the better of every figure
measured, before and after the workloads and beside every round; each round is held to the
stricter of its own and that best (the label says `beside` where the round's own held), each share
is the median over the rounds of that round's share, and the bound printed is that median round's
(roofline.row_shares). A share over 100% (xlens beating oneDNN's own kernel, or STREAM's loops)
is flagged `floor beaten: unreliable`; a row whose library calls all run in xlens's own loops
and beat oneDNN's time (`its calls in xlens's own loops, faster than oneDNN's`) is held to its
bytes and its arithmetic instead (the calls' multiply-adds at the FMA peak); the summary's counts
are out of all the rows of a kind and
leave such a share out of the count at 90% and the median, saying how many (each share judged by
itself: a row over 100% of its mix-matched bound may be under triad's). The chain's bandwidth is also
printed as a share of the triad's (a[i] = b[i] + 3 c[i], compiled by xlens).

Usage: tests/bench/codegen_vs_xla.py --xlens build/compiler/cli/xlens [--iterations 20]
                                     [--rounds 3] [--only REGEX] [--keep DIR]
                                     [--machine-limits build/tests/bench/machine_limits]
Exit status: 0 when every output agrees, 1 otherwise, 77 without jax.
"""
import argparse
import atexit
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def workloads(jax, jnp):
    """name -> (function, [argument specs]); a spec is (shape, kind) with kind 'f' (uniform
    [-1, 1]), 'p' (uniform (0, 1], for square roots) or 'onehot' (rows of a one-hot matrix)."""
    lax = jax.lax

    def gelu_tanh(x):
        return 0.5 * x * (1.0 + jnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))

    def gelu_mlp(x, w1, w2):
        return jnp.dot(gelu_tanh(jnp.dot(x, w1)), w2)

    def conv_relu(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.maximum(y, 0.0)

    def cross_entropy(logits, labels):
        return -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits), axis=1))

    def mlp_loss(params, x, labels):
        w1, b1, w2, b2 = params
        h = jnp.maximum(jnp.dot(x, w1) + b1, 0.0)
        return cross_entropy(jnp.dot(h, w2) + b2, labels)

    def mlp_train_step(w1, b1, w2, b2, x, labels):
        params = (w1, b1, w2, b2)
        grads = jax.grad(mlp_loss)(params, x, labels)
        return tuple(p - 0.1 * g for p, g in zip(params, grads))

    def attention(q, k, v):
        s = jnp.einsum("hqd,hkd->hqk", q, k) / 8.0
        return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)

    def bias_erf_gelu(x, b):
        return jax.nn.gelu(x + b, approximate=False)

    def softmax(x):
        m = jnp.max(x, axis=1, keepdims=True)
        e = jnp.exp(x - m)
        return e / jnp.sum(e, axis=1, keepdims=True)

    def log_softmax(x):
        return jax.nn.log_softmax(x, axis=1)

    def chain8(x, y):
        a = x * y
        b = a + x
        c = b - y
        d = jnp.maximum(c, x)
        e = d * d
        f = jnp.minimum(e, y)
        g = f + a
        return -g

    def triad(b, c):
        return b + 3.0 * c

    def sigmoid_chain(x):
        return jax.nn.sigmoid(x) * jnp.tanh(x) + jnp.exp(-x * x)

    def layer_norm(x, gamma, beta):
        mean = jnp.mean(x, axis=1, keepdims=True)
        c = x - mean
        var = jnp.mean(c * c, axis=1, keepdims=True)
        return c * lax.rsqrt(var + 1e-5) * gamma + beta

    def rms_norm_residual(x, r, g):
        y = x + r
        return y * lax.rsqrt(jnp.mean(y * y, axis=1, keepdims=True) + 1e-6) * g, y

    def adam(p, g, m, v):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        return p - 1e-3 * (m / (1 - 0.9)) / (jnp.sqrt(v / (1 - 0.999)) + 1e-8), m, v

    def mnist_softmax_step(w, b, x, labels):
        def loss(w, b):
            return cross_entropy(jnp.dot(x, w) + b, labels)
        gw, gb = jax.grad(loss, argnums=(0, 1))(w, b)
        return w - 0.5 * gw, b - 0.5 * gb

    def convnet_loss(params, x, labels):
        k1, k2, w = params
        dn = ("NHWC", "HWIO", "NHWC")
        h = jnp.maximum(lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=dn), 0)
        h = jnp.maximum(lax.conv_general_dilated(h, k2, (2, 2), "SAME", dimension_numbers=dn), 0)
        return cross_entropy(jnp.dot(h.reshape(h.shape[0], -1), w), labels)

    def convnet_train_step(k1, k2, w, x, labels):
        params = (k1, k2, w)
        grads = jax.grad(convnet_loss)(params, x, labels)
        return tuple(p - 0.05 * g for p, g in zip(params, grads))

    def depthwise_conv(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=x.shape[-1],
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def grouped_conv(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                        feature_group_count=x.shape[-1] // w.shape[2],
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def batch_norm_train(x, gamma, beta, dy):
        # Training mode: the batch's statistics, and the backward pass for dy.
        def bn(x, gamma, beta):
            mean = jnp.mean(x, axis=(0, 1, 2))
            var = jnp.mean(jnp.square(x - mean), axis=(0, 1, 2))
            return (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta
        y, vjp = jax.vjp(bn, x, gamma, beta)
        return (y,) + vjp(dy)

    def masked_attention(q, k, v):
        t = q.shape[1]
        s = jnp.einsum("hqd,hkd->hqk", q, k) / 8.0
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e9)  # causal
        return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)

    def lstm_cell(x, h, c, wx, wh, b):
        gates = jnp.dot(x, wx) + jnp.dot(h, wh) + b
        i, f, g, o = jnp.split(gates, 4, axis=1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return jax.nn.sigmoid(o) * jnp.tanh(c), c

    F = "f"
    return {
        "gelu_mlp": (gelu_mlp, [((256, 512), F), ((512, 2048), F), ((2048, 512), F)]),
        "conv3x3_relu": (conv_relu, [((8, 32, 32, 64), F), ((3, 3, 64, 64), F)]),
        "mlp_train_step": (mlp_train_step, [((784, 256), F), ((256,), F), ((256, 10), F),
                                            ((10,), F), ((128, 784), F), ((128, 10), "onehot")]),
        "attention_8x256x64": (attention, [((8, 256, 64), F)] * 3),
        "attention_8x1024x64": (attention, [((8, 1024, 64), F)] * 3),
        "bias_erf_gelu": (bias_erf_gelu, [((4096, 1024), F), ((1024,), F)]),
        "softmax": (softmax, [((4096, 1000), F)]),
        "log_softmax": (log_softmax, [((4096, 1000), F)]),
        "sigmoid_tanh_exp": (sigmoid_chain, [((4096, 1024), F)]),
        "chain8": (chain8, [((16777216,), F), ((16777216,), F)]),
        "triad": (triad, [((16777216,), F), ((16777216,), F)]),
        "layer_norm": (layer_norm, [((4096, 1024), F), ((1024,), F), ((1024,), F)]),
        "rms_norm_residual": (rms_norm_residual, [((4096, 1024), F), ((4096, 1024), F),
                                                  ((1024,), F)]),
        "row_reduce": (lambda x: jnp.sum(x, axis=1), [((4096, 1024), F)]),
        "column_reduce": (lambda x: jnp.sum(x, axis=0), [((4096, 1024), F)]),
        "transpose": (lambda x: jnp.transpose(x), [((2048, 4096), F)]),
        "adam": (adam, [((4194304,), F), ((4194304,), F), ((4194304,), F), ((4194304,), "p")]),
        "mnist_softmax_step": (mnist_softmax_step, [((784, 10), F), ((10,), F), ((100, 784), F),
                                                    ((100, 10), "onehot")]),
        "convnet_train_step": (convnet_train_step, [((3, 3, 1, 8), F), ((3, 3, 8, 16), F),
                                                    ((14 * 14 * 16, 10), F),
                                                    ((32, 28, 28, 1), F), ((32, 10), "onehot")]),
        # What the real-model corpus brings: MobileNet's depthwise and ResNeXt's grouped
        # convolutions, batch norm in training, a decoder's causal attention, an LSTM step.
        "depthwise_conv3x3": (depthwise_conv, [((8, 56, 56, 128), F), ((3, 3, 1, 128), F)]),
        "grouped_conv3x3_g4": (grouped_conv, [((8, 28, 28, 128), F), ((3, 3, 32, 128), F)]),
        "batch_norm_train": (batch_norm_train, [((32, 28, 28, 128), F), ((128,), F), ((128,), F),
                                                ((32, 28, 28, 128), F)]),
        "causal_attention": (masked_attention, [((8, 512, 64), F)] * 3),
        "lstm_cell": (lstm_cell, [((64, 256), F), ((64, 512), F), ((64, 512), F),
                                  ((256, 2048), F), ((512, 2048), F), ((2048,), F)]),
    }


def make_arguments(np, specs, seed):
    rng = np.random.default_rng(seed)
    args = []
    for shape, kind in specs:
        if kind == "onehot":
            a = np.zeros(shape, np.float32)
            a[np.arange(shape[0]), rng.integers(0, shape[1], shape[0])] = 1.0
        elif kind == "p":
            a = rng.uniform(1e-3, 1.0, shape).astype(np.float32)
        else:
            a = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        args.append(a)
    return args


# The library calls xlens runs in loops of its own rather than oneDNN's kernels, as `xlens run`
# lists each call's kernel: oneDNN's standalone time is no floor for those, so a module whose
# calls all run there, faster than oneDNN's, is held to its bytes and arithmetic instead
# (roofline.row_shares).
OWN_LIBRARY_KERNELS = ("depthwise:", "few-positions:", "small-product:", "narrow-product:",
                       "short-k-product:")


def interleaved_rounds(workloads, rounds):
    """The order the rounds run in, as (round, workload) index pairs: round 0 of every workload in
    turn, then round 1 of every workload, and so on. Back to back, a workload's rounds fell within
    seconds of each other, and a slow spell of the machine lasting that long met most of them."""
    return [(r, w) for r in range(rounds) for w in range(workloads)]


def run_xlens(xlens, hlo_file, inputs_dir, outputs_dir, iterations, cache_dir=None):
    """(compile ms, median ms, best ms, own): `own` where the module has library calls and every
    one of them runs in xlens's own loops (OWN_LIBRARY_KERNELS). `cache_dir`: the run's
    persistent cache (--xla_xlens_persistent_cache_dir), so that every process runs the kernels
    the first one chose by timing, and compiles from what it kept; None: no cache."""
    try:
        proc = subprocess.run([xlens, "run", hlo_file, "--inputs", inputs_dir, "--outputs",
                               outputs_dir, "--iterations", str(iterations), "--max-work", "0"]
                              + ([f"--xla_xlens_persistent_cache_dir={cache_dir}"] if cache_dir else []),
                              capture_output=True, text=True)
    except OSError as e:
        raise RuntimeError(f"{xlens}: {e.strerror}")
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or proc.stdout.strip())
    match = re.search(r"compile ([0-9.]+) ms; run median ([0-9.]+) ms over [0-9]+ iterations?"
                      r"(?: \(best ([0-9.]+) ms\))?", proc.stdout)
    if match is None:
        raise RuntimeError("no timing line in: " + proc.stdout[-500:])
    median = float(match.group(2))
    return (float(match.group(1)), median, float(match.group(3) or median),
            all_own_library_kernels(proc.stdout))


def all_own_library_kernels(listing):
    """Whether `xlens run`'s thunk listing has library calls and every one runs in xlens's own
    loops (OWN_LIBRARY_KERNELS). Every call counts, whatever its thunk is named; a listing cut
    short ("... N more") may hide one on oneDNN's kernels, so then the answer is no."""
    kernels = re.findall(r"^.*library-call \S+ \(.*?; kernel ([^;)]*)", listing, re.MULTILINE)
    cut = re.search(r"^\s+\.\.\. [0-9]+ more$", listing, re.MULTILINE)
    return bool(kernels) and not cut and all(k.startswith(OWN_LIBRARY_KERNELS) for k in kernels)


def time_xla(jax, jitted, args, iterations):
    jitted(*args)  # warm-up (the compilation is timed separately)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        jax.block_until_ready(jitted(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def outputs_agree(np, expected, outputs_dir):
    leaves = expected if isinstance(expected, (tuple, list)) else [expected]
    worst = 0.0
    for i, want in enumerate(leaves):
        got = np.load(os.path.join(outputs_dir, f"out{i}.npy"))
        want = np.asarray(want)
        if got.shape != want.shape:
            return False, f"out{i}: shape {got.shape}, XLA {want.shape}"
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale \
            if want.size else 0.0
        worst = max(worst, err)
        if not np.allclose(got, want, rtol=2e-3, atol=2e-3 * scale, equal_nan=True):
            return False, f"out{i}: max error {err:.3g} (relative to the largest |value|)"
    return True, f"{worst:.1e}"


def leaves_of(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def left_out(median, unreliable, missing=0):
    """The parenthesis after a count of kind_counts: the median over the rows counted, how many
    rows beat their floor and how many had no figure, both left out of the count and the median."""
    parts = ([f"median {median:.0f}%"] if median is not None else []) + (
        [f"{unreliable} left out as unreliable, floor beaten"] if unreliable else []) + (
        [f"{missing} left out without a figure"] if missing else [])
    return f" ({'; '.join(parts)})" if parts else ""


def steal_cell(share):
    """The `steal` column: the share of the CPUs' time the host took over a row's rounds
    (roofline.steal_share), "-" where /proc/stat says nothing."""
    return f"{'-':>6}" if share is None else f"{share * 100:>5.0f}%"


def control_pairs(jax, jnp, np, roofline, limits_binary, work, rows, rounds):
    """(read bytes, write bytes, pairs) of `% pair`'s control (roofline.CONTROL, a module that is
    exactly a stream kernel), or None where no row was paired with the stream kernels: the control
    row's own pairs where it ran, else the module paired as a row is, once per round, after the
    rows. (A library-bound row's pairs hold no stream kernels; those rows take no control.)"""
    paired = [row for _, row in rows if isinstance(row, dict) and row.get("pairs")
              and row["pairs"][0].get("kernels")]
    if not paired:
        return None
    for name, row in rows:
        if name == roofline.CONTROL and isinstance(row, dict) and row.get("pairs"):
            return row["read_bytes"], row["write_bytes"], row["pairs"]
    fn, specs = workloads(jax, jnp)[roofline.CONTROL]
    directory = os.path.join(work, roofline.CONTROL)
    os.makedirs(os.path.join(directory, "inputs"), exist_ok=True)
    hlo_file = os.path.join(directory, roofline.CONTROL + ".hlo")
    with open(hlo_file, "w") as f:
        f.write(jax.jit(fn).lower(*[jax.ShapeDtypeStruct(shape, jnp.float32)
                                    for shape, _ in specs]).as_text(dialect="hlo"))
    host_args = make_arguments(np, specs, 0)
    for i, a in enumerate(host_args):
        np.save(os.path.join(directory, "inputs", f"arg{i}.npy"), a)
    read_bytes = sum(a.nbytes for a in host_args)
    write_bytes = host_args[0].nbytes
    try:
        pairs = [roofline.measure_pairs(limits_binary, hlo_file, os.path.join(directory, "inputs"),
                                        read_bytes + write_bytes,
                                        roofline.paired_kernels(read_bytes, write_bytes))
                 for _ in range(rounds)]
    except (OSError, RuntimeError, ValueError):
        return None
    return read_bytes, write_bytes, pairs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternate xlens and XLA this many times per workload")
    parser.add_argument("--only", default="", help="run the workloads whose name matches")
    parser.add_argument("--keep", default="", help="keep the HLO, inputs and outputs here")
    parser.add_argument("--machine-limits", default="",
                        help="the machine_limits program (default: beside xlens in its build tree)")
    args = parser.parse_args()
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
    except ImportError:
        print("jax is not installed (scripts/setup.sh --test-peers installs it)", file=sys.stderr)
        return 77
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import roofline
    jax.config.update("jax_platforms", "cpu")
    work = args.keep or tempfile.mkdtemp(prefix="codegen_vs_xla.")
    if not args.keep:  # removed however the run ends (a failed xlens, an interrupt)
        atexit.register(shutil.rmtree, work, True)
    # xlens's persistent cache for this run alone (mkdtemp: 0700, as xlens requires of it), so
    # that a kernel chosen by timing at compile time (the depthwise convolution's) is timed once,
    # by the first round's process, and every later process of the run (rounds, `% pair`) runs
    # that same pick instead of timing it again under other load. A folder per workload inside
    # it, so that each workload's first compile is a whole one, sharing no kernel with another's.
    # Never under --keep's: a cache kept from an earlier run would carry that run's picks.
    caches = tempfile.mkdtemp(prefix="codegen_vs_xla.cache.")
    atexit.register(shutil.rmtree, caches, True)
    rounds = max(1, args.rounds)
    # First every workload's HLO, so that the machine's limits, oneDNN's standalone time for
    # every product and convolution among them included, are measured once, in this run.
    selected = []
    for seed, (name, (fn, specs)) in enumerate(workloads(jax, jnp).items()):
        if args.only and not re.search(args.only, name):
            continue
        directory = os.path.join(work, name)
        os.makedirs(os.path.join(directory, "inputs"), exist_ok=True)
        os.makedirs(os.path.join(directory, "outputs"), exist_ok=True)
        lowered = jax.jit(fn).lower(*[jax.ShapeDtypeStruct(shape, jnp.float32)
                                      for shape, _ in specs])
        hlo_file = os.path.join(directory, name + ".hlo")
        with open(hlo_file, "w") as f:
            f.write(lowered.as_text(dialect="hlo"))
        selected.append((seed, name, specs, directory, lowered, hlo_file))
    limits_binary = args.machine_limits or roofline.find_binary(args.xlens)
    # The run takes minutes; a rebuild of the tree meanwhile must not pull xlens away mid-run.
    try:
        xlens = shutil.copy2(args.xlens, os.path.join(work, "xlens"))
    except OSError as e:
        print(f"xlens codegen_vs_xla: --xlens {args.xlens}: {e.strerror}", file=sys.stderr)
        return 1
    if os.path.exists(limits_binary):
        limits_binary = shutil.copy2(limits_binary, os.path.join(work, "machine_limits"))
    hlo_files = [entry[5] for entry in selected]
    start = time.perf_counter()
    try:
        before = roofline.measure(limits_binary, hlo_files)
    except (OSError, RuntimeError) as e:
        print(f"xlens codegen_vs_xla: cannot measure the machine's limits with {limits_binary}: "
              f"{str(e).splitlines()[0] if str(e) else e} (build the machine_limits target)",
              file=sys.stderr)
        return 1
    limits = roofline.Limits(before)
    print(f"jax {jax.__version__}, {os.cpu_count()} CPUs; times are medians of "
          f"{args.iterations} runs, then the median over {rounds} alternating rounds (ms); "
          f"the machine's limits measured before the workloads ({time.perf_counter() - start:.0f} s) "
          f"and again after them, the better figures kept (the bounds below use both)")
    header = (f"{'workload':<22}{'XLA ms':>9}{'xlens ms':>10}{'XLA/xlens':>10}{'range':>12}"
              f"{'xlens achieves':>16}{'% bound':>8}{'median':>7}{'% triad':>8}{'% pair':>7}  {'bound':<28}"
              f"{'XLA comp':>9}"
              f"{'xlens comp':>11}{'steal':>6}  agree")
    # The rows wait for the second measurement of the limits; meanwhile progress goes to stderr.
    # Every workload is set up first (its arguments, XLA's compile and reference outputs, its
    # floors' plan); then the rounds run interleaved (interleaved_rounds): round 1 of every
    # workload, then round 2 of every workload, and so on, so that the rounds of one workload lie
    # the whole suite apart instead of seconds. In a quiet run softmax's best run was 0.55 ms in
    # one round and 0.66 or more in the other two (81% of copy by the median round, 95% in the
    # runs before), while its pairs in those rounds kept pace with the stream kernels (94%) and
    # log_softmax's rounds a few seconds later ran at their floor: a slow spell of the machine
    # met two of softmax's three rounds. Interleaved, a spell that short meets one round of a
    # workload, which the median over its rounds leaves out. No floor and no statistic changes.
    # Every workload's arguments and XLA's outputs are held until its last round (about 1 GB for
    # the whole suite).
    states, failures = [], 0
    for seed, name, specs, directory, lowered, hlo_file in selected:
        print(f"  {name} ...", file=sys.stderr, flush=True)
        host_args = make_arguments(np, specs, seed)
        device_args = [jax.device_put(a) for a in host_args]
        for i, a in enumerate(host_args):
            np.save(os.path.join(directory, "inputs", f"arg{i}.npy"), a)
        start = time.perf_counter()
        compiled = lowered.compile()
        xla_compile_ms = (time.perf_counter() - start) * 1e3
        expected = compiled(*device_args)
        cache_dir = os.path.join(caches, name)
        os.mkdir(cache_dir, 0o700)
        read_bytes = sum(a.nbytes for a in host_args)
        moved = read_bytes + sum(np.asarray(leaf).nbytes for leaf in leaves_of(expected))
        # A workload bound by its library calls or its arithmetic is held, round by round, to
        # those floors measured right before the round, as a memory-bound one to the stream
        # kernels: oneDNN's standalone depthwise convolution took 0.44-0.68 ms in quiet runs and
        # 1.2-2.3 ms beside other work, where xlens's call (oneDNN's own kernel) took 0.9-1.2 ms,
        # so a floor kept from the best minute of the run judged the weather.
        # Measured where those floors may be the longest: library calls, transcendental
        # functions, or arithmetic outlasting the bytes by the figures before the workloads.
        with open(hlo_file) as f:
            transcendentals = roofline.hlo_costs(f.read())[1]
        calls = (limits.modules.get(hlo_file) or {}).get("calls")
        floors = [] if calls or transcendentals or limits.bound(
            hlo_file, read_bytes, moved - read_bytes)[1].startswith("FMA") else None
        # A memory-bound row's runs paired, in one process, each with the stream kernels its
        # rule reads over the same bytes right after it (roofline.pair_shares); by the figures
        # before the workloads, as Adam's square roots leave it memory-bound.
        # A library-bound row's runs paired the same way with its library calls run standalone
        # (roofline.library_pair_shares).
        bound_before = limits.bound(hlo_file, read_bytes, moved - read_bytes)
        library_pairs = bool(calls) and bound_before[1].startswith("oneDNN")
        states.append(dict(
            name=name, directory=directory, hlo_file=hlo_file, compiled=compiled,
            device_args=device_args, expected=expected, xla_compile_ms=xla_compile_ms,
            cache_dir=cache_dir, read_bytes=read_bytes, moved=moved, floors=floors,
            streams=[], library_pairs=library_pairs,
            pairs=[] if library_pairs or (not calls and bound_before[2] == "GB/s") else None,
            xla_times=[], our_times=[], our_best=[], our_compiles=[], own_kernels=False,
            steal_spans=[], failed=None))
    for round_index, index in interleaved_rounds(len(states), rounds):
        state = states[index]
        if state["failed"] is not None:
            continue
        if len(states) > 1 and rounds > 1:
            print(f"  {state['name']}, round {round_index + 1} of {rounds} ...", file=sys.stderr,
                  flush=True)
        hlo_file, moved = state["hlo_file"], state["moved"]
        inputs = os.path.join(state["directory"], "inputs")
        outputs = os.path.join(state["directory"], "outputs")
        # The host's steal over the round, floors and XLA included: the weather the row met.
        ticks_before = roofline.cpu_ticks()
        try:
            # The memory floor of this round, measured right before it: the bandwidth of a
            # shared machine's memory drifts by half from one minute to the next.
            if state["streams"] is not None:
                try:
                    state["streams"].append(roofline.measure_stream(limits_binary, moved))
                except (OSError, RuntimeError, ValueError):
                    state["streams"] = None  # the sweep's floor holds instead; the rounds go on
            if state["floors"] is not None:
                try:
                    state["floors"].append(roofline.measure_floors(limits_binary, hlo_file))
                except (OSError, RuntimeError, ValueError):
                    state["floors"] = None  # the run's better figures hold instead
            ours_compile_ms, ours_ms, ours_best_ms, state["own_kernels"] = run_xlens(
                xlens, hlo_file, inputs, outputs, args.iterations, state["cache_dir"])
            # The round's best is sampled as each floor is (up to 0.2 s of runs); its median,
            # the one set beside XLA's, stays that of the round's own runs.
            more = roofline.executions_to_match_floor(ours_ms, args.iterations)
            if more:
                ours_best_ms = min(ours_best_ms, run_xlens(
                    xlens, hlo_file, inputs, outputs, more, state["cache_dir"])[2])
            if state["pairs"] is not None:
                try:
                    state["pairs"].append(roofline.measure_pairs(
                        limits_binary, hlo_file, inputs, moved,
                        roofline.paired_kernels(state["read_bytes"], moved - state["read_bytes"]),
                        library=state["library_pairs"], cache_dir=state["cache_dir"]))
                except (OSError, RuntimeError, ValueError):
                    state["pairs"] = None  # the row goes without a `% pair`
            state["our_times"].append(ours_ms)
            state["our_best"].append(ours_best_ms)
            state["our_compiles"].append(ours_compile_ms)
            state["xla_times"].append(time_xla(jax, state["compiled"], state["device_args"],
                                               args.iterations))
        except RuntimeError as e:
            state["failed"] = str(e).splitlines()[0][:200] if str(e) else ""
        state["steal_spans"].append((ticks_before, roofline.cpu_ticks()))
        if state["failed"] is not None or round_index == rounds - 1:
            # The workload is done: its arguments and XLA's outputs go, not to hold every
            # workload's at once until the end.
            state["device_args"] = None
            if state["failed"] is None:
                state["agreement"] = outputs_agree(np, state["expected"], outputs)
            state["expected"] = None
    rows = []
    for state in states:
        name = state["name"]
        if state["failed"] is not None:
            xla_times = state["xla_times"]
            xla_note = f"{statistics.median(xla_times):>9.3f}" if xla_times else f"{'-':>9}"
            rows.append((name, f"{name:<22}{xla_note}  xlens failed: {state['failed']}"))
            failures += 1
            continue
        ok, detail = state["agreement"]
        failures += 0 if ok else 1
        rows.append((name, dict(
            xla_times=state["xla_times"], our_times=state["our_times"],
            our_best=min(state["our_best"]), our_best_rounds=state["our_best"],
            streams=state["streams"], pairs=state["pairs"], floors=state["floors"],
            own_kernels=state["own_kernels"], steal_spans=state["steal_spans"],
            xla_compile_ms=state["xla_compile_ms"],
            # The first round's: the one compile that was not served from the run's cache.
            ours_compile_ms=state["our_compiles"][0], ok=ok, detail=detail,
            hlo_file=state["hlo_file"], read_bytes=state["read_bytes"],
            write_bytes=state["moved"] - state["read_bytes"])))
    control = control_pairs(jax, jnp, np, roofline, limits_binary, work, rows, rounds)
    try:
        limits = roofline.Limits(roofline.better(before, roofline.measure(limits_binary, hlo_files)))
    except (OSError, RuntimeError) as e:
        print(f"xlens codegen_vs_xla: the second measurement of the limits failed ({e}); "
              f"the first alone holds the bounds", file=sys.stderr)
    for line in limits.summary_lines():
        print("  " + line)
    print(header)
    ratios, results, summaries = [], {}, {}
    for name, row in rows:
        if isinstance(row, str):
            print(row)
            continue
        xla_ms, ours_ms = statistics.median(row["xla_times"]), statistics.median(row["our_times"])
        round_ratios = [x / o for x, o in zip(row["xla_times"], row["our_times"])]
        spread = f"{min(round_ratios):.2f}-{max(round_ratios):.2f}"
        ratio = xla_ms / ours_ms
        ratios.append(ratio)
        results[name] = (xla_ms, ours_ms)
        # Each round is held to the stricter of the floors measured beside it and the run's best
        # (every floor the run measured, beside any round included), each share the median over the rounds, the bound printed that median round's
        # (roofline.row_shares). The floors are each the best of many runs (STREAM's loops, the
        # FMA chains, oneDNN's call standalone), so xlens is held to them by its best run too; a
        # median against a best charges xlens with the machine's noise, which `median` shows.
        summary = roofline.row_shares(limits, row,
                                      control and roofline.pair_shares(limits, *control))
        summaries[name] = summary
        achieved = f"{summary['work'] / (row['our_best'] * 1e-3) / 1e9:.1f} {summary['unit']}"
        label = summary["label"] + (" (median round)" if len(row["our_best_rounds"]) > 1 else "")
        if summary["unreliable"]:
            label += "; floor beaten: unreliable"
        if summary["own_loops_beat_library"]:
            label += "; its calls in xlens's own loops, faster than oneDNN's"
        if summary["pair_unreliable"]:
            label += "; pair floor beaten: unreliable"
        triad_cell = f"{summary['triad']:>7.0f}%" if summary["triad"] is not None else f"{'-':>8}"
        pair_cell = f"{summary['pair']:>6.0f}%" if summary["pair"] is not None else f"{'-':>7}"
        print(f"{name:<22}{xla_ms:>9.3f}{ours_ms:>10.3f}{ratio:>9.2f}x{spread:>12}"
              f"{achieved:>16}{summary['share']:>7.0f}%{summary['median_share']:>6.0f}%{triad_cell}{pair_cell}  "
              f"{label:<28}{row['xla_compile_ms']:>9.1f}"
              f"{row['ours_compile_ms']:>11.1f}{steal_cell(roofline.steal_share(row['steal_spans']))}  "
              f"{'yes' if row['ok'] else 'NO'} {row['detail']}")
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geometric mean XLA/xlens over {len(ratios)} workloads: {geomean:.2f}x; "
              f"{sum(r >= 1.2 for r in ratios)} of {len(ratios)} at 1.2x or more")
    measured = [row for _, row in rows if not isinstance(row, str)]
    overall = roofline.steal_share([span for row in measured for span in row["steal_spans"]])
    shares = [share * 100 for share in (roofline.steal_share(row["steal_spans"]) for row in measured)
              if share is not None]
    if overall is not None and shares:
        print(f"steal: the host ran other work on these CPUs for {overall * 100:.1f}% "
              f"of their time over the workloads' rounds ({min(shares):.0f}-{max(shares):.0f}% by row; "
              f"/proc/stat, 0 on a machine of its own): a row's median moves with it")
    for kind, what in (("memory", "of their bound"), ("library", "of oneDNN standalone"),
                       ("arithmetic", "of the FMA peak and the transcendentals' measured rates")):
        at_best, rows, median, unreliable, missing = roofline.kind_counts(
            summaries.values(), kind)
        if rows == 0:
            continue
        at_median, _, _, median_unreliable, median_missing = roofline.kind_counts(
            summaries.values(), kind, "median_share")
        label = {"memory": "bandwidth-bound"}.get(kind, kind + "-bound")
        if kind == "library":
            # What "oneDNN standalone" counts (roofline.Limits.bound, part_floor).
            print("library bound: the module as a oneDNN program: its products' and convolutions' "
                  "oneDNN time standalone (the bound's first figure), + each softmax, reduction and "
                  "weight update at the faster of oneDNN's primitive standalone and its own bytes and "
                  "arithmetic (oneDNN's time in brackets where slower), + the arithmetic of the rest")
        # Every count is out of all the rows of the kind; a row that beat its floor (over 100%,
        # judged share by share) counts neither way nor in the median, and the line says so.
        print(f"{label}: {at_best} of {rows} at 90% {what} or more by the best run"
              f"{left_out(median, unreliable, missing)}; {at_median} of {rows} by the median run"
              f"{left_out(None, median_unreliable, median_missing)}")
        if kind == "memory":
            # Never only the mix-matched count: the criterion's own, at triad's rate, beside it.
            at_triad, rows, median, unreliable, missing = roofline.kind_counts(
                summaries.values(), kind, "triad")
            print(f"bandwidth-bound at triad's rate whatever the mix (the work item's criterion): "
                  f"{at_triad} of {rows} at 90% of triad or more by the best run"
                  f"{left_out(median, unreliable, missing)}")
            # The same moment's answer beside the strict counts, never in their place.
            if print_pair_count(roofline.kind_counts(summaries.values(), kind, "pair"),
                                "bandwidth-bound against the stream kernels run"):
                if control:
                    # What a row at its floor reads, and so the median pair over which a row is
                    # flagged (roofline.pair_unreliable).
                    shares = roofline.pair_shares(limits, *control)
                    print(f"  control, {roofline.CONTROL}'s b + 3c against its own triad floor: "
                          f"pairs {shares['median']:.0f}% (quartiles {shares['q1']:.0f}-"
                          f"{shares['q3']:.0f}%); a row's median pair over "
                          f"{roofline.pair_beaten_over(shares):.0f}% is flagged")
                print_pairs(summaries, kind)
        if kind == "library" and print_pair_count(
                roofline.kind_counts(summaries.values(), kind, "pair"),
                "library-bound against its calls run standalone (its parts and the rest at "
                "their floors beside them)"):
            print_pairs(summaries, kind)
    if "chain8" in results and "triad" in results:
        # Both move 3 x 64 MiB (two reads, one write) per run.
        share = results["triad"][1] / results["chain8"][1]
        gbs = 3 * 16777216 * 4 / (results["chain8"][1] * 1e-3) / 1e9
        print(f"chain8: {gbs:.1f} GB/s, {share * 100:.0f}% of the triad's bandwidth (xlens)")
    return 1 if failures else 0


def print_pair_count(counts, against):
    """The count of a kind's rows at 90% by `% pair` (roofline.kind_counts by "pair"), where any
    was paired; whether it printed."""
    at_pair, rows, median, unreliable, missing = counts
    if rows == missing:
        return False
    print(f"{against} right after each of its runs (`% pair`, the median pair): {at_pair} of "
          f"{rows} at 90% or more{left_out(median, unreliable, missing)}")
    return True


def print_pairs(summaries, kind):
    """Each paired row of `kind`: its median pair, quartiles and best of each."""
    for name, paired in summaries.items():
        if paired["kind"] == kind and paired["pair"] is not None:
            q1, q3 = paired["pair_quartiles"]
            print(f"  {name}: pairs {paired['pair']:.0f}% (quartiles {q1:.0f}-{q3:.0f}%), "
                  f"best of each {paired['pair_best_of_each']:.0f}%")


if __name__ == "__main__":
    sys.exit(main())

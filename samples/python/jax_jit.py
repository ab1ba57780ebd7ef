"""jax_jit: a JAX training step run by jax.jit and by xlens.jit, one line apart.

A two-layer MLP learns y = sin(x0) + x1^2 / 4 by SGD. The same step function is compiled by
JAX's XLA and by xlens (lowered by JAX to HLO, compiled by xlens's pipeline); both train from the
same initial parameters, and the sample prints how closely their losses and parameters agree and
where xlens's dump went (the modules before and after optimization, manifest.json), which
`xlens inspect DIR` and the viewer read.

    python3 samples/python/jax_jit.py [--steps N] [--dump DIR] [--backend cpu|gpu|gpu-sim]
"""

import argparse
import os
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

import xlens


def init_params(rng, sizes=(2, 32, 1)):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        params.append({"w": (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32),
                       "b": np.zeros(fan_out, np.float32)})
    return params


def loss_fn(params, x, y):
    h = x
    for layer in params[:-1]:
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    out = h @ params[-1]["w"] + params[-1]["b"]
    return jnp.mean((out - y) ** 2)


def train_step(params, x, y, learning_rate=0.1):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params = jax.tree_util.tree_map(lambda p, g: p - learning_rate * g, params, grads)
    return params, loss


def train(step, params, x, y, steps):
    losses = []
    for _ in range(steps):
        params, loss = step(params, x, y)
        losses.append(float(loss))
    return params, losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--dump", default=None, help="xlens's dump directory (default: a fresh temporary one)")
    parser.add_argument("--backend", default="cpu", help="cpu, gpu (a CUDA GPU) or gpu-sim")
    args = parser.parse_args()
    dump = args.dump or tempfile.mkdtemp(prefix="jax_jit_dump_")

    rng = np.random.default_rng(0)
    params = init_params(rng)
    x = rng.uniform(-2, 2, (64, 2)).astype(np.float32)
    y = (np.sin(x[:, :1]) + x[:, 1:] ** 2 / 4).astype(np.float32)

    jax_step = jax.jit(train_step)
    xlens_step = xlens.jit(train_step, backend=args.backend, dump_to=dump)

    jax_params, jax_losses = train(jax_step, params, x, y, args.steps)
    xlens_params, xlens_losses = train(xlens_step, params, x, y, args.steps)

    loss_diff = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(jax_losses, xlens_losses))
    param_diff = max(float(np.max(np.abs(np.asarray(a) - b)))
                     for a, b in zip(jax.tree_util.tree_leaves(jax_params), jax.tree_util.tree_leaves(xlens_params)))
    print(f"loss after {args.steps} steps: jax.jit {jax_losses[-1]:.6f}, xlens.jit {xlens_losses[-1]:.6f} "
          f"(first {jax_losses[0]:.6f})")
    print(f"largest relative loss difference {loss_diff:.2e}, largest parameter difference {param_diff:.2e}: "
          f"{'agree' if loss_diff < 1e-4 and param_diff < 1e-4 else 'DIFFER'}")
    info = xlens_step.cache_info()
    print(f"xlens compiled {info['misses']} time(s) for {info['calls']} calls "
          f"(lowering {info['lower_seconds'] * 1e3:.0f} ms, compiling {info['compile_seconds'] * 1e3:.0f} ms)")
    compiled = xlens_step.compile(params, x, y)
    print(f"dump of {compiled.module_name}: {os.path.abspath(dump)} ({compiled.dump_summary or 'nothing written'}); "
          f"`xlens inspect {dump}` reads it")
    return 0 if loss_diff < 1e-4 and param_diff < 1e-4 else 1


if __name__ == "__main__":
    raise SystemExit(main())

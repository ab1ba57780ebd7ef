#!/usr/bin/env python3
"""jax's linear algebra on the CPU backend: the LAPACK custom calls jaxlib writes, run by xlens.

Makes, at test time, jax programs of jnp.linalg, jax.scipy.linalg and lax.linalg (cholesky,
solve, inv, det, slogdet, qr, eigh, eig, svd by divide and conquer and by QR with and without u
and v, tridiagonal solves, triangular solves of every side, triangle, transpose and diagonal;
batched and not; f32, f64, c64 and c128; a cholesky of a matrix that is not positive definite
and matrices with NaN), dumps their before_optimizations modules (XLA_FLAGS=--xla_dump_to),
runs each with `xlens run --inputs --outputs` on the inputs jax ran, and compares with what jax
computed: to a tolerance fitted to the type, with NaN where jax has NaN, and eigenvectors and
singular vectors up to the sign or phase of each vector (LAPACK chooses it; jaxlib's LAPACK is
not the system's).

Exits 1 on any failure, 77 (skipped) when jax is not installed.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

SKIP = 77

# Run in a child process: XLA_FLAGS must be set before jax starts.
PROGRAMS = r'''
import json, os, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from jax import lax
import jax.scipy.linalg as jsl

out = sys.argv[1]
rng = np.random.RandomState(0)

def general(*shape, dtype=np.float64):
    a = rng.uniform(-1, 1, size=shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.uniform(-1, 1, size=shape)
    return a.astype(dtype)

def spd(*shape, dtype=np.float64):
    a = general(*shape, dtype=dtype)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)

def triangular(n, lower, dtype=np.float64):
    a = general(n, n, dtype=dtype) + 3 * np.eye(n)
    return (np.tril(a) if lower else np.triu(a)).astype(dtype)

# name: (function, inputs, how each output compares: "=" values, "v" vectors along the
# last-but-one axis (columns) up to sign or phase, "h" along the last axis (rows))
programs = {
    "chol_f64": (jnp.linalg.cholesky, [spd(6, 6)], "="),
    "chol_f32_batched": (jnp.linalg.cholesky, [spd(3, 5, 5, dtype=np.float32)], "="),
    "chol_c64": (jnp.linalg.cholesky, [spd(4, 4, dtype=np.complex64)], "="),
    "chol_upper_c128": (lambda a: jsl.cholesky(a, lower=False),
                        [spd(5, 5, dtype=np.complex128)], "="),
    "chol_not_pd": (jnp.linalg.cholesky, [np.array([[[4.0, 2.0], [2.0, 1.0]],
                                                    [[1.0, 2.0], [2.0, 1.0]],
                                                    [[2.0, 0.0], [0.0, 3.0]]])], "="),
    "solve_f64": (jnp.linalg.solve, [general(7, 7) + 4 * np.eye(7), general(7, 3)], "="),
    "solve_f32_batched": (lambda a, b: jnp.linalg.solve(a, b[..., None])[..., 0],
                          [general(2, 6, 6, dtype=np.float32) + 4 * np.eye(6, dtype=np.float32),
                           general(2, 6, dtype=np.float32)], "="),
    "inv_f64": (jnp.linalg.inv, [general(6, 6) + 4 * np.eye(6)], "="),
    "inv_c128": (jnp.linalg.inv, [general(4, 4, dtype=np.complex128) + 3 * np.eye(4)], "="),
    "det_f64_batched": (jnp.linalg.det, [general(3, 5, 5)], "="),
    "det_singular": (jnp.linalg.det, [np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0],
                                                [1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 3.0]])], "="),
    "slogdet_f32": (jnp.linalg.slogdet, [general(6, 6, dtype=np.float32)], "=="),
    "qr_f64_tall": (jnp.linalg.qr, [general(7, 4)], "=="),
    "qr_f32_batched_full": (lambda a: jnp.linalg.qr(a, mode="complete"),
                            [general(2, 5, 3, dtype=np.float32)], "=="),
    "qr_c128_wide": (jnp.linalg.qr, [general(3, 5, dtype=np.complex128)], "=="),
    "eigh_f64": (jnp.linalg.eigh, [spd(6, 6)], "=v"),
    "eigh_f32_batched": (jnp.linalg.eigh, [spd(3, 4, 4, dtype=np.float32)], "=v"),
    "eigh_c64": (jnp.linalg.eigh, [spd(5, 5, dtype=np.complex64)], "=v"),
    "eigh_upper_values": (lambda a: jnp.linalg.eigh(a, UPLO="U")[0], [spd(5, 5)], "="),
    "eigvalsh_c128": (jnp.linalg.eigvalsh, [spd(4, 4, dtype=np.complex128)], "="),
    "svd_f64": (jnp.linalg.svd, [general(6, 4)], "v=h"),
    "svd_f32_batched_thin": (lambda a: jnp.linalg.svd(a, full_matrices=False),
                             [general(2, 4, 6, dtype=np.float32)], "v=h"),
    "svd_values_f64": (lambda a: jnp.linalg.svd(a, compute_uv=False), [general(3, 5, 4)], "="),
    "svd_nan": (lambda a: jnp.linalg.svd(a, compute_uv=False),
                [np.array([[1.0, np.nan], [0.0, 1.0], [2.0, 1.0]])], "="),
    "eigh_nan": (lambda a: jnp.linalg.eigh(a)[0], [np.array([[1.0, np.nan], [np.nan, 1.0]])], "="),
    "svd_qr_f64_thin": (lambda a: lax.linalg.svd(a, full_matrices=False,
                                                 algorithm=lax.linalg.SvdAlgorithm.QR),
                        [general(2, 5, 4)], "v=h"),
    "svd_qr_c64_values": (lambda a: lax.linalg.svd(a, compute_uv=False,
                                                   algorithm=lax.linalg.SvdAlgorithm.QR),
                          [general(3, 4, dtype=np.complex64)], "="),
    "eig_f64": (jnp.linalg.eig, [general(5, 5)], "=v"),
    "eig_left_f32": (lambda a: lax.linalg.eig(a, compute_left_eigenvectors=True,
                                              compute_right_eigenvectors=False),
                     [np.array([[0.0, -2.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 1.0]], np.float32)],
                     "=v"),
    "eig_nan": (jnp.linalg.eigvals, [np.array([[1.0, np.nan], [0.0, 1.0]])], "="),
    "eigvals_c64_batched": (jnp.linalg.eigvals, [general(2, 4, 4, dtype=np.complex64)], "="),
    "svd_c128": (jnp.linalg.svd, [general(4, 3, dtype=np.complex128)], "v=h"),
    "tridiagonal_f64_batched": (lambda dl, d, du, b: lax.linalg.tridiagonal_solve(dl, d, du, b),
                                [np.concatenate([np.zeros((2, 1)), general(2, 4)], axis=1),
                                 general(2, 5) + 4, np.concatenate([general(2, 4),
                                                                    np.zeros((2, 1))], axis=1),
                                 general(2, 5, 3)], "="),
    "tridiagonal_c64": (lambda dl, d, du, b: lax.linalg.tridiagonal_solve(dl, d, du, b),
                        [general(4, dtype=np.complex64), general(4, dtype=np.complex64) + 3,
                         general(4, dtype=np.complex64), general(4, 2, dtype=np.complex64)], "="),
    "trsolve_lower": (lambda a, b: jsl.solve_triangular(a, b, lower=True),
                      [triangular(5, True), general(5, 3)], "="),
    "trsolve_upper_trans": (lambda a, b: jsl.solve_triangular(a, b, lower=False, trans=1),
                            [triangular(5, False, np.float32),
                             general(5, 2, dtype=np.float32)], "="),
    "trsolve_conj_unit": (lambda a, b: jsl.solve_triangular(a, b, lower=True, trans=2,
                                                            unit_diagonal=True),
                          [triangular(4, True, np.complex128), general(4, 2, dtype=np.complex128)],
                          "="),
    "trsolve_right_batched": (lambda a, b: lax.linalg.triangular_solve(a, b, left_side=False,
                                                                       lower=False),
                              [np.stack([triangular(4, False), triangular(4, False)]),
                               general(2, 3, 4)], "="),
}
manifest = {}
for name, (fn, args, kinds) in programs.items():
    def program(*a, fn=fn):
        return fn(*a)
    program.__name__ = name
    results = jax.tree_util.tree_leaves(jax.jit(program)(*args))
    d = os.path.join(out, "io", name)
    os.makedirs(d, exist_ok=True)
    for i, a in enumerate(args):
        np.save(os.path.join(d, f"arg{i}.npy"), a)
    for i, r in enumerate(results):
        np.save(os.path.join(d, f"out{i}.npy"), np.asarray(r))
    assert len(kinds) == len(results), name
    manifest[name] = {"io": d, "kinds": kinds}
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f)
'''


def tolerance(dtype):
    import numpy as np
    single = dtype in (np.float32, np.complex64)
    return (2e-4, 2e-5) if single else (1e-9, 1e-11)


def compare(want, got, kind):
    """None when got is what jax computed, else what differs."""
    import numpy as np
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)}, jax computed {want.dtype}{list(want.shape)}"
    if want.dtype.kind in "iub":
        return None if np.array_equal(got, want) else "differs"
    rtol, atol = tolerance(want.dtype.type)
    if kind in "vh":
        # Each vector up to a factor of modulus 1: |<got, want>| = 1 for unit vectors.
        axis = -2 if kind == "v" else -1
        overlap = np.abs(np.sum(np.conj(got) * want, axis=axis))
        worst = float(np.max(np.abs(overlap - 1))) if overlap.size else 0.0
        return None if worst <= 100 * rtol else f"vectors differ beyond a sign or phase ({worst:g})"
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return f"NaN at {int(np.sum(np.isnan(got)))} places, jax has {int(np.sum(np.isnan(want)))}"
    finite = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(finite.max()) if finite.size else 1.0)
    if not np.allclose(got, want, rtol=rtol, atol=atol * scale, equal_nan=True):
        worst = float(np.nanmax(np.abs(got - want), initial=0.0))
        return f"differs from jax's by up to {worst:g}"
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--keep", help="make the dumps in this directory and keep them")
    args = parser.parse_args()
    try:
        import jax  # noqa: F401
        import numpy as np
    except ImportError as e:
        print(f"SKIPPED: jax is not installed ({e}); scripts/setup.sh installs it")
        return SKIP
    start = time.time()
    failures = []
    with tempfile.TemporaryDirectory(prefix="xlens-lapack-") as scratch:
        work = args.keep or scratch
        os.makedirs(work, exist_ok=True)
        dump = os.path.join(work, "dump")
        env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={dump}", JAX_PLATFORMS="cpu",
                   CUDA_VISIBLE_DEVICES="")
        made = subprocess.run([sys.executable, "-c", PROGRAMS, work], env=env,
                              capture_output=True, text=True, timeout=300)
        if made.returncode != 0:
            print(f"FAIL the jax programs failed:\n{made.stderr[-3000:]}")
            return 1
        with open(os.path.join(work, "manifest.json")) as f:
            manifest = json.load(f)
        targets = set()
        for name, entry in sorted(manifest.items()):
            found = glob.glob(os.path.join(dump, f"module_*.jit_{name}.before_optimizations.txt"))
            if len(found) != 1:
                failures.append(f"{name}: {len(found)} before_optimizations modules in the dump")
                continue
            with open(found[0], encoding="utf-8") as f:
                text = f.read()
            called = {t for t in text.split('custom_call_target="')[1:]}
            called = {t.split('"', 1)[0] for t in called}
            targets |= called
            if not any(t.startswith("lapack_") for t in called):
                failures.append(f"{name}: jax wrote no LAPACK call ({sorted(called)})")
            out_dir = os.path.join(work, "out", name)
            run = subprocess.run([args.xlens, "run", found[0], "--inputs", entry["io"],
                                  "--outputs", out_dir, "--timeout", "60"],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                failures.append(f"{name}: xlens run failed: {run.stderr.strip()[:400]}")
                continue
            for i, kind in enumerate(entry["kinds"]):
                want = np.load(os.path.join(entry["io"], f"out{i}.npy"))
                path = os.path.join(out_dir, f"out{i}.npy")
                if not os.path.exists(path):
                    failures.append(f"{name}: xlens wrote no out{i}.npy")
                    continue
                problem = compare(want, np.load(path), kind)
                if problem:
                    failures.append(f"{name}: out{i}: {problem}")
    for failure in failures:
        print("FAIL " + failure)
    lapack = sorted(t for t in targets if t.startswith("lapack_"))
    failed = len({f.split(":")[0] for f in failures})
    print(f"{len(manifest)} jax programs, {len(manifest) - failed}"
          f" run by xlens to jax's outputs; LAPACK targets called: {', '.join(lapack)}")
    print(f"took {time.time() - start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

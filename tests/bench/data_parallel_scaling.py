#!/usr/bin/env python3
"""The data-parallel training step's time on 1, 2 and 4 simulated devices (`xlens run
--num_partitions=N`).

jax (XLA_FLAGS=--xla_force_host_platform_device_count=N, one child process per N) compiles one
MLP training step whose batch is sharded over the N devices and whose parameters are replicated
(the gradients all-reduced), the same global batch for every N (strong scaling), and keeps the
module after XLA's spmd-partitioning pass (on 1 device XLA does not run the pass: the module jax
handed XLA is the program) with jax's global inputs and outputs. `xlens run MODULE
--num_partitions=N --inputs INPUTS --iterations I` is then timed for each N in rounds that
alternate the device counts; the table gives the median over the rounds of xlens's median step
time, the lowest and highest of a single round, and the speedup over one device. The global
outputs xlens assembles must match jax's.

The devices are threads of one process sharing this machine's cores: with fewer cores than
devices they take turns, and the figure says what the collectives and the scheduling cost.

With --baseline OTHER_XLENS (an earlier build, say), OTHER_XLENS is timed in the same rounds,
each run beside the same run of --xlens, so that both meet the same load on a shared machine;
its figures follow in columns of their own. With --work DIR the programs are kept there and
reused by later runs (jax compiles them once).

Usage: data_parallel_scaling.py --xlens build/compiler/cli/xlens [--baseline OTHER_XLENS]
[--devices 1,2,4] [--rounds 3] [--iterations 20] [--work DIR]. Exits 77 when jax is not installed.
"""
import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

# One global batch for every device count.
BATCH, IN, HIDDEN, OUT = 2048, 256, 512, 64


def child(where):
  """Runs under N host devices: compiles, runs and keeps the step (see the module's docstring)."""
  import numpy as np
  import jax
  import jax.numpy as jnp
  from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
  n = len(jax.devices())
  mesh = Mesh(np.array(jax.devices()), ("x",))
  rng = np.random.default_rng(0)

  def normal(*shape):
    return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

  def data_parallel_step(w1, b1, w2, b2, x, y):
    def loss_fn(params):
      w1, b1, w2, b2 = params
      h = jnp.tanh(x @ w1 + b1)
      return jnp.mean((h @ w2 + b2 - y) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)((w1, b1, w2, b2))
    return (*[p - 0.1 * g for p, g in zip((w1, b1, w2, b2), grads)], loss)

  inputs = [normal(IN, HIDDEN), normal(HIDDEN), normal(HIDDEN, OUT), normal(OUT),
            normal(BATCH, IN), normal(BATCH, OUT)]
  replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("x", None))
  shardings = [replicated] * 4 + [batch] * 2
  jitted = jax.jit(data_parallel_step, in_shardings=shardings, out_shardings=replicated)
  args = [jax.device_put(x, s) for x, s in zip(inputs, shardings)]
  results = jax.tree_util.tree_leaves(jitted(*args))
  dump = os.environ["DATA_PARALLEL_DUMP"]
  after = glob.glob(os.path.join(dump, "module_*.jit_data_parallel_step.*.after_spmd-partitioning.*.txt"))
  before = glob.glob(os.path.join(dump, "module_*.jit_data_parallel_step.before_optimizations.txt"))
  module = after[0] if after else before[0]
  shutil.copy(module, os.path.join(where, "module.txt"))
  for kind, prefix, arrays in (("inputs", "arg", inputs), ("outputs", "out", results)):
    os.makedirs(os.path.join(where, kind), exist_ok=True)
    for i, a in enumerate(arrays):
      np.save(os.path.join(where, kind, f"{prefix}{i}.npy"), np.asarray(a))
  with open(os.path.join(where, "partitioned_by"), "w") as f:
    f.write("XLA's spmd-partitioning" if after else "none (one device: jax's module)")
  print(f"made the step for {n} devices")


def make(work, n):
  where = os.path.join(work, f"n{n}")
  if os.path.exists(os.path.join(where, "partitioned_by")):
    return where  # made by an earlier run with the same --work
  os.makedirs(where, exist_ok=True)
  with tempfile.TemporaryDirectory(prefix="dp_dump_") as dump:
    env = dict(os.environ, JAX_PLATFORMS="cpu", DATA_PARALLEL_DUMP=dump,
               XLA_FLAGS=f"--xla_force_host_platform_device_count={n} --xla_dump_to={dump} "
                         "--xla_dump_hlo_pass_re=spmd-partitioning")
    subprocess.run([sys.executable, __file__, "--child", where], env=env, check=True, timeout=300)
  return where


def time_step(xlens, where, n, iterations, outputs):
  shutil.rmtree(outputs, ignore_errors=True)
  result = subprocess.run([xlens, "run", os.path.join(where, "module.txt"), f"--num_partitions={n}",
                           "--inputs", os.path.join(where, "inputs"), "--outputs", outputs,
                           f"--iterations={iterations}"], capture_output=True, text=True, timeout=600)
  if result.returncode != 0:
    sys.exit(f"data_parallel_scaling: xlens run on {n} devices failed: {result.stderr.strip()}")
  median = re.search(r"run median ([0-9.]+) ms", result.stdout)
  if median is None:
    sys.exit(f"data_parallel_scaling: no run median in xlens's output on {n} devices:\n{result.stdout}")
  return float(median.group(1))


def check_outputs(where, outputs, n):
  import numpy as np
  for want_path in sorted(glob.glob(os.path.join(where, "outputs", "out*.npy"))):
    got_path = os.path.join(outputs, os.path.basename(want_path))
    if not os.path.exists(got_path):
      sys.exit(f"data_parallel_scaling: {n} devices: xlens assembled no {os.path.basename(got_path)}")
    got, want = np.load(got_path), np.load(want_path)
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-3, atol=1e-4):
      sys.exit(f"data_parallel_scaling: {n} devices: {os.path.basename(got_path)} differs from jax's")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlens")
  parser.add_argument("--baseline", help="another xlens timed in the same rounds, for comparison")
  parser.add_argument("--devices", default="1,2,4")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--iterations", type=int, default=20)
  parser.add_argument("--work", help="keep the programs here (default: a temporary directory)")
  parser.add_argument("--child", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    child(args.child)
    return 0
  if not args.xlens:
    parser.error("--xlens is required")
  try:
    import jax  # noqa: F401  (only checked here: the children import it under their flags)
  except ImportError:
    print("data_parallel_scaling: jax is not installed; skipping")
    return 77
  counts = [int(d) for d in args.devices.split(",")]
  with tempfile.TemporaryDirectory(prefix="data_parallel_") as tmp:
    work = args.work or tmp
    programs = {n: make(work, n) for n in counts}
    outputs = os.path.join(tmp, "outputs")
    binaries = [args.xlens] + ([args.baseline] if args.baseline else [])
    times = {(b, n): [] for b in binaries for n in counts}
    for _ in range(args.rounds):
      for n in counts:  # alternating: every round runs every device count once
        for b in binaries:
          times[(b, n)].append(time_step(b, programs[n], n, args.iterations, outputs))
          check_outputs(programs[n], outputs, n)
    partitioned = {n: open(os.path.join(programs[n], "partitioned_by")).read() for n in counts}
  import jax
  print(f"jax {jax.__version__}, {os.cpu_count()} CPUs; MLP training step f32 [{BATCH},{IN}] -> "
        f"{HIDDEN} -> {OUT}, the batch sharded over the devices, the parameters replicated; times "
        f"are xlens's median of {args.iterations} steps, then the median over {args.rounds} "
        "alternating rounds (ms)")
  if args.baseline:
    print(f"baseline: {args.baseline}, timed in the same rounds")
  header = "| devices | step (ms) | range over rounds | speedup over 1 device |"
  rule = "| --- | --- | --- | --- |"
  if args.baseline:
    header += " baseline step (ms) | baseline range | baseline speedup |"
    rule += " --- | --- | --- |"
  print(header + " module |")
  print(rule + " --- |")
  for n in counts:
    row = f"| {n} |"
    for b in binaries:
      runs = times[(b, n)]
      median = statistics.median(runs)
      base = statistics.median(times[(b, counts[0])])
      row += f" {median:.2f} | {min(runs):.2f}-{max(runs):.2f} | {base / median:.2f}x |"
    print(f"{row} {partitioned[n]} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())

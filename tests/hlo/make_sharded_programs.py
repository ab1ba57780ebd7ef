#!/usr/bin/env python3
"""Makes sharded programs with JAX on 4 and 8 host devices: the outside ground truth for xlens's
shardings, collectives and partitioner.

For each device count N one child process runs with
`XLA_FLAGS=--xla_force_host_platform_device_count=N` (XLA reads it once, at the first import of
jax), compiles each program with XLA's dumps on, runs it, and keeps under OUT/nN/PROGRAM/:

  before_optimizations.txt      the module JAX handed XLA (shardings, Shardy's annotations)
  before_spmd_partitioning.txt  the module the partitioner reads (Shardy's shardings made HLO's)
  after_spmd_partitioning.txt   the per-device module after XLA's spmd-partitioning pass
  inputs/argI.npy               the global inputs
  outputs/outI.npy              the global outputs (the program's result leaves, flattened)
  devices/D/inputs/argI.npy     device D's shard of each input (jax.Array.addressable_shards)
  devices/D/outputs/outI.npy    device D's shard of each output
  meta.json                     num_devices, num_replicas, num_partitions, device_assignment (the
                                device of each partition), and the entry parameters' and root's
                                shardings as XLA printed them
  FINISHED                      written last, when every program is there

Usage: make_sharded_programs.py --out DIR [--devices 4,8] [--programs a,b]. Exits 77 when jax is
not installed.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

PROGRAMS = ["dp_mlp_train_step", "tp_mlp", "tp_attention", "pipeline_permute", "all_to_all",
            "all_gather", "reduce_scatter", "uneven_tiles", "loop_train_step", "embedding_step",
            "halo_slices", "partial_manual"]
# Made on 4 devices only (what they add is the op, not the device count): fewer programs for every
# test that takes them.
FOUR_ONLY = {"loop_train_step", "embedding_step", "halo_slices", "partial_manual"}


def build_programs(jax, n):
  """(name, function, global inputs, input shardings, output sharding or None) for N devices."""
  import numpy as np
  import jax.numpy as jnp
  from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
  try:
    from jax import shard_map
  except ImportError:
    from jax.experimental.shard_map import shard_map

  devices = np.array(jax.devices()[:n])
  line = Mesh(devices, ("x",))
  # data x model: the parameters' shardings are partially replicated and their device order is a
  # transposed iota.
  grid = Mesh(devices.reshape(2, n // 2), ("data", "model"))
  rng = np.random.default_rng(n)

  def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)

  def s(mesh, *spec):
    return NamedSharding(mesh, P(*spec))

  programs = []

  # Data parallel: the batch is sharded, the parameters replicated; the gradients are all-reduced.
  def dp_mlp_train_step(w1, b1, w2, b2, x, y):
    def loss_fn(params):
      w1, b1, w2, b2 = params
      h = jnp.tanh(x @ w1 + b1)
      return jnp.mean((h @ w2 + b2 - y) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)((w1, b1, w2, b2))
    new = [p - 0.1 * g for p, g in zip((w1, b1, w2, b2), grads)]
    return (*new, loss)
  batch = 4 * n
  programs.append(("dp_mlp_train_step", dp_mlp_train_step,
                   [normal(16, 32), normal(32), normal(32, 8), normal(8), normal(batch, 16),
                    normal(batch, 8)],
                   [s(line)] * 4 + [s(line, "x", None)] * 2, s(line)))

  # Tensor parallel MLP (Megatron): the first layer's columns, the second's rows are sharded over
  # 'model', the batch over 'data'; the row-parallel product ends in an all-reduce.
  def tp_mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2
  programs.append(("tp_mlp", tp_mlp, [normal(8, 16), normal(16, 8 * n), normal(8 * n, 16)],
                   [s(grid, "data", None), s(grid, None, "model"), s(grid, "model", None)],
                   s(grid, "data", None)))

  # Tensor parallel attention: one head per device.
  heads, head_dim, model_dim = n, 4, 16
  def tp_attention(x, wq, wk, wv, wo):
    q = jnp.einsum("bsd,dhk->bhsk", x, wq)
    k = jnp.einsum("bsd,dhk->bhsk", x, wk)
    v = jnp.einsum("bsd,dhk->bhsk", x, wv)
    a = jax.nn.softmax(jnp.einsum("bhsk,bhtk->bhst", q, k) / np.sqrt(head_dim), axis=-1)
    return jnp.einsum("bhsk,hkd->bsd", jnp.einsum("bhst,bhtk->bhsk", a, v), wo)
  w_spec = s(line, None, "x", None)
  programs.append(("tp_attention", tp_attention,
                   [normal(2, 8, model_dim)] + [normal(model_dim, heads, head_dim)] * 3 +
                   [normal(heads, head_dim, model_dim)],
                   [s(line)] + [w_spec] * 3 + [s(line, "x", None, None)], s(line)))

  # Pipeline style: each stage hands its activations to the next (collective-permute).
  def pipeline_permute(x):
    def stage(block):
      moved = jax.lax.ppermute(jnp.tanh(block), "x", [(i, (i + 1) % n) for i in range(n)])
      return moved * 2.0
    return shard_map(stage, mesh=line, in_specs=P("x"), out_specs=P("x"))(x)
  programs.append(("pipeline_permute", pipeline_permute, [normal(2 * n, 4)],
                   [s(line, "x", None)], s(line, "x", None)))

  def all_to_all(x):
    def body(block):
      return jax.lax.all_to_all(block, "x", split_axis=0, concat_axis=1, tiled=True)
    return shard_map(body, mesh=line, in_specs=P("x"), out_specs=P("x"))(x)
  programs.append(("all_to_all", all_to_all, [normal(n * n, 3)], [s(line, "x", None)],
                   s(line, "x", None)))

  def all_gather(x):
    def body(block):
      return jax.lax.all_gather(block * 3.0, "x", tiled=True)
    # all_gather's result is the same on every device, which shard_map cannot prove.
    return shard_map(body, mesh=line, in_specs=P("x"), out_specs=P(), check_vma=False)(x)
  programs.append(("all_gather", all_gather, [normal(2 * n, 5)], [s(line, "x", None)], s(line)))

  def reduce_scatter(x):
    def body(block):
      return jax.lax.psum_scatter(block, "x", scatter_dimension=0, tiled=True)
    return shard_map(body, mesh=line, in_specs=P("x"), out_specs=P("x"))(x)
  programs.append(("reduce_scatter", reduce_scatter, [normal(2 * n * n, 4)],
                   [s(line, "x", None)], s(line, "x", None)))

  # Tiles that do not divide the dimension: JAX refuses them at the program's boundary, so the
  # uneven value (2N-1 rows over N devices, the last tile short) is an intermediate the
  # partitioner pads.
  def uneven_tiles(x):
    rows = jax.lax.with_sharding_constraint(jnp.sin(x[:-1]), s(line, "x", None))
    return jnp.sum(rows * 2.0, axis=0)
  programs.append(("uneven_tiles", uneven_tiles, [normal(2 * n, 6)], [s(line, "x", None)],
                   s(line)))

  # A scan of data-parallel SGD steps over microbatches: the loop carries the replicated
  # parameters and the stacked batch-sharded data, so its body is what gets partitioned (each
  # step's microbatch sliced and squeezed, the gradients all-reduced, a loss stacked per step).
  def loop_train_step(w, xs, ys):
    def step(w, xy):
      x, y = xy
      loss, grad = jax.value_and_grad(lambda w: jnp.mean((jnp.tanh(x @ w) - y) ** 2))(w)
      return w - 0.5 * grad, loss
    return jax.lax.scan(step, w, (xs, ys))
  programs.append(("loop_train_step", loop_train_step,
                   [normal(8, 4), normal(3, 4 * n, 8), normal(3, 4 * n, 4)],
                   [s(line), s(line, None, "x", None), s(line, None, "x", None)], (s(line), s(line))))

  # An embedding table cut along its vocabulary: the lookup (a gather) and its gradient (a
  # scatter-add) run on each device's rows, as XLA masks the ids another device holds.
  def embedding_step(table, ids, y):
    def loss(table):
      return jnp.mean((jnp.take(table, ids, axis=0, mode="clip") - y) ** 2)
    return table - 0.5 * jax.grad(loss)(table)
  vocab = 4 * n
  programs.append(("embedding_step", embedding_step,
                   [normal(vocab, 6), rng.integers(0, vocab, size=10).astype(np.int32),
                    normal(10, 6)],
                   [s(line, "x", None), s(line), s(line)], s(line, "x", None)))

  # Slices, pads and concatenations along the sharded rows: each device needs rows its
  # neighbours hold (XLA's halo exchange, a collective-permute).
  def halo_slices(x):
    d = x[2:] - x[:-2]
    smooth = jnp.pad(d, ((1, 1), (0, 0))) + x
    return smooth, jnp.concatenate([x, x[:4] * 2.0], axis=0)
  programs.append(("halo_slices", halo_slices, [normal(4 * n, 3)], [s(line, "x", None)],
                   (s(line, "x", None), s(line, "x", None))))

  # shard_map manual over 'data' only: 'model' stays automatic inside the body (its shardings
  # say last_tile_dims={manual}).
  def partial_manual(x):
    def body(block):
      return jnp.sin(block) * jax.lax.psum(jnp.sum(block), "data")
    return shard_map(body, mesh=grid, in_specs=P("data"), out_specs=P("data"),
                     axis_names={"data"})(x)
  programs.append(("partial_manual", partial_manual, [normal(4, 2 * n)],
                   [s(grid, "data", "model")], s(grid, "data", "model")))
  return programs


def entry_shardings(text):
  """The entry computation's parameter shardings and root sharding, as XLA printed them."""
  entry = text[text.find("\nENTRY"):]
  body = entry[:entry.find("\n}")]
  params, root = {}, None
  for line in body.splitlines():
    m = re.search(r"\bparameter\((\d+)\)", line)
    sharding = re.search(r"sharding=(\{(?:[^{}]|\{[^{}]*\})*\})", line)
    if m:
      params[int(m.group(1))] = sharding.group(1) if sharding else None
    if line.lstrip().startswith("ROOT"):
      root = sharding.group(1) if sharding else None
  return [params[i] for i in sorted(params)], root


def child(out, n, names):
  """Runs in a process whose XLA_FLAGS name N host devices and a dump directory."""
  dump = os.environ["SHARDED_PROGRAMS_DUMP"]
  import numpy as np
  import jax
  if len(jax.devices()) < n:
    sys.exit(f"make_sharded_programs: expected {n} host devices, jax has {len(jax.devices())}")
  for name, fn, inputs, in_shardings, out_sharding in build_programs(jax, n):
    if name not in names or (name in FOUR_ONLY and n != 4):
      continue
    fn.__name__ = name
    jitted = jax.jit(fn, in_shardings=in_shardings, out_shardings=out_sharding)
    args = [jax.device_put(x, sh) for x, sh in zip(inputs, in_shardings)]
    results = jax.tree_util.tree_leaves(jitted(*args))
    where = os.path.join(out, f"n{n}", name)
    os.makedirs(where, exist_ok=True)
    before = glob.glob(os.path.join(dump, f"module_*.jit_{name}.before_optimizations.txt"))
    ahead = glob.glob(os.path.join(dump, f"module_*.jit_{name}.*.before_spmd-partitioning.txt"))
    after = glob.glob(os.path.join(dump, f"module_*.jit_{name}.*.after_spmd-partitioning.*.txt"))
    if len(before) != 1 or len(ahead) != 1 or len(after) != 1:
      sys.exit(f"make_sharded_programs: {name}: expected one before_optimizations, one before "
               f"and one after spmd-partitioning dump, found {before}, {ahead} and {after}")
    shutil.copy(before[0], os.path.join(where, "before_optimizations.txt"))
    shutil.copy(ahead[0], os.path.join(where, "before_spmd_partitioning.txt"))
    shutil.copy(after[0], os.path.join(where, "after_spmd_partitioning.txt"))

    def save(kind, prefix, arrays):
      for i, a in enumerate(arrays):
        os.makedirs(os.path.join(where, kind), exist_ok=True)
        np.save(os.path.join(where, kind, f"{prefix}{i}.npy"), np.asarray(a))
        for shard in a.addressable_shards:
          d = os.path.join(where, "devices", str(shard.device.id), kind)
          os.makedirs(d, exist_ok=True)
          np.save(os.path.join(d, f"{prefix}{i}.npy"), np.asarray(shard.data))
    save("inputs", "arg", args)
    save("outputs", "out", results)
    with open(before[0]) as f:
      params, root = entry_shardings(f.read())
    with open(after[0]) as f:
      header = f.readline()
    partitions = re.search(r"num_partitions=(\d+)", header)
    replicas = re.search(r"replica_count=(\d+)", header)
    assignment = [d.id for d in in_shardings[0].mesh.devices.flat]
    meta = {"num_devices": n, "num_replicas": int(replicas.group(1)) if replicas else 1,
            "num_partitions": int(partitions.group(1)) if partitions else 1,
            "device_assignment": assignment, "parameter_shardings": params,
            "root_sharding": root, "jax_version": jax.__version__}
    with open(os.path.join(where, "meta.json"), "w") as f:
      json.dump(meta, f, indent=1)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", required=True)
  parser.add_argument("--devices", default="4,8")
  parser.add_argument("--programs", default=",".join(PROGRAMS))
  parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
  args = parser.parse_args()
  names = args.programs.split(",")
  if args.child:
    child(args.out, args.child, names)
    return 0
  try:
    import jax  # noqa: F401  (only checked here: the children import it under their flags)
  except ImportError:
    print("make_sharded_programs: jax is not installed; skipping")
    return 77
  start = time.monotonic()
  finished = os.path.join(args.out, "FINISHED")
  if os.path.exists(finished):
    os.remove(finished)
  for n in [int(d) for d in args.devices.split(",")]:
    with tempfile.TemporaryDirectory(prefix="sharded_dump_") as dump:
      env = dict(os.environ)
      env["XLA_FLAGS"] = (f"--xla_force_host_platform_device_count={n} --xla_dump_to={dump} "
                          "--xla_dump_hlo_pass_re=spmd-partitioning")
      env["SHARDED_PROGRAMS_DUMP"] = dump
      env["JAX_PLATFORMS"] = "cpu"
      subprocess.run([sys.executable, __file__, "--out", args.out, "--child", str(n),
                      "--programs", args.programs], env=env, check=True, timeout=300)
  # Last: the tests that take these programs check for it (sharded_programs_common.py).
  os.makedirs(args.out, exist_ok=True)
  with open(finished, "w"):
    pass
  print(f"make_sharded_programs: {args.out} in {time.monotonic() - start:.1f} s")
  return 0


if __name__ == "__main__":
  sys.exit(main())

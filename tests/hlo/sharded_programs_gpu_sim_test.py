#!/usr/bin/env python3
"""XLA's partitioned modules on 4 and 8 simulated GPUs against jax's own per-device outputs.

make_sharded_programs.py compiles programs with jax on 4 and 8 host devices (data and tensor parallel,
a pipeline permute, all-to-all, all-gather, reduce-scatter, uneven tiles) and keeps the module
after XLA's spmd-partitioning pass with jax's inputs and outputs. Each partitioned module runs with
`xlens run --backend=gpu-sim --num_replicas=R --num_partitions=P --reference`: the GPU backend's
kernels on R x P GPU simulators, each with its own memory, the collectives between them; every
device's every output must match jax's shard of it (and the evaluator over the same devices, which
--reference checks), and the global outputs xlens assembles jax's global ones.

One program also runs with --trace: the timeline must hold a track for each of the 4 devices and
every collective span its bytes and the time the timing model gives it over NVLink (modelled_ns).

The programs, and where the rest is made, are as sharded_programs_common.py says; exit 77 (skip)
without jax.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sharded_programs_common as common  # noqa: E402

common.require_jax()


def worst_error(outputs, where, devices):
  """The largest absolute difference from jax's per-device outputs over every device."""
  import numpy as np
  worst = 0.0
  for d in range(devices):
    for want_path in glob.glob(os.path.join(where, "devices", str(d), "outputs", "out*.npy")):
      got_path = os.path.join(outputs, f"device_{d}", os.path.basename(want_path))
      if os.path.exists(got_path):
        got, want = np.load(got_path), np.load(want_path)
        if got.shape == want.shape and got.size:
          worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))))
  return worst


def check_trace(path, devices, failures, name):
  with open(path) as f:
    trace = json.load(f)
  events = trace["traceEvents"] if isinstance(trace, dict) else trace
  tracks = {e["pid"] for e in events if e.get("ph") == "X" and e.get("pid", 0) >= 1000}
  if len(tracks) != devices:
    failures.append(f"{name} (trace): {len(tracks)} device tracks, expected {devices}")
  spans = [e for e in events if e.get("ph") == "X" and e.get("cat") == "collective"]
  if not spans:
    failures.append(f"{name} (trace): no collective spans")
  for span in spans:
    args = span.get("args", {})
    if "modelled_ns" not in args or "bytes" not in args or "group" not in args:
      failures.append(f"{name} (trace): collective span {span.get('name')} lacks modelled_ns, bytes or "
                      f"group: {sorted(args)}")
      break
  flows = [e for e in events if e.get("ph") in ("s", "f")]
  if not flows:
    failures.append(f"{name} (trace): no flows join the devices' collectives")


def check_real_gpus(args, where, partitions, failures, name):
  """--backend=gpu on more devices than GPUs (here: no driver, or fewer GPUs than 4) is refused in
  one line before anything runs; with enough GPUs and NCCL it runs and agrees with the evaluator."""
  result = subprocess.run([args.xlens, "run", os.path.join(where, "after_spmd_partitioning.txt"), "--backend=gpu",
                           f"--num_partitions={partitions}", "--inputs", os.path.join(where, "inputs"),
                           "--reference"], capture_output=True, text=True, timeout=300)
  if result.returncode == 0:
    if "match" not in result.stdout:
      failures.append(f"{name} (--backend=gpu): ran but no reference line: {result.stdout[-300:]}")
    return
  lines = result.stderr.strip().splitlines()
  if result.returncode != 1 or len(lines) != 1 or not lines[0].startswith("xlens: --backend=gpu"):
    failures.append(f"{name} (--backend=gpu): not one line and exit 1 (exit {result.returncode}): "
                    f"{result.stderr.strip()[-400:]}")
  elif "GPUs" not in lines[0] and "NCCL" not in lines[0]:
    failures.append(f"{name} (--backend=gpu): the refusal does not say what is missing: {lines[0]}")
  else:
    print(f"{name} (--backend=gpu): refused: {lines[0]}")


def main():
  args = common.argument_parser(__doc__).parse_args()
  failures, checked, lines = [], 0, []
  with tempfile.TemporaryDirectory(prefix="sharded_gpu_sim_") as tmp:
    failed = common.obtain(args, tmp)
    if failed is not None:
      return failed
    for where in common.program_dirs(args.out):
      meta = common.read_meta(where)
      replicas, partitions = meta["num_replicas"], meta["num_partitions"]
      devices = replicas * partitions
      name = os.path.relpath(where, args.out)
      outputs = tempfile.mkdtemp(dir=tmp)
      command = [args.xlens, "run", os.path.join(where, "after_spmd_partitioning.txt"), "--backend=gpu-sim",
                 f"--num_replicas={replicas}", f"--num_partitions={partitions}", "--inputs",
                 os.path.join(where, "inputs"), "--outputs", outputs, "--reference"]
      traced = name == os.path.join("n4", "dp_mlp_train_step")
      if traced:
        command += ["--trace", os.path.join(tmp, "trace.json")]
      result = subprocess.run(command, capture_output=True, text=True, timeout=300)
      checked += 1
      if result.returncode != 0 and "GPU simulator is unavailable" in result.stderr:
        print("skip:", result.stderr.strip())
        return 77
      if result.returncode != 0:
        failures.append(f"{name}: xlens run --backend=gpu-sim failed: {result.stderr.strip()}")
        continue
      if "simulated GPUs" not in result.stdout or "reference:" not in result.stdout:
        failures.append(f"{name}: the run did not say it ran on simulated GPUs against the evaluator: "
                        f"{result.stdout.strip()[-300:]}")
      common.compare(name, outputs, where, devices, failures)
      lines.append(f"{name}: largest absolute error against jax {worst_error(outputs, where, devices):.3g}")
      if traced:
        check_trace(os.path.join(tmp, "trace.json"), devices, failures, name)
        check_real_gpus(args, where, partitions, failures, name)
  for line in lines:
    print(line)
  return common.report(failures, checked,
                       f"{checked} partitioned programs ran on their simulated GPUs, {len(failures)} failures")


if __name__ == "__main__":
  sys.exit(main())

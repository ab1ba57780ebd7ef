#!/usr/bin/env python3
"""`xlens compare` on a real jax dump: XLA's pipeline beside xlens's on the same module.

Makes, at test time, a dump with jax (XLA_FLAGS=--xla_dump_to=D) of a two-layer training step
(matmuls and elementwise work), run by this very file, and a jax.profiler profile of it; times
xlens's compilation of the same before_optimizations module with `xlens run --trace`. Then runs
`xlens compare D --trace XLA_PROFILE --xlens-trace XLENS_PROFILE --json OUT` and checks:

- the JSON parses, and every module with both HLO files was compared (none skipped);
- XLA's kernel count is that of the after_optimizations module (counted here from its entry
  computation) and of `xlens inspect`, xlens's that of `xlens run`'s kernels;
- every kernel of both sides is matched or says why not, a kernel with op_names never for lack
  of one; pairs name existing kernels, each kernel at most once, overlaps in (0, 1];
- the training step's kernels pair up (at least one pair; an XLA fusion of the matmul's
  elementwise epilogue is matched), and matched kernels have times from both profiles;
- `--run` times xlens's kernels itself;
- a scan's loop body is matched though XLA prefixed its op_names when inlining it;
- xlens's own CPU and GPU dumps of the module compared with xlens match every kernel exactly.

Prints the counts and exits 1 on any failure, 77 (skipped) without jax.
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.abspath(__file__)
PROGRAM = "jit_train_step"
# Instructions that run no code (xla_dump_kernels.cc): not kernels.
NO_CODE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "add-dependency",
           "opt-barrier"}


def jax_program():
    import jax
    import jax.numpy as jnp

    def loss(params, x, y):
        (w1, b1), (w2, b2) = params
        h = jax.nn.relu(x @ w1 + b1)
        return jnp.mean((h @ w2 + b2 - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads)

    # A loop: XLA inlines the body's call and prefixes its op_names, xlens keeps jax's.
    @jax.jit
    def rnn_scan(xs, w, h0):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum(-1)
        return jax.lax.scan(step, h0, xs)

    params = ((jnp.full((16, 32), 0.1), jnp.zeros((32,))), (jnp.full((32, 4), 0.1), jnp.zeros((4,))))
    x, y = jnp.full((64, 16), 0.5), jnp.ones((64, 4))
    jax.block_until_ready(train_step(params, x, y))
    jax.block_until_ready(rnn_scan(jnp.full((6, 2, 4), 0.3), jnp.full((4, 4), 0.2), jnp.zeros((2, 4))))
    with jax.profiler.trace(os.environ["XLENS_TEST_PROFILE_DIR"]):
        for _ in range(3):
            jax.block_until_ready(train_step(params, x, y))


def make_dump(directory):
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_dump_to={directory}"
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["JAX_PLATFORMS"] = "cpu"
    env["XLENS_TEST_PROFILE_DIR"] = directory + "_profile"
    run = subprocess.run([sys.executable, HERE, "--child"], env=env, capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise RuntimeError(f"the jax program failed:\n{run.stderr[-2000:]}")


def entry_kernels(hlo_text):
    """The kernels of an optimized module without control flow: its entry computation's
    instructions that run code."""
    entry = hlo_text[hlo_text.index("\nENTRY"):]
    entry = entry[:entry.index("\n}")]
    opcodes = re.findall(r"^\s*(?:ROOT )?%?[\w.\-]+ = .*?\s([a-z][\w\-]*)\(", entry, re.M)
    return [op for op in opcodes if op not in NO_CODE], entry


def check_side(module, side, failures):
    names = [k["name"] for k in module[side]["kernels"]]
    if len(set(names)) != len(names):
        failures.append(f"{module['name']}: {side} kernels named twice: {names}")
    if module[side]["kernel_count"] != len(names):
        failures.append(f"{module['name']}: {side} kernel_count {module[side]['kernel_count']}, {len(names)} listed")
    for kernel in module[side]["kernels"]:
        if kernel["matched"] is None:
            reason = kernel.get("reason", "")
            if not reason:
                failures.append(f"{module['name']}: {side} kernel {kernel['name']} unmatched without a reason")
            elif kernel["op_names"] and reason.startswith("no op_name"):
                failures.append(f"{module['name']}: {side} kernel {kernel['name']} has op_names {kernel['op_names']} "
                                f"but says: {reason}")
    return set(names)


def check(xlens, directory, failures):
    befores = sorted(f for f in os.listdir(directory) if f.endswith(f"{PROGRAM}.before_optimizations.txt"))
    afters = sorted(f for f in os.listdir(directory) if f.endswith(f"{PROGRAM}.cpu_after_optimizations.txt"))
    if not befores or not afters:
        failures.append(f"no {PROGRAM} before/after_optimizations files in {os.listdir(directory)}")
        return
    profiles = []
    for root, _, names in os.walk(directory + "_profile"):
        profiles += [os.path.join(root, n) for n in names if n.endswith(".trace.json.gz")]
    if not profiles:
        failures.append("jax.profiler wrote no JSON profile")
        return
    xlens_trace = directory + ".xlens_trace.json"
    run = subprocess.run([xlens, "run", os.path.join(directory, befores[0]), "--iterations", "3", "--trace", xlens_trace],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        failures.append(f"xlens run --trace exited {run.returncode}: {run.stderr.strip()[:300]}")
        return
    out = directory + ".compare.json"
    run = subprocess.run([xlens, "compare", directory, "--trace", profiles[0], "--xlens-trace", xlens_trace,
                          "--json", out], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        failures.append(f"xlens compare exited {run.returncode}: {run.stderr.strip()}")
        return
    print(run.stdout.strip())
    result = json.load(open(out))
    inspect = subprocess.run([xlens, "inspect", directory, "--json", "-"], capture_output=True, text=True, timeout=120)
    inspected = {m["name"]: len(m["kernels"]) for m in json.loads(inspect.stdout)["modules"]}
    if result["skipped"]:
        failures.append(f"modules not compared: {result['skipped']}")
    modules = {m["name"]: m for m in result["modules"]}
    if PROGRAM not in modules:
        failures.append(f"{PROGRAM} not compared: {sorted(modules)}")
        return
    for module in result["modules"]:
        xla_names = check_side(module, "xla", failures)
        xlens_names = check_side(module, "xlens", failures)
        seen_xla, seen_xlens = set(), set()
        for pair in module["pairs"]:
            if pair["xla"] not in xla_names or pair["xlens"] not in xlens_names:
                failures.append(f"{module['name']}: pair names a kernel that is not listed: {pair}")
            if pair["xla"] in seen_xla or pair["xlens"] in seen_xlens:
                failures.append(f"{module['name']}: a kernel in two pairs: {pair}")
            seen_xla.add(pair["xla"])
            seen_xlens.add(pair["xlens"])
            if not 0 < pair["jaccard"] <= 1:
                failures.append(f"{module['name']}: overlap out of (0, 1]: {pair}")
        if module["xla"]["kernel_count"] != inspected.get(module["name"]):
            failures.append(f"{module['name']}: XLA {module['xla']['kernel_count']} kernels, "
                            f"xlens inspect {inspected.get(module['name'])}")
    scan = modules.get("jit_rnn_scan")
    if scan is None:
        failures.append(f"jit_rnn_scan not compared: {sorted(modules)}")
    else:
        kinds = {k["name"]: k["kind"] for k in scan["xla"]["kernels"]}
        if not any(kinds[p["xla"]] in ("dot", "kCustom") for p in scan["pairs"]):
            failures.append(f"jit_rnn_scan: the loop body's matmul is not matched: {scan['pairs']}")
        print(f"jit_rnn_scan: XLA {scan['xla']['kernel_count']} kernels, xlens {scan['xlens']['kernel_count']}; "
              f"{len(scan['pairs'])} matched")
    module = modules[PROGRAM]
    expected, entry = entry_kernels(open(os.path.join(directory, afters[0])).read())
    if " while(" not in entry and " call(" not in entry and " conditional(" not in entry and \
            module["xla"]["kernel_count"] != len(expected):
        failures.append(f"{PROGRAM}: XLA {module['xla']['kernel_count']} kernels, the after_optimizations module "
                        f"{len(expected)}: {expected}")
    # xlens's kernels as xlens run times them (its trace's hlo_op, one per kernel).
    with open(xlens_trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    ran = {e["args"]["hlo_op"] for e in events if isinstance(e.get("args"), dict) and e["args"].get("hlo_op")}
    listed = {k["name"] for k in module["xlens"]["kernels"]}
    if ran and not ran <= listed:
        failures.append(f"{PROGRAM}: xlens run timed kernels compare does not list: {sorted(ran - listed)}")
    if not module["pairs"]:
        failures.append(f"{PROGRAM}: no kernel matched")
    xla = {k["name"]: k for k in module["xla"]["kernels"]}
    xlens_kernels = {k["name"]: k for k in module["xlens"]["kernels"]}
    if not any(xla[p["xla"]]["kind"].startswith("k") for p in module["pairs"]):
        failures.append(f"{PROGRAM}: no XLA fusion matched: {module['pairs']}")
    timed = [p for p in module["pairs"] if xla[p["xla"]].get("trace", {}).get("total_us", 0) > 0
             and xlens_kernels[p["xlens"]].get("trace", {}).get("total_us", 0) > 0]
    if not timed:
        failures.append(f"{PROGRAM}: no matched pair timed on both sides")
    for key in ("trace", "xlens_trace"):
        t = result.get(key, {})
        if not t.get("linked_events"):
            failures.append(f"{key}: no kernel event linked: {t}")
    # --run: xlens times its own kernels by running the module.
    run = subprocess.run([xlens, "compare", directory, "--module", PROGRAM, "--run", "--iterations", "2", "--json", "-"],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        failures.append(f"xlens compare --run exited {run.returncode}: {run.stderr.strip()}")
    else:
        ran_module = json.loads(run.stdout)["modules"][0]
        if "xlens_run_problem" in ran_module or not any(k.get("trace", {}).get("total_us", 0) > 0
                                                          for k in ran_module["xlens"]["kernels"]):
            failures.append(f"{PROGRAM}: --run timed no xlens kernel: {ran_module.get('xlens_run_problem')}")
    # xlens's own dump of the module (with its manifest) compared with xlens: the same compiler
    # on both sides, so every kernel pairs exactly with its namesake, on either backend.
    for backend in ("cpu", "gpu"):
        own = f"{directory}.own_{backend}"
        made = subprocess.run([xlens, "compile", os.path.join(directory, befores[0]), "--backend", backend,
                               f"--xla_dump_to={own}"], capture_output=True, text=True, timeout=120)
        run = subprocess.run([xlens, "compare", own, "--json", "-"], capture_output=True, text=True, timeout=120)
        if made.returncode != 0 or run.returncode != 0:
            failures.append(f"own/{backend}: compile or compare failed: {made.stderr.strip()[:200]} {run.stderr.strip()}")
            continue
        own_module = json.loads(run.stdout)["modules"][0]
        pairs = own_module["pairs"]
        if own_module["backend"] != backend or not pairs or len(pairs) != own_module["xla"]["kernel_count"] or \
                any(p["xla"] != p["xlens"] or not p["exact"] for p in pairs):
            failures.append(f"own/{backend}: xlens against itself not matched exactly: {pairs}")
    unmatched = sum(k["matched"] is None for k in module["xla"]["kernels"])
    print(f"{PROGRAM}: XLA {module['xla']['kernel_count']} kernels, xlens {module['xlens']['kernel_count']}; "
          f"{len(module['pairs'])} matched, {unmatched} XLA kernels unmatched with a reason, "
          f"{len(timed)} pairs timed on both sides; {len(result['modules'])} modules compared")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--xlens")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--keep", help="make the dump here and keep it")
    args = parser.parse_args()
    if args.child:
        return jax_program()
    if importlib.util.find_spec("jax") is None:
        print("jax is not installed: skipped")
        return SKIP
    failures = []
    with tempfile.TemporaryDirectory(prefix="xlens_compare_") as tmp:
        directory = os.path.join(args.keep or tmp, "jax")
        make_dump(directory)
        check(args.xlens, directory, failures)
    for failure in failures[:40]:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main() or 0)

#!/usr/bin/env python3
"""Where a library-bound module's time goes, call by call, against oneDNN standalone.

codegen_vs_xla.py holds a module of products and convolutions to the sum of oneDNN's standalone
times for its calls (machine_limits --floors --hlo=FILE). A module under 90% of that sum misses it
in one of three places, which this script tells apart:

  - a call: xlens's library call (oneDNN's kernel in parts on the pool, or xlens's own small
    product loops) slower than the same shape standalone;
  - the kernels between the calls: the elementwise and reduction fusions a chain of calls leaves
    outside them (an activation whose input a gradient still reads, a softmax), which the floor
    does not count;
  - the gaps: the module's best run less the sum of its thunks' times in that same run (launches,
    waits for a late worker).

It alternates, `--rounds` times, machine_limits --floors (each call's best over 0.2 s of runs on
oneDNN's own threads) with `xlens run --trace` over `--iterations` runs, so that each call meets
the machine in the same minutes as its floor; a shared machine's load moves both by 2x from one
minute to the next. Per call it prints the floor's best and xlens's best over all the rounds and
their ratio; then the kernels' bests summed, and the best run split into calls, kernels and gaps.
Each library call is matched to its floor by the dot or convolution it runs: the trace names the
call by its kCustom fusion, the optimized module (dumped by the first round's run) names the
instruction inside that fusion, and machine_limits names each floor by the same instruction.
Execution order need not be the HLO's, so order matches nothing. A call whose instruction no floor
names (a pass renamed it) takes an unclaimed floor of the same flops; k calls alike that each
write 1/k of an unclaimed floor's output elements (a chain split per batch element,
batched-chain-split: long attention's products) share it, 1/k each; a call still without a
floor, a floor no call took, and a call whose opcode differs from its floor's kind are said.

Usage: tests/bench/calls_vs_floors.py --xlens build/compiler/cli/xlens MODULE.hlo [--inputs DIR]
                                      [--rounds 3] [--iterations 400]
                                      [--machine-limits build/tests/bench/machine_limits]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile


def floors(machine_limits, hlo):
    """Each dot's and convolution's standalone floor, in HLO order: [{instruction, kind, flops,
    ms}] (ms None where oneDNN refused the call)."""
    proc = subprocess.run([machine_limits, "--floors", f"--hlo={hlo}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or f"machine_limits exited with {proc.returncode}")
    calls = json.loads(proc.stdout)["hlo_modules"][0]["calls"]
    return [dict(instruction=c.get("instruction"), kind=c["kind"], flops=c.get("flops"), ms=c.get("ms"))
            for c in calls]


_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(?:\w+\[([\d,]*)\])?.*?\s([\w\-]+)\(")
_CALLS = re.compile(r"kind=kCustom.*calls=%?([\w.\-]+)")


def _elements(dims):
    """The elements of a shape's dimensions as the HLO text writes them ("32,10"); None for a
    tuple's (no dimensions matched)."""
    if dims is None:
        return None
    out = 1
    for d in filter(None, dims.split(",")):
        out *= int(d)
    return out


def instructions(module_text):
    """{instruction: (opcode, elements of its shape)} over every computation of a module's text."""
    out = {}
    for line in module_text.splitlines():
        instruction = _INSTRUCTION.match(line)
        if instruction:
            name, dims, opcode = instruction.groups()
            out[name] = (opcode, _elements(dims))
    return out


def library_ops(module_text):
    """The dots and convolutions inside each kCustom fusion of an optimized module's text:
    {fusion: [(instruction, opcode, elements)]}."""
    computations, calls, current = {}, {}, None
    for line in module_text.splitlines():
        header = _COMPUTATION.match(line)
        if header and "=" not in line.split("(")[0]:
            current = computations.setdefault(header.group(1), [])
            continue
        instruction = _INSTRUCTION.match(line)
        if not instruction or current is None:
            continue
        name, dims, opcode = instruction.groups()
        current.append((name, opcode, _elements(dims)))
        called = _CALLS.search(line) if opcode == "fusion" else None
        if called:
            calls[name] = called.group(1)
    return {fusion: [op for op in computations.get(body, []) if op[1] in ("dot", "convolution")]
            for fusion, body in calls.items()}


def match_calls(names, call_flops, ops, floor_list, source):
    """Each library call (`names`, by fusion) to its floor: the floor naming the dot or convolution
    the fusion runs (`ops`, library_ops), else (a pass made that instruction anew: folded a
    transpose into it, turned a convolution's gradient round) an unclaimed floor of an instruction
    of the same opcode and as many output elements in the module's own text (`source`,
    instructions), of the call's flops where several are. Returns ({call: (floor index or None,
    note)}, [floor indices no call took]); the note says how the call was matched, that it was
    not, or that its opcode is not its floor's kind."""
    by_instruction = {f["instruction"]: i for i, f in enumerate(floor_list)}
    claimed, matched = set(), {}
    # By name first, for every call, so that a call matched by shape cannot take a named floor.
    for name in names:
        index = next((by_instruction[n] for n, _, _ in ops.get(name, []) if n in by_instruction), None)
        if index is not None and index not in claimed:
            claimed.add(index)
            matched[name] = (index, "")
    for name in names:
        if name in matched:
            continue
        inside = ops.get(name, [])
        alike = [i for i, f in enumerate(floor_list) if i not in claimed and inside and
                 source.get(f["instruction"]) == inside[0][1:]]
        same_flops = [i for i in alike if call_flops.get(name) and floor_list[i]["flops"] == call_flops[name]]
        index = (same_flops or alike or [None])[0]
        if index is not None:
            claimed.add(index)
        matched[name] = (index, "matched by shape" if index is not None else "no floor")
    # batched-chain-split runs a chain of batched products (attention's q k^T, then p v) as one
    # chain per batch element: the HLO's one product is then k calls of 1/k of its output and its
    # flops each, which share its floor (1/k of it each, as main() counts it).
    alike_calls = {}
    for name in names:
        inside = ops.get(name, [])
        if matched[name][0] is None and inside:
            alike_calls.setdefault(tuple(inside[0][1:]), []).append(name)
    for (opcode, elements), group in alike_calls.items():
        # By output elements, not flops: a call's flops count its fused epilogue (the scores'
        # scaling) as well.
        k = len(group)
        index = next((i for i, f in enumerate(floor_list) if i not in claimed and k > 1 and elements and
                      source.get(f["instruction"]) == (opcode, elements * k)), None)
        if index is not None:
            claimed.add(index)
            for name in group:
                matched[name] = (index, f"1/{k} of it: its chain split per batch element")
    for name, (index, note) in matched.items():
        inside = ops.get(name, [])
        if index is not None and inside and (inside[0][1] == "dot") != (floor_list[index]["kind"] == "matmul"):
            matched[name] = (index, (note + "; " if note else "") +
                             f"{inside[0][1]} against a {floor_list[index]['kind']} floor")
    return matched, [i for i in range(len(floor_list)) if i not in claimed]


def optimized_module(directory):
    """The text of the optimized module xlens run dumped under `directory`."""
    found = [f for f in glob.glob(os.path.join(directory, "*after_optimizations.txt"))]
    if not found:
        raise RuntimeError(f"xlens run dumped no optimized module under {directory}")
    with open(sorted(found)[0]) as f:
        return f.read()


def traced_runs(xlens, hlo, inputs, iterations, directory, dump_to=None):
    """Per run of `xlens run --trace`: (run us, [(thunk, us, is_library_call, flops)]) in execution
    order; with `dump_to`, the optimized module dumped there as well. Every round's process shares
    xlens's persistent cache in `directory` (0700, as tempfile makes it), so that a kernel xlens
    chooses by timing at compile time (a depthwise convolution's) is the first round's pick in
    every round, as in codegen_vs_xla.py."""
    trace = os.path.join(directory, "trace.json")
    cache = os.path.join(directory, "cache")
    os.makedirs(cache, mode=0o700, exist_ok=True)
    command = [xlens, "run", hlo, "--iterations", str(iterations), "--trace", trace,
               f"--xla_xlens_persistent_cache_dir={cache}"]
    if inputs:
        command += ["--inputs", inputs]
    if dump_to:
        command += [f"--xla_dump_to={dump_to}"]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip()[-500:] or f"xlens exited with {proc.returncode}")
    with open(trace) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    spans = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["ts"])
    runs = [e for e in spans if e["name"].startswith("execute ")]
    if not runs:
        raise RuntimeError("the trace has no runs")
    out, r = [], -1
    for e in spans:
        if e["name"].startswith("execute "):
            out.append((e["dur"], []))
            r += 1
        elif r >= 0 and e["ts"] < runs[r]["ts"] + runs[r]["dur"] and "hlo_op" in e.get("args", {}):
            args = e["args"]
            # A kernel names its function; a library call (a kCustom fusion) does not.
            out[r][1].append((e["name"], e["dur"], "kernel" not in args and args.get("fusion_kind") == "kCustom",
                              args.get("flops")))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("hlo")
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--inputs", help="directory of arg0.npy, ... (default: random inputs)")
    parser.add_argument("--machine-limits", help="default: beside xlens in its build tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=400)
    args = parser.parse_args()
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(args.xlens))))
    machine_limits = args.machine_limits or os.path.join(build, "tests", "bench", "machine_limits")
    floor_best, call_best, kernel_best, best_run = None, {}, {}, None
    names, call_flops, ops = [], {}, {}
    with tempfile.TemporaryDirectory() as directory:  # under TMPDIR
        for round_number in range(args.rounds):
            f = floors(machine_limits, args.hlo)
            # A call oneDNN refused has no floor (None) in every round.
            floor_best = f if floor_best is None else [
                dict(a, ms=b["ms"] if a["ms"] is None else a["ms"] if b["ms"] is None else min(a["ms"], b["ms"]))
                for a, b in zip(floor_best, f)]
            dump = os.path.join(directory, "dump") if round_number == 0 else None
            runs = traced_runs(args.xlens, args.hlo, args.inputs, args.iterations, directory, dump)
            if dump:
                ops = library_ops(optimized_module(dump))
            for run_us, thunks in runs:
                for name, us, library, flops in thunks:
                    kept = call_best if library else kernel_best
                    kept[name] = min(kept.get(name, us), us)
                    if library and name not in names:
                        names.append(name)
                        call_flops[name] = flops
                if best_run is None or run_us < best_run[0]:
                    best_run = (run_us, thunks)
            load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
            print(f"round {round_number + 1}: floors {sum(c['ms'] for c in f if c['ms']) * 1e3:.1f} us, "
                  f"xlens best run {min(r for r, _ in runs):.1f} us (load {load})", file=sys.stderr)
    with open(args.hlo) as f:
        source = instructions(f.read())
    matched, unclaimed = match_calls(names, call_flops, ops, floor_best, source)
    print(f"{'call':<14}{'floor of':<24}{'floor kind':<30}{'floor us':>10}{'xlens us':>10}{'floor/xlens':>13}")
    floor_sum = 0.0
    sharing = {}  # floor index: how many calls share it (several where a chain was split)
    for index, _ in matched.values():
        sharing[index] = sharing.get(index, 0) + 1
    for name in names:
        index, note = matched[name]
        floor = floor_best[index] if index is not None else dict(instruction="-", kind="-", ms=None)
        floor_us = floor["ms"] * 1e3 / sharing[index] if floor["ms"] else None
        floor_sum += floor_us or 0
        share = f"{floor_us / call_best[name] * 100:>12.0f}%" if floor_us else f"{'-':>13}"
        print(f"{name:<14}{floor['instruction']:<24}{floor['kind']:<30}{floor_us or float('nan'):>10.1f}"
              f"{call_best[name]:>10.1f}{share}" + (f"  ({note})" if note else ""))
    for i in unclaimed:
        print(f"note: no library call ran {floor_best[i]['instruction']}'s {floor_best[i]['kind']} floor "
              f"({(floor_best[i]['ms'] or 0) * 1e3:.1f} us, not counted)")
    kernels = sum(kernel_best.values())
    if floor_sum == 0:
        sys.exit("no call has a floor (oneDNN refused every one, or the module has none)")
    print(f"calls' bests {sum(call_best.values()):.1f} us against floors {floor_sum:.1f} us; kernels' bests "
          f"{kernels:.1f} us ({len(kernel_best)} kernels, {kernels / floor_sum * 100:.0f}% of the floors)")
    run_us, thunks = best_run
    in_calls = sum(us for _, us, library, _ in thunks if library)
    in_kernels = sum(us for _, us, library, _ in thunks if not library)
    print(f"best run {run_us:.1f} us ({floor_sum / run_us * 100:.0f}% of the floors): calls {in_calls:.1f}, "
          f"kernels {in_kernels:.1f}, gaps {run_us - in_calls - in_kernels:.1f}")


if __name__ == "__main__":
    main()

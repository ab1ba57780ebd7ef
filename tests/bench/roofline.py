"""The bound each workload of codegen_vs_xla.py is held to, from this machine's measured limits.

`measure(binary, hlo_files)` runs tests/bench/machine_limits (built beside xlens): STREAM's
copy and triad, the bandwidth of copy, triad and a read-only sum over working sets from L1 to
eight times the last-level cache, the peak f32 FLOP/s of the vector units, and oneDNN's standalone time
for every matrix product and convolution in the given modules; `better` keeps the better figures
of two such measurements, and `Limits` reads them. `Limits.bound(...)` then picks, for one
workload, whichever of these takes longest (the tightest floor under its run time):

  - memory: the bytes it must move (its arguments and results, from their shapes) over the
    bandwidth a STREAM kernel of the same working set reaches: the copy's for a workload that
    writes as much as it reads, the triad's (or the copy's where that measured faster) for one
    that reads two bytes for each it writes, the rate of its own mix between them otherwise
    (`Limits.write_mix_bandwidth`), or the read-only sum's when the workload writes less than an
    eighth of what it moves (a reduction). The sweep point used is the largest working set not
    above the workload's, so a working set that fits in a cache is held to that cache (its
    percentage cannot pass 100 by hitting in cache). Beside it `Limits.triad_ms` keeps the stricter
    figure the work item's criterion names ("memory-bound workloads reach 90% of triad"): the same
    bytes at triad's rate whatever the mix, which codegen_vs_xla.py reports as `% triad`;
  - library: the module as a oneDNN program: the sum of oneDNN's standalone times of its
    products and convolutions (a chain of library calls can at best lose nothing between them;
    a convolution oneDNN cannot be posed is counted at the peak FLOP/s instead), plus the rest of
    its work that oneDNN has primitives for (machine_limits' "parts": each softmax or
    log-softmax, each other reduction, each weight update p - c g), each part at the faster of
    oneDNN's primitive standalone and its own bytes and arithmetic (Limits.part_floor: oneDNN
    2.6's softmax over short rows and its reference reductions are slower than the exps or the
    bytes they hold), plus the arithmetic (below) of what no part covers. The label gives the
    products' oneDNN time first, then each kind of part's floor and, where it was slower,
    oneDNN's own time for them;
  - arithmetic: the floating-point operations of its elementwise ops and reductions, counted
    from the module as XLA's HloCostAnalysis counts them (one per element of each add, multiply,
    compare, select, ...; one per element reduced), over the vector units' peak FLOP/s, plus,
    as HloCostAnalysis counts transcendentals apart from flops, each transcendental function's
    elements over that function's measured rate: the better of oneDNN's eltwise primitive for
    it and xlens's own inline function (fast_math.h) in a loop alone, each on a block in cache
    on all threads (exp, log, tanh, logistic, sqrt; erf at the rate of the exact GELU, which is
    erf and three operations more; expm1 and log1p at exp's and log's; rsqrt at sqrt's; power
    at exp's and log's together). A function with no such rate (sine, cosine, ...) counts one
    operation. JAX has no erfc instruction: it spells erfc out as some forty elementwise
    instructions (two divides and an exp among them), which xlens's emitter recognizes
    (passes/erfc_expansion) and computes as one erfc; machine_limits finds each such expansion
    with the same matcher ("erfc_expansions"), and its operations count as one erf per element
    instead (rest_costs). With the library floor added where it
    has products too. A softmax then is held to its exps where they take longer than its bytes,
    and JAX's exact GELU to its erfs at the exact GELU's rate, not to its 32 MiB. A lone add
    still counts one operation although the FMA peak counts two.
"""
import json
import math
import os
import re
import statistics
import subprocess

# HLO opcodes whose every output element costs one floating-point operation (HloCostAnalysis's
# flop count).
ELEMENTWISE_FLOP_OPCODES = frozenset("""
    add subtract multiply divide remainder maximum minimum negate abs sign compare select clamp
    floor ceil round-nearest-afz round-nearest-even
""".split())

# HloCostAnalysis's transcendentals, counted apart from the flops: each opcode's elements are
# timed at the rates of the functions named (machine_limits' "transcendentals"), one element of
# each per element of the op. Where none was measured, an element counts one flop.
TRANSCENDENTAL_FUNCTIONS = {
    "exponential": ("exp",), "exponential-minus-one": ("exp",), "log": ("log",),
    "log-plus-one": ("log",), "tanh": ("tanh",), "logistic": ("logistic",), "erf": ("gelu_erf",),
    "sqrt": ("sqrt",), "rsqrt": ("sqrt",), "power": ("exp", "log"), "cbrt": (), "sine": (),
    "cosine": (), "tan": (), "atan2": (),
}

# `name = f32[4096,1024]{1,0} multiply(a, b)`: the name, the result's element type and dims (none
# for a tuple), the opcode and the operands.
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.-]+)\s*=\s*(?:\(.*?\)|(\w+)\[([\d,]*)\](?:\{[^}]*\})?)"
                          r"\s+([\w-]+)\((.*)$")
# The first operand of an instruction, with its shape written before it (XLA's dumps) or not
# (JAX's `as_text`).
_FIRST_OPERAND = re.compile(r"^\s*(?:\w+\[([\d,]*)\](?:\{[^}]*\})?\s+)?%?([\w.-]+)")


def _elements(dims):
    count = 1
    for d in filter(None, dims.split(",")):
        count *= int(d)
    return count


def hlo_costs(text):
    """(flops, transcendentals) of a module's elementwise ops and reductions on floats, each
    computation counted once (JAX's modules call each of theirs once; a reducer's scalar add
    adds one operation, and the reduce counts one per element it reads). `transcendentals` maps
    each transcendental opcode present to its elements."""
    flops = 0
    transcendentals = {}
    dims_of = {}  # instruction name -> its result's dims, to size a reduce's operand
    for line in text.splitlines():
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        name, element_type, dims, opcode, operands = m.groups()
        if dims is not None:
            dims_of[name] = dims
        floating = element_type is not None and element_type.startswith(("f", "bf", "c"))
        if opcode in TRANSCENDENTAL_FUNCTIONS and dims is not None and floating:
            transcendentals[opcode] = transcendentals.get(opcode, 0) + _elements(dims)
        elif opcode in ELEMENTWISE_FLOP_OPCODES and dims is not None:
            # A compare of floats yields pred; a select's result type is its branches'.
            if floating or opcode == "compare":
                flops += _elements(dims) * (2 if opcode == "clamp" else 1)
        elif opcode == "reduce" and floating:
            first = _FIRST_OPERAND.match(operands)
            if first:
                operand_dims = first.group(1) if first.group(1) is not None else dims_of.get(first.group(2))
                if operand_dims is not None:
                    flops += _elements(operand_dims)
    return flops, transcendentals


def parts_costs(parts):
    """(flops, transcendentals) that a module's parts (machine_limits' "parts": a softmax, a
    reduction, a weight update posed as oneDNN's primitives) cover, in hlo_costs' terms."""
    flops, transcendentals = 0.0, {}
    for part in parts or []:
        costs = part.get("costs") or {}
        flops += costs.get("flops", 0)
        for opcode, count in (costs.get("transcendentals") or {}).items():
            transcendentals[opcode] = transcendentals.get(opcode, 0) + count
    return flops, transcendentals


def rest_costs(text, parts, expansions=()):
    """hlo_costs of `text` less what `parts` cover (parts_costs): the arithmetic a module's
    oneDNN program leaves outside its primitives (the products' post-ops, elementwise work no
    primitive was posed for). Each of `expansions` (machine_limits' "erfc_expansions": JAX's
    erfc spelled out, its elements and the operations it is made of) counts as one erf per
    element in place of its operations, as xlens computes it: an erf instruction's rate is the
    exact GELU's, the faster of oneDNN's gelu_erf and xlens's own loop of it."""
    flops, transcendentals = hlo_costs(text)
    covered_flops, covered = parts_costs(list(parts or []) + list(expansions or []))
    rest = {opcode: count - covered.get(opcode, 0) for opcode, count in transcendentals.items()
            if count - covered.get(opcode, 0) > 0}
    erfs = sum(e.get("elements", 0) for e in expansions or [])
    if erfs:
        rest["erf"] = rest.get("erf", 0) + erfs
    # The exact GELU's rate holds three multiplies beside its erf (x by 1/sqrt 2, x by 1/2, and
    # that by 1 + erf), which JAX writes around the expansion: not counted a second time. Around
    # an expansion that is no GELU's the floor is the shorter for it, never the looser.
    return max(0, flops - covered_flops - 3 * erfs), rest


def hlo_flops(text):
    """The flops of hlo_costs, without its transcendentals."""
    return hlo_costs(text)[0]


def find_binary(xlens):
    """machine_limits in the build tree that holds `xlens` (BUILD/compiler/cli/xlens)."""
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(xlens))))
    return os.path.join(build, "tests", "bench", "machine_limits")


def better(first, second):
    """Two measurements of the same machine and modules merged into the better of each figure:
    the higher bandwidth and FLOP/s, the shorter oneDNN time per call. A neighbour that took a
    core during one of them then costs the bound nothing. `second` may hold only some of the
    figures (measure_floors: the peak, the transcendentals and the modules' calls); a module
    only `second` measured is taken as it is."""
    merged = json.loads(json.dumps(first))
    memory, other = merged["memory"], second.get("memory") or {}
    for key, value in other.items():
        if key.endswith("_gbps_one_thread") or key.endswith("_gbps_all_threads"):
            memory[key] = max(memory.get(key, 0), value)
    by_size = {p["working_set_bytes"]: p for p in second.get("working_set_sweep") or []}
    for point in merged["working_set_sweep"]:
        twin = by_size.get(point["working_set_bytes"], {})
        for key in ("copy_gbps", "triad_gbps", "read_gbps"):
            point[key] = max(point[key], twin.get(key, 0))
    for key, value in (second.get("peak_f32") or {}).items():
        if key != "isa":
            merged["peak_f32"][key] = max(merged["peak_f32"].get(key, 0), value)
    rates = merged.get("transcendentals") or {}
    for function, twin in (second.get("transcendentals") or {}).items():
        if "elements_per_second" in twin and (
                twin["elements_per_second"] > rates.get(function, {}).get("elements_per_second", 0)):
            rates[function] = twin
    if rates:
        merged["transcendentals"] = rates
    modules = {m["file"]: m for m in second.get("hlo_modules") or []}
    for module in merged.get("hlo_modules") or []:
        twin = modules.pop(module["file"], None)
        if not twin or len(twin["calls"]) != len(module["calls"]):
            continue
        for key in ("calls", "parts"):
            if len(twin.get(key) or []) != len(module.get(key) or []):
                continue
            for i, call in enumerate(module.get(key) or []):
                if "ms" in call and "ms" in twin[key][i] and twin[key][i]["ms"] < call["ms"]:
                    module[key][i] = twin[key][i]
        module["total_ms"] = sum(c.get("ms", 0) for c in module["calls"])
        if "parts" in module:
            module["parts_ms"] = sum(p.get("ms", 0) for p in module["parts"])
            module["program_ms"] = module["total_ms"] + module["parts_ms"]
    if modules:
        merged["hlo_modules"] = (merged.get("hlo_modules") or []) + json.loads(
            json.dumps(list(modules.values())))
    return merged


def measure(binary, hlo_files, quick=False):
    command = [binary] + ([f"--hlo={f}" for f in hlo_files]) + (["--quick"] if quick else [])
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or f"{binary} exited with {proc.returncode}")
    return json.loads(proc.stdout)


def measure_stream(binary, working_set):
    """STREAM's copy, triad and read-only sum over `working_set` bytes, measured now (each over
    at least FLOOR_SAMPLING_MS of repetitions, a second or two in all): the memory floor of a
    workload timed right after it, in the same state of the memory system."""
    proc = subprocess.run([binary, f"--stream={int(working_set)}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or f"{binary} exited with {proc.returncode}")
    return json.loads(proc.stdout)


def measure_floors(binary, hlo_file):
    """The FMA peak, `hlo_file`'s library calls standalone and the transcendentals' rates,
    measured now (machine_limits --floors, a few seconds): the library and arithmetic floors of a
    workload timed right after it, on a machine in the same state."""
    proc = subprocess.run([binary, "--floors", f"--hlo={hlo_file}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or f"{binary} exited with {proc.returncode}")
    return json.loads(proc.stdout)


# Pairs per `machine_limits --paired` call: a second or two for a memory-bound row (chain8's
# 4.5 ms runs and two kernels' passes of 192 MiB, some 0.5 s, after about 1.5 s of compiling,
# allocating and first touch).
PAIRS = 30


def _text_of(hlo_file):
    try:
        with open(hlo_file) as f:
            return f.read()
    except OSError:
        return ""


def paired_kernels(read_bytes, write_bytes):
    """The stream kernels Limits.memory_floor reads for a workload of this mix: the read-only sum
    for a reduction, copy and triad (the mix between them, or copy where it is faster) otherwise."""
    return ["read"] if write_bytes * 8 <= read_bytes + write_bytes else ["copy", "triad"]


def measure_pairs(binary, hlo_file, inputs_dir, working_set, kernels, pairs=PAIRS, library=False,
                  cache_dir=None):
    """`machine_limits --paired`: in one process, PAIRS times one run of the module (compiled as
    `xlens run` compiles it, on the .npy arguments of `inputs_dir`) and right after it one pass of
    each of `kernels` over `working_set` bytes; per pair the module's ms and each kernel's GB/s
    (tests/bench/paired_run.h). With `library`, the module's library calls run standalone instead
    of the kernels (its "floors"' "library" ms per pair). `cache_dir`: xlens's persistent cache,
    so that the module compiles to the kernels `xlens run` picked with the same directory."""
    what = (["--library"] if library else
            [f"--bytes={int(working_set)}", f"--kernels={','.join(kernels)}"])
    cache = [f"--xla_xlens_persistent_cache_dir={cache_dir}"] if cache_dir else []
    proc = subprocess.run([binary, f"--paired={hlo_file}", f"--inputs={inputs_dir}", *what,
                           f"--pairs={pairs}", *cache], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or f"{binary} exited with {proc.returncode}")
    return json.loads(proc.stdout)


def pair_shares(limits, read_bytes, write_bytes, measurements):
    """The per-pair shares of measure_pairs results (one per round, pooled): for each pair, the
    memory floor (Limits.memory_floor, the row's own rule) at the rates its kernels ran right
    after the module's run, as a percentage of that run. A dict of `median`, `q1`, `q3` (of the
    pairs), `pairs` (their count) and `best_of_each` (the floor at each kernel's best pass
    against the best run); None without pairs. The memory's phase is the same within a pair, so
    the median cannot read it."""
    shares, best_ms, best_stream = [], float("inf"), {}
    for m in measurements:
        for i, module_ms in enumerate(m["module_ms"]):
            stream = {f"{k}_gbps": v["gbps"][i] for k, v in m["kernels"].items()}
            floor_ms = limits.memory_floor(read_bytes, write_bytes, stream)[0]
            shares.append(100.0 * floor_ms / module_ms)
            best_ms = min(best_ms, module_ms)
            for key, gbps in stream.items():
                best_stream[key] = max(best_stream.get(key, 0.0), gbps)
    if not shares:
        return None
    q1, median, q3 = (statistics.quantiles(shares, n=4, method="inclusive") if len(shares) > 1
                      else shares * 3)
    return dict(median=median, q1=q1, q3=q3, pairs=len(shares), best_of_each=100.0 * limits.memory_floor(
        read_bytes, write_bytes, best_stream)[0] / best_ms)


def library_pair_shares(measurements, arithmetic_ms):
    """The per-pair shares of measure_pairs(library=True) results (one per round, pooled): for
    each pair, the module's library calls run standalone right after its run, plus
    `arithmetic_ms` (the arithmetic around them, which Limits.bound adds to a library floor), as a
    percentage of that run; the same dict as pair_shares, None without pairs. A library call
    that moves many bytes meets the memory's phase as the module's call does (oneDNN's standalone
    depthwise convolution took 0.52-0.74 ms at the best of three quiet runs, its share of the
    floor judged by the run's best 79-89%), and a pair meets the same phase on both sides."""
    shares, best_ms, best_floor = [], float("inf"), float("inf")
    for m in measurements:
        calls_ms = m["floors"]["library"]["ms"]
        for module_ms, floor_ms in zip(m["module_ms"], calls_ms):
            shares.append(100.0 * (floor_ms + arithmetic_ms) / module_ms)
            best_ms = min(best_ms, module_ms)
            best_floor = min(best_floor, floor_ms)
    if not shares:
        return None
    q1, median, q3 = (statistics.quantiles(shares, n=4, method="inclusive") if len(shares) > 1
                      else shares * 3)
    return dict(median=median, q1=q1, q3=q3,
                best_of_each=100.0 * (best_floor + arithmetic_ms) / best_ms)


def beside(data, floors):
    """The limits `data` with the figures of `floors` (measure_floors) in place of theirs, slower
    or faster: unlike better(), which keeps the best of two measurements, a floor measured beside
    a round is what that round is held to."""
    merged = json.loads(json.dumps(data))
    for key, value in (floors.get("peak_f32") or {}).items():
        merged["peak_f32"][key] = value
    if floors.get("transcendentals"):
        merged["transcendentals"] = dict(merged.get("transcendentals") or {}, **floors["transcendentals"])
    modules = {m["file"]: m for m in floors.get("hlo_modules") or []}
    merged["hlo_modules"] = [modules.pop(m["file"], m) for m in merged.get("hlo_modules") or []]
    merged["hlo_modules"] += list(modules.values())
    return merged


class Limits:
    def __init__(self, data):
        self.data = data
        self.modules = {m["file"]: m for m in data.get("hlo_modules") or []}
        caches = sorted(data["caches"], key=lambda c: c["level"])
        self.levels = [(f"L{c['level']}" if c is not caches[-1] else "LLC", c["total_bytes"])
                       for c in caches]
        memory = data["memory"]
        self.memory_point = {"working_set_bytes": memory["array_bytes"] * 3,
                             "triad_gbps": memory["triad_gbps_all_threads"],
                             "copy_gbps": memory["copy_gbps_all_threads"],
                             "read_gbps": memory["read_gbps_all_threads"]}
        self.points = sorted(data["working_set_sweep"], key=lambda p: p["working_set_bytes"])
        self.peak_gflops = max(data["peak_f32"]["gflops_all_cores"],
                               data["peak_f32"].get("avx2_gflops_all_cores", 0))
        # function -> elements per second (the better of oneDNN and the inline loop), where measured.
        self.rates = {name: r["elements_per_second"]
                      for name, r in (data.get("transcendentals") or {}).items()
                      if r.get("elements_per_second", 0) > 0}

    def level(self, working_set):
        for name, size in self.levels:
            if working_set <= size:
                return name
        return "mem"

    def bandwidth(self, working_set, pattern):
        """GB/s of `pattern` ('triad' or 'read') at this working set: the sweep's largest point
        not above it, or anything larger that measured faster (the curve is noisy)."""
        points = self.points + [self.memory_point]
        below = [p for p in points if p["working_set_bytes"] <= working_set] or points[:1]
        start = below[-1]["working_set_bytes"]
        return max(p[pattern + "_gbps"] for p in points if p["working_set_bytes"] >= start)

    def summary_lines(self):
        d = self.data
        m = d["memory"]
        peak = d["peak_f32"]
        lines = [
            f"machine: {d['cpu']}, {d['threads']} threads, "
            + ", ".join(f"{n} {size / 2**10:g} KiB" if size < 2**20 else f"{n} {size / 2**20:g} MiB"
                        for n, size in self.levels),
            f"memory (STREAM, {m['array_bytes'] / 2**20:.0f} MiB arrays): copy "
            f"{m['copy_gbps_one_thread']:.1f} GB/s on 1 thread, {m['copy_gbps_all_threads']:.1f} on all; "
            f"triad {m['triad_gbps_one_thread']:.1f} / {m['triad_gbps_all_threads']:.1f}; "
            f"read {m['read_gbps_all_threads']:.1f} on all",
        ]
        # The sweep, a few points to a line.
        cells = [f"{p['working_set_bytes'] / 2**10:.3g}K {p['triad_gbps']:.0f}/{p['read_gbps']:.0f}"
                 if p["working_set_bytes"] < 2**20 else
                 f"{p['working_set_bytes'] / 2**20:.3g}M {p['triad_gbps']:.0f}/{p['read_gbps']:.0f}"
                 for p in self.points]
        lines.append("caches (all threads, triad / read GB/s by working set):")
        for i in range(0, len(cells), 9):
            lines.append("  " + ", ".join(cells[i:i + 9]))
        lines += [
            f"peak f32 ({peak['isa']} FMA): {peak['gflops_one_core']:.0f} GFLOP/s on 1 core, "
            f"{peak['gflops_all_cores']:.0f} on all" + (
                f" (avx2: {peak['avx2_gflops_one_core']:.0f} / {peak['avx2_gflops_all_cores']:.0f})"
                if "avx2_gflops_one_core" in peak else ""),
        ]
        if self.rates:
            functions = d.get("transcendentals") or {}

            def both(name):
                f = functions.get(name, {})
                library = (f.get("onednn") or {}).get("elements_per_second", f.get("elements_per_second", 0))
                own = f.get("inline_elements_per_second")
                return f"{name} {library / 1e9:.2f}" + (f"/{own / 1e9:.2f}" if own else "")
            lines.append("transcendentals (in cache, all threads, Gelt/s, oneDNN eltwise/xlens's own loop; "
                         "the better holds): " + ", ".join(both(n) for n in sorted(self.rates)))
        return lines

    def arithmetic(self, flops, transcendentals):
        """(ms, timed, flops) of the arithmetic floor: `flops` over the FMA peak plus each
        transcendental's elements over its functions' measured rates. `timed` maps each function
        so timed to its elements; `flops` comes back with the transcendentals no rate covers."""
        ms = 0.0
        timed = {}  # function -> elements timed at its rate
        for opcode, count in transcendentals.items():
            functions = TRANSCENDENTAL_FUNCTIONS.get(opcode, ())
            if functions and all(f in self.rates for f in functions):
                for f in functions:
                    ms += count / self.rates[f] * 1e3
                    timed[f] = timed.get(f, 0) + count
            else:
                flops += count
        return ms + flops / (self.peak_gflops * 1e9) * 1e3, timed, flops

    @staticmethod
    def write_mix_bandwidth(written, bandwidth):
        """(pattern, GB/s) of a workload that writes the share `written` of the bytes it moves:
        copy's rate where it writes half or more (copy writes half), triad's where it writes a
        third or less (triad writes a third), between them the rate whose seconds per byte are
        interpolated linearly in the share written between the two kernels' measured seconds per
        byte; copy's rate whatever the mix where it measured faster than triad's.

        Why copy and not triad for a workload that writes as much as it reads: beyond the
        last-level cache the streamed stores are what runs out. Over 33.5 MB here copy moved 50-55
        GB/s and triad 48-74 in the same minutes (triad's two arrays read stay in the cache while
        the one written streams past it), and layer norm, which writes as much as it reads, takes
        the time of a streamed copy of its bytes (0.62-0.65 ms, as xlens's own x * g + b over
        them), so triad's rate is no floor it could reach. The interpolation is no model of what a
        read and a written byte each cost (fitted through the two kernels, such a model gives a
        read a negative cost wherever triad measures over 1.5 times copy): it only moves a mix
        from one measured kernel to the other. The work item's own figure, the bytes at triad's
        rate, is kept beside it (triad_ms)."""
        copy, triad = bandwidth("copy"), bandwidth("triad")
        if triad <= copy or written >= 0.5:
            return "copy", copy
        if written <= 1 / 3:
            return "triad", triad
        toward_copy = (written - 1 / 3) / (0.5 - 1 / 3)
        seconds = toward_copy / copy + (1 - toward_copy) / triad
        # Named by the kernel whose mix it is within 1% of (layer norm's gamma and beta, 8 KiB
        # beside 32 MiB, leave it a hair short of copy's).
        name = "copy" if toward_copy > 0.99 else "triad" if toward_copy < 0.01 else "copy-triad"
        return name, 1 / seconds

    def triad_ms(self, read_bytes, write_bytes, stream=None):
        """The bytes moved at triad's rate over their working set (`stream`'s, measured beside the
        workload, where given), whatever the workload's mix of reads and writes: the floor the work
        item's criterion ("memory-bound workloads reach 90% of triad") names, kept beside the
        mix-matched one of `bound` so that the stricter figure is never hidden."""
        moved = read_bytes + write_bytes
        gbps = stream["triad_gbps"] if stream else self.bandwidth(moved, "triad")
        return moved / (gbps * 1e9) * 1e3

    def memory_floor(self, read_bytes, write_bytes, stream=None):
        """(ms, pattern, GB/s) of the memory floor of `bound`: the bytes moved at the rate of the
        stream kernel their mix of reads and writes matches (the read-only sum's where the
        workload writes an eighth or less of them, else write_mix_bandwidth's), from `stream`
        where given (it needs only the kernels paired_kernels names), else from the sweep.

        One pass over the bytes, whatever the module's dependences. An input whose reductions
        feed its own elementwise outputs (batch norm in training, layer norm, softmax) must be
        read twice only where a reduction group outgrows the fast cache: the outputs of one group
        (the elements one reduced value is taken over) can be written only once every line
        holding the group has been read, so where those lines (of every operand the outputs read
        again) take F bytes and the caches that read faster than memory S, at least F - S of them
        come from memory twice. For a reduction over the whole input that is 2N - S in all; but batch norm in
        training sums each channel over N, H and W, and 16 channels share each 64-byte line: a
        group of lines is 25088 rows x 64 bytes of x and of dy, 3.06 MiB, under the 4 MiB of
        the two L2s, where the sweep still reads at twice memory's rate (126-137 GB/s at 4 MiB,
        about 61 from 8 MiB on, in the quiet runs). Layer norm's, softmax's and the RMS norm's
        groups are single rows of 4 KB. What keeps batch norm from one pass on this machine is
        how it reads such a group, one line in every 512 bytes: at a third of the rate of lines
        in address order, its lines in an eighth of the L2's sets (batch_norm_schedules). That
        is a rate of an access pattern, which machine_limits does not measure; a floor that
        counted the second read would have to measure it (the faster of two sweeps and one pass
        at that rate), not assume it.
        Held to the sum of two passes' floors (the sums' read, then the pass that writes), batch
        norm beat that floor in a busy run (its best 0.714 ms against 0.786)."""
        moved = read_bytes + write_bytes

        def bandwidth(pattern):
            return stream[pattern + "_gbps"] if stream else self.bandwidth(moved, pattern)

        if write_bytes * 8 <= moved:
            pattern = "read"
            gbps = bandwidth(pattern)
        else:
            pattern, gbps = self.write_mix_bandwidth(write_bytes / moved, bandwidth)
        return moved / (gbps * 1e9) * 1e3, pattern, gbps

    def part_floor(self, part):
        """(floor ms, oneDNN ms) of one part of a module beside its library calls (machine_limits'
        "parts"): oneDNN's primitive for it standalone, or where that is slower (a reference
        implementation, a softmax's primitive over short rows) or refused (inf), the part's own
        floor: the bytes it must move over the bandwidth of its working set (memory_floor),
        or its arithmetic (its operations at the FMA peak and its transcendentals at their
        rates) where that takes longer. A part so is held neither to more than oneDNN takes
        for it nor to more than the machine allows for its bytes and operations."""
        onednn_ms = part.get("ms", math.inf)
        costs = part.get("costs") or {}
        # A softmax over masked scores: only the share its mask keeps need be read, computed and
        # written (machine_limits' kept_share), as xlens's products compute only those scores.
        share = part.get("kept_share", 1)
        own_ms = max(self.memory_floor(share * part.get("read_bytes", 0), share * part.get("write_bytes", 0))[0],
                     self.arithmetic(share * costs.get("flops", 0),
                                     {f: share * n for f, n in (costs.get("transcendentals") or {}).items()})[0])
        return min(onednn_ms, own_ms), onednn_ms

    def bound(self, hlo_file, read_bytes, write_bytes, stream=None, library=True):
        """(bound ms, label, achieved unit, work) for one workload: `work` is bytes for a memory
        bound and flops for a library bound, so achieved = work / time. `stream`: the stream
        kernels measured over this very working set beside the workload (measure_stream), which
        then give the memory floor in place of the sweep. Without `library`, the module's
        products and convolutions count as its other arithmetic does (a module whose calls all
        run in xlens's own loops: oneDNN's time is no floor for those)."""
        moved = read_bytes + write_bytes
        text = _text_of(hlo_file)
        memory_ms, pattern, gbps = self.memory_floor(read_bytes, write_bytes, stream)
        module = self.modules.get(hlo_file)
        # `flops`: each call's whole work, the figure an achieved rate is over whichever of a
        # masked product's timings won; `done`: what oneDNN computed in its time (a masked
        # product's kept share where that timed faster), the figure its share of the peak is over.
        library_ms, flops, done, refused = 0.0, 0.0, 0.0, 0
        own_flops = 0.0  # the calls' multiply-adds, counted at the FMA peak without `library`
        if module and not library:
            own_flops = sum(call.get("kept_flops", call.get("flops", 0)) for call in module["calls"])
        elif module:
            for call in module["calls"]:
                if "ms" in call:
                    library_ms += call["ms"]
                    flops += call["flops"]
                    done += call.get("kept_flops", call["flops"])
                else:
                    refused += 1
                    library_ms += call.get("flops", 0) / (self.peak_gflops * 1e9) * 1e3
                    flops += call.get("flops", 0)
                    done += call.get("flops", 0)
        # The rest of the module as oneDNN's primitives (machine_limits' parts: softmax,
        # reductions, weight updates), beside its library calls; the arithmetic floor then counts
        # only the operations no part covers.
        parts = ((module or {}).get("parts") or []) if library_ms > 0 else []
        parts_ms = sum(self.part_floor(p)[0] for p in parts)
        expansions = (module or {}).get("erfc_expansions") or []
        arithmetic_flops, transcendentals = rest_costs(text, parts, expansions)
        arithmetic_ms, timed, arithmetic_flops = self.arithmetic(arithmetic_flops + own_flops,
                                                                 transcendentals)
        if library_ms == 0 and arithmetic_ms > memory_ms:
            elements = max(1, write_bytes // 4)
            if not timed:
                return (arithmetic_ms, f"FMA peak {self.peak_gflops:.0f} GFLOP/s, "
                        f"{arithmetic_flops / elements:.0f}/elt", "GFLOP/s", arithmetic_flops)
            # Achieved: operations per second, a transcendental element one operation, as
            # HloCostAnalysis's flops and transcendentals together.
            label = "FMA + " + " + ".join(f"{f} {count / elements:.3g}/elt"
                                          for f, count in sorted(timed.items())) + (
                ", JAX's erfc as one erf" if expansions else "")
            return arithmetic_ms, label, "Gop/s", arithmetic_flops + sum(timed.values())
        if library_ms > 0 and library_ms + parts_ms + arithmetic_ms > memory_ms:
            # How close oneDNN itself comes to the FMA units' peak, for scale. The arithmetic
            # around the calls (a bias, an activation, a softmax between them) runs beside them
            # on the same units, so it adds to the floor.
            of_peak = 100.0 * done / (self.peak_gflops * 1e9) / (library_ms * 1e-3)
            # A product whose scores a mask discards is timed for the blocks the mask keeps
            # where that was faster (machine_limits: causal attention's q.k), and one whose lhs
            # the mask makes zero for the part of its contraction xlens skips (p@v), and says so.
            kept = [(c["kept_share"], c.get("kept_of")) for c in module["calls"] if "ms" in c and "kept_share" in c]
            # The products alone first (the figure before the parts were counted), then each
            # kind of part's floor, with oneDNN's own time for them where that was slower (the
            # part then held to its bytes or arithmetic) or refused.
            by_kind = {}
            for part in parts:
                floor_ms, onednn_ms = self.part_floor(part)
                held, library = by_kind.get(part["kind"], (0.0, 0.0))
                by_kind[part["kind"]] = (held + floor_ms, library + onednn_ms)
            label = (f"oneDNN {library_ms:.3f} ms" + (f" ({refused} at peak)" if refused else "")
                     + "".join(f", mask keeps {100 * share:.0f}%" + (" of a contraction" if of == "contraction" else "")
                               for share, of in kept)
                     + f", {of_peak:.0f}% pk"
                     + "".join(f" + {kind} {held:.3f}" + (
                         "" if held >= library else " (oneDNN's refused)" if math.isinf(library)
                         else f" (oneDNN's {library:.3f})")
                         for kind, (held, library) in sorted(by_kind.items())))
            return library_ms + parts_ms + arithmetic_ms, label, "GFLOP/s", flops
        return memory_ms, f"{self.level(moved)} {pattern} {gbps:.0f} GB/s", "GB/s", moved


# machine_limits times each library and arithmetic floor as the best of at least its executions
# and of more while they take under 0.2 s in all, up to 50 times as many (BestMs): a short call
# on a busy machine needs many tries to meet a quiet moment. xlens's best in a round is taken by
# the same rule, or the two bests are of different statistics: oneDNN's standalone depthwise
# convolution, its best of 20 runs held to its own floor's best of some 330 as a round held
# xlens's, read a median 80.5% in 236 trials beside other work (36-121%).
FLOOR_SAMPLING_MS = 200.0
FLOOR_SAMPLING_MOST = 50


def executions_to_match_floor(median_ms, done):
    """How many more runs a round of xlens's `done` runs (median `median_ms`) needs for its best
    to be sampled as machine_limits samples a floor: until `FLOOR_SAMPLING_MS` of runs, at most
    `FLOOR_SAMPLING_MOST` times `done` in all; 0 when the round already has that many."""
    if done <= 0 or median_ms <= 0:
        return 0
    wanted = min(-(-FLOOR_SAMPLING_MS // median_ms), FLOOR_SAMPLING_MOST * done)
    return max(0, int(wanted) - done)


def cpu_ticks(stat_text=None, cpus=None):
    """(total, steal) ticks of `cpus` (default: those this process may run on) from /proc/stat's
    text (default: read now): user through steal of each "cpuN" line (guest time is inside user
    and nice already). None where the file or a CPU's line is missing or malformed (not Linux, a
    kernel without the steal column). The C++ reading `xlens run` prints is profiler/steal_time.h."""
    if cpus is None:
        cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if stat_text is None:
        try:
            with open("/proc/stat") as f:
                stat_text = f.read()
        except OSError:
            return None
    found = {}
    for line in stat_text.splitlines():
        fields = line.split()
        if not fields or not re.fullmatch(r"cpu\d+", fields[0]) or int(fields[0][3:]) not in cpus:
            continue
        if len(fields) < 9 or not all(f.isdigit() for f in fields[1:9]):
            return None
        counters = [int(f) for f in fields[1:9]]
        found[int(fields[0][3:])] = (sum(counters), counters[7])
    if not cpus or set(cpus) - set(found):
        return None
    return (sum(t for t, _ in found.values()), sum(s for _, s in found.values()))


def steal_share(spans):
    """The share (0 to 1) of the CPUs' time the host took (steal) over `spans`, pairs of cpu_ticks
    readings (before, after); None where a reading is missing or fewer than 50 ticks (0.5 s of
    one CPU) passed in all. On a virtual machine a workload's median moves with it: on the 2-vCPU
    VM of the README's fourth machine it was 1-33% from one `xlens run` process to the next."""
    total = steal = 0
    for before, after in spans:
        if before is None or after is None or after[0] < before[0] or after[1] < before[1]:
            return None
        total += after[0] - before[0]
        steal += after[1] - before[1]
    return steal / total if total >= 50 else None


# A share of a floor above this is xlens beating a floor it cannot beat (oneDNN's own kernel,
# the FMA units' peak, STREAM's loops): the floor was measured in a busy moment, so the row is
# flagged and left out of the counts at 90%. A row whose calls all run in xlens's own loops and
# beat oneDNN's time is held to its bytes and arithmetic instead (row_shares).
UNRELIABLE_SHARE = 100.0

# The control of `% pair`: the suite's module that is exactly a stream kernel, triad's b + 3c over
# 2 x 64 MiB read and 64 MiB written, paired as every memory-bound row is and held to its own
# triad floor. Its pairs show how widely the pairs of a row at its floor spread (in a quiet run
# 90-97% between the quartiles; beside other work at load 8-12, 28-98% and 39-97%). A row at its
# floor reads 100% give or take that spread, so about half its pairs are over 100%: where a
# quarter of its pairs over 100% flagged a row, chain8, triad, the transpose and Adam, at 94-101%
# by the median pair in every quiet run, were left out as beating their floor. What a row's
# median pair can tell is its distance from 100% against the error of a median of pairs that
# spread so: a row is flagged where its median pair is over 100% by more than twice the
# standard error of such a median (pair_beaten_over: about 101% in the quiet runs, 110-114%
# in the busy ones). Still flagged: the row sum, at 111-117% in quiet runs, 122-177% in the busy
# ones, whose read-only sum floor in the cache is slower than xlens's row reduction. Flagged by the control's upper quartile instead (its spread of single pairs, not of
# a median) the row sum read 122% under a limit of 122% in one busy run.
CONTROL = "triad"


def pair_beaten_over(control):
    """The median pair over which a row beat its floor: UNRELIABLE_SHARE plus twice the standard
    error of a median of as many pairs as `control` (pair_shares of CONTROL) has, spread as its
    pairs are; UNRELIABLE_SHARE alone without a control. A median of n samples of a normal
    spread has the standard error 1.2533 sigma / sqrt(n), and sigma is (q3 - q1) / 1.349. The
    row's median is set against 100%, a constant, so only its own median's error counts."""
    if not control:
        return UNRELIABLE_SHARE
    sigma = (control["q3"] - control["q1"]) / 1.349
    return UNRELIABLE_SHARE + 2 * 1.2533 * sigma / math.sqrt(control["pairs"])


def pair_unreliable(paired, control):
    """Whether a row's pairs (pair_shares) beat their floor beyond what a module at its floor
    reads: its median pair over pair_beaten_over(control)."""
    return bool(paired) and paired["median"] > pair_beaten_over(control)


def row_shares(limits, row, control=None):
    """The summary of one workload's rounds: a dict of `share` (% of the bound by the best run),
    `median_share` (by the median run), `bound_ms` and `label` (the bound behind `share`),
    `kind` ('memory', 'library' or 'arithmetic'), `triad` (% of triad's rate, memory-bound rows
    only, else None) and `unreliable` (share above UNRELIABLE_SHARE).

    `row` holds `hlo_file`, `read_bytes`, `write_bytes`, per round `our_best_rounds` and
    `our_times`, and where measured beside each round `streams` (measure_stream) or `floors`
    (measure_floors). The run's best floor is the better of every measurement the run made:
    `limits` (the measurements before and after the workloads) and every floor and stream
    measured beside any of the rounds. Each round is held to the stricter (shorter) of the floor
    measured beside it and that best, so a floor is never looser than what the run measured: a
    oneDNN call that took 0.5 ms beside one round holds every round to 0.5 ms, though it took
    2 ms beside the others. Every share is the median over the rounds of that round's share (the
    lower middle one where the rounds are even), and the bound printed is that very round's.

    `pair` (memory-bound rows whose rounds all have `pairs`, measure_pairs results, else None)
    answers another question: does xlens move bytes as fast as the stream kernels in the same
    moment? The median over every pair of the rounds of the pair's share (pair_shares: one run of
    the module, then one pass of each kernel over its bytes, in one process), with `pair_quartiles`
    and `pair_best_of_each` beside it. A shared machine's memory has slow and fast phases (STREAM
    copy 50-89 GB/s from one minute to the next), so `share` partly reads the phase; `pair`
    cannot, and is reported beside it, never in its place. A `pair` over UNRELIABLE_SHARE by more
    than the error of a median of pairs spread as those of `control` (the pair_shares of CONTROL,
    a module at its floor; pair_beaten_over) is the module beating the kernels in their own
    moment: `pair_unreliable`."""
    hlo, read, write = row["hlo_file"], row["read_bytes"], row["write_bytes"]
    moved = read + write
    rounds = len(row["our_best_rounds"])
    streams = row.get("streams") or [None] * rounds
    floors = row.get("floors") or [None] * rounds
    best = limits.data
    for floor in floors:
        if floor:
            best = better(best, floor)
    best = Limits(best) if best is not limits.data else limits
    # The streams beside the rounds were measured over this very working set: the best of them
    # and of the sweep's figure there is what the run measured for each kernel.
    measured = [s for s in streams if s]
    run_stream = {f"{p}_gbps": max([best.bandwidth(moved, p)] + [s[f"{p}_gbps"] for s in measured])
                  for p in ("copy", "triad", "read")} if measured else None
    def held_to(library):
        """Each round's bound (the stricter of the floor beside it and the run's best) and share."""
        run_bound = best.bound(hlo, read, write, run_stream, library)
        per_round = []
        for stream, floor in zip(streams, floors):
            held = (Limits(beside(limits.data, floor)) if floor else limits).bound(
                hlo, read, write, stream, library)
            # The shorter bound holds; the label says `beside` where the round's own measurement did.
            per_round.append((held[0], held[1] + " beside", *held[2:])
                             if (stream or floor) and held[0] <= run_bound[0] else run_bound)
        return per_round, [100.0 * b[0] / best_ms for b, best_ms in zip(per_round, row["our_best_rounds"])]

    per_round, shares = held_to(library=True)
    # A module whose library calls all run in xlens's own loops and beat oneDNN's time is held to
    # its bytes and its arithmetic (the calls' multiply-adds at the FMA peak) instead: oneDNN's
    # time is no floor for them (the depthwise convolution read 156% of it where its bytes read
    # 39%). Loops that do not beat it (the MNIST step's small products) stay held to it.
    own_loops_beat_library = (bool(row.get("own_kernels")) and
                              statistics.median_low(shares) > UNRELIABLE_SHARE)
    if own_loops_beat_library:
        per_round, shares = held_to(library=False)
    share = statistics.median_low(shares)
    chosen = shares.index(share)
    bound_ms, label, unit, work = per_round[chosen]
    kind = ("library" if label.startswith("oneDNN") else
            "arithmetic" if label.startswith("FMA") else "memory")
    median_share = statistics.median_low(
        100.0 * b[0] / t for b, t in zip(per_round, row["our_times"]))
    triad = None
    if kind == "memory":
        run_triad = best.triad_ms(read, write, run_stream)
        triad = statistics.median_low(
            100.0 * min(limits.triad_ms(read, write, stream) if stream else float("inf"),
                        run_triad) / best_ms
            for stream, best_ms in zip(streams, row["our_best_rounds"]))
    pairs = row.get("pairs") or []
    paired = None
    if kind == "memory" and len(pairs) == rounds and all(p and p.get("kernels") for p in pairs):
        paired = pair_shares(limits, read, write, pairs)
    elif kind == "library" and len(pairs) == rounds and all(
            p and (p.get("floors") or {}).get("library") for p in pairs):
        # The arithmetic around the calls at the run's best rates, the strictest the run measured.
        # Beside the calls each pair times: the parts' floors and the arithmetic they leave.
        parts = (best.modules.get(hlo) or {}).get("parts") or []
        expansions = (best.modules.get(hlo) or {}).get("erfc_expansions") or []
        paired = library_pair_shares(pairs, best.arithmetic(*rest_costs(_text_of(hlo), parts,
                                                                        expansions))[0]
                                     + sum(best.part_floor(p)[0] for p in parts))
        # No control is paired for library calls: a median pair over 100% is flagged.
        control = None
    return dict(share=share, median_share=median_share, bound_ms=bound_ms, label=label,
                unit=unit, work=work, kind=kind, triad=triad,
                pair=paired["median"] if paired else None,
                pair_quartiles=(paired["q1"], paired["q3"]) if paired else None,
                pair_best_of_each=paired["best_of_each"] if paired else None,
                pair_unreliable=pair_unreliable(paired, control),
                unreliable=share > UNRELIABLE_SHARE, own_loops_beat_library=own_loops_beat_library)


def kind_counts(summaries, kind, key="share"):
    """(at 90% or more, rows of the kind, median share, rows left out as unreliable, rows left out
    without a figure) over the summaries (row_shares) of one kind, by `key` ('share',
    'median_share', 'triad' or 'pair'). A row whose own `key` is above UNRELIABLE_SHARE beat
    its floor: it counts neither way, nor in the median, but stays in the rows of the kind, so
    that "N of M" is always out of all of them; by `pair`, a row whose median pair is over
    UNRELIABLE_SHARE within the spread of the control's pairs (`pair_unreliable` false) is at
    its floor, and counts at its median pair. A
    row's `triad` is judged by itself: a row that beat its mix-matched bound may still fall short
    of triad's rate, which the work item's criterion names. Its `median_share` is not: it is held
    to the same floor as its best run, so where the best run beat that floor (`unreliable`), the
    floor is wrong for the median too. A row without a figure for `key` (None: no pairs were
    measured beside its rounds, say) stays in the rows of the kind as well and counts as left out
    without a figure."""
    rows = [s for s in summaries if s["kind"] == kind]
    measured = [s for s in rows if s[key] is not None]
    # A row within the limit over 100% by the median pair is at its floor: 100% in the median.
    kept = [min(s[key], UNRELIABLE_SHARE) if key == "pair" else s[key] for s in measured
            if (not s.get("pair_unreliable") if key == "pair" else
                s[key] <= UNRELIABLE_SHARE)
            and not (key == "median_share" and s["unreliable"])]
    return (sum(v >= 90 for v in kept), len(rows),
            statistics.median(kept) if kept else None, len(measured) - len(kept),
            len(rows) - len(measured))

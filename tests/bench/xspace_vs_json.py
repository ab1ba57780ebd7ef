#!/usr/bin/env python3
"""Loading a 1,000,000-event XSpace against the same events as JSON: time and peak memory.

Writes one profile twice, as jax.profiler would: an XSpace (*.xplane.pb; 8 threads of XLA CPU
thunks, 500 kernel names, each event with hlo_op and hlo_module stats by reference, as XLA stores
repeated strings) and the JSON its converter writes from it (the same events with the same args,
ending in "{}"), plain and gzip. Then reads each with `xlens trace summary` (streaming, without
args) and, when built, with the viewer's loader (viewer_trace_bench 0 FILE: every event kept, with
args), best of --repeat runs, and prints seconds, peak RSS and the XSpace/JSON ratios.

  python3 tests/bench/xspace_vs_json.py [--xlens build/compiler/cli/xlens] [--events 1000000]
                                        [--viewer-bench build/tests/bench/viewer_trace_bench]
Run by hand (not CI); the inputs are made once under out/bench/xspace/.
"""
import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import time


# The protobuf wire writers the hardening cases craft XSpace files with.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hardening"))
from profile_cases import _int as num, _len as length  # noqa: E402


def make(directory, events):
    xspace = os.path.join(directory, f"bench_{events}.xplane.pb")
    js = os.path.join(directory, f"bench_{events}.trace.json")
    if os.path.exists(xspace) and os.path.exists(js) and os.path.exists(js + ".gz"):
        return xspace, js
    rng = random.Random(1)
    names = [f"fusion.{i}" for i in range(400)] + [f"dot.{i}" for i in range(100)]
    modules = ["jit_train_step", "jit_eval_step"]
    threads = 8
    base_ns = 1_700_000_000_000_000_000
    # Stat metadata: 1 hlo_op, 2 hlo_module; then one entry per string, referred to by ref_value.
    strings = {s: 3 + i for i, s in enumerate(names + modules)}
    lines = [[] for _ in range(threads)]
    clock = [0] * threads
    json_events = []
    for i in range(events):
        t = i % threads
        k = rng.randrange(len(names))
        name, module = names[k], modules[k % 2]
        offset_ps = clock[t] + rng.randrange(100_000, 2_000_000)
        duration_ps = rng.randrange(1_000_000, 30_000_000)
        clock[t] = offset_ps + duration_ps
        lines[t].append(length(4, num(1, 1 + k) + num(2, offset_ps) + num(3, duration_ps) +
                               length(4, num(1, 1) + num(7, strings[name])) +
                               length(4, num(1, 2) + num(7, strings[module]))))
        json_events.append((t, offset_ps, duration_ps, name, module))
    plane = num(1, 0) + length(2, "/host:CPU")
    for t in range(threads):
        plane += length(3, num(1, 100 + t) + length(2, f"tf_XLAPjRtCpuClient/{t}") + num(3, base_ns) +
                        b"".join(lines[t]))
    for k, name in enumerate(names):
        plane += length(4, num(1, 1 + k) + length(2, num(1, 1 + k) + length(2, name)))
    stat_names = {"hlo_op": 1, "hlo_module": 2, **strings}
    for s, i in stat_names.items():
        plane += length(5, num(1, i) + length(2, num(1, i) + length(2, s)))
    with open(xspace, "wb") as f:
        f.write(length(1, plane) + length(4, "bench"))
    with open(js, "w") as f:
        f.write('{"displayTimeUnit":"ns","metadata":{"highres-ticks":true},"traceEvents":[\n')
        f.write('{"ph":"M","pid":1,"name":"process_name","args":{"name":"/host:CPU"}},\n')
        for t in range(threads):
            f.write(f'{{"ph":"M","pid":1,"tid":{100 + t},"name":"thread_name",'
                    f'"args":{{"name":"tf_XLAPjRtCpuClient/{t}"}}}},\n')
        for t, offset_ps, duration_ps, name, module in json_events:
            f.write(f'{{"ph":"X","pid":1,"tid":{100 + t},"ts":{offset_ps / 1e6:.6f},"dur":{duration_ps / 1e6:.6f},'
                    f'"name":"{name}","args":{{"hlo_module":"{module}","hlo_op":"{name}"}}}},\n')
        f.write("{}]}\n")
    with open(js, "rb") as src, gzip.open(js + ".gz", "wb", compresslevel=6) as dst:
        dst.write(src.read())
    return xspace, js


def run(command, repeat):
    best_s, best_rss, out = None, None, ""
    for _ in range(repeat):
        # /usr/bin/time is not everywhere: the peak RSS comes from a wrapper that waits for the child.
        wrapper = [sys.executable, "-c",
                   "import os,resource,subprocess,sys,time;t=time.perf_counter();"
                   "p=subprocess.run(sys.argv[1:],capture_output=True);"
                   "s=time.perf_counter()-t;"
                   "r=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
                   "sys.stdout.write(p.stdout.decode());sys.stderr.write(p.stderr.decode());"
                   "print(f'@@ {s} {r}');sys.exit(p.returncode)"] + command
        proc = subprocess.run(wrapper, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {proc.stderr[-500:]}")
        m = re.search(r"@@ ([\d.]+) (\d+)", proc.stdout)
        seconds, rss_mb = float(m.group(1)), int(m.group(2)) / 1024
        best_s = seconds if best_s is None else min(best_s, seconds)
        best_rss = rss_mb if best_rss is None else min(best_rss, rss_mb)
        out = proc.stdout
    return best_s, best_rss, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xlens", default="build/compiler/cli/xlens")
    parser.add_argument("--viewer-bench", default="build/tests/bench/viewer_trace_bench")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    directory = "out/bench/xspace"
    os.makedirs(directory, exist_ok=True)
    xspace, js = make(directory, args.events)
    files = [("XSpace", xspace), ("JSON", js), ("JSON.gz", js + ".gz")]
    results = {}
    print(f"{args.events} events; file sizes: " +
          ", ".join(f"{label} {os.path.getsize(path) / 1e6:.1f} MB" for label, path in files))
    for label, path in files:
        s, rss, out = run([args.xlens, "trace", "summary", path], args.repeat)
        count = re.match(r"(\d+) events", out).group(1)
        results[("summary", label)] = (s, rss)
        print(f"trace summary  {label:8} {s:7.3f} s  {rss:8.1f} MB peak  ({count} events)")
    if os.path.exists(args.viewer_bench):
        for label, path in files:
            env_cmd = ["env", "QT_QPA_PLATFORM=offscreen", args.viewer_bench, "0", path]
            s, rss, out = run(env_cmd, 1)
            load = re.search(r"load[^\n]*?([\d.]+) s", out)
            results[("viewer", label)] = (float(load.group(1)) if load else s, rss)
            print(f"viewer load    {label:8} {results[('viewer', label)][0]:7.3f} s  {rss:8.1f} MB peak")
    for tool in ("summary", "viewer"):
        if (tool, "XSpace") not in results:
            continue
        xs, xr = results[(tool, "XSpace")]
        for label in ("JSON", "JSON.gz"):
            s, r = results[(tool, label)]
            print(f"{tool}: XSpace/{label}: time {xs / s:.2f}x, peak memory {xr / r:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

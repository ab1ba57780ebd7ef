#!/usr/bin/env python3
"""A sweep of hostile inputs over every reader and writer of the xlens command line.

    python3 tests/hardening/sweep.py --xlens PATH [--viewer PATH] [--quick] [--only READER]
                                     [--case GLOB] [--json OUT] [--keep] [--jobs N]

Crafts every input itself in a fresh temporary directory (nothing is written outside it; each
case runs with its current directory, TMPDIR and HOME inside its own scratch directory), runs
xlens on each (or, for the viewer's cases, xlens-viewer, headless; skipped without --viewer) under
a wall-clock and an address-space limit, and classifies what happened:

  clean         exit 0, or exit 1 with one line on stderr that starts with "xlens" and names
                the file or flag at fault
  crash         killed by a signal (abort, segfault) or an exit status above 1
  hang          still running at the wall-clock limit
  memory        failed to allocate (or said "out of memory") where it should have refused
                up front, or a peak RSS over the limit or over the case's budget for its
                input's size
  lost-data     an output that should exist is missing, or a file it found was damaged
  wrong-result  a known answer differs, valid input was refused, or bad input was accepted
  fs-touched    a file outside the case's declared outputs changed (a device replaced by a
                regular file, a symlink replaced, a temporary left behind)
  bad-message   exit 1 with an empty, multi-line, unescaped, cut or anonymous message

The full sweep always exits 0: it is a measuring instrument. --quick runs the fast subset that
CTest runs as `hostile_inputs`, and exits 1 if any case there is not clean, unless the case is in
ALLOWED below with its reason.
"""

import argparse
import collections
import fnmatch
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cases as catalogue  # noqa: E402
import craft  # noqa: E402
import harness  # noqa: E402

# Quick cases allowed not to be clean, each with why: findings of the issue whose fixes are not
# in this tree yet. The sweep notes an entry that has become clean; remove it then.
_EVALUATOR = "shapes/evaluator/codegen: "
_DUMP = "dump directory: "
_TRACE = "trace reader: "
_FILES = "file I/O: "
ALLOWED = {
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--xlens", required=True, help="the xlens binary to sweep")
    p.add_argument("--viewer", help="the xlens-viewer binary, for the viewer's cases (skipped without it)")
    p.add_argument("--quick", action="store_true", help="the fast subset; exit 1 on a finding")
    p.add_argument("--only", action="append", default=[],
                   help="only this reader (hlo-text, module-path, npy, outputs, output-path, flags, graphdef, "
                        "dump, trace, cli); repeatable")
    p.add_argument("--case", action="append", default=[], help="only cases whose id matches this glob")
    p.add_argument("--json", help="write every case's outcome here")
    p.add_argument("--keep", action="store_true", help="keep the scratch directories (and say where)")
    p.add_argument("--timeout", type=float, help="wall-clock limit per case, seconds "
                   "(default 20, 10 with --quick)")
    p.add_argument("--memory-limit-mb", type=int, default=4096,
                   help="address-space limit per process (0: none, e.g. for sanitizer builds)")
    p.add_argument("--rss-limit-mb", type=int, default=3072, help="peak RSS above this is a finding")
    p.add_argument("--jobs", type=int, default=1, help="cases to run at once")
    p.add_argument("-v", "--verbose", action="store_true", help="print every case as it ends")
    return p.parse_args()


def sanitized(binary):
    """Whether `binary` carries AddressSanitizer's runtime (its init symbol is in the file)."""
    needle = b"__asan_init"
    with open(binary, "rb") as f:
        tail = b""
        while True:
            block = f.read(8 << 20)
            if not block:
                return False
            if needle in tail + block:
                return True
            tail = block[-len(needle):]


def select(all_cases, args):
    chosen = []
    for case in all_cases:
        if args.quick and not case.quick:
            continue
        if args.only and case.reader not in args.only:
            continue
        if args.case and not any(fnmatch.fnmatchcase(case.id, g) for g in args.case):
            continue
        chosen.append(case)
    return chosen


def repro(case, run, xlens, base=None):
    def short(arg):
        arg = str(arg)
        if base:
            arg = arg.replace(os.path.join(base, case.id.replace("/", "__")), "<scratch>")
        return arg if len(arg) <= 80 else arg[:40] + f"...<{len(arg)} chars>"
    env = " ".join(f"{k}={shlex.quote(short(v))}" for k, v in sorted(run.env.items())
                   if k not in ("HOME", "TMPDIR"))
    program = run.argv[0] if case.program != "xlens" else xlens
    cmd = " ".join(shlex.quote(short(a)) for a in [program] + run.argv[1:])
    return (env + " " if env else "") + cmd


def run_one(case, args, base, shared):
    slug = case.id.replace("/", "__")
    root = os.path.join(base, slug)
    if case.root_skip:
        return harness.Outcome(case, "skipped", case.root_skip, [], 0.0)
    if case.program == "viewer" and not args.viewer:
        return harness.Outcome(case, "skipped", "runs xlens-viewer; no --viewer given", [], 0.0)
    t0 = time.monotonic()
    try:
        runs, ctx, before, after = harness.run_case(case, args.xlens, root, shared,
                                                    args.memory_limit_mb << 20, args.timeout,
                                                    viewer=args.viewer)
        category, detail = harness.classify(case, runs, ctx, before, after, args.rss_limit_mb << 10)
        inputs = harness.input_bytes(before["work"])
    except craft.CannotCraft as e:
        return harness.Outcome(case, "skipped", str(e), [], time.monotonic() - t0)
    except OSError as e:  # the case itself cannot be run here (e.g. an argument list too long)
        return harness.Outcome(case, "skipped", f"cannot run the case here: {e}", [], time.monotonic() - t0)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return harness.Outcome(case, category, detail, runs, time.monotonic() - t0, inputs)


def table(outcomes, key):
    counts = collections.defaultdict(collections.Counter)
    for o in outcomes:
        counts[key(o)][o.category] += 1
    cats = [c for c in harness.CATEGORIES if any(counts[k][c] for k in counts)]
    width = max([len(k) for k in counts] + [8])
    lines = ["  " + "".ljust(width) + "".join(f"{c:>14}" for c in cats) + f"{'total':>8}"]
    for k in sorted(counts):
        lines.append("  " + k.ljust(width) + "".join(f"{counts[k][c]:>14}" for c in cats)
                     + f"{sum(counts[k].values()):>8}")
    total = collections.Counter(o.category for o in outcomes)
    lines.append("  " + "all".ljust(width) + "".join(f"{total[c]:>14}" for c in cats)
                 + f"{len(outcomes):>8}")
    return "\n".join(lines)


def main():
    # A terminated sweep still removes its scratch directory and the processes it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = parse_args()
    args.xlens = os.path.abspath(args.xlens)
    if args.viewer:
        args.viewer = os.path.abspath(args.viewer)
        if not os.access(args.viewer, os.X_OK):
            print(f"sweep: {args.viewer} is not an executable", file=sys.stderr)
            return 2
    if args.timeout is None:
        args.timeout = 10 if args.quick else 20
    if sanitized(args.xlens):
        # AddressSanitizer reserves terabytes of address space for its shadow memory, and its
        # allocator's overhead inflates RSS: lift the one limit and widen the other.
        print("sweep: the binary is built with AddressSanitizer: no address-space limit, RSS limit x4")
        args.memory_limit_mb = 0
        args.rss_limit_mb *= 4
        args.timeout *= 3
    if not os.access(args.xlens, os.X_OK):
        print(f"sweep: {args.xlens} is not an executable", file=sys.stderr)
        return 2
    base = tempfile.mkdtemp(prefix="xlens-sweep-")
    shared = os.path.join(base, "_shared")
    os.mkdir(shared)
    root_user = os.geteuid() == 0
    chosen = select(catalogue.all_cases(shared, root_user), args)
    if not chosen:
        print("sweep: no case matches", file=sys.stderr)
        return 2
    started = time.time()
    t0 = time.monotonic()
    outcomes = []
    try:
        if args.jobs > 1:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(args.jobs) as pool:
                outcomes = list(pool.map(lambda c: run_one(c, args, base, shared), chosen))
        else:
            for case in chosen:
                outcome = run_one(case, args, base, shared)
                if args.verbose:
                    print(f"{outcome.category:>12} {outcome.seconds:6.2f}s {case.id} {outcome.detail}",
                          flush=True)
                outcomes.append(outcome)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    elapsed = time.monotonic() - t0

    mode = "quick" if args.quick else "full"
    print(f"xlens hostile-input sweep ({mode}): {len(outcomes)} cases in {elapsed:.1f} s, {args.xlens}")
    print("\nBy category:")
    for c in harness.CATEGORIES:
        n = sum(o.category == c for o in outcomes)
        if n:
            print(f"  {c:<14}{n:>5}")
    print("\nBy reader:")
    print(table(outcomes, lambda o: o.case.reader))

    findings = [o for o in outcomes if o.category not in ("clean", "skipped")]
    if findings:
        print(f"\nFindings ({len(findings)}):")
        for o in findings:
            allowed = "  [allowed: " + ALLOWED[o.case.id] + "]" if o.case.id in ALLOWED else ""
            print(f"  {o.category:<13} {o.case.id}: {o.detail}{allowed}")
            print(f"      {repro(o.case, o.runs[0], args.xlens, base)}")
            print(f"      rerun: python3 {sys.argv[0]} --xlens {args.xlens} --case '{o.case.id}' --keep")
    skipped = [o for o in outcomes if o.category == "skipped"]
    for o in skipped:
        print(f"  skipped      {o.case.id}: {o.detail}")
    if args.keep:
        print(f"\nscratch directories kept under {base}")

    if args.json:
        report = {
            "xlens": args.xlens, "mode": mode, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(elapsed, 1), "timeout_s": args.timeout, "memory_limit_mb": args.memory_limit_mb,
            "counts": {c: sum(o.category == c for o in outcomes) for c in harness.CATEGORIES},
            "by_reader": {r: dict(collections.Counter(o.category for o in outcomes if o.case.reader == r))
                          for r in sorted({o.case.reader for o in outcomes})},
            "cases": [{
                "id": o.case.id, "reader": o.case.reader, "category": o.category, "detail": o.detail,
                "exit": o.runs[0].exit_code if o.runs else None,
                "signal": o.runs[0].signal if o.runs else None,
                "seconds": round(o.seconds, 3),
                "max_rss_mb": max(r.max_rss_kb for r in o.runs) // 1024 if o.runs else 0,
                "input_bytes": o.input_bytes,
                "stderr": harness.first_line(o.runs[0].stderr, 300) if o.runs else "",
                "command": repro(o.case, o.runs[0], "xlens", base) if o.runs else "",
            } for o in outcomes],
        }
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")

    if args.quick:
        failing = [o for o in findings if o.case.id not in ALLOWED]
        stale = [i for i in ALLOWED if any(o.case.id == i and o.category == "clean" for o in outcomes)]
        for i in stale:
            print(f"note: {i} is clean now: remove it from ALLOWED")
        if failing:
            print(f"\nFAILED: {len(failing)} quick case(s) not clean")
            return 1
        print("\nOK: every quick case is clean" + (f" ({len(findings)} allowed)" if findings else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What a stack-frame table costs the parser: a 100k-instruction module with and without one.

Writes the module tests/bench/parse_vs_xla.py times, once as it is and once as jaxlib writes it
today: a stack-frame table after the HloModule line (FileNames, FunctionNames, FileLocations,
StackFrames; FRAMES frames, each with its own file location, chained to a parent so that stacks
are several frames deep) and `stack_frame_id=N` in every instruction's metadata. Times
`xlens verify` and `xlens print` on both in alternating rounds and prints the medians and the
ratio (with table / without), and XLA's own parser on both where jaxlib is installed.
Usage: tests/bench/stack_frames_parse.py --xlens build/compiler/cli/xlens
           [--instructions 100000] [--frames 100000] [--rounds 5]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parse_vs_xla import make_module  # noqa: E402


def frame_table(frames, files=50, functions=500):
    lines = ["FileNames"]
    lines += [f'{i} "/home/user/project/model_{i}.py"' for i in range(1, files + 1)]
    lines += ["", "FunctionNames"]
    lines += [f'{i} "layer_{i}"' for i in range(1, functions + 1)]
    lines += ["", "FileLocations"]
    for i in range(1, frames + 1):
        line = 10 + i % 900
        lines.append(f"{i} {{file_name_id={1 + i % files} function_name_id={1 + i % functions} "
                     f"line={line} end_line={line} column={1 + i % 60} end_column={61 + i % 60}}}")
    lines += ["", "StackFrames"]
    for i in range(1, frames + 1):
        # Parents point backwards (ids below this one), so stacks are chains of up to 8 frames.
        # XLA writes the parent's id plus one, 1 for a frame without a parent.
        parent = i - 1 if i % 8 else 0
        lines.append(f"{i} {{file_location_id={i} parent_frame_id={parent + 1}}}")
    return "\n".join(lines) + "\n"


def with_frames(text, frames):
    head, rest = text.split("\n", 1)
    counter = [0]

    def add_id(match):
        counter[0] += 1
        return match.group(1) + f" stack_frame_id={1 + counter[0] % frames}}}"

    rest = re.sub(r'(metadata=\{[^}]*)\}', add_id, rest)
    return head + "\n\n" + frame_table(frames) + "\n" + rest


def time_command(argv):
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--xlens", required=True)
    p.add_argument("--instructions", type=int, default=100000)
    p.add_argument("--frames", type=int, default=100000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()

    plain = make_module(args.instructions)
    framed = with_frames(plain, args.frames)
    with tempfile.TemporaryDirectory() as d:
        files = {"without": os.path.join(d, "plain.hlo"), "with": os.path.join(d, "framed.hlo")}
        for name, text in (("without", plain), ("with", framed)):
            with open(files[name], "w") as f:
                f.write(text)
        print(f"{args.instructions} instructions; table of {args.frames} frames; "
              f"{os.path.getsize(files['without']) / 1e6:.1f} MB without, "
              f"{os.path.getsize(files['with']) / 1e6:.1f} MB with")
        for command in ("verify", "print"):
            times = {"without": [], "with": []}
            for _ in range(args.rounds):
                for name in ("without", "with"):
                    times[name].append(time_command([args.xlens, command, files[name]]))
            ratios = [w / o for w, o in zip(times["with"], times["without"])]
            print(f"xlens {command:6}: without {statistics.median(times['without']) * 1e3:8.1f} ms, "
                  f"with {statistics.median(times['with']) * 1e3:8.1f} ms, ratio "
                  f"{statistics.median(ratios):.2f} (rounds {min(ratios):.2f}-{max(ratios):.2f})")
        try:
            from jaxlib import _hlo as xla_hlo
            parse = xla_hlo.hlo_module_from_text
        except Exception as e:  # noqa: BLE001 (any failure means: no XLA parser here)
            print(f"XLA's parser: not available ({e})")
            return 0
        for name in ("without", "with"):
            text = open(files[name]).read()
            start = time.perf_counter()
            parse(text)
            print(f"XLA's parser, {name:7}: {(time.perf_counter() - start) * 1e3:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

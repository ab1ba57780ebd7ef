#!/usr/bin/env python3
"""The ops TensorFlow's XLA bridge compiles on the CPU (its XLA_CPU_JIT kernels), as a C++ table.

`xlens cluster` says in its own words when it leaves out an op that TensorFlow would have
compiled (xlens lacks its lowering) and in TensorFlow's words when TensorFlow could not compile it
either. Which is which comes from compiler/cluster/tensorflow_xla_ops.inc, which this script
writes from the installed TensorFlow:

    python3 tests/cluster/tensorflow_xla_ops.py --write compiler/cluster/tensorflow_xla_ops.inc

With --check FILE (how CTest runs it) it exits 1 when FILE is not what the installed TensorFlow
gives, 77 (skipped) without TensorFlow.

TensorFlow registers the XLA_CPU_JIT kernels when it first builds an XLA device, so one
jit_compile function runs before the kernel registry is read.
"""
import argparse
import os
import sys

SKIP = 77


def xla_cpu_ops():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    from tensorflow.python.framework import kernels
    tf.function(lambda x: x * 2, jit_compile=True)(tf.ones(2))
    ops = {k.op for k in kernels.get_all_registered_kernels().kernel if k.device_type == "XLA_CPU_JIT"}
    return tf.__version__, sorted(ops)


def table(version, ops):
    lines = [f"// The ops TensorFlow {version} compiles for XLA_CPU_JIT, one per line, sorted.",
             "// Written by tests/cluster/tensorflow_xla_ops.py; do not edit."]
    lines += [f'"{op}",' for op in ops]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write")
    group.add_argument("--check")
    args = parser.parse_args()
    try:
        version, ops = xla_cpu_ops()
    except ImportError as e:
        print(f"SKIPPED: TensorFlow cannot be imported ({e})")
        return SKIP
    text = table(version, ops)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {len(ops)} ops of TensorFlow {version} to {args.write}")
        return 0
    with open(args.check, encoding="utf-8") as f:
        current = f.read()
    if current != text:
        have = set(l.strip('",') for l in current.splitlines() if l.startswith('"'))
        print(f"{args.check} is not TensorFlow {version}'s list: {len(set(ops) - have)} ops missing "
              f"(e.g. {sorted(set(ops) - have)[:5]}), {len(have - set(ops))} extra "
              f"(e.g. {sorted(have - set(ops))[:5]}); rewrite it with --write")
        return 1
    print(f"{args.check}: TensorFlow {version}'s {len(ops)} XLA_CPU_JIT ops")
    return 0


if __name__ == "__main__":
    sys.exit(main())

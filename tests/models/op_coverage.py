#!/usr/bin/env python3
"""The ops of the model corpus (tests/models/make_model_corpus.py) against xlens and TensorFlow:
for every op a model's frozen graph or function graph uses, whether xlens has its executor
kernel, its XLA lowering and its gradient, beside whether TensorFlow 2.21 compiles it for
XLA_CPU_JIT and has a gradient for it. The README holds the table between
<!-- op-coverage:begin --> and <!-- op-coverage:end -->.

    op_coverage.py --xlens XLENS --corpus DIR --write README.md   # rewrite the README's table
    op_coverage.py --xlens XLENS --corpus DIR --check README.md   # exit 1 if it is out of date

An op is covered when xlens runs it op by op, lowers it exactly when TensorFlow compiles it (so
the clustering is TensorFlow's), and builds its gradient where TensorFlow has one and a model's
forward pass uses it (second derivatives of the gradient ops are not asked for). --check also
fails on any op that is not covered. Exits 77 (skipped) without TensorFlow."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
BEGIN, END = "<!-- op-coverage:begin -->", "<!-- op-coverage:end -->"
# Ops that are the graph's own plumbing (arguments, constants, calls): listed, never differentiated.
STRUCTURAL = {"_Arg", "_Retval", "Placeholder", "Const", "NoOp", "Identity", "IdentityN",
              "StatefulPartitionedCall", "PartitionedCall", "VarHandleOp", "ReadVariableOp",
              # TF1 control flow: a lowered loop's gradient is built for the loop as a whole
              # (TensorFlow's control_flow_grad), never op by op.
              "Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"}


# Gaps the table shows and the check knows about, each with why; an op leaves this list when
# it is covered (the check fails on a listed op that no longer needs to be here).
KNOWN_GAPS = {}


def corpus_ops(corpus):
    """op -> the models using it, and the ops of inference models (a model's forward pass: the
    ops whose gradient training it needs; the training steps' own gradient ops are not
    differentiated again)."""
    uses, forward = {}, set()
    for name in sorted(os.listdir(corpus)):
        meta_path = os.path.join(corpus, name, "meta.json")
        if not os.path.exists(meta_path):
            continue
        with open(meta_path) as f:
            meta = json.load(f)
        for ops in meta["ops"].values():
            for op in ops:
                uses.setdefault(op, set()).add(name)
                if meta["kind"] == "inference":
                    forward.add(op)
    return uses, forward


def tensorflow_gradient(ops_module, op):
    try:
        return "yes" if ops_module._gradient_registry.lookup(op) is not None else "none"
    except LookupError:
        return "-"


def table(xlens, corpus):
    from tensorflow.python.framework import ops as tf_ops
    uses, forward = corpus_ops(corpus)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ops.json")
        subprocess.run([xlens, "graph", "ops", *sorted(uses), "--json", out], check=True)
        with open(out) as f:
            rows = {r["op"]: r for r in json.load(f)}
    lines = ["| op | used by | executor | lowering | TensorFlow compiles | gradient | "
             "TensorFlow's gradient |", "|---|---|---|---|---|---|---|"]
    gaps = []
    for op in sorted(uses):
        r = rows[op]
        tf_grad = tensorflow_gradient(tf_ops, op)
        models = sorted(uses[op])
        used = ", ".join(models) if len(models) <= 3 else f"{len(models)} models"
        mark = lambda b: "yes" if b else "**no**"
        lowering_ok = r["lowering"] == r["tensorflow_xla"]
        gradient_needed = tf_grad == "yes" and op in forward and op not in STRUCTURAL
        gradient_ok = r["gradient"] or not gradient_needed
        lines.append(f"| `{op}` | {used} | {mark(r['kernel'])} | "
                     f"{'yes' if r['lowering'] else ('-' if lowering_ok else '**no**')} | "
                     f"{'yes' if r['tensorflow_xla'] else '-'} | "
                     f"{'yes' if r['gradient'] else ('-' if gradient_ok else '**no**')} | "
                     f"{tf_grad} |")
        if not (r["kernel"] and lowering_ok and gradient_ok):
            gaps.append(op)
    summary = (f"{len(uses)} ops over {len({m for s in uses.values() for m in s})} models; "
               f"{len(uses) - len(gaps)} covered in all three places")
    return "\n".join([summary, "", *lines]), gaps


def check(xlens, corpus, readme_path):
    """Whether README's table is the corpus's and every op is covered: (failed, the lines to
    print, the last of them the summary). model_corpus_test.py calls this in its own process,
    where TensorFlow is already imported (a process of its own imported it again: 5.2 s of CPU
    against 0.1 s for the table)."""
    text, gaps = table(xlens, corpus)
    with open(readme_path) as f:
        readme = f.read()
    if BEGIN not in readme or END not in readme:
        return True, [f"{readme_path}: no {BEGIN} ... {END} section"]
    lines = []
    failed = False
    if updated_readme(readme, text) != readme:
        lines.append(f"{readme_path}: the op table is out of date; rewrite it with "
                     f"tests/models/op_coverage.py --write {readme_path}")
        failed = True
    unknown_gaps = [op for op in gaps if op not in KNOWN_GAPS]
    closed_gaps = [op for op in KNOWN_GAPS if op not in gaps]
    for op in gaps:
        if op in KNOWN_GAPS:
            lines.append(f"known gap: {op}: {KNOWN_GAPS[op]}")
    if unknown_gaps:
        lines.append(f"ops not covered: {', '.join(unknown_gaps)}")
        failed = True
    if closed_gaps:
        lines.append(f"covered now, take out of KNOWN_GAPS: {', '.join(closed_gaps)}")
        failed = True
    lines.append(text.splitlines()[0])
    return failed, lines


def updated_readme(readme, text):
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{text}\n{END}{tail}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--corpus", required=True)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write")
    group.add_argument("--check")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import tensorflow  # noqa: F401
    except Exception as e:  # noqa: BLE001
        print(f"skipped: tensorflow is not importable ({type(e).__name__}: {e})")
        return SKIP
    if args.check:
        failed, lines = check(args.xlens, args.corpus, args.check)
        print("\n".join(lines))
        return 1 if failed else 0
    text, _ = table(args.xlens, args.corpus)
    with open(args.write) as f:
        readme = f.read()
    if BEGIN not in readme or END not in readme:
        print(f"{args.write}: no {BEGIN} ... {END} section")
        return 1
    with open(args.write, "w") as f:
        f.write(updated_readme(readme, text))
    print(text.splitlines()[0])
    return 0

if __name__ == "__main__":
    sys.exit(main())

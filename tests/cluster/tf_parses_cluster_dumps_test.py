#!/usr/bin/env python3
"""TensorFlow reads the clustering dumps xlens writes: for every graph TensorFlow clustered in
the corpus (tf_dump/before_mark_for_compilation[_N].pbtxt, with the run's TF_XLA_FLAGS and session
jit level), `xlens cluster` writes TensorFlow's dumps under a fresh TF_DUMP_GRAPH_PREFIX. Every
file TensorFlow wrote for those passes must exist under our prefix with TensorFlow's name, every
.pbtxt must parse with TensorFlow's own text_format into a GraphDef (a FunctionDef for
encapsulate_fdef_*), and every .dot must render with Graphviz's `dot`.

Exits 77 (skipped) when tensorflow cannot be imported or the corpus is absent."""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The passes xlens dumps (TensorFlow also writes before_increase_dynamism and
# clone_constants dumps for passes xlens does not run).
PASSES = ("before_mark_for_compilation", "mark_for_compilation", "mark_for_compilation_annotated",
          "encapsulate_subgraphs_before", "encapsulate_subgraphs_after",
          "encapsulate_subgraphs_subgraph_", "encapsulate_fdef_graph_", "encapsulate_fdef_",
          "build_xla_ops")


def stem_kind(name):
    stem = re.sub(r"(_\d+)?\.pbtxt$", "", name)
    for p in PASSES:
        if stem == p or (p.endswith("_") and stem.startswith(p)):
            return p
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--corpus", required=True)
    args = parser.parse_args()
    if not os.path.isdir(args.corpus):
        print(f"skipped: no TensorFlow corpus at {args.corpus}")
        return 77
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        from tensorflow.core.framework import function_pb2, graph_pb2
        from google.protobuf import text_format
    except Exception as e:
        print(f"skipped: tensorflow is not importable ({type(e).__name__}: {e})")
        return 77
    dot = shutil.which("dot")

    failures, parsed, rendered, graphs = [], 0, 0, 0
    for case in sorted(os.listdir(args.corpus)):
        if not os.path.isdir(os.path.join(args.corpus, case)):
            continue
        for variant in sorted(os.listdir(os.path.join(args.corpus, case))):
            vdir = os.path.join(args.corpus, case, variant)
            dump = os.path.join(vdir, "tf_dump")
            if not os.path.isdir(dump):
                continue
            env = json.load(open(os.path.join(vdir, "env.json")))
            result = json.load(open(os.path.join(vdir, "result.json")))
            level = result.get("global_jit_level", "DEFAULT").upper()
            if level.startswith("DEFAULT"):
                level = "DEFAULT"
            description = json.load(open(os.path.join(vdir, "summary.json"))).get("description", "")
            if "global_jit_level" not in result:
                level = "ON_1" if "ON_1" in description else "ON_2" if "ON_2" in description else level
            for before in sorted(f for f in os.listdir(dump)
                                 if re.fullmatch(r"before_mark_for_compilation(_\d+)?\.pbtxt", f)):
                graphs += 1
                with tempfile.TemporaryDirectory() as prefix:
                    cmd = [args.xlens, "cluster", os.path.join(dump, before), f"--jit-level={level}",
                           "--tf_xla_clustering_debug", f"--tf_dump_graph_prefix={prefix}"]
                    flags = env.get("TF_XLA_FLAGS", "").split()
                    cmd += [f for f in flags if f != "--tf_xla_clustering_debug"]
                    run = subprocess.run(cmd, capture_output=True, text=True)
                    where = f"{case}/{variant}/{before}"
                    if run.returncode != 0:
                        failures.append(f"{where}: xlens cluster failed: {run.stderr.strip()}")
                        continue
                    ours = set(os.listdir(prefix))
                    kinds = {stem_kind(f) for f in ours if f.endswith(".pbtxt")}
                    for expected in ("before_mark_for_compilation", "mark_for_compilation",
                                     "mark_for_compilation_annotated",
                                     "encapsulate_subgraphs_before", "encapsulate_subgraphs_after",
                                     "build_xla_ops"):
                        if expected not in kinds:
                            failures.append(f"{where}: no {expected}.pbtxt written")
                    for name in sorted(ours):
                        path = os.path.join(prefix, name)
                        if name.endswith(".pbtxt"):
                            message = (function_pb2.FunctionDef()
                                       if name.startswith("encapsulate_fdef_")
                                       and not name.startswith("encapsulate_fdef_graph_")
                                       else graph_pb2.GraphDef())
                            try:
                                text_format.Parse(open(path).read(), message)
                                parsed += 1
                            except Exception as e:
                                failures.append(f"{where}: TensorFlow cannot parse {name}: {e}")
                            if not os.path.exists(path[:-len(".pbtxt")] + ".dot") and \
                                    not name.startswith("encapsulate_fdef_cluster") and \
                                    not re.match(r"encapsulate_fdef_(?!graph_)", name):
                                failures.append(f"{where}: no .dot beside {name}")
                        elif name.endswith(".dot") and dot:
                            r = subprocess.run([dot, "-Tsvg", path, "-o", os.devnull],
                                               capture_output=True, text=True)
                            if r.returncode != 0:
                                failures.append(f"{where}: dot cannot render {name}: {r.stderr}")
                            else:
                                rendered += 1
    for f in failures[:40]:
        print("FAIL", f)
    print(f"{graphs} graphs clustered; {parsed} dumps parsed by TensorFlow; {rendered} .dot "
          f"rendered{'' if dot else ' (no dot installed)'}; {len(failures)} failures")
    return 1 if failures or graphs == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""TensorFlow reads what xlens writes: every graph.pbtxt and before_mark_for_compilation*.pbtxt
of the corpus goes through xlens (graphdef_roundtrip: read, write back as .pb and as .pbtxt), and
TensorFlow 2.21 parses both outputs into a GraphDef equal to its own parse of the original file.
Graphs that TensorFlow can import (tf.graph_util.import_graph_def into a fresh tf.Graph) are also
imported from our outputs. The runtime dumps hold TensorFlow-internal ops (_Arg, _Retval, _XlaRun
...) that no Python graph can import: for those the parse and the comparison are the check, and
the output says so.

Exits 77 (skipped) when tensorflow cannot be imported or the corpus is absent."""

import argparse
import os
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--roundtrip", required=True, help="the graphdef_roundtrip binary")
    parser.add_argument("--corpus", required=True, help="../shared/corpus/tf")
    args = parser.parse_args()

    if not os.path.isdir(args.corpus):
        print(f"skipped: no TensorFlow corpus at {args.corpus}")
        return 77
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import tensorflow as tf
        from google.protobuf import text_format
    except Exception as e:  # ImportError, or a broken installation
        print(f"skipped: tensorflow is not importable ({type(e).__name__}: {e})")
        return 77

    files = []
    for root, _, names in os.walk(args.corpus):
        for name in names:
            in_dump = os.path.basename(root) == "tf_dump"
            if (name == "graph.pbtxt" and not in_dump) or (
                    in_dump and name.startswith("before_mark_for_compilation") and name.endswith(".pbtxt")):
                files.append(os.path.join(root, name))
    files.sort()
    if not files:
        print(f"skipped: no graph.pbtxt under {args.corpus}")
        return 77

    failures = []
    imported = parse_only = 0
    with tempfile.TemporaryDirectory() as tmp:
        for index, path in enumerate(files):
            rel = os.path.relpath(path, args.corpus)
            original = tf.compat.v1.GraphDef()
            with open(path, encoding="utf-8") as f:
                text_format.Parse(f.read(), original)
            ours = {}
            for ext in ("pb", "pbtxt"):
                out = os.path.join(tmp, f"{index}.{ext}")
                run = subprocess.run([args.roundtrip, path, out], capture_output=True, text=True)
                if run.returncode != 0:
                    failures.append(f"{rel}: graphdef_roundtrip failed: {run.stderr.strip()}")
                    break
                parsed = tf.compat.v1.GraphDef()
                if ext == "pb":
                    with open(out, "rb") as f:
                        parsed.ParseFromString(f.read())
                else:
                    with open(out, encoding="utf-8") as f:
                        text_format.Parse(f.read(), parsed)
                if parsed != original:
                    failures.append(f"{rel}: TensorFlow's parse of our .{ext} differs from its parse of the original")
                ours[ext] = parsed
            if len(ours) != 2:
                continue
            try:
                with tf.Graph().as_default():
                    tf.graph_util.import_graph_def(ours["pb"], name="")
                with tf.Graph().as_default():
                    tf.graph_util.import_graph_def(ours["pbtxt"], name="")
                imported += 1
                how = "parsed and imported"
            except Exception as e:
                # Only where TensorFlow cannot import the original either (internal ops).
                try:
                    with tf.Graph().as_default():
                        tf.graph_util.import_graph_def(original, name="")
                    failures.append(f"{rel}: TensorFlow imports the original but not ours: {e}")
                    how = "import failed"
                except Exception as original_error:
                    parse_only += 1
                    reason = str(original_error).splitlines()[0][:120]
                    how = f"parsed and compared only (TensorFlow cannot import the original either: {reason})"
            print(f"{rel}: {how}")

    print(f"{len(files)} graphs: {imported} imported, {parse_only} parse-only, {len(failures)} failures")
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Ahead of time for real models of the corpus: a model's frozen graph, with a tfcompile config
made from it (its input placeholders with the inputs' shapes as feeds, its outputs as fetches),
goes through `xlens aot`; the program of tests/aot/aot_vs_jit.py, which includes only the
generated header, linked with only the object, runs on the model's inputs and gives TensorFlow's
outputs and the JIT's within 1e-5 of the largest value, for this machine and for aarch64 under
qemu when its cross compiler is there. The object may need nothing outside libc, libm and
libstdc++ (`nm -u`). Prints the object's and program's sizes, the compile time and the run time
beside the JIT's.

Models are chosen small enough to keep this to seconds: the Transformer block (about 0.3 s to
compile) and MobileNetV3-Small (about 3 s, 6 MB of weights in the object)."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "aot"))
import aot_vs_jit  # noqa: E402  (the shared program, the nm check, the targets)

TOLERANCE = 1e-5

# model: (C++ class, further fetches compared with the JIT's). The untrained MobileNetV3-Small's
# softmax is 0.1 for every class whatever its logits are (they are about 1e-10 on the corpus's
# input), so its logits are fetched too: they show the network was computed.
AOT_MODELS = {
    "transformer_block": ("corpus::TransformerBlock", []),
    "mobilenet_v3_small": ("corpus::MobileNetV3Small", ["MobileNetV3Small_1/logits_1/BiasAdd"]),
}


def tensor_id(name):
    node, _, index = name.partition(":")
    output = " output_index: %s" % index if index and index != "0" else ""
    return "id { node_name: %s%s }" % (quote(node), output)


def quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_config(path, feeds, fetches):
    """tfcompile's tf2xla.Config in text: feeds [(tensor, shape)], fetches [tensor]."""
    lines = ["# Made by tests/models/model_aot.py from the model's frozen graph and inputs."]
    for i, (name, shape) in enumerate(feeds):
        dims = " ".join("dim { size: %d }" % d for d in shape)
        lines.append("feed { %s shape { %s } name: \"input%d\" }" % (tensor_id(name), dims, i))
    for i, name in enumerate(fetches):
        lines.append("fetch { %s name: \"output%d\" }" % (tensor_id(name), i))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run(cmd, timeout=300):
    """(stdout, None) or (None, the failure in one line)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"{os.path.basename(cmd[0])} timed out after {timeout} s"
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines()
        return None, f"{os.path.basename(cmd[0])} exit {p.returncode}: {lines[-1][:400] if lines else ''}"
    return p.stdout, None


def check_model(np, compare, xlens, checks, model_dir, meta, targets):
    name = meta["name"]
    cpp_class, extra = AOT_MODELS[name]
    inputs = [np.load(os.path.join(model_dir, "inputs", f"{n}.npy")) for n in meta["inputs"]]
    fetches = list(meta["frozen"]["fetches"])
    graph = os.path.join(model_dir, "frozen.pb")
    with tempfile.TemporaryDirectory(prefix="xlens-aot-") as work:
        config = os.path.join(work, "config.pbtxt")
        write_config(config, list(zip(meta["frozen"]["feeds"], (x.shape for x in inputs))),
                     fetches + extra)
        arg_files = []
        for i, x in enumerate(inputs):
            arg_files.append(os.path.join(work, f"in{i}.bin"))
            x.tofile(arg_files[-1])
        # The JIT on every fetch, and its time per step (the median of 51 after the first).
        jit_dir = os.path.join(work, "jit")
        cmd = [xlens, "graph", "run", graph, "--jit=compile", "--steps", "51", "--outputs", jit_dir]
        for feed, n in zip(meta["frozen"]["feeds"], meta["inputs"]):
            cmd += ["--feed", f"{feed}={os.path.join(model_dir, 'inputs', n + '.npy')}"]
        for f in fetches + extra:
            cmd += ["--fetch", f]
        out, err = run(cmd)
        if err:
            checks.fail(f"{name} aot", f"the JIT: {err}")
            return
        median = re.search(r"median ([0-9.]+) ms per step", out)
        jit_us = float(median.group(1)) * 1000 if median else float("nan")
        jit = [np.load(os.path.join(jit_dir, f"out{i}.npy")) for i in range(len(fetches + extra))]
        tf = [np.load(os.path.join(model_dir, "expected", f"out{i}.npy")) for i in range(len(fetches))]
        main_cc = os.path.join(work, "main.cc")
        with open(main_cc, "w") as f:
            f.write(aot_vs_jit.PROGRAM)
        for label, triple, cxx, emulator in targets:
            what = f"{name} aot {label}"
            header = os.path.join(work, "model.h")
            obj = os.path.join(work, f"model_{label}.o")
            cmd = [xlens, "aot", "--graph", graph, "--config", config, "--cpp_class", cpp_class,
                   "--out_header", header, "--out_function_object", obj, "--print-memory"]
            if triple:
                cmd += ["--target_triple", triple]
            start = time.time()
            memory, err = run(cmd)
            aot_s = time.time() - start
            if err:
                checks.fail(what, err)
                continue
            nm = "aarch64-linux-gnu-nm" if triple and shutil.which("aarch64-linux-gnu-nm") else "nm"
            try:
                undefined = aot_vs_jit.check_undefined(obj, cxx, nm)
            except SystemExit as e:  # the shared check reports by exiting
                checks.fail(what, str(e).strip().splitlines()[0])
                continue
            # Only the header, the program and the object.
            binary = os.path.join(work, f"program_{label}")
            link = [cxx, "-std=c++17", "-O2", f"-DMODEL_HEADER=\"{header}\"",
                    f"-DMODEL_CLASS={cpp_class}", main_cc, obj, "-o", binary]
            if emulator:
                link.insert(1, "-static")  # qemu-user then needs no aarch64 sysroot
            _, err = run(link)
            if err:
                checks.fail(what, f"linking the program: {err}")
                continue
            result = os.path.join(work, f"out_{label}.bin")
            cmd = ([emulator] if emulator else []) + [binary, *arg_files, result,
                                                      "5" if emulator else "50"]
            out, err = run(cmd)
            if err:
                checks.fail(what, f"the program: {err}")
                continue
            raw = np.fromfile(result, dtype=np.uint8)
            if raw.size != sum(a.nbytes for a in jit):
                checks.fail(what, f"{raw.size} bytes of results, the JIT's {sum(a.nbytes for a in jit)}")
                continue
            got, at = [], 0
            for a in jit:
                got.append(raw[at:at + a.nbytes].view(a.dtype).reshape(a.shape))
                at += a.nbytes
            problems = []
            for i, (g, want) in enumerate(zip(got, jit)):
                problem = compare(np, g, want, TOLERANCE)
                if problem:
                    problems.append(f"{(fetches + extra)[i]} against the JIT's: {problem}")
            for i, (g, want) in enumerate(zip(got, tf)):
                problem = compare(np, g, want, TOLERANCE)
                if problem:
                    problems.append(f"{fetches[i]} against TensorFlow's: {problem}")
            if problems:
                checks.fail(what, "; ".join(problems))
                continue
            weights = re.search(r"weights\s+(\d+) bytes", memory)
            checks.ok(what, f"({len(fetches)} outputs as TensorFlow's, {len(fetches + extra)} as the "
                      f"JIT's; object {os.path.getsize(obj)} bytes ({weights.group(1) if weights else '?'} "
                      f"of weights), program {os.path.getsize(binary)} bytes, xlens aot {aot_s:.2f} s, "
                      f"{float(out.strip()):.1f} us per run{' under qemu' if emulator else ''}, "
                      f"the JIT {jit_us:.1f} us per step; nm -u: {' '.join(undefined) or 'none'})")


def check_models(np, compare, xlens, checks, corpus, names):
    """The ahead-of-time check for each of AOT_MODELS among `names`."""
    chosen = [n for n in AOT_MODELS if n in names]
    if not chosen:
        return
    if shutil.which("g++") is None:
        print("note: no g++: ahead of time not checked")
        return
    targets = aot_vs_jit.aot_targets()
    for name in chosen:
        model_dir = os.path.join(corpus, name)
        with open(os.path.join(model_dir, "meta.json")) as f:
            meta = json.load(f)
        check_model(np, compare, xlens, checks, model_dir, meta, targets)

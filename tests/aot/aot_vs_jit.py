#!/usr/bin/env python3
"""Ahead-of-time against the JIT: the MNIST softmax and MLP classifiers of samples/graphs with
tfcompile configs (tests/aot/testdata) go through `xlens aot`; a C++ program that includes only
the generated header and links only the object (and -lm) computes a batch's logits, which must
equal `xlens graph run --jit=compile`'s within 1e-5 relative. The object may
need nothing but libc, libm and libstdc++ (`nm -u`). When an aarch64 cross compiler and
qemu-aarch64 are there (scripts/setup.sh --test-peers), the same for aarch64 under qemu.
Prints the sizes and times it measured. Exit 77 (skip) without numpy or a C++ compiler.

Then the sample program (samples/aot/classify.cc) on Fashion-MNIST, when Debian's
dataset-fashion-mnist is installed: each classifier trained briefly by samples/aot/freeze.py and
frozen, compiled ahead of time and linked with `g++ classify.cc model.o` alone; its predictions on
the test images must equal the JIT's on the frozen graph, and its accuracy what the trained
weights give in numpy."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def graph_path(name):
    return os.path.join(ROOT, "samples", "graphs", name, "graph.pbtxt")


# name, graph, config, class, fetch, variables in config order (graph node, shape).
MODELS = [
    ("softmax", graph_path("mnist_softmax"), "mnist_softmax.config.pbtxt", "mnist::Softmax", "add",
     [("w", (784, 10)), ("b", (10,))]),
    ("mlp", graph_path("mlp_training"), "mlp.config.pbtxt", "mnist::Mlp", "dense_1/BiasAdd_1",
     [("dense/kernel", (784, 256)), ("dense/bias", (256,)), ("dense_1/kernel", (256, 10)),
      ("dense_1/bias", (10,))]),
]

# Reads each argument (the feed, then the variables) from a file by index through the class's
# interface, runs, writes the results, and times `runs` more runs. The softmax model's program also
# goes through the accessors by the config's names.
PROGRAM = r"""
#include MODEL_HEADER
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" const char entry_metadata[];
extern "C" const unsigned long entry_metadata_size;

static bool Load(const char* path, void* into, std::size_t bytes) {
  std::FILE* f = std::fopen(path, "rb");
  if (!f) return false;
  bool ok = std::fread(into, 1, bytes, f) == bytes;
  std::fclose(f);
  return ok;
}

int main(int argc, char** argv) {
  MODEL_CLASS model;
  const int n = static_cast<int>(MODEL_CLASS::kNumArgs);
  if (argc != n + 3) return 2;
  for (int i = 0; i < n; ++i) {
    if (!Load(argv[1 + i], model.arg_data(i), model.arg_size(i))) return 3;
  }
#ifdef NAMED_SOFTMAX
  // The metadata object: the function's description as JSON.
  if (std::strstr(entry_metadata, "\"name\":\"logits\"") == nullptr ||
      entry_metadata_size != std::strlen(entry_metadata)) {
    return 6;
  }
  if (model.arg_images_data() != model.arg0_data() || model.var_weights_data() == nullptr ||
      model.var_bias_size() != 40 || model.result_logits_count() != 80) {
    return 5;
  }
  static_assert(MODEL_CLASS::kArg0Size == 8 * 784 * sizeof(float), "the feed's bytes");
#endif
  if (!model.Run()) {
    std::fprintf(stderr, "%s\n", model.error_msg().c_str());
    return 4;
  }
  // Every result, one after another in the config's order.
  std::FILE* out = std::fopen(argv[n + 1], "wb");
  for (std::size_t r = 0; r < MODEL_CLASS::kNumResults; ++r) {
    std::fwrite(model.result_data(r), 1, model.result_size(r), out);
  }
  std::fclose(out);
  int runs = std::atoi(argv[n + 2]);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) model.Run();
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("%.2f\n", runs > 0 ? us / runs : 0.0);
  return 0;
}
"""


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        sys.exit("FAIL: %s\nexit %d\n%s%s" % (" ".join(cmd), result.returncode, result.stdout,
                                             result.stderr))
    return result.stdout


def library_symbols(compiler):
    """Every symbol the C and C++ runtime libraries of `compiler` define."""
    names = set()
    for lib in ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1"):
        path = subprocess.run([compiler, "-print-file-name=" + lib], capture_output=True,
                              text=True).stdout.strip()
        if not os.path.isabs(path) or not os.path.exists(path):
            continue
        out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if parts:
                names.add(parts[-1].split("@")[0])
    return names


def check_undefined(obj, compiler, nm="nm"):
    undefined = [l.split()[-1] for l in run([nm, "-u", obj]).splitlines() if l.strip()]
    known = library_symbols(compiler)
    if not known:
        print("note: could not list %s's libraries; nm -u: %s" % (compiler, undefined))
        return undefined
    foreign = [s for s in undefined if s not in known]
    if foreign:
        sys.exit("FAIL: %s needs symbols outside libc, libm and libstdc++: %s" % (obj, foreign))
    return undefined


def compile_aot(xlens, work, model, triple):
    name, graph, config, cpp_class = model[:4]
    header = os.path.join(work, name + ".h")
    obj = os.path.join(work, "%s_%s.o" % (name, triple or "host"))
    metadata = os.path.join(work, "%s_%s_metadata.o" % (name, triple or "host"))
    cmd = [xlens, "aot", "--graph", graph, "--config", os.path.join(HERE, "testdata", config),
           "--cpp_class", cpp_class, "--out_header", header, "--out_function_object", obj,
           "--out_metadata_object", metadata, "--print-memory"]
    if triple:
        cmd += ["--target_triple", triple]
    start = time.time()
    memory = run(cmd)
    return header, obj, metadata, time.time() - start, memory


def check_model(args, work, model, targets, rng):
    name, graph, _, cpp_class, fetch, variables = model
    x = rng.standard_normal((8, 784)).astype(np.float32)
    values = [(node, (rng.standard_normal(shape) * 0.05).astype(np.float32)) for node, shape in variables]
    files = []
    for i, (node, value) in enumerate([("x", x)] + values):
        base = os.path.join(work, "%s_in%d" % (name, i))
        np.save(base + ".npy", value)
        value.tofile(base + ".bin")
        files.append((node, base))
    # The JIT: the whole graph as one must-compile function.
    jit_dir = os.path.join(work, name + "_jit")
    cmd = [args.xlens, "graph", "run", graph, "--jit=compile", "--fetch", fetch,
           "--feed", "x=" + files[0][1] + ".npy", "--outputs", jit_dir]
    for node, base in files[1:]:
        cmd += ["--assign", "%s=%s.npy" % (node, base)]
    start = time.time()
    run(cmd)
    one_step = time.time() - start
    expected = np.load(os.path.join(jit_dir, "out0.npy"))
    # The JIT's time per step, as graph run measures it (the median of 51 steps after the first,
    # which compiles).
    steps = run(cmd[:3] + ["--steps", "51"] + cmd[3:])
    median = re.search(r"median ([0-9.]+) ms per step", steps)
    print("%s jit: xlens graph run --jit=compile %.2f s for one step (process, compilation, run); "
          "median %s us per step" % (name, one_step,
                                     "%.1f" % (float(median.group(1)) * 1000) if median else "?"))

    main_cc = os.path.join(work, "main.cc")
    with open(main_cc, "w") as f:
        f.write(PROGRAM)
    for label, triple, cxx, emulator in targets:
        header, obj, metadata, seconds, memory = compile_aot(args.xlens, work, model, triple)
        nm = "aarch64-linux-gnu-nm" if triple and shutil.which("aarch64-linux-gnu-nm") else "nm"
        undefined = check_undefined(obj, cxx, nm)
        binary = os.path.join(work, "%s_%s" % (name, label))
        # Only the header, the program and the object: no xlens anywhere.
        link = [cxx, "-std=c++17", "-O2", "-DMODEL_HEADER=\"%s\"" % header,
                "-DMODEL_CLASS=" + cpp_class, main_cc, obj, metadata, "-lm", "-o", binary]
        if name == "softmax":
            link.insert(1, "-DNAMED_SOFTMAX")
        if emulator:
            link.insert(1, "-static")  # qemu-user then needs no aarch64 sysroot
        run(link)
        out = os.path.join(work, "%s_out_%s.bin" % (name, label))
        cmd = [base + ".bin" for _, base in files] + [out, str(10 if emulator else args.runs)]
        cmd = ([emulator] if emulator else []) + [binary] + cmd
        us = float(run(cmd).strip())
        got = np.fromfile(out, dtype=np.float32).reshape(expected.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
        print("%s %s: object %d bytes, program %d bytes, xlens aot %.2f s, %.1f us per batch of 8%s; "
              "undefined symbols: %s" %
              (name, label, os.path.getsize(obj), os.path.getsize(binary), seconds, us,
               " (under qemu)" if emulator else "", " ".join(undefined) or "none"))
        print("  " + memory.strip().replace("\n", "\n  "))


FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
CLASSIFY_IMAGES = 1000

# model, freeze.py's training (images, steps), the logits' node.
CLASSIFIERS = [("softmax", 2000, 100, "add"), ("mlp", 1000, 30, "dense_1/BiasAdd_1")]


def numpy_logits(name, weights, x):
    if name == "softmax":
        return x @ weights[0] + weights[1]
    return np.maximum(x @ weights[0] + weights[1], 0) @ weights[2] + weights[3]


def check_classify(args, work, targets):
    """The sample program against the JIT and against numpy on the trained weights."""
    source = os.path.join(ROOT, "samples", "aot", "classify.cc")
    for name, train, steps, logits in CLASSIFIERS:
        out = os.path.join(work, "classify_" + name)
        start = time.time()
        run([sys.executable, os.path.join(ROOT, "samples", "aot", "freeze.py"), "--xlens", args.xlens,
             "--model", name, "--data", FASHION_MNIST, "--out", out, "--train", str(train),
             "--steps", str(steps)])
        train_s = time.time() - start
        images = os.path.join(out, "t10k-images-idx3-ubyte")
        labels_file = os.path.join(out, "t10k-labels-idx1-ubyte")
        x = (np.fromfile(images, dtype=np.uint8)[16:].reshape(-1, 784)[:CLASSIFY_IMAGES] / 255.0).astype(np.float32)
        labels = np.fromfile(labels_file, dtype=np.uint8)[8:][:CLASSIFY_IMAGES]
        weights = [np.load(os.path.join(out, "trained", "out%d.npy" % i)) for i in range(2 if name == "softmax" else 4)]
        expected_accuracy = float((numpy_logits(name, weights, x).argmax(1) == labels).mean())
        # The JIT on the frozen graph: all the images at once for the predictions, then a batch of
        # 100 (the program's) for the time per image.
        frozen = os.path.join(out, "frozen.pbtxt")
        np.save(os.path.join(out, "test_x.npy"), x)
        np.save(os.path.join(out, "test_x100.npy"), x[:100])
        run([args.xlens, "graph", "run", frozen, "--jit=compile", "--fetch", logits, "--feed",
             "x=" + os.path.join(out, "test_x.npy"), "--outputs", os.path.join(out, "jit")])
        jit_predicted = np.load(os.path.join(out, "jit", "out0.npy")).argmax(1)
        steps_out = run([args.xlens, "graph", "run", frozen, "--jit=compile", "--fetch", logits, "--feed",
                         "x=" + os.path.join(out, "test_x100.npy"), "--steps", "51"])
        median = re.search(r"median ([0-9.]+) ms per step", steps_out)
        jit_us = float(median.group(1)) * 1000 / 100 if median else float("nan")
        print("classify %s: trained %d steps on %d images in %.1f s; numpy on the trained weights: accuracy %.4f; "
              "JIT (xlens graph run --jit=compile): %.2f us per image (median step of 100 images / 100)" %
              (name, steps, train, train_s, expected_accuracy, jit_us))
        for label, triple, cxx, emulator in targets:
            obj = os.path.join(out, "model_%s.o" % label)
            header = os.path.join(out, "model.h")
            cmd = [args.xlens, "aot", "--graph", frozen, "--config", os.path.join(out, "config.pbtxt"),
                   "--cpp_class", "fashion::Classifier", "--out_header", header, "--out_function_object", obj]
            if triple:
                cmd += ["--target_triple", triple]
            start = time.time()
            run(cmd)
            aot_s = time.time() - start
            nm = "aarch64-linux-gnu-nm" if triple and shutil.which("aarch64-linux-gnu-nm") else "nm"
            check_undefined(obj, cxx, nm)
            binary = os.path.join(out, "classify_" + label)
            link = [cxx, "-std=c++17", "-O2", "-I", out, source, obj, "-o", binary]
            if emulator:
                link.insert(1, "-static")
            run(link)
            predictions = os.path.join(out, "predicted_" + label)
            cmd = ([emulator] if emulator else []) + [binary, images, labels_file, str(CLASSIFY_IMAGES), predictions]
            line = run(cmd).strip()
            m = re.match(r"(\d+) images in batches of 100: accuracy ([0-9.]+), ([0-9.]+) us per image$", line)
            if not m or int(m.group(1)) != CLASSIFY_IMAGES:
                sys.exit("FAIL: classify %s %s printed %r" % (name, label, line))
            got = np.fromfile(predictions, dtype=np.uint8)
            differ = int((got != jit_predicted).sum())
            if differ:
                sys.exit("FAIL: classify %s %s: %d of %d predictions differ from the JIT's" %
                         (name, label, differ, CLASSIFY_IMAGES))
            if abs(float(m.group(2)) - expected_accuracy) > 0.0015:
                sys.exit("FAIL: classify %s %s: accuracy %s, numpy on the trained weights %.4f" %
                         (name, label, m.group(2), expected_accuracy))
            print("classify %s %s: object %d bytes, program %d bytes, xlens aot %.2f s, accuracy %s, "
                  "%s us per image%s; predictions equal the JIT's" %
                  (name, label, os.path.getsize(obj), os.path.getsize(binary), aot_s, m.group(2),
                   m.group(3), " (under qemu)" if emulator else ""))


def aot_targets():
    """(label, triple, C++ compiler, emulator) of each machine checked: this one, and aarch64
    under qemu when its cross compiler and qemu-aarch64 are there."""
    targets = [("x86-64", None, "g++", None)]
    if shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64"):
        targets.append(("aarch64", "aarch64-unknown-linux-gnu", "aarch64-linux-gnu-g++", "qemu-aarch64"))
    else:
        print("note: no aarch64-linux-gnu-g++ or qemu-aarch64: aarch64 not checked")
    return targets


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    if shutil.which("g++") is None:
        print("SKIP: no g++")
        return 77
    targets = aot_targets()
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="aot_vs_jit") as work:
        for model in MODELS:
            check_model(args, work, model, targets, rng)
        if os.path.isdir(FASHION_MNIST):
            check_classify(args, work, targets)
        else:
            print("note: no %s (dataset-fashion-mnist): the sample program not checked" % FASHION_MNIST)
    print("OK: the ahead-of-time programs' logits equal the JIT's")
    return 0


if __name__ == "__main__":
    sys.exit(main())

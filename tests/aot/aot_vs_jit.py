#!/usr/bin/env python3
"""Ahead-of-time against the JIT: the MNIST softmax classifier of samples/graphs/mnist_softmax
with a tfcompile config (tests/aot/testdata) goes through `xlens aot`; a C++ program that
includes only the generated header and links only the object (and -lm) computes a batch's
logits, which must equal `xlens graph run --jit=compile`'s within 1e-5 relative. The object may
need nothing but libc, libm and libstdc++ (`nm -u`). When an aarch64 cross compiler and
qemu-aarch64 are there (scripts/setup.sh --test-peers), the same for aarch64 under qemu.
Prints the sizes and times it measured. Exit 77 (skip) without numpy or a C++ compiler."""
import argparse
import os
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
GRAPH = os.path.join(ROOT, "samples", "graphs", "mnist_softmax", "graph.pbtxt")
CONFIG = os.path.join(HERE, "testdata", "mnist_softmax.config.pbtxt")

PROGRAM = r"""
#include "mnist.h"
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

static bool Load(const char* path, void* into, std::size_t bytes) {
  std::FILE* f = std::fopen(path, "rb");
  if (!f) return false;
  bool ok = std::fread(into, 1, bytes, f) == bytes;
  std::fclose(f);
  return ok;
}

int main(int argc, char** argv) {
  if (argc != 6) return 2;
  mnist::Softmax model;
  if (!Load(argv[1], model.arg_images_data(), model.arg_images_size()) ||
      !Load(argv[2], model.var_weights_data(), model.var_weights_size()) ||
      !Load(argv[3], model.var_bias_data(), model.var_bias_size())) {
    return 3;
  }
  if (!model.Run()) {
    std::fprintf(stderr, "%s\n", model.error_msg().c_str());
    return 4;
  }
  std::FILE* out = std::fopen(argv[4], "wb");
  std::fwrite(model.result_logits_data(), 1, model.result_logits_size(), out);
  std::fclose(out);
  int runs = std::atoi(argv[5]);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) model.Run();
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("%.2f\n", runs > 0 ? us / runs : 0.0);
  static_assert(mnist::Softmax::kArg0Size == 8 * 784 * sizeof(float), "the feed's bytes");
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


def compile_aot(xlens, work, triple):
    header = os.path.join(work, "mnist.h")
    obj = os.path.join(work, "mnist.o")
    cmd = [xlens, "aot", "--graph", GRAPH, "--config", CONFIG, "--cpp_class", "mnist::Softmax",
           "--out_header", header, "--out_function_object", obj, "--print-memory"]
    if triple:
        cmd += ["--target_triple", triple]
    start = time.time()
    memory = run(cmd)
    seconds = time.time() - start
    return obj, seconds, memory


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    if shutil.which("g++") is None:
        print("SKIP: no g++")
        return 77
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 784)).astype(np.float32)
    w = (rng.standard_normal((784, 10)) * 0.05).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="aot_vs_jit") as work:
        for name, value in (("x", x), ("w", w), ("b", b)):
            np.save(os.path.join(work, name + ".npy"), value)
            value.tofile(os.path.join(work, name + ".bin"))
        # The JIT: the whole graph as one must-compile function.
        jit_dir = os.path.join(work, "jit")
        start = time.time()
        run([args.xlens, "graph", "run", GRAPH, "--jit=compile", "--fetch", "add",
             "--feed", "x=" + os.path.join(work, "x.npy"),
             "--assign", "w=" + os.path.join(work, "w.npy"),
             "--assign", "b=" + os.path.join(work, "b.npy"), "--outputs", jit_dir])
        jit_seconds = time.time() - start
        expected = np.load(os.path.join(jit_dir, "out0.npy"))
        np.testing.assert_allclose(expected, x @ w + b, rtol=1e-4, atol=1e-4)

        main_cc = os.path.join(work, "main.cc")
        with open(main_cc, "w") as f:
            f.write(PROGRAM)
        targets = [("x86-64", None, "g++", None)]
        if shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64"):
            targets.append(("aarch64", "aarch64-unknown-linux-gnu", "aarch64-linux-gnu-g++",
                            "qemu-aarch64"))
        else:
            print("note: no aarch64-linux-gnu-g++ or qemu-aarch64: aarch64 not checked")
        for label, triple, cxx, emulator in targets:
            obj, seconds, memory = compile_aot(args.xlens, work, triple)
            nm = "aarch64-linux-gnu-nm" if triple and shutil.which("aarch64-linux-gnu-nm") else "nm"
            undefined = check_undefined(obj, cxx, nm)
            binary = os.path.join(work, "classify_" + label)
            # Only the header's directory, the program and the object: no xlens anywhere.
            link = [cxx, "-std=c++17", "-O2", "-I", work, main_cc, obj, "-lm", "-o", binary]
            if emulator:
                link.insert(1, "-static")  # qemu-user then needs no aarch64 sysroot
            run(link)
            out = os.path.join(work, "out_%s.bin" % label)
            cmd = [binary] + [os.path.join(work, n + ".bin") for n in ("x", "w", "b")] + [
                out, str(args.runs if not emulator else 10)]
            if emulator:
                cmd.insert(0, emulator)
            us = float(run(cmd).strip())
            got = np.fromfile(out, dtype=np.float32).reshape(expected.shape)
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
            print("%s: object %d bytes, program %d bytes (stripped: not), xlens aot %.2f s, "
                  "%.1f us per batch of 8%s; undefined symbols: %s" %
                  (label, os.path.getsize(obj), os.path.getsize(binary), seconds, us,
                   " (under qemu)" if emulator else "", " ".join(undefined) or "none"))
            print("  " + memory.strip().replace("\n", "\n  "))
        print("jit: xlens graph run --jit=compile %.2f s (process, compile and one run)" % jit_seconds)
    print("OK: the ahead-of-time program's logits equal the JIT's")
    return 0


if __name__ == "__main__":
    sys.exit(main())

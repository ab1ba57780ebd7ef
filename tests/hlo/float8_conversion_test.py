#!/usr/bin/env python3
"""The 8-bit floats convert exactly as ml_dtypes (and XLA) convert them, in the reference evaluator
(`xlens eval`) and in the CPU compiler (`xlens run`).

For each of f8e5m2, f8e4m3, f8e3m4, f8e4m3fn, f8e4m3fnuz, f8e5m2fnuz and f8e4m3b11fnuz:
  - every one of the 256 bit patterns widens to the f32 ml_dtypes gives (NaN's sign included);
  - f32 values round to the bit pattern ml_dtypes gives: every midpoint between neighbours and
    the floats on either side of it (ties to even), subnormals, values past the largest finite one
    (inf where the type has one, NaN where it has none: no saturation), NaN, +-inf, +-0.
Exit 77 (skip) without numpy or ml_dtypes.
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import ml_dtypes
    import numpy as np
except ImportError:
    print("skip: numpy and ml_dtypes are needed")
    sys.exit(77)

TYPES = ["f8e5m2", "f8e4m3", "f8e3m4", "f8e4m3fn", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz"]


def numpy_type(name):
    return getattr(ml_dtypes, name.replace("f8", "float8_"))


def hard_values(dtype):
    """f32 values whose rounding into `dtype` is easy to get wrong."""
    everything = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    finite = np.unique(everything[np.isfinite(everything)])
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30, 1e-30, -1e-30]
    for lo, hi in zip(finite[:-1], finite[1:]):
        mid = np.float32((lo + hi) / 2)  # exact: every f8 midpoint is an f32
        values += [lo, mid, np.nextafter(mid, np.float32(np.inf)),
                   np.nextafter(mid, np.float32(-np.inf))]
    info = ml_dtypes.finfo(dtype)
    top, tiny = float(info.max), float(info.smallest_subnormal)
    # Past the largest finite value: below, at and above the midpoint to the next step.
    step = top - float(finite[-2])
    values += [top + step / 4, top + step / 2, top + step, -(top + step / 2), -(top + step),
               tiny / 2, tiny * 0.75, tiny / 4, -tiny / 2, -tiny * 0.75]
    return np.array(values, dtype=np.float32)


def run(xlens, mode, module_text, inputs, tmp, name):
    path = os.path.join(tmp, name + ".hlo")
    with open(path, "w") as f:
        f.write(module_text)
    in_dir = os.path.join(tmp, name + ".in")
    out_dir = os.path.join(tmp, name + "." + mode)
    os.makedirs(in_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    np.save(os.path.join(in_dir, "arg0.npy"), inputs)
    cmd = [xlens, mode, path, "--inputs", in_dir, "--outputs", out_dir]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return np.load(os.path.join(out_dir, "out0.npy"))


def same_f32(a, b):
    """Bitwise, except that any two NaNs of the same sign are equal."""
    a_nan, b_nan = np.isnan(a), np.isnan(b)
    same = (a.view(np.uint32) == b.view(np.uint32)) | (a_nan & b_nan & (np.signbit(a) == np.signbit(b)))
    return same


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    args = parser.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in TYPES:
            dtype = numpy_type(name)
            patterns = np.arange(256, dtype=np.uint8)
            widened = patterns.view(dtype).astype(np.float32)
            values = hard_values(dtype)
            rounded = values.astype(dtype).view(np.uint8)
            widen = (f"HloModule widen_{name}\nENTRY main {{\n  p = u8[256] parameter(0)\n"
                     f"  b = {name}[256] bitcast-convert(p)\n  ROOT r = f32[256] convert(b)\n}}\n")
            n = len(values)
            narrow = (f"HloModule narrow_{name}\nENTRY main {{\n  p = f32[{n}] parameter(0)\n"
                      f"  c = {name}[{n}] convert(p)\n  ROOT r = u8[{n}] bitcast-convert(c)\n}}\n")
            for mode in ("eval", "run"):
                got = run(args.xlens, mode, widen, patterns, tmp, f"widen_{name}")
                bad = np.nonzero(~same_f32(got.astype(np.float32), widened))[0]
                for i in bad[:5]:
                    failures.append(f"{mode} {name}: bits 0x{i:02x} widen to {got[i]!r}, "
                                    f"ml_dtypes says {widened[i]!r}")
                got = run(args.xlens, mode, narrow, values, tmp, f"narrow_{name}")
                bad = np.nonzero(got != rounded)[0]
                for i in bad[:5]:
                    failures.append(f"{mode} {name}: {values[i]!r} rounds to 0x{got[i]:02x}, "
                                    f"ml_dtypes says 0x{rounded[i]:02x}")
            print(f"{name}: 256 patterns and {n} f32 values checked (eval and run)")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

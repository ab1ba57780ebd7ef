"""Crafts the hostile inputs of the sweep: HLO modules, .npy files, Chrome traces, special files.

Everything is built from bytes here (no numpy, no stored corpus), so the sweep needs nothing but
Python's standard library and says exactly what each input is.
"""

import gzip
import os
import stat
import struct

# ----------------------------------------------------------------------------------------------
# HLO text


def module(name, entry_body, computations=""):
    """An HLO module whose ENTRY computation holds `entry_body` (one instruction per line)."""
    lines = "\n".join("  " + line for line in entry_body.strip().splitlines())
    return f"HloModule {name}\n\n{computations}ENTRY e {{\n{lines}\n}}\n"


# x*x on known values: a module every subcommand accepts, with a known answer (1, 4, 9).
SQUARE = module("square", """
a = f32[3] constant({1, 2, 3})
ROOT b = f32[3] multiply(a, a)
""")
SQUARE_ANSWER = "{1, 4, 9}"

# One parameter, so that --inputs has something to read.
ADD_PARAM = module("add_param", """
a = f32[3] parameter(0)
b = f32[3] constant({1, 2, 3})
ROOT c = f32[3] add(a, b)
""")

# A scalar add computation for reduce and reduce-window.
ADD_F32 = """add (x: f32[], y: f32[]) -> f32[] {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

"""


def nested_calls(depth):
    """`depth` computations, each calling the next and adding 1: the answer is `depth`."""
    comps = [f"c{depth - 1} (p: f32[]) -> f32[] {{\n  p = f32[] parameter(0)\n"
             f"  one = f32[] constant(1)\n  ROOT r = f32[] add(p, one)\n}}\n\n"]
    for i in range(depth - 2, -1, -1):
        comps.append(f"c{i} (p: f32[]) -> f32[] {{\n  p = f32[] parameter(0)\n"
                     f"  one = f32[] constant(1)\n  x = f32[] call(p), to_apply=c{i + 1}\n"
                     f"  ROOT r = f32[] add(x, one)\n}}\n\n")
    return module("calls", "z = f32[] constant(0)\nROOT r = f32[] call(z), to_apply=c0",
                  "".join(comps))


def nested_operands(depth):
    """negate(negate(...constant(1)...)) written inline, `depth` deep."""
    expr = "f32[] constant(1)"
    inner = "f32[] negate(" * depth + expr + ")" * depth
    return f"HloModule deep\n\nENTRY e {{\n  ROOT r = {inner[6:]}\n}}\n"


def nested_tuple_shape(depth):
    shape = "(" * depth + "f32[]" + ")" * depth
    return module("tuples", f"ROOT p = {shape} parameter(0)")


def wide_tuple(n):
    """A tuple of `n` scalars: wide, not deep."""
    body = "\n".join(f"c{i} = f32[] constant({i})" for i in range(n))
    shape = "(" + ", ".join(["f32[]"] * n) + ")"
    ops = ", ".join(f"c{i}" for i in range(n))
    return module("wide", f"{body}\nROOT t = {shape} tuple({ops})")


INFINITE_WHILE = module("spin", """
z = s32[] constant(0)
ROOT w = s32[] while(z), condition=cond, body=body
""", """cond (p: s32[]) -> pred[] {
  p = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}

body (p: s32[]) -> s32[] {
  p = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT n = s32[] add(p, one)
}

""")

# Same loop, but the condition depends on a parameter: nothing can fold it away.
INFINITE_WHILE_PARAM = module("spin_param", """
z = s32[] parameter(0)
ROOT w = s32[] while(z), condition=cond, body=body
""", """cond (p: s32[]) -> pred[] {
  p = s32[] parameter(0)
  m = s32[] constant(-1)
  ROOT t = pred[] compare(p, m), direction=NE
}

body (p: s32[]) -> s32[] {
  p = s32[] parameter(0)
  ROOT n = s32[] copy(p)
}

""")


def huge_window(size, pad_low, pad_high, dim=8, out=None):
    """reduce-window over f32[dim] with a window of `size` and the given padding."""
    out = out if out is not None else 9
    return module("window", f"""
x = f32[{dim}] parameter(0)
z = f32[] constant(0)
ROOT r = f32[{out}] reduce-window(x, z), window={{size={size} stride=1 pad={pad_low}_{pad_high}}}, to_apply=add
""", ADD_F32)


DYNAMIC_SLICE_U64 = module("ds_u64", """
x = f32[8] parameter(0)
i = u64[] parameter(1)
ROOT d = f32[2] dynamic-slice(x, i), dynamic_slice_sizes={2}
""")

DYNAMIC_UPDATE_SLICE_U64 = module("dus_u64", """
x = f32[8] parameter(0)
i = u64[] parameter(1)
u = f32[2] constant({10, 20})
ROOT d = f32[8] dynamic-update-slice(x, u, i)
""")

# A tuple result with a bf16 leaf between two f32 leaves: every leaf must reach --outputs.
BF16_TUPLE = module("bf16_tuple", """
a = f32[2] constant({1, 2})
b = bf16[2] convert(a)
c = f32[2] constant({3, 4})
ROOT t = (f32[2], bf16[2], f32[2]) tuple(a, b, c)
""")

# ----------------------------------------------------------------------------------------------
# .npy


def npy(descr, shape, data=b"", fortran=False, version=(1, 0), header=None, pad=True):
    """A .npy file. `header` replaces the dict text; the length field follows `version`."""
    if header is None:
        dims = ", ".join(str(d) for d in shape)
        if len(shape) == 1:
            dims += ","
        header = (f"{{'descr': '{descr}', 'fortran_order': {fortran}, "
                  f"'shape': ({dims}), }}")
    head = header.encode("latin-1") if isinstance(header, str) else header
    if version[0] == 1 and len(head) > 65000:
        version = (2, 0)  # as numpy does when the header does not fit 1.0
    length_size = 2 if version[0] == 1 else 4
    if pad:
        total = 6 + 2 + length_size + len(head) + 1
        head += b" " * ((64 - total % 64) % 64) + b"\n"
    fmt = "<H" if length_size == 2 else "<I"
    return (b"\x93NUMPY" + bytes(version) + struct.pack(fmt, len(head)) + head + data)


def npy_f32(values, shape=None):
    shape = shape if shape is not None else (len(values),)
    return npy("<f4", shape, struct.pack(f"<{len(values)}f", *values))


def npy_u64_scalar(value):
    return npy("<u8", (), struct.pack("<Q", value))


# ----------------------------------------------------------------------------------------------
# Chrome traces


def trace_json(events, extra=""):
    import json
    return ('{"traceEvents": ' + json.dumps(events) + extra + "}").encode()


def kernel_event(name="k", ts=0, dur=5):
    return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": 1, "cat": "kernel"}


def gzip_bomb(path, decompressed_bytes):
    """A .json.gz that inflates to `decompressed_bytes` of valid JSON (spaces inside an array).

    One deflate stream, written a chunk at a time, so the sweep itself never holds it."""
    chunk = b" " * (8 << 20)
    with open(path, "wb") as f:
        gz = gzip.GzipFile(fileobj=f, mode="wb", compresslevel=1, mtime=0)
        gz.write(b'{"traceEvents": [')
        left = decompressed_bytes
        while left > 0:
            n = min(left, len(chunk))
            gz.write(chunk[:n])
            left -= n
        gz.write(b"]}")
        gz.close()


def truncated_gzip(data):
    full = gzip.compress(data, mtime=0)
    return full[: len(full) // 2]


def raw_deflate_junk():
    """A gzip header followed by bytes that are not a deflate stream."""
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + bytes(range(256)) * 4


# ----------------------------------------------------------------------------------------------
# Special files


class CannotCraft(Exception):
    """The input cannot be made here (e.g. a device node without the right to make one)."""


def char_device(path, major, minor):
    """A character device node: (1, 3) is /dev/null, (1, 5) /dev/zero. Making one needs
    CAP_MKNOD (root); without it the case is skipped."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError:
        raise CannotCraft("making a device node needs CAP_MKNOD (root)")


def fifo(path):
    os.mkfifo(path, 0o600)


def long_path_file(base, total_length, content):
    """Creates a file whose path relative to `base` is about `total_length` characters, past
    PATH_MAX, by making each directory relative to the previous one. Returns the relative path."""
    component = "d" * 200
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    parts = []
    try:
        while sum(len(p) + 1 for p in parts) + 210 < total_length:
            os.mkdir(component, dir_fd=fd)
            nfd = os.open(component, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
            parts.append(component)
        out = os.open("m.hlo", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, content)
        os.close(out)
    finally:
        os.close(fd)
    return "/".join(parts + ["m.hlo"])


def junk(n, seed=1):
    """`n` deterministic pseudo-random bytes."""
    out = bytearray()
    x = seed
    while len(out) < n:
        x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        out += (x >> 32).to_bytes(4, "little")
    return bytes(out[:n])

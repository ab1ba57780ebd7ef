"""SavedModel directories: saved_model.pb, and the TensorBundle checkpoint in variables/.

Every case starts from the small SavedModel of tests/graph/testdata/saved_model/small (TensorFlow
wrote it: variables w f32[2,3], b f32[3], i i32[2,2], d f64[]; serving_default takes x f32[?,2])
copied to m/, then breaks one thing: the index table (cut, a flipped byte, a Snappy block, keys out
of order, keys that rebuild to gigabytes), an entry (wrong dtype or shape, a shard past the count,
an offset past the shard, a shape past 64 bits, a header of 0 or 100000 shards), the data shard
(a flipped byte, cut short, missing), saved_model.pb (cut, a signature naming no node). Each is one
line naming the file, exit 1; the intact model runs to its known answer. A TF2 function graph's
captured resource Placeholder takes --assign by its name, and a wrong dtype there is one line.

Tables are rebuilt here (LevelDB's block format, masked CRC-32C) so each case changes exactly the
field it names and the checksums stay right unless the case is about them.
"""

import os
import shutil
import struct

import craft
from harness import Case

_HERE = os.path.dirname(os.path.abspath(__file__))
_SMALL = os.path.join(_HERE, "..", "graph", "testdata", "saved_model", "small")
_INDEX = "m/variables/variables.index"
_DATA = "m/variables/variables.data-00000-of-00001"
_W = b"w/.ATTRIBUTES/VARIABLE_VALUE"
_I = b"i/.ATTRIBUTES/VARIABLE_VALUE"

# ---- CRC-32C and LevelDB's table format ----

_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (0x82F63B78 ^ (_c >> 1)) if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def mask(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _read_varint(b, p):
    r = s = 0
    while True:
        c = b[p]
        p += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, p


def read_table(b):
    """[(key, value)] of a table (no checks: the input is ours)."""
    foot = b[-48:]
    _, p = _read_varint(foot, 0)
    _, p = _read_varint(foot, p)
    io, p = _read_varint(foot, p)
    isz, p = _read_varint(foot, p)

    def block(off, size):
        data = b[off:off + size]
        n = struct.unpack("<I", data[-4:])[0]
        end = len(data) - 4 - 4 * n
        p, key, out = 0, b"", []
        while p < end:
            sh, p = _read_varint(data, p)
            ns, p = _read_varint(data, p)
            vl, p = _read_varint(data, p)
            key = key[:sh] + data[p:p + ns]
            p += ns
            out.append((key, data[p:p + vl]))
            p += vl
        return out
    entries = []
    for _, handle in block(io, isz):
        o, q = _read_varint(handle, 0)
        s, q = _read_varint(handle, q)
        entries += block(o, s)
    return entries


def block_of(entries, raw=None):
    body = bytearray()
    for key, value in entries:
        body += varint(0) + varint(len(key)) + varint(len(value)) + key + value
    if raw is not None:
        body = bytearray(raw)
    return bytes(body) + struct.pack("<II", 0, 1)


def append_block(out, contents, kind=0):
    handle = varint(len(out)) + varint(len(contents))
    out += contents + bytes([kind]) + struct.pack("<I", mask(crc32c(contents + bytes([kind]))))
    return handle


def build_table(entries, kind=0, raw_data_block=None):
    out = bytearray()
    handle = append_block(out, block_of(entries, raw_data_block), kind)
    meta = append_block(out, block_of([]))
    index = append_block(out, block_of([(entries[-1][0] if entries else b"", handle)]))
    footer = (meta + index).ljust(40, b"\0") + struct.pack("<Q", 0xDB4775248B80FB57)
    return bytes(out) + footer


# ---- BundleEntryProto, field by field ----

def decode_entry(value):
    fields, p = {}, 0
    while p < len(value):
        tag, p = _read_varint(value, p)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            fields[field], p = _read_varint(value, p)
        elif wire == 2:
            n, p = _read_varint(value, p)
            fields.setdefault(field, []).append(value[p:p + n])
            p += n
        elif wire == 5:
            fields[field] = struct.unpack("<I", value[p:p + 4])[0]
            p += 4
    return fields


def shape(dims):
    return b"".join(b"\x12" + varint(len(d)) + d for d in (b"\x08" + varint(x) for x in dims))


def entry(dtype, dims, offset, size, crc, shard=0):
    s = shape(dims)
    out = b"\x08" + varint(dtype) + b"\x12" + varint(len(s)) + s
    if shard:
        out += b"\x18" + varint(shard)
    return out + b"\x20" + varint(offset) + b"\x28" + varint(size) + b"\x35" + struct.pack("<I", crc)


def _copy(ctx):
    shutil.copytree(_SMALL, ctx.path("m"))


def _rewrite(change):
    """A setup: the fixture copied, then its index's entries changed by change(entries) and rebuilt."""
    def setup(ctx):
        _copy(ctx)
        entries = read_table(ctx.read(_INDEX))
        result = change(ctx, entries)
        ctx.write(_INDEX, result if isinstance(result, bytes) else build_table(result))
    return setup


def _replace(key, make):
    def change(ctx, entries):
        out = []
        for k, v in entries:
            if k == key:
                f = decode_entry(v)
                v = make(f)
            out.append((k, v))
        return out
    return change


def _header(num_shards):
    def change(ctx, entries):
        return [(b"", b"\x08" + varint(num_shards) + b"\x1a\x02\x08\x01")] + entries[1:]
    return change


def _flip(rel, at):
    def setup(ctx):
        _copy(ctx)
        data = bytearray(ctx.read(rel))
        data[at if at >= 0 else len(data) + at] ^= 0x40
        ctx.write(rel, bytes(data))
    return setup


def _cut(rel, keep):
    def setup(ctx):
        _copy(ctx)
        ctx.write(rel, ctx.read(rel)[:keep])
    return setup


def _w_offset(ctx):
    return decode_entry(dict(read_table(ctx.read(_INDEX)))[_W]).get(4, 0)


def _flip_w(ctx):
    _copy(ctx)
    data = bytearray(ctx.read(_DATA))
    data[_w_offset(ctx) + 5] ^= 0x01
    ctx.write(_DATA, bytes(data))


def _missing_shard(ctx):
    _copy(ctx)
    os.remove(ctx.path(_DATA))


def _missing_variables(ctx):
    _copy(ctx)
    shutil.rmtree(ctx.path("m/variables"))


def _bad_signature(ctx):
    _copy(ctx)
    pb = ctx.read("m/saved_model.pb")
    # The output tensor's node renamed, same length: the signature names no node.
    ctx.write("m/saved_model.pb", pb.replace(b"StatefulPartitionedCall:1", b"StatefulPartitionedCalX:1"))


def _prefix_bomb(ctx):
    """60,000 entries, each sharing the whole key before it and adding a byte: 230 KiB on disk,
    1.8 GB of keys if rebuilt."""
    _copy(ctx)
    body = bytearray(varint(0) + varint(1) + varint(0) + b"a")
    for i in range(1, 60000):
        body += varint(i) + varint(1) + varint(0) + b"a"
    ctx.write(_INDEX, build_table([], raw_data_block=bytes(body)))


def _out_of_order(ctx, entries):
    return [entries[0], entries[-1]] + entries[1:-1]


def _snappy(ctx, entries):
    return build_table(entries, kind=1)


def _feed(ctx):
    ctx.write("x.npy", craft.npy("<f4", (1, 2), struct.pack("<2f", 1.0, 2.0)))


_CAPTURED = ('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
             'attr { key: "shape" value { shape { dim { size: 2 } } } } }\n'
             'node { name: "w/resource" op: "Placeholder" attr { key: "dtype" value { type: DT_RESOURCE } } '
             'attr { key: "shape" value { shape { } } } }\n'
             'node { name: "w/read" op: "ReadVariableOp" input: "w/resource" '
             'attr { key: "dtype" value { type: DT_FLOAT } } }\n'
             'node { name: "y" op: "Mul" input: "x" input: "w/read" attr { key: "T" value { type: DT_FLOAT } } }\n')


def _captured(dtype):
    def setup(ctx):
        ctx.write("x.npy", craft.npy("<f4", (2,), struct.pack("<2f", 1.0, 2.0)))
        ctx.write("f.pbtxt", _CAPTURED)
        if dtype == "f4":
            ctx.write("w.npy", craft.npy("<f4", (2,), struct.pack("<2f", 3.0, -0.5)))
        else:
            ctx.write("w.npy", craft.npy("<i4", (2,), struct.pack("<2i", 3, 4)))
    return setup


def _answer(pattern):
    import re

    def check(ctx, run):
        if run.exit_code == 0 and not re.search(pattern.encode(), run.stdout):
            return "wrong-result", f"expected /{pattern}/, got {run.stdout[:200]!r}"
        return None
    return check


def cases(shared, root_user):
    out = []

    def case(name, setup, mentions, names=_INDEX, command="run", quick=True, **kw):
        args = ["graph", command, "m"] + (["--feed", "x=x.npy"] if command == "run" else [])
        out.append(Case(id=f"saved-model/{name}", reader="saved-model", args=args,
                        setup=lambda ctx, s=setup: (s(ctx), _feed(ctx)), expect=kw.pop("expect", "error"),
                        names=names, mentions=mentions, quick=quick, **kw))

    # The intact model runs to TensorFlow's answer: s = 10 * 2.25, y = [1,2] @ arange(6).reshape(2,3)/7
    # + [1.5,-2,3].
    case("intact", _copy, None, names=None, expect="ok",
         check=_answer(r"s: double \[\] \[22\.5\]\ny: float \[1,3\] \[2\.3571\d*, -0\.71428\d*, 4\.71428\d*\]"))
    case("index-truncated", _cut(_INDEX, 200), r"magic number|footer")
    case("index-empty", _cut(_INDEX, 0), r"footer")
    case("index-block-crc", _flip(_INDEX, 40), r"checksum .*CRC-32C")
    case("index-footer-handle-past-end", _flip(_INDEX, -43), r"expected it within|block")
    case("index-snappy-block", _rewrite(_snappy), r"Snappy")
    case("index-keys-out-of-order", _rewrite(_out_of_order), r"out of order")
    case("index-key-prefix-bomb", _prefix_bomb, r"add up to more than", max_rss_mb=300)
    case("index-missing", lambda ctx: (_copy(ctx), os.remove(ctx.path(_INDEX))), r"no such file")
    case("variables-missing", _missing_variables, r"no such file", names="m/variables/variables.index")
    case("header-zero-shards", _rewrite(_header(0)), r"0 shards, expected 1 to 99999")
    case("header-100000-shards", _rewrite(_header(100000)), r"100000 shards")
    case("entry-wrong-dtype", _rewrite(_replace(_W, lambda f: entry(2, [2, 3], f.get(4, 0), f.get(5, 0), f[6]))),
         r"24 bytes for a double\[2,3\] tensor, expected 48")
    case("entry-wrong-shape", _rewrite(_replace(_I, lambda f: entry(3, [4], f.get(4, 0), f.get(5, 0), f[6]))),
         r"holds int32\[4\], expected int32\[2,2\]")
    case("entry-shape-past-64-bits",
         _rewrite(_replace(_W, lambda f: entry(1, [1 << 40, 1 << 40], f.get(4, 0), f.get(5, 0), f[6]))),
         r"more elements than fit in 64 bits")
    case("entry-shard-past-count", _rewrite(_replace(_W, lambda f: entry(1, [2, 3], f.get(4, 0), f.get(5, 0), f[6], shard=7))),
         r"shard 7, expected 0 to 0")
    case("entry-offset-past-shard",
         _rewrite(_replace(_W, lambda f: entry(1, [2, 3], 1 << 62, 24, f[6]))), r"expected within its")
    case("entry-huge-size", _rewrite(_replace(_W, lambda f: entry(1, [1 << 30, 1 << 30], 0, (1 << 62) - 1, f[6]))),
         r"bytes for a float")
    case("shard-bad-crc", _flip_w, r"CRC-32C", names=_DATA)
    case("shard-cut-short", _cut(_DATA, 30), r"expected within its")
    case("shard-missing", _missing_shard, r"no such file", names=_DATA)
    case("saved-model-truncated", _cut("m/saved_model.pb", 5000), r"not a binary SavedModel",
         names="m/saved_model.pb")
    case("signature-names-no-node", _bad_signature, r"names no node", names="m/saved_model.pb")
    out.append(Case(id="saved-model/signature-unknown", reader="saved-model",
                    args=["graph", "run", "m", "--signature", "nope"], setup=_copy,
                    names="m/saved_model.pb", mentions=r"no signature 'nope'", quick=True))
    # An intermediate tensor of the inlined signature function, fetched by its name.
    out.append(Case(id="saved-model/fetch-intermediate", reader="saved-model",
                    args=["graph", "run", "m", "--feed", "x=x.npy", "--fetch",
                          "StatefulPartitionedCall/StatefulPartitionedCall/MatMul"],
                    setup=lambda ctx: (_copy(ctx), _feed(ctx)), expect="ok",
                    check=_answer(r"MatMul: float \[1,3\] \[0\.85714\d*, 1\.28571\d*, 1\.71428\d*\]"),
                    quick=True))
    out.append(Case(id="saved-model/fetch-unknown", reader="saved-model",
                    args=["graph", "run", "m", "--feed", "x=x.npy", "--fetch", "nope"],
                    setup=lambda ctx: (_copy(ctx), _feed(ctx)), names="m",
                    mentions=r"signature 'serving_default' has no output 'nope' \(outputs: s, y\)", quick=True))
    out.append(Case(id="saved-model/cluster", reader="saved-model", args=["cluster", "m"], setup=_copy,
                    expect="ok", quick=True))
    out.append(Case(id="saved-model/verify-index-bad-crc", reader="saved-model",
                    args=["graph", "run", "m", "--feed", "x=x.npy", "--fetch", "y"],
                    setup=lambda ctx: (_flip_w(ctx), _feed(ctx)), names=_DATA, mentions=r"CRC-32C",
                    quick=True))
    # A TF2 function graph's captured variable, assigned by the Placeholder's name.
    out.append(Case(id="saved-model/assign-capture", reader="saved-model",
                    args=["graph", "run", "f.pbtxt", "--feed", "x=x.npy", "--fetch", "y",
                          "--assign", "w/resource=w.npy"],
                    setup=_captured("f4"), expect="ok", check=_answer(r"y: float \[2\] \[3, -1\]"),
                    quick=True))
    out.append(Case(id="saved-model/assign-capture-wrong-dtype", reader="saved-model",
                    args=["graph", "run", "f.pbtxt", "--feed", "x=x.npy", "--fetch", "y",
                          "--assign", "w/resource=w.npy"],
                    setup=_captured("i4"), names="f.pbtxt", mentions=r"holds int32\[2\], the variable is float",
                    quick=True))
    out.append(Case(id="saved-model/capture-unassigned", reader="saved-model",
                    args=["graph", "run", "f.pbtxt", "--feed", "x=x.npy", "--fetch", "y"],
                    setup=_captured("f4"), names="f.pbtxt",
                    mentions=r"1 captured variable .* has no value: give --assign NAME=FILE.npy .*'w/resource'", quick=True))
    return out

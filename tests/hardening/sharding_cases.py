"""Shardings in HLO text: `sharding={...}` as XLA writes it (tile assignments in the explicit and
the iota form, partial replication, subgroups, tuples).

Collectives' replica_groups and source_target_pairs are read by the same small readers: text in
them that does not read (raw control bytes among the ids, an axis name of raw bytes in the
mesh-axes form) must be quoted escaped in the one line, never written raw to the terminal.

A hostile sharding (tile dims whose device count does not match the ids listed, a device twice,
a dims product past any machine, a malformed or non-permuting iota, a tiling of the wrong rank, a
device past num_partitions, nesting deep enough to exhaust a recursive reader) must give one
located error naming the module from `xlens print` and `xlens run`, never a crash, a hang or a
multi-gigabyte allocation. XLA's own shardings keep printing back verbatim.
"""

from harness import Case


def _module(sharding, header="", shape="f32[8,4]{1,0}"):
    return (f"HloModule m{header}\n\nENTRY %main (a: f32[8,4]) -> f32[8,4] {{\n"
            f"  %a = {shape} parameter(0), sharding={sharding}\n"
            f"  ROOT %n = {shape} negate(%a)\n}}\n")


def _case(name, text, command="print", expect="error", mentions=None, check=None, timeout=None):
    def setup(ctx):
        ctx.write("m.hlo", text)
    args = [command, "m.hlo"] + (["--inputs", "random"] if command == "run" else [])
    return Case(id=f"sharding/{command}/{name}", reader="sharding", args=args, setup=setup,
                expect=expect, names=None if expect == "ok" else "m.hlo", mentions=mentions,
                check=check, quick=True, timeout=timeout)


def _printed_back(sharding):
    def check(ctx, run):
        if run.exit_code == 0 and f"sharding={sharding}".encode() not in run.stdout:
            return "wrong-result", f"sharding={sharding} was not printed back verbatim"
        return None
    return check


HOSTILE = [
    # Tile dims that do not match the device ids listed.
    ("too-few-devices", "{devices=[2,2]0,1,2}", "", r"need 4 device ids"),
    ("too-many-devices", "{devices=[2,1]0,1,2}", "", r"more device ids are listed"),
    ("device-twice", "{devices=[2,2]0,1,2,2}", "", r"device 2 appears twice"),
    ("negative-device", "{devices=[2,1]0,-1}", "", r"negative"),
    # Dims products no machine has: refused before anything is allocated.
    ("huge-iota-product", "{devices=[100000,100000]<=[10000000000]}", "", r"more than 1048576"),
    ("huge-explicit-product", "{devices=[4294967296,4294967296]0}", "", r"more than 1048576"),
    ("dims-past-64-bits", "{devices=[99999999999999999999,1]0}", "", r"out of range"),
    ("thousand-tile-dims", "{devices=[" + ",".join(["1"] * 1000) + "]<=[1]}", "", r"at most 64"),
    # Malformed iota forms.
    ("iota-product-mismatch", "{devices=[4,2]<=[4]}", "", r"hold 4 devices but tile dims \[4,2\]"),
    ("iota-not-a-permutation", "{devices=[4,1]<=[2,2]T(0,0)}", "", r"not a permutation"),
    ("iota-short-permutation", "{devices=[4,1]<=[2,2]T(1)}", "", r"1 entries for 2 reshape dims"),
    ("iota-huge-transpose-dim", "{devices=[4,1]<=[2,2]T(1,99999999999)}", "",
     r"expected one of the reshape dims"),
    ("iota-unclosed", "{devices=[4,1]<=[4}", "", r"close the iota reshape dims"),
    ("iota-no-reshape", "{devices=[4,1]<=}", "", r"open the iota reshape dims"),
    # Shardings that do not fit their value or module.
    ("wrong-rank", "{devices=[4]<=[4]}", "", r"tiles 1 dims but the shape f32\[8,4\] has rank 2"),
    ("device-past-num-partitions", "{maximal device=7}", ", num_partitions=4",
     r"names device 7 but the module has num_partitions=4"),
    ("tuple-on-array", "{{replicated}, {replicated}}", "", r"not a tuple"),
    ("subgroups-past-tile-dims", "{devices=[2]0,1 last_tile_dims={manual, replicated}}", "",
     r"2 subgroup dims but its tile assignment only 1"),
    ("two-kinds", "{replicated manual}", "", r"two kinds"),
    ("unknown-attribute", "{devices=[4,1]<=[4] bogus}", "", r"unknown sharding attribute 'bogus'"),
    # A DEL byte where an attribute is expected: named as a byte, not quoted raw.
    ("del-byte", "{{\x7f\x00plicated}, {replicated}}", "", r"found byte 0x7F \(not HLO text\)"),
    # Nesting deep enough to overflow the stack of a reader that recursed into it.
    ("deep-nesting", "{" * 200000 + "}" * 200000, "", r"holds no tuples"),
]

GOOD = [
    "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
    "{devices=[2,2]<=[2,2]T(1,0)}",
    "{devices=[2,1,2]0,2,1,3 last_tile_dims={manual}}",
]


def _collective_module(attribute):
    return ("HloModule m, num_partitions=2\n\nadd {\n  a = f32[] parameter(0)\n"
            "  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n"
            "  p = f32[4] parameter(0)\n"
            f"  ROOT r = f32[4] {attribute}\n}}\n")


COLLECTIVES = [
    # A terminal escape and a bell among the ids.
    ("groups-raw-bytes", "all-reduce(p), channel_id=1, replica_groups={{0,1\x1bX\x07}}, "
     "use_global_device_ids=true, to_apply=add", r"replica_groups=\{\{0,1\\x1bX\\x07\}\}: expected ','"),
    # Groups that go on for kilobytes: the message quotes their start.
    ("groups-long", "all-reduce(p), channel_id=1, replica_groups={{0,1" + "x" * 6000 + "}}, "
     "use_global_device_ids=true, to_apply=add", r"replica_groups=\{\{0,1x+\.\.\. \(\d+ bytes\): expected ','"),
    # Groups of thousands of devices on two: the message quotes the groups' start.
    ("groups-of-thousands", "all-reduce(p), channel_id=1, replica_groups=[1,4096]<=[4096], "
     "use_global_device_ids=true, to_apply=add", r"replica_groups=\{\{0,1,2,[0-9,]*\.\.\. \(\d+ bytes\) names device 2"),
    ("pairs-raw-bytes", "collective-permute(p), channel_id=1, source_target_pairs={{0,1\x1bX}}",
     r"source_target_pairs=\{\{0,1\\x1bX\}\}: expected ','"),
    ("channel-raw-bytes", "all-reduce(p), channel_id=3\x0c\x1bX, replica_groups={{0,1}}, "
     "use_global_device_ids=true, to_apply=add", r"channel_id=3\\x0c\\x1bX: expected a non-negative integer"),
    # An axis the mesh does not have, named in raw bytes.
    ("mesh-axis-raw-bytes", "all-reduce(p), channel_id=1, replica_groups=mesh['x'=2] {'\x1bZ\x07'}, "
     "use_global_device_ids=true, to_apply=add", r"axis '\\x1bZ\\x07' is not in the mesh"),
]


def _shardy_module(axis):
    return ("HloModule m, num_partitions=2, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=2]>}}\n\n"
            "ENTRY e {\n  p = f32[4] parameter(0), frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, "
            f"[{{\\\"{axis}\\\"}}]>\"}}\n  ROOT n = f32[4] negate(p)\n}}\n")


def cases(shared, root_user):
    out = []
    # Shardy's annotation naming an axis of raw bytes (invalid UTF-8, a terminal escape).
    for name, axis, mentions in [("shardy-axis-raw-bytes", "\x97\x9e\x1bZ",
                                  r'no axis "\\x97\\x9e\\x1bZ"')]:
        def setup(ctx, text=_shardy_module(axis)):
            ctx.write("m.hlo", text.encode("latin-1"))
        out.append(Case(id=f"sharding/shardy/{name}", reader="sharding",
                        args=["opt", "m.hlo", "--passes=spmd-partitioning"], setup=setup,
                        names="m.hlo", mentions=mentions, quick=True, timeout=30))
    for name, attribute, mentions in COLLECTIVES:
        def setup(ctx, text=_collective_module(attribute)):
            ctx.write("m.hlo", text)
        out.append(Case(id=f"sharding/collective/{name}", reader="sharding",
                        args=["eval", "m.hlo", "--num_partitions=2", "--inputs", "random"], setup=setup,
                        names="m.hlo", mentions=mentions, quick=True, timeout=30))
    for name, sharding, header, mentions in HOSTILE:
        text = _module(sharding, header)
        out.append(_case(name, text, mentions=mentions, timeout=30))
        out.append(_case(name, text, "run", mentions=mentions, timeout=30))
    for i, sharding in enumerate(GOOD):
        out.append(_case(f"xla-text-{i}", _module(sharding, ", num_partitions=4"), expect="ok",
                         check=_printed_back(sharding)))
    return out

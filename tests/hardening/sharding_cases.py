"""Shardings in HLO text: `sharding={...}` as XLA writes it (tile assignments in the explicit and
the iota form, partial replication, subgroups, tuples).

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
    # Nesting deep enough to overflow the stack of a reader that recursed into it.
    ("deep-nesting", "{" * 200000 + "}" * 200000, "", r"holds no tuples"),
]

GOOD = [
    "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
    "{devices=[2,2]<=[2,2]T(1,0)}",
    "{devices=[2,1,2]0,2,1,3 last_tile_dims={manual}}",
]


def cases(shared, root_user):
    out = []
    for name, sharding, header, mentions in HOSTILE:
        text = _module(sharding, header)
        out.append(_case(name, text, mentions=mentions, timeout=30))
        out.append(_case(name, text, "run", mentions=mentions, timeout=30))
    for i, sharding in enumerate(GOOD):
        out.append(_case(f"xla-text-{i}", _module(sharding, ", num_partitions=4"), expect="ok",
                         check=_printed_back(sharding)))
    return out

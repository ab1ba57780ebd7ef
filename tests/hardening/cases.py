"""The ground the sweep covers: every reader and writer of xlens, each kind of hostile input.

Each function below returns the cases of one reader. A case says what it feeds xlens, which files
the command may write (everything else must stay as it was) and what a good answer is: an error
(exit 1 with one line that names the file or flag at fault), a result (exit 0, checked against a
known answer where there is one), or either. Where the issue or DESIGN.md does not say which, a
one-line error or a correct result are both clean.
"""

import os
import re
import struct

import craft
from harness import Case, all_checks

# The subcommands that read an HLO module, with what each needs around the module's path.
MODULE_COMMANDS = {
    "print": ["print"],
    "verify": ["verify"],
    "dot": ["dot"],
    "eval": ["eval"],
    "opt": ["opt"],
    "run": ["run"],
    "compile-llvm": ["compile", "--emit=llvm"],
    "compile-obj": ["compile", "--emit=obj", "-o", "out.o"],
    "compile-ptx": ["compile", "--emit=ptx"],
}
COMMAND_OUTPUTS = {"compile-obj": ("out.o",)}


def _files(**files):
    """A setup that writes `files` (name -> bytes or str; '/' makes directories)."""
    def setup(ctx):
        for name, data in files.items():
            ctx.write(name.replace("__", "/"), data)
    return setup


def _then(*setups):
    def setup(ctx):
        for s in setups:
            s(ctx)
    return setup


def _answer(pattern, label="the known answer"):
    """On exit 0, stdout must show `pattern` (a regex)."""
    def check(ctx, run):
        if run.exit_code == 0 and not re.search(pattern.encode(), run.stdout):
            shown = run.stdout.decode("utf-8", "replace").strip().splitlines()[:1]
            return "wrong-result", f"expected {label} /{pattern}/, got {shown}"
        return None
    return check


def _clean_stdout(ctx, run):
    """Names that came from a file reach the terminal escaped."""
    if re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", run.stdout):
        return "bad-message", "a raw control character from the input reached stdout"
    return None


_all = all_checks


def hlo_case(name, text, command="verify", expect="error", quick=False, extra=(), check=None,
             setup=None, **kw):
    data = text if isinstance(text, bytes) else text.encode()
    return Case(id=f"hlo-text/{command}/{name}", reader="hlo-text",
                args=MODULE_COMMANDS[command] + ["m.hlo"] + list(extra),
                setup=_then(_files(**{"m.hlo": data}), *([setup] if setup else [])),
                expect=expect, names=kw.pop("names", None if expect == "ok" else "m.hlo"),
                outputs=kw.pop("outputs", COMMAND_OUTPUTS.get(command, ())), quick=quick, check=check,
                **kw)


# ----------------------------------------------------------------------------------------------

def hlo_text_cases():
    cases = []
    junk = craft.junk(4096)
    broken = {
        "empty": b"",
        "whitespace": b"  \n\n\t\n",
        "comment-only": b"// nothing but a comment\n",
        "binary-junk": junk,
        "nul-bytes": craft.SQUARE.replace("multiply", "mul\0tiply").encode(),
        "nul-first": b"\0" + craft.SQUARE.encode(),
        "cut-utf8": craft.SQUARE.replace("HloModule square", "HloModule sq\xc3").encode("latin-1")[:-1],
        "escape-in-name": craft.SQUARE.replace("multiply(a, a)", "\x1b[2Jmultiply(a, a)").encode(),
        "unknown-opcode": craft.SQUARE.replace("multiply", "frobnicate").encode(),
        "truncated": craft.SQUARE.encode()[:60],
    }
    quick_ones = {("empty", "verify"), ("binary-junk", "eval"), ("nul-bytes", "print"),
                  ("escape-in-name", "verify"), ("cut-utf8", "verify"), ("empty", "run"),
                  ("binary-junk", "compile-llvm"), ("unknown-opcode", "opt")}
    for name, data in broken.items():
        for command in MODULE_COMMANDS:
            if name in ("whitespace", "comment-only", "truncated") and command not in ("verify", "run"):
                continue
            cases.append(hlo_case(name, data, command, quick=(name, command) in quick_ones))

    # Valid modules that are merely unusual: accepted (with the right answer) or refused cleanly.
    cases.append(hlo_case("crlf", craft.SQUARE.replace("\n", "\r\n"), "eval", expect="either",
                          check=_answer(r"\{1, 4, 9\}")))
    cases.append(hlo_case("bom", b"\xef\xbb\xbf" + craft.SQUARE.encode(), "eval", expect="either"))
    big_name = "n" * (1 << 20)
    for command in ("verify", "print", "dot", "opt"):
        cases.append(hlo_case("1mb-instruction-name", craft.SQUARE.replace("ROOT b", "ROOT " + big_name)
                              .replace("multiply(a, a)", "multiply(a, a)"), command, expect="either",
                              quick=command == "verify"))
    cases.append(hlo_case("1mb-module-name", craft.SQUARE.replace("square", big_name), "opt",
                          expect="either", extra=["--xla_dump_to=d"], outputs=("d",)))
    cases.append(hlo_case("1mb-name-in-error", craft.SQUARE.replace("multiply(a, a)", f"multiply(a, {big_name})"),
                          "verify"))
    for depth in (1000, 100000):
        cases.append(hlo_case(f"tuple-shape-depth-{depth}", craft.nested_tuple_shape(depth), "verify",
                              expect="either", quick=depth == 100000))
        cases.append(hlo_case(f"operand-depth-{depth}", craft.nested_operands(depth), "verify",
                              expect="either", quick=depth == 100000))
        cases.append(hlo_case(f"operand-depth-{depth}", craft.nested_operands(depth), "eval",
                              expect="either"))
        cases.append(hlo_case(f"operand-depth-{depth}", craft.nested_operands(depth), "print",
                              expect="either"))
    cases.append(hlo_case("tuple-shape-depth-1000", craft.nested_tuple_shape(1000), "eval", expect="either"))
    cases.append(hlo_case("wide-tuple-100000", craft.wide_tuple(100000), "verify", expect="either"))
    cases.append(hlo_case("paren-bomb", "HloModule p\nENTRY e {\n  ROOT r = " + "(" * 1000000 + "\n}\n",
                          "verify", quick=True))
    cases.append(hlo_case("brace-bomb", craft.SQUARE.replace("{1, 2, 3}", "{" * 1000000), "verify"))

    calls = craft.nested_calls(5000)
    for command in ("verify", "print", "eval", "opt", "run", "compile-llvm", "dot"):
        check = _answer(r"\b5000\b", "5000 (one per call)") if command in ("eval", "run") else None
        cases.append(hlo_case("5000-nested-calls", calls, command, expect="either", check=check,
                              quick=command == "eval", extra=["--reference"] if command == "run" else ()))

    # Element counts past 64 bits: refused by the verifier before anything is allocated.
    overflow = "4294967296,4294967296,16"
    overflows = {
        "broadcast-2^68": craft.module("b", f"c = f32[] constant(1)\nROOT b = f32[{overflow}] broadcast(c), dimensions={{}}"),
        "iota-2^68": craft.module("i", f"ROOT i = s32[{overflow}] iota(), iota_dimension=0"),
        "constant-2^68": craft.module("c", f"ROOT c = f32[{overflow}] constant({{}})"),
        "parameter-2^68": craft.module("p", f"ROOT p = f32[{overflow}] parameter(0)"),
        "reshape-2^68": craft.module("r", f"p = f32[16] parameter(0)\nROOT r = f32[{overflow}] reshape(p)"),
        "bytes-2^64": craft.module("y", "c = f64[] constant(1)\nROOT b = f64[2305843009213693952,8] broadcast(c), dimensions={}"),
    }
    for name, text in overflows.items():
        for command in ("verify", "eval", "opt", "run", "compile-llvm"):
            cases.append(hlo_case(name, text, command, quick=(command in ("eval", "run") and name == "broadcast-2^68")
                                  or (command == "verify" and name == "bytes-2^64")))
    # Counts that fit 64 bits but not in memory: refused up front, not by running out.
    four_tb = craft.module("big", "c = f32[] constant(1)\nROOT b = f32[1000000000000] broadcast(c), dimensions={}")
    cases.append(hlo_case("4tb-broadcast", four_tb, "verify", expect="either"))
    for command in ("eval", "run", "opt", "compile-llvm"):
        cases.append(hlo_case("4tb-broadcast", four_tb, command,
                              expect="error" if command in ("eval", "run") else "either",
                              quick=command == "eval"))
    four_tb_param = craft.module("bigp", "p = f32[1000000000000] parameter(0)\nROOT n = f32[1000000000000] negate(p)")
    for command in ("eval", "run"):
        cases.append(hlo_case("4tb-parameter", four_tb_param, command, quick=command == "run",
                              names=None))
    big_const = craft.module("fold", "c = f32[] constant(1)\nb = f32[100000,100000] broadcast(c), dimensions={}\n"
                                     "z = f32[] constant(0)\nROOT r = f32[] reduce(b, z), dimensions={0,1}, to_apply=add",
                             craft.ADD_F32)
    cases.append(hlo_case("40gb-folded-constant", big_const, "opt", expect="either"))

    # Work without bound: an infinite while, a window of 2^62 elements.
    for command in ("opt", "compile-llvm", "verify"):
        cases.append(hlo_case("infinite-while", craft.INFINITE_WHILE, command,
                              expect="either", quick=command == "opt"))
    # Running it cannot end by itself: --timeout must end it, with a message, in both engines.
    for command in ("eval", "run"):
        cases.append(hlo_case("infinite-while-timeout", craft.INFINITE_WHILE, command,
                              extra=["--timeout", "1"], names="--timeout", quick=command == "eval"))
    two62 = 1 << 62
    window = craft.huge_window(two62, two62, 0)
    for command in ("verify", "eval", "run", "opt", "compile-llvm"):
        cases.append(hlo_case("reduce-window-2^62", window, command, expect="either"))
    cases.append(hlo_case("reduce-window-pad-overflow", craft.huge_window(1, 1 << 62, 1 << 62, out=8),
                          "verify"))
    cases.append(hlo_case("reduce-window-size-0", craft.huge_window(0, 0, 0, out=9), "verify"))
    cases.append(hlo_case("reduce-window-stride-0",
                          craft.huge_window(1, 0, 0, out=8).replace("stride=1", "stride=0"), "verify",
                          quick=True))

    # Absurd shapes.
    shapes = {
        "rank-2000": "f32[" + ",".join(["1"] * 2000) + "]",
        "dim-int64-max": "f32[9223372036854775807]",
        "dim-negative": "f32[-1]",
        "dim-20-digits": "f32[99999999999999999999]",
        "layout-repeated": "f32[2,3]{0,0}",
        "layout-100000": "f32[2]{" + ",".join(["0"] * 100000) + "}",
        "dynamic-dim-huge": "f32[<=9223372036854775807]",
    }
    for name, shape in shapes.items():
        text = craft.module("s", f"ROOT p = {shape} parameter(0)")
        cases.append(hlo_case(name, text, "verify", expect="either", quick=name == "dim-negative"))
        # A random input the shape cannot have is refused by its shape, which names no file.
        cases.append(hlo_case(name, text, "eval", expect="either",
                              names=None if name == "dynamic-dim-huge" else "m.hlo"))
    cases.append(hlo_case("s8-literal-300", craft.module("l", "ROOT c = s8[] constant(300)"), "verify"))
    cases.append(hlo_case("f32-literal-1e400", craft.module("l", "ROOT c = f32[] constant(1e400)"), "eval",
                          expect="either"))
    cases.append(hlo_case("parameter-number-2^62",
                          craft.module("p", "ROOT p = f32[] parameter(4611686018427387904)"), "eval"))
    cases.append(hlo_case("shift-count-huge",
                          craft.module("sh", "a = s32[] constant(1)\nb = s32[] constant(-2147483648)\n"
                                             "ROOT s = s32[] shift-left(a, b)"), "eval", expect="ok",
                          check=_answer(r"\b0\b")))
    cases.append(hlo_case("int-min-divided-by-minus-1",
                          craft.module("dv", "a = s32[] constant(-2147483648)\nb = s32[] constant(-1)\n"
                                             "ROOT d = s32[] divide(a, b)"), "eval", expect="ok",
                          check=_answer(r"-2147483648"), quick=True))
    cases.append(hlo_case("remainder-by-minus-1",
                          craft.module("dv", "a = s32[] parameter(0)\nb = s32[] constant(-1)\n"
                                             "ROOT d = s32[] remainder(a, b)"), "run", expect="ok",
                          extra=["--reference"]))
    return cases


# ----------------------------------------------------------------------------------------------

def _u64_cases():
    """dynamic-slice and dynamic-update-slice with u64 start indices of 2^63 and more: clamped
    like any index past the end (XLA reads them unsigned), in the evaluator and in compiled code."""
    cases = []
    x = craft.npy_f32([0, 1, 2, 3, 4, 5, 6, 7])
    for index in (1 << 63, (1 << 64) - 1):
        inputs = {"in__arg0.npy": x, "in__arg1.npy": craft.npy_u64_scalar(index)}
        for command, extra in (("eval", []), ("run", ["--reference"])):
            cases.append(Case(
                id=f"hlo-text/{command}/dynamic-slice-u64-{index}", reader="hlo-text",
                args=[command, "m.hlo", "--inputs", "in"] + extra,
                setup=_files(**{"m.hlo": craft.DYNAMIC_SLICE_U64}, **inputs), expect="ok",
                check=_answer(r"\{6, 7\}", "{6, 7} (the index clamped to 6)"),
                quick=command == "run" and index == 1 << 63))
            cases.append(Case(
                id=f"hlo-text/{command}/dynamic-update-slice-u64-{index}", reader="hlo-text",
                args=[command, "m.hlo", "--inputs", "in"] + extra,
                setup=_files(**{"m.hlo": craft.DYNAMIC_UPDATE_SLICE_U64}, **inputs), expect="ok",
                check=_answer(r"\{0, 1, 2, 3, 4, 5, 10, 20\}", "the update at index 6")))
    return cases


# ----------------------------------------------------------------------------------------------

def module_path_cases(root_user):
    cases = []

    def special(kind):
        def setup(ctx):
            path = ctx.path("m.hlo")
            if kind == "dir":
                os.mkdir(path)
            elif kind == "fifo":
                craft.fifo(path)
            elif kind == "zero":
                craft.char_device(path, 1, 5)
            elif kind == "null":
                craft.char_device(path, 1, 3)
            elif kind == "loop":
                os.symlink("m2.hlo", path)
                os.symlink("m.hlo", ctx.path("m2.hlo"))
            elif kind == "dangling":
                os.symlink("nowhere.hlo", path)
            elif kind == "sparse-3g":
                with open(path, "wb") as f:
                    f.truncate(3 << 30)
            elif kind == "missing":
                pass
        return setup

    kinds = ["dir", "fifo", "zero", "null", "loop", "dangling", "missing", "sparse-3g"]
    # What the message must say, in words, beside the path.
    said = {"dir": "director", "fifo": "fifo|pipe", "zero": "device|special|not a regular",
            "null": "device|special|not a regular", "loop": "symbolic link|symlink|loop|levels",
            "dangling": "no such|not found|does not exist|missing",
            "missing": "no such|not found|does not exist|missing",
            "sparse-3g": "too (large|big)|larger|limit|GiB"}
    for kind in kinds:
        for command in MODULE_COMMANDS:
            if kind in ("dangling", "missing", "null", "sparse-3g") and command not in ("verify", "run", "eval"):
                continue
            cases.append(Case(id=f"module-path/{command}/{kind}", reader="module-path",
                              args=MODULE_COMMANDS[command] + ["m.hlo"], setup=special(kind),
                              names="m.hlo", mentions=said[kind], outputs=COMMAND_OUTPUTS.get(command, ()),
                              quick=(kind, command) in {("fifo", "verify"), ("dir", "eval"),
                                                        ("zero", "print"), ("loop", "run"),
                                                        ("fifo", "compile-llvm"), ("sparse-3g", "verify")}))

    long_missing = "/".join(["p" * 200] * 25) + "/m.hlo"
    cases.append(Case(id="module-path/verify/5000-char-missing", reader="module-path",
                      args=["verify", long_missing], names="ppppp", quick=True))

    def long_existing(ctx):
        ctx.long = craft.long_path_file(ctx.work, 5000, craft.SQUARE.encode())
    cases.append(Case(id="module-path/verify/5000-char-existing", reader="module-path",
                      args=lambda ctx: ["verify", ctx.long], setup=long_existing, names="ddddd",
                      expect="either"))
    cases.append(Case(id="module-path/eval/5000-char-existing", reader="module-path",
                      args=lambda ctx: ["eval", ctx.long], setup=long_existing, names="ddddd",
                      expect="either", check=_answer(r"\{1, 4, 9\}")))
    strange = "m\n\x1b[31m\xe2\x82.hlo"
    cases.append(Case(id="module-path/verify/control-chars-in-name", reader="module-path",
                      args=["verify", strange],
                      setup=lambda ctx: open(os.path.join(ctx.work, strange), "wb").write(b"junk"),
                      names=None, quick=True))
    cases.append(Case(id="module-path/verify/control-chars-missing", reader="module-path",
                      args=["verify", "nope\x1b]0;title\x07.hlo"], names=None))
    unreadable_reason = "root reads files whatever their permission bits say"
    cases.append(Case(id="module-path/verify/unreadable-file", reader="module-path",
                      args=["verify", "m.hlo"], names="m.hlo",
                      setup=lambda ctx: (ctx.write("m.hlo", craft.SQUARE), os.chmod(ctx.path("m.hlo"), 0)),
                      root_skip=unreadable_reason if root_user else None))
    cases.append(Case(id="module-path/verify/unreadable-dir", reader="module-path",
                      args=["verify", "d/m.hlo"], names="d/m.hlo",
                      setup=lambda ctx: (ctx.write("d/m.hlo", craft.SQUARE), os.chmod(ctx.path("d"), 0)),
                      root_skip=unreadable_reason if root_user else None))
    cases.append(Case(id="module-path/verify/stdin-dash", reader="module-path", args=["verify", "-"],
                      expect="either"))
    cases.append(Case(id="module-path/verify/max-input-size-env", reader="module-path",
                      args=["verify", "m.hlo"], setup=_files(**{"m.hlo": craft.SQUARE}),
                      env={"XLENS_MAX_INPUT_SIZE": "10"}, expect="either", names="m.hlo"))
    cases.append(Case(id="module-path/verify/max-input-size-garbage", reader="module-path",
                      args=["verify", "m.hlo"], setup=_files(**{"m.hlo": craft.SQUARE}),
                      env={"XLENS_MAX_INPUT_SIZE": "lots"}, expect="either"))
    return cases


# ----------------------------------------------------------------------------------------------

def npy_cases():
    cases = []
    good = craft.npy_f32([1, 2, 3])
    f32_12 = struct.pack("<3f", 1, 2, 3)
    broken = {
        "bad-magic": b"\x93NUMPZ" + good[6:],
        "empty": b"",
        "magic-only": b"\x93NUMPY",
        "shape-lies": craft.npy("<f4", (1000,), f32_12),
        "truncated-data": good[:-4],
        "trailing-data": good + b"\0" * 1000000,
        "huge-header-length": b"\x93NUMPY\x02\x00\xf0\xff\xff\xff{}",
        "huge-real-header": craft.npy("<f4", (3,), f32_12, version=(3, 0),
                                      header="{'descr': '<f4', 'fortran_order': False, 'shape': (3,)"
                                             + " " * (64 << 20) + "}"),
        "fortran-order": craft.npy("<f4", (3,), f32_12, fortran=True),
        "unknown-dtype": craft.npy("<q9", (3,), f32_12),
        "object-dtype": craft.npy("|O", (3,), b"\0" * 24),
        "unicode-dtype": craft.npy("<U1", (3,), f32_12),
        "big-endian": craft.npy(">f4", (3,), f32_12),
        "wrong-dtype": craft.npy("<i4", (3,), f32_12),
        "wrong-shape": craft.npy_f32([1, 2]),
        "shape-2^40": craft.npy("<f4", (1 << 40,), f32_12),
        "shape-overflow": craft.npy("<f4", (1 << 62, 4), f32_12),
        "header-nul": craft.npy("<f4", (3,), f32_12, header="{'descr': '<f4\0', 'fortran_order': False, 'shape': (3,), }"),
        "header-escape": craft.npy("<f4", (3,), f32_12, header="{'descr': '\x1b[2J', 'fortran_order': False, 'shape': (3,), }"),
        "header-latin1": craft.npy("<f4", (3,), f32_12, header=b"{'descr': '\xff\xfe', 'fortran_order': False, 'shape': (3,), }"),
        "header-deep": craft.npy("<f4", (3,), f32_12, header="{'descr': '<f4', 'fortran_order': False, 'shape': "
                                 + "(" * 100000 + "}"),
        "header-big-int": craft.npy("<f4", (3,), f32_12, header="{'descr': '<f4', 'fortran_order': False, 'shape': ("
                                    + "9" * 100000 + ",), }"),
    }
    quick_ones = {"bad-magic", "shape-lies", "huge-header-length", "fortran-order", "object-dtype",
                  "shape-2^40", "header-escape"}
    for name, data in broken.items():
        for command in ("eval", "run"):
            if command == "run" and name not in ("bad-magic", "truncated-data", "shape-2^40", "wrong-shape"):
                continue
            expect = "either" if name == "huge-real-header" else "error"
            cases.append(Case(id=f"npy/{command}/{name}", reader="npy",
                              args=[command, "m.hlo", "--inputs", "in"],
                              setup=_files(**{"m.hlo": craft.ADD_PARAM, "in__arg0.npy": data}),
                              expect=expect, names="arg0.npy",
                              quick=command == "eval" and name in quick_ones))

    def special(kind):
        def setup(ctx):
            ctx.write("m.hlo", craft.ADD_PARAM)
            os.mkdir(ctx.path("in"))
            path = ctx.path("in/arg0.npy")
            if kind == "dir":
                os.mkdir(path)
            elif kind == "fifo":
                craft.fifo(path)
            elif kind == "zero":
                craft.char_device(path, 1, 5)
            elif kind == "loop":
                os.symlink("arg0.npy", path)
            elif kind == "sparse-3g":
                with open(path, "wb") as f:
                    f.write(craft.npy("<f4", (805306368,), b""))
                    f.truncate(3 << 30)
        return setup

    for kind in ("dir", "fifo", "zero", "loop", "missing", "sparse-3g"):
        said = {"dir": "director", "fifo": "fifo|pipe", "zero": "device|special|not a regular",
                "loop": "symbolic link|symlink|loop|levels", "missing": "no such|not found|does not exist|missing",
                "sparse-3g": "too (large|big)|larger|limit|GiB"}
        cases.append(Case(id=f"npy/eval/arg0-{kind}", reader="npy", args=["eval", "m.hlo", "--inputs", "in"],
                          setup=special(kind), names="arg0.npy", mentions=said[kind],
                          quick=kind in ("fifo", "zero")))
    cases.append(Case(id="npy/eval/inputs-is-a-file", reader="npy", args=["eval", "m.hlo", "--inputs", "in"],
                      setup=_files(**{"m.hlo": craft.ADD_PARAM, "in": "x"}), names="in"))
    cases.append(Case(id="npy/eval/inputs-missing", reader="npy", args=["eval", "m.hlo", "--inputs", "nowhere"],
                      setup=_files(**{"m.hlo": craft.ADD_PARAM}), names="nowhere", quick=True))
    # A directory named 'random' holds the inputs: it is read, not shadowed by the keyword.
    cases.append(Case(id="npy/eval/directory-named-random", reader="npy",
                      args=["eval", "m.hlo", "--inputs", "random"],
                      setup=_files(**{"m.hlo": craft.ADD_PARAM, "random__arg0.npy": craft.npy_f32([10, 20, 30])}),
                      expect="either", check=_answer(r"\{11, 22, 33\}", "the values of random/arg0.npy"),
                      quick=True))
    cases.append(Case(id="npy/run/directory-named-random", reader="npy",
                      args=["run", "m.hlo", "--inputs", "random"],
                      setup=_files(**{"m.hlo": craft.ADD_PARAM, "random__arg0.npy": craft.npy_f32([10, 20, 30])}),
                      expect="either", check=_answer(r"\{11, 22, 33\}", "the values of random/arg0.npy")))
    cases.append(Case(id="npy/eval/good", reader="npy", args=["eval", "m.hlo", "--inputs", "in"],
                      setup=_files(**{"m.hlo": craft.ADD_PARAM, "in__arg0.npy": good}), expect="ok",
                      check=_answer(r"\{2, 4, 6\}"), quick=True))
    cases += _u64_cases()
    return cases


# ----------------------------------------------------------------------------------------------

def outputs_cases():
    cases = []

    def bf16_check(ctx, run):
        if not any(n.startswith("out1") for n in os.listdir(ctx.path("out")) if os.path.isdir(ctx.path("out"))):
            return "lost-data", "the bf16 output (out1) was not written"
        return None

    for command in ("eval", "run"):
        cases.append(Case(id=f"outputs/{command}/bf16-between-f32", reader="outputs",
                          args=[command, "m.hlo", "--outputs", "out"],
                          setup=_files(**{"m.hlo": craft.BF16_TUPLE}), expect="either",
                          outputs=("out",), must_exist=("out/out0.npy", "out/out2.npy"),
                          check=bf16_check, quick=command == "eval"))

    def link_check(ctx, run):
        if not os.path.islink(ctx.path("out/out0.npy")):
            return "fs-touched", "the symlink out/out0.npy was replaced instead of its target"
        if run.exit_code == 0 and not ctx.read("target.npy").startswith(b"\x93NUMPY"):
            return "lost-data", "the link's target does not hold the output"
        return None

    def linked(ctx):
        ctx.write("m.hlo", craft.SQUARE)
        ctx.write("target.npy", "old")
        os.mkdir(ctx.path("out"))
        os.symlink("../target.npy", ctx.path("out/out0.npy"))
    cases.append(Case(id="outputs/eval/out0-symlink", reader="outputs", args=["eval", "m.hlo", "--outputs", "out"],
                      setup=linked, expect="ok", outputs=("target.npy",), check=link_check, quick=True))

    def special(kind):
        def setup(ctx):
            ctx.write("m.hlo", craft.SQUARE)
            os.mkdir(ctx.path("out"))
            path = ctx.path("out/out0.npy")
            if kind == "fifo":
                craft.fifo(path)
            elif kind == "dir":
                os.mkdir(path)
            elif kind == "null":
                craft.char_device(path, 1, 3)
        return setup
    cases.append(Case(id="outputs/eval/out0-fifo-no-reader", reader="outputs",
                      args=["eval", "m.hlo", "--outputs", "out"], setup=special("fifo"), expect="either",
                      names="out0.npy", quick=True))
    cases.append(Case(id="outputs/eval/out0-directory", reader="outputs",
                      args=["eval", "m.hlo", "--outputs", "out"], setup=special("dir"), names="out0.npy"))
    cases.append(Case(id="outputs/eval/out0-dev-null", reader="outputs",
                      args=["eval", "m.hlo", "--outputs", "out"], setup=special("null"), expect="ok"))
    cases.append(Case(id="outputs/eval/outputs-is-a-file", reader="outputs",
                      args=["eval", "m.hlo", "--outputs", "out"],
                      setup=_files(**{"m.hlo": craft.SQUARE, "out": "keep me"}), names="out", quick=True))
    cases.append(Case(id="outputs/eval/outputs-under-a-file", reader="outputs",
                      args=["eval", "m.hlo", "--outputs", "f/out"],
                      setup=_files(**{"m.hlo": craft.SQUARE, "f": "keep me"}), names="f/out"))
    cases.append(Case(id="outputs/run/outputs-nested-missing", reader="outputs",
                      args=["run", "m.hlo", "--outputs", "a/b/c"], setup=_files(**{"m.hlo": craft.SQUARE}),
                      expect="either", outputs=("a",), names="a/b/c"))
    cases.append(Case(id="outputs/eval/overwrite-keeps-old-on-failure", reader="outputs",
                      args=["eval", "m.hlo", "--outputs", "out"],
                      setup=_files(**{"m.hlo": craft.BF16_TUPLE.replace("bf16[2]", "f32[3]"),
                                      "out__out0.npy": craft.npy_f32([7])}), expect="error", names="m.hlo"))
    return cases


# ----------------------------------------------------------------------------------------------

WRITERS = {
    "dot": (["dot", "m.hlo", "-o"], ""),
    "compile-llvm": (["compile", "--emit=llvm", "m.hlo", "-o"], ""),
    "compile-obj": (["compile", "--emit=obj", "m.hlo", "-o"], ""),
    "run-trace": (["run", "m.hlo", "--trace"], ""),
}


def output_path_cases():
    cases = []
    for writer, (args, _) in WRITERS.items():
        def mk(name, target, setup, expect, outputs=(), check=None, quick=False, names=None):
            cases.append(Case(id=f"output-path/{writer}/{name}", reader="output-path", args=args + [target],
                              setup=_then(_files(**{"m.hlo": craft.SQUARE}), setup), expect=expect,
                              outputs=outputs, check=check, quick=quick, names=names))

        mk("dev-null", "devnull", lambda ctx: craft.char_device(ctx.path("devnull"), 1, 3), "ok",
           quick=writer in ("dot", "run-trace"))

        def link_setup(ctx):
            ctx.write("target.txt", "old")
            os.symlink("target.txt", ctx.path("out.txt"))

        def link_check(ctx, run):
            if not os.path.islink(ctx.path("out.txt")):
                return "fs-touched", "the symlink out.txt was replaced instead of its target"
            if run.exit_code == 0 and ctx.read("target.txt") == b"old":
                return "lost-data", "the link's target was not written"
            return None
        mk("symlink", "out.txt", link_setup, "ok", outputs=("target.txt",), check=link_check,
           quick=writer == "compile-llvm")
        mk("fifo-no-reader", "fifo", lambda ctx: craft.fifo(ctx.path("fifo")), "either", names="fifo",
           quick=writer in ("dot", "run-trace"))
        mk("directory", "d", lambda ctx: os.mkdir(ctx.path("d")), "error", names="d",
           quick=writer == "compile-obj")
        mk("missing-directory", "no/such/dir/out.txt", lambda ctx: None, "either", names="no/such/dir",
           outputs=("no",))
        mk("5000-char-path", "/".join(["q" * 200] * 25) + "/out.txt", lambda ctx: None, "error", names="qqqq")
        mk("under-a-file", "f/out.txt", lambda ctx: ctx.write("f", "keep"), "error", names="f/out.txt")

        # The module is broken: the file the user had stays as it was.
        cases.append(Case(id=f"output-path/{writer}/keeps-old-on-failure", reader="output-path",
                          args=args + ["keep.txt"],
                          setup=_files(**{"m.hlo": "HloModule broken\n", "keep.txt": "precious"}),
                          names="m.hlo", quick=writer == "dot"))
    cases.append(Case(id="output-path/compile-obj/no-output", reader="output-path",
                      args=["compile", "--emit=obj", "m.hlo"], setup=_files(**{"m.hlo": craft.SQUARE}),
                      names="-o"))
    cases.append(Case(id="output-path/demo/out-is-a-file", reader="output-path", args=["demo", "--out", "f"],
                      setup=_files(f="keep"), names="f", quick=True))
    cases.append(Case(id="output-path/demo/out-fresh", reader="output-path", args=["demo", "--out", "demo"],
                      expect="ok", outputs=("demo",)))
    cases.append(Case(id="output-path/demo/no-out", reader="output-path", args=["demo"], expect="ok",
                      outputs=("*",)))
    return cases


# ----------------------------------------------------------------------------------------------

def flags_cases():
    cases = []
    base = _files(**{"m.hlo": craft.SQUARE})

    def flag(name, env=None, extra=(), setup=None, expect="error", names=None, quick=False,
             outputs=("d",), command="opt", text=None, timeout=None):
        s = _files(**{"m.hlo": text}) if text else base
        cases.append(Case(id=f"flags/{command}/{name}", reader="flags",
                          args=[command, "m.hlo"] + list(extra), env=env or {},
                          setup=_then(s, setup) if setup else s, expect=expect, names=names,
                          quick=quick, outputs=outputs, timeout=timeout))

    flag("unknown-in-XLA_FLAGS", env={"XLA_FLAGS": "--xla_frobnicate=1"}, names="xla_frobnicate", quick=True)
    flag("unknown-in-TF_XLA_FLAGS", env={"TF_XLA_FLAGS": "--tf_xla_frobnicate=1"}, names="tf_xla_frobnicate")
    flag("unknown-on-command-line", extra=["--xla_frobnicate"], names="xla_frobnicate")
    flag("xla-flag-in-TF_XLA_FLAGS", env={"TF_XLA_FLAGS": "--xla_dump_to=d"}, names="xla_dump_to")
    flag("unterminated-quote", env={"XLA_FLAGS": "--xla_dump_to=\"d"}, names="quote")
    flag("escape-in-value", env={"XLA_FLAGS": "--xla_frob=\x1b[2J"}, quick=True)
    flag("flags-file-with-errors", env={"XLA_FLAGS": "{work}/flags.txt"},
         setup=_files(**{"flags.txt": "--xla_dump_to=d\nnot-a-flag\n--xla_nope=1\n"}), names="flags.txt",
         quick=True)
    flag("flags-file-directory", env={"XLA_FLAGS": "{work}/flagsdir"},
         setup=lambda ctx: os.mkdir(ctx.path("flagsdir")), names="flagsdir")
    flag("flags-file-fifo", env={"XLA_FLAGS": "{work}/flagsfifo"},
         setup=lambda ctx: craft.fifo(ctx.path("flagsfifo")), names="flagsfifo", quick=True)
    flag("flags-file-dev-zero", env={"XLA_FLAGS": "{work}/zero"},
         setup=lambda ctx: craft.char_device(ctx.path("zero"), 1, 5), names="zero")
    flag("flags-file-missing", env={"XLA_FLAGS": "{work}/nope.txt"}, names="nope.txt")
    flag("flags-file-3g-sparse", env={"XLA_FLAGS": "{work}/big.txt"},
         setup=lambda ctx: open(ctx.path("big.txt"), "wb").truncate(3 << 30), names="big.txt")
    # Linux caps one environment string at 128 KiB; this is close to it.
    flag("120kb-of-flags", env={"XLA_FLAGS": " ".join(["--xla_dump_hlo_as_text=false"] * 4000)}, expect="ok")
    flag("120kb-flags-file", env={"XLA_FLAGS": "{work}/many.txt"},
         setup=_files(**{"many.txt": "\n".join(["--xla_dump_hlo_as_text=false"] * 100000)}), expect="ok")
    flag("opt-level-20-digits", extra=["--xla_backend_optimization_level=99999999999999999999"],
         names="xla_backend_optimization_level", command="run", outputs=())
    flag("opt-level-negative", extra=["--xla_backend_optimization_level=-1"], names="xla_backend_optimization_level",
         command="compile", outputs=())
    flag("bool-garbage", extra=["--xla_dump_hlo_as_text=maybe"], names="xla_dump_hlo_as_text")
    flag("disable-unknown-pass", extra=["--xla_disable_hlo_passes=no-such-pass"], names="no-such-pass")
    flag("reduce-precision-garbage", extra=["--xla_reduce_precision=x,y,z"], names="xla_reduce_precision")
    flag("invalid-regex", extra=["--xla_dump_to=d", "--xla_dump_hlo_pass_re=("], names="xla_dump_hlo_pass_re",
         quick=True)
    nested = "(" * 20000 + "a" + ")" * 20000
    flag("regex-20000-nested-groups", extra=["--xla_dump_to=d", f"--xla_dump_hlo_pass_re={nested}"],
         expect="either", quick=True)
    flag("regex-20000-nested-groups-env", env={"XLA_FLAGS": f"--xla_dump_to=d --xla_dump_hlo_module_re={nested}"},
         expect="either")
    flag("regex-catastrophic-module-name", extra=["--xla_dump_to=d", "--xla_dump_hlo_module_re=(a+)+c"],
         text=craft.SQUARE.replace("square", "a" * 40 + "b"), expect="either", quick=True)
    flag("regex-catastrophic-pass-name", extra=["--xla_dump_to=d", "--xla_dump_hlo_pass_re=(.*.*)*x"],
         expect="either")
    flag("regex-50000-char-module-name", extra=["--xla_dump_to=d", "--xla_dump_hlo_module_re=m+$"],
         text=craft.SQUARE.replace("square", "m" * 50000), expect="either", quick=True)
    flag("regex-backreference-bomb", extra=["--xla_dump_to=d", r"--xla_dump_hlo_module_re=^(\w+\s?)*$"],
         text=craft.SQUARE.replace("square", "w" * 5000 + "_"), expect="either")
    return cases


# ----------------------------------------------------------------------------------------------

def dump_cases():
    cases = []
    base = _files(**{"m.hlo": craft.SQUARE})

    def dump(name, setup=None, extra=(), env=None, expect="ok", outputs=("d",), check=None, quick=False,
             parallel=1, names=None):
        cases.append(Case(id=f"dump/opt/{name}", reader="dump", args=["opt", "m.hlo", "--xla_dump_to=d"] + list(extra),
                          setup=_then(base, setup) if setup else base, env=env or {}, expect=expect,
                          outputs=outputs, check=check, quick=quick, parallel=parallel, names=names))

    dump("file-where-the-dir-should-be", lambda ctx: ctx.write("d", "keep"), outputs=(), quick=True)
    dump("under-a-file", lambda ctx: ctx.write("f", "keep"), extra=["--xla_dump_to=f/sub"], outputs=())
    dump("dir-is-dev-null", lambda ctx: craft.char_device(ctx.path("d"), 1, 3), outputs=())
    dump("fifo-named-manifest.json", lambda ctx: (os.mkdir(ctx.path("d")), craft.fifo(ctx.path("d/manifest.json"))),
         outputs=("d/module_*",), quick=True)
    dump("manifest-is-a-directory", lambda ctx: os.makedirs(ctx.path("d/manifest.json")), outputs=("d/module_*",))
    dump("manifest-symlink-loop", lambda ctx: (os.mkdir(ctx.path("d")), os.symlink("manifest.json", ctx.path("d/manifest.json"))),
         outputs=("d/module_*",))
    dump("corrupt-manifest-1e400", lambda ctx: ctx.write("d/manifest.json",
         '{"format": 1, "modules": [{"id": 1e400, "name": "x", "stages": [{"step": 1e400, "pipeline": "p", '
         '"pass": "q", "changed": false, "wall_ns": 1e400}]}]}'), quick=True)
    dump("corrupt-manifest-junk", lambda ctx: ctx.write("d/manifest.json", craft.junk(1000)))
    dump("manifest-deeply-nested", lambda ctx: ctx.write("d/manifest.json", "[" * 1000000))
    dump("manifest-3g-sparse", lambda ctx: (os.mkdir(ctx.path("d")), open(ctx.path("d/manifest.json"), "wb").truncate(3 << 30)))
    dump("manifest-wrong-types", lambda ctx: ctx.write("d/manifest.json",
         '{"format": "one", "modules": {"id": []}}'))
    dump("5000-char-dir", extra=["--xla_dump_to=" + "/".join(["r" * 200] * 25)], outputs=("r*",))
    dump("html-with-TMPDIR-missing", extra=["--xla_dump_hlo_as_html"], env={"TMPDIR": "{root}/no-such-tmp"},
         quick=True)
    dump("html-dot-text", extra=["--xla_dump_hlo_as_html", "--xla_dump_hlo_as_dot", "--xla_dump_hlo_pass_re=.*"])
    cases.append(Case(id="dump/opt/html-without-dump-to-TMPDIR-missing", reader="dump",
                      args=["opt", "m.hlo", "--xla_dump_hlo_as_html"], setup=base,
                      env={"TMPDIR": "{root}/no-such-tmp"}, expect="either", outputs=("*",)))

    def distinct_modules(ctx, runs):
        import json
        names = [n for n in os.listdir(ctx.path("d")) if n.endswith(".before_optimizations.txt")]
        numbers = {n.split(".", 1)[0] for n in names}
        if len(numbers) < len(runs):
            return "lost-data", f"{len(runs)} compiles left {len(numbers)} distinct module numbers"
        try:
            with open(ctx.path("d/manifest.json")) as f:
                manifest = json.load(f)
            listed = len(manifest.get("modules", []))
        except (OSError, ValueError) as e:
            return "lost-data", f"manifest.json unreadable after concurrent compiles: {e}"
        if listed < len(runs):
            return "lost-data", f"manifest.json lists {listed} of {len(runs)} concurrent compiles"
        return None
    dump("4-concurrent-compiles", parallel=4, check=distinct_modules, quick=True)
    dump("8-concurrent-compiles-pass-dumps", parallel=8, extra=["--xla_dump_hlo_pass_re=.*"], check=distinct_modules)
    return cases


# ----------------------------------------------------------------------------------------------

def trace_cases(shared):
    cases = []

    def trace(name, data=None, setup=None, expect="either", check=_clean_stdout, quick=False, file="t.json",
              extra=(), timeout=None, names="t"):
        s = _files(**{file: data}) if data is not None else setup
        cases.append(Case(id=f"trace/summary/{name}", reader="trace", args=["trace", "summary", file] + list(extra),
                          setup=s, expect=expect, check=check, quick=quick, names=names, timeout=timeout))

    ev = craft.kernel_event
    trace("valid", craft.trace_json([ev()]), expect="ok", quick=True)
    trace("1e400-ts", craft.trace_json([ev()]).replace(b'"ts": 0', b'"ts": 1e400'), quick=True)
    trace("1e400-dur", craft.trace_json([ev()]).replace(b'"dur": 5', b'"dur": 1e400'))
    trace("nan-literal", craft.trace_json([ev()]).replace(b'"dur": 5', b'"dur": NaN'))
    trace("nul-in-name", craft.trace_json([ev("a\0b")]), quick=True)
    trace("escape-in-name", craft.trace_json([ev("\x1b[2J\x1b]0;owned\x07")]), quick=True)
    trace("bad-utf8-in-name", craft.trace_json([ev("k")]).replace(b'"k"', b'"\xff\xfe\xc3"'))
    trace("escape-in-category", craft.trace_json([dict(ev(), cat="\x1b[31m")]))
    trace("100000-distinct-names", craft.trace_json([ev(f"k{i}", i, 1) for i in range(100000)]), expect="ok")
    trace("deeply-nested-array-2mb", b'{"traceEvents": ' + b"[" * 1000000 + b"]" * 1000000 + b"}", quick=True)
    trace("deeply-nested-args", b'{"traceEvents": [{"name": "k", "ph": "X", "ts": 0, "dur": 1, "args": '
          + b'{"a": ' * 200000 + b"1" + b"}" * 200000 + b"}]}")
    trace("unclosed-nesting", b'{"traceEvents": ' + b"[" * 1000000)
    trace("truncated-gzip", craft.truncated_gzip(craft.trace_json([ev()] * 1000)), file="t.json.gz", expect="error",
          quick=True)
    trace("gzip-header-then-junk", craft.raw_deflate_junk(), file="t.json.gz", expect="error")
    trace("plain-text-named-gz", craft.trace_json([ev()]), file="t.json.gz")
    trace("gzip-named-json", __import__("gzip").compress(craft.trace_json([ev()]), mtime=0))

    def bomb(size):
        def setup(ctx):
            path = os.path.join(ctx.shared, f"bomb-{size}.json.gz")
            if not os.path.exists(path):
                craft.gzip_bomb(path + ".part", size)
                os.rename(path + ".part", path)
            os.symlink(path, ctx.path("t.json.gz"))
        return setup
    trace("gzip-bomb-3gib", setup=bomb(3 << 30), file="t.json.gz", timeout=60)
    trace("gzip-bomb-256mib", setup=bomb(256 << 20), file="t.json.gz", quick=True)
    wrong = {
        "events-is-an-object": b'{"traceEvents": {"a": 1}}',
        "ts-is-a-string": craft.trace_json([ev()]).replace(b'"ts": 0', b'"ts": "zero"'),
        "dur-negative": craft.trace_json([ev()]).replace(b'"dur": 5', b'"dur": -5'),
        "dur-1e308-twice": craft.trace_json([ev(dur=1e308), ev(dur=1e308)]),
        "name-is-a-number": craft.trace_json([ev()]).replace(b'"name": "k"', b'"name": 5'),
        "pid-null": craft.trace_json([ev()]).replace(b'"pid": 1', b'"pid": null'),
        "pid-huge": craft.trace_json([ev()]).replace(b'"pid": 1', b'"pid": 99999999999999999999999'),
        "args-is-a-number": craft.trace_json([dict(ev(), args=3)]),
        "ph-missing": b'{"traceEvents": [{"name": "k", "ts": 0}]}',
        "event-is-a-string": b'{"traceEvents": ["k"]}',
        "top-level-array": b'[{"name": "k", "ph": "X", "ts": 0, "dur": 5, "pid": 1, "tid": 1}]',
        "top-level-number": b"42",
        "null": b"null",
        "empty": b"",
        "nul-bytes": b'{"traceEvents": [\0]}',
        "trailing-garbage": craft.trace_json([ev()]) + b"garbage",
        "begin-without-end": b'{"traceEvents": [{"name": "k", "ph": "B", "ts": 0, "pid": 1, "tid": 1}]}',
        "end-without-begin": b'{"traceEvents": [{"name": "k", "ph": "E", "ts": 0, "pid": 1, "tid": 1}]}',
        "displayTimeUnit-junk": craft.trace_json([ev()], ', "displayTimeUnit": [1]'),
        "huge-number-digits": craft.trace_json([ev()]).replace(b'"ts": 0', b'"ts": ' + b"9" * 100000),
    }
    for name, data in wrong.items():
        trace(name, data, expect="error" if name in ("top-level-number", "null", "empty", "nul-bytes") else "either",
              quick=name in ("ts-is-a-string", "empty"))

    def special(kind):
        def setup(ctx):
            path = ctx.path("t.json")
            if kind == "dir":
                os.mkdir(path)
            elif kind == "fifo":
                craft.fifo(path)
            elif kind == "zero":
                craft.char_device(path, 1, 5)
            elif kind == "sparse-3g":
                open(path, "wb").truncate(3 << 30)
        return setup
    for kind in ("dir", "fifo", "zero", "sparse-3g"):
        trace(f"file-is-{kind}", setup=special(kind), expect="error", quick=kind == "fifo")
    trace("missing", setup=lambda ctx: None, expect="error")
    for top in ("-1", "0", "99999999999999999999", "x"):
        trace(f"top-{top}", craft.trace_json([ev()]), extra=["--top", top],
              expect="either" if top == "0" else "error", names="--top" if top != "0" else None)
    return cases


# ----------------------------------------------------------------------------------------------

def cli_cases():
    cases = []
    base = _files(**{"m.hlo": craft.SQUARE})

    def cli(name, args, expect="error", names=None, quick=False, outputs=(), check=None):
        cases.append(Case(id=f"cli/{name}", reader="cli", args=args, setup=base, expect=expect, names=names,
                          quick=quick, outputs=outputs, check=check))

    cli("no-arguments", [], quick=True)
    cli("unknown-subcommand", ["frobnicate"], names="frobnicate", quick=True)
    cli("unknown-option", ["verify", "--frob", "m.hlo"], names="--frob")
    cli("extra-positional", ["print", "m.hlo", "extra"], names="extra")
    cli("missing-file-argument", ["print"])
    cli("trace-without-subcommand", ["trace"], quick=True)
    cli("tolerance-nan", ["run", "m.hlo", "--reference", "--tolerance", "nan"], names="--tolerance", quick=True)
    cli("tolerance-negative", ["run", "m.hlo", "--reference", "--tolerance", "-1"], names="--tolerance")
    cli("tolerance-inf", ["run", "m.hlo", "--reference", "--tolerance", "inf"], expect="either")
    cli("tolerance-garbage", ["run", "m.hlo", "--tolerance", "tight"], names="--tolerance")
    cli("gpu-arch-sm_9999", ["compile", "--emit=ptx", "--gpu_arch=sm_9999", "m.hlo"], names="sm_9999", quick=True)
    cli("gpu-arch-empty", ["compile", "--emit=ptx", "--gpu_arch=", "m.hlo"], names="--gpu_arch")
    cli("gpu-arch-escape", ["compile", "--emit=ptx", "--gpu_arch=sm_\x1b[2J", "m.hlo"])
    cli("emit-bogus", ["compile", "--emit=bogus", "m.hlo"], names="--emit")
    cli("backend-tpu", ["run", "m.hlo", "--backend=tpu"], names="--backend")
    cli("backend-gpu", ["run", "m.hlo", "--backend=gpu"], expect="either", check=_answer(r"\{1, 4, 9\}"))
    cli("dot-max-nodes-0", ["dot", "m.hlo", "--max-nodes", "0"], names="--max-nodes", quick=True)
    cli("dot-max-nodes-negative", ["dot", "m.hlo", "--max-nodes", "-5"], names="--max-nodes")
    cli("dot-radius-negative", ["dot", "m.hlo", "--node", "b", "--radius", "-1"], expect="either")
    cli("dot-node-missing", ["dot", "m.hlo", "--node", "nope"], names="nope")
    cli("dot-node-escape", ["dot", "m.hlo", "--node", "\x1b[2J"])
    for value in ("0", "-1", "99999999999999999999", "ten"):
        cli(f"iterations-{value}", ["run", "m.hlo", "--iterations", value], names="--iterations",
            quick=value in ("0", "99999999999999999999"))
    for value in ("garbage", "99999999999999999999999", "-1"):
        cli(f"eval-seed-{value}", ["eval", "m.hlo", "--seed", value],
            expect="either" if value == "-1" else "error", names="--seed" if value != "-1" else None,
            quick=value == "garbage")
    cli("demo-seed-garbage", ["demo", "--seed", "x"], names="--seed")
    cli("flags", ["flags"], expect="ok", quick=True)
    cli("version", ["--version"], expect="ok")
    cli("help", ["--help"], expect="ok")
    cli("run-help", ["run", "--help"], expect="ok")
    cli("eval-known-answer", ["eval", "m.hlo"], expect="ok", check=_answer(r"\{1, 4, 9\}"), quick=True)
    cli("run-reference", ["run", "m.hlo", "--reference"], expect="ok", check=_answer(r"\{1, 4, 9\}"), quick=True)
    cli("max-input-size-garbage", ["verify", "--max-input-size", "lots", "m.hlo"], expect="either")
    return cases


# ----------------------------------------------------------------------------------------------
# TensorFlow GraphDefs: `xlens graph print|verify|dot|run`.

GRAPH_COMMANDS = {
    "print": ["graph", "print"],
    "verify": ["graph", "verify"],
    "dot": ["graph", "dot"],
    "run": ["graph", "run"],
}


def _graph_node(name, op, inputs=(), attrs=""):
    ins = "".join(f' input: "{i}"' for i in inputs)
    return f'node {{ name: "{name}" op: "{op}"{ins} {attrs}}}\n'


_F32 = 'attr { key: "T" value { type: DT_FLOAT } } '
GRAPH_PLACEHOLDER = _graph_node("x", "Placeholder", (), 'attr { key: "dtype" value { type: DT_FLOAT } } '
                                'attr { key: "shape" value { shape { dim { size: 3 } } } } ')
GRAPH_SQUARE = GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("x",), _F32)


def _graph_chain(n, op="Identity"):
    """x -> op -> op -> ... n deep (recursion in any walk over the graph would overflow)."""
    nodes = [GRAPH_PLACEHOLDER]
    prev = "x"
    for i in range(n):
        nodes.append(_graph_node(f"n{i}", op, (prev,), _F32))
        prev = f"n{i}"
    return "".join(nodes)


def graph_cases():
    cases = []

    def graph(name, data=None, command="verify", expect="error", quick=False, extra=(), file="g.pbtxt",
              setup=None, **kw):
        files = {} if data is None else {file: data if isinstance(data, bytes) else data.encode()}
        if command == "run" and not extra:
            extra = ["--fetch", "y"]
        cases.append(Case(id=f"graphdef/{command}/{name}", reader="graphdef",
                          args=GRAPH_COMMANDS[command] + [file] + list(extra),
                          setup=_then(_files(**files), *([setup] if setup else [])), expect=expect,
                          names=kw.pop("names", None if expect == "ok" else file), quick=quick,
                          check=kw.pop("check", _clean_stdout), **kw))

    broken = {
        "empty-text": ("", "g.pbtxt"),
        "empty-binary": (b"", "g.pb"),
        "binary-junk": (craft.junk(4096), "g.pb"),
        "nul-bytes": (b'node { name: "a\0b" op: "NoOp" }', "g.pbtxt"),
        "truncated-text": (GRAPH_SQUARE[:-20], "g.pbtxt"),
        "unterminated-string": ('node { name: "x', "g.pbtxt"),
        "unknown-field": ('node { name: "x" op: "NoOp" frob: 1 }', "g.pbtxt"),
        "bad-enum": (GRAPH_PLACEHOLDER.replace("DT_FLOAT", "DT_NOPE"), "g.pbtxt"),
        "deep-nesting": ('node { name: "x" op: "NoOp" attr { key: "f" value { func { name: "g" '
                         + 'attr { key: "a" value { func { name: "g" ' * 100000 + "}", "g.pbtxt"),
        "varint-overflow": (b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "g.pb"),
        "length-past-end": (b"\x0a\xff\xff\xff\x7f" + b"\x0a" * 10, "g.pb"),
        "dangling-input": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("nope",), _F32), "g.pbtxt"),
        "dangling-escape": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("\\033[2J",), _F32), "g.pbtxt"),
        "cycle": (GRAPH_PLACEHOLDER + _graph_node("a", "AddV2", ("x", "b"), _F32)
                  + _graph_node("b", "AddV2", ("a", "x"), _F32) + _graph_node("y", "Square", ("b",), _F32), "g.pbtxt"),
        "self-loop": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("y",), _F32), "g.pbtxt"),
        "unknown-op": (GRAPH_PLACEHOLDER + _graph_node("y", "Frobnicate", ("x",), _F32), "g.pbtxt"),
        "attr-wrong-type": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("x",),
                            'attr { key: "T" value { s: "float" } } '), "g.pbtxt"),
        "too-many-inputs": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("x", "x"), _F32), "g.pbtxt"),
        "output-index-huge": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("x:99999999999",), _F32), "g.pbtxt"),
        "const-shape-2^80": (_graph_node("y", "Const", (), 'attr { key: "dtype" value { type: DT_FLOAT } } '
                             'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1099511627776 } '
                             'dim { size: 1099511627776 } } float_val: 1 } } } '), "g.pbtxt"),
        "const-shape-negative": (_graph_node("y", "Const", (), 'attr { key: "dtype" value { type: DT_FLOAT } } '
                                 'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: -5 } } '
                                 'float_val: 1 } } } '), "g.pbtxt"),
        "fill-4tb": (_graph_node("d", "Const", (), 'attr { key: "dtype" value { type: DT_INT32 } } '
                     'attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } } '
                     'int_val: 1048576 int_val: 1048576 } } } ')
                     + _graph_node("v", "Const", (), 'attr { key: "dtype" value { type: DT_FLOAT } } '
                     'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } ')
                     + _graph_node("y", "Fill", ("d", "v"), 'attr { key: "T" value { type: DT_FLOAT } } '
                     'attr { key: "index_type" value { type: DT_INT32 } } '), "g.pbtxt"),
        # Gzipped GraphDefs are read by their magic bytes: a cut or corrupt stream, and a bomb that
        # inflates past the input limit (set to 1 MiB for the case), are one line each.
        "gzip-cut": (__import__("gzip").compress(GRAPH_SQUARE.encode(), mtime=0)[:-12], "g.pbtxt.gz"),
        "gzip-corrupt": (b"\x1f\x8b\x08\x00" + craft.junk(512), "g.pb.gz"),
        "gzip-bomb": (__import__("gzip").compress(b"\n" * (64 << 20), mtime=0), "g.pbtxt.gz"),
    }
    quick_ones = {("empty-text", "verify"), ("binary-junk", "print"), ("deep-nesting", "verify"),
                  ("gzip-cut", "verify"), ("gzip-corrupt", "run"), ("gzip-bomb", "verify"),
                  ("cycle", "run"), ("dangling-escape", "print"), ("const-shape-2^80", "verify"),
                  ("unknown-op", "run"), ("fill-4tb", "run"), ("length-past-end", "dot")}
    for name, (data, file) in broken.items():
        for command in GRAPH_COMMANDS:
            # print and dot draw graphs with ops the registry lacks; run must refuse Fill's 4 TB.
            expect = "either" if (name == "unknown-op" and command in ("print", "dot")) else "error"
            # An empty file is an empty GraphDef, as protobuf and TensorFlow read it.
            if name.startswith("empty-") and command != "run":
                expect = "either"
            if name == "fill-4tb" and command != "run":
                expect = "either"
            extra = ["--max-input-size", "1M"] if name == "gzip-bomb" else ()
            if extra and command == "run":
                extra = list(extra) + ["--fetch", "y"]
            graph(name, data, command, expect=expect, file=file, quick=(name, command) in quick_ones,
                  extra=extra)
    # Long chains: every walk over the graph must be iterative.
    for n in (100000,):
        for command in GRAPH_COMMANDS:
            graph(f"chain-{n}", _graph_chain(n), command, expect="either",
                  extra=["--feed", "x=x.npy", "--fetch", f"n{n - 1}"] if command == "run" else (),
                  setup=_files(**{"x.npy": craft.npy_f32([1, 2, 3])}), timeout=60,
                  quick=command == "verify")
    good = _files(**{"x.npy": craft.npy_f32([1, 2, 3])})
    graph("run-known-answer", GRAPH_SQUARE, "run", expect="ok", extra=["--feed", "x=x.npy", "--fetch", "y"],
          setup=good, check=_answer(r"y: float \[3\] \[1, 4, 9\]"), quick=True)
    graph("verify-known-answer", GRAPH_SQUARE, "verify", expect="ok", check=_answer(r"OK: 2 nodes"), quick=True)
    for name, extra, names in [
        ("feed-wrong-dtype", ["--feed", "x=i.npy", "--fetch", "y"], "i.npy"),
        ("feed-wrong-shape", ["--feed", "x=s.npy", "--fetch", "y"], "s.npy"),
        ("feed-missing-file", ["--feed", "x=nowhere.npy", "--fetch", "y"], "nowhere.npy"),
        ("feed-no-equals", ["--feed", "x", "--fetch", "y"], "--feed"),
        ("feed-unknown-node", ["--feed", "nope=x.npy", "--fetch", "y"], "nope"),
        ("fetch-unknown", ["--feed", "x=x.npy", "--fetch", "nope"], "nope"),
        ("fetch-escape", ["--feed", "x=x.npy", "--fetch", "\x1b[2J"], "g.pbtxt"),
        ("fetch-bad-index", ["--feed", "x=x.npy", "--fetch", "y:99999999999999999999"], "g.pbtxt"),
        ("placeholder-not-fed", ["--fetch", "y"], "g.pbtxt"),
        ("steps-0", ["--feed", "x=x.npy", "--fetch", "y", "--steps", "0"], "--steps"),
        ("assign-not-variable", ["--feed", "x=x.npy", "--fetch", "y", "--assign", "x=x.npy"], "g.pbtxt"),
        ("nothing-to-run", ["--feed", "x=x.npy"], "g.pbtxt"),
    ]:
        setup = _then(good, _files(**{"i.npy": craft.npy("<i4", (3,), struct.pack("<3i", 1, 2, 3)),
                                      "s.npy": craft.npy_f32([1, 2])}))
        graph(name, GRAPH_SQUARE, "run", extra=extra, setup=setup, names=names,
              quick=name in ("feed-wrong-dtype", "fetch-unknown", "placeholder-not-fed"))
    graph("dot-node-missing", GRAPH_SQUARE, "dot", extra=["--node", "nope"], names="nope")
    graph("dot-to-file", GRAPH_SQUARE, "dot", expect="ok", extra=["-o", "g.dot"], outputs=("g.dot",),
          must_exist=("g.dot",))
    graph("run-outputs", GRAPH_SQUARE, "run", expect="ok", extra=["--feed", "x=x.npy", "--fetch", "y",
          "--outputs", "out"], setup=good, outputs=("out", "out/*"), must_exist=("out/out0.npy",))
    graph("run-trace", GRAPH_SQUARE, "run", expect="ok", extra=["--feed", "x=x.npy", "--fetch", "y",
          "--trace", "t.json"], setup=good, outputs=("t.json",), must_exist=("t.json",), quick=True)
    return cases


# ----------------------------------------------------------------------------------------------
# TensorFlow's auto-clustering on a GraphDef: `xlens cluster GRAPH [--tf_xla_* flags] [--json F]`.

_CLUSTER_ON = ["--jit-level=ON_1", "--tf_xla_cpu_global_jit"]
# Four compilable ops: one cluster at the default --tf_xla_min_cluster_size.
GRAPH_CLUSTERABLE = (GRAPH_PLACEHOLDER + _graph_node("a", "AddV2", ("x", "x"), _F32)
                     + _graph_node("b", "Mul", ("a", "x"), _F32) + _graph_node("c", "Sub", ("b", "a"), _F32)
                     + _graph_node("y", "AddV2", ("c", "b"), _F32))


def cluster_cases():
    cases = []

    def cluster(name, data=GRAPH_CLUSTERABLE, extra=(), expect="error", file="g.pbtxt", quick=False,
                env=None, setup=None, **kw):
        files = {} if data is None else {file: data if isinstance(data, bytes) else data.encode()}
        cases.append(Case(id=f"cluster/{name}", reader="cluster", args=["cluster", file] + list(extra),
                          env=env or {}, setup=_then(_files(**files), *([setup] if setup else [])),
                          expect=expect, names=kw.pop("names", None if expect == "ok" else file),
                          quick=quick, check=kw.pop("check", _clean_stdout), **kw))

    # Graphs that cannot be read or are not graphs: one line naming the file.
    broken = {
        "binary-junk": (craft.junk(4096), "g.pb"),
        "truncated-text": (GRAPH_CLUSTERABLE[:-30], "g.pbtxt"),
        "truncated-binary": (b"\x0a\x20\x0a\x01x\x12\x0bPlaceholder", "g.pb"),
        "unterminated-string": ('node { name: "x', "g.pbtxt"),
        "nul-bytes": (b'node { name: "a\0b" op: "NoOp" }', "g.pbtxt"),
        "deep-nesting": ('node { name: "x" op: "NoOp" attr { key: "f" value { func { name: "g" '
                         + 'attr { key: "a" value { func { name: "g" ' * 100000 + "}", "g.pbtxt"),
        "varint-overflow": (b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "g.pb"),
        "length-past-end": (b"\x0a\xff\xff\xff\x7f" + b"\x0a" * 10, "g.pb"),
        "dangling-input": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("nope",), _F32), "g.pbtxt"),
        "cycle": (GRAPH_PLACEHOLDER + _graph_node("a", "AddV2", ("x", "b"), _F32)
                  + _graph_node("b", "Mul", ("a", "x"), _F32) + _graph_node("y", "Square", ("b",), _F32), "g.pbtxt"),
        "self-loop": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("y",), _F32), "g.pbtxt"),
        # A loop's Merge fed back by something other than NextIteration.
        "merge-cycle-without-nextiteration": (
            GRAPH_PLACEHOLDER + _graph_node("m", "Merge", ("x", "y"), _F32 + 'attr { key: "N" value { i: 2 } } ')
            + _graph_node("y", "Square", ("m",), _F32), "g.pbtxt"),
        "attr-wrong-type": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("x",),
                            'attr { key: "T" value { s: "float" } } '), "g.pbtxt"),
        "too-many-inputs": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("x", "x"), _F32), "g.pbtxt"),
        "output-index-huge": (GRAPH_PLACEHOLDER + _graph_node("y", "Square", ("x:99999999999",), _F32), "g.pbtxt"),
    }
    for name, (data, file) in broken.items():
        cluster(name, data, _CLUSTER_ON, file=file,
                quick=name in ("binary-junk", "cycle", "truncated-text", "merge-cycle-without-nextiteration"))
    # Graphs that are odd but valid: a result, or a line; never a crash, a hang or raw bytes.
    cluster("empty-text", "", _CLUSTER_ON, expect="either")
    cluster("unknown-op", GRAPH_PLACEHOLDER + _graph_node("y", "Frobnicate", ("x",), _F32), _CLUSTER_ON,
            expect="either", quick=True)
    cluster("huge-node-name", GRAPH_CLUSTERABLE.replace('"b"', '"' + "b" * 1000000 + '"'), _CLUSTER_ON,
            expect="either", check=_all(_clean_stdout, lambda ctx, run: None if len(run.stdout) < 100000 else
                                        ("bad-message", f"{len(run.stdout)} bytes of output for one long name")))
    cluster("escape-in-node-name", GRAPH_CLUSTERABLE.replace('"c"', '"\\033[2J\\007c"'), _CLUSTER_ON + ["-v"],
            expect="either", quick=True)
    cluster("escape-in-op-name", GRAPH_PLACEHOLDER + _graph_node("y", "\\033]0;pwned\\007", ("x",), _F32),
            _CLUSTER_ON, expect="either", quick=True)
    cluster("chain-100000", _graph_chain(100000, "Square"), _CLUSTER_ON, expect="either", timeout=60, quick=True,
            check=_all(_clean_stdout, _answer(r"cluster_0: 100000 nodes", "one cluster of the whole chain")))
    cluster("known-answer", GRAPH_CLUSTERABLE, _CLUSTER_ON, expect="ok",
            check=_answer(r"cluster_0: 4 nodes \(AddV2 x2, Mul, Sub\)"), quick=True)
    cluster("jit-off-known-answer", GRAPH_CLUSTERABLE, [], expect="ok", check=_answer(r"no clusters"))
    # Flags with values TensorFlow would refuse: one line naming the flag.
    for name, extra, names in [
        ("min-cluster-size-abc", ["--tf_xla_min_cluster_size=abc"], "--tf_xla_min_cluster_size"),
        ("min-cluster-size-20-digits", ["--tf_xla_min_cluster_size=99999999999999999999"],
         "--tf_xla_min_cluster_size"),
        ("max-cluster-size-empty", ["--tf_xla_max_cluster_size="], "--tf_xla_max_cluster_size"),
        ("auto-jit-banana", ["--tf_xla_auto_jit=banana"], "--tf_xla_auto_jit"),
        ("fuel-abc", ["--tf_xla_clustering_fuel=abc"], "--tf_xla_clustering_fuel"),
        ("cpu-global-jit-maybe", ["--tf_xla_cpu_global_jit=maybe"], "--tf_xla_cpu_global_jit"),
        ("ops-to-cluster-unknown-op", _CLUSTER_ON + ["--tf_xla_ops_to_cluster=NoSuchOp"], "NoSuchOp"),
        ("ops-to-cluster-escape", _CLUSTER_ON + ["--tf_xla_ops_to_cluster=\x1b[2J"], "--tf_xla_ops_to_cluster"),
        ("unknown-tf-xla-flag", ["--tf_xla_no_such_flag=1"], "--tf_xla_no_such_flag"),
        ("jit-level-ON_9", ["--jit-level=ON_9"], "--jit-level"),
        ("jit-level-empty", ["--jit-level="], "--jit-level"),
        ("jit-level-escape", ["--jit-level=\x1b[2J"], "--jit-level"),
        ("unknown-option", ["--frob"], "--frob"),
        ("extra-positional", ["other.pbtxt"], "other.pbtxt"),
    ]:
        cluster(name, extra=extra, names=names,
                quick=name in ("min-cluster-size-abc", "ops-to-cluster-unknown-op", "jit-level-ON_9"))
    cluster("unknown-flag-in-TF_XLA_FLAGS", extra=_CLUSTER_ON, env={"TF_XLA_FLAGS": "--tf_xla_no_such_flag=1"},
            names="Unknown flag in TF_XLA_FLAGS: --tf_xla_no_such_flag=1", quick=True)
    cluster("min-cluster-size-abc-in-TF_XLA_FLAGS", extra=_CLUSTER_ON,
            env={"TF_XLA_FLAGS": "--tf_xla_min_cluster_size=abc"}, names="--tf_xla_min_cluster_size")
    # Odd values TensorFlow takes: a result or one line.
    for name, flag in [("min-cluster-size-0", "--tf_xla_min_cluster_size=0"),
                       ("min-cluster-size-negative", "--tf_xla_min_cluster_size=-5"),
                       ("max-cluster-size-0", "--tf_xla_max_cluster_size=0"),
                       ("max-cluster-size-1", "--tf_xla_max_cluster_size=1"),
                       ("fuel-negative", "--tf_xla_clustering_fuel=-5"),
                       ("auto-jit-7", "--tf_xla_auto_jit=7"),
                       ("ops-to-cluster-empty-items", "--tf_xla_ops_to_cluster=,,,"),
                       ("exclude-ops-unknown", "--tf_xla_cluster_exclude_ops=NoSuchOp")]:
        cluster(name, extra=_CLUSTER_ON + [flag], expect="either", names=flag.split("=")[0])
    # Reading and writing files.
    cluster("missing-file", None, _CLUSTER_ON, file="nope.pbtxt", quick=True)
    cluster("directory", None, _CLUSTER_ON, file="gdir", setup=lambda ctx: os.mkdir(ctx.path("gdir")))
    cluster("fifo", None, _CLUSTER_ON, file="gfifo", setup=lambda ctx: craft.fifo(ctx.path("gfifo")))
    cluster("json-into-missing-directory", extra=_CLUSTER_ON + ["--json", "no/such/c.json"], names="--json")
    cluster("json-onto-directory", extra=_CLUSTER_ON + ["--json", "jdir"], names="--json",
            setup=lambda ctx: os.mkdir(ctx.path("jdir")))
    cluster("json", extra=_CLUSTER_ON + ["--json", "c.json"], expect="ok", outputs=("c.json",),
            must_exist=("c.json",), quick=True)
    cluster("dump", extra=_CLUSTER_ON + ["--tf_xla_clustering_debug"], expect="ok",
            env={"TF_DUMP_GRAPH_PREFIX": "{work}/d"}, outputs=("d", "d/*"),
            must_exist=("d/mark_for_compilation.pbtxt", "d/build_xla_ops.pbtxt"), quick=True)
    # A dump that cannot be written is a warning, never the clustering's failure (as in TensorFlow).
    cluster("dump-prefix-is-a-file", extra=_CLUSTER_ON + ["--tf_xla_clustering_debug"], expect="either",
            env={"TF_DUMP_GRAPH_PREFIX": "{work}/dfile"}, setup=_files(dfile="not a directory"))
    return cases


def bundle_cases():
    """`xlens replay` of hostile bundles: the corpus of tests/dump/testdata/broken_bundles (made
    with Python's tarfile), and bundle paths that are not regular files. Nothing may be written
    into the working directory (a member that escaped would land there)."""
    cases = []
    corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dump", "testdata",
                          "broken_bundles")
    quick_ones = {"absolute_path", "dotdot", "symlink", "bomb", "truncated"}
    for name in sorted(os.listdir(corpus)):
        if not name.endswith(".tar.gz"):
            continue
        stem = name[: -len(".tar.gz")]
        with open(os.path.join(corpus, name), "rb") as f:
            data = f.read()
        with open(os.path.join(corpus, stem + ".expected")) as f:
            expected = f.read().strip()
        cases.append(Case(id=f"bundle/replay/{stem}", reader="bundle", args=["replay", "b.tar.gz"],
                          setup=_files(**{"b.tar.gz": data}), env={"XLENS_MAX_INPUT_SIZE": "1M"},
                          expect="error", names="b.tar.gz", mentions=re.escape(expected),
                          quick=stem in quick_ones))
    cases.append(Case(id="bundle/replay/path-is-a-fifo", reader="bundle", args=["replay", "b.tar.gz"],
                      setup=lambda ctx: craft.fifo(ctx.path("b.tar.gz")), expect="error", names="b.tar.gz",
                      quick=True))
    cases.append(Case(id="bundle/replay/path-is-a-directory", reader="bundle", args=["replay", "b.tar.gz"],
                      setup=lambda ctx: os.mkdir(ctx.path("b.tar.gz")), expect="error", names="b.tar.gz"))
    cases.append(Case(id="bundle/replay/gzip-bomb", reader="bundle", args=["replay", "b.tar.gz"],
                      setup=lambda ctx: craft.gzip_bomb(ctx.path("b.tar.gz"), 64 << 20),
                      env={"XLENS_MAX_INPUT_SIZE": "1M"}, expect="error", names="b.tar.gz"))
    return cases


def _round_two_modules():
    import cache_cases
    import executor_cases
    import bundle_replay_cases
    import viewer_cases
    import output_cases
    import hlo_frames_cases
    import xla_dump_cases
    import profile_cases
    import hlo_ops_cases
    import saved_model_cases
    import aot_cases
    import collective_cases
    import gpu_collective_cases
    import sharding_cases
    import mpi_cases
    import kernel_choice_cases
    return [cache_cases, kernel_choice_cases, executor_cases, bundle_replay_cases, viewer_cases, output_cases, hlo_frames_cases,
            xla_dump_cases, profile_cases, hlo_ops_cases, saved_model_cases, aot_cases, collective_cases,
            gpu_collective_cases, sharding_cases, mpi_cases]


ROUND_TWO = _round_two_modules()


def all_cases(shared, root_user):
    cases = (hlo_text_cases() + module_path_cases(root_user) + npy_cases() + outputs_cases()
             + output_path_cases() + flags_cases() + dump_cases() + trace_cases(shared) + cli_cases() + graph_cases()
             + cluster_cases() + bundle_cases())
    # The second sweep's ground, one module each (see each module's docstring).
    for module in ROUND_TWO:
        cases += module.cases(shared, root_user)
    seen = set()
    for case in cases:
        assert case.id not in seen, f"duplicate case id {case.id}"
        seen.add(case.id)
    return cases

"""Dump directories as XLA writes them (no manifest.json), read by `xlens inspect` and the viewer.

The reader places every file from its name alone (dump/xla_dump_names.h): names that almost match
(too few or too many digits, counters past 64 bits, unknown suffixes), 100,000 files, links (never
followed), FIFOs (never opened), unreadable and oversized optimized modules. Each ends in a model
with the rest placed and what could not be placed listed with a reason, or in one line naming the
directory; never a hang, a crash, or a read through a link.

`xlens compare` reads the same directories and compiles each before_optimizations module beside
XLA's optimized one: a module without either, or with one that does not parse, is said in one
line naming the file, and a directory with nothing to compare is refused in one line.
"""

import os
import re

from harness import Case, all_checks

OPTIMIZED = """HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

FileNames
1 "train.py"

FunctionNames
1 "loss"

FileLocations
1 {file_name_id=1 function_name_id=1 line=15 end_line=15 column=11 end_column=53}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


%fused_computation (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p), metadata={op_name="jit(f)/neg" stack_frame_id=1}
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %negate_fusion = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_computation
}
"""

GOOD = "module_0001.jit_f.cpu_after_optimizations.txt"
BEFORE = "module_0001.jit_f.before_optimizations.txt"
# The module XLA optimized into OPTIMIZED: one negate with the same op_name and line.
BEFORE_TEXT = OPTIMIZED[:OPTIMIZED.index("%fused_computation")] + """ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%x), metadata={op_name="jit(f)/neg" stack_frame_id=1}
}
"""


def _stdout_has(*patterns):
    def check(ctx, run):
        if run.exit_code != 0:
            return None
        for pattern in patterns:
            if not re.search(pattern.encode(), run.stdout):
                shown = run.stdout.decode("utf-8", "replace").strip().splitlines()[-3:]
                return "wrong-result", f"expected /{pattern}/ in the output, got ...{shown}"
        return None
    return check


def _case(name, setup, *, expect="ok", check=None, quick=True, timeout=None, extra=(), **kw):
    def full_setup(ctx):
        os.makedirs(ctx.path("d"), exist_ok=True)
        setup(ctx)
    return Case(id=f"xla-dump/inspect/{name}", reader="xla-dump", args=["inspect", "d"] + list(extra),
                setup=full_setup, expect=expect, check=check, quick=quick, timeout=timeout, **kw)


def _with_good(ctx):
    ctx.write("d/" + GOOD, OPTIMIZED)
    ctx.write("d/module_0001.jit_f.before_optimizations.txt", "HloModule jit_f\n")


def _near_misses(ctx):
    _with_good(ctx)
    for name in ["module_12.f.before_optimizations.txt", "module_00001.before_optimizations",
                 "module_0001.jit_f.before_optimizations.exe", "module_0001.jit_f.after_optimizationsX.txt",
                 "module_0001.", "x.module_0001.f.debug_options", "module_0001.jit_f.0001.p.after_.txt",
                 "module_0001.jit_f.0001..after_x.txt", "README"]:
        ctx.write("d/" + name, "x")


def _huge_counters(ctx):
    _with_good(ctx)
    ctx.write("d/module_99999999999999999999.f.before_optimizations.txt", "x")
    ctx.write("d/module_999999999999999999.f.before_optimizations.txt", "x")  # 18 digits: a module
    ctx.write("d/module_0001.jit_f.99999999999999999999.p.after_x.before_y.txt", "x")
    ctx.write("d/99999999999999999999999999.module_0001.jit_f.debug_options", "x")


def _many_files(count):
    def setup(ctx):
        _with_good(ctx)
        d = ctx.path("d")
        for i in range(count):
            open(os.path.join(d, f"module_0001.jit_f.{i:06d}.p.after_pass{i}.before_pass{i + 1}.txt"), "wb").close()
    return setup


def _links(ctx):
    _with_good(ctx)
    d = ctx.path("d")
    os.symlink("/etc/passwd", os.path.join(d, "module_0002.g.cpu_after_optimizations.txt"))
    os.symlink("loop", os.path.join(d, "loop"))
    os.symlink("gone", os.path.join(d, "module_0003.h.before_optimizations.txt"))
    os.symlink("/", os.path.join(d, "module_0004.root"))
    os.mkfifo(os.path.join(d, "module_0005.k.cpu_after_optimizations.txt"))


def _unreadable(ctx):
    _with_good(ctx)
    os.chmod(ctx.path("d/" + GOOD), 0)


def _inner_directory(ctx):
    _with_good(ctx)
    ctx.write("d/module_0001.jit_f/module.mlir", "module {}")
    os.makedirs(ctx.path("d/module_0001.jit_f/deeper/deeper"))
    os.mkfifo(ctx.path("d/module_0001.jit_f/pipe"))
    os.makedirs(ctx.path("d/plugins"))


def _not_hlo(ctx):
    ctx.write("d/" + GOOD, "\x00\xff" * 1000)


def _big_optimized(ctx):
    ctx.write("d/" + GOOD, OPTIMIZED + "\n" * (2 << 20))


def _escapes(ctx):
    _with_good(ctx)
    ctx.write("d/module_0001.jit_f\x1b]0;owned\x07.0001.p\x1b[2J.after_x.txt", "x")
    ctx.write("d/\x1b[31mred", "x")


def _trace(ctx):
    _with_good(ctx)
    ctx.write("t.json", '{"traceEvents": ['
              '{"ph": "X", "name": "negate_fusion", "ts": 1, "dur": 5, "pid": 1, "tid": 1,'
              ' "args": {"hlo_op": "negate_fusion", "hlo_module": "jit_f"}},'
              '{"ph": "X", "name": "other_fusion", "ts": 9, "dur": 5, "pid": 1, "tid": 1,'
              ' "args": {"hlo_op": "other_fusion", "hlo_module": "jit_g"}},'
              '{"ph": "X", "name": "host work", "ts": 20, "dur": 5, "pid": 1, "tid": 2}, {}]}')


def _viewer_dump(ctx):
    _with_good(ctx)
    ctx.write("d/module_0001.jit_f.0001.simp.after_algsimp.before_dce.txt", OPTIMIZED)
    for i in range(1000):
        ctx.write(f"d/notes{i}.txt", "x")


def _viewer_stderr(ctx, run):
    if run.exit_code != 0:
        return None
    lines = run.stderr.decode("utf-8", "replace").strip().splitlines()
    unplaced = [line for line in lines if "not placed" in line]
    if len(unplaced) != 1 or "1000 files not placed" not in unplaced[0]:
        return "wrong-result", f"expected one line for the 1000 unplaced files, got {lines[:3]}"
    return None


def _empty(ctx):
    pass


def _compare_case(name, setup, *, expect="error", extra=(), timeout=30, **kw):
    def full_setup(ctx):
        os.makedirs(ctx.path("d"), exist_ok=True)
        setup(ctx)
    return Case(id=f"xla-dump/compare/{name}", reader="xla-dump", args=["compare", "d"] + list(extra),
                setup=full_setup, expect=expect, quick=True, timeout=timeout, **kw)


def _compare_good(ctx):
    ctx.write("d/" + GOOD, OPTIMIZED)
    ctx.write("d/" + BEFORE, BEFORE_TEXT)


def _compare_elided(ctx):
    text = """HloModule jit_f, entry_computation_layout={(f32[64]{0})->f32[64]{0}}

ENTRY %main (x: f32[64]) -> f32[64] {
  %x = f32[64]{0} parameter(0)
  %c = f32[64]{0} constant({...}), metadata={op_name="jit(f)/const"}
  %a = f32[64]{0} add(%c, %x), metadata={op_name="jit(f)/add"}
  ROOT %n = f32[64]{0} negate(%a), metadata={op_name="jit(f)/neg"}
}
"""
    ctx.write("d/" + GOOD, text)
    ctx.write("d/" + BEFORE, text)


def _compare_many(count):
    # A chain of `count` elementwise ops, each its own kernel in the "optimized" module: matching
    # must not cost every pair of kernels times their op_names.
    def setup(ctx):
        lines = ["HloModule big, entry_computation_layout={(f32[4]{0})->f32[4]{0}}", "",
                 "ENTRY %main (x: f32[4]) -> f32[4] {", "  %x = f32[4]{0} parameter(0)"]
        previous = "x"
        for i in range(count):
            op = "negate" if i % 2 else "exponential"
            lines.append(f'  %n{i} = f32[4]{{0}} {op}(%{previous}), '
                         f'metadata={{op_name="jit(f)/op{i}" source_file="f.py" source_line={i + 1}}}')
            previous = f"n{i}"
        lines += [f"  ROOT %r = f32[4]{{0}} copy(%{previous})", "}"]
        text = "\n".join(lines) + "\n"
        ctx.write("d/" + GOOD, text)
        ctx.write("d/" + BEFORE, text)
    return setup


def compare_cases():
    return [
        _compare_case("matched", _compare_good, expect="ok",
                      check=_stdout_has(r"XLA 1 kernels .*xlens 1 kernels .*1 matched \(1 exactly\)",
                                        r"matched negate_fusion \(kLoop\) <-> \S+ .*overlap 1\.00  train\.py:15")),
        _compare_case("json-written", _compare_good, expect="ok", extra=["--json", "out.json"],
                      outputs=("out.json",), must_exist=("out.json",)),
        _compare_case("empty-directory", lambda ctx: None, names="d", mentions="no manifest|no module"),
        # XLA's optimized module alone (a dump made with --xla_dump_hlo_module_re of the optimized
        # stage only): nothing to compile.
        _compare_case("no-before-module", lambda ctx: ctx.write("d/" + GOOD, OPTIMIZED), names="d",
                      mentions="no before_optimizations"),
        _compare_case("corrupt-after-module",
                      lambda ctx: (ctx.write("d/" + GOOD, OPTIMIZED[:300] + "\x00\xff{{{"), ctx.write("d/" + BEFORE, BEFORE_TEXT)),
                      names=GOOD),
        _compare_case("before-does-not-parse",
                      lambda ctx: (ctx.write("d/" + GOOD, OPTIMIZED), ctx.write("d/" + BEFORE, "HloModule jit_f\nENTRY {")),
                      names=BEFORE),
        _compare_case("trace-missing", _compare_good, extra=["--trace", "t.json"], names="t.json"),
        _compare_case("bad-backend", _compare_good, extra=["--backend", "tpu"], names="--backend"),
        # --run times xlens's kernels by running the module in a child process.
        _compare_case("run-times-xlens", _compare_good, expect="ok", extra=["--run", "--iterations", "2"],
                      check=_stdout_has(r"matched negate_fusion .*XLA -, xlens [0-9.]+ us in [0-9]+")),
        # TensorFlow's dumps elide large constants ({...}): compared, and run as zeros for times.
        _compare_case("elided-constant", _compare_elided, expect="ok", extra=["--run", "--iterations", "1"],
                      check=_stdout_has(r"1 matched", r"xlens [0-9.]+ us in [0-9]+")),
        _compare_case("3000-kernels", _compare_many(3000), expect="ok", timeout=20,
                      check=_stdout_has(r"XLA 3001 kernels", r"matched n0 ")),
        _compare_case("run-and-xlens-trace", _compare_good, extra=["--run", "--xlens-trace", "t.json"], names="--run"),
        _compare_case("zero-iterations", _compare_good, extra=["--run", "--iterations", "0"], names="--iterations"),
    ]


def cases(shared, root_user):
    placed_kernel = _stdout_has(r"kernel negate_fusion \(kLoop\)  jit\(f\)/neg  train\.py:15 \(loss\)")
    return [
        _case("near-misses", _near_misses, check=all_checks(placed_kernel, _stdout_has(r"2 files placed, 9 not",
                                                                                          r"not placed: module_12\.f"))),
        _case("huge-counters", _huge_counters,
              check=all_checks(placed_kernel, _stdout_has(r"not placed: module_99999999999999999999",
                                                          r"module 999999999999999999 "))),
        _case("100k-files", _many_files(100000), quick=False, timeout=60,
              check=_stdout_has(r"100000 stages", r"99800 more stages", r"100002 files placed, 0 not")),
        _case("20k-files", _many_files(20000), timeout=20, check=_stdout_has(r"20002 files placed, 0 not")),
        # Links are listed, never followed (/etc/passwd is not read as a module), a FIFO is never
        # opened (the read would block), a link to / is no module directory.
        _case("links-and-fifo", _links, timeout=10,
              check=all_checks(placed_kernel, _stdout_has(r"not placed: loop \(a symbolic link",
                                                          r"module_0005\.k\.cpu_after_optimizations\.txt \(a FIFO",
                                                          r"module_0004\.root \(a symbolic link"))),
        _case("unreadable-optimized", _unreadable, root_skip="root reads a file of mode 000",
              check=_stdout_has(r"problem: .*cpu_after_optimizations\.txt")),
        _case("module-directory", _inner_directory,
              check=_stdout_has(r"not placed: module_0001\.jit_f/deeper", r"module_0001\.jit_f/pipe \(a FIFO",
                                r"not placed: plugins/")),
        _case("optimized-not-hlo", _not_hlo, check=_stdout_has(r"problem: .*kernels not derived")),
        _case("optimized-past-input-limit", _big_optimized, env={"XLENS_MAX_INPUT_SIZE": "1M"},
              check=_stdout_has(r"problem: .*cpu_after_optimizations\.txt")),
        _case("control-bytes-in-names", _escapes),
        _case("empty-directory", _empty, check=_stdout_has(r"problem: .*no manifest\.json")),
        Case(id="xla-dump/inspect/missing-directory", reader="xla-dump", args=["inspect", "nothere"],
             expect="error", names="nothere", mentions="no such directory", quick=True),
        Case(id="xla-dump/inspect/file-not-directory", reader="xla-dump", args=["inspect", "f.txt"],
             setup=lambda ctx: ctx.write("f.txt", "x"), expect="error", names="f.txt", mentions="not a directory",
             quick=True),
        _case("json-into-a-directory", lambda ctx: (_with_good(ctx), os.makedirs(ctx.path("out.json"))),
              extra=["--json", "out.json"], expect="error", names="out.json"),
        _case("json-written", _with_good, extra=["--json", "out.json"], outputs=("out.json",),
              must_exist=("out.json",)),
        # The viewer opens the same directory (no manifest): stages drawn, the unplaced files said
        # once, on one line, however many there are.
        Case(id="xla-dump/viewer/no-manifest", reader="xla-dump", program="viewer",
             args=["d", "--screenshot", "shot.png", "--size", "800x600"], setup=_viewer_dump, expect="ok",
             outputs=("shot.png",), must_exist=("shot.png",), quick=True, timeout=30, check=_viewer_stderr),
        _case("trace-missing", _with_good, extra=["--trace", "t.json"], expect="error", names="t.json"),
        # jax.profiler's JSON ends its event array with {}; events name their kernel and module.
        _case("trace-links", _trace, extra=["--trace", "t.json"],
              check=_stdout_has(r"3 events, 2 kernel events, 1 linked", r"negate_fusion .*1 events, 5\.0+ us")),
    ] + compare_cases()

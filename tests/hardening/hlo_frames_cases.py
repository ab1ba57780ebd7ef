"""HLO as XLA writes it today: stack-frame tables, elided constants, sharding annotations.

jaxlib and TensorFlow write a stack-frame table (FileNames, FunctionNames, FileLocations,
StackFrames) after the HloModule line, and metadata points into it with stack_frame_id. A hostile
table (ids that name nothing, cycles through parent_frame_id, huge or repeated ids) must give one
located error, never a crash or a walk that does not end. A constant printed as {...} must never
crash anything: running it is refused naming the constant, unless --fill_elided_constants fills
it. Sharding annotation custom calls run as identities on one device.
"""

import re

from harness import Case

TABLE = """FileNames
1 "train.py"

FunctionNames
1 "<module>"
2 "loss"

FileLocations
1 {file_name_id=1 function_name_id=1 line=40 end_line=40 column=0 end_column=23}
2 {file_name_id=1 function_name_id=2 line=15 end_line=15 column=11 end_column=53}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}
"""

BODY = """
ENTRY main {
  p = f32[3] parameter(0)
  ROOT n = f32[3] negate(p), metadata={op_name="jit(loss)/neg" stack_frame_id=2}
}
"""


def _module(table=TABLE, body=BODY):
    return f"HloModule m\n\n{table}\n{body}"


def _case(name, text, command="verify", expect="error", mentions=None, quick=True, extra=(),
          check=None, timeout=None):
    def setup(ctx):
        ctx.write("m.hlo", text)
    return Case(id=f"hlo-frames/{command}/{name}", reader="hlo-frames",
                args=[command, "m.hlo"] + list(extra), setup=setup, expect=expect,
                names=None if expect == "ok" else "m.hlo", mentions=mentions, check=check,
                quick=quick, timeout=timeout)


def _stdout(pattern, label):
    def check(ctx, run):
        if run.exit_code == 0 and not re.search(pattern.encode(), run.stdout):
            shown = run.stdout.decode("utf-8", "replace").strip().splitlines()[:2]
            return "wrong-result", f"expected {label} /{pattern}/, got {shown}"
        return None
    return check


def _chain(frames, cycle):
    """A table of `frames` frames in one parent chain; with `cycle`, the outermost frame's parent
    is the innermost, so a walk up from any frame never reaches the top."""
    lines = []
    for i in range(1, frames + 1):
        parent = (frames if cycle else 0) if i == 1 else i - 1
        lines.append(f"{i} {{file_location_id=1 parent_frame_id={parent + 1}}}")
    table = TABLE.split("StackFrames")[0] + "StackFrames\n" + "\n".join(lines) + "\n"
    return _module(table, BODY.replace("stack_frame_id=2", f"stack_frame_id={frames}"))


def cases(shared, root_user):
    out = [
        # A good table: kept whole by print, and the source line reaches the DOT tooltip.
        _case("good-table-print", _module(), "print", expect="ok",
              check=_stdout(r"\nStackFrames\n1 \{file_location_id=1 parent_frame_id=1\}",
                            "the table printed back")),
        _case("good-table-dot", _module(), "dot", expect="ok",
              check=_stdout(r"(?s)source: train\.py:15:11 \(loss\).*called from: train\.py:40",
                            "the source line and its caller in the tooltip")),
        # Ids that name nothing.
        _case("dangling-file-name", _module(TABLE.replace("2 {file_name_id=1", "2 {file_name_id=7")),
              mentions="file_name_id=7 names no entry"),
        _case("dangling-function-name",
              _module(TABLE.replace("function_name_id=2", "function_name_id=0")),
              mentions="function_name_id=0 names no entry"),
        _case("dangling-location",
              _module(TABLE.replace("2 {file_location_id=2", "2 {file_location_id=9")),
              mentions="file_location_id=9 names no entry"),
        _case("dangling-parent",
              _module(TABLE.replace("parent_frame_id=2}", "parent_frame_id=77}")),
              mentions="parent_frame_id=77 names no frame"),
        _case("dangling-stack-frame-id", _module(body=BODY.replace("stack_frame_id=2", "stack_frame_id=3")),
              "run", mentions="stack_frame_id=3 names no frame"),
        _case("stack-frame-id-without-table", _module(table=""), "eval",
              mentions="no stack-frame table"),
        # Cycles through parent_frame_id: a frame its own parent, and a 100k-frame loop.
        _case("self-parent", _module(TABLE.replace("parent_frame_id=2}", "parent_frame_id=3}")),
              "dot", mentions="cycle"),
        _case("100k-frame-cycle", _chain(100000, cycle=True), "dot", mentions="cycle", timeout=30),
        _case("100k-frame-chain", _chain(100000, cycle=False), "dot", expect="ok", timeout=30,
              check=_stdout(r"\.\.\. 99991 frames above", "the stack cut after 8 callers")),
        # Huge and repeated ids.
        _case("huge-stack-frame-id",
              _module(body=BODY.replace("stack_frame_id=2", "stack_frame_id=9223372036854775807")),
              mentions="names no frame"),
        _case("stack-frame-id-past-64-bits",
              _module(body=BODY.replace("stack_frame_id=2", "stack_frame_id=99999999999999999999")),
              mentions="out of range"),
        _case("huge-entry-id", _module(TABLE.replace('1 "train.py"', '4294967297 "train.py"')),
              mentions="numbered 4294967297"),
        _case("duplicate-entry-id", _module(TABLE.replace('2 "loss"', '1 "loss"')),
              mentions="FunctionNames entry 2 is numbered 1"),
        _case("missing-section", _module(TABLE.split("FileLocations")[0]),
              mentions="expected the FileLocations section"),
        # Elided constants: refused by name where values are needed, filled on request.
        _case("elided-constant-run", "HloModule m\nENTRY e {\n  c = f32[64]{0} constant({...})\n"
              "  ROOT n = f32[64]{0} negate(c)\n}\n", "run",
              mentions=r"constant c is elided.*--fill_elided_constants"),
        _case("elided-constant-eval", "HloModule m\nENTRY e {\n  c = f32[64]{0} constant({...})\n"
              "  ROOT n = f32[64]{0} negate(c)\n}\n", "eval", mentions=r"constant c is elided"),
        _case("elided-constant-opt", "HloModule m\nENTRY e {\n  c = f32[64]{0} constant({...})\n"
              "  ROOT n = f32[64]{0} negate(c)\n}\n", "opt", expect="ok",
              check=_stdout(r"constant\(\{\.\.\.\}\)", "the elided constant kept")),
        _case("elided-constant-filled", "HloModule m\nENTRY e {\n  c = f32[64]{0} constant({...})\n"
              "  ROOT n = f32[64]{0} negate(c)\n}\n", "run", expect="ok",
              extra=["--fill_elided_constants=zeros", "--reference"],
              check=_stdout(r"reference: .*match", "a run that matches the evaluator")),
        # Sharding annotations, as jaxlib writes them for a sharded program, run on one device.
        _case("sharding-annotations-run",
              "HloModule m, num_partitions=4\nENTRY e {\n  p = f32[4]{0} constant({1, 2, 3, 4})\n"
              "  s = f32[4]{0} custom-call(p), custom_call_target=\"Sharding\", sharding={devices=[4]<=[4]}\n"
              "  n = f32[4]{0} negate(s)\n"
              "  ROOT r = f32[4]{0} custom-call(n), custom_call_target=\"xla.sdy.FuncResultSharding\"\n}\n",
              "run", expect="ok", extra=["--reference"],
              check=_stdout(r"\{-1, -2, -3, -4\}", "the negated values")),
        # Dynamic shapes: bounded ones run at their bounds; the rest is refused by name.
        _case("bounded-dynamic-run",
              "HloModule m\nENTRY e {\n  p = f32[<=8]{0:T(1024)} parameter(0)\n"
              "  ROOT r = f32[<=8]{0} reshape(p)\n}\n", "run", expect="ok",
              extra=["--reference"], check=_stdout(r"reference: .*match", "a run at the bound")),
        _case("bounded-dynamic-eval",
              "HloModule m\nENTRY e {\n  p = f32[<=8]{0} parameter(0)\n"
              "  ROOT n = f32[<=8]{0} negate(p)\n}\n", "eval", expect="ok"),
        _case("unbounded-dynamic-run",
              "HloModule m\nENTRY e {\n  p = f32[?]{0} parameter(0)\n"
              "  ROOT n = f32[?]{0} negate(p)\n}\n", "run", mentions=r"unbounded dynamic shape"),
        _case("slice-to-dynamic-run",
              "HloModule m\nENTRY e {\n  p = s32[2,2]{1,0} parameter(0)\n  one = s32[] constant(1)\n"
              "  two = s32[] constant(2)\n  ROOT d = s32[<=2,2]{1,0} custom-call(p, one, two), "
              "custom_call_target=\"SliceToDynamic\"\n}\n", "run",
              mentions=r"sets a dimension's size at run time"),
    ]
    return out

"""Writes that fail (stdout on a full device, a full disk), work kept on interruption, out-of-memory messages.

Standard output on /dev/full (every write fails with ENOSPC) must end in one line that says the
output was lost and exit 1, for every command that prints: a command that exits 0 with nothing
written loses the user's results silently. The same for a file output past the file size limit
(RLIMIT_FSIZE, as a full disk). A run stopped by --timeout still writes the --trace it was asked
for, marked as stopped; a dump directory whose writer was killed between writing a file and listing
it gets the file listed by the next writer. An allocation that fails says what was being read or
built, naming the file.
"""

import gzip
import io
import json
import os
import re
import subprocess
import tarfile

import craft
from harness import Case

GRAPH = ('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
         'attr { key: "shape" value { shape { dim { size: 3 } } } } }\n'
         'node { name: "a" op: "AddV2" input: "x" input: "x" attr { key: "T" value { type: DT_FLOAT } } }\n'
         'node { name: "y" op: "Square" input: "a" attr { key: "T" value { type: DT_FLOAT } } }\n')

NO_SPACE = r"standard output.*(No space left|a write failed)"


def _files(**files):
    def setup(ctx):
        for name, data in files.items():
            ctx.write(name, data)
    return setup


def _graph_chain(n):
    nodes = [GRAPH.splitlines()[0] + "\n"]
    prev = "x"
    for i in range(n):
        nodes.append(f'node {{ name: "n{i}" op: "Identity" input: "{prev}" '
                     'attr { key: "T" value { type: DT_FLOAT } } }\n')
        prev = f"n{i}"
    return "".join(nodes)


def _bundle(ctx):
    """A real bundle of SQUARE with one recorded execution, made by the binary under test."""
    ctx.write("m.hlo", craft.SQUARE)
    for argv in (["run", "m.hlo", "--xla_dump_to=d", "--xla_dump_hlo_snapshots"],
                 ["bundle", "d", "-o", "b.tar.gz"]):
        subprocess.run([ctx.xlens] + argv, cwd=ctx.work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": ctx.home, "TMPDIR": ctx.tmp},
                       timeout=120, check=True)


def dev_full_cases():
    cases = []

    def full(name, args, setup, quick=True, timeout=None):
        cases.append(Case(id=f"output/dev-full/{name}", reader="output", args=args, setup=setup,
                          stdout_path="/dev/full", expect="error", mentions=NO_SPACE, quick=quick,
                          timeout=timeout))

    full("eval", ["eval", "m.hlo"], _files(**{"m.hlo": craft.SQUARE}))
    full("run", ["run", "m.hlo"], _files(**{"m.hlo": craft.SQUARE}))
    full("print", ["print", "m.hlo"], _files(**{"m.hlo": craft.SQUARE}))
    full("cluster", ["cluster", "g.pbtxt", "--jit-level=ON_1", "--tf_xla_cpu_global_jit"],
         _files(**{"g.pbtxt": GRAPH}))
    full("graph-print", ["graph", "print", "g.pbtxt"], _files(**{"g.pbtxt": GRAPH}))
    # Far more than stdio's buffer: the writes fail while printing, long before the exit.
    full("graph-print-large", ["graph", "print", "g.pbtxt"], _files(**{"g.pbtxt": _graph_chain(3000)}))
    full("flags", ["flags"], None)
    full("help", ["--help"], None)
    # replay tells its progress on stderr: the last line must be the lost output, and the exit 1.
    cases.append(Case(id="output/dev-full/replay", reader="output", args=["replay", "b.tar.gz"], setup=_bundle,
                      stdout_path="/dev/full", expect="either", exits=(2,), check=_last_line_says_lost,
                      quick=True, timeout=120))
    return cases


def _last_line_says_lost(ctx, run):
    last = run.stderr.strip().split(b"\n")[-1] if run.stderr.strip() else b""
    if run.exit_code != 1:
        return "lost-data", f"exit {run.exit_code} with its report lost on a full device"
    if not re.match(rb"xlens: cannot write to standard output: No space left on device$", last):
        return "bad-message", f"the last line does not say the output was lost: {last[:120]!r}"
    return "clean", last.decode()


def file_limit_cases():
    """A file output past RLIMIT_FSIZE: the write fails (EFBIG) as on a full disk. The signal the
    kernel sends first (SIGXFSZ) must not kill xlens before it can say so."""
    return [
        Case(id="output/file-limit/dot-o", reader="output", args=["dot", "m.hlo", "-o", "out.dot"],
             setup=_files(**{"m.hlo": craft.SQUARE}), file_bytes=100,
             expect="error", names="out.dot", outputs=("out.dot",), quick=True),
        # The limit applies to stderr's file too: room for the message, not for the output.
        Case(id="output/file-limit/stdout-to-file", reader="output", args=["graph", "print", "g.pbtxt"],
             setup=_files(**{"g.pbtxt": _graph_chain(3000)}), stdout_path="{work}/out.txt", file_bytes=4096,
             expect="error", mentions="standard output", outputs=("out.txt",), quick=True),
    ]


# A loop that never ends, each iteration slow enough (a sine over 4 MiB) that the trace of a few
# seconds stays small.
SLOW_SPIN = craft.module("slow_spin", """
z = s32[] constant(0)
c = f32[] constant(1)
b = f32[1048576] broadcast(c), dimensions={}
t = (s32[], f32[1048576]) tuple(z, b)
ROOT w = (s32[], f32[1048576]) while(t), condition=cond, body=body
""", """cond (p: (s32[], f32[1048576])) -> pred[] {
  p = (s32[], f32[1048576]) parameter(0)
  ROOT t = pred[] constant(true)
}

body (p: (s32[], f32[1048576])) -> (s32[], f32[1048576]) {
  p = (s32[], f32[1048576]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[1048576] get-tuple-element(p), index=1
  one = s32[] constant(1)
  n = s32[] add(i, one)
  y = f32[1048576] sine(x)
  ROOT r = (s32[], f32[1048576]) tuple(n, y)
}

""")


def _stopped_trace(ctx, run):
    try:
        with open(ctx.path("t.json"), "rb") as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        return "lost-data", f"t.json is not a trace: {e}"
    stopped = trace.get("otherData", {}).get("stopped", "")
    if "--timeout" not in stopped:
        return "lost-data", f"the trace does not say it was stopped (otherData: {trace.get('otherData')})"
    if not any(e.get("ph") == "X" for e in trace.get("traceEvents", [])):
        return "lost-data", "the trace of the stopped run holds no spans"
    if b"t.json" not in run.stderr:
        return "bad-message", "the stop message does not say where the trace is"
    return None


def _module_0001_listed(ctx, run):
    try:
        with open(ctx.path("d/manifest.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        return "lost-data", f"d/manifest.json: {e}"
    listed = set()
    for module in manifest.get("modules", []):
        listed.update(module.get("files", []))
        for stage in module.get("stages", []):
            listed.update(stage.get("files", []))
    missing = sorted(n for n in os.listdir(ctx.path("d")) if n.startswith("module_0001.") and n not in listed)
    if missing:
        return "lost-data", f"{len(missing)} file(s) of the killed writer still unlisted: {missing[0]}"
    return None


def _killed_writer(ctx):
    """A dump directory as a writer killed between writing a pass dump and listing it leaves it:
    module 1, written by a process that is gone, with its last file on disk and not in the
    manifest."""
    ctx.write("m.hlo", craft.SQUARE)
    child = subprocess.Popen(["true"])
    child.wait()  # its pid now names no process
    manifest = {"format": 1, "modules": [{
        "id": 1, "name": "square", "process": child.pid,
        "files": ["module_0001.square.before_optimizations.txt"],
        "stages": [{"step": 0, "pipeline": "cpu", "pass": "pipeline-start", "changed": False,
                    "files": ["module_0001.square.0000.cpu.after_pipeline-start.before_a.txt"]}],
        "kernels": []}]}
    ctx.write("d/manifest.json", json.dumps(manifest))
    for name in ("module_0001.square.before_optimizations.txt",
                 "module_0001.square.0000.cpu.after_pipeline-start.before_a.txt",
                 "module_0001.square.0001.cpu.after_a.before_b.txt"):
        ctx.write("d/" + name, craft.SQUARE)


def interruption_cases():
    return [
        Case(id="output/interrupted/run-timeout-trace", reader="output",
             args=["run", "m.hlo", "--timeout", "0.5", "--trace", "t.json"],
             setup=_files(**{"m.hlo": SLOW_SPIN}), expect="error", names="--timeout",
             outputs=("t.json",), must_exist=("t.json",), check=_stopped_trace, timeout=60),
        Case(id="output/interrupted/killed-dump-writer", reader="output",
             args=["opt", "m.hlo", "--xla_dump_to=d"], setup=_killed_writer, expect="ok",
             outputs=("d/",), check=_module_0001_listed, quick=True),
    ]


def trace_summary_cases():
    events = [craft.kernel_event("a"), dict(craft.kernel_event("b"), tid=2), dict(craft.kernel_event("c"), pid=3)]

    def tracks(ctx, run):
        if b"3 events on 3 tracks in 2 processes" not in run.stdout:
            return "wrong-result", f"expected 3 tracks in 2 processes: {run.stdout[:120]!r}"
        return None
    return [Case(id="output/trace-summary/no-metadata-events", reader="output", args=["trace", "summary", "t.json"],
                 setup=_files(**{"t.json": craft.trace_json(events)}), expect="ok", check=tracks, quick=True)]


def _bundle_bomb(ctx):
    """A bundle whose module member inflates to 1.9 GiB of spaces (a few MiB on disk): within the
    reader's 2 GiB, past what the address-space limit lets it hold twice."""
    buffer = io.BytesIO()
    size = 1900 << 20
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=1, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w|") as tar:
            manifest = json.dumps({"format": 1, "modules": [{"id": 1, "name": "m", "files": [
                "module_0001.m.before_optimizations.txt"]}]}).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size = len(manifest)
            tar.addfile(info, io.BytesIO(manifest))
            info = tarfile.TarInfo("module_0001.m.before_optimizations.txt")
            info.size = size

            class Spaces(io.RawIOBase):
                left = size

                def readable(self):
                    return True

                def readinto(self, b):
                    n = min(len(b), self.left)
                    b[:n] = b" " * n
                    self.left -= n
                    return n
            tar.addfile(info, io.BufferedReader(Spaces(), 1 << 20))
    ctx.write("b.tar.gz", buffer.getvalue())


def _fill_graph():
    """Fill of a 50000x50000 float: 10 GB from a few hundred bytes."""
    nodes = [GRAPH.splitlines()[0] + "\n",
             'node { name: "p" op: "Const" attr { key: "dtype" value { type: DT_BOOL } } '
             'attr { key: "value" value { tensor { dtype: DT_BOOL tensor_shape { } bool_val: true } } } }\n',
             'node { name: "big" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } '
             'attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } } '
             'int_val: 50000 int_val: 50000 } } } }\n',
             'node { name: "one" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
             'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } }\n',
             'node { name: "y" op: "Fill" input: "big" input: "one" '
             'attr { key: "T" value { type: DT_FLOAT } } attr { key: "index_type" value { type: DT_INT32 } } }\n']
    return "".join(nodes)


def memory_cases():
    """Allocations that fail under the sweep's address-space limit: the message names what was
    being read or built (an answer refused up front is as good)."""
    return [
        Case(id="output/oom/graph-fill-10gb", reader="output", args=["graph", "run", "g.pbtxt", "--fetch", "y"],
             setup=_files(**{"g.pbtxt": _fill_graph()}), expect="error", names="g.pbtxt", oom_is_fine=True,
             quick=True),
        Case(id="output/oom/bundle-1.9gb-member", reader="output", args=["replay", "b.tar.gz"],
             setup=_bundle_bomb, expect="error", names="b.tar.gz", oom_is_fine=True, timeout=120),
    ]


def cases(shared, root_user):
    return (dev_full_cases() + file_limit_cases() + interruption_cases() + trace_summary_cases()
            + memory_cases())

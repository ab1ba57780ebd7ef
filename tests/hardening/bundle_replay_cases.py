"""Bug bundles, replay, bisect and reduce: links in dump folders, expansion, time bounds, signals, messages.

The bundles are built here with Python's tarfile, as tests/dump/testdata/broken_bundles/make_corpus.py
builds its corpus (its `member` helper), big ones streamed to disk. A bundle that replays holds a
manifest whose module has a before_optimizations dump, how it was compiled and one recorded
execution (arguments and results as .npy).
"""

import gzip
import io
import json
import os
import re
import signal
import sys
import tarfile

import craft
from harness import Case

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dump", "testdata",
                                "broken_bundles"))
from make_corpus import member  # noqa: E402

BEFORE = "module_0001.m.before_optimizations.txt"

# A module that never ends: its loop's condition is always true.
SPIN = """HloModule spin

cond {
  p = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}

body {
  p = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT a = s32[] add(p, one)
}

ENTRY e {
  z = s32[] constant(0)
  ROOT w = s32[] while(z), condition=cond, body=body
}
"""

TWICE = craft.module("m", """
p = f32[2] parameter(0)
ROOT r = f32[2] add(p, p)
""")


def _manifest(arguments=(), results=(), xla_flags="", module_file=BEFORE):
    module = {"id": 1, "name": "m", "files": [module_file],
              "invocation": {"command_line": ["xlens", "run", "m.hlo"], "backend": "cpu",
                             "xla_flags": xla_flags, "tf_xla_flags": ""}}
    if arguments or results:
        module["executions"] = [{"execution": 1,
                                 "arguments": [{"file": f, "shape": s} for f, s in arguments],
                                 "results": [{"file": f, "shape": s} for f, s in results]}]
    return json.dumps({"format": 1, "modules": [module]}).encode()


def _bundle_bytes(files):
    """A .tar.gz of `files` (name -> bytes), in memory."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            tar.addfile(*member(name, data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _replay_bundle(module_text, args=(), results=(), xla_flags=""):
    """A setup writing b.tar.gz: `module_text` with recorded arguments and results, each a
    (shape text, .npy bytes)."""
    def setup(ctx):
        files = {}
        arg_entries, result_entries = [], []
        for i, (shape, data) in enumerate(args):
            files[f"a{i}.npy"] = data
            arg_entries.append((f"a{i}.npy", shape))
        for i, (shape, data) in enumerate(results):
            files[f"o{i}.npy"] = data
            result_entries.append((f"o{i}.npy", shape))
        files = {"manifest.json": _manifest(arg_entries, result_entries, xla_flags),
                 BEFORE: module_text.encode(), **files}
        ctx.write("b.tar.gz", _bundle_bytes(files))
    return setup


def _streamed_bundle(path, members):
    """Writes a .tar.gz of `members` (an iterable of (TarInfo, file object or None)) to `path`,
    compressed as it goes (level 1: the big ones are zeros)."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, data)


class _Zeros(io.RawIOBase):
    """`size` zero bytes, read in pieces (a member's data that is never held whole)."""
    def __init__(self, size):
        self.left = size

    def readable(self):
        return True

    def readinto(self, buffer):
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def _shared_file(ctx, name, make):
    """`make(path)` once per sweep, in the shared directory; the case gets a copy (a link would
    be followed or refused)."""
    path = os.path.join(ctx.shared, name)
    if not os.path.exists(path):
        make(path + ".part")
        os.replace(path + ".part", path)
    with open(path, "rb") as src, open(ctx.path("b.tar.gz"), "wb") as dst:
        while True:
            block = src.read(1 << 20)
            if not block:
                break
            dst.write(block)


def _many_members(count):
    def make(path):
        def members():
            yield member("manifest.json", _manifest())
            yield member(BEFORE, b"HloModule m\n")
            for i in range(count):
                yield member(f"m/{i:06d}.txt", b"x")
        _streamed_bundle(path, members())
    return lambda ctx: _shared_file(ctx, f"bundle2-{count}-members.tar.gz", make)


class _Chunks(io.RawIOBase):
    """The bytes of an iterable of byte strings, read in pieces (a member never held whole)."""
    def __init__(self, chunks):
        self.chunks = iter(chunks)
        self.pending = b""

    def readable(self):
        return True

    def readinto(self, buffer):
        # Filled whole but at the end: tarfile takes a short read for the end of the data.
        n = 0
        while n < len(buffer):
            if not self.pending:
                self.pending = next(self.chunks, None)
                if self.pending is None:
                    self.pending = b""
                    break
                continue
            take = min(len(buffer) - n, len(self.pending))
            buffer[n:n + take] = self.pending[:take]
            self.pending = self.pending[take:]
            n += take
        return n


def _manifest_of_many_modules(modules, names_each, padding):
    """A bundle of `padding` random bytes and a manifest.json listing `modules` modules, each
    naming one short file `names_each` times: text that compresses about 100 times (the padding
    keeps the whole under the expansion ratio), and whose JSON tree takes many times its text."""
    def make(path):
        head = b'{"format": 1, "modules": ['
        files = b", ".join([b'"a"'] * names_each)
        def module(i):
            return (b", " if i else b"") + b'{"id": %d, "name": "m", "files": [%s]}' % (i + 1, files)
        tail = b"]}"
        fixed = len(module(0)) - 1  # all but the id's digits, without the leading ", "
        size = len(head) + len(tail) + sum(fixed + len(str(i + 1)) + (2 if i else 0) for i in range(modules))
        def chunks():
            yield head
            batch = []
            for i in range(modules):
                batch.append(module(i))
                if len(batch) == 1000:
                    yield b"".join(batch)
                    batch = []
            yield b"".join(batch)
            yield tail
        info = tarfile.TarInfo("manifest.json")
        info.size = size
        pad, _ = member("padding.bin", size=padding)
        _streamed_bundle(path, [(pad, io.BytesIO(os.urandom(padding))), (info, _Chunks(chunks())),
                                member(BEFORE, b"HloModule m\n")])
    return lambda ctx: _shared_file(ctx, f"bundle2-manifest-{modules}-modules.tar.gz", make)


def _expands_to(size):
    def make(path):
        info, _ = member("zeros.npy", size=size)
        _streamed_bundle(path, [member("manifest.json", _manifest()), (info, _Zeros(size))])
    return lambda ctx: _shared_file(ctx, f"bundle2-expands-{size}.tar.gz", make)


def _bundle_members(ctx):
    with tarfile.open(ctx.path("b.tar.gz")) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()}


SECRET = b"OUTSIDE-SECRET-3141"


def _no_secret(ctx, run):
    """The bundle holds nothing from outside the dump directory."""
    if run.exit_code != 0:
        return None
    if not os.path.exists(ctx.path("b.tar.gz")):
        return "lost-data", "exit 0 without the bundle"
    for name, data in _bundle_members(ctx).items():
        if data is not None and SECRET in data:
            return "wrong-result", f"packed {name}, which is a link to a file outside the dump directory"
    if not re.search(rb"link", run.stdout + run.stderr):
        return "bad-message", "the link left out is not reported"
    return None


def _dump_dir(ctx, extra_files=()):
    """d/: a dump directory whose manifest also lists `extra_files`; ../outside/secret.txt."""
    ctx.write("outside/secret.txt", SECRET)
    ctx.write(f"d/{BEFORE}", TWICE)
    module = {"id": 1, "name": "m", "files": [BEFORE, *extra_files]}
    ctx.write("d/manifest.json", json.dumps({"format": 1, "modules": [module]}))


def _rss_below(mb, then=None):
    def check(ctx, run):
        if run.max_rss_kb > mb << 10:
            return "memory", f"peak RSS {run.max_rss_kb >> 10} MiB, over the {mb} MiB this input needs"
        return then(ctx, run) if then else None
    return check


def _stopped_by_timeout(ctx, run):
    """Ended by --timeout 2, soon after it, with a last line that says so. The lines before it
    are the command's progress (bisect's steps, replay's "module ... on cpu"), each an xlens line."""
    lines = run.stderr.strip().split(b"\n")
    last = lines[-1] if lines else b""
    if run.exit_code != 1 or not re.search(rb"stopped by --timeout|timed out after", last) \
            or not last.startswith(b"xlens"):
        return "hang", f"not stopped by --timeout (exit {run.exit_code}): {last[:200]!r}"
    # The limit, the watchdog's 2 s of grace for compiled code that never polls, and start-up.
    if run.seconds > 8:
        return "hang", f"stopped {run.seconds:.1f} s after the start, with --timeout 2"
    if any(not line.startswith(b"xlens") for line in lines):
        return "bad-message", f"a line on stderr that is not xlens's: {run.stderr[:200]!r}"
    if re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", run.stderr):
        return "bad-message", "a raw control character on stderr"
    return "clean", last.decode("utf-8", "replace")


def _says(pattern, forbidden=rb"by 0 \(max abs\)"):
    """Replay's verdict (stdout) says `pattern`, never `forbidden`."""
    def check(ctx, run):
        if re.search(forbidden, run.stdout):
            return "bad-message", f"the verdict says {forbidden.decode()}: {run.stdout.strip()[:200]!r}"
        if run.exit_code in (0, 2) and not re.search(pattern.encode(), run.stdout):
            return "bad-message", f"the verdict does not say /{pattern}/: {run.stdout.strip()[:200]!r}"
        return None
    return check


def _ended_by(signum):
    """The signal ended the run (it did not end before it, leaving nothing to judge)."""
    def check(ctx, run):
        if run.signal != signum:
            return "wrong-result", (f"not ended by {signal.Signals(signum).name} (exit {run.exit_code}, "
                                    f"signal {run.signal}): {run.stderr.strip()[-200:]!r}")
        return None
    return check


def _no_raw_controls(ctx, run):
    if re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", run.stderr.replace(b"\n", b"") + run.stdout.replace(b"\n", b"")):
        return "bad-message", "a raw control character from the recorded flags reached the terminal"
    return None


def cases(shared, root_user):
    c = []

    # Cause 8: links in the dump folder and under --graphs are never followed.
    def link_to_secret(ctx):
        _dump_dir(ctx, ["secret.txt"])
        os.symlink("../outside/secret.txt", ctx.path("d/secret.txt"))
    c.append(Case(id="bundle2/bundle/dump-link-to-a-file-outside", reader="bundle2",
                  args=["bundle", "d", "-o", "b.tar.gz"], setup=link_to_secret, expect="either",
                  outputs=("b.tar.gz",), check=_no_secret, quick=True))

    def linked_directory(ctx):
        _dump_dir(ctx, ["sub/secret.txt"])
        os.symlink("../outside", ctx.path("d/sub"))
    c.append(Case(id="bundle2/bundle/dump-link-to-a-directory-outside", reader="bundle2",
                  args=["bundle", "d", "-o", "b.tar.gz"], setup=linked_directory, expect="either",
                  outputs=("b.tar.gz",), check=_no_secret, quick=True))

    def graphs_link(ctx):
        _dump_dir(ctx)
        ctx.write("g/real.pbtxt", "node { name: 'a' op: 'NoOp' }\n")
        os.symlink("../outside/secret.txt", ctx.path("g/stolen.pbtxt"))
    c.append(Case(id="bundle2/bundle/graphs-link-to-a-file-outside", reader="bundle2",
                  args=["bundle", "d", "--graphs", "g", "-o", "b.tar.gz"], setup=graphs_link,
                  expect="either", outputs=("b.tar.gz",), check=_no_secret, quick=True))

    # Cause 5, the writer: files are read and compressed straight into the output, never held.
    def big_dump_file(ctx):
        _dump_dir(ctx, ["big.npy"])
        with open(ctx.path("d/big.npy"), "wb") as f:
            f.truncate(512 << 20)  # sparse: no disk is used
    c.append(Case(id="bundle2/bundle/512mib-dump-file-memory-flat", reader="bundle2",
                  args=["bundle", "d", "-o", "b.tar.gz"], setup=big_dump_file, expect="ok",
                  outputs=("b.tar.gz",), must_exist=("b.tar.gz",), check=_rss_below(300), timeout=60))

    # Cause 5: entry counts and expansion bounded before the work; memory flat.
    c.append(Case(id="bundle2/replay/100001-tiny-members", reader="bundle2", args=["replay", "b.tar.gz"],
                  setup=_many_members(100001), expect="error", names="b.tar.gz",
                  mentions="members", check=_rss_below(300), timeout=60))
    # The abort of the probe: a 6 MB bundle whose manifest lists 200k modules in 400 MB of text,
    # within the expansion ratio; its JSON tree is past the memory limit.
    c.append(Case(id="bundle2/replay/6mb-manifest-listing-200k-modules", reader="bundle2",
                  args=["replay", "b.tar.gz"], setup=_manifest_of_many_modules(200000, 500, 2000000),
                  expect="error", names="b.tar.gz", mentions="manifest.json", check=_rss_below(300),
                  timeout=60))
    c.append(Case(id="bundle2/replay/2mb-expanding-to-1.9gb", reader="bundle2", args=["replay", "b.tar.gz"],
                  setup=_expands_to(1900 << 20), expect="error", names="b.tar.gz",
                  mentions="expand", check=_rss_below(300), timeout=60))
    c.append(Case(id="bundle2/replay/small-expanding-to-5gb", reader="bundle2", args=["replay", "b.tar.gz"],
                  setup=_expands_to(5 << 30), expect="error", names="b.tar.gz",
                  mentions="expand", check=_rss_below(300), timeout=60))
    n = 1 << 18  # 1 MiB a result: 1000 kept would be 1 GiB
    big = craft.module("m", f"p = f32[{n}] parameter(0)\nROOT r = f32[{n}] add(p, p)")
    zeros = craft.npy("<f4", (n,), bytes(4 * n))
    c.append(Case(id="bundle2/replay/iterations-1000-memory-flat", reader="bundle2",
                  args=["replay", "b.tar.gz", "--iterations", "1000"],
                  setup=_replay_bundle(big, [(f"f32[{n}]", zeros)], [(f"f32[{n}]", zeros)]),
                  expect="either", exits=(2,), check=_rss_below(400, _says("all outputs match")),
                  timeout=120))

    # Cause 6: a module that never ends stops at --timeout in replay, bisect and reduce.
    c.append(Case(id="bundle2/replay/never-ending-module", reader="bundle2",
                  args=["replay", "b.tar.gz", "--timeout", "2"],
                  setup=_replay_bundle(SPIN, [], [("s32[]", craft.npy("<i4", (), bytes(4)))]),
                  expect="error", check=_stopped_by_timeout, timeout=30))
    c.append(Case(id="bundle2/bisect/never-ending-module", reader="bundle2",
                  args=["bisect", "spin.hlo", "--timeout", "2", "-o", "out"],
                  setup=lambda ctx: ctx.write("spin.hlo", SPIN), outputs=("out",),
                  expect="error", check=_stopped_by_timeout, timeout=30))
    c.append(Case(id="bundle2/reduce/never-ending-module-miscompare", reader="bundle2",
                  args=["reduce", "spin.hlo", "--test=miscompare", "--timeout", "2", "-o", "r.hlo"],
                  setup=lambda ctx: ctx.write("spin.hlo", SPIN), outputs=("r.hlo",),
                  expect="error", check=_stopped_by_timeout, timeout=30))
    c.append(Case(id="bundle2/reduce/never-ending-module-bisect", reader="bundle2",
                  args=["reduce", "spin.hlo", "--test=bisect", "--timeout", "2", "-o", "r.hlo"],
                  setup=lambda ctx: ctx.write("spin.hlo", SPIN), outputs=("r.hlo",),
                  expect="error", check=_stopped_by_timeout, timeout=30))

    # Cause 8: an interrupted replay leaves no private directory behind (TMPDIR is the case's tmp/).
    for name, signum in (("sigint", signal.SIGINT), ("sigterm", signal.SIGTERM), ("sighup", signal.SIGHUP)):
        c.append(Case(id=f"bundle2/replay/{name}-leaves-no-temporary-folder", reader="bundle2",
                      args=["replay", "b.tar.gz"],
                      setup=_replay_bundle(SPIN, [], [("s32[]", craft.npy("<i4", (), bytes(4)))]),
                      expect="either", signal_after=(1.5, signum), check=_ended_by(signum), timeout=30,
                      quick=signum == signal.SIGINT))

    # Cause 11: recorded text reaches the terminal escaped; a verdict says what differs.
    two = craft.npy_f32([1, 2])
    c.append(Case(id="bundle2/replay/recorded-flags-with-terminal-escapes", reader="bundle2",
                  args=["replay", "b.tar.gz"],
                  setup=_replay_bundle(TWICE, [("f32[2]", two)], [("f32[2]", craft.npy_f32([2, 4]))],
                                       xla_flags="--xla_test_miscompile_kernel=\x1b]0;pwned\x07\x1b[2J"),
                  expect="either", exits=(2,), check=_no_raw_controls, quick=True))
    for what, result, pattern in (
            ("shape", craft.npy_f32([2, 4, 0]), "in shape"),
            ("dtype", craft.npy("<i4", (2,), b"\x02\x00\x00\x00\x04\x00\x00\x00"), "in dtype"),
            ("nan", craft.npy_f32([2, float("nan")]), "NaN")):
        c.append(Case(id=f"bundle2/replay/recorded-result-of-another-{what}", reader="bundle2",
                      args=["replay", "b.tar.gz"],
                      setup=_replay_bundle(TWICE, [("f32[2]", two)], [("f32[2]", result)]),
                      expect="either", exits=(2,), check=_says(pattern), quick=True))
    return c

"""The persistent compile cache: planted links, foreign and forged entries, huge entries.

Entry names are hashes of the compiled IR, so most cases first run `xlens run` once to fill a
cache directory (the case's own command, which must succeed with the right answer), and then,
in the check, tamper with what it wrote and run xlens again on the same directory under the
sweep's limits. That second run decides: a crash, a wrong answer, a file written outside the
cache or a peak RSS that grows with the entry's size is the finding. The cache is an
optimization: whatever is found in it, the answer must be right and the exit 0.
"""

import os
import re
import stat

import craft
import harness
from harness import Case

CACHE_FLAG = "--xla_xlens_persistent_cache_dir="

# Two modules with the same names and shapes but different code: x*x and x+x.
SQUARE = craft.module("m", """
p = f32[3] parameter(0)
ROOT r = f32[3] multiply(p, p)
""")
DOUBLE = craft.module("m", """
p = f32[3] parameter(0)
ROOT r = f32[3] add(p, p)
""")
# The same as SQUARE over 65536 elements: its code writes far past DOUBLE's buffers.
BIG_SQUARE = craft.module("m", """
p = f32[65536] parameter(0)
ROOT r = f32[65536] multiply(p, p)
""")
SQUARE_ANSWER = r"\{1, 4, 9\}"
DOUBLE_ANSWER = r"\{2, 4, 6\}"

# A second run's RSS above this means it read an entry whole (xlens itself needs far less).
READ_WHOLE_RSS_KB = 512 << 10


def _inputs(ctx):
    ctx.write("m.hlo", SQUARE)
    ctx.write("double.hlo", DOUBLE)
    ctx.write("big.hlo", BIG_SQUARE)
    ctx.write("in/arg0.npy", craft.npy_f32([1, 2, 3]))
    ctx.write("inbig/arg0.npy", craft.npy_f32([1.0] * 65536))


def _run_args(module, inputs, cache):
    return ["run", module, "--inputs", inputs, CACHE_FLAG + cache]


def _entries(ctx, cache):
    d = ctx.path(cache)
    return sorted(os.path.join(d, n) for n in os.listdir(d)) if os.path.isdir(d) else []


def _again(ctx, run, args, timeout=30):
    """xlens (the binary of `run`) once more in the case's directory, under the sweep's limits:
    (a harness.Run, its verdict from harness.classify_run or None)."""
    env = dict(run.env)
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    env["LANG"] = "C.UTF-8"
    prefix = os.path.join(ctx.root, "_run", "again")
    proc = harness.start([run.argv[0]] + args, ctx.work, env, prefix, 4 << 30)
    status, usage, timed_out, seconds = harness.wait([proc], timeout)[0]
    with open(prefix + ".stdout", "rb") as f:
        stdout = f.read(1 << 20)
    with open(prefix + ".stderr", "rb") as f:
        stderr = f.read(1 << 20)
    again = harness.Run(
        argv=[run.argv[0]] + args, env=env,
        exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        timed_out=timed_out, seconds=seconds, max_rss_kb=usage.ru_maxrss, stdout=stdout,
        stderr=stderr)
    verdict = harness.classify_run(Case(id="cache/again", reader="cache", args=[]), again, 3 << 20)
    return again, verdict


def _judge(again, verdict, answer, label):
    """The second run's verdict: it must succeed with `answer` on stdout."""
    if verdict:
        category, detail = verdict
        return category, f"the run after tampering: {detail}"
    if again.exit_code != 0:
        return "wrong-result", f"the run after tampering failed: {harness.first_line(again.stderr)}"
    if not re.search(answer.encode(), again.stdout):
        return "wrong-result", (f"the run after tampering printed "
                                f"{harness.first_line(again.stdout)!r}, expected {label}")
    return None


def _first_run_ok(run, answer):
    if run.exit_code != 0 or not re.search(answer.encode(), run.stdout):
        return "wrong-result", f"the first run: {harness.first_line(run.stderr or run.stdout)}"
    return None


def _planted_links(dangling):
    def check(ctx, run):
        verdict = _first_run_ok(run, SQUARE_ANSWER)
        if verdict:
            return verdict
        entries = _entries(ctx, "cache")
        if not entries:
            return "lost-data", "the first run wrote nothing into the cache"
        victim = ctx.path("victim.txt")
        with open(victim, "w") as f:
            f.write("precious\n")
        targets = []
        for i, entry in enumerate(entries):
            target = ctx.path(f"created{i}") if dangling else victim
            targets.append(target)
            os.unlink(entry)
            os.symlink(target, entry)
        again, verdict = _again(ctx, run, _run_args("m.hlo", "in", "cache"))
        with open(victim, "rb") as f:
            if f.read() != b"precious\n":
                return "fs-touched", "the file a planted link points to was overwritten"
        for target in targets:
            if dangling and os.path.lexists(target):
                return "fs-touched", f"a planted dangling link created {os.path.relpath(target, ctx.work)}"
        return _judge(again, verdict, SQUARE_ANSWER, "x*x")
    return check


def _foreign_entry(donor, donor_inputs):
    """`donor` compiled into ca/, its entry copied over the entry names of DOUBLE in cb/."""
    def check(ctx, run):
        donor_entries = _entries(ctx, "ca")
        if run.exit_code != 0 or not donor_entries:
            return "wrong-result", f"the first run: {harness.first_line(run.stderr)}"
        fill, verdict = _again(ctx, run, _run_args("double.hlo", "in", "cb"))
        verdict = verdict or _judge(fill, None, DOUBLE_ANSWER, "x+x")
        if verdict:
            return verdict
        for i, entry in enumerate(_entries(ctx, "cb")):
            with open(donor_entries[min(i, len(donor_entries) - 1)], "rb") as f:
                data = f.read()
            with open(entry, "wb") as f:
                f.write(data)
        again, verdict = _again(ctx, run, _run_args("double.hlo", "in", "cb"))
        return _judge(again, verdict, DOUBLE_ANSWER, "x+x {2, 4, 6}")
    return Case(id=f"cache/foreign-entry-{'bigger' if donor != 'm.hlo' else 'same-shape'}",
                reader="cache", args=_run_args(donor, donor_inputs, "ca"), setup=_inputs,
                expect="ok", outputs=("ca",), check=check, quick=True)


def _sparse_entry(ctx, run):
    verdict = _first_run_ok(run, SQUARE_ANSWER)
    if verdict:
        return verdict
    entries = _entries(ctx, "cache")
    if not entries:
        return "lost-data", "the first run wrote nothing into the cache"
    for entry in entries:
        os.truncate(entry, 1_900_000_000)  # a 1.9 GB entry of holes: no disk, no memory
    again, verdict = _again(ctx, run, _run_args("m.hlo", "in", "cache"))
    if not verdict and again.max_rss_kb > READ_WHOLE_RSS_KB:
        return "memory", (f"peak RSS {again.max_rss_kb >> 10} MiB for a 1.9 GB sparse cache entry: "
                          "read whole instead of refused by its size")
    return _judge(again, verdict, SQUARE_ANSWER, "x*x")


def _refused_directory(said):
    """The run succeeds, says once why the directory is not used, and writes nothing there."""
    def check(ctx, run):
        verdict = _first_run_ok(run, SQUARE_ANSWER)
        if verdict:
            return verdict
        if _entries(ctx, "cache"):
            return "fs-touched", "wrote entries into a cache directory that is not private to the user"
        lines = [l for l in run.stderr.decode("utf-8", "replace").splitlines() if "cache" in l]
        if len(lines) != 1 or not lines[0].startswith("xlens") or not re.search(said, lines[0]):
            return "bad-message", f"expected one line on the cache saying /{said}/, got {lines[:3]}"
        return None
    return check


def _private_directory(ctx, run):
    verdict = _first_run_ok(run, SQUARE_ANSWER)
    if verdict:
        return verdict
    mode = stat.S_IMODE(os.stat(ctx.path("cache")).st_mode)
    if mode != 0o700:
        return "fs-touched", f"the cache directory was created with mode {mode:04o}, not 0700"
    if not _entries(ctx, "cache"):
        return "lost-data", "nothing was written into the cache"
    return None


def _reuse_without_warnings(ctx, runs):
    """After concurrent writers: only entries in the directory, all of them loaded cleanly."""
    runs = runs if isinstance(runs, list) else [runs]
    for run in runs:
        verdict = _first_run_ok(run, SQUARE_ANSWER)
        if verdict:
            return verdict
    names = os.listdir(ctx.path("cache"))
    if not names or any(not n.endswith(".xlensobj") for n in names):
        return "fs-touched", f"the cache holds {names[:4]}"
    again, verdict = _again(ctx, runs[0], _run_args("m.hlo", "in", "cache"))
    verdict = verdict or _judge(again, None, SQUARE_ANSWER, "x*x")
    if verdict:
        return verdict
    if b"cache" in again.stderr:
        return "wrong-result", f"an entry written concurrently is not valid: {harness.first_line(again.stderr)}"
    return None


def _replaced_by(kind):
    """The entries replaced by a FIFO or a directory: not waited on, not fatal."""
    def check(ctx, run):
        verdict = _first_run_ok(run, SQUARE_ANSWER)
        if verdict:
            return verdict
        for entry in _entries(ctx, "cache"):
            os.unlink(entry)
            if kind == "fifo":
                os.mkfifo(entry)
            else:
                os.mkdir(entry)
        again, verdict = _again(ctx, run, _run_args("m.hlo", "in", "cache"))
        return _judge(again, verdict, SQUARE_ANSWER, "x*x")
    return check


def cases(shared, root_user):
    def case(name, check, setup=_inputs, quick=True, cache="cache", **kw):
        return Case(id=f"cache/{name}", reader="cache", args=_run_args("m.hlo", "in", cache),
                    setup=setup, expect="ok", outputs=(cache,), check=check, quick=quick, **kw)

    def shared_dir(mode, owner=None):
        def setup(ctx):
            _inputs(ctx)
            os.mkdir(ctx.path("cache"))
            os.chmod(ctx.path("cache"), mode)
            if owner is not None:
                os.chown(ctx.path("cache"), owner, owner)
        return setup

    return [
        case("planted-link-to-victim", _planted_links(dangling=False)),
        case("planted-link-dangling", _planted_links(dangling=True)),
        _foreign_entry("m.hlo", "in"),
        _foreign_entry("big.hlo", "inbig"),
        case("sparse-1.9g-entry", _sparse_entry),
        case("group-writable-dir", _refused_directory(r"persistent cache directory .*group"),
             setup=shared_dir(0o775)),
        case("world-writable-sticky-dir", _refused_directory(r"persistent cache directory .*every user"),
             setup=shared_dir(0o1777)),
        case("dir-of-another-user", _refused_directory(r"persistent cache directory .*user id 65534"),
             setup=shared_dir(0o700, 65534),
             root_skip=None if root_user else "giving a directory to another user needs root"),
        case("missing-dir-created-private", _private_directory, quick=False),
        case("4-concurrent-writers", _reuse_without_warnings, parallel=4, quick=False),
        case("entry-replaced-by-fifo", _replaced_by("fifo"), quick=False),
        case("entry-replaced-by-directory", _replaced_by("dir"), quick=False),
    ]

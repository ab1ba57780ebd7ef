"""Kernel choices made by timing (measured_choice.h): the file of
--xla_cpu_xlens_load_kernel_choices_from in every broken form, and the persistent cache's choice
entries (DIR/HASH.xlenschoice) tampered with after a first run wrote them.

A loaded file is the user's: a broken one is an error of one line naming the flag and what is
wrong. A cache entry is an optimization: whatever is found there, the run times the kernels again,
says once which entry it rejected, and computes the right answer (--reference), writing nothing
outside the cache.
"""

import json
import os
import re

import craft
import harness
from harness import Case

CACHE_FLAG = "--xla_xlens_persistent_cache_dir="
LOAD_FLAG = "--xla_cpu_xlens_load_kernel_choices_from="

# MobileNet's depthwise layer with bias and ReLU6: both xlens's loops and oneDNN's kernel run it,
# so compiling it times them.
DEPTHWISE = craft.module("dw", """
x = f32[2,9,11,80] parameter(0)
w = f32[3,3,1,80] parameter(1)
bias = f32[80] parameter(2)
c = f32[2,9,11,80] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=80
bb = f32[2,9,11,80] broadcast(bias), dimensions={3}
s = f32[2,9,11,80] add(c, bb)
z = f32[] constant(0)
six = f32[] constant(6)
ROOT r = f32[2,9,11,80] clamp(z, s, six)
""")


def _has_avx512f():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def _record(**changes):
    record = {"machine": "m", "key": "k", "candidates": ["depthwise:avx512", "brdgmm_dw:avx512_core"],
              "best_ms": [1.0, 0.5], "winner": "brdgmm_dw:avx512_core"}
    record.update(changes)
    return record


def _document(choices, **changes):
    document = {"format": "xlens kernel choices", "version": 1, "choices": choices}
    document.update(changes)
    return json.dumps(document)


def _run_args(extra):
    return ["run", "dw.hlo", "--inputs", "random", "--reference"] + extra


def _load_case(name, data, mentions, setup=None, quick=True):
    def write(ctx):
        ctx.write("dw.hlo", DEPTHWISE)
        if setup is not None:
            setup(ctx)
        elif data is not None:
            ctx.write("choices.json", data)
    return Case(id=f"kernel-choices/load/{name}", reader="kernel-choices",
                args=_run_args([LOAD_FLAG + "choices.json"]), setup=write, expect="error",
                names="--xla_cpu_xlens_load_kernel_choices_from", mentions=mentions, quick=quick)


def _entries(ctx):
    d = ctx.path("cache")
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".xlenschoice")) \
        if os.path.isdir(d) else []


def _again(ctx, run):
    env = dict(run.env)
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    prefix = os.path.join(ctx.root, "_run", "again")
    proc = harness.start([run.argv[0]] + _run_args([CACHE_FLAG + "cache"]), ctx.work, env, prefix, 4 << 30)
    status, usage, timed_out, seconds = harness.wait([proc], 60)[0]
    with open(prefix + ".stdout", "rb") as f:
        stdout = f.read(1 << 20)
    with open(prefix + ".stderr", "rb") as f:
        stderr = f.read(1 << 20)
    again = harness.Run(
        argv=[run.argv[0]], env=env,
        exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        timed_out=timed_out, seconds=seconds, max_rss_kb=usage.ru_maxrss, stdout=stdout, stderr=stderr)
    return again, harness.classify_run(Case(id="kernel-choices/again", reader="kernel-choices", args=[]),
                                       again, 3 << 20)


def _tampered(tamper, said):
    """The first run's choice entry tampered with; the second run must succeed and say `said`."""
    def check(ctx, run):
        if run.exit_code != 0:
            return "wrong-result", f"the first run: {harness.first_line(run.stderr or run.stdout)}"
        entries = _entries(ctx)
        if len(entries) != 1:
            return "lost-data", f"the first run wrote {len(entries)} kernel choice entries, expected 1"
        victim = ctx.path("victim.txt")
        with open(victim, "w") as f:
            f.write("precious\n")
        tamper(ctx, entries[0], victim)
        again, verdict = _again(ctx, run)
        with open(victim, "rb") as f:
            if f.read() != b"precious\n":
                return "fs-touched", "the file a planted link points to was overwritten"
        if verdict:
            return verdict[0], f"the run after tampering: {verdict[1]}"
        if again.exit_code != 0:
            return "wrong-result", f"the run after tampering failed: {harness.first_line(again.stderr)}"
        # One line on the entry read (a directory in its place also fails the rewrite, said apart).
        lines = [l for l in again.stderr.decode("utf-8", "replace").splitlines() if "is rejected" in l]
        if len(lines) != 1 or not re.search(said, lines[0]):
            return "bad-message", f"expected one line on the entry saying /{said}/, got {lines[:3]}"
        return None
    return check


def _write(data):
    def tamper(ctx, entry, victim):
        os.unlink(entry)
        with open(entry, "wb") as f:
            f.write(data)
    return tamper


def _link(ctx, entry, victim):
    os.unlink(entry)
    os.symlink(victim, entry)


def _sparse(ctx, entry, victim):
    os.truncate(entry, 1_900_000_000)


def _fifo(ctx, entry, victim):
    os.unlink(entry)
    os.mkfifo(entry)


def _directory(ctx, entry, victim):
    os.unlink(entry)
    os.mkdir(entry)


def _foreign(ctx, entry, victim):
    with open(entry) as f:
        document = json.load(f)
    document["choices"][0]["key"] = "another shape"
    with open(entry, "w") as f:
        json.dump(document, f)


def cases(shared, root_user):
    def fifo(ctx):
        os.mkfifo(ctx.path("choices.json"))

    def directory(ctx):
        os.mkdir(ctx.path("choices.json"))

    def huge(ctx):
        with open(ctx.path("choices.json"), "wb") as f:
            f.truncate(17 << 20)

    load = [
        _load_case("empty", b"", "not JSON"),
        _load_case("not-json", b"\x00\xff garbage {", "not JSON"),
        _load_case("truncated", _document([_record()])[:-20], "not JSON"),
        _load_case("other-format", json.dumps({"format": "xla autotune results", "version": 1}),
                   "not a kernel choices file"),
        _load_case("a-json-array", "[1, 2, 3]", "not a kernel choices file"),
        _load_case("version-3", _document([], version=3), "format version 3, expected 1 to 2"),
        _load_case("version-huge", _document([], version=1e300), "format version"),
        _load_case("choices-not-array", _document({"k": 1}), "\"choices\" is missing or not an array"),
        _load_case("choice-not-object", _document([7]), "not an object"),
        _load_case("winner-not-candidate", _document([_record(winner="ref:any")]), "is not one of its candidates"),
        _load_case("negative-time", _document([_record(best_ms=[-1, 0.5])]), "not a finite time"),
        _load_case("time-overflows", _document([_record()]).replace("1.0", "1e999"), "not JSON .*number overflow"),
        _load_case("times-short", _document([_record(best_ms=[1.0])]), "one time per candidate"),
        _load_case("timed-and-untimed", _document([_record(estimated_run_ms=12.0)], version=2), "has both"),
        _load_case("neither-timed-nor-untimed", _document([{k: v for k, v in _record().items() if k != "best_ms"}],
                                                         version=2), "has neither"),
        _load_case("untimed-in-version-1", _document([{**{k: v for k, v in _record().items() if k != "best_ms"},
                                                       "estimated_run_ms": 12.0}]), "in a version 1 document"),
        _load_case("estimate-overflows", _document([{**{k: v for k, v in _record().items() if k != "best_ms"},
                                                     "estimated_run_ms": 12.0}], version=2).replace("12.0", "1e999"),
                   "not JSON .*number overflow"),
        _load_case("estimate-a-string", _document([{**{k: v for k, v in _record().items() if k != "best_ms"},
                                                    "estimated_run_ms": "12"}], version=2), "not a finite time"),
        _load_case("one-candidate", _document([_record(candidates=["a"], best_ms=[1], winner="a")]),
                   "2 to 64 names"),
        _load_case("key-not-string", _document([_record(key=[1])]), "\"key\" is missing or not a string"),
        _load_case("key-of-1mb", _document([_record(key="k" * (1 << 20))]), "longer than 4096 bytes"),
        _load_case("control-characters", _document([_record(winner="\x1b[31mred\x07")]),
                   "is not one of its candidates"),
        _load_case("two-choices-one-key", _document([_record(), _record(winner="depthwise:avx512")]),
                   "two different choices"),
        _load_case("nested-100k-deep", "[" * 100000 + "]" * 100000, "not a kernel choices file|not JSON"),
        _load_case("missing", None, "choices.json"),
        _load_case("a-fifo", None, "FIFO|not a regular file", setup=fifo),
        _load_case("a-directory", None, "directory", setup=directory),
        _load_case("17mb-sparse", None, "limit|larger|more than", setup=huge),
    ]

    def cached(name, tamper, said, quick=True):
        def setup(ctx):
            if not _has_avx512f():
                # The depthwise loops, one of the two candidates, run on AVX-512 only: elsewhere
                # nothing is timed and the cache holds no entry to tamper with.
                raise craft.CannotCraft("no kernel is chosen by timing without AVX-512F")
            ctx.write("dw.hlo", DEPTHWISE)
        return Case(id=f"kernel-choices/cache/{name}", reader="kernel-choices",
                    args=_run_args([CACHE_FLAG + "cache"]), setup=setup, expect="ok", outputs=("cache",),
                    check=_tampered(tamper, said), quick=quick)

    rejected = r"kernel choice cache entry .* is rejected \(.*\); timing again"
    return load + [
        cached("garbage-entry", _write(b"\x01" * 100), rejected + "|not JSON"),
        cached("foreign-entry", _foreign, "another machine's or shape's choice"),
        cached("planted-link-to-victim", _link, rejected),
        cached("sparse-1.9g-entry", _sparse, rejected, quick=False),
        cached("entry-replaced-by-fifo", _fifo, rejected, quick=False),
        cached("entry-replaced-by-directory", _directory, rejected, quick=False),
    ]

"""Runs one hostile case of the sweep and says what happened to it.

A case runs in a scratch directory of its own: work/ (the current directory, where its inputs
are), tmp/ (TMPDIR) and home/ (HOME). Before and after the run, the three are snapshotted without
following links or opening special files; any difference outside the case's declared outputs is
a finding. The command runs in its own session under a wall-clock limit and an address-space
limit, and its peak RSS is read from wait4 (its waited-for children included), or from its own
high-water mark where wait4's could be the one it inherited from the sweep. A case may run the
viewer instead of xlens (program="viewer"), under the same limits, and may give a peak-RSS budget
that grows with its input's size, so a blow-up is a finding even where it fits under the limits.
"""

import dataclasses
import fnmatch
import hashlib
import os
import re
import resource
import signal
import stat
import subprocess
import threading
import time
from typing import Callable, Optional

CATEGORIES = ["clean", "crash", "hang", "memory", "lost-data", "wrong-result", "fs-touched",
              "bad-message", "skipped"]


@dataclasses.dataclass
class Case:
    id: str                     # "reader/what", unique
    reader: str                 # the ground it covers: hlo-text, module-path, npy, ...
    args: list                  # the xlens command line (without the binary); may be callable(ctx)
    setup: Optional[Callable] = None   # setup(ctx): writes the inputs under ctx.work
    env: dict = dataclasses.field(default_factory=dict)  # values: str ({work}, {root}) or callable(ctx)
    expect: str = "error"       # error (exit 1, one line) | ok (exit 0) | either
    names: Optional[str] = None  # what the one-line message must name (a path, a flag)
    mentions: Optional[str] = None  # a regex the message must match (what is wrong, in words)
    outputs: tuple = ()         # globs (relative to work/) the command may create or change
    must_exist: tuple = ()      # files (relative to work/) that must exist afterwards
    check: Optional[Callable] = None   # check(ctx, run) -> None or (category, detail)
    quick: bool = False         # part of the --quick subset (the CTest one)
    timeout: Optional[float] = None
    parallel: int = 1           # run this many copies at once (concurrency cases)
    root_skip: Optional[str] = None  # skipped as root, with this reason
    oom_is_fine: bool = False   # an "out of memory" refusal is the expected answer
    program: str = "xlens"      # what runs: "xlens", or "viewer" (xlens-viewer, sweep --viewer)
    # Peak-RSS budget: max_rss_mb plus rss_per_input_byte times the bytes of the files under work/
    # after setup. Past it is a "memory" finding. None: only the sweep's global RSS limit.
    max_rss_mb: Optional[float] = None
    rss_per_input_byte: float = 0.0
    stdout_path: Optional[str] = None  # stdout goes here (e.g. /dev/full) instead of being captured
    file_bytes: Optional[int] = None   # RLIMIT_FSIZE of the command (default 1 GiB)
    exits: tuple = ()           # exit codes besides 0 and 1 that are answers (replay's 2), not crashes
    signal_after: Optional[tuple] = None  # (seconds, signum): sent to the command's process group,
                                          # as a terminal's Ctrl-C is; dying of it is no crash


@dataclasses.dataclass
class Ctx:
    root: str   # the case's scratch directory
    work: str
    tmp: str
    home: str
    shared: str  # a directory shared by all cases of a sweep (big inputs made once)
    xlens: str = ""  # the binary under test, for setups that make their inputs with it

    def path(self, rel):
        return os.path.join(self.work, rel)

    def write(self, rel, data):
        if isinstance(data, str):
            data = data.encode()
        full = self.path(rel)
        os.makedirs(os.path.dirname(full) or ".", exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        return rel

    def read(self, rel):
        with open(self.path(rel), "rb") as f:
            return f.read()


@dataclasses.dataclass
class Run:
    argv: list
    env: dict
    exit_code: Optional[int]    # None when killed by a signal or the wall clock
    signal: Optional[int]
    timed_out: bool
    seconds: float
    max_rss_kb: int
    stdout: bytes
    stderr: bytes


@dataclasses.dataclass
class Outcome:
    case: Case
    category: str
    detail: str
    runs: list
    seconds: float
    input_bytes: int = 0        # the size of the case's inputs (files under work/ after setup)


# ----------------------------------------------------------------------------------------------
# Snapshots of a directory tree, without following links or opening special files.

def _digest(dir_fd, name, size):
    if size > (256 << 20):
        return None
    h = hashlib.sha1()
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    try:
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                break
            h.update(block)
    finally:
        os.close(fd)
    return h.hexdigest()


def snapshot(base):
    """{relative path: what it is}, for every entry under `base` (paths past PATH_MAX too)."""
    entries = {}
    if not os.path.isdir(base):
        return entries
    for root, dirs, files, root_fd in os.fwalk(base, follow_symlinks=False):
        rel_root = os.path.relpath(root, base)
        for name in dirs + files:
            rel = name if rel_root == "." else rel_root + "/" + name
            try:
                st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
            except OSError as e:
                entries[rel] = ("unreadable", e.errno)
                continue
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                entries[rel] = ("dir", stat.S_IMODE(mode))
            elif stat.S_ISLNK(mode):
                entries[rel] = ("link", os.readlink(name, dir_fd=root_fd))
            elif stat.S_ISREG(mode):
                entries[rel] = ("file", stat.S_IMODE(mode), st.st_size, st.st_ino,
                                _digest(root_fd, name, st.st_size) or st.st_mtime_ns)
            elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                entries[rel] = ("device", st.st_rdev, st.st_ino)
            elif stat.S_ISFIFO(mode):
                entries[rel] = ("fifo", st.st_ino)
            else:
                entries[rel] = ("other", stat.S_IFMT(mode), st.st_ino)
    return entries


def diff(before, after):
    """[(path, what happened)] between two snapshots."""
    changes = []
    for rel in sorted(set(before) | set(after)):
        b, a = before.get(rel), after.get(rel)
        if b == a:
            continue
        if b is None:
            changes.append((rel, "created"))
        elif a is None:
            changes.append((rel, "removed"))
        elif b[0] != a[0]:
            changes.append((rel, f"{b[0]} replaced by {a[0]}"))
        elif b[0] == "file" and b[3] != a[3] and b[4] == a[4]:
            changes.append((rel, "replaced by a copy"))
        else:
            changes.append((rel, "changed"))
    return changes


def input_bytes(entries):
    """The bytes of the regular files of a snapshot."""
    return sum(e[2] for e in entries.values() if e[0] == "file")


def rss_budget_kb(case, inputs):
    """The case's peak-RSS budget in KiB for `inputs` bytes of input, or None."""
    if case.max_rss_mb is None:
        return None
    return int(case.max_rss_mb * 1024 + case.rss_per_input_byte * inputs / 1024)


def _matches(rel, globs):
    return any(fnmatch.fnmatchcase(rel, g) or rel.startswith(g.rstrip("/") + "/") for g in globs)


# ----------------------------------------------------------------------------------------------
# Running

def _limits(memory_bytes, file_bytes):
    def apply():
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if file_bytes:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    return apply


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _status_field(pid, field):
    """A field of /proc/PID/status in kB (VmHWM, ...), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(field.encode() + b":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().strip()
    except OSError:
        return None


_OWN_COMM = _comm("self")


def start(argv, cwd, env, out_prefix, memory_bytes, stdout_path=None, file_bytes=None):
    stdout = open(stdout_path or out_prefix + ".stdout", "wb")
    if stdout_path:
        open(out_prefix + ".stdout", "wb").close()  # nothing captured
    stderr = open(out_prefix + ".stderr", "wb")
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=stderr, preexec_fn=_limits(memory_bytes, file_bytes or (1 << 30)),
                            start_new_session=True, close_fds=True)
    # A child's ru_maxrss starts at the high-water mark it inherits from this process through
    # fork and exec, which grows whenever a case crafts a large input here. What it inherited is
    # at most this process's mark now; a peak at or under it is taken from the child's own mark,
    # read while it runs (see _wait).
    proc.inherited_rss_kb = _status_field("self", "VmHWM") or 0
    stdout.close()
    stderr.close()
    return proc


def wait(procs, timeout):
    """Waits for every process until `timeout` seconds from now; kills what is left (and its
    process group). Returns [(exit status, rusage, timed out, seconds)]."""
    try:
        return _wait(procs, timeout)
    except BaseException:
        for p in procs:  # interrupted: leave nothing running
            _kill_group(p.pid)
        raise


class _PeakUsage:
    """The part of a rusage the sweep reads, with ru_maxrss the child's own peak (see start)."""

    def __init__(self, usage, proc, own_peak_kb):
        inherited = getattr(proc, "inherited_rss_kb", 0)
        self.ru_maxrss = usage.ru_maxrss if usage.ru_maxrss > inherited else own_peak_kb


def _wait(procs, timeout):
    t0 = time.monotonic()
    deadline = t0 + timeout
    results = [None] * len(procs)
    own_peak = [0] * len(procs)  # each child's VmHWM since its exec, as last read
    pause = 0.002
    while any(r is None for r in results):
        for i, p in enumerate(procs):
            if results[i] is not None:
                continue
            comm = _comm(p.pid)
            if comm is not None and comm != _OWN_COMM:  # exec'd: its mark is its own
                own_peak[i] = max(own_peak[i], _status_field(p.pid, "VmHWM") or 0)
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                results[i] = (status, _PeakUsage(usage, p, own_peak[i]), False, time.monotonic() - t0)
                p.returncode = 0  # reaped here: keep Popen from waiting on it again
                _kill_group(p.pid)  # whatever it left running
        if time.monotonic() > deadline:
            for i, p in enumerate(procs):
                if results[i] is None:
                    own_peak[i] = max(own_peak[i], _status_field(p.pid, "VmHWM") or 0)
                    _kill_group(p.pid)
                    _, status, usage = os.wait4(p.pid, 0)
                    p.returncode = 0
                    results[i] = (status, _PeakUsage(usage, p, own_peak[i]), True, time.monotonic() - t0)
            break
        time.sleep(pause)
        pause = min(pause * 1.5, 0.05)
    return results


def _read(path, limit=1 << 20):
    with open(path, "rb") as f:
        return f.read(limit)


VIEWER_ENV = {"QT_QPA_PLATFORM": "offscreen"}  # headless: no display is needed or used


def run_case(case, xlens, root, shared, memory_bytes, default_timeout, viewer=None):
    """Sets the case up in `root` (created empty), runs it and returns the Runs and the Ctx.
    A case with program="viewer" runs `viewer` instead of `xlens`, headless."""
    ctx = Ctx(root=root, work=os.path.join(root, "work"), tmp=os.path.join(root, "tmp"),
              home=os.path.join(root, "home"), shared=shared, xlens=xlens)
    for d in (ctx.work, ctx.tmp, ctx.home, os.path.join(root, "_run")):
        os.makedirs(d)
    if case.setup:
        case.setup(ctx)
    before = {d: snapshot(os.path.join(root, d)) for d in ("work", "tmp", "home")}
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": ctx.home,
        "TMPDIR": ctx.tmp,
    }
    for passthrough in ("LD_LIBRARY_PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS", "CUDA_VISIBLE_DEVICES"):
        if passthrough in os.environ:
            env[passthrough] = os.environ[passthrough]
    if case.program == "viewer":
        env.update(VIEWER_ENV)
        # Qt makes its runtime directory under TMPDIR when none is given: one of the case's own,
        # outside the areas compared, private as Qt wants it.
        env["XDG_RUNTIME_DIR"] = os.path.join(root, "_xdg")
        os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)
    for key, value in case.env.items():
        if callable(value):
            value = value(ctx)
        env[key] = value.replace("{work}", ctx.work).replace("{root}", root)
    args = case.args(ctx) if callable(case.args) else case.args
    binary = viewer if case.program == "viewer" else xlens
    if not binary:
        raise ValueError(f"case {case.id} runs {case.program}, and no binary was given for it")
    argv = [binary] + list(args)
    timeout = case.timeout or default_timeout
    procs = [start(argv, ctx.work, env, os.path.join(root, "_run", str(i)), memory_bytes,
                   case.stdout_path and case.stdout_path.replace("{work}", ctx.work), case.file_bytes)
             for i in range(case.parallel)]
    timers = []
    if case.signal_after:
        delay, signum = case.signal_after
        for p in procs:
            timers.append(threading.Timer(delay, _signal_group, (p.pid, signum)))
            timers[-1].start()
    try:
        results = wait(procs, timeout)
    finally:
        for t in timers:
            t.cancel()
    runs = []
    for i, (status, usage, timed_out, seconds) in enumerate(results):
        prefix = os.path.join(root, "_run", str(i))
        runs.append(Run(
            argv=argv, env={k: v for k, v in env.items() if k not in ("PATH", "LANG")},
            exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            timed_out=timed_out, seconds=seconds, max_rss_kb=usage.ru_maxrss,
            stdout=_read(prefix + ".stdout"), stderr=_read(prefix + ".stderr")))
    after = {d: snapshot(os.path.join(root, d)) for d in ("work", "tmp", "home")}
    return runs, ctx, before, after


# ----------------------------------------------------------------------------------------------
# Classifying

_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")
_OOM = re.compile(rb"bad_alloc|out of memory|Cannot allocate memory|std::length_error|"
                  rb"failed to allocate|MemoryError|requested allocation size", re.I)
_CARET = re.compile(rb"^ *\^~*$")
MAX_MESSAGE_BYTES = 2000


def all_checks(*checks):
    """A case check that runs `checks` in order and returns the first verdict."""
    def check(ctx, run):
        for c in checks:
            verdict = c(ctx, run)
            if verdict:
                return verdict
        return None
    return check


def message_problem(stderr, names, mentions=None):
    """Why `stderr` (of an exit 1) is not one actionable line, or None."""
    if not stderr.strip():
        return "exit 1 with nothing on stderr"
    text = stderr[:-1] if stderr.endswith(b"\n") else stderr
    lines = text.split(b"\n")
    # A parse error may show the line at fault and a caret under the column (DESIGN.md): the
    # message itself is still the first line.
    if len(lines) == 3 and _CARET.match(lines[2]) and len(lines[1]) <= MAX_MESSAGE_BYTES:
        if _CONTROL.search(lines[1]):
            return "a raw control character in the quoted source line"
        text = lines[0]
    elif len(lines) > 1:
        return f"{len(lines)} lines on stderr, expected one"
    if _CONTROL.search(text):
        return "a raw control character in the message"
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return "the message is not valid UTF-8 (a cut character or raw bytes)"
    if not text.startswith(b"xlens"):
        return "the message does not start with 'xlens'"
    if len(text) > MAX_MESSAGE_BYTES:
        return f"a {len(text)}-byte message"
    if names and names.encode() not in text:
        return f"the message does not name '{names[:60]}'"
    if mentions and not re.search(mentions.encode(), text, re.I):
        return f"the message does not say what is wrong (/{mentions}/)"
    return None


def first_line(data, limit=200):
    line = data.strip().split(b"\n", 1)[0] if data.strip() else b""
    text = line.decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
    return text if len(text) <= limit else text[:limit] + "..."


def classify_run(case, run, rss_limit_kb, budget_kb=None, inputs=0):
    """(category, detail) of one process, before the file system and answer checks."""
    err = run.stderr
    if run.timed_out:
        return "hang", f"still running after {run.seconds:.0f} s"
    if run.max_rss_kb > rss_limit_kb:
        return "memory", f"peak RSS {run.max_rss_kb // 1024} MiB"
    if budget_kb is not None and run.max_rss_kb > budget_kb:
        return "memory", (f"peak RSS {run.max_rss_kb // 1024} MiB for {inputs} bytes of input "
                          f"(budget {budget_kb // 1024} MiB)")
    if run.signal is not None and case.signal_after and run.signal == case.signal_after[1]:
        return None  # the signal the case sent: what it left behind is judged below
    if run.signal is not None:
        name = signal.Signals(run.signal).name if run.signal in signal.Signals._value2member_map_ \
            else str(run.signal)
        if _OOM.search(err):
            return "memory", f"killed by {name} after failing to allocate: {first_line(err)}"
        if run.signal == signal.SIGXFSZ:
            limit = f"{case.file_bytes} bytes" if case.file_bytes else "1 GiB"
            return "crash", f"SIGXFSZ: wrote more than {limit} (the file size limit)"
        return "crash", f"killed by {name}: {first_line(err)}"
    if run.exit_code not in (0, 1) + tuple(case.exits):
        if _OOM.search(err):
            return "memory", f"exit {run.exit_code}: {first_line(err)}"
        return "crash", f"exit {run.exit_code}: {first_line(err)}"
    if run.exit_code == 1 and re.search(rb"internal error|terminate called|what\(\):", err):
        # An exception that only the last-resort handler in main caught: a crash in disguise.
        return "crash", f"an exception reached main: {first_line(err)}"
    if run.exit_code == 1 and _OOM.search(err) and not case.oom_is_fine:
        return "memory", f"ran out of memory instead of refusing up front: {first_line(err)}"
    return None


def classify(case, runs, ctx, before, after, rss_limit_kb):
    worst = None
    inputs = input_bytes(before["work"])
    budget_kb = rss_budget_kb(case, inputs)
    for run in runs:
        verdict = classify_run(case, run, rss_limit_kb, budget_kb, inputs)
        if verdict:
            worst = worst or verdict
    if worst:
        return worst
    failed = any(r.exit_code != 0 for r in runs)

    # Files: outputs that must exist, files that must not change, temporaries left behind.
    for rel in case.must_exist:
        if not os.path.lexists(ctx.path(rel)):
            return "lost-data", f"{rel} was not written"
    touched = []
    for area in ("work", "tmp", "home"):
        for rel, what in diff(before[area], after[area]):
            # A command that fails leaves every file it found as it found it (writes are atomic).
            if area == "work" and failed and what != "created" and what != "replaced by a copy" \
                    and before[area].get(rel, ("",))[0] == "file":
                return "lost-data", f"{rel} {what} by a command that failed"
            if area == "work" and _matches(rel, case.outputs):
                continue
            touched.append(f"{area}/{rel} {what}")
    if touched:
        more = f" (+{len(touched) - 3} more)" if len(touched) > 3 else ""
        return "fs-touched", "; ".join(touched[:3]) + more

    if case.check:
        verdict = case.check(ctx, runs[0] if len(runs) == 1 else runs)
        if verdict:
            return verdict

    for run in runs:
        if case.expect == "ok" and run.exit_code != 0:
            return "wrong-result", f"refused a valid request: {first_line(run.stderr)}"
        if case.expect == "error" and run.exit_code == 0:
            return "wrong-result", "accepted what it should refuse (exit 0)"
        if run.exit_code == 1:
            problem = message_problem(run.stderr, case.names, case.mentions)
            if problem:
                return "bad-message", f"{problem}: {first_line(run.stderr)}"
        elif _CONTROL.search(run.stderr.replace(b"\n", b"")):
            return "bad-message", "a raw control character on stderr"
    return "clean", first_line(runs[0].stderr) if failed else ""

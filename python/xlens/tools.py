"""The tools from Python: what a dump holds, where a trace's time went, the viewer.

    xlens.inspect(dir)        the model `xlens inspect DIR` prints: modules, their stages in
                              pipeline order, their kernels (an xlens dump or one XLA wrote)
    xlens.hlo_profile(path)   the per-HLO profile of a trace (a file or a folder holding one), as
                              records: pandas.DataFrame(xlens.hlo_profile(path)) is the table
    xlens.read_trace(path)    every span of a trace, as records
    xlens.view(dir)           xlens-viewer on a dump (and a trace), in its own process

Dumps and traces are read in this process by the readers the command line uses; every failure is
an xlens.Error with the command line's line.
"""

import os
import shutil
import subprocess
import sys

from . import _xlens
from ._xlens import Error

__all__ = ["inspect", "hlo_profile", "read_trace", "view", "Dump", "Module", "Stage", "Kernel"]

# Where the installed package keeps its command line and viewer (python/CMakeLists.txt installs
# them there; in the build tree the same folder holds links to them).
PACKAGE_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _path(value, what):
    try:
        return os.fsdecode(value)
    except TypeError:
        raise TypeError(f"{what} must be a path (str, bytes or os.PathLike), not {type(value).__name__}") from None


class _Record:
    """A part of a model read from a dump: its fields as attributes, to_dict() the plain data."""

    _lists = {}  # key -> the record class of the list's items

    def __init__(self, data):
        self._data = data
        for key, cls in self._lists.items():
            data[key] = [item if isinstance(item, _Record) else cls(item) for item in data.get(key, [])]

    def __getattr__(self, name):
        data = self.__dict__.get("_data")
        if data is None:
            raise AttributeError(name)
        # `pass` is a keyword: stage.pass_ reads "pass".
        key = name[:-1] if name.endswith("_") and name[:-1] in data else name
        if key in data:
            return data[key]
        raise AttributeError(f"{type(self).__name__} has no field {name!r} (fields: {', '.join(data)})")

    def __dir__(self):
        return sorted(set(super().__dir__()) | {k + "_" if k == "pass" else k for k in self._data})

    def __getitem__(self, key):
        return self._data[key]

    def keys(self):
        return self._data.keys()

    def __eq__(self, other):
        return type(other) is type(self) and other.to_dict() == self.to_dict()

    def to_dict(self):
        """The plain data (dicts, lists, str, int, float, bool, None), as `xlens inspect --json`."""
        def plain(value):
            if isinstance(value, _Record):
                return value.to_dict()
            if isinstance(value, list):
                return [plain(item) for item in value]
            if isinstance(value, dict):
                return {key: plain(item) for key, item in value.items()}
            return value
        return {key: plain(value) for key, value in self._data.items()}


class Stage(_Record):
    """One stage of a module's pipeline: step, pipeline, pass_ (a keyword: also ["pass"]),
    changed, wall_ns, file (its HLO text) and files."""

    def __repr__(self):
        changed = ", changed" if self._data.get("changed") else ""
        return f"<xlens.Stage {self.step} {self.pipeline} / {self._data['pass']}{changed}>"


class Kernel(_Record):
    """A kernel of a module as compiled: name, kind, hlo_instruction, fusion_kind,
    fusion_computation, created_by_pass, launch, op_name, op_names, files, source (file, line,
    function; None when unknown) and trace."""

    def __repr__(self):
        text = f"<xlens.Kernel {self.name} ({self.kind})"
        if self.op_name:
            text += f" {self.op_name}"
        if self.source:
            text += f" {self.source['file']}:{self.source['line']}"
        return text + ">"


class Module(_Record):
    """An HLO module of a dump: id, name, files, stages (in pipeline order) and kernels."""

    _lists = {"stages": Stage, "kernels": Kernel}

    def __repr__(self):
        return (f"<xlens.Module {self.id} {self.name!r}: {len(self.stages)} stages, "
                f"{len(self.kernels)} kernels, {len(self.files)} other files>")

    def kernel(self, name):
        """The kernel of this name (or of this HLO instruction)."""
        for kernel in self.kernels:
            if name in (kernel.name, kernel.hlo_instruction):
                return kernel
        raise KeyError(f"module {self.name} has no kernel {name!r}")


class Dump(_Record):
    """A dump directory as `xlens inspect` reads it: directory, source ("manifest" for an xlens
    dump, "xla_file_names" for one XLA wrote), modules, graphs (TensorFlow's clustering stages),
    placed_files, unplaced, problems. str() is the text `xlens inspect` prints."""

    _lists = {"modules": Module}

    def __init__(self, data, text):
        super().__init__(data)
        self.__dict__["text"] = text

    def __repr__(self):
        kind = "an xlens dump" if self.source == "manifest" else "an XLA dump"
        problems = f", {len(self.problems)} problems" if self.problems else ""
        return f"<xlens.Dump {self.directory!r}: {kind}, {len(self.modules)} modules{problems}>"

    def __str__(self):
        return self.text

    def module(self, key):
        """The module with this id (an int) or name; of several of one name, the last."""
        found = [m for m in self.modules if (m.id == key if isinstance(key, int) else m.name == key)]
        if not found:
            raise KeyError(f"{self.directory} has no module {key!r}")
        return found[-1]


def inspect(directory, trace=None):
    """The model `xlens inspect DIRECTORY` prints, for an xlens dump (manifest.json) or one real
    XLA wrote (rebuilt from its file names): a Dump of Modules, their Stages in order and their
    Kernels. With a trace (`xlens inspect DIRECTORY --trace FILE`), each kernel's trace says how
    many of its events the trace holds and their time, and the Dump's trace how many linked.
    Raises xlens.Error with the command line's line when the folder is no dump or the trace
    cannot be read."""
    trace = None if trace is None else os.fsencode(_path(trace, "trace"))
    data, text = _xlens._inspect(os.fsencode(_path(directory, "directory")), trace)
    return Dump(data, text)


def hlo_profile(path):
    """The per-HLO profile of a trace (`xlens run --trace`, jax.profiler's, TensorFlow's, an
    XSpace; a file or a folder holding one) as a list of records, one per module and HLO
    instruction, the longest first within each module:

      module, instruction, kernel, category, fusion_kind, kind, count (events), runs (the
      module's executions, None when the trace does not say), total_us, mean_us, min_us, max_us,
      per_run_us, percent (of the module's kernel time), bytes_accessed, flops, transcendentals
      (per event, 0 when unknown), gbps, op_names, source, file.

    pandas.DataFrame(xlens.hlo_profile(path)) is the --xla_hlo_profile table."""
    profile = _xlens._hlo_profile(os.fsencode(_path(path, "path")))
    totals = {}
    for row in profile["rows"]:
        totals[row["module"]] = totals.get(row["module"], 0) + row["total_ns"]
    records = []
    for row in profile["rows"]:
        runs = profile["runs"].get(row["module"])
        total = row["total_ns"]
        mean = total / row["count"] if row["count"] else 0.0
        fusion_kind = row["fusion_kind"]
        records.append({
            "module": row["module"],
            "instruction": row["instruction"],
            "kernel": row["kernel"],
            "category": row["category"],
            "fusion_kind": fusion_kind,
            "kind": f"{fusion_kind} fusion" if fusion_kind else row["category"],
            "count": row["count"],
            "runs": runs,
            "total_us": total / 1e3,
            "mean_us": mean / 1e3,
            "min_us": row["min_ns"] / 1e3,
            "max_us": row["max_ns"] / 1e3,
            "per_run_us": total / runs / 1e3 if runs else None,
            "percent": 100.0 * total / totals[row["module"]] if totals[row["module"]] else 0.0,
            "bytes_accessed": row["bytes_accessed"],
            "flops": row["flops"],
            "transcendentals": row["transcendentals"],
            "gbps": row["bytes_accessed"] / mean if mean > 0 else 0.0,  # bytes per ns is GB/s
            "op_names": row["op_names"],
            "source": row["source"],
            "file": profile["file"],
        })
    return records


def read_trace(path):
    """Every span of a trace (a file or a folder holding one) as a record: name, category, pid,
    tid, process, thread, start_us (after the trace's base time), duration_us, args."""
    return _xlens._read_trace(os.fsencode(_path(path, "path")))


def _find_program(name, search_path=True):
    """`name` beside the package (its bin folder), else on PATH; None when neither has it."""
    bundled = os.path.join(PACKAGE_BIN, name)
    if os.path.isfile(bundled) and os.access(bundled, os.X_OK):
        return bundled
    return shutil.which(name) if search_path else None


def view(directory=None, trace=None, *, wait=False, screenshot=None, dry_run=False):
    """Opens xlens-viewer on a dump directory (and a trace), in its own process.

    The viewer is the one installed with the package, else the first on PATH. Returns the
    subprocess.Popen of the viewer; with wait=True, waits for it to close (an error it reports is
    raised as xlens.Error). screenshot=PNG renders the window offscreen into the file and exits
    (no display needed; implies wait). dry_run=True returns the command it would run."""
    if directory is None and trace is None:
        raise Error("view: give a dump directory, a trace, or both")
    argv = [_find_program("xlens-viewer") or "xlens-viewer"]
    if directory is not None:
        directory = _path(directory, "directory")
        if not os.path.isdir(directory):
            what = "not a directory" if os.path.exists(directory) else "no such directory"
            raise Error(f"view: {directory}: {what}")
        argv.append(directory)
    if trace is not None:
        trace = _path(trace, "trace")
        if not os.path.exists(trace):
            raise Error(f"view: {trace}: no such file")
        argv += ["--trace", trace]
    if screenshot is not None:
        argv += ["--screenshot", _path(screenshot, "screenshot")]
        wait = True
    if dry_run:
        return argv
    if not os.path.isabs(argv[0]):
        raise Error(f"view: no xlens-viewer beside the package ({PACKAGE_BIN}) or on PATH: it is built "
                    "where Qt 6 is installed (scripts/setup.sh), then installed with the package")
    if (screenshot is None and sys.platform.startswith("linux") and not os.environ.get("DISPLAY")
            and not os.environ.get("WAYLAND_DISPLAY") and not os.environ.get("QT_QPA_PLATFORM")):
        raise Error("view: no display (DISPLAY and WAYLAND_DISPLAY are unset): run it where a desktop is, "
                    "or pass screenshot=PNG to render the window into a file")
    if not wait:
        # Its own session: the viewer outlives a script or notebook kernel that opened it.
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               errors="replace")
    _, errors = process.communicate()
    if process.returncode != 0:
        lines = [line for line in errors.splitlines() if line.startswith("xlens-viewer: ")]
        line = lines[0][len("xlens-viewer: "):] if lines else (errors.strip().splitlines() or ["?"])[-1]
        raise Error(f"view: {line} (xlens-viewer exited {process.returncode})")
    return process

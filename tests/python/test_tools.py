"""xlens.inspect, xlens.hlo_profile, xlens.read_trace and xlens.view against the command line:
the same folders and traces, read in process, must say what `xlens inspect` and the
--xla_hlo_profile table say; the viewer starts on a dump headless; `python -m xlens` is the
command line."""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

import xlens
import xlens.tools

HLO = """HloModule small_add

ENTRY main {
  p0 = f32[64,64] parameter(0)
  p1 = f32[64,64] parameter(1)
  add = f32[64,64] add(p0, p1)
  mul = f32[64,64] multiply(add, p1)
  dot = f32[64,64] dot(mul, p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT e = f32[64,64] exponential(dot)
}
"""
ITERATIONS = 3


def cli():
    binary = os.environ.get("XLENS_BINARY") or os.path.join(xlens.tools.PACKAGE_BIN, "xlens")
    if not os.access(binary, os.X_OK):
        pytest.skip("no xlens command line (XLENS_BINARY) to compare with")
    return binary


def run_cli(*args, check=True):
    result = subprocess.run([cli(), *args], capture_output=True, text=True, timeout=120)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def cli_error(*args):
    """The one line the command line prints for a mistake, without its "xlens: " prefix."""
    result = run_cli(*args, check=False)
    assert result.returncode == 1
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("xlens: ")
    return line[len("xlens: "):]


@pytest.fixture(scope="module")
def xlens_dump(tmp_path_factory):
    """An xlens dump of a small module run ITERATIONS times, every pass dumped, with a trace;
    returns (directory, trace, the --xla_hlo_profile table the run printed)."""
    root = tmp_path_factory.mktemp("xlens_dump")
    hlo = root / "small_add.hlo"
    hlo.write_text(HLO)
    directory = root / "dump"
    trace = directory / "timeline.ctf.json"
    run = run_cli("run", str(hlo), "--inputs=random", f"--iterations={ITERATIONS}", "--xla_hlo_profile",
                  f"--xla_dump_to={directory}", "--xla_dump_hlo_pass_re=.*", "--trace", str(trace))
    return str(directory), str(trace), run.stdout


@pytest.fixture(scope="module")
def xla_dump(tmp_path_factory):
    """A dump real XLA wrote (no manifest): a JAX function compiled by jaxlib with every pass
    dumped, in this process."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    directory = str(tmp_path_factory.mktemp("xla_dump"))

    def f(x, y):
        return jnp.tanh(x @ y) + 1.0

    x = jnp.ones((8, 8), jnp.float32)
    jax.jit(f).lower(x, x).compile(compiler_options={"xla_dump_to": directory, "xla_dump_hlo_pass_re": ".*"})
    return directory


def check_same_as_cli(directory, trace=None):
    dump = xlens.inspect(directory, trace=trace)
    with_trace = [] if trace is None else ["--trace", trace]
    cli_json = json.loads(run_cli("inspect", directory, *with_trace, "--json", "-").stdout)
    assert dump.to_dict() == cli_json
    assert str(dump) == run_cli("inspect", directory, *with_trace).stdout
    return dump


def test_inspect_xlens_dump(xlens_dump):
    directory, _, _ = xlens_dump
    dump = check_same_as_cli(directory)
    assert dump.source == "manifest"
    assert repr(dump) == f"<xlens.Dump {directory!r}: an xlens dump, 1 modules>"
    module = dump.module("small_add")
    assert module is dump.modules[0] and module is dump.module(module.id)
    assert repr(module).startswith(f"<xlens.Module {module.id} 'small_add': {len(module.stages)} stages, ")
    # Every pass in pipeline order, what changed said, the HLO of each that changed on disk.
    steps = [stage.step for stage in module.stages]
    assert len(steps) > 5 and steps == sorted(steps)
    assert any(stage.changed for stage in module.stages)
    assert all(isinstance(stage.changed, bool) for stage in module.stages)
    for stage in module.stages:
        assert stage.pass_ == stage["pass"]
        if stage.changed:
            assert stage.file in stage.files and os.path.isfile(os.path.join(directory, stage.file))
    # The kernels as compiled: the matmul fusion, the elementwise fusion and the exponential.
    kernels = {kernel.hlo_instruction: kernel for kernel in module.kernels}
    assert set(kernels) == {"fusion", "fusion.1", "e"}
    assert kernels["fusion.1"].fusion_kind == "kLoop" and kernels["fusion.1"].kind == "kLoop"
    assert module.kernel("fusion.1") is kernels["fusion.1"]
    assert repr(kernels["e"]).startswith("<xlens.Kernel ")
    assert isinstance(dump.to_dict()["modules"][0]["stages"][0], dict)
    with pytest.raises(KeyError):
        dump.module("no_such_module")
    with pytest.raises(AttributeError):
        module.no_such_field


def test_inspect_with_trace(xlens_dump):
    directory, trace, _ = xlens_dump
    dump = check_same_as_cli(directory, trace)
    # Every kernel event of the trace is one of the dump's kernels, each run ITERATIONS + 1 times
    # (the untimed first run included).
    assert dump.trace["file"] == trace and dump.trace["kernel_events"] == dump.trace["linked_events"] > 0
    for kernel in dump.modules[0].kernels:
        assert kernel.trace["events"] == ITERATIONS + 1 and kernel.trace["total_us"] > 0
    assert "trace" not in xlens.inspect(directory).to_dict()


def test_inspect_real_xla_dump(xla_dump):
    dump = check_same_as_cli(xla_dump)
    assert dump.source == "xla_file_names" and not dump.problems and not dump.unplaced
    (module,) = dump.modules
    assert module.name == "jit_f"
    assert [stage.step for stage in module.stages] == sorted(stage.step for stage in module.stages)
    assert {stage.pipeline for stage in module.stages} >= {"simplification"}
    kernels = {kernel.op_name: kernel for kernel in module.kernels}
    assert "jit(f)/add" in kernels
    source = kernels["jit(f)/add"].source
    assert source is not None and source["file"] == __file__ and source["function"].endswith("f")


def test_inspect_errors(tmp_path):
    missing = str(tmp_path / "nothere")
    with pytest.raises(xlens.Error) as error:
        xlens.inspect(missing)
    assert str(error.value) == cli_error("inspect", missing)
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    with pytest.raises(xlens.Error) as error:
        xlens.inspect(a_file)
    assert str(error.value) == cli_error("inspect", str(a_file))
    # An empty folder is read, with the reader's problem said, as the command line does.
    empty = tmp_path / "empty"
    empty.mkdir()
    assert xlens.inspect(empty).problems == json.loads(run_cli("inspect", str(empty), "--json", "-").stdout)["problems"]
    with pytest.raises(xlens.Error) as error:
        xlens.inspect(empty, trace=tmp_path / "missing.json")
    assert str(error.value) == cli_error("inspect", str(empty), "--trace", str(tmp_path / "missing.json"))
    # A file name need not be UTF-8: bytes are taken as they are.
    with pytest.raises(xlens.Error, match=r"^inspect: .*: no such directory$"):
        xlens.inspect(os.fsencode(missing) + b"\xff")
    with pytest.raises(TypeError):
        xlens.inspect(42)
    with pytest.raises(TypeError):
        xlens.inspect()


def human(value, units, separator):
    """The table's bytes and counts (profiler/hlo_profile.cc's HumanBytes and HumanCount)."""
    if value <= 0:
        return "-"
    unit = 0
    while value >= 1000 and unit < 4:
        value /= 1000
        unit += 1
    return f"{value:.0f}{separator}{units[unit]}" if unit == 0 else f"{value:.2f}{separator}{units[unit]}"


def human_bytes(value):
    return human(value, ["B", "kB", "MB", "GB", "TB"], " ")


def human_count(value):
    return human(value, ["", "k", "M", "G", "T"], "")


def table_rows(text):
    """{instruction: (bytes, flops)} of the --xla_hlo_profile table a run printed."""
    rows = {}
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "time/run" in line and line.rstrip().endswith("kernel")) + 1
    for line in lines[start:]:
        match = re.match(r"\s*[\d.]+ [mu]s\s+[\d.]+%\s+[\d.]+%\s+(\S+(?: \S+)?)\s{2,}(\S+)\s+.*?\s(\S+) \(.*\)$", line)
        if match is None:
            break
        rows[match.group(3)] = (match.group(1), match.group(2))
    return rows


def test_hlo_profile_matches_cli_table(xlens_dump):
    directory, trace, table = xlens_dump
    records = xlens.hlo_profile(trace)
    rows = table_rows(table)
    assert {r["instruction"] for r in records} == set(rows) == {"fusion", "fusion.1", "e"}
    for record in records:
        # The table's flops column counts transcendentals too.
        flops = record["flops"] + record["transcendentals"]
        assert (human_bytes(record["bytes_accessed"]), human_count(flops)) == rows[record["instruction"]]
        # The trace holds the untimed first run too.
        assert record["count"] == record["runs"] == ITERATIONS + 1
        assert record["module"] == "small_add" and record["file"] == trace
        assert record["total_us"] > 0 and record["min_us"] <= record["mean_us"] <= record["max_us"]
        assert record["mean_us"] == pytest.approx(record["total_us"] / record["count"])
    assert [r["total_us"] for r in records] == sorted((r["total_us"] for r in records), reverse=True)
    assert sum(r["percent"] for r in records) == pytest.approx(100.0)
    by_name = {r["instruction"]: r for r in records}
    assert by_name["fusion.1"]["kind"] == "kLoop fusion" and by_name["fusion.1"]["category"] == "cpu_kernel"
    assert by_name["e"]["transcendentals"] == 64 * 64
    # A folder holding the trace is read as the trace; the records are flat, so pandas takes them.
    assert [r["instruction"] for r in xlens.hlo_profile(directory)] == [r["instruction"] for r in records]
    assert all(not isinstance(v, (dict, list)) for r in records for v in r.values())
    try:
        import pandas
    except ImportError:
        return
    frame = pandas.DataFrame(records)
    assert list(frame.sort_values("total_us", ascending=False)["instruction"]) == [r["instruction"] for r in records]


def test_read_trace(xlens_dump):
    _, trace, _ = xlens_dump
    events = xlens.read_trace(trace)
    with open(trace) as f:
        raw = json.load(f)
    raw_events = raw["traceEvents"] if isinstance(raw, dict) else raw
    assert len(events) == sum(1 for e in raw_events if e.get("ph") == "X")
    kernels = [e for e in events if e["category"] == "cpu_kernel"]
    assert kernels and all(e["args"]["module"] == "small_add" for e in kernels)
    assert all(e["duration_us"] >= 0 for e in events)


def test_trace_errors(tmp_path, xla_dump):
    missing = str(tmp_path / "missing.json")
    with pytest.raises(xlens.Error) as error:
        xlens.hlo_profile(missing)
    assert str(error.value) == cli_error("trace", "summary", missing)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    for read in (xlens.hlo_profile, xlens.read_trace):
        with pytest.raises(xlens.Error) as error:
            read(broken)
        assert str(error.value) == cli_error("trace", "summary", str(broken))
    # A folder without a trace says which names it looked for.
    with pytest.raises(xlens.Error, match=r"^trace: .*: no trace in the folder \(timeline.ctf.json"):
        xlens.hlo_profile(xla_dump)
    with pytest.raises(TypeError):
        xlens.hlo_profile(None)


def find_viewer():
    viewer = xlens.tools._find_program("xlens-viewer")
    if viewer is None:
        pytest.skip("no xlens-viewer built (Qt 6 missing)")
    return viewer


def test_view_dry_run(xlens_dump, tmp_path, monkeypatch):
    directory, trace, _ = xlens_dump
    argv = xlens.view(directory, trace=trace, dry_run=True)
    assert argv[1:] == [directory, "--trace", trace]
    assert os.path.basename(argv[0]) == "xlens-viewer"
    assert xlens.view(directory, screenshot=tmp_path / "s.png", dry_run=True)[2:] == ["--screenshot", str(tmp_path / "s.png")]
    with pytest.raises(xlens.Error, match=r"^view: .*nothere: no such directory$"):
        xlens.view(tmp_path / "nothere", dry_run=True)
    with pytest.raises(xlens.Error, match=r"^view: give a dump directory"):
        xlens.view()
    # Neither beside the package nor on PATH: said, before anything starts.
    monkeypatch.setattr(xlens.tools, "PACKAGE_BIN", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(xlens.Error, match=r"^view: no xlens-viewer beside the package"):
        xlens.view(directory)


def test_view_needs_a_display(xlens_dump, monkeypatch):
    directory, _, _ = xlens_dump
    find_viewer()
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(xlens.Error, match=r"^view: no display"):
        xlens.view(directory)


def test_view_starts_headless(xlens_dump, tmp_path, monkeypatch):
    directory, trace, _ = xlens_dump
    find_viewer()
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    # The window on the dump and its trace, rendered: the dump was opened.
    png = tmp_path / "window.png"
    xlens.view(directory, trace=trace, screenshot=png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Started without waiting: it runs until closed.
    process = xlens.view(directory, trace=trace)
    try:
        time.sleep(1.0)
        assert process.poll() is None
    finally:
        process.terminate()
        process.wait(timeout=10)
    # What the viewer refuses is raised with its line.
    with pytest.raises(xlens.Error, match=r"^view: .*\(xlens-viewer exited 1\)$"):
        xlens.view(tmp_path, screenshot=tmp_path / "nothing.png")


def test_python_m_xlens_is_the_command_line(xlens_dump):
    directory, _, _ = xlens_dump
    if not os.access(os.path.join(xlens.tools.PACKAGE_BIN, "xlens"), os.X_OK):
        pytest.skip("no command line beside the package")
    expected = run_cli("inspect", directory).stdout
    result = subprocess.run([sys.executable, "-m", "xlens", "inspect", directory], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and result.stdout == expected
    result = subprocess.run([sys.executable, "-m", "xlens", "inspect", directory + "-missing"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.startswith("xlens: inspect: ")
    # Installed, the environment's `xlens` is the same command.
    script = os.path.join(os.path.dirname(sys.executable), "xlens")
    if sys.prefix != sys.base_prefix and os.path.exists(script):
        result = subprocess.run([script, "inspect", directory], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and result.stdout == expected


def test_hlo_profile_of_a_jax_profile(tmp_path):
    """jax.profiler's folder (plugins/profile/RUN/HOST.xplane.pb): XLA's kernels, by instruction."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    f = jax.jit(lambda x, y: jnp.tanh(x @ y) + 1.0)
    x = jnp.ones((32, 32), jnp.float32)
    f(x, x).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        for _ in range(3):
            f(x, x).block_until_ready()
    records = xlens.hlo_profile(tmp_path)
    assert records and all(r["module"].startswith("jit_") for r in records)
    # Each run's kernels (a kernel split over threads is several events of a run).
    assert all(r["count"] % 3 == 0 and r["runs"] is None and r["per_run_us"] is None for r in records)
    assert records[0]["file"].endswith(".xplane.pb")
    assert sum(r["percent"] for r in records) == pytest.approx(100.0)

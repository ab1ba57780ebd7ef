"""The viewer and Graphviz: layouts that blow up, HTML labels that name files, names and counts in messages.

These run xlens-viewer (program="viewer"), headless, as `xlens-viewer DUMP --screenshot shot.png`:
it opens the dump, lays the graph out, writes the picture and exits. The dumps are made by xlens
itself (`xlens run --xla_dump_to`), then changed where a case needs a hostile part. Each case has
a peak-RSS budget for its input's size, so a layout that blows up is a finding even where it fits.
"""

import json
import os
import subprocess

import craft
from harness import Case

SOURCE = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SHOT = ["--screenshot", "shot.png", "--size", "800x600"]


def residual_chain(n):
    """HLO of `n` adds, each reading the one before and the parameter: dot's worst case (every
    layer crossed by an edge from the parameter)."""
    lines = ["HloModule residual_chain", "", "ENTRY %main (p: f32[8]) -> f32[8] {",
             "  %p = f32[8]{0} parameter(0)", "  %a0 = f32[8]{0} add(f32[8]{0} %p, f32[8]{0} %p)"]
    for i in range(1, n):
        root = "ROOT " if i == n - 1 else ""
        lines.append(f"  {root}%a{i} = f32[8]{{0}} add(f32[8]{{0}} %a{i - 1}, f32[8]{{0}} %p)")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _make_dump(ctx, hlo, name="dump", extra=()):
    """Writes `hlo` and has xlens dump it (before and after optimizations) into work/`name`."""
    if not ctx.xlens:
        raise craft.CannotCraft("needs the xlens binary to make the dump")
    ctx.write("module.hlo", hlo)
    done = subprocess.run([ctx.xlens, "run", "module.hlo", "--inputs=random", f"--xla_dump_to={name}", *extra],
                          cwd=ctx.work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
    if done.returncode != 0 or not os.path.exists(ctx.path(f"{name}/manifest.json")):
        raise craft.CannotCraft("xlens could not make the dump: " + done.stderr.decode(errors="replace")[:200])


def _chain_dump(n):
    def setup(ctx):
        _make_dump(ctx, residual_chain(n))
    return setup


def _manifest(ctx, change, name="dump"):
    path = ctx.path(f"{name}/manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    change(manifest)
    with open(path, "w") as f:
        json.dump(manifest, f)


def _missing_files(count, names=None):
    def setup(ctx):
        _make_dump(ctx, residual_chain(4))

        def add(manifest):
            files = manifest["modules"][0].setdefault("files", [])
            files += names if names else [f"gone/module_{i:06d}.txt" for i in range(count)]
        _manifest(ctx, add)
    return setup


def _fifo_image_dot(ctx):
    """A clustering dump whose .dot has an HTML label with <IMG SRC> naming a FIFO (nothing ever
    writes to it: a Graphviz that opens it blocks for good)."""
    if not ctx.xlens:
        raise craft.CannotCraft("needs the xlens binary to make the dump")
    s = os.path.join(SOURCE, "samples", "graphs", "linreg_tf1")
    env = dict(os.environ, TF_DUMP_GRAPH_PREFIX=ctx.path("dump/graphs"))
    done = subprocess.run(
        [ctx.xlens, "graph", "run", f"{s}/graph.pbtxt", "--init", "init",
         "--feed", f"x_observed={s}/x_observed.npy", "--feed", f"y_observed={s}/y_observed.npy",
         "--fetch", "Mean", "--target", "GradientDescent", "--steps", "1", "--jit=auto", "--jit-level=ON_1",
         "--tf_xla_cpu_global_jit", "--xla_dump_to=dump", "--tf_xla_clustering_debug"],
        cwd=ctx.work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
    if done.returncode != 0:
        raise craft.CannotCraft("xlens could not make the clustering dump: " + done.stderr.decode(errors="replace")[:200])
    os.mkfifo(ctx.path("fifo.png"))
    with open(ctx.path("dump/manifest.json")) as f:
        manifest = json.load(f)
    # Every .dot of every clustering stage gets the image, so whichever the viewer opens has it.
    for graph in manifest.get("graphs", []):
        for stage in graph.get("stages", []):
            for rel in stage.get("files", []):
                if rel.endswith(".dot"):
                    ctx.write(f"dump/{rel}", (
                        'digraph g {\n'
                        f'  a [label=<<TABLE><TR><TD><IMG SRC="{ctx.path("fifo.png")}"/></TD></TR></TABLE>>];\n'
                        f'  b [image="{ctx.path("fifo.png")}", shapefile="{ctx.path("fifo.png")}"];\n'
                        f'  fontpath="{ctx.work}"; imagepath="{ctx.work}";\n'
                        '  a -> b;\n}\n'))
    if not manifest.get("graphs"):
        raise craft.CannotCraft("the clustering dump has no graph stages")


def _stderr_lines(most):
    """Problems are aggregated: at most `most` lines on stderr."""
    def check(ctx, run):
        lines = run.stderr.count(b"\n")
        if lines > most:
            return "bad-message", f"{lines} lines on stderr for one manifest (expected at most {most})"
        return None
    return check


def _screenshot_written(ctx, run):
    if run.exit_code == 0 and not os.path.exists(ctx.path("shot.png")):
        return "lost-data", "exit 0 without the screenshot"
    return None


def _all(*checks):
    def check(ctx, run):
        for c in checks:
            verdict = c(ctx, run)
            if verdict:
                return verdict
        return None
    return check


def _viewer(id, setup, *, quick=False, timeout=30, check=None, max_rss_mb=400, rss_per_input_byte=20.0, **kw):
    return Case(id=f"viewer/{id}", reader="viewer", program="viewer", args=["dump"] + SHOT, setup=setup,
                expect="ok", outputs=("shot.png",), quick=quick, timeout=timeout,
                check=_all(_screenshot_written, *([check] if check else [])),
                max_rss_mb=max_rss_mb, rss_per_input_byte=rss_per_input_byte, **kw)


def cases(shared, root_user):
    return [
        # Graphviz's dot on a chain whose every node also reads the parameter: seconds at 100
        # nodes, a hang at 200, a crash at 990; the viewer draws it with its own layered layout.
        _viewer("residual-chain-100", _chain_dump(100), quick=True),
        _viewer("residual-chain-200", _chain_dump(200), quick=True),
        _viewer("residual-chain-990", _chain_dump(990)),
        _viewer("residual-chain-50k-stage", _chain_dump(50000), timeout=120),
        # An HTML label's <IMG SRC> (and image=, shapefile=) naming a FIFO: Graphviz would block
        # opening it and the viewer would never exit.
        _viewer("html-img-fifo", _fifo_image_dot, quick=True),
        # One line for 100,000 missing files, not 100,000 lines.
        _viewer("manifest-100k-missing", _missing_files(100000), quick=True, check=_stderr_lines(3)),
        # Names from the manifest reach the terminal escaped (the harness flags raw control bytes).
        _viewer("manifest-names-escapes", _missing_files(0, ["\x1b]0;owned\x07\x1b[2J.txt", "a\rb.txt"]),
                quick=True, check=_stderr_lines(3)),
    ]

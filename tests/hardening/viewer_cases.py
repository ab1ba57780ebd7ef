"""The viewer and Graphviz: layouts that blow up, HTML labels that name files, names and counts in messages.

These run xlens-viewer (program="viewer"), headless, as `xlens-viewer DUMP --screenshot shot.png`:
it opens the dump, lays the graph out, writes the picture and exits. The dumps are written here as
xlens writes them (manifest.json, format 1, and the files it lists), each with its hostile part.
Each case has a peak-RSS budget for its input's size, so a layout that blows up is a finding even
where it fits under the sweep's limits.
"""

import json
import os

from harness import Case, all_checks

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


def _write_dump(ctx, modules=(), graphs=(), files=None):
    """A dump directory work/dump as xlens writes it: manifest.json (format 1) and its files."""
    manifest = {"format": 1, "modules": list(modules), "graphs": list(graphs)}
    for rel, data in (files or {}).items():
        ctx.write(f"dump/{rel}", data)
    ctx.write("dump/manifest.json", json.dumps(manifest))


def _module(name, files):
    return {"id": 1, "name": name, "files": list(files), "stages": [], "kernels": []}


def _chain_dump(n):
    """The chain's module as its before_optimizations dump (the stage the viewer opens when
    nothing later was dumped); over 1,000 nodes the viewer opens its root's neighbourhood."""
    def setup(ctx):
        rel = "module_0001.residual_chain.before_optimizations.txt"
        _write_dump(ctx, [_module("residual_chain", [rel])], files={rel: residual_chain(n)})
    return setup


def _missing_files(count, names=None):
    """A dump whose manifest lists `count` files (or `names`) that are not there."""
    def setup(ctx):
        rel = "module_0001.residual_chain.before_optimizations.txt"
        listed = [rel] + (list(names) if names else [f"gone/module_{i:06d}.txt" for i in range(count)])
        _write_dump(ctx, [_module("residual_chain", listed)], files={rel: residual_chain(4)})
    return setup


def _fifo_image_dot(ctx):
    """A clustering stage whose .dot has an HTML label with <IMG SRC> naming a FIFO (nothing ever
    writes to it: a Graphviz that opens it blocks for good), and image=, shapefile=, fontpath and
    imagepath naming it or its directory."""
    os.mkfifo(ctx.path("fifo.png"))
    fifo = ctx.path("fifo.png")
    dot = ('digraph g {\n'
           f'  a [label=<<TABLE><TR><TD><IMG SRC="{fifo}"/></TD><TD>MatMul</TD></TR></TABLE>>];\n'
           f'  b [image="{fifo}", shapefile="{fifo}"];\n'
           f'  fontpath="{ctx.work}"; imagepath="{ctx.work}";\n'
           '  subgraph cluster_0 { label=<cluster_0>; a; b; }\n'
           '  a -> b;\n}\n')
    graph = {"id": 0, "name": "graph", "stages": [{"name": "mark_for_compilation", "files": ["graphs/g.dot"]}]}
    _write_dump(ctx, graphs=[graph], files={"graphs/g.dot": dot})


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


_all = all_checks


def _viewer(id, setup, *, quick=False, timeout=30, check=None, max_rss_mb=400, rss_per_input_byte=20.0, **kw):
    return Case(id=f"viewer/{id}", reader="viewer", program="viewer", args=["dump"] + SHOT, setup=setup,
                expect="ok", outputs=("shot.png",), quick=quick, timeout=timeout,
                check=_all(_screenshot_written, *([check] if check else [])),
                max_rss_mb=max_rss_mb, rss_per_input_byte=rss_per_input_byte, **kw)


def _compare_report(mutate=None, text=None, size=None):
    """A dump (one module) and an `xlens compare --json` report of it at work/report.json: a
    well-formed one passed through `mutate`, or `text` as it is, or a sparse file of `size` bytes."""
    def setup(ctx):
        _chain_dump(4)(ctx)
        if size is not None:
            with open(ctx.path("report.json"), "wb") as f:
                f.truncate(size)
            return
        kernel = {"name": "a3", "kind": "add", "op_names": [], "instructions": ["a3"], "source": None}
        report = {"directory": "dump", "skipped": [], "modules": [{
            "id": 1, "name": "residual_chain", "before": "b.txt", "after": "a.txt", "backend": "cpu",
            "xla": {"kernel_count": 1, "kernels": [dict(kernel, matched="a3")]},
            "xlens": {"kernel_count": 1, "kernels": [dict(kernel, matched="a3")]},
            "pairs": [{"xla": "a3", "xlens": "a3", "jaccard": 1.0, "shared_atoms": 1, "exact": True, "by": "atoms"}],
            "xla_fused_more": [], "xlens_fused_more": []}]}
        if mutate:
            mutate(report)
        ctx.write("report.json", text if text is not None else json.dumps(report))
    return setup


def _compare(id, setup, mentions):
    """A compare report the viewer must refuse: one line naming the file, exit 1, no picture."""
    return Case(id=f"viewer/{id}", reader="viewer", program="viewer",
                args=["dump", "--compare", "report.json"] + SHOT, setup=setup, expect="error",
                names="report.json", mentions=mentions, quick=True, timeout=10)


def _pair_names_nobody(report):
    report["modules"][0]["pairs"][0]["xla"] = "\x1b]0;owned\x07no_such_kernel"


def _count_disagrees(report):
    report["modules"][0]["xla"]["kernel_count"] = 1 << 62


def _kind_is_a_number(report):
    report["modules"][0]["xlens"]["kernels"][0]["kind"] = 7


def cases(shared, root_user):
    return [
        # Graphviz's dot on a chain whose every node also reads the parameter: seconds at 100
        # nodes, a hang at 200, a crash at 990; the viewer draws it with its own layered layout.
        # A viewer that takes more than seconds to show 100 nodes is broken for its user.
        _viewer("residual-chain-100", _chain_dump(100), quick=True, timeout=5),
        _viewer("residual-chain-200", _chain_dump(200), quick=True, timeout=10),
        _viewer("residual-chain-990", _chain_dump(990)),
        _viewer("residual-chain-50k-stage", _chain_dump(50000), timeout=120),
        # An HTML label's <IMG SRC> (and image=, shapefile=) naming a FIFO: Graphviz would block
        # opening it and the viewer would never exit.
        _viewer("html-img-fifo", _fifo_image_dot, quick=True, timeout=10),
        # One line for 100,000 missing files, not 100,000 lines.
        _viewer("manifest-100k-missing", _missing_files(100000), quick=True, timeout=10, check=_stderr_lines(3)),
        # Names from the manifest reach the terminal escaped (the harness flags raw control bytes).
        _viewer("manifest-names-escapes", _missing_files(0, ["\x1b]0;owned\x07\x1b[2J.txt", "a\rb.txt"]),
                quick=True, timeout=10, check=_stderr_lines(3)),
            # `--compare REPORT`: a report that is not what `xlens compare --json` writes is one line
        # naming it and what was expected where, before any window; never a crash on an index.
        _compare("compare-pair-names-unknown-kernel", _compare_report(_pair_names_nobody), r"pairs\[0\]\.xla: expected"),
        _compare("compare-kernel-count-disagrees", _compare_report(_count_disagrees), r"kernel_count: expected"),
        _compare("compare-kind-not-a-string", _compare_report(_kind_is_a_number), r"kind: expected a string"),
        _compare("compare-not-json", _compare_report(text='{"modules": [{"id": 1e400'), r"not valid JSON|JSON"),
        _compare("compare-300mib-sparse", _compare_report(size=300 << 20), r"300 MiB is more than an `xlens compare --json` report can be"),
    ]

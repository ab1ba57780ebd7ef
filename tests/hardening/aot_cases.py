"""xlens aot: tfcompile's tf2xla.Config and the graph it names.

Every case starts from the sample MNIST softmax graph (samples/graphs/mnist_softmax, a training
graph: placeholders x and y_, resource variables w and b, the loss and its gradients) copied to
g.pbtxt, and a config that compiles its logits ("add") from x with w and b as variables, then
breaks one thing: a node the graph lacks (fed, fetched, as a variable), a shape that does not fit
the placeholder, a dimension that is not static, a feed of a resource, a fetch that needs a
placeholder the config does not feed, a variable the config forgets, a node given as a variable
that is not one, the config's text or bytes, the class name, and a graph whose op has no
lowering. Each is one line naming the config (file:line:column) or the graph and the node, exit
1, and writes nothing: the header and object paths stay absent. The intact config writes both.
"""

import os
import shutil

from harness import Case

_HERE = os.path.dirname(os.path.abspath(__file__))
_GRAPH = os.path.join(_HERE, "..", "..", "samples", "graphs", "mnist_softmax", "graph.pbtxt")

_CONFIG = """feed {
  id { node_name: "x" }
  shape { dim { size: 8 } dim { size: 784 } }
  name: "images"
}
fetch {
  id { node_name: "add" }
  name: "logits"
}
variable { node_name: "w" name: "weights" readonly: true }
variable { node_name: "b" name: "bias" readonly: true }
"""

# Unique has a kernel but no XLA lowering, as in TensorFlow: the graph cannot compile.
_UNCOMPILABLE = """node { name: "x" op: "Placeholder"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: 4 } } } } }
node { name: "u" op: "Unique" input: "x"
  attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "out_idx" value { type: DT_INT32 } } }
"""

_OUTPUTS = ("o.h", "o.o", "m.o")


def _setup(config, graph=None):
    def setup(ctx):
        if graph is None:
            shutil.copy(_GRAPH, ctx.path("g.pbtxt"))
        else:
            ctx.write("g.pbtxt", graph)
        if isinstance(config, bytes):
            ctx.write("c.pb", config)
        else:
            ctx.write("c.pbtxt", config)
    return setup


def _nothing_written(ctx, run):
    for name in _OUTPUTS:
        if os.path.exists(ctx.path(name)):
            return ("fs-touched", f"{name} was written by a failed compilation")
    return None


def _both_written(ctx, run):
    for name in ("o.h", "o.o"):
        if not os.path.exists(ctx.path(name)) or os.path.getsize(ctx.path(name)) == 0:
            return ("lost-data", f"{name} was not written")
    with open(ctx.path("o.h")) as f:
        header = f.read()
    for expected in ("class Softmax final", "float* arg_images_data()", "float* result_logits_data()",
                     "float* var_weights_data()"):
        if expected not in header:
            return ("wrong-result", f"the header lacks {expected!r}")
    return None


def cases(shared, root_user):
    out = []

    def case(name, config, mentions, names="c.pbtxt", graph=None, extra=(), expect="error",
             check=_nothing_written, config_file="c.pbtxt", cpp_class="mnist::Softmax", obj="o.o"):
        args = ["aot", "--graph", "g.pbtxt", "--config", config_file, "--cpp_class", cpp_class,
                "--out_header", "o.h", "--out_function_object", obj] + list(extra)
        out.append(Case(id=f"aot/{name}", reader="aot-config", args=args, setup=_setup(config, graph),
                        expect=expect, names=names, mentions=mentions, check=check,
                        outputs=_OUTPUTS if expect == "ok" else (), quick=True))

    case("intact", _CONFIG, None, names=None, expect="ok", check=_both_written,
         extra=("--out_metadata_object", "m.o"))
    case("feed-unknown-node", _CONFIG.replace('node_name: "x"', 'node_name: "nosuch"'),
         r"c\.pbtxt:2:\d+: .*feed 'nosuch': the graph has no node named 'nosuch'")
    case("fetch-unknown-node", _CONFIG.replace('node_name: "add"', 'node_name: "nosuch"'),
         r"c\.pbtxt:7:\d+: .*fetch 'nosuch': the graph has no node named 'nosuch'")
    case("fetch-output-index-past-outputs",
         _CONFIG.replace('node_name: "add" }', 'node_name: "add" output_index: 3 }'),
         r"fetch 'add:3'.*has 1 output")
    case("variable-unknown-node", _CONFIG.replace('node_name: "w"', 'node_name: "nosuch"'),
         r"c\.pbtxt:10:\d+: variable 'nosuch': the graph g\.pbtxt has no node named 'nosuch'")
    case("feed-wrong-shape", _CONFIG.replace("size: 784", "size: 785"),
         r"feed 'x': the config's shape \[8,785\] does not fit node 'x''s float\[\?,784\]")
    case("feed-unknown-dimension", _CONFIG.replace("size: 8 ", "size: -1 "),
         r"c\.pbtxt:3:\d+: feed 'x': shape dimension 0 is -1")
    case("feed-wrong-type", _CONFIG.replace('  name: "images"', '  name: "images"\n  type: DT_INT32'),
         r"feed 'x': the config's type int32 is not the graph's float")
    case("feed-of-a-resource", _CONFIG.replace('node_name: "x"', 'node_name: "w"'),
         r"feed 'w': node 'w' \(VarHandleOp\) outputs a resource")
    case("feed-typed-resource", _CONFIG.replace('  name: "images"', '  name: "images"\n  type: DT_RESOURCE'),
         r"feed 'x' is a resource")
    case("fetch-not-computed", _CONFIG.replace('node_name: "add"', 'node_name: "sparse_softmax_cross_entropy_loss/value"'),
         r"is not computed from the feeds: it needs placeholder 'y_'")
    case("fetch-reads-unlisted-variable", _CONFIG.split("variable {")[0],
         r"fetch 'add' reads variable '[wb]' \(VarHandleOp\), which the config does not list")
    case("variable-not-a-variable", _CONFIG.replace('node_name: "b"', 'node_name: "MatMul"'),
         r"variable 'MatMul': node 'MatMul' is a MatMul, not a resource variable")
    case("variable-twice", _CONFIG.replace('node_name: "b"', 'node_name: "w"'),
         r"variable 'w' is given twice")
    case("name-not-an-identifier", _CONFIG.replace('name: "logits"', 'name: "log-its"'),
         r"name 'log-its' is not a C\+\+ identifier")
    case("fetch-names-twice", _CONFIG.replace('fetch {', 'fetch { id { node_name: "MatMul" } name: "logits" }\nfetch {'),
         r"name 'logits' is given twice")
    case("variable-names-twice", _CONFIG.replace('name: "bias"', 'name: "weights"'),
         r"name 'weights' is given twice")
    case("no-fetch", _CONFIG.split("fetch {")[0], r"no fetch")
    case("text-syntax-error", _CONFIG.replace("fetch {", "fetch {{"), r"c\.pbtxt:6:\d+: ")
    case("text-unknown-field", _CONFIG.replace("readonly: true", "read_only: true", 1),
         r"c\.pbtxt:10:\d+: .*read_only")
    case("binary-truncated", b"\x0a\x7f\x0a\x03abc", r"not a binary tf2xla\.Config", names="c.pb",
         config_file="c.pb")
    # Broken config files: garbage bytes, nesting far past any message, one over the input size
    # limit, a FIFO that nothing writes to (a blocking read would hang): one line, never a crash.
    case("binary-garbage", bytes((i * 131 + 7) % 256 for i in range(65536)), r"not a binary tf2xla\.Config",
         names="c.pb", config_file="c.pb")
    # 100,000 unknown groups, each inside the last (field 99, start and end group): past the
    # parser's nesting limit, refused before its recursion costs stack.
    case("binary-deep-nesting", b"\x9b\x06" * 100000 + b"\x9c\x06" * 100000,
         r"not a binary tf2xla\.Config", names="c.pb", config_file="c.pb")
    out.append(Case(id="aot/config-over-input-limit", reader="aot-config",
                    args=["aot", "--graph", "g.pbtxt", "--config", "c.pbtxt", "--cpp_class", "Softmax",
                          "--out_header", "o.h", "--out_function_object", "o.o"],
                    setup=_setup(_CONFIG), env={"XLENS_MAX_INPUT_SIZE": "64"}, names="c.pbtxt",
                    check=_nothing_written, quick=True))

    def fifo(ctx):
        shutil.copy(_GRAPH, ctx.path("g.pbtxt"))
        os.mkfifo(ctx.path("c.pbtxt"))
    out.append(Case(id="aot/config-fifo", reader="aot-config",
                    args=["aot", "--graph", "g.pbtxt", "--config", "c.pbtxt", "--cpp_class", "Softmax",
                          "--out_header", "o.h", "--out_function_object", "o.o"],
                    setup=fifo, names="c.pbtxt", mentions=r"not a regular file", check=_nothing_written,
                    timeout=10, quick=True))
    case("graph-cannot-compile",
         'feed { id { node_name: "x" } shape { dim { size: 4 } } }\nfetch { id { node_name: "u" } }\n',
         r"'u'.*Unique|Unique.*'u'", names="g.pbtxt", graph=_UNCOMPILABLE)
    case("cpp-class-not-an-identifier", _CONFIG, r"not a C\+\+ identifier", names="--cpp_class",
         cpp_class="mnist::1Softmax")
    case("cpp-class-is-the-entry-point", _CONFIG, r"also the entry function's name", names="--cpp_class",
         cpp_class="entry")
    case("output-directory-missing", _CONFIG, r"no such file|No such file|directory", names="nodir/o.o",
         obj="nodir/o.o")
    # Every output or none: a header that cannot be written leaves the object file that was
    # there before as it was (not replaced, not removed).
    def old_object(ctx):
        _setup(_CONFIG)(ctx)
        ctx.write("o.o", "old object")

    def object_kept(ctx, run):
        if not os.path.exists(ctx.path("o.o")):
            return ("lost-data", "o.o, there before, was removed by a failed compilation")
        with open(ctx.path("o.o")) as f:
            if f.read() != "old object":
                return ("fs-touched", "o.o was replaced by a compilation that failed")
        return None
    out.append(Case(id="aot/header-fails-object-kept", reader="aot-config",
                    args=["aot", "--graph", "g.pbtxt", "--config", "c.pbtxt", "--cpp_class", "Softmax",
                          "--out_header", "nodir/o.h", "--out_function_object", "o.o"],
                    setup=old_object, names="nodir/o.h", outputs=("o.o",), check=object_kept,
                    quick=True))
    # The dump flags work as for the JIT: XLA_FLAGS=--xla_dump_to writes the module's stages,
    # named after the class; a failed compilation still dumps what it reached but writes no output.
    def dumped(ctx, run):
        names = os.listdir(ctx.path("dump")) if os.path.isdir(ctx.path("dump")) else []
        for suffix in (".Softmax.before_optimizations.txt", ".Softmax.cpu_after_optimizations.txt",
                       ".Softmax.ir-with-opt.ll"):
            if not any(n.endswith(suffix) for n in names):
                return ("lost-data", f"the dump has no *{suffix}: {sorted(names)}")
        return _both_written(ctx, run)

    out.append(Case(id="aot/xla-dump-to", reader="aot-config",
                    args=["aot", "--graph", "g.pbtxt", "--config", "c.pbtxt", "--cpp_class", "mnist::Softmax",
                          "--out_header", "o.h", "--out_function_object", "o.o"],
                    env={"XLA_FLAGS": "--xla_dump_to=dump"}, setup=_setup(_CONFIG), expect="ok",
                    outputs=_OUTPUTS + ("dump", "dump/*"), check=dumped, quick=True))
    out.append(Case(id="aot/unknown-xla-flag", reader="aot-config",
                    args=["aot", "--graph", "g.pbtxt", "--config", "c.pbtxt", "--cpp_class", "mnist::Softmax",
                          "--out_header", "o.h", "--out_function_object", "o.o", "--xla_dump_tu=dump"],
                    setup=_setup(_CONFIG), names="--xla_dump_tu", check=_nothing_written, quick=True))

    # A SavedModel (tests/graph/testdata/saved_model/small): the signature's call inlined, its
    # variables frozen at their checkpoint values; a feed of the signature's input that is not
    # static is refused by the config's line.
    small = os.path.join(_HERE, "..", "graph", "testdata", "saved_model", "small")

    def saved_model(config):
        def setup(ctx):
            shutil.copytree(small, ctx.path("m"))
            ctx.write("c.pbtxt", config)
        return setup

    sm_config = ('feed { id { node_name: "serving_default_x" } shape { dim { size: 1 } dim { size: 2 } } }\n'
                 'fetch { id { node_name: "StatefulPartitionedCall" output_index: 1 } name: "y" }\n')
    out.append(Case(id="aot/saved-model-frozen", reader="aot-config",
                    args=["aot", "--graph", "m", "--config", "c.pbtxt", "--cpp_class", "Small",
                          "--out_header", "o.h", "--out_function_object", "o.o"],
                    setup=saved_model(sm_config), expect="ok", outputs=_OUTPUTS, quick=True,
                    check=lambda ctx, run: None if os.path.exists(ctx.path("o.o")) else
                    ("lost-data", "o.o was not written")))
    out.append(Case(id="aot/saved-model-feed-wrong-shape", reader="aot-config",
                    args=["aot", "--graph", "m", "--config", "c.pbtxt", "--cpp_class", "Small",
                          "--out_header", "o.h", "--out_function_object", "o.o"],
                    setup=saved_model(sm_config.replace("size: 2 }", "size: 3 }")), names="c.pbtxt",
                    mentions=r"feed 'serving_default_x': the config's shape \[1,3\] does not fit",
                    check=_nothing_written, quick=True))
    # From HLO text: the module's parameters are the arguments.
    hlo = ("HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n")
    out.append(Case(id="aot/hlo-intact", reader="aot-config",
                    args=["aot", "--hlo", "m.hlo", "--cpp_class", "ns::Neg", "--out_header", "o.h",
                          "--out_function_object", "o.o"],
                    setup=lambda ctx: ctx.write("m.hlo", hlo), expect="ok", outputs=_OUTPUTS, quick=True))
    out.append(Case(id="aot/hlo-and-config", reader="aot-config",
                    args=["aot", "--hlo", "m.hlo", "--config", "c.pbtxt", "--cpp_class", "Neg"],
                    setup=lambda ctx: (ctx.write("m.hlo", hlo), ctx.write("c.pbtxt", _CONFIG)),
                    names="--config", mentions=r"goes with --graph", check=_nothing_written, quick=True))
    out.append(Case(id="aot/hlo-bad-text", reader="aot-config",
                    args=["aot", "--hlo", "m.hlo", "--cpp_class", "Neg", "--out_header", "o.h",
                          "--out_function_object", "o.o"],
                    setup=lambda ctx: ctx.write("m.hlo", hlo.replace("negate(p)", "negate(q)")),
                    names="m.hlo", check=_nothing_written, quick=True))
    return out

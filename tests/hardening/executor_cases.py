"""graph run: recursion through functions, loops whose iterations must not accumulate, inputs that expand.

Every graph here is written as GraphDef text, functions and all, so each case says exactly what it
feeds the executor: a function that calls itself (inlined, compiled, or run call by call), call
chains 900 and 10,000 deep, Ifs that nest at run time without end, a tree of Ifs 24 deep whose
every branch calls the next level, and TF1 while loops over f32[65536] of 20,000 iterations and
without end. A memory blow-up is a failure even when it fits: every case bounds its peak RSS.
"""

import craft
from harness import Case

_F32 = "type: DT_FLOAT"


def _attr(key, value):
    return f'attr {{ key: "{key}" value {{ {value} }} }} '


def _types(n):
    return "list { " + "type: DT_FLOAT " * n + "}"


def _node(name, op, inputs=(), attrs="", kind="node"):
    ins = "".join(f' input: "{i}"' for i in inputs)
    return f'{kind} {{ name: "{name}" op: "{op}"{ins} {attrs}}}\n'


def _const(name, dtype, value, shape="", kind="node", inputs=()):
    field = {"DT_FLOAT": "float_val", "DT_INT32": "int_val", "DT_BOOL": "bool_val"}[dtype]
    values = value if isinstance(value, (list, tuple)) else [value]
    vals = " ".join(f"{field}: {str(v).lower() if dtype == 'DT_BOOL' else v}" for v in values)
    return _node(name, "Const", inputs, _attr("dtype", f"type: {dtype}")
                 + _attr("value", f"tensor {{ dtype: {dtype} tensor_shape {{ {shape} }} {vals} }}"), kind)


def _call(name, inputs, function, kind="node", noinline=False):
    attrs = (_attr("Tin", _types(len(inputs))) + _attr("Tout", _types(1))
             + _attr("f", f'func {{ name: "{function}" }}'))
    if noinline:
        attrs += _attr("_noinline", "b: true")
    return _node(name, "PartitionedCall", inputs, attrs, kind)


def _if(name, pred, x, then_fn, else_fn, kind="node", lower=False):
    attrs = (_attr("Tcond", "type: DT_BOOL") + _attr("Tin", _types(1)) + _attr("Tout", _types(1))
             + _attr("then_branch", f'func {{ name: "{then_fn}" }}')
             + _attr("else_branch", f'func {{ name: "{else_fn}" }}'))
    if lower:
        attrs += _attr("_lower_using_switch_merge", "b: true")
    return _node(name, "If", (pred, x), attrs, kind)


def _function(name, body, ret):
    """f(x: f32) -> y: f32, returning `ret` ("node:output:0")."""
    return (f'function {{ signature {{ name: "{name}" input_arg {{ name: "x" type: DT_FLOAT }} '
            f'output_arg {{ name: "y" type: DT_FLOAT }} }}\n{body}ret {{ key: "y" value: "{ret}" }} }}\n')


_X = _node("x", "Placeholder", (), _attr("dtype", _F32) + _attr("shape", "shape { dim { size: 3 } }"))


def self_call(noinline=False):
    """f(x) = f(x), called from the graph."""
    body = _call("c", ("x",), "f", kind="node_def", noinline=noinline)
    return (_X + _call("y", ("x",), "f", noinline=noinline)
            + "library {\n" + _function("f", body, "c:output:0") + "}\n")


def call_chain(depth, noinline=False):
    """f0 calls f1 ... calls f{depth-1}, which squares x: y = x * x."""
    funcs = []
    for i in range(depth - 1):
        funcs.append(_function(f"f{i}", _call("c", ("x",), f"f{i + 1}", "node_def", noinline), "c:output:0"))
    funcs.append(_function(f"f{depth - 1}", _node("s", "Square", ("x",), _attr("T", _F32), "node_def"),
                           "s:y:0"))
    return _X + _call("y", ("x",), "f0", noinline=noinline) + "library {\n" + "".join(funcs) + "}\n"


def runtime_if_recursion():
    """f(x) = if true then f(x) else x*x, the If run by its kernel (not lowered): endless nesting."""
    body = (_const("p", "DT_BOOL", True, kind="node_def")
            + _if("i", "p:output:0", "x", "f", "leaf", kind="node_def"))
    leaf = _node("s", "Square", ("x",), _attr("T", _F32), "node_def")
    return (_X + _const("p", "DT_BOOL", True) + _if("y", "p", "x", "f", "leaf")
            + "library {\n" + _function("f", body, "i:output:0") + _function("leaf", leaf, "s:y:0") + "}\n")


def if_tree(depth):
    """t{k}(x) = if true then t{k-1}(x) else t{k-1}(x), lowered to Switch/Merge as TF2 marks it;
    t0(x) = x*x. Inlining both branches of every level would make 2^depth copies of t0."""
    funcs = [_function("t0", _node("s", "Square", ("x",), _attr("T", _F32), "node_def"), "s:y:0")]
    for k in range(1, depth + 1):
        body = (_const("p", "DT_BOOL", True, kind="node_def")
                + _if("i", "p:output:0", "x", f"t{k - 1}", f"t{k - 1}", kind="node_def", lower=True))
        funcs.append(_function(f"t{k}", body, "i:output:0"))
    return (_X + _const("p", "DT_BOOL", True) + _if("y", "p", "x", f"t{depth}", f"t{depth}", lower=True)
            + "library {\n" + "".join(funcs) + "}\n")


def tf1_while_loop(iterations, size=65536):
    """What tf.compat.v1.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x + 1), (0, zeros))
    builds, over x: f32[size]; y = max(x) = `iterations`. A negative `iterations` never ends."""
    frame = (_attr("frame_name", 's: "while/while_context"') + _attr("parallel_iterations", "i: 10"))
    i32 = _attr("T", "type: DT_INT32")
    f32 = _attr("T", _F32)
    limit = 2147483647 if iterations < 0 else iterations
    return "".join([
        _const("dims", "DT_INT32", size, "dim { size: 1 }"),
        _const("zero", "DT_FLOAT", 0),
        _node("zeros", "Fill", ("dims", "zero"), f32 + _attr("index_type", "type: DT_INT32")),
        _const("i0", "DT_INT32", 0),
        _const("n", "DT_INT32", limit),
        _node("while/Enter", "Enter", ("i0",), i32 + frame + _attr("is_constant", "b: false")),
        _node("while/Enter_1", "Enter", ("zeros",), f32 + frame + _attr("is_constant", "b: false")),
        _node("while/Less/Enter", "Enter", ("n",), i32 + frame + _attr("is_constant", "b: true")),
        _node("while/Merge", "Merge", ("while/Enter", "while/NextIteration"), i32 + _attr("N", "i: 2")),
        _node("while/Merge_1", "Merge", ("while/Enter_1", "while/NextIteration_1"), f32 + _attr("N", "i: 2")),
        _node("while/Less", "Less", ("while/Merge", "while/Less/Enter"), i32),
        _node("while/LoopCond", "LoopCond", ("while/Less",)),
        _node("while/Switch", "Switch", ("while/Merge", "while/LoopCond"), i32),
        _node("while/Switch_1", "Switch", ("while/Merge_1", "while/LoopCond"), f32),
        _node("while/Identity", "Identity", ("while/Switch:1",), i32),
        _node("while/Identity_1", "Identity", ("while/Switch_1:1",), f32),
        _const("while/add/y", "DT_INT32", 1, inputs=("^while/Identity",)),
        _node("while/add", "AddV2", ("while/Identity", "while/add/y"), i32),
        _const("while/add_1/y", "DT_FLOAT", 1, inputs=("^while/Identity",)),
        _node("while/add_1", "AddV2", ("while/Identity_1", "while/add_1/y"), f32),
        _node("while/NextIteration", "NextIteration", ("while/add",), i32),
        _node("while/NextIteration_1", "NextIteration", ("while/add_1",), f32),
        _node("while/Exit", "Exit", ("while/Switch",), i32),
        _node("while/Exit_1", "Exit", ("while/Switch_1",), f32),
        _const("axis", "DT_INT32", 0, "dim { size: 1 }"),
        _node("y", "Max", ("while/Exit_1", "axis"), f32 + _attr("Tidx", "type: DT_INT32")
              + _attr("keep_dims", "b: false")),
    ])


def _answer(pattern):
    import re

    def check(ctx, run):
        if run.exit_code == 0 and not re.search(pattern.encode(), run.stdout):
            return "wrong-result", f"stdout does not show the known answer /{pattern}/"
        return None
    return check


SQUARES = r"y: float \[3\] \[1, 4, 9\]"


def cases(shared, root_user):
    out = []
    x_npy = {"x.npy": craft.npy_f32([1, 2, 3])}

    def graph(name, make, extra=(), feed=True, expect="error", **kw):
        def setup(ctx):
            ctx.write("g.pbtxt", make())
            for rel, data in (x_npy.items() if feed else ()):
                ctx.write(rel, data)
        args = ["graph", "run", "g.pbtxt"] + (["--feed", "x=x.npy"] if feed else []) + ["--fetch", "y"]
        kw.setdefault("names", None if expect == "ok" else "g.pbtxt")
        out.append(Case(id=f"executor/{name}", reader="executor", args=args + list(extra), setup=setup,
                        expect=expect, **kw))

    # A function that calls itself: refused before inlining (naming it), and at run time by the
    # call-depth limit.
    graph("self-call-inlined", self_call, mentions="'f' calls itself", quick=True,
          max_rss_mb=256)
    graph("self-call-jit-compile", self_call, extra=["--jit=compile"], mentions="'f' calls itself",
          quick=True, max_rss_mb=256)
    graph("self-call-runtime", lambda: self_call(noinline=True), mentions=r"'f'.*deep", quick=True,
          max_rss_mb=512)
    graph("runtime-if-recursion", runtime_if_recursion, mentions=r"'f'.*deep", quick=True,
          max_rss_mb=512)
    # Call chains: inlined they must give the answer in time linear in the chain; run call by
    # call, 900 deep must work and 10,000 deep must stop at the limit, not overflow the stack.
    graph("chain-10000-inlined", lambda: call_chain(10000), expect="ok", timeout=60,
          max_rss_mb=1024, check=_answer(SQUARES))
    graph("chain-2000-inlined", lambda: call_chain(2000), expect="ok", quick=True,
          max_rss_mb=512, check=_answer(SQUARES))
    graph("chain-900-runtime", lambda: call_chain(900, noinline=True), expect="ok", quick=True,
          max_rss_mb=512, check=_answer(SQUARES))
    graph("chain-10000-runtime", lambda: call_chain(10000, noinline=True), expect="either",
          mentions=r"deep", timeout=60, max_rss_mb=1024, check=_answer(SQUARES))
    # Both branches of every level of an If tree call the next level: 2^24 leaves if all inlined.
    graph("if-tree-24", lambda: if_tree(24), expect="ok", quick=True,
          max_rss_mb=256, check=_answer(SQUARES))
    # TF1 while loops over f32[65536] (256 KiB a value): 20,000 iterations hold 5 GiB if none is
    # freed; an endless one must end at --timeout with memory flat.
    graph("while-20000", lambda: tf1_while_loop(20000), feed=False, expect="ok", timeout=120,
          max_rss_mb=512, check=_answer(r"y: float \[\] \[20000\]"))
    graph("while-endless-timeout", lambda: tf1_while_loop(-1), feed=False, extra=["--timeout", "4"],
          names="--timeout", timeout=40, max_rss_mb=512)
    return out

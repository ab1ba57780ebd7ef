#!/usr/bin/env python3
"""The reference evaluator computes what XLA computes.

For every corpus module that the corpus README lists as a good input for a single-device
reference evaluator, and for every hand-written module in --testdata (small modules aimed at
the corners of XLA's semantics: division by zero, shifts past the bit width, NaN in
min/max/compare, out-of-range conversions, clamped slice starts, out-of-bounds scatter,
sort stability, ...), this test

  1. draws deterministic random inputs with numpy for the entry parameters,
  2. runs `xlens eval --inputs --outputs` on them,
  3. compiles the same module with XLA's CPU backend (jaxlib) and runs it on the same inputs,
  4. compares every output leaf: exactly for integers and pred, within a tolerance fitted to
     the element type for floating point (NaN must meet NaN, infinities must be equal).

A pass therefore shows that xlens' evaluator and XLA agree on that module for those inputs.
Modules XLA cannot compile on the CPU, or whose opcodes the evaluator refuses by name, are
reported as skipped, never as passed.

With --compiled, the same comparison runs `xlens run` (the CPU compiler) instead of `xlens eval`
on the corpus modules too large for the evaluator (COMPILED_MODULES): there XLA's output is the
only reference there is.

Exit status: 0 when nothing failed, 1 when something did, 77 (skipped) when numpy or jaxlib
cannot be imported, or when neither the corpus nor the test data holds a module.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
# Every module here evaluates in well under a second; a loop that does not end should fail
# the module, not hang the test.
XLENS_TIMEOUT_S = 120

# The corpus README's list of "good first inputs for a single-device reference evaluator".
CORPUS_MODULES = """
axpy_broadcast_long_form fibonacci_add_chain pred_add_not_fusion map_mixed_input_types
reduce_variadic_tuple_reducer reduce_c128_complex_literal reduce_max_shape_omitted
reduce_argmax_variadic_iota reduce_to_vector_and_scalar reduce_transpose_bitcast_oneline
dot_batch_bf16_algorithm dot_int_batch_jax_precision dot_fused_batch_call_jaxpr
conv3d_bias_relu reduce_window_variadic reduce_window_s64_pytorch
select_and_scatter_ge_add fused_concat_slices_kinput concat_11_operands_f16
transpose_reverse_diamond_f64 tf_fully_connected_model fft_transpose_c64
gather_tf_v2_fused_add gather_nd_multiple_batch_dims scatter_tf_add
scatter_variadic_multioutput scatter_in_kinput_fusion sort_two_dims_same_comparator
sort_key_value_scheduled topk_of_transpose while_scalar_s32 while_jax_tpu_tiled_scalar
conditional_tf_if_tuple conditional_indexed_branches conditional_dot_pred
multi_output_reduce_fusion_kinput dot_add_fusion_koutput dus_fusion_bitcast_root_bf16
fusion_tuple_operands triton_gemm_kcustom_fusion composite_call_frontend_attributes
cholesky_f64 batch_norm_training_literals nested_anonymous_operands
while_complex_cholesky_c64 jax2tf_call_tf_cos_sin
""".split()

# Corpus modules whose size puts them out of the interpreter's reach (1e10 operations and more):
# compiled by xlens and checked against XLA directly. conv_lhs_dilate_strided (2e11 operations,
# 40 s here against XLA's 3 s) is left to the benchmarks.
COMPILED_MODULES = """
conv_backward_input_reverse jax_pjit_attention_sharded
""".split()

# Element types a .npy file can carry (xlens reads and writes exactly these).
NPY_TYPES = {"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
             "f16", "f32", "f64", "c64", "c128"}
# Floating-point types without a .npy code: the module is wrapped so that they cross the file
# boundary as f32, which holds every one of their values exactly.
WIDENED_TYPES = {"bf16", "f8e5m2", "f8e4m3fn", "f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3fnuz",
                 "f8e4m3", "f8e3m4"}

# (rtol, atol) per element type as declared in the module. Both sides round every operation
# to the type, but XLA may reassociate a reduction or a dot and evaluates transcendental
# functions with its own polynomial approximations, which moves a result by some rounding
# errors: rtol is about two units in the last place for the 16-bit and 8-bit types (whose
# sums of a few terms already differ by one), and leaves room for long sums and those
# approximations in f32 (about 80 units) and f64.
TOLERANCES = {
    "f64": (1e-12, 1e-13), "c128": (1e-12, 1e-13),
    "f32": (1e-5, 1e-6), "c64": (1e-5, 1e-6),
    "f16": (2e-3, 1e-3),
    "bf16": (1.6e-2, 1e-2),
}
FP8_TOLERANCE = (2.5e-1, 2e-2)


def element_type_name(shape):
    """XLA's lowercase name of an XLA Shape's element type, e.g. 'f32'."""
    return str(shape).split("[", 1)[0]


def shape_text(shape):
    """An HLO shape without layout, e.g. 'f32[2,3]' or '(f32[2], s32[])'."""
    if "tuple" in shape:
        return "(" + ", ".join(shape_text(s) for s in shape["tuple"]) + ")"
    return f"{shape['type']}[{','.join(str(d) for d in shape['dims'])}]"


def widen_module(text, parameters, result):
    """Wraps a module so that its bf16/f8 parameters and results travel as f32.

    The original entry computation becomes an ordinary computation, called from a new entry
    that converts each widened parameter from f32 and each widened result leaf to f32. The
    conversion is exact both ways, so the wrapped module computes what the original does.
    The module header loses its attributes (entry layout, aliasing, scheduling), which describe
    the original entry and do not change what it computes.
    """
    match = re.search(r"^ENTRY\s+%?([\w.\-]+)", text, flags=re.MULTILINE)
    if match is None or any("tuple" in p for p in parameters):
        return None
    # The original entry gets a name of its own: XLA's importer calls the entry function
    # `main` and would rename the wrapper if the original were called `main` already.
    callee = "differential_original"
    body = text[:match.start()] + callee + text[match.end():]
    body = re.sub(r"^(\s*HloModule\s+[\w.\-]+):?[^\n]*", r"\1", body, count=1,
                  flags=re.MULTILINE)

    def widened(shape):
        return dict(shape, type="f32") if shape["type"] in WIDENED_TYPES else shape

    lines, signature, call_operands = [], [], []
    for i, shape in enumerate(parameters):
        signature.append(f"p{i}: {shape_text(widened(shape))}")
        lines.append(f"  p{i} = {shape_text(widened(shape))} parameter({i})")
        if shape["type"] in WIDENED_TYPES:
            lines.append(f"  n{i} = {shape_text(shape)} convert(p{i})")
            call_operands.append(f"n{i}")
        else:
            call_operands.append(f"p{i}")
    lines.append(f"  call = {shape_text(result)} call({', '.join(call_operands)}), "
                 f"to_apply={callee}")

    outputs = []  # (instruction name, shape) of every result leaf, widened

    def flatten(value, shape):
        if "tuple" in shape:
            for index, sub in enumerate(shape["tuple"]):
                element = f"g{len(lines)}"
                lines.append(f"  {element} = {shape_text(sub)} get-tuple-element({value}), "
                             f"index={index}")
                flatten(element, sub)
        elif shape["type"] in WIDENED_TYPES:
            wide = f"w{len(lines)}"
            lines.append(f"  {wide} = {shape_text(widened(shape))} convert({value})")
            outputs.append((wide, widened(shape)))
        else:
            outputs.append((value, shape))

    flatten("call", result)
    if "tuple" in result:
        root = {"tuple": [shape for _, shape in outputs]}
        lines.append(f"  ROOT out = {shape_text(root)} tuple({', '.join(v for v, _ in outputs)})")
    else:
        root = outputs[0][1]
        lines[-1] = "  ROOT " + lines[-1].lstrip()
    entry = (f"\nENTRY differential_entry ({', '.join(signature)}) -> {shape_text(root)} {{\n"
             + "\n".join(lines) + "\n}\n")
    return body.rstrip() + "\n" + entry


def random_input(rng, shape, np, ml_dtypes):
    """Deterministic random values for one parameter ({"type", "dims"}).

    Integers stay in a small range: many integer parameters are indices (gather, scatter,
    dynamic-slice starts, conditional branch indices, loop bounds), and a range that reaches a
    little below zero and past small dimensions exercises both in-bounds and clamped or skipped
    accesses while keeping loops short.
    """
    name, dims = shape["type"], tuple(shape["dims"])
    if name == "pred":
        return rng.random(dims) < 0.5
    if name[0] == "s":
        return rng.integers(-2, 10, size=dims).astype(f"int{name[1:]}")
    if name[0] == "u":
        return rng.integers(0, 12, size=dims).astype(f"uint{name[1:]}")
    if name in ("c64", "c128"):
        values = rng.standard_normal(dims) + 1j * rng.standard_normal(dims)
        return values.astype(np.complex64 if name == "c64" else np.complex128)
    values = rng.standard_normal(dims)
    if name in WIDENED_TYPES:
        # Round to the narrow type first, so that the f32 the wrapper receives converts back
        # without a second rounding.
        narrow = "bfloat16" if name == "bf16" else name.replace("f8", "float8_")
        return values.astype(getattr(ml_dtypes, narrow)).astype(np.float32)
    return values.astype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[name])


def describe_mismatch(np, index, expected, actual, bad):
    """One line: how many differ, the first mismatching index, both values, max abs/rel error."""
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if expected.ndim else ()
    line = (f"out{index}: {int(bad.sum())} of {bad.size} elements differ; first at "
            f"{list(first)}: xla={expected[first]} xlens={actual[first]}")
    if expected.dtype == np.bool_:
        return line
    wide = np.complex128 if np.iscomplexobj(expected) else np.float64
    with np.errstate(all="ignore"):
        e, a = expected.astype(wide)[bad], actual.astype(wide)[bad]
        abs_err = np.abs(a - e)
        finite = np.isfinite(abs_err)
        rel = finite & (e != 0)
        max_abs = f"{abs_err[finite].max():.3g}" if finite.any() else "n/a"
        max_rel = f"{(abs_err[rel] / np.abs(e[rel])).max():.3g}" if rel.any() else "n/a"
    return f"{line}; max abs err {max_abs}, max rel err {max_rel}"


def allowances(text):
    """{output index: set of rules} from a module's `// implementation-defined:` lines.

    A hand-written module may name an output on which XLA's own implementations disagree, so
    that the evaluator, which follows one of them, is not held to the other. The only rule:
      nan-or-inf  XLA's CPU code returns NaN where the evaluator returns an infinity.
    reduce-precision to zero mantissa bits cannot represent a NaN: XLA's HloEvaluator (and
    with it XLA's constant folding) returns +inf, XLA's CPU code returns the NaN unchanged.
    """
    rules = {}
    for match in re.finditer(r"^//\s*implementation-defined:\s*out(\d+)\s+(nan-or-inf)\b", text,
                             flags=re.MULTILINE):
        rules.setdefault(int(match.group(1)), set()).add(match.group(2))
    return rules


def compare(np, index, type_name, expected, actual, rules=(), scaled=False):
    """None when `actual` (xlens) matches `expected` (XLA), else a one-line diff.

    `scaled`: the absolute tolerance grows to rtol times the output's largest magnitude. The
    compiled modules sum thousands of terms per element (a 7x7x64 convolution window), which
    XLA and xlens associate differently; the rounding of such a sum scales with its terms, so
    an element that cancels to near zero keeps an error the size of theirs.
    """
    if expected.shape != actual.shape:
        return f"out{index}: shape xla={expected.shape} xlens={actual.shape}"
    if type_name in WIDENED_TYPES:
        expected = expected.astype(np.float32)
        actual = actual.astype(np.float32)
    elif expected.dtype != actual.dtype:
        return f"out{index}: dtype xla={expected.dtype} xlens={actual.dtype}"
    if expected.size == 0:
        return None
    if not (np.issubdtype(expected.dtype, np.floating) or
            np.issubdtype(expected.dtype, np.complexfloating)):
        bad = expected != actual
    else:
        rtol, atol = TOLERANCES.get(type_name, FP8_TOLERANCE)
        if scaled:
            finite = np.abs(expected[np.isfinite(expected)])
            atol = max(atol, rtol * float(finite.max())) if finite.size else atol
        parts = ([(expected.real, actual.real), (expected.imag, actual.imag)]
                 if np.iscomplexobj(expected) else [(expected, actual)])
        bad = np.zeros(expected.shape, dtype=bool)
        for e, a in parts:
            e = e.astype(np.float64)
            a = a.astype(np.float64)
            # NaN only meets NaN (any payload and sign: XLA does not define which NaN an
            # operation produces); an infinity only meets the same infinity.
            with np.errstate(all="ignore"):
                close = np.abs(a - e) <= atol + rtol * np.abs(e)
            both_nan = np.isnan(e) & np.isnan(a)
            same_inf = np.isinf(e) & (e == a)
            close = np.where(np.isnan(e) | np.isnan(a) | np.isinf(e) | np.isinf(a),
                             both_nan | same_inf, close)
            if "nan-or-inf" in rules:
                close |= np.isnan(e) & np.isinf(a)
            bad |= ~close
    if not bad.any():
        return None
    return describe_mismatch(np, index, expected, actual, bad)


class XlaWorker:
    """XLA's CPU backend in a child process.

    XLA aborts the whole process on some inputs it does not expect (a failed CHECK while
    compiling, for example). The child absorbs that: when it dies, the module is reported as one
    XLA cannot run and a fresh child takes the next module.
    """

    def __init__(self):
        self.process = None
        self.log = None

    def start(self):
        """None when the child is ready, else the reason it is not."""
        self.log = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1")
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--xla-worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        reply = self.process.stdout.readline()
        if not reply:
            return f"the XLA process died while starting: {self.crash_message()}"
        reply = json.loads(reply)
        return None if reply.get("ok") else reply["error"]

    def crash_message(self):
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().splitlines() if line.strip()]
        # XLA's fatal log line ("F... Check failed: ...") says more than the stack under it.
        fatal = [line for line in lines if re.match(r"F\d{4} ", line) or "Check failed" in line]
        return (fatal or lines or ["no message"])[-1][:200]

    def request(self, **message):
        """The child's reply, or {"ok": False, "error": ...} when it crashed."""
        if self.process is None or self.process.poll() is not None:
            error = self.start()
            if error:
                return {"ok": False, "error": error}
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        if reply:
            return json.loads(reply)
        status = self.process.wait()
        error = f"XLA crashed (exit status {status}): {self.crash_message()}"
        self.process = None
        return {"ok": False, "error": error}

    def close(self):
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()


def shape_to_json(shape):
    """An XLA Shape as plain data: {"type": "f32", "dims": [2, 3]} or {"tuple": [...]}."""
    if shape.is_tuple():
        return {"tuple": [shape_to_json(s) for s in shape.tuple_shapes()]}
    return {"type": element_type_name(shape), "dims": list(shape.dimensions())}


def xla_worker():
    """The child's loop: one JSON request per line on stdin, one JSON reply per line."""
    try:
        import jax
        import numpy as np
        from jax._src.lib import _jax, xla_client
        from jaxlib import _hlo
    except ImportError as e:
        print(json.dumps({"ok": False, "error": f"cannot import jaxlib ({e})"}), flush=True)
        return 0
    # Without this jax narrows 64-bit arguments (s64, f64, c128) to 32 bits.
    jax.config.update("jax_enable_x64", True)
    device = jax.devices("cpu")[0]
    print(json.dumps({"ok": True}), flush=True)

    def parse(text):
        module = _hlo.hlo_module_from_text(text)
        return _hlo.XlaComputation(module.as_serialized_hlo_module_proto())

    for line in sys.stdin:
        message = json.loads(line)
        try:
            with open(message["module"], encoding="utf-8") as f:
                text = f.read()
            if message["op"] == "describe":
                shape = parse(text).program_shape()
                print(json.dumps({"ok": True,
                                  "parameters": [shape_to_json(s)
                                                 for s in shape.parameter_shapes()],
                                  "result": shape_to_json(shape.result_shape())}), flush=True)
                continue
            # The client compiles StableHLO; XLA's own importer turns the HLO module into it.
            mlir_text = _jax.mlir.xla_computation_to_mlir_module(
                parse(for_xla_cpu(_hlo, text)))
            options = xla_client.CompileOptions()
            # Without this XLA may keep an f16/bf16 intermediate in f32 (it is allowed to by
            # default); HLO and the evaluator round every operation to its declared type.
            options.env_option_overrides = [("xla_allow_excess_precision", False)]
            executable = device.client.compile_and_load(
                mlir_text, xla_client.DeviceList((device,)), options)
            arguments = [jax.device_put(np.load(os.path.join(message["inputs"], f"arg{i}.npy")),
                                        device)
                         for i in range(message["num_parameters"])]
            results = executable.execute_sharded(arguments)
            leaves_out = [np.asarray(per_device[0])
                          for per_device in results.disassemble_into_single_device_arrays()]
            os.makedirs(message["outputs"], exist_ok=True)
            for i, value in enumerate(leaves_out):
                np.save(os.path.join(message["outputs"], f"out{i}.npy"), value)
            print(json.dumps({"ok": True, "leaves": len(leaves_out)}), flush=True)
        except Exception as e:  # XLA reports its errors as generic exceptions.
            # The first line names the error; a parse error says where on the second.
            lines = str(e).strip().splitlines() or [type(e).__name__]
            summary = " ".join(line.strip() for line in lines[:2])
            print(json.dumps({"ok": False, "error": summary[:300]}), flush=True)
    return 0


def is_descending(layout, rank):
    """Whether `layout` (the text between the braces, tiles already removed) is row-major."""
    return layout is None or layout == ",".join(str(d) for d in range(rank - 1, -1, -1))


def for_xla_cpu(hlo, text):
    """`text` rewritten into an equivalent module that XLA's CPU backend accepts.

    Every rewrite keeps what the module computes:
      * A fusion computes what a call of its fused computation computes. The CPU backend
        refuses fusion kinds other backends made (kInput, kCustom), so it gets plain calls,
        which it inlines and fuses its own way.
      * Tiles and memory spaces in layouts (`{0:T(128)}`) describe a TPU's memory; they do not
        change values, and the CPU backend rejects them.
      * A bitcast between two row-major layouts of the same element type is a reshape. The
        CPU backend refuses a bitcast in its input (it only makes them itself).
    """
    options = hlo.HloPrintOptions()
    # The default printout elides big constants as `{...}`, which would parse back as
    # arbitrary values.
    options.print_large_constants = True
    options.print_operand_shape = True
    options.print_metadata = False
    text = hlo.hlo_module_from_text(text).to_string(options)
    # XLA prints a negative zero as `-0` but parses `-0` as an integer, that is as +0; `-0.0`
    # keeps the sign. Only literals print a bare `-0`.
    text = re.sub(r"(?<![\w.])-0(?![\w.])", "-0.0", text)
    text = re.sub(r"\bfusion\(([^()]*)\), kind=k\w+, calls=", r"call(\1), to_apply=", text)
    text = re.sub(r"\{([\d,]*):[^{}]*\}",
                  lambda m: f"{{{m.group(1)}}}" if m.group(1) else "", text)
    # Shardings and the header's partition count describe how several devices share the work;
    # on one device each instruction computes its whole value. The header's entry layout
    # repeats the parameters' and the root's.
    text = re.sub(r", sharding=\{[^{}]*(\{[^{}]*\}[^{}]*)*\}", "", text)
    text = re.sub(r"^HloModule ([\w.\-]+)[^\n]*", r"HloModule \1", text, count=1)

    def bitcast(match):
        out_type, out_dims, out_layout, in_type, in_dims, in_layout = match.groups()[:6]
        rank = lambda dims: len(dims.split(",")) if dims else 0
        if (out_type == in_type and is_descending(out_layout, rank(out_dims))
                and is_descending(in_layout, rank(in_dims))):
            return match.group(0).replace(" bitcast(", " reshape(")
        return match.group(0)

    shape = r"(\w+)\[([\d,]*)\](?:\{([\d,]*)\})?"
    text = re.sub(rf"= {shape} bitcast\({shape} %[\w.\-]+\)", bitcast, text)
    return hide_entry_constants(text)


def hide_entry_constants(text):
    """Puts every array constant of the entry computation behind an optimization barrier.

    The client compiles StableHLO, and converting it back to HLO folds operations on
    constants with StableHLO's folders, not with XLA's semantics: a TOTALORDER compare of two
    constants, for one, folds as if it were an ordinary one. Behind the barrier a constant is
    a value the folders cannot see, so XLA's CPU code computes what the module says.
    """
    lines = text.split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("ENTRY "))
    except StopIteration:
        return text
    constant = re.compile(r"^(\s*)(ROOT )?(%[\w.\-]+) = (\w+\[[\d,]*\](?:\{[\d,]*\})?) "
                          r"(constant\(.*\))$")
    out = lines[:start + 1]
    for line in lines[start + 1:]:
        match = constant.match(line)
        if not match:
            out.append(line)
            continue
        indent, root, name, shape, value = match.groups()
        out += [f"{indent}{name}.raw = {shape} {value}",
                f"{indent}{name}.tuple = ({shape}) tuple({shape} {name}.raw)",
                f"{indent}{name}.barrier = ({shape}) opt-barrier(({shape}) {name}.tuple)",
                f"{indent}{root or ''}{name} = {shape} get-tuple-element(({shape}) "
                f"{name}.barrier), index=0"]
    return "\n".join(out)


def json_leaves(shape):
    if "tuple" in shape:
        return [leaf for sub in shape["tuple"] for leaf in json_leaves(sub)]
    return [shape]


def run_module(path, xla, np, ml_dtypes, xlens, workdir, command="eval"):
    """('PASS'|'FAIL'|'SKIP', detail) for one module file."""
    if not os.path.exists(path):
        return "FAIL", "the module file is missing"
    with open(path, encoding="utf-8") as f:
        rules = allowances(f.read())
    described = xla.request(op="describe", module=path)
    if not described["ok"]:
        return "SKIP", f"XLA cannot parse it: {described['error']}"
    parameters, result = described["parameters"], described["result"]
    declared = [leaf["type"] for leaf in json_leaves(result)]
    param_types = [p.get("type", "tuple") for p in parameters]
    for t in param_types + declared:
        if t not in NPY_TYPES and t not in WIDENED_TYPES:
            return "SKIP", f"element type {t} cannot cross a .npy file"
    module_path = path
    if any(t in WIDENED_TYPES for t in param_types + declared):
        with open(path, encoding="utf-8") as f:
            text = widen_module(f.read(), parameters, result)
        if text is None:
            return "SKIP", "cannot wrap its bf16/f8 parameters or results as f32"
        module_path = os.path.join(workdir, "widened.hlo")
        with open(module_path, "w", encoding="utf-8") as f:
            f.write(text)

    # The seed depends on the file name only, so every run draws the same inputs.
    rng = np.random.default_rng(zlib.crc32(os.path.basename(path).encode()))
    input_dir = os.path.join(workdir, "inputs")
    xla_dir = os.path.join(workdir, "xla")
    xlens_dir = os.path.join(workdir, "xlens")
    os.makedirs(input_dir)
    for i, shape in enumerate(parameters):
        np.save(os.path.join(input_dir, f"arg{i}.npy"), random_input(rng, shape, np, ml_dtypes))

    ran = xla.request(op="run", module=module_path, inputs=input_dir, outputs=xla_dir,
                      num_parameters=len(parameters))
    if not ran["ok"]:
        return "SKIP", f"XLA CPU cannot compile or run it: {ran['error']}"
    if ran["leaves"] != len(declared):
        return "SKIP", (f"XLA returned {ran['leaves']} leaves for a result of "
                        f"{len(declared)}; cannot line them up")

    try:
        run = subprocess.run([xlens, command, module_path, "--inputs", input_dir,
                              "--outputs", xlens_dir], capture_output=True, text=True,
                             timeout=XLENS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "FAIL", f"xlens {command} ran longer than {XLENS_TIMEOUT_S} s"
    if run.returncode != 0:
        message = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
        unsupported = re.search(r"unsupported opcode (\S+)", message)
        if run.returncode == 1 and unsupported:
            return "SKIP", f"the evaluator does not support opcode {unsupported.group(1)}"
        return "FAIL", f"xlens {command} exited {run.returncode}: {message[:300]}"

    diffs = []
    for i, type_name in enumerate(declared):
        out = os.path.join(xlens_dir, f"out{i}.npy")
        if not os.path.exists(out):
            return "FAIL", f"xlens wrote no out{i}.npy ({len(declared)} leaves expected)"
        expected = np.load(os.path.join(xla_dir, f"out{i}.npy"))
        diff = compare(np, i, type_name, expected, np.load(out), rules.get(i, ()),
                       scaled=command == "run")
        if diff is not None:
            diffs.append(diff)
    if diffs:
        return "FAIL", "\n    ".join(diffs)
    return "PASS", ""


def main():
    if sys.argv[1:] == ["--xla-worker"]:
        return xla_worker()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xlens", required=True, help="the xlens binary")
    parser.add_argument("--corpus", required=True, help="the HLO corpus directory")
    parser.add_argument("--testdata", help="directory of extra *.hlo modules")
    parser.add_argument("--filter", help="only modules whose file name contains this")
    parser.add_argument("--compiled", action="store_true",
                        help="run COMPILED_MODULES through `xlens run` instead of the corpus "
                             "modules through `xlens eval`")
    args = parser.parse_args()

    try:
        import numpy as np
    except ImportError as e:
        print(f"SKIPPED: numpy cannot be imported ({e}); scripts/setup.sh installs it")
        return SKIP
    xla = XlaWorker()
    error = xla.start()
    if error:
        print(f"SKIPPED: {error}; scripts/setup.sh installs jaxlib")
        return SKIP
    import ml_dtypes  # jaxlib depends on it, so it is there when the XLA process started

    files = []
    if os.path.isdir(args.corpus):
        # A listed module missing from a corpus that is there fails below, as it should.
        names = COMPILED_MODULES if args.compiled else CORPUS_MODULES
        files += [os.path.join(args.corpus, f"{name}.hlo") for name in names]
    else:
        print(f"corpus not found at {args.corpus}; running the test data only")
    if args.testdata:
        files += sorted(glob.glob(os.path.join(args.testdata, "*.hlo")))
    if args.filter:
        files = [f for f in files if args.filter in os.path.basename(f)]
    if not files:
        print(f"SKIPPED: no corpus at {args.corpus} and no test data")
        return SKIP

    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    try:
        for path in files:
            name = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
            with tempfile.TemporaryDirectory(prefix="xlens-differential-") as workdir:
                verdict, detail = run_module(os.path.abspath(path), xla, np, ml_dtypes,
                                             args.xlens, workdir,
                                             "run" if args.compiled else "eval")
            counts[verdict] += 1
            print(f"{verdict} {name}" + (f": {detail}" if detail else ""), flush=True)
    finally:
        xla.close()
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())

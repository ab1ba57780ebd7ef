"""xlens.jit against jax.jit: JAX programs (a training step, convolutions, attention, scan and
while loops, pytrees) lowered by JAX and compiled by xlens must give JAX's results; the cache
compiles once per signature and says each recompilation; wrong arguments raise xlens.Error with
`xlens run`'s messages (compared with the command line on the same HLO text); dump_to= and
trace= write what XLA_FLAGS=--xla_dump_to and `xlens run --trace` write; the GPU backend runs on
the simulator."""

import collections
import importlib.util
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import xlens

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RTOL = 2e-5
ATOL = 2e-5


def rng():
    return np.random.default_rng(0)


def assert_same(expected, actual, rtol=RTOL, atol=ATOL):
    """The same pytree of the same shapes, dtypes and values (jax arrays on the left)."""
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    assert e_tree == a_tree
    for e, a in zip(e_leaves, a_leaves):
        assert isinstance(a, np.ndarray), type(a)
        e = np.asarray(e)
        assert a.shape == e.shape and a.dtype == e.dtype, (a.shape, a.dtype, e.shape, e.dtype)
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(a, e)
        else:
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)


def check_against_jax(fn, *args, **kw):
    expected = jax.jit(fn, **kw)(*args)
    actual = xlens.jit(fn, **kw)(*args)
    assert_same(expected, actual)
    return actual


# The programs.

def mlp_loss(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    out = h @ params["w2"] + params["b2"]
    return jnp.mean((out - y) ** 2)


def mlp_step(params, x, y):
    loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), loss


def mlp_data():
    r = rng()
    params = {"w1": r.standard_normal((8, 16), np.float32), "b1": np.zeros(16, np.float32),
              "w2": r.standard_normal((16, 4), np.float32), "b2": np.zeros(4, np.float32)}
    return params, r.standard_normal((32, 8), np.float32), r.standard_normal((32, 4), np.float32)


def test_training_step_over_steps():
    params, x, y = mlp_data()
    jax_step, xlens_step = jax.jit(mlp_step), xlens.jit(mlp_step)
    p_jax, p_xlens = params, params
    for _ in range(5):
        p_jax, loss_jax = jax_step(p_jax, x, y)
        p_xlens, loss_xlens = xlens_step(p_xlens, x, y)
        assert_same((p_jax, loss_jax), (p_xlens, loss_xlens), rtol=1e-4, atol=1e-5)
    assert float(loss_xlens) < float(mlp_step(params, x, y)[1])
    assert xlens_step.cache_info()["misses"] == 1


@pytest.mark.parametrize("stride,padding", [((1, 1), "SAME"), ((2, 2), "VALID"), ((2, 1), ((1, 2), (0, 1)))])
def test_convolution_nhwc(stride, padding):
    r = rng()
    x, w = r.standard_normal((2, 9, 9, 4), np.float32), r.standard_normal((3, 3, 4, 6), np.float32)
    check_against_jax(lambda x, w: lax.conv_general_dilated(
        x, w, stride, padding, dimension_numbers=("NHWC", "HWIO", "NHWC")), x, w)


def test_convolution_nchw_grouped_dilated():
    r = rng()
    x, w = r.standard_normal((2, 4, 8, 7), np.float32), r.standard_normal((6, 2, 3, 3), np.float32)
    check_against_jax(lambda x, w: lax.conv_general_dilated(
        x, w, (1, 2), ((1, 1), (0, 2)), rhs_dilation=(2, 1), dimension_numbers=("NCHW", "OIHW", "NCHW"),
        feature_group_count=2), x, w)


def test_convolution_gradient():
    r = rng()
    x, w = r.standard_normal((1, 6, 6, 3), np.float32), r.standard_normal((3, 3, 3, 2), np.float32)

    def loss(w, x):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(jnp.tanh(y))

    check_against_jax(jax.grad(loss, argnums=(0, 1)), w, x)


def attention(q, k, v, mask):
    s = q @ jnp.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]).astype(np.float32)
    s = jnp.where(mask, s, -1e9)
    return jax.nn.softmax(s, axis=-1) @ v


def test_attention_with_mask():
    r = rng()
    q, k, v = (r.standard_normal(s, np.float32) for s in [(2, 5, 8), (2, 6, 8), (2, 6, 8)])
    check_against_jax(attention, q, k, v, r.random((2, 5, 6)) > 0.3)


def test_scan():
    def rnn(h, xs, w):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()
        return lax.scan(step, h, xs)

    r = rng()
    check_against_jax(rnn, np.zeros(4, np.float32), r.standard_normal((7, 4), np.float32),
                      r.standard_normal((4, 4), np.float32) * 0.5)


def test_fori_loop_and_while_loop_do_not_borrow():
    def f(x, n):
        y = lax.fori_loop(0, 6, lambda i, c: c * 0.9 + jnp.sin(c) * i, x)
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5), (0, y))

    x = rng().standard_normal(5).astype(np.float32)
    check_against_jax(f, x, np.int32(4))
    # The runtime's rule: a module with while loops reads its arguments from the arena.
    assert not xlens.jit(f).compile(x, np.int32(4)).borrows_arguments


Point = collections.namedtuple("Point", ["x", "y"])


def test_pytrees_in_and_out():
    def f(tree, scale):
        a, (b, c) = tree["pair"], tree["nested"]
        return {"sum": a.x + a.y * scale, "parts": (b * 2, [c, c.T]), "point": Point(a.y, a.x)}

    r = rng()
    tree = {"pair": Point(r.standard_normal(3, np.float32), r.standard_normal(3, np.float32)),
            "nested": (np.arange(4, dtype=np.int32), r.standard_normal((2, 3), np.float32))}
    out = check_against_jax(f, tree, np.float32(2.0))
    assert isinstance(out["point"], Point) and isinstance(out["parts"][1], list)


def test_integer_and_boolean_types():
    def f(a, b, m):
        return a * 3 + a // 2, b ^ np.uint32(0xFFFF), jnp.logical_not(m), (a > 2).astype(jnp.int32)

    check_against_jax(f, np.arange(-4, 4, dtype=np.int32), np.arange(8, dtype=np.uint32), np.array([True, False]))


def test_bfloat16_and_float16():
    ml_dtypes = pytest.importorskip("ml_dtypes")

    def f(x, h):
        return (x * 2).astype(jnp.bfloat16), h + h, x.astype(jnp.float32).sum()

    x = np.linspace(-2, 2, 6).astype(ml_dtypes.bfloat16)
    h = np.linspace(0, 1, 4).astype(np.float16)
    out = check_against_jax(f, x, h)
    assert out[0].dtype == ml_dtypes.bfloat16 and out[1].dtype == np.float16


def test_sixty_four_bit_types_with_x64_and_without():
    def f(x, n):
        return jnp.cumsum(x * n), n * 3, jnp.sqrt(x)

    x, n = np.linspace(0.5, 2, 5), np.arange(5, dtype=np.int64)
    with jax.enable_x64(True):
        out = check_against_jax(f, x, n)
        assert out[0].dtype == np.float64 and out[1].dtype == np.int64
    # Without x64 JAX takes f64 and s64 arrays as f32 and s32, and so does xlens.jit.
    out = check_against_jax(f, x, n)
    assert out[0].dtype == np.float32 and out[1].dtype == np.int32


def test_python_scalars_and_static_arguments(caplog):
    def f(x, power, offset):
        return x ** power + offset

    x = np.arange(4, dtype=np.float32)
    fn = xlens.jit(f, static_argnums=1)
    with caplog.at_level(logging.WARNING, logger="xlens"):
        assert_same(jax.jit(f, static_argnums=1)(x, 2, 1.5), fn(x, 2, 1.5))
        assert_same(jax.jit(f, static_argnums=1)(x, 3, 1.5), fn(x, 3, 1.5))
    assert [r.getMessage() for r in caplog.records] == ["recompiling jit_f: static arguments changed from (2,) to (3,)"]


def test_cache_compiles_once_per_shape_and_says_each_recompilation(caplog):
    def f(x):
        return jnp.tanh(x) * 2

    fn = xlens.jit(f)
    a, b = np.ones(4, np.float32), np.ones(8, np.float32)
    with caplog.at_level(logging.WARNING, logger="xlens"):
        fn(a)
        fn(a + 1)
        assert caplog.records == []  # the first compilation is quiet
        assert fn.cache_info()["misses"] == 1 and fn.cache_info()["hits"] == 1
        fn(b)
        fn(a)
        fn(b)
    info = fn.cache_info()
    assert (info["calls"], info["misses"], info["hits"], info["entries"]) == (5, 2, 3, 2)
    assert info["lower_seconds"] > 0 and info["compile_seconds"] > 0
    # The message the command line's compilation cache and TensorFlow's JIT print.
    assert [r.getMessage() for r in caplog.records] == [
        "recompiling jit_f: argument shapes changed from (f32[4]) to (f32[8])"]


def test_compiled_hlo_texts():
    fn = xlens.jit(lambda x, y: jnp.exp(x + y) * y)
    compiled = fn.compile(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))
    assert compiled.hlo_text.startswith("HloModule jit__lambda")
    assert "fusion" in compiled.optimized_hlo_text
    assert compiled.parameters[0][1] == "f32[4,4]" and compiled.result_shape == "f32[4,4]"
    assert compiled.borrows_arguments  # no control flow: NumPy's buffers are read in place


# compile_hlo: HLO text called with numpy arrays, checked as `xlens run` checks .npy files.

HLO = """HloModule checked

ENTRY main {
  a = f32[16,32] parameter(0)
  b = s32[3] parameter(1)
  c = f32[16,32] parameter(2)
  sum = f32[16,32] add(a, c)
  ROOT t = (f32[16,32], s32[3]) tuple(sum, b)
}
"""


@pytest.fixture(scope="module")
def checked():
    return xlens.compile_hlo(HLO)


def good_arguments():
    return [np.ones((16, 32), np.float32), np.arange(3, dtype=np.int32), np.full((16, 32), 2, np.float32)]


def test_compile_hlo_runs_and_results_own_their_storage(checked):
    out, b = checked(*good_arguments())
    np.testing.assert_array_equal(out, np.full((16, 32), 3, np.float32))
    np.testing.assert_array_equal(b, [0, 1, 2])
    # No copy on the way out: the array's memory is the runtime's result, kept by a capsule.
    assert not out.flags.owndata and out.base is not None and out.flags.writeable
    out[0, 0] = 7  # the caller's to keep and change
    leaves = checked.run(good_arguments())
    assert len(leaves) == 2 and leaves[0][0, 0] == 3


def test_strided_and_read_only_arguments(checked):
    args = good_arguments()
    wide = np.zeros((16, 64), np.float32)
    wide[:, ::2] = 5
    args[0] = wide[:, ::2]  # not C-contiguous: copied for the call
    args[2].setflags(write=False)
    np.testing.assert_array_equal(checked(*args)[0], np.full((16, 32), 7, np.float32))


def cli_error(hlo_path, tmp_path, arrays):
    """`xlens run`'s error for these .npy files, without "xlens: FILE: "; None without the binary."""
    binary = os.environ.get("XLENS_BINARY")
    if not binary:
        return None
    inputs = tmp_path / "inputs"
    inputs.mkdir(exist_ok=True)
    for f in inputs.iterdir():
        f.unlink()
    for i, a in enumerate(arrays):
        np.save(inputs / f"arg{i}.npy", a)
    run = subprocess.run([binary, "run", str(hlo_path), "--inputs", str(inputs)], capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    line = run.stderr.strip().splitlines()[-1]
    prefix = f"xlens: {inputs}/arg"
    assert line.startswith(prefix), line
    return line[len(prefix):].split(": ", 1)[1]


@pytest.mark.parametrize("case", ["shape", "dtype", "missing"])
def test_wrong_arguments_raise_the_command_line_message(checked, tmp_path, case):
    args = good_arguments()
    if case == "shape":
        args[2] = np.ones((64, 32), np.float32)
        expected = "argument 2: holds f32[64,32] but parameter 2 (%c) expects f32[16,32]"
    elif case == "dtype":
        args[1] = np.arange(3, dtype=np.int64)
        expected = "argument 1: holds s64[3] but parameter 1 (%b) expects s32[3]"
    else:
        args = args[:2]
        expected = "argument 2: missing: parameter 2 (%c: f32[16,32]) needs it"
    with pytest.raises(xlens.Error) as error:
        checked(*args)
    assert str(error.value) == expected
    hlo_path = tmp_path / "checked.hlo"
    hlo_path.write_text(HLO)
    cli = cli_error(hlo_path, tmp_path, args)
    if cli is not None:
        assert cli == expected.split(": ", 1)[1]


def test_bad_arguments_are_errors_not_crashes(checked):
    args = good_arguments()
    with pytest.raises(xlens.Error, match=r"^checked takes 3 arguments, 4 given$"):
        checked(*args, args[0])
    with pytest.raises(xlens.Error, match=r"^argument 0: holds a list, not an array"):
        checked([[1.0]], *args[1:])
    with pytest.raises(xlens.Error, match=r"^argument 1: holds an array of dtype object, a dtype xlens has no type for; "
                       r"parameter 1 \(%b\) expects s32\[3\]$"):
        checked(args[0], np.array([1, "a", None], dtype=object), args[2])
    with pytest.raises(xlens.Error, match=r"^checked: expected a sequence of arguments"):
        checked.run(5)
    with pytest.raises(xlens.Error, match=r"^<hlo text>:\d+:\d+: "):
        xlens.compile_hlo("HloModule broken\nENTRY e { ROOT x = f32[] bogus() }")
    with pytest.raises(xlens.Error, match=r"^--backend: expected cpu, gpu or gpu-sim, found 'tpu'$"):
        xlens.compile_hlo(HLO, backend="tpu")


def copied_bytes(trace):
    """What the runtime copied into its arena on the last call ("arguments to arena" spans)."""
    events = json.loads(trace.read_text())["traceEvents"]
    return [e["args"]["bytes"] for e in events if e.get("ph") == "X" and e["name"] == "arguments to arena"]


def test_arguments_are_read_in_place_unless_the_module_has_control_flow(tmp_path):
    trace = tmp_path / "t.json"
    compiled = xlens.compile_hlo(HLO, trace=trace)
    compiled(*good_arguments())
    assert compiled.borrows_arguments and copied_bytes(trace) == [0]
    args = good_arguments()
    args[0] = np.asfortranarray(args[0])  # copied to C order by the binding, then still read in place
    compiled(*args)
    assert copied_bytes(trace) == [0]

    looped = xlens.jit(lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2, x), trace=trace)
    np.testing.assert_array_equal(looped(np.ones(8, np.float32)), np.full(8, 8, np.float32))
    assert copied_bytes(trace) == [32]


def test_xla_flags_are_honoured_as_by_the_command_line(monkeypatch, tmp_path):
    text = jax.jit(lambda x, y: jnp.exp(x) * y + 1).lower(np.ones(4, np.float32), np.ones(4, np.float32)).as_text(
        dialect="hlo")
    assert "fusion" in xlens.compile_hlo(text).optimized_hlo_text
    monkeypatch.setenv("XLA_FLAGS", "--xla_disable_hlo_passes=fusion")
    assert "fusion" not in xlens.compile_hlo(text).optimized_hlo_text
    monkeypatch.setenv("XLA_FLAGS", "--xla_bogus")
    with pytest.raises(xlens.Error) as error:
        xlens.compile_hlo(text)
    assert str(error.value) == "XLA_FLAGS: unknown flag --xla_bogus (the flags are listed by --help)"
    binary = os.environ.get("XLENS_BINARY")
    if binary:
        (tmp_path / "m.hlo").write_text(text)
        run = subprocess.run([binary, "run", str(tmp_path / "m.hlo")], capture_output=True, text=True)
        assert run.stderr.strip() == "xlens: " + str(error.value)


def test_what_the_gpu_backend_cannot_run_is_an_error_naming_the_module():
    fn = xlens.jit(lambda x: jnp.linalg.inv(x), backend="gpu-sim")  # LAPACK custom calls on the CPU only
    with pytest.raises(xlens.Error, match=r'^jit__lambda: lu\.\d+: custom-call "lapack_sgetrf_ffi" cannot run on the GPU backend'):
        fn(np.eye(3, dtype=np.float32))


def test_keyword_arguments():
    def f(x, *, scale, shift=1.0):
        return x * scale + shift

    x = np.arange(3, dtype=np.float32)
    assert_same(jax.jit(f)(x, scale=2.0), xlens.jit(f)(x, scale=2.0))
    assert_same(jax.jit(f)(x, scale=2.0, shift=x), xlens.jit(f)(x, scale=2.0, shift=x))


def test_gpu_backend_without_a_driver_says_so():
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
        pytest.skip("a CUDA driver is here")
    except OSError:
        pass
    with pytest.raises(xlens.Error, match=r"^no CUDA driver found"):
        xlens.compile_hlo(HLO, backend="gpu")


def test_wider_types_through_compile_hlo():
    hlo = """HloModule wide

ENTRY main {
  a = f64[3] parameter(0)
  b = s64[3] parameter(1)
  c = c64[2] parameter(2)
  conv = f64[3] convert(b)
  product = f64[3] multiply(a, conv)
  twice = c64[2] add(c, c)
  bytes = u8[3] convert(b)
  ROOT t = (f64[3], c64[2], u8[3]) tuple(product, twice, bytes)
}
"""
    a, b, c = np.array([0.5, 1.5, 2.5]), np.array([1, 2, 3], np.int64), np.array([1 + 2j, 3 - 1j], np.complex64)
    x, y, z = xlens.compile_hlo(hlo)(a, b, c)
    np.testing.assert_array_equal(x, a * b)
    np.testing.assert_array_equal(y, c + c)
    assert z.dtype == np.uint8 and list(z) == [1, 2, 3]


def test_dump_to_and_trace(tmp_path):
    dump, trace = tmp_path / "dump", tmp_path / "timeline.ctf.json"

    @xlens.jit(dump_to=dump, trace=trace)
    def f(x):
        return jnp.sin(x) @ x.T

    x = rng().standard_normal((4, 4)).astype(np.float32)
    assert_same(jax.jit(f.__wrapped__)(x), f(x))
    names = sorted(os.listdir(dump))
    assert "manifest.json" in names
    assert "module_0001.jit_f.before_optimizations.txt" in names
    assert "module_0001.jit_f.cpu_after_optimizations.txt" in names
    manifest = json.loads((dump / "manifest.json").read_text())
    assert [m["name"] for m in manifest["modules"]] == ["jit_f"]
    assert "dumped" in f.compile(x).dump_summary
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e["name"] for e in events if e.get("ph") == "X"]
    assert any(s.startswith("compile") for s in spans), spans[:20]
    assert any("arguments to arena" == s for s in spans)
    # A call without compiling writes its own trace.
    trace.unlink()
    f(x)
    spans = [e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
    assert spans and not any(s.startswith("compile") for s in spans)
    # A recompilation adds the next module to the same dump, as XLA numbers them.
    f(np.ones((2, 2), np.float32))
    assert "module_0002.jit_f.cpu_after_optimizations.txt" in os.listdir(dump)
    manifest = json.loads((dump / "manifest.json").read_text())
    assert [m["name"] for m in manifest["modules"]] == ["jit_f", "jit_f"]


def test_gpu_simulator_backend():
    r = rng()
    q, k, v = (r.standard_normal(s, np.float32) for s in [(1, 4, 8), (1, 4, 8), (1, 4, 8)])
    expected = jax.jit(attention)(q, k, v, np.tri(4, dtype=bool)[None])
    fn = xlens.jit(attention, backend="gpu-sim")
    assert_same(expected, fn(q, k, v, np.tri(4, dtype=bool)[None]), rtol=1e-4, atol=1e-5)
    assert fn.compile(q, k, v, np.tri(4, dtype=bool)[None]).backend == "gpu-sim"


def test_jax_sample_runs(tmp_path, monkeypatch, capsys):
    path = os.path.join(ROOT, "samples", "python", "jax_jit.py")
    spec = importlib.util.spec_from_file_location("jax_jit_sample", path)
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    monkeypatch.setattr(sys, "argv", ["jax_jit.py", "--steps", "5", "--dump", str(tmp_path / "dump")])
    assert sample.main() == 0
    out = capsys.readouterr().out
    assert ": agree" in out and str(tmp_path / "dump") in out

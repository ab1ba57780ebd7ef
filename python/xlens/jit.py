"""JAX's way in: a JAX function lowered by JAX to HLO, compiled and run by xlens.

    @xlens.jit                      # or xlens.jit(fn, backend="gpu-sim", dump_to="dump")
    def step(params, batch): ...
    params, loss = step(params, batch)   # numpy arrays, in the function's pytree

Each new combination of argument structure, shapes, dtypes and static arguments is lowered with
`jax.jit(fn).lower(...)` and compiled once; a recompilation is said on the logger "xlens" (so on
stderr unless logging is set up otherwise) as the command line and TensorFlow's JIT say it:

    recompiling jit_step: argument shapes changed from (f32[8,4]) to (f32[16,4])

`compile_hlo(text)` compiles HLO text (XLA's text format) directly. JAX is imported only when a
function is first lowered; this module needs numpy alone.
"""

import functools
import logging
import re
import time

import numpy as np

from ._xlens import CompiledHlo

__all__ = ["jit", "compile_hlo", "CompiledHlo", "JitFunction"]

_log = logging.getLogger("xlens")


def compile_hlo(text, *, backend="cpu", dump_to=None, trace=None, source=None):
    """Compiles HLO text for `backend` ("cpu", "gpu" where a CUDA driver is, "gpu-sim").

    The result is called with numpy arrays, one per parameter, and returns the root's value as
    numpy arrays (a tuple for a tuple root); `.run(list)` returns every result leaf in a list.
    dump_to= writes what XLA_FLAGS=--xla_dump_to writes; trace= the Chrome trace of `xlens run
    --trace` (the compilation and the first call, then each call's own).
    """
    return CompiledHlo(text, backend, _path(dump_to), _path(trace), source or "")


def _path(value):
    return "" if value is None else str(value)


_tree_util = None


def _trees():
    """jax.tree_util, imported when first needed (this module needs numpy alone)."""
    global _tree_util
    if _tree_util is None:
        from jax import tree_util

        _tree_util = tree_util
    return _tree_util


def _leaf_key(leaf):
    """The cache key of a leaf that is not a numpy array (_lookup keys arrays inline: the hot path)."""
    return (type(leaf), getattr(leaf, "shape", None), getattr(leaf, "dtype", None))


class _Entry:
    """One compilation: the executable, the output's pytree, which leaves need converting."""

    __slots__ = ("compiled", "out_tree", "convert", "shapes", "statics", "in_tree")

    def __init__(self, compiled, out_tree, convert, statics, in_tree):
        self.compiled = compiled
        self.out_tree = out_tree
        self.convert = convert  # (leaf number, dtype) of each leaf that is not already its parameter's array
        self.shapes = "(" + ", ".join(shape for _, shape in compiled.parameters) + ")"
        self.statics = statics
        self.in_tree = in_tree


class JitFunction:
    """A function compiled by xlens per argument signature; see `jit`."""

    def __init__(self, fn, *, backend="cpu", static_argnums=(), dump_to=None, trace=None):
        if isinstance(static_argnums, int):
            static_argnums = (static_argnums,)
        self._fn = fn
        self._backend = backend
        self._static_argnums = tuple(static_argnums)
        self._dump_to = _path(dump_to)
        self._trace = _path(trace)
        self._jax_jit = None
        self._cache = {}
        self._last = None
        self._calls = 0
        self._hits = 0
        self._misses = 0
        self._lower_seconds = 0.0
        self._compile_seconds = 0.0
        functools.update_wrapper(self, fn)

    def _split(self, args):
        n = len(args)
        static = sorted({i + n if i < 0 else i for i in self._static_argnums})
        for i in static:
            if not 0 <= i < n:
                raise TypeError(f"static_argnums: argument {i} of {getattr(self._fn, '__name__', 'the function')} "
                                f"is not given ({n} positional arguments)")
        statics = tuple(args[i] for i in static)
        dynamic = tuple(a for i, a in enumerate(args) if i not in static) if static else args
        return dynamic, statics

    def _lookup(self, args, kwargs):
        dynamic, statics = self._split(args) if self._static_argnums else (args, ())
        leaves, treedef = _trees().tree_flatten((dynamic, kwargs))
        ndarray = np.ndarray
        key = (treedef, tuple([(leaf.shape, leaf.dtype) if type(leaf) is ndarray else _leaf_key(leaf)
                               for leaf in leaves]), statics)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._compile(key, args, kwargs, leaves, treedef, statics)
        else:
            self._hits += 1
        return entry, leaves

    def _compile(self, key, args, kwargs, leaves, treedef, statics):
        import jax

        if self._jax_jit is None:
            self._jax_jit = jax.jit(self._fn, static_argnums=self._static_argnums, keep_unused=True)
        start = time.perf_counter()
        lowered = self._jax_jit.lower(*args, **kwargs)
        text = lowered.as_text(dialect="hlo")
        self._lower_seconds += time.perf_counter() - start
        avals = jax.tree_util.tree_leaves(lowered.in_avals)
        convert = tuple((i, np.dtype(aval.dtype)) for i, (leaf, aval) in enumerate(zip(leaves, avals))
                        if not (type(leaf) is np.ndarray and leaf.dtype == aval.dtype))
        start = time.perf_counter()
        # Messages name the module JAX made ("jit_step: ..."), as the command line names its file.
        name = re.match(r"HloModule ([^\s,]+)", text)
        source = name.group(1) if name else ""
        compiled = CompiledHlo(text, self._backend, self._dump_to, self._trace, source)
        self._compile_seconds += time.perf_counter() - start
        entry = _Entry(compiled, lowered.out_tree, convert, statics, treedef)
        self._say_recompile(entry)
        for warning in compiled.dump_warnings:
            _log.warning("xlens: warning: %s", warning)
        self._cache[key] = entry
        self._misses += 1
        return entry

    def _say_recompile(self, entry):
        last, self._last = self._last, entry
        if last is None:
            return
        name = entry.compiled.module_name
        if last.shapes != entry.shapes:
            _log.warning("recompiling %s: argument shapes changed from %s to %s", name, last.shapes, entry.shapes)
        elif last.statics != entry.statics:
            _log.warning("recompiling %s: static arguments changed from %r to %r", name, last.statics, entry.statics)
        elif last.in_tree != entry.in_tree:
            _log.warning("recompiling %s: argument structure changed from %s to %s", name, last.in_tree,
                         entry.in_tree)
        else:
            _log.warning("recompiling %s: argument types changed (Python scalars, arrays or numpy "
                         "dtypes JAX lowers to the same shapes %s)", name, entry.shapes)

    def __call__(self, *args, **kwargs):
        self._calls += 1
        entry, leaves = self._lookup(args, kwargs)
        for i, dtype in entry.convert:
            leaves[i] = np.asarray(leaves[i], dtype=dtype)
        return _tree_util.tree_unflatten(entry.out_tree, entry.compiled.run(leaves))

    def compile(self, *args, **kwargs):
        """The CompiledHlo these arguments run (compiled now if they were not yet): its
        `hlo_text` as JAX lowered it, its `optimized_hlo_text` after xlens's pipeline."""
        return self._lookup(args, kwargs)[0].compiled

    def cache_info(self):
        """Calls, cache hits and misses (each miss lowered by JAX and compiled by xlens), the
        seconds spent lowering and compiling, and the executables held."""
        return {
            "calls": self._calls,
            "hits": self._hits,
            "misses": self._misses,
            "lower_seconds": self._lower_seconds,
            "compile_seconds": self._compile_seconds,
            "entries": len(self._cache),
        }

    def clear_cache(self):
        self._cache.clear()
        self._last = None


def jit(fn=None, *, backend="cpu", static_argnums=(), dump_to=None, trace=None):
    """xlens's jax.jit: lowers `fn` with JAX, compiles it with xlens for `backend` ("cpu", "gpu"
    where a CUDA driver is, "gpu-sim": the GPU backend on the simulator), and runs it on numpy
    arrays; pytrees in and out, results as numpy arrays. Usable as @xlens.jit or
    @xlens.jit(backend=...). dump_to= writes the dump XLA_FLAGS=--xla_dump_to writes (every
    compilation's modules before and after optimization, manifest.json); trace= the Chrome trace
    `xlens run --trace` writes (a compilation and its call, or a call). XLA_FLAGS is honoured.
    """
    if fn is None:
        return lambda f: JitFunction(f, backend=backend, static_argnums=static_argnums, dump_to=dump_to,
                                     trace=trace)
    return JitFunction(fn, backend=backend, static_argnums=static_argnums, dump_to=dump_to, trace=trace)


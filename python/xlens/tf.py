"""xlens.tf.function: a TensorFlow 2 function traced by TensorFlow, its graph run by xlens.

    @xlens.tf.function(jit_compile=True)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(model(x), y)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss

TensorFlow traces the function (one concrete function per input signature, as tf.function does);
xlens runs that graph in this process. The variables the function captures are bound from the
tf.Variables' values before each call (as `xlens graph run --assign` binds them from files) and
the ones the call changed are written back after it, so TensorFlow sees the training progress.
jit_compile=True compiles the whole function as one XLA computation (TensorFlow's must-compile,
`xlens graph run --jit=compile`); None or False leaves the clustering to TF_XLA_FLAGS
(--tf_xla_auto_jit), as TensorFlow does. Results come back in the function's structure, as numpy
arrays. dump_to= writes XLA's dumps (--xla_dump_to); trace= the Chrome trace of the latest call.
"""

import atexit
import functools
import inspect
import os
import weakref

import numpy as np

from . import _tensors
from ._xlens import Error, _GraphSession

__all__ = ["function"]


def function(fn=None, *, jit_compile=None, input_signature=None, dump_to=None, trace=None):
    """tf.function's decorator, the traced graph run by xlens (see the module's doc)."""
    if fn is None:
        return lambda f: Function(f, jit_compile=jit_compile, input_signature=input_signature,
                                  dump_to=dump_to, trace=trace)
    return Function(fn, jit_compile=jit_compile, input_signature=input_signature,
                    dump_to=dump_to, trace=trace)


class _Traced:
    """One concrete function and the xlens session that runs its graph."""

    def __init__(self, tf, concrete, name, jit_compile, flags):
        graph = concrete.graph
        self.concrete = concrete
        captures = list(graph.captures)
        internal = {id(inner) for _, inner in captures}
        self.inputs = [t for t in graph.inputs if id(t) not in internal]
        variables = {id(v.handle): v for v in graph.variables}
        self.variables = []  # (placeholder name, tf.Variable)
        self.constants = []  # (placeholder name, value) of captured tensors that are no variables
        for outer, inner in captures:
            if outer.dtype == tf.resource:
                v = variables.get(id(outer))
                if v is None:
                    raise Error(f"tf.function {name!r}: the captured resource {inner.op.name!r} "
                                f"is no tf.Variable the function reads")
                self.variables.append((inner.op.name, v))
            else:
                self.constants.append(
                    (inner.name, _tensors.convert(outer.numpy(),
                                                  int(outer.dtype.as_datatype_enum),
                                                  inner.name)))
        self.structure = graph.structured_outputs
        self.leaves = tf.nest.flatten(self.structure, expand_composites=True)
        self.fetches = []
        for leaf in self.leaves:
            if tf.is_tensor(leaf) and leaf.name not in self.fetches:
                self.fetches.append(leaf.name)
        self.targets = [op.name for op in graph.control_outputs]
        shown = f"tf.function {name!r}"
        self.session = _GraphSession(graph.as_graph_def().SerializeToString(), shown,
                                     "compile" if jit_compile else "auto", 0, False, name, flags)


# Every Function alive: at exit their sessions are let go, before the extension module is, so
# functions TensorFlow's caches keep alive to the end are no leak.
_live = weakref.WeakSet()


@atexit.register
def _release_sessions():
    for f in list(_live):
        f._traced.clear()


class Function:
    """A tf.function whose graph xlens runs: call it as the function."""

    def __init__(self, fn, *, jit_compile=None, input_signature=None, dump_to=None, trace=None):
        import tensorflow as tf

        self._tf = tf
        self._fn = fn
        self._name = getattr(fn, "__name__", "function")
        self._jit_compile = bool(jit_compile)
        self._flags = [f"--xla_dump_to={os.fspath(dump_to)}"] if dump_to is not None else []
        self._trace = os.fspath(trace) if trace is not None else None
        self._tf_function = tf.function(fn, input_signature=input_signature)
        try:  # once: every call binds its arguments to it
            self._signature = inspect.signature(fn)
        except (TypeError, ValueError):
            self._signature = None
        self._traced = {}
        functools.update_wrapper(self, fn)
        _live.add(self)

    @property
    def python_function(self):
        return self._fn

    def get_concrete_function(self, *args, **kwargs):
        return self._tf_function.get_concrete_function(*args, **kwargs)

    def __get__(self, instance, owner):
        # As a method: bound to the instance, as tf.function's are.
        if instance is None:
            return self
        return functools.partial(self.__call__, instance)

    def __call__(self, *args, **kwargs):
        tf = self._tf
        concrete = self._tf_function.get_concrete_function(*args, **kwargs)
        traced = self._traced.get(id(concrete))
        if traced is None or traced.concrete is not concrete:
            traced = _Traced(tf, concrete, self._name, self._jit_compile, self._flags)
            self._traced[id(concrete)] = traced
        values = self._inputs(traced, args, kwargs)
        if len(values) != len(traced.inputs):
            raise Error(f"tf.function {self._name!r}: {len(values)} tensor arguments for the "
                        f"{len(traced.inputs)} inputs of its graph")
        feeds = [(t.name,) + _tensors.convert(v, int(t.dtype.as_datatype_enum),
                                              f"argument {t.op.name!r}")
                 for t, v in zip(traced.inputs, values)]
        feeds += [(name,) + value for name, value in traced.constants]
        session = traced.session
        for name, v in traced.variables:
            session.assign(name, *_tensors.convert(v.numpy(), int(v.dtype.as_datatype_enum),
                                                   f"variable {v.name!r}"))
        if self._trace is not None:
            session.start_trace()
        try:
            results = session.run(feeds, traced.fetches, traced.targets)
        finally:
            if self._trace is not None:
                session.stop_trace(self._trace)
        # The variables the call wrote, back into TensorFlow's.
        for name, v in traced.variables:
            value = session.read(name)
            if value is not None:
                v.assign(_tensors.to_numpy(value, scalar_as_numpy_scalar=False))
        by_name = dict(zip(traced.fetches, (_tensors.to_numpy(r, scalar_as_numpy_scalar=False)
                                            for r in results)))
        leaves = [by_name[leaf.name] if tf.is_tensor(leaf) else leaf for leaf in traced.leaves]
        return tf.nest.pack_sequence_as(traced.structure, leaves, expand_composites=True)

    def _inputs(self, traced, args, kwargs):
        """The tensor leaves of the arguments, in the order of the graph's inputs: every leaf
        when an input_signature made them all tensors, else the arrays and tensors (Python values
        are part of TensorFlow's trace, not inputs)."""
        tf = self._tf
        ordered = list(args) + list(kwargs.values())
        if self._signature is not None:
            try:
                ordered = list(self._signature.bind(*args, **kwargs).arguments.values())
            except TypeError:  # arguments it does not bind: in the order given
                pass
        leaves = tf.nest.flatten(ordered, expand_composites=True)
        tensors = [leaf for leaf in leaves
                   if tf.is_tensor(leaf) or isinstance(leaf, (np.ndarray, np.generic))]
        if len(tensors) != len(traced.inputs) and len(leaves) == len(traced.inputs):
            tensors = leaves
        return [t.numpy() if hasattr(t, "numpy") and tf.is_tensor(t) else t for t in tensors]

"""xlens.Session: TensorFlow 1's Session, its graph run by xlens.

    config = tf.compat.v1.ConfigProto()
    config.graph_options.optimizer_options.global_jit_level = tf.compat.v1.OptimizerOptions.ON_1
    sess = xlens.Session(config=config)          # was: tf.compat.v1.Session(config=config)
    sess.run(train_step, feed_dict={x: xs, y_: ys})

The graph runs in this process through xlens's graph session with TensorFlow's JIT installed as
`xlens graph run --jit=auto` installs it: the session's global_jit_level and cpu_global_jit, and
TF_XLA_FLAGS/XLA_FLAGS from the environment, decide what is clustered and compiled, as they do in
TensorFlow. dump_to= writes what XLA_FLAGS=--xla_dump_to writes; trace= the Chrome trace that
`xlens graph run --trace` writes, from the session's creation to its close().
"""

import atexit
import collections.abc
import os
import weakref

from . import _tensors
from ._xlens import Error, _GraphSession

__all__ = ["Session"]


def _is_tf_graph(obj):
    return hasattr(obj, "as_graph_def") and hasattr(obj, "get_operations")


def _is_graph_def(obj):
    return hasattr(obj, "SerializeToString") and hasattr(obj, "node") and hasattr(obj, "library")


def _jit_options(config):
    """(global_jit_level, cpu_global_jit) of a ConfigProto (or its serialized bytes)."""
    if config is None:
        return 0, False
    if isinstance(config, (bytes, bytearray)):
        from tensorflow.core.protobuf import config_pb2

        parsed = config_pb2.ConfigProto()
        parsed.ParseFromString(bytes(config))
        config = parsed
    try:
        options = config.graph_options.optimizer_options
    except AttributeError:
        raise Error(f"config: expected TensorFlow's ConfigProto, got {type(config).__name__}") \
            from None
    return int(options.global_jit_level), bool(options.cpu_global_jit)


# Every Session alive: at exit they are closed (a trace= written) and their graph sessions let
# go before the extension module is, as TensorFlow closes its sessions.
_live = weakref.WeakSet()


@atexit.register
def _close_sessions():
    for s in list(_live):
        try:
            s.close()
        except Error:
            pass
        s._session = None


class _Fetch:
    """One fetch, resolved: a tensor name (its value returned) or an op (None returned)."""

    __slots__ = ("tensor", "op")

    def __init__(self, tensor=None, op=None):
        self.tensor = tensor
        self.op = op


class Session:
    """TensorFlow 1's Session (run, make_callable, close, context manager, graph), its graph run
    by xlens.

    graph: a tf.Graph (default: TensorFlow's default graph), a GraphDef proto, its serialized
    bytes, or the path of a .pb/.pbtxt file. config: TensorFlow's ConfigProto; its
    graph_options.optimizer_options.global_jit_level and cpu_global_jit are honoured. dump_to: a
    directory for XLA's dumps (--xla_dump_to); trace: a file for the Chrome trace of everything
    the session runs, written by close()."""

    def __init__(self, graph=None, config=None, *, dump_to=None, trace=None, target=""):
        if target not in ("", None):
            raise Error(f"target {target!r}: xlens runs in process (only '' is accepted)")
        self._tf_graph = None
        self._closed = True
        self._trace = os.fspath(trace) if trace is not None else None
        flags = []
        if dump_to is not None:
            flags.append(f"--xla_dump_to={os.fspath(dump_to)}")
        level, cpu_global_jit = _jit_options(config)
        if graph is None:
            import tensorflow as tf

            graph = tf.compat.v1.get_default_graph()
        self._functions = set()
        if _is_tf_graph(graph):
            self._tf_graph = graph
            self._version = graph.version
            graph_def = graph.as_graph_def()
            self._nodes = {n.name for n in graph_def.node}
            self._functions = {f.signature.name for f in graph_def.library.function}
            source, shown = graph_def.SerializeToString(), "tf.Graph"
        elif _is_graph_def(graph):
            source, shown = graph.SerializeToString(), "GraphDef"
        elif isinstance(graph, (bytes, bytearray, memoryview)):
            source, shown = bytes(graph), "GraphDef"
        elif isinstance(graph, (str, os.PathLike)):
            source, shown = os.fspath(graph), None
        else:
            raise Error(f"graph: expected a tf.Graph, a GraphDef, its bytes or a file's path, got "
                        f"{type(graph).__name__}")
        self._graph_input = graph
        self._session = _GraphSession(source, shown, "auto", level, cpu_global_jit, "", flags)
        self._closed = False
        self._default_contexts = []
        _live.add(self)
        if self._trace is not None:
            self._session.start_trace()

    # --- TensorFlow's Session API -------------------------------------------------------------

    @property
    def graph(self):
        """The tf.Graph this session runs (the GraphDef or path it was given otherwise)."""
        return self._tf_graph if self._tf_graph is not None else self._graph_input

    @property
    def graph_def(self):
        if self._tf_graph is not None:
            return self._tf_graph.as_graph_def()
        return self._graph_input

    @property
    def sess_str(self):
        return ""

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs what `fetches` needs with `feed_dict`'s values and returns the fetched values in
        fetches' structure: numpy arrays (numpy scalars for 0-d values, bytes for string
        scalars), None for an op. With trace=, every run is a span "Session.run" in the trace;
        one asked for RunOptions(trace_level=FULL_TRACE) has the argument full_trace, so the
        run TensorFlow's timeline would show is found. run_metadata is left as it is."""
        del run_metadata
        full_trace = getattr(options, "trace_level", 0) == 3  # RunOptions.FULL_TRACE
        self._check_open()
        self._extend_if_grown()
        flat = []
        structure = self._flatten(fetches, flat)
        names, targets, seen = [], [], {}
        for fetch in flat:
            if fetch.tensor is not None and fetch.tensor not in seen:
                seen[fetch.tensor] = len(names)
                names.append(fetch.tensor)
            elif fetch.op is not None and fetch.op not in targets:
                targets.append(fetch.op)
        feeds = self._feeds(feed_dict)
        results = self._session.run(feeds, names, targets, full_trace)
        values = [_tensors.to_numpy(r) for r in results]
        out = [values[seen[f.tensor]] if f.tensor is not None else None for f in flat]
        return structure(iter(out))

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        """A function of the feed_list's values that runs `fetches` (TensorFlow's make_callable)."""
        feed_list = list(feed_list or [])

        def call(*args, **kwargs):
            if len(args) != len(feed_list):
                raise Error(f"make_callable: expected {len(feed_list)} arguments, got {len(args)}")
            return self.run(fetches, dict(zip(feed_list, args)))

        return call

    def close(self):
        """Ends the session; with trace=, writes the trace."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._trace is not None:
                self._session.stop_trace(self._trace)
        finally:
            self._session.close()

    def as_default(self):
        """Makes this the default session (tensor.eval() and op.run() use it)."""
        from tensorflow.python.framework import stack

        return stack.default_session(self)

    def __enter__(self):
        if self._tf_graph is not None:
            graph_context = self._tf_graph.as_default()
            session_context = self.as_default()
            graph_context.__enter__()
            session_context.__enter__()
            self._default_contexts.append((graph_context, session_context))
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._default_contexts:
            graph_context, session_context = self._default_contexts.pop()
            session_context.__exit__(exc_type, exc, tb)
            graph_context.__exit__(exc_type, exc, tb)
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # --- xlens's additions -------------------------------------------------------------------

    def jit_record(self):
        """What TensorFlow's JIT did so far: {'graphs': [{'graph', 'clusters': {name: [nodes]},
        'unclustered': {node: why}}], 'compilations': n, 'lazy_fallbacks': n}."""
        return self._session.jit_record()

    # --- inside ------------------------------------------------------------------------------

    def _check_open(self):
        if self._closed:
            raise Error("Attempted to use a closed Session.")

    def _extend_if_grown(self):
        """Nodes added to the tf.Graph since the last run join the session (Session.Extend)."""
        g = self._tf_graph
        if g is None or g.version == self._version:
            return
        version = g.version
        # The nodes and functions not yet sent (as_graph_def's from_version gives every node in
        # TensorFlow 2's graphs, so the new ones are told by name).
        more = g.as_graph_def()
        nodes = [n for n in more.node if n.name not in self._nodes]
        functions = [f for f in more.library.function if f.signature.name not in self._functions]
        del more.node[:]
        more.node.extend(nodes)
        del more.library.function[:]
        more.library.function.extend(functions)
        self._session.extend(more.SerializeToString())
        self._nodes.update(n.name for n in nodes)
        self._functions.update(f.signature.name for f in functions)
        self._version = version

    def _element(self, fetch):
        """A fetch as a _Fetch: names ('x:0' a tensor, 'op' an op), tensors, operations and
        anything with _as_graph_element (variables)."""
        if isinstance(fetch, str):
            return _Fetch(tensor=fetch) if ":" in fetch else _Fetch(op=fetch)
        if isinstance(fetch, bytes):
            return self._element(fetch.decode("utf-8"))
        convert = getattr(fetch, "_as_graph_element", None)
        if callable(convert) and not _is_tensor(fetch) and not _is_operation(fetch):
            element = convert()
            if element is not None:
                return self._element(element)
        if _is_operation(fetch):
            self._check_graph(fetch)
            return _Fetch(op=fetch.name)
        if _is_tensor(fetch):
            self._check_graph(fetch)
            return _Fetch(tensor=fetch.name)
        raise Error(f"Fetch argument {fetch!r} has invalid type {type(fetch).__name__}, must be a "
                    f"string or Tensor. (Can not convert a {type(fetch).__name__} into a Tensor "
                    f"or Operation.)")

    def _check_graph(self, element):
        graph = getattr(element, "graph", None)
        if self._tf_graph is not None and graph is not None and graph is not self._tf_graph:
            raise Error(f"{element.name!r} is not an element of this session's graph")

    def _flatten(self, fetches, flat):
        """Appends fetches' leaves to `flat`; returns a function that rebuilds the structure from
        an iterator of values."""
        if isinstance(fetches, dict):
            keys = list(fetches.keys())
            parts = [self._flatten(fetches[k], flat) for k in keys]
            kind = type(fetches)

            def rebuild(values):
                pairs = [(k, p(values)) for k, p in zip(keys, parts)]
                try:
                    return kind(pairs)
                except TypeError:
                    return dict(pairs)
            return rebuild
        if isinstance(fetches, (list, tuple)):
            parts = [self._flatten(f, flat) for f in fetches]
            kind = type(fetches)
            if isinstance(fetches, tuple) and hasattr(fetches, "_fields"):  # namedtuple
                return lambda values: kind(*[p(values) for p in parts])
            if kind in (list, tuple):
                return lambda values: kind(p(values) for p in parts)
            return lambda values: list(p(values) for p in parts)
        if fetches is None:
            raise Error("Fetch argument None has invalid type <class 'NoneType'>")
        flat.append(self._element(fetches))
        return lambda values: next(values)

    def _feeds(self, feed_dict):
        if not feed_dict:
            return []
        if not isinstance(feed_dict, collections.abc.Mapping):
            raise Error(f"feed_dict: expected a dict, got {type(feed_dict).__name__}")
        feeds = []
        for key, value in feed_dict.items():
            name, dtype = self._feed_key(key)
            if dtype is None:
                dtype = self._session.output_dtype(name)
            feeds.append((name,) + _tensors.convert(value, dtype, f"feed_dict {name!r}"))
        return feeds

    def _feed_key(self, key):
        """(tensor name, DataType number or None) of a feed_dict key."""
        if isinstance(key, bytes):
            key = key.decode("utf-8")
        if isinstance(key, str):
            return key, None
        convert = getattr(key, "_as_graph_element", None)
        if callable(convert) and not _is_tensor(key):
            element = convert()
            if element is not None:
                key = element
        if _is_tensor(key):
            self._check_graph(key)
            return key.name, int(key.dtype.base_dtype.as_datatype_enum)
        raise Error(f"Cannot interpret feed_dict key {key!r} of type {type(key).__name__} as a "
                    f"Tensor")


def _is_operation(obj):
    return hasattr(obj, "node_def") and hasattr(obj, "outputs") and hasattr(obj, "type")


def _is_tensor(obj):
    return (hasattr(obj, "op") and hasattr(obj, "dtype") and hasattr(obj, "value_index")
            and hasattr(obj, "name"))

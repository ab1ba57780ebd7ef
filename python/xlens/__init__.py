"""xlens from Python: an XLA-style JIT compiler you can see through.

The compiler, runtime, graph session and dump readers run in this process (the _xlens extension
module); arrays go in and come out as numpy arrays. Every failure is raised as xlens.Error with
the one-line message the command line prints.

    xlens.Session(graph, config=config)   TensorFlow 1's session, its global_jit_level honoured
    xlens.tf.function(fn, jit_compile=)   a TensorFlow 2 function's graph, run by xlens
    xlens.jit(fn)                         a JAX function lowered by JAX, compiled by xlens
    xlens.inspect(dir), xlens.view(dir)   what a dump holds; the viewer on it
"""

import os as _os
import sys as _sys

# The extension binds to its own libraries first: TensorFlow loads its copy of protobuf (and
# more) with RTLD_GLOBAL, which would otherwise stand in for the ones xlens was built with.
_flags = _sys.getdlopenflags()
_sys.setdlopenflags(_flags | getattr(_os, "RTLD_DEEPBIND", 0))
try:
    from ._xlens import Error, __version__
finally:
    _sys.setdlopenflags(_flags)
from . import tf
from . import session as _session, jit as _jit, tools as _tools
from .session import *  # noqa: F401,F403
from .jit import *  # noqa: F401,F403
from .tools import *  # noqa: F401,F403

# Read through private names: `from .jit import *` rebinds the package's `jit` to the function.
__all__ = ["Error", "__version__", "tf"] + _session.__all__ + _jit.__all__ + _tools.__all__

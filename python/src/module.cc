// The _xlens extension module: the compiler, runtime, graph session and dump readers in process.
#include <nanobind/nanobind.h>

#include "python/src/bindings.h"

NB_MODULE(_xlens, m) {
  m.doc() = "xlens in process: the compiler, runtime, graph session and dump readers";
  xlens::python::RegisterErrors(m);
  xlens::python::RegisterVersion(m);
  xlens::python::RegisterSession(m);
  xlens::python::RegisterJit(m);
  xlens::python::RegisterTools(m);
}

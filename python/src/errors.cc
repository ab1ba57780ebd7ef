// xlens.Error: every Status the libraries return becomes this exception, its text the one line
// the command line would print, so a script and a terminal read the same words.
#include "python/src/bindings.h"

namespace xlens::python {

void RegisterErrors(nanobind::module_& m) {
  nanobind::exception<Error>(m, "Error", PyExc_RuntimeError);
}

void RegisterVersion(nanobind::module_& m) {
  m.attr("__version__") = "0.1.0";
}

}  // namespace xlens::python

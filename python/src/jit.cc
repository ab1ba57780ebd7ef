#include "python/src/bindings.h"

namespace xlens::python {

void RegisterJit(nanobind::module_& m) {}

}  // namespace xlens::python

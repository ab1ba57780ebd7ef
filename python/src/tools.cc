#include "python/src/bindings.h"

namespace xlens::python {

void RegisterTools(nanobind::module_& m) {}

}  // namespace xlens::python

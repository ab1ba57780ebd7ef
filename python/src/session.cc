#include "python/src/bindings.h"

namespace xlens::python {

void RegisterSession(nanobind::module_& m) {}

}  // namespace xlens::python

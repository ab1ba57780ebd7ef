#include "compiler/support/status.h"

namespace xlens {

Status Error(std::string message) { return Status::Error(std::move(message)); }

}  // namespace xlens

// Whole-file reads and atomic writes. A write goes to a temporary file beside the target and is
// renamed over it, so a crash never leaves a half-written file behind.
#pragma once

#include <string>
#include <string_view>

#include "compiler/support/status.h"

namespace xlens {

// Reads the whole file. The error names the path and the reason (errno text).
StatusOr<std::string> ReadFile(const std::string& path);

// Writes `contents` to `path` atomically (temporary file + rename).
Status WriteFileAtomic(const std::string& path, std::string_view contents);

}  // namespace xlens

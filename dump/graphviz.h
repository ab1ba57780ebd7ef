// Renders DOT to SVG with Graphviz's `dot`, when it is installed, for the HTML dumps.
#pragma once

#include <string>
#include <string_view>

#include "compiler/support/status.h"

namespace xlens {

// Runs `dot_program -Tsvg` (found on PATH when it has no slash) on `dot` and returns the SVG
// without its XML prolog, ready to embed in HTML. DOT goes in on a pipe and SVG comes back on one,
// so no temporary file is made and TMPDIR does not matter. Fails with a reason when the program is
// missing, exits with an error (its stderr is quoted), draws more than 256 MiB or runs past
// `timeout_ms`.
StatusOr<std::string> RenderDotToSvg(std::string_view dot, const std::string& dot_program = "dot",
                                     int timeout_ms = 60000);

}  // namespace xlens

// Renders DOT to SVG with Graphviz's `dot`, when it is installed, for the HTML dumps.
#pragma once

#include <string>
#include <string_view>

#include "compiler/support/status.h"

namespace xlens {

// Runs `dot_program -Tsvg` (found on PATH when it has no slash) on `dot` and returns the SVG
// without its XML prolog, ready to embed in HTML. Fails with a reason when the program is missing,
// exits with an error (its stderr is quoted) or runs past `timeout_ms`.
StatusOr<std::string> RenderDotToSvg(std::string_view dot, const std::string& dot_program = "dot",
                                     int timeout_ms = 60000);

}  // namespace xlens

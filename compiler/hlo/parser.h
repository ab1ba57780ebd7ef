// Reads XLA's HLO text: long form (% names, typed operands, signatures), the short parsable form,
// and the mixtures real dumps contain. Errors are `FILE:LINE:COL: message` followed by the line
// and a caret under the column.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

struct ParseOptions {
  // Run the verifier on the parsed module (the default, as XLA's tools do).
  bool verify = true;
  // Name used in error messages.
  std::string filename = "<text>";
};

StatusOr<std::unique_ptr<HloModule>> ParseHloModule(std::string_view text,
                                                    const ParseOptions& options = {});

// Parses a shape ("f32[2,3]{1,0}", "(s32[], token[])").
StatusOr<Shape> ParseShape(std::string_view text);

}  // namespace xlens

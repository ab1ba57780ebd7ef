// Compares a computed literal with the expected one (the reference evaluator's): exact for
// integers and pred, within an absolute-or-relative tolerance for floating point, NaN equal to NaN.
// The error names the first mismatching element and the largest errors, so a failing differential
// test says where and by how much.
#pragma once

#include "compiler/hlo/literal.h"
#include "compiler/support/status.h"

namespace xlens {

struct ErrorSpec {
  double abs = 1e-5;
  double rel = 1e-5;
};

// Largest absolute and relative error over all float elements (0 when there are none).
struct LiteralDifference {
  double max_abs_error = 0;
  double max_rel_error = 0;
};

// OK when `actual` matches `expected` (shapes compatible, every element within `spec`); otherwise
// an error such as "out0 element {3, 1}: expected 1.5, got 1.625 (abs error 0.125, rel 0.0833)".
// `difference`, when given, receives the largest errors either way.
Status ExpectLiteralNear(const Literal& expected, const Literal& actual, const ErrorSpec& spec,
                         LiteralDifference* difference = nullptr);

}  // namespace xlens

// Compares a computed literal with the expected one (the reference evaluator's): exact for
// integers and pred, within an absolute-or-relative tolerance for floating point, NaN equal to NaN
// and an infinity only to the same infinity. The error names the first mismatching element and the
// largest errors, so a failing differential test says where and by how much.
#pragma once

#include "compiler/hlo/literal.h"
#include "compiler/support/status.h"

namespace xlens {

struct ErrorSpec {
  double abs = 1e-5;
  double rel = 1e-5;
  // Compare elements of a type narrower than f32 within at least NarrowFloatAbsoluteTolerance and
  // NarrowFloatTolerance (rel) of their type: a tolerance chosen for f32 fails an f16 or bf16 result that differs from the
  // expected one only in its rounding.
  bool widen_for_narrow_floats = false;
};

// The least relative tolerance of a comparison of `type`'s values: 1e-2 for f16 and bf16, what
// XLA's own tests give them (ErrorSpec{1e-2, 1e-2} in its GEMM, Triton and oneDNN tests), about 10
// units in the last place of f16 and 1.3 of bf16; one unit in the last place (2^-mantissa bits)
// for the f8 and f4 types, whose unit is larger; 0 for f32, f64, the complex types and every other
// type.
double NarrowFloatTolerance(PrimitiveType type);
// The least absolute tolerance: 1e-2 for f16 and bf16 (as XLA's tests); for the f8 and f4 types
// one unit in the last place near zero, the spacing of their subnormals, never more than their
// smallest normal: their relative unit taken as absolute would make every f8e4m3fn value below
// 0.125 equal to every other, and 0 equal to 1 in f8e8m0fnu. 0 for f8e8m0fnu, which has no zero
// and no subnormals, and for every type NarrowFloatTolerance gives 0.
double NarrowFloatAbsoluteTolerance(PrimitiveType type);

// The tolerance `spec` holds elements of `type` to: `spec` itself, raised to
// NarrowFloatAbsoluteTolerance(type) and NarrowFloatTolerance(type) when
// spec.widen_for_narrow_floats. The one rule a comparison and the
// label that prints its tolerance both follow.
ErrorSpec ErrorSpecFor(const ErrorSpec& spec, PrimitiveType type);

// Largest absolute and relative error over the float elements where both sides are finite (0 when
// there are none). NaN against a number, or an infinity against a finite value or the other
// infinity, has no error to measure: those are counted apart, so that a largest error of 0 never
// stands for them.
struct LiteralDifference {
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t mismatches = 0;  // values beyond the tolerance, the non-finite mismatches among them
  int64_t non_finite_mismatches = 0;  // exactly one side NaN, or an infinity the other side lacks

  // Values beyond the tolerance where both sides are finite: the ones the largest errors measure.
  int64_t finite_mismatches() const { return mismatches - non_finite_mismatches; }

  // Folds in the difference of another comparison (another device's result): the larger errors,
  // the counts summed, so that a summary over several never hides a non-finite mismatch.
  void Merge(const LiteralDifference& other);
};

// OK when `actual` matches `expected` (shapes compatible, every element within `spec`); otherwise
// an error such as "out0 element {3, 1}: expected 1.5, got 1.625 (abs error 0.125, rel 0.0833)",
// or "result element {0}: expected -95, got -inf" for a non-finite mismatch, which the error
// names too when a finite one came first.
// A tuple's outputs are all compared: the error is the first output's that mismatches, and
// `difference`, when given, receives the largest errors and the counts over all of them either way.
Status ExpectLiteralNear(const Literal& expected, const Literal& actual, const ErrorSpec& spec,
                         LiteralDifference* difference = nullptr);

}  // namespace xlens

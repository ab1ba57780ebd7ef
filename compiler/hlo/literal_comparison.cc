#include "compiler/hlo/literal_comparison.h"

#include "compiler/hlo/float8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace xlens {

namespace {

std::string IndexString(const Shape& shape, int64_t linear) {
  std::vector<int64_t> index(shape.rank());
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    int64_t size = shape.dimensions(d);
    index[d] = size == 0 ? 0 : linear % size;
    linear = size == 0 ? 0 : linear / size;
  }
  return fmt::format("{{{}}}", fmt::join(index, ", "));
}

// The explicit mantissa bits and the smallest normal's exponent of a float type narrower than
// f32; false for any other type. The 8-bit floats XLA computes with take both from their format
// (float8.h: the smallest normal is 2^(1 - bias)).
bool NarrowFloatBits(PrimitiveType type, int* mantissa_bits, int* min_normal_exponent) {
  if (const Float8Format* format = Float8FormatOf(type)) {
    *mantissa_bits = format->mantissa_bits;
    *min_normal_exponent = 1 - format->bias;
    return true;
  }
  using P = PrimitiveType;
  switch (type) {
    case P::F16: *mantissa_bits = 10, *min_normal_exponent = -14; return true;
    case P::BF16: *mantissa_bits = 7, *min_normal_exponent = -126; return true;
    case P::F4E2M1FN: *mantissa_bits = 1, *min_normal_exponent = 0; return true;
    case P::F8E8M0FNU: *mantissa_bits = 0, *min_normal_exponent = -127; return true;
    default: return false;
  }
}

Status CompareArrays(const Literal& expected, const Literal& actual, const ErrorSpec& given_spec,
                     const std::string& where, LiteralDifference& diff) {
  const Shape& es = expected.shape();
  const Shape& as = actual.shape();
  if (!shape_util::Compatible(es, as)) {
    return Error(fmt::format("{}: expected shape {}, got {}", where, es.ToString(false),
                             as.ToString(false)));
  }
  PrimitiveType type = es.element_type();
  bool is_float = IsFloatingPointType(type) || IsComplexType(type);
  ErrorSpec spec = ErrorSpecFor(given_spec, type);
  std::string first_mismatch, first_non_finite;
  int64_t mismatches = 0, non_finite_mismatches = 0;
  for (int64_t i = 0; i < expected.element_count(); ++i) {
    if (!is_float) {
      if (expected.GetAsInt64(i) != actual.GetAsInt64(i) ||
          (type == PrimitiveType::U64 && expected.data<uint64_t>()[i] != actual.data<uint64_t>()[i])) {
        if (mismatches++ == 0) {
          first_mismatch = fmt::format("{} element {}: expected {}, got {}", where,
                                       IndexString(es, i), expected.ElementToString(i),
                                       actual.ElementToString(i));
        }
      }
      continue;
    }
    complex128 e = expected.GetAsComplex(i);
    complex128 a = actual.GetAsComplex(i);
    for (auto [ev, av] : {std::pair{e.real(), a.real()}, std::pair{e.imag(), a.imag()}}) {
      bool ok;
      bool finite = std::isfinite(ev) && std::isfinite(av);
      double abs_error = 0, rel_error = 0;
      if (std::isnan(ev) || std::isnan(av)) {
        ok = std::isnan(ev) && std::isnan(av);
      } else if (std::isinf(ev) || std::isinf(av)) {
        ok = ev == av;
      } else {
        abs_error = std::fabs(ev - av);
        rel_error = ev == 0 ? (av == 0 ? 0 : INFINITY) : abs_error / std::fabs(ev);
        ok = abs_error <= spec.abs || rel_error <= spec.rel;
        diff.max_abs_error = std::max(diff.max_abs_error, abs_error);
        if (!std::isinf(rel_error)) diff.max_rel_error = std::max(diff.max_rel_error, rel_error);
      }
      if (ok) continue;
      std::string values = fmt::format("element {}: expected {}, got {}", IndexString(es, i),
                                       expected.ElementToString(i), actual.ElementToString(i));
      if (!finite && non_finite_mismatches++ == 0 && mismatches > 0) first_non_finite = values;
      if (mismatches++ == 0) {
        first_mismatch = finite ? fmt::format("{} {} (abs error {:.3g}, rel {:.3g})", where, values,
                                              abs_error, rel_error)
                                : fmt::format("{} {}", where, values);
      }
    }
  }
  diff.mismatches += mismatches;
  diff.non_finite_mismatches += non_finite_mismatches;
  if (mismatches == 0) return OkStatus();
  std::string non_finite =
      first_non_finite.empty() ? "" : fmt::format("; first non-finite mismatch: {}", first_non_finite);
  return Error(fmt::format("{}{}; {} mismatching value(s) in {}", first_mismatch, non_finite,
                           mismatches, es.ToString(false)));
}

Status CompareImpl(const Literal& expected, const Literal& actual, const ErrorSpec& spec,
                   const std::string& where, LiteralDifference& diff) {
  if (expected.shape().IsTuple() != actual.shape().IsTuple()) {
    return Error(fmt::format("{}: expected {}, got {}", where, expected.shape().ToString(false),
                             actual.shape().ToString(false)));
  }
  if (!expected.shape().IsTuple()) return CompareArrays(expected, actual, spec, where, diff);
  if (expected.tuple_size() != actual.tuple_size()) {
    return Error(fmt::format("{}: expected a tuple of {} elements, got {}", where,
                             expected.tuple_size(), actual.tuple_size()));
  }
  // Every output, so that the counts and largest errors cover all of them; the first error names
  // where they start to differ.
  Status first = OkStatus();
  for (int64_t i = 0; i < expected.tuple_size(); ++i) {
    Status s = CompareImpl(expected.tuple_element(i), actual.tuple_element(i), spec,
                           fmt::format("{}{{{}}}", where, i), diff);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace

double NarrowFloatTolerance(PrimitiveType type) {
  int bits = 0, min_exponent = 0;
  if (!NarrowFloatBits(type, &bits, &min_exponent)) return 0;
  return std::max(1e-2, std::ldexp(1.0, -bits));
}

double NarrowFloatAbsoluteTolerance(PrimitiveType type) {
  int bits = 0, min_exponent = 0;
  if (!NarrowFloatBits(type, &bits, &min_exponent) || type == PrimitiveType::F8E8M0FNU) return 0;
  if (type == PrimitiveType::F16 || type == PrimitiveType::BF16) return 1e-2;
  return std::ldexp(1.0, min_exponent - bits);
}

ErrorSpec ErrorSpecFor(const ErrorSpec& spec, PrimitiveType type) {
  ErrorSpec result = spec;
  if (spec.widen_for_narrow_floats) {
    result.abs = std::max(spec.abs, NarrowFloatAbsoluteTolerance(type));
    result.rel = std::max(spec.rel, NarrowFloatTolerance(type));
  }
  return result;
}

void LiteralDifference::Merge(const LiteralDifference& other) {
  max_abs_error = std::max(max_abs_error, other.max_abs_error);
  max_rel_error = std::max(max_rel_error, other.max_rel_error);
  mismatches += other.mismatches;
  non_finite_mismatches += other.non_finite_mismatches;
}

Status ExpectLiteralNear(const Literal& expected, const Literal& actual, const ErrorSpec& spec,
                         LiteralDifference* difference) {
  LiteralDifference diff;
  Status status = CompareImpl(expected, actual, spec, "result", diff);
  if (difference != nullptr) *difference = diff;
  return status;
}

}  // namespace xlens

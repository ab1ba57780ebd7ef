#include "compiler/hlo/literal_comparison.h"

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

// Explicit mantissa bits of a type narrower than f32.
int NarrowMantissaBits(PrimitiveType type) {
  using P = PrimitiveType;
  switch (type) {
    case P::F16: return 10;
    case P::BF16: return 7;
    case P::F8E3M4: return 4;
    case P::F8E4M3: case P::F8E4M3FN: case P::F8E4M3B11FNUZ: case P::F8E4M3FNUZ: return 3;
    case P::F8E5M2: case P::F8E5M2FNUZ: return 2;
    case P::F4E2M1FN: return 1;
    case P::F8E8M0FNU: return 0;
    default: return -1;
  }
}

// Exponent of the smallest normal of a type narrower than f32.
int NarrowMinNormalExponent(PrimitiveType type) {
  using P = PrimitiveType;
  switch (type) {
    case P::F16: return -14;
    case P::BF16: return -126;
    case P::F8E3M4: return -2;
    case P::F8E4M3: case P::F8E4M3FN: return -6;
    case P::F8E4M3FNUZ: return -7;
    case P::F8E4M3B11FNUZ: return -10;
    case P::F8E5M2: return -14;
    case P::F8E5M2FNUZ: return -15;
    case P::F4E2M1FN: return 0;
    case P::F8E8M0FNU: return -127;
    default: return 0;
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
  int bits = NarrowMantissaBits(type);
  if (bits < 0) return 0;
  return std::max(1e-2, std::ldexp(1.0, -bits));
}

double NarrowFloatAbsoluteTolerance(PrimitiveType type) {
  int bits = NarrowMantissaBits(type);
  if (bits < 0 || type == PrimitiveType::F8E8M0FNU) return 0;
  if (type == PrimitiveType::F16 || type == PrimitiveType::BF16) return 1e-2;
  return std::ldexp(1.0, NarrowMinNormalExponent(type) - bits);
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

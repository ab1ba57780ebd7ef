#include "compiler/hlo/literal_comparison.h"

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

Status CompareArrays(const Literal& expected, const Literal& actual, const ErrorSpec& spec,
                     const std::string& where, LiteralDifference& diff) {
  const Shape& es = expected.shape();
  const Shape& as = actual.shape();
  if (!shape_util::Compatible(es, as)) {
    return Error(fmt::format("{}: expected shape {}, got {}", where, es.ToString(false),
                             as.ToString(false)));
  }
  PrimitiveType type = es.element_type();
  bool is_float = IsFloatingPointType(type) || IsComplexType(type);
  std::string first_mismatch;
  int64_t mismatches = 0;
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
      if (!ok && mismatches++ == 0) {
        first_mismatch = fmt::format("{} element {}: expected {}, got {} (abs error {:.3g}, rel {:.3g})",
                                     where, IndexString(es, i), expected.ElementToString(i),
                                     actual.ElementToString(i), abs_error, rel_error);
      }
    }
  }
  if (mismatches == 0) return OkStatus();
  return Error(fmt::format("{}; {} mismatching value(s) in {}", first_mismatch, mismatches,
                           es.ToString(false)));
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
  for (int64_t i = 0; i < expected.tuple_size(); ++i) {
    RETURN_IF_ERROR(CompareImpl(expected.tuple_element(i), actual.tuple_element(i), spec,
                                fmt::format("{}{{{}}}", where, i), diff));
  }
  return OkStatus();
}

}  // namespace

Status ExpectLiteralNear(const Literal& expected, const Literal& actual, const ErrorSpec& spec,
                         LiteralDifference* difference) {
  LiteralDifference diff;
  Status status = CompareImpl(expected, actual, spec, "result", diff);
  if (difference != nullptr) *difference = diff;
  return status;
}

}  // namespace xlens

// Helpers for the reference evaluator's tests: evaluate HLO text, build and read literals.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/parser.h"

namespace xlens::testing {

// Parses (and verifies) `text`, then evaluates its entry computation.
inline StatusOr<Literal> EvaluateText(std::string_view text,
                                      const std::vector<Literal>& arguments = {}) {
  auto module = ParseHloModule(text);
  if (!module.ok()) return module.status();
  return EvaluateModule(**module, arguments);
}

template <typename T>
Literal MakeLiteral(PrimitiveType type, std::vector<int64_t> dims, const std::vector<T>& values) {
  Literal literal(Shape(type, std::move(dims)));
  auto data = literal.data<T>();
  for (size_t i = 0; i < values.size() && i < data.size(); ++i) data[i] = values[i];
  return literal;
}

template <typename T>
std::vector<T> Values(const Literal& literal) {
  auto data = literal.data<T>();
  return {data.begin(), data.end()};
}

// Every element widened to double (f16 and bf16 included).
inline std::vector<double> DoubleValues(const Literal& literal) {
  std::vector<double> values;
  for (int64_t i = 0; i < literal.element_count(); ++i) values.push_back(literal.GetAsDouble(i));
  return values;
}

}  // namespace xlens::testing

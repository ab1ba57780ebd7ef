#include "compiler/hlo/random_literal.h"

#include <fmt/format.h>

namespace xlens {

StatusOr<Literal> MakeRandomLiteral(const Shape& shape, std::mt19937_64& rng) {
  if (shape.IsTuple()) {
    std::vector<Literal> elements;
    for (const Shape& s : shape.tuple_shapes()) {
      ASSIGN_OR_RETURN(Literal e, MakeRandomLiteral(s, rng));
      elements.push_back(std::move(e));
    }
    return Literal::MakeTuple(std::move(elements));
  }
  // A token carries no value: a module that takes one (send/recv, infeed) gets one, and whatever
  // runs it says what it makes of the operations that use it.
  if (shape.IsToken()) return Literal(shape);
  PrimitiveType type = shape.element_type();
  if (!shape.IsArray() || !IsEvaluatorSupportedType(type)) {
    return Error(fmt::format("cannot make a random input of shape {}", shape.ToString()));
  }
  if (!shape.is_static()) {
    return Error(fmt::format("cannot make a random input of dynamic shape {}", shape.ToString()));
  }
  // Refuse before allocating: an element count that overflows, or more than 64 GiB, is not a
  // tensor this machine can hold.
  constexpr int64_t kMaxBytes = int64_t{64} << 30;
  int64_t elements = 1;
  for (int64_t d : shape.dimensions()) {
    if (d != 0 && elements > kMaxBytes / d) {
      return Error(fmt::format("a random input of shape {} would not fit in memory",
                               shape.ToString(false)));
    }
    elements *= d;
  }
  if (elements * ByteWidth(type) > kMaxBytes) {
    return Error(fmt::format("a random input of shape {} would not fit in memory",
                             shape.ToString(false)));
  }
  Literal lit(shape);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> signed_int(-8, 7);
  std::uniform_int_distribution<int64_t> unsigned_int(0, 15);
  for (int64_t i = 0; i < lit.element_count(); ++i) {
    if (type == PrimitiveType::PRED) {
      lit.data<bool>()[i] = (rng() & 1) != 0;
    } else if (IsSignedIntegralType(type)) {
      lit.SetFromInt64(i, signed_int(rng));
    } else if (IsUnsignedIntegralType(type)) {
      lit.SetFromInt64(i, unsigned_int(rng));
    } else if (IsComplexType(type)) {
      double re = real(rng);
      lit.SetFromComplex(i, {re, real(rng)});
    } else {
      lit.SetFromDouble(i, real(rng));
    }
  }
  return lit;
}

}  // namespace xlens

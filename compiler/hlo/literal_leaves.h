// The array leaves of a literal, in the order collectives move them: a tuple's elements
// depth-first (the order of the CPU runtime's FramePlan::LeafSlots and of a transport's message).
#pragma once

#include <cstdint>

#include "compiler/hlo/literal.h"

namespace xlens {

// Calls fn on every array leaf of `literal` (a Literal or a const Literal), depth-first.
template <typename L, typename Fn>
void ForEachArrayLeaf(L& literal, Fn&& fn) {
  if (literal.shape().IsTuple()) {
    for (int64_t i = 0; i < literal.tuple_size(); ++i) ForEachArrayLeaf(literal.tuple_element(i), fn);
    return;
  }
  if (literal.shape().IsArray()) fn(literal);
}

}  // namespace xlens

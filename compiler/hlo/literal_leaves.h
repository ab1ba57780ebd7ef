// The array leaves of a literal, in the order collectives move them: a tuple's elements
// depth-first (the order of the CPU runtime's FramePlan::LeafSlots and of a transport's message).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

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

// Fills the array leaves of `value`, in ForEachArrayLeaf's order, from the front of `bytes`,
// which it consumes: a transport's message read back. False when `bytes` holds too few.
inline bool ReadArrayLeaves(std::string_view& bytes, Literal& value) {
  bool enough = true;
  ForEachArrayLeaf(value, [&](Literal& leaf) {
    if (!enough || bytes.size() < static_cast<size_t>(leaf.size_bytes())) {
      enough = false;
      return;
    }
    std::memcpy(leaf.untyped_data(), bytes.data(), leaf.size_bytes());
    bytes.remove_prefix(leaf.size_bytes());
  });
  return enough;
}

}  // namespace xlens

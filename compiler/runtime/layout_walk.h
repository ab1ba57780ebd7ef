// Walking an array in the order of its logical, row-major index while reading it in its own
// layout: the library thunks (fft, cholesky) gather their operands into row-major working
// buffers and scatter results back this way, so that they accept any layout that layout
// assignment leaves them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "compiler/codegen/ir_array.h"

namespace xlens::runtime {

// An array's dimensions and, per dimension, its step in elements in the buffer.
struct StridedArray {
  explicit StridedArray(const Shape& shape)
      : dimensions(shape.dimensions()), strides(codegen::LayoutStrides(shape)),
        index(shape.rank(), 0) {}
  std::vector<int64_t> dimensions, strides;
  // The walk's position; kept here so that a walk allocates nothing.
  std::vector<int64_t> index;
};

// Calls fn(offset) with the buffer offset (in elements) of each element, in row-major order.
template <typename Fn>
void ForEachOffset(StridedArray& array, Fn&& fn) {
  int64_t count = 1;
  for (int64_t d : array.dimensions) count *= d;
  if (count == 0) return;
  const int64_t rank = static_cast<int64_t>(array.dimensions.size());
  std::fill(array.index.begin(), array.index.end(), 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    fn(offset);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++array.index[d] < array.dimensions[d]) {
        offset += array.strides[d];
        break;
      }
      offset -= (array.dimensions[d] - 1) * array.strides[d];
      array.index[d] = 0;
    }
  }
}

}  // namespace xlens::runtime

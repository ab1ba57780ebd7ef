// The one data-movement primitive the array kernels share: copy a strided view of one tensor
// into a strided view of another. Transpose, Slice, StridedSlice, ReverseV2 (negative strides),
// BroadcastTo and Tile (zero strides), Concat, Split, Pack, Unpack and Pad are each a view
// computation plus one call. Adjacent dimensions that are contiguous in both views are merged,
// so a copy whose innermost run is contiguous on both sides is a memcpy per run; elements are
// moved by byte size (never by DataType), strings and resource handles by their vectors.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compiler/graph/tensor.h"

namespace xlens::graph {

// Row-major strides (in elements) of a tensor of `dims`.
std::vector<int64_t> RowMajorStrides(std::span<const int64_t> dims);

// For every index i of `dims`: dst[dst_offset + sum(i*dst_strides)] =
// src[src_offset + sum(i*src_strides)]. Strides are in elements and may be zero or negative;
// the caller guarantees every index is in range and that `dst` is not shared with another
// tensor. `src` and `dst` have the same dtype.
void StridedCopy(const Tensor& src, int64_t src_offset, std::span<const int64_t> src_strides,
                 Tensor& dst, int64_t dst_offset, std::span<const int64_t> dst_strides,
                 std::span<const int64_t> dims);

// Copies `src` whole into the box of `dst` starting at `dst_start` (same rank): Concat, Pad.
void CopyIntoBox(const Tensor& src, Tensor& dst, std::span<const int64_t> dst_start);
// Copies the box of `src` at `src_start` with `dst`'s dims into `dst`: Slice, Split.
void CopyFromBox(const Tensor& src, std::span<const int64_t> src_start, Tensor& dst);

}  // namespace xlens::graph

#include "compiler/graph/ops/strided_slice.h"

#include <algorithm>
#include <array>
#include <string>

namespace xlens::graph {
namespace {
constexpr int64_t kShrinkAxis = -1;
constexpr int64_t kNewAxis = -2;
}  // namespace

StatusOr<StridedSliceSpec> ValidateStridedSlice(const PartialShape& input,
                                                const std::vector<int64_t>& begin,
                                                const std::vector<int64_t>& end,
                                                const std::vector<int64_t>& strides,
                                                const StridedSliceMasks& masks) {
  if (begin.size() != end.size() || begin.size() != strides.size()) {
    return Status::Error("Expected begin, end, and strides to be 1D equal size tensors, but got "
                         "shapes [" + std::to_string(begin.size()) + "], [" +
                         std::to_string(end.size()) + "], and [" +
                         std::to_string(strides.size()) + "] instead.");
  }
  if (masks.ellipsis_mask & (masks.ellipsis_mask - 1)) {
    return Status::Error("Multiple ellipses in slice spec not allowed");
  }
  if (begin.size() > 63) return Status::Error("slice spec has more than 63 dimensions");
  // The sparse spec, with an implicit ellipsis at the end when there is none.
  int sparse_dims = static_cast<int>(begin.size());
  int64_t ellipsis_mask = masks.ellipsis_mask;
  int num_add_axis_after_ellipsis = 0;
  bool ellipsis_seen = false;
  for (int i = 0; i < sparse_dims; ++i) {
    if (ellipsis_seen && ((int64_t{1} << i) & masks.new_axis_mask)) ++num_add_axis_after_ellipsis;
    if ((int64_t{1} << i) & ellipsis_mask) ellipsis_seen = true;
  }
  if (!ellipsis_seen) {
    ellipsis_mask |= int64_t{1} << sparse_dims;
    ++sparse_dims;
  }

  // Sparse to dense.
  const int dense_dims = static_cast<int>(input.rank());
  StridedSliceSpec spec;
  spec.begin.assign(dense_dims, 0);
  spec.end.assign(dense_dims, 0);
  spec.strides.assign(dense_dims, 1);
  int64_t begin_mask = 0, end_mask = 0, shrink_mask = 0;
  std::vector<int64_t> gather;  // final dimension -> processing dimension, or kNewAxis/kShrink
  int full_index = 0;
  for (int i = 0; i < sparse_dims; ++i) {
    const int64_t bit = int64_t{1} << i;
    if (bit & ellipsis_mask) {
      const int next_index = std::min(dense_dims - (sparse_dims - i) + 1 +
                                          num_add_axis_after_ellipsis,
                                      dense_dims);
      for (; full_index < next_index; ++full_index) {
        spec.begin[full_index] = spec.end[full_index] = 0;
        spec.strides[full_index] = 1;
        begin_mask |= int64_t{1} << full_index;
        end_mask |= int64_t{1} << full_index;
        gather.push_back(full_index);
      }
    } else if (bit & masks.new_axis_mask) {
      gather.push_back(kNewAxis);
    } else {
      if (full_index == dense_dims) {
        return Status::Error("Index out of range using input dim " + std::to_string(full_index) +
                             "; input has only " + std::to_string(dense_dims) + " dims");
      }
      spec.begin[full_index] = begin[i];
      spec.end[full_index] = end[i];
      spec.strides[full_index] = strides[i];
      if (masks.begin_mask & bit) begin_mask |= int64_t{1} << full_index;
      if (masks.end_mask & bit) end_mask |= int64_t{1} << full_index;
      if (masks.shrink_axis_mask & bit) {
        gather.push_back(kShrinkAxis);
        shrink_mask |= int64_t{1} << full_index;
      } else {
        gather.push_back(full_index);
      }
      ++full_index;
    }
  }

  // Canonicalise each dense dimension and compute the processing shape.
  std::vector<int64_t> processing;
  for (int i = 0; i < dense_dims; ++i) {
    int64_t& begin_i = spec.begin[i];
    int64_t& end_i = spec.end[i];
    const int64_t stride_i = spec.strides[i];
    const int64_t dim_i = input.dim(i);
    if (stride_i == 0) {
      return Status::Error("strides[" + std::to_string(i) + "] must be non-zero");
    }
    const bool shrink_i = shrink_mask & (int64_t{1} << i);
    const std::array<bool, 2> masked = {(begin_mask & (int64_t{1} << i)) != 0,
                                        (end_mask & (int64_t{1} << i)) != 0};
    if (dim_i == PartialShape::kUnknownDim) {
      processing.push_back(shrink_i ? 1 : PartialShape::kUnknownDim);
      continue;
    }
    const std::array<int64_t, 2> valid_range = {stride_i > 0 ? 0 : -1,
                                                stride_i > 0 ? dim_i : dim_i - 1};
    auto canonical = [&](int64_t x, int c) {
      if (masked[c]) return stride_i > 0 ? valid_range[c] : valid_range[(c + 1) & 1];
      const int64_t x_fwd = x < 0 ? dim_i + x : x;
      return x_fwd < valid_range[0] ? valid_range[0]
                                    : (x_fwd > valid_range[1] ? valid_range[1] : x_fwd);
    };
    if (shrink_i && stride_i <= 0) {
      return Status::Error("only stride 1 allowed on non-range indexing.");
    }
    if (shrink_i) {
      const int64_t x_fwd = begin_i < 0 ? dim_i + begin_i : begin_i;
      if (x_fwd < 0 || x_fwd >= dim_i) {
        return Status::Error("slice index " + std::to_string(begin_i) + " of dimension " +
                             std::to_string(i) + " out of bounds.");
      }
      begin_i = x_fwd;
      end_i = begin_i + 1;
    } else {
      begin_i = canonical(begin_i, 0);
      end_i = canonical(end_i, 1);
    }
    const int64_t interval = end_i - begin_i;
    int64_t size_i;
    if (interval == 0 || ((interval < 0) != (stride_i < 0))) {
      size_i = 0;
    } else {
      size_i = interval / stride_i + (interval % stride_i != 0 ? 1 : 0);
    }
    processing.push_back(size_i);
  }
  std::vector<int64_t> final_dims;
  for (int64_t g : gather) {
    if (g >= 0) {
      final_dims.push_back(processing[g]);
    } else if (g == kNewAxis) {
      final_dims.push_back(1);
    }
  }
  spec.processing_shape = PartialShape(std::move(processing));
  spec.final_shape = PartialShape(std::move(final_dims));
  return spec;
}

}  // namespace xlens::graph

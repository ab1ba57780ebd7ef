// TensorFlow's StridedSlice index arithmetic (ValidateStridedSliceOp): turns the sparse spec
// (begin, end, strides and the five masks, with an ellipsis and new axes) into one dense
// begin/end/stride per input dimension, the processing shape (one entry per input dimension)
// and the final shape (new axes added, shrunk axes removed). The shape function, the CPU kernel
// and the XLA lowering all call it, so they agree with each other and with TensorFlow.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/graph/partial_shape.h"
#include "compiler/support/status.h"

namespace xlens::graph {

struct StridedSliceMasks {
  int64_t begin_mask = 0, end_mask = 0, ellipsis_mask = 0, new_axis_mask = 0,
          shrink_axis_mask = 0;
};

struct StridedSliceSpec {
  // Per input dimension (valid where the input dimension is known).
  std::vector<int64_t> begin, end, strides;
  // Per input dimension; -1 where unknown.
  PartialShape processing_shape;
  PartialShape final_shape;
};

// `begin`, `end`, `strides` have one entry per sparse dimension; `input` may have unknown
// dimensions (their entries are -1 in the shapes) but must have a known rank. Errors carry
// TensorFlow's messages, without the node (the caller adds it).
StatusOr<StridedSliceSpec> ValidateStridedSlice(const PartialShape& input,
                                                const std::vector<int64_t>& begin,
                                                const std::vector<int64_t>& end,
                                                const std::vector<int64_t>& strides,
                                                const StridedSliceMasks& masks);

}  // namespace xlens::graph

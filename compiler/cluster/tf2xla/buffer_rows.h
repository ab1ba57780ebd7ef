// The buffers behind TensorLists, TensorArrays and stacks (tensor_list_ops.cc,
// tensor_array_ops.cc, stack_ops.cc): every element along a new leading dimension,
// [size, element...], read and written one row at a run-time index by dynamic-slice and
// dynamic-update-slice, as tf2xla reads and writes its lists, arrays and stacks.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

// [size, element...]: the shape of a buffer of `size` elements of shape `element`.
std::vector<int64_t> BufferDims(int64_t size, const std::vector<int64_t>& element);

// The start indices of a dynamic slice of a rank-`rank` buffer at `row` (an integer scalar or
// one-element vector, made an s32 scalar), 0 in every other dimension.
StatusOr<std::vector<HloInstruction*>> BufferRowStarts(XlaOpKernelContext& ctx,
                                                       HloInstruction* row, int64_t rank);

// buffer[row], of the element's shape (without the leading dimension).
StatusOr<HloInstruction*> ReadBufferRow(XlaOpKernelContext& ctx, HloInstruction* buffer,
                                        HloInstruction* row);

// The buffer with `element` (of the element's shape) written at `row`.
StatusOr<HloInstruction*> WriteBufferRow(XlaOpKernelContext& ctx, HloInstruction* buffer,
                                         HloInstruction* row, HloInstruction* element);

}  // namespace xlens::cluster

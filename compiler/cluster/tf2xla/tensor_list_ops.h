// What the functional While lowering needs to know about compiled TensorLists
// (tensor_list_ops.cc): lists not yet initialized, and lists every element of which is one
// compile-time constant.
#pragma once

#include "compiler/cluster/tf2xla/hlo_builder.h"
#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/graph/tensor.h"

namespace xlens::cluster {

// A list whose element shape is not known yet (an EmptyTensorList or TensorListReserve with a
// partial element shape): as tf2xla's BuildUninitializedTensorList, an s32[size] of zeros, which
// the first write (PushBack, SetItem) replaces by the (buffer, push_index) tuple.
bool IsUninitializedTensorList(const HloInstruction* list);

// The initial value of a loop variable that enters a While uninitialized and leaves the first
// compilation of its body as a list of `list_shape` (the (buffer, push_index) tuple): zeros of
// the buffer's shape, nothing pushed yet (tf2xla's while_op.cc, second pass).
StatusOr<HloInstruction*> InitialListOfShape(HloBuilder& builder, const Shape& list_shape);

// Lists every pushed element of which is the compile-time constant `element` (accumulators of
// TensorListElementShape/TensorListLength in a forward loop) carry it on their XlaExpression
// (uniform_list_element): popping one gives the constant, so a gradient loop's TensorListReserve
// of a popped size and shape is known at compile time, as tf2xla resolves compile-time constant
// inputs. A list nothing has been pushed onto yet (an EmptyTensorList, an uninitialized list) is
// fresh: the first constant pushed makes it uniform.
bool IsFreshList(const XlaExpression& list);
// Whether two constants are the same tensor (type, shape, bytes).
bool SameConstant(const graph::Tensor& a, const graph::Tensor& b);

}  // namespace xlens::cluster

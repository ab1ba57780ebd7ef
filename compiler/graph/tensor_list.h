// TensorFlow's TensorList: the value a DT_VARIANT scalar holds between the list ops
// (list_ops.cc). A list knows its element dtype and a partial element shape; its elements are
// tensors, or unset (a TensorListReserve slot no one wrote yet, read back as zeros of the
// element shape, as TensorFlow does). The list is shared between the tensors that hold it: a
// kernel that changes it takes it over when its input is the only holder and copies it
// otherwise, so a loop that writes one element per iteration does O(1) work per write.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/partial_shape.h"
#include "compiler/graph/tensor.h"
#include "compiler/support/status.h"

namespace xlens::graph {

class TensorList : public VariantValue {
 public:
  static constexpr const char* kTypeName = "tensorflow::TensorList";

  std::vector<Tensor> tensors;  // an element not IsInitialized() is unset
  DataType element_dtype = DT_INVALID;
  PartialShape element_shape;   // unknown rank when nothing is known
  int64_t max_num_elements = -1;  // -1: unbounded

  std::string TypeName() const override { return kTypeName; }
  // "TensorList<float>[3 of [2,?]]".
  std::string DebugString() const override;
  std::shared_ptr<VariantValue> Clone() const override;
  bool Identical(const VariantValue& other) const override;
};

// A scalar DT_VARIANT tensor holding `list`.
Tensor ListTensor(std::shared_ptr<TensorList> list);

// The list input i of a kernel holds; an error naming the node when it holds none.
StatusOr<const TensorList*> InputList(const OpKernelContext& c, int i);
// The list of input i, to change and then return as output `output`: the input's own list when
// nothing else holds it, else a copy (its elements still share their buffers).
StatusOr<TensorList*> ForwardInputListToOutput(OpKernelContext& c, int input, int output);

// A shape tensor (int32/int64; a scalar -1 means unknown rank, -1 entries unknown dimensions)
// as a PartialShape, TensorFlow's TensorShapeFromTensor.
StatusOr<PartialShape> PartialShapeFromTensor(const Tensor& t);
// A PartialShape as a shape tensor of `dtype` (unknown rank: scalar -1).
Tensor PartialShapeToTensor(const PartialShape& shape, DataType dtype);

// Checks that `t` may be an element of `list`: its dtype and a shape compatible with the
// list's element shape (TensorFlow's wording where it has one).
Status CheckElement(const OpKernelContext& c, const TensorList& list, const Tensor& t);

// Element i of `list`, or zeros of `shape` merged with the list's element shape when it is unset
// (an error naming the node when that shape is not fully defined).
StatusOr<Tensor> ListElementOrZeros(const OpKernelContext& c, const TensorList& list, int64_t i,
                                    const PartialShape& shape);

// A list of the same size and element type whose set elements are zeros of their shape
// (ZerosLike of a list, what the gradients start a list's gradient from).
std::shared_ptr<TensorList> ZerosLikeList(const TensorList& list);
// The element-wise sum of two lists of the same size (AddN of lists): an unset element of one
// takes the other's.
StatusOr<std::shared_ptr<TensorList>> AddLists(const TensorList& a, const TensorList& b);

}  // namespace xlens::graph

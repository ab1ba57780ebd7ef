// Small helpers the op families share: reading attrs and index inputs in a kernel or shape
// function, building int tensors of an attr-chosen type, filling and element-wise copies that
// work for every DataType.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/shape_inference.h"
#include "compiler/graph/tensor.h"

namespace xlens::graph {

int64_t NumElements(const std::vector<int64_t>& dims);

// A tensor of `type` (an integer type) holding `values` with `dims`.
Tensor IntTensor(DataType type, const std::vector<int64_t>& values, std::vector<int64_t> dims);

// A scalar of a numeric `type` holding `value` (bool: value != 0).
Tensor NumericScalar(DataType type, double value);

// Sets every element of `dst` (not shared) to the one element of `scalar` (same dtype).
void FillWithScalar(Tensor& dst, const Tensor& scalar);

// Copies `n` consecutive elements: dst[dst_pos..] = src[src_pos..] (same dtype).
void CopyElements(const Tensor& src, int64_t src_pos, Tensor& dst, int64_t dst_pos, int64_t n);

// Reads an int attr in a kernel or shape function (errors name the node).
inline StatusOr<int64_t> IntAttr(const OpKernelContext& c, const std::string& name) {
  return GetIntAttr(c.attrs(), name, c.name());
}
inline StatusOr<int64_t> IntAttr(const InferenceContext& c, const std::string& name) {
  return GetIntAttr(c.attrs(), name, c.node_name());
}

// An axis in [-rank, rank) made non-negative; error (TensorFlow's wording) otherwise.
StatusOr<int64_t> CanonicalAxis(int64_t axis, int64_t rank, const std::string& what);

// Element i as a bool-like truth value (non-zero; for strings: non-empty).
bool ElementIsTrue(const Tensor& t, int64_t i);

}  // namespace xlens::graph

// The array op family is registered from two files: array_ops.cc (constants, identities,
// shapes, reshapes and the ops that compute their elements) and array_copy_ops.cc (the ops
// that move elements: slicing, gathering, concatenation, transposition, tiling, padding).
#pragma once

#include <cstdint>

#include "compiler/support/status.h"

namespace xlens::graph {

class OpRegistry;
class OpKernelContext;
class Tensor;
void RegisterArrayCopyOps(OpRegistry& registry);

// Sets output 0 of `c` to GatherV2(params, indices, axis, batch_dims); ResourceGather shares it.
Status GatherInto(OpKernelContext& c, const Tensor& params, const Tensor& indices, int64_t axis,
                  int64_t batch_dims);

}  // namespace xlens::graph

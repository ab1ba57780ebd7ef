// Matrix products too small for a library call: the LSTM cell's [2,8]x[8,64], the attention
// heads' [16,8]x[8,16]. A oneDNN call costs about 1.5 us before it multiplies anything (its
// memory objects, argument map and stream), which is most of a product of a few thousand
// multiply-adds; these loops start at once. AVX2 with FMA where the CPU has it (chosen at run
// time: the project is compiled for generic x86-64), plain loops otherwise.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/passes/onednn_rewriter.h"
#include "compiler/runtime/narrow_product.h"

namespace xlens::runtime {

struct SmallProductShape {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  // The lhs is stored [batch, k, m] (else [batch, m, k]); the rhs [batch, n, k] (else
  // [batch, k, n]). The output is always [batch, m, n], row-major, and must not overlap either.
  bool lhs_transposed = false, rhs_transposed = false;
};

// out[b] = lhs[b] x rhs[b] for every batch element, on the calling thread.
void SmallProduct(const SmallProductShape& shape, const float* lhs, const float* rhs, float* out);

// Applies the post-ops `ops` in order, as oneDNN would, over the output [rows, n] of a product
// SmallProduct computed; `addends` holds the tensors the kAdd ones add, in order.
void ApplySmallProductPostOps(const std::vector<OneDnnPostOp>& ops, const std::vector<const float*>& addends,
                              int64_t rows, int64_t n, float* out);

// The post-ops `ops` as NarrowProductTransposedLhs applies them in its store, where they are a
// linear map, an addend of the output's shape, or the one then the other (a weight update): false
// (and *update untouched) for any other list. `addends` as for ApplySmallProductPostOps, the
// output's first row's element first.
bool NarrowOutputUpdateOf(const std::vector<OneDnnPostOp>& ops, const std::vector<const float*>& addends,
                          NarrowOutputUpdate* update);

// "avx2" or "scalar": the loops SmallProduct runs on this CPU.
const char* SmallProductIsa();

}  // namespace xlens::runtime

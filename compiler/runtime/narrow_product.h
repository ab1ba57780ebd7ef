// Matrix products whose output rows fit in one vector (n <= 16: a classifier's logits over its
// features, [100,784]x[784,10] in the MNIST step). oneDNN's kernels keep a row of the output in
// a vector and broadcast each lhs element against a row of the rhs, so 10 columns use 10 of the
// 16 lanes of every multiply-add (the MNIST product at 72 GFLOP/s on one core, 61% of its FMA
// peak). These loops run along k instead: each output is the dot product of an lhs row and a
// column of the rhs, 16 products per multiply-add, the column read from the rhs packed as its
// transpose. AVX-512 only (chosen at run time; the project is compiled for generic x86-64).
#pragma once

#include <cstdint>

namespace xlens::runtime {

// The widest output row the loops take.
inline constexpr int64_t kNarrowProductMaxColumns = 16;

// Whether this CPU runs the loops (AVX-512F).
bool NarrowProductAvailable();

// The row stride for a packed rhs of k columns: whole cache lines, so that in a buffer aligned to
// kNarrowPackedAlignment every row of it starts a line and no vector load splits two. A load
// that splits costs two: [100,400]x[400,10] on one core took 4.4 us from an aligned pack and 6.2
// from one 16 bytes off a line (malloc's alignment), every load of the rhs split; [32,1568]x
// [1568,10] 5.8 against 9.1-9.6 us.
inline constexpr int64_t kNarrowPackedAlignment = 64;
inline constexpr int64_t NarrowPackedStride(int64_t k) { return (k + 15) / 16 * 16; }

// packed[j * ldb + p] = rhs[p * n + j]: the rhs [k, n] as its transpose, its rows ldb >= k apart,
// for NarrowProduct. Aborts unless 1 <= n <= kNarrowProductMaxColumns.
void PackNarrowRhs(const float* rhs, int64_t k, int64_t n, float* packed, int64_t ldb);

// out[m, n] (rows n apart) = lhs[m, k] (rows `lda` >= k apart) x the rhs, given as its transpose
// [n, k] with rows `ldb` >= k apart (PackNarrowRhs, or an rhs stored [n, k]). An lda past k reads
// a stretch of k out of longer rows: a part of a product split in k. Aborts unless 1 <= n <=
// kNarrowProductMaxColumns; without NarrowProductAvailable() NarrowProductScalar computes it.
void NarrowProduct(int64_t m, int64_t k, int64_t n, const float* lhs, int64_t lda, const float* rhs_transposed,
                   int64_t ldb, float* out);

// The same product one dot product at a time, in order along k: NarrowProduct on a CPU without
// the loops (no AVX-512, or off x86).
void NarrowProductScalar(int64_t m, int64_t k, int64_t n, const float* lhs, int64_t lda, const float* rhs_transposed,
                         int64_t ldb, float* out);

// What NarrowProductTransposedLhs does to each output in registers before storing it, in this
// order: alpha x + beta in one rounding (a linear post-op, as ApplySmallProductPostOps computes
// it), then + addend[i, j] (its rows n apart, as the output's). A training step's weight update w
// - lr x^T g, which a second pass over the output and w took after the product otherwise.
struct NarrowOutputUpdate {
  bool linear = false;
  float alpha = 1, beta = -0.0f;
  const float* addend = nullptr;
};

// out[m, n] (rows n apart) = lhs^T x rhs, the lhs stored [k, m] (its rows `lda` apart: m of its
// columns) and the rhs [k, n]: a layer's weight gradient x^T g, where x [k, m] is its input and g
// [k, n] the gradient of its n outputs. Here the vector runs along the output's column instead
// of its row: per k, 16 elements of an lhs row times each rhs element of the row (n multiply-adds
// for 16 rows x n columns, every lane used), the 16 rows' accumulators transposed into rows at
// the end. Aborts unless 1 <= n <= kNarrowProductMaxColumns; without NarrowProductAvailable()
// NarrowProductTransposedLhsScalar computes it. `update` applies to each output as it is stored.
void NarrowProductTransposedLhs(int64_t m, int64_t k, int64_t n, const float* lhs, int64_t lda, const float* rhs,
                                float* out, const NarrowOutputUpdate& update = {});

// The same one dot product at a time, in order along k.
void NarrowProductTransposedLhsScalar(int64_t m, int64_t k, int64_t n, const float* lhs, int64_t lda,
                                      const float* rhs, float* out, const NarrowOutputUpdate& update = {});

// out[m, n] (rows `ldc` apart) = lhs [m, k] x rhs^T, the rhs stored [n, k], for a short k (at
// most kNarrowProductMaxColumns): the gradient g w^T that flows back through a classifier's
// logits (g [m, k] their gradient, w [n, k] its weights read transposed). 16 columns of the
// output a vector: 16 rows of the rhs transposed in registers into k vectors, then k
// multiply-adds per lhs row. Aborts unless 1 <= k <= kNarrowProductMaxColumns; without
// NarrowProductAvailable() ShortKProductScalar computes it.
void ShortKProduct(int64_t m, int64_t k, int64_t n, const float* lhs, const float* rhs, float* out, int64_t ldc);

// The same one dot product at a time, in order along k.
void ShortKProductScalar(int64_t m, int64_t k, int64_t n, const float* lhs, const float* rhs, float* out,
                         int64_t ldc);

}  // namespace xlens::runtime

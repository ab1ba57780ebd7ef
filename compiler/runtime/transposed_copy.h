// A matrix copied as its transpose: the block of a transposed lhs that one part of a oneDNN
// product takes, packed into the row-major rows its brgemm kernel reads (onednn_thunks.cc). A
// weight gradient x^T g split in blocks of rows packs x's columns on every call; oneDNN's own
// reorder did it at about one element a cycle (the MLP step's [392,128] block of x [128,784]:
// 17.8 us on one core, against 222 us for the block's product). These loops transpose 16x16
// tiles in registers: 5.2 us. A narrow product's rhs is packed by them too (PackNarrowRhs: the
// MNIST step's [784,10] is one band of 10 columns, loaded masked). AVX-512 where the CPU has it
// (chosen at run time: the project is compiled for generic x86-64), a plain loop otherwise.
#pragma once

#include <cstdint>

namespace xlens::runtime {

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols: the [rows, cols] matrix at src
// (rows lds apart) written as its transpose [cols, rows] at dst (rows ldd apart). The two must
// not overlap.
void TransposedCopy(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd);

// The same one element at a time: TransposedCopy on a CPU without AVX-512.
void TransposedCopyScalar(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd);

}  // namespace xlens::runtime

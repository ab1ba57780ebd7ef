// The attributes of fft, topk, cholesky and the batch-norm ops, read from the raw attributes the
// parser keeps for them, with XLA's defaults. Shape inference, the verifier and the evaluator
// read them through these functions, so all three accept and refuse the same text.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens {

enum class FftType { kFft, kIfft, kRfft, kIrfft };
std::string_view FftTypeName(FftType type);

// fft_type=FFT|IFFT|RFFT|IRFFT fft_length={...}: the transform runs over the last
// fft_length.size() dimensions (1 to 3 of them).
struct FftAttributes {
  FftType type = FftType::kFft;
  std::vector<int64_t> lengths;
};
StatusOr<FftAttributes> GetFftAttributes(const HloInstruction& instruction);

// k=N largest=true|false (XLA's default: largest).
struct TopKAttributes {
  int64_t k = 0;
  bool largest = true;
};
StatusOr<TopKAttributes> GetTopKAttributes(const HloInstruction& instruction);

// lower=true|false (XLA's default: upper).
StatusOr<bool> GetCholeskyLower(const HloInstruction& instruction);

// left_side, lower, unit_diagonal (true|false, XLA's default false) and
// transpose_a=NO_TRANSPOSE|TRANSPOSE|ADJOINT (default NO_TRANSPOSE) of triangular-solve.
enum class TriangularSolveTranspose { kNo, kTranspose, kAdjoint };
struct TriangularSolveAttributes {
  bool left_side = false;
  bool lower = false;
  bool unit_diagonal = false;
  TriangularSolveTranspose transpose = TriangularSolveTranspose::kNo;
};
StatusOr<TriangularSolveAttributes> GetTriangularSolveAttributes(const HloInstruction& instruction);

// epsilon=F feature_index=N, both required; epsilon is rounded to f32, as XLA holds it.
struct BatchNormAttributes {
  double epsilon = 0;
  int64_t feature_index = 0;
};
StatusOr<BatchNormAttributes> GetBatchNormAttributes(const HloInstruction& instruction);

}  // namespace xlens

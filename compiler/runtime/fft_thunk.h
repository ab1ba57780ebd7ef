// fft as XLA's CPU runtime runs it: a library call (Eigen's FFT, kissfft underneath), not a
// generated kernel. fft_type=FFT|IFFT|RFFT|IRFFT over the last len(fft_length) dimensions, one
// 1-D transform per dimension in turn; every leading dimension is a batch. IFFT and IRFFT are
// scaled by 1/N (N the product of fft_length), as XLA. RFFT (f32 -> c64, f64 -> c128) keeps the
// n/2+1 non-negative frequencies of the last dimension; IRFFT reads those n/2+1 and writes n,
// taking the spectrum as Hermitian (the imaginary parts of the zero and Nyquist bins are
// ignored, as by XLA's library).
#pragma once

#include <memory>
#include <string>

#include "compiler/hlo/instruction.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

class FftThunk : public Thunk {
 public:
  // Refuses, in one line, an fft whose types or lengths XLA's shape inference would refuse.
  static StatusOr<std::unique_ptr<FftThunk>> Create(std::string hlo_name, const HloInstruction& fft,
                                                    int64_t input_slot, int64_t output_slot);
  ~FftThunk() override;
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

  struct Impl;

 private:
  explicit FftThunk(std::string hlo_name);

  std::unique_ptr<Impl> impl_;
  std::string description_;  // "FFT {32} c64"
  int64_t input_slot_ = -1, output_slot_ = -1;
};

}  // namespace xlens::runtime

// The floating-point environment that compiled code runs under. XLA's CPU runtime runs every
// computation with subnormal numbers flushed to zero (tsl::port::ScopedFlushDenormal: FTZ for
// results, DAZ for inputs), and so do we: the numbers then agree with XLA's, and a subnormal
// operand no longer costs a microcode assist of about a hundred cycles per operation (a softmax
// whose smallest probabilities underflow ran its gradient 10x slower without it).
#pragma once

#include <cstdint>

namespace xlens {

// The thread's control word (MXCSR on x86; 0 where there is none to carry).
uint32_t GetFloatControl();
// Installs a control word read by GetFloatControl, on this thread.
void SetFloatControl(uint32_t control);

// Flushes subnormal inputs and results to zero on this thread until destroyed, then restores
// what was there.
class ScopedFlushDenormal {
 public:
  ScopedFlushDenormal();
  ~ScopedFlushDenormal();
  ScopedFlushDenormal(const ScopedFlushDenormal&) = delete;
  ScopedFlushDenormal& operator=(const ScopedFlushDenormal&) = delete;

 private:
  uint32_t saved_;
};

}  // namespace xlens

// cholesky as XLA's CPU backend computes it, through Eigen's LLT instead of the loop of dots that
// XLA's CholeskyExpander builds: for each matrix of the batch (the last two dimensions), with
// lower=true, L with L * L^H = A read from A's lower triangle; with lower=false, U with
// U^H * U = A read from the upper one. The other triangle of the result is zero. What XLA returns
// for a matrix that is not positive definite is kept too: a negative (or NaN) pivot makes that
// matrix all NaN (the others of the batch are unaffected); a zero pivot in the last column
// leaves the factor with NaN (0/0) at that one diagonal element, or 0 when XLA's blocked
// algorithm gives the last column a block of its own (n % 128 == 1).
#pragma once

#include <memory>
#include <string>

#include "compiler/hlo/instruction.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

class CholeskyThunk : public Thunk {
 public:
  // Refuses, in one line, a cholesky of a type or shape XLA would refuse.
  static StatusOr<std::unique_ptr<CholeskyThunk>> Create(std::string hlo_name,
                                                         const HloInstruction& cholesky,
                                                         int64_t input_slot, int64_t output_slot);
  ~CholeskyThunk() override;
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

  struct Impl;

 private:
  explicit CholeskyThunk(std::string hlo_name);

  std::unique_ptr<Impl> impl_;
  std::string description_;  // "lower, 4 x f64[3,3]"
  int64_t input_slot_ = -1, output_slot_ = -1;
};

}  // namespace xlens::runtime

// triangular-solve as a call of BLAS ?trsm, one call per matrix of the batch, as XLA's CPU
// runtime solves it with a library rather than generated code. Operands and the result may
// have any layout: each matrix is gathered into column-major scratch and scattered back.
#pragma once

#include <memory>
#include <string>

#include "compiler/hlo/instruction.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

class TriangularSolveThunk : public Thunk {
 public:
  // Refuses, in one line, a triangular-solve of a type or shape XLA would refuse.
  static StatusOr<std::unique_ptr<TriangularSolveThunk>> Create(std::string hlo_name,
                                                                const HloInstruction& solve,
                                                                int64_t a_slot, int64_t b_slot,
                                                                int64_t output_slot);
  ~TriangularSolveThunk() override;
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

  struct Impl;

 private:
  explicit TriangularSolveThunk(std::string hlo_name);

  std::unique_ptr<Impl> impl_;
  std::string description_;  // "left, lower, TRANSPOSE, 2 x f32[4,4] \ [4,3]"
  int64_t a_slot_ = -1, b_slot_ = -1, output_slot_ = -1;
};

}  // namespace xlens::runtime

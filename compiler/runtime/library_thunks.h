// Thunks that call library code instead of a generated kernel, as XLA's CPU runtime does: sort
// (std::stable_sort over each slice with a generated comparator) and dot (Eigen's matrix
// product, rows split over the thread pool).
#pragma once

#include "compiler/hlo/shape.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

class SortThunk : public Thunk {
 public:
  using Comparator = bool (*)(void**, void**);
  SortThunk(std::string hlo_name, Comparator comparator, int64_t dimension,
            std::vector<Shape> shapes, std::vector<int64_t> operand_slots,
            std::vector<int64_t> output_slots, std::vector<Shape> output_shapes);
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

 private:
  Comparator comparator_;
  int64_t dimension_;
  std::vector<Shape> shapes_, output_shapes_;
  std::vector<int64_t> operand_slots_, output_slots_;
  mutable std::vector<int64_t> permutation_;
};

// Whether `dot` (an unfused dot in the canonical form dot-decomposer makes, f32 or f64,
// row-major) runs through Eigen.
bool IsEigenDot(const HloInstruction& dot);

class EigenDotThunk : public Thunk {
 public:
  EigenDotThunk(std::string hlo_name, const HloInstruction& dot, int64_t lhs_slot,
                int64_t rhs_slot, int64_t output_slot);
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

 private:
  bool is_f64_ = false;
  int64_t batch_ = 1, m_ = 1, k_ = 1, n_ = 1;
  int64_t lhs_slot_, rhs_slot_, output_slot_;
};

}  // namespace xlens::runtime

// Thunks that call library code instead of a generated kernel, as XLA's CPU runtime does: sort
// (std::stable_sort over each slice with a generated comparator) and dot (Eigen's matrix
// product, rows split over the thread pool).
#pragma once

#include "compiler/hlo/attributes.h"
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
  // Fixed at construction so that a run allocates nothing.
  std::vector<std::vector<int64_t>> strides_, output_strides_;
  std::vector<int64_t> widths_;
  mutable std::vector<int64_t> permutation_, index_;
  mutable std::vector<void*> lhs_, rhs_;
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

// Whether `conv` (an unfused convolution in the canonical form conv-canonicalization makes,
// b01..f_01..io->b01..f, row-major, f32 or f64, one feature and batch group, no window reversal)
// runs as im2col + Eigen matrix products.
bool IsEigenConvolution(const HloInstruction& conv);

// The convolution as blocks of output rows (one row per batch element and output position):
// each block's input patches are gathered into a matrix [rows, window x input features] and
// multiplied by the kernel, seen as a matrix [window x input features, output features]. Each
// thread has its own patch buffer, allocated with the thunk.
class EigenConvolutionThunk : public Thunk {
 public:
  EigenConvolutionThunk(std::string hlo_name, const HloInstruction& conv, int64_t input_slot,
                        int64_t kernel_slot, int64_t output_slot, int threads);
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

 private:
  template <typename T>
  void Run(const T* input, const T* kernel, T* output, ThreadPool* pool) const;

  bool is_f64_ = false;
  int64_t batch_ = 0, in_features_ = 0, out_features_ = 0;
  std::vector<int64_t> in_spatial_, out_spatial_;
  std::vector<int64_t> in_strides_;  // elements per step of each spatial dimension, then batch
  std::vector<WindowDimension> window_;
  int64_t rows_ = 0, patch_width_ = 0, rows_per_block_ = 1;
  int64_t input_slot_, kernel_slot_, output_slot_;
  mutable std::vector<std::vector<double>> patches_;  // per thread; doubles fit either type
};

}  // namespace xlens::runtime

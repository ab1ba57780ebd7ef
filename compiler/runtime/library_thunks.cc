#include "compiler/runtime/library_thunks.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <Eigen/Core>
#include <fmt/format.h>

#include "compiler/codegen/ir_array.h"
#include "compiler/hlo/instruction.h"

namespace xlens::runtime {

SortThunk::SortThunk(std::string hlo_name, Comparator comparator, int64_t dimension,
                     std::vector<Shape> shapes, std::vector<int64_t> operand_slots,
                     std::vector<int64_t> output_slots, std::vector<Shape> output_shapes)
    : Thunk(std::move(hlo_name)), comparator_(comparator), dimension_(dimension),
      shapes_(std::move(shapes)), output_shapes_(std::move(output_shapes)),
      operand_slots_(std::move(operand_slots)), output_slots_(std::move(output_slots)) {
  permutation_.resize(shapes_[0].dimensions(dimension_));
  for (size_t i = 0; i < shapes_.size(); ++i) {
    strides_.push_back(codegen::LayoutStrides(shapes_[i]));
    output_strides_.push_back(codegen::LayoutStrides(output_shapes_[i]));
    widths_.push_back(ByteWidth(shapes_[i].element_type()));
  }
  lhs_.resize(shapes_.size());
  rhs_.resize(shapes_.size());
  index_.resize(shapes_[0].rank());
}

Status SortThunk::Execute(char** frame, ExecuteContext&) const {
  const Shape& shape = shapes_[0];
  const int64_t n = shape.dimensions(dimension_);
  const size_t count = shapes_.size();
  const auto& strides = strides_;
  const auto& out_strides = output_strides_;
  const auto& widths = widths_;
  auto& lhs = lhs_;
  auto& rhs = rhs_;
  // Every slice along the sort dimension: iterate the other dimensions.
  auto& index = index_;
  std::fill(index.begin(), index.end(), 0);
  const int64_t slices = shape.num_elements() / std::max<int64_t>(n, 1);
  if (n == 0) return OkStatus();
  for (int64_t s = 0; s < slices; ++s) {
    auto offset = [&](size_t i, const std::vector<std::vector<int64_t>>& st, int64_t pos) {
      int64_t o = 0;
      for (int64_t d = 0; d < shape.rank(); ++d) o += (d == dimension_ ? pos : index[d]) * st[i][d];
      return o;
    };
    std::iota(permutation_.begin(), permutation_.end(), 0);
    // Merge sort stays in bounds even for a comparator that is not a strict weak order.
    std::stable_sort(permutation_.begin(), permutation_.end(), [&](int64_t a, int64_t b) {
      for (size_t i = 0; i < count; ++i) {
        lhs[i] = frame[operand_slots_[i]] + offset(i, strides, a) * widths[i];
        rhs[i] = frame[operand_slots_[i]] + offset(i, strides, b) * widths[i];
      }
      return comparator_(lhs.data(), rhs.data());
    });
    for (size_t i = 0; i < count; ++i) {
      for (int64_t p = 0; p < n; ++p) {
        std::memcpy(frame[output_slots_[i]] + offset(i, out_strides, p) * widths[i],
                    frame[operand_slots_[i]] + offset(i, strides, permutation_[p]) * widths[i],
                    widths[i]);
      }
    }
    // Next slice: count over the dimensions other than the sort dimension, last fastest.
    for (int64_t d = shape.rank() - 1; d >= 0; --d) {
      if (d == dimension_) continue;
      if (++index[d] < shape.dimensions(d)) break;
      index[d] = 0;
    }
  }
  return OkStatus();
}

std::string SortThunk::ToString(int indent) const {
  return fmt::format("{:{}}sort {} (std::stable_sort, dimension {})\n", "", indent, hlo_name(),
                     dimension_);
}

namespace {

bool IsRowMajor(const Shape& s) {
  return !s.has_layout() || s.layout().minor_to_major == shape_util::DefaultMinorToMajor(s.rank());
}

}  // namespace

bool IsEigenDot(const HloInstruction& dot) {
  if (dot.opcode() != HloOpcode::kDot || !dot.dot_dimension_numbers) return false;
  const Shape& lhs = dot.operand(0)->shape();
  const Shape& rhs = dot.operand(1)->shape();
  const PrimitiveType t = dot.shape().element_type();
  if ((t != PrimitiveType::F32 && t != PrimitiveType::F64) || lhs.element_type() != t ||
      rhs.element_type() != t) {
    return false;
  }
  if (!IsRowMajor(lhs) || !IsRowMajor(rhs) || !IsRowMajor(dot.shape())) return false;
  const DotDimensionNumbers& dn = *dot.dot_dimension_numbers;
  const int64_t nb = static_cast<int64_t>(dn.lhs_batch_dimensions.size());
  for (int64_t i = 0; i < nb; ++i) {
    if (dn.lhs_batch_dimensions[i] != i || dn.rhs_batch_dimensions[i] != i) return false;
  }
  if (dn.lhs_contracting_dimensions != std::vector<int64_t>{lhs.rank() - 1}) return false;
  if (dn.rhs_contracting_dimensions != std::vector<int64_t>{nb}) return false;
  return lhs.rank() <= nb + 2 && rhs.rank() <= nb + 2 && lhs.rank() >= nb + 1 &&
         rhs.rank() >= nb + 1;
}

EigenDotThunk::EigenDotThunk(std::string hlo_name, const HloInstruction& dot, int64_t lhs_slot,
                             int64_t rhs_slot, int64_t output_slot)
    : Thunk(std::move(hlo_name)), lhs_slot_(lhs_slot), rhs_slot_(rhs_slot),
      output_slot_(output_slot) {
  const Shape& lhs = dot.operand(0)->shape();
  const Shape& rhs = dot.operand(1)->shape();
  const int64_t nb = static_cast<int64_t>(dot.dot_dimension_numbers->lhs_batch_dimensions.size());
  is_f64_ = dot.shape().element_type() == PrimitiveType::F64;
  for (int64_t i = 0; i < nb; ++i) batch_ *= lhs.dimensions(i);
  k_ = lhs.dimensions(lhs.rank() - 1);
  m_ = lhs.rank() == nb + 2 ? lhs.dimensions(nb) : 1;
  n_ = rhs.rank() == nb + 2 ? rhs.dimensions(nb + 1) : 1;
}

namespace {

template <typename T>
void EigenProduct(const T* lhs, const T* rhs, T* out, int64_t batch, int64_t m, int64_t k,
                  int64_t n, ThreadPool* pool) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  // Tasks are (batch, block of rows) so that a single big matrix still uses every thread.
  const int64_t row_block = std::max<int64_t>(16, m / (pool ? pool->parallelism() * 2 : 1));
  const int64_t blocks = (m + row_block - 1) / row_block;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / blocks, r0 = (t % blocks) * row_block;
      const int64_t rows = std::min(row_block, m - r0);
      Eigen::Map<const Matrix> a(lhs + (b * m + r0) * k, rows, k);
      Eigen::Map<const Matrix> w(rhs + b * k * n, k, n);
      Eigen::Map<Matrix> c(out + (b * m + r0) * n, rows, n);
      c.noalias() = a * w;
    }
  };
  const int64_t work = row_block * k * n;
  if (pool == nullptr) {
    run(0, batch * blocks);
  } else {
    pool->ParallelFor(batch * blocks, std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(1, work)), run);
  }
}

}  // namespace

Status EigenDotThunk::Execute(char** frame, ExecuteContext& context) const {
  if (m_ == 0 || n_ == 0 || batch_ == 0) return OkStatus();
  if (is_f64_) {
    EigenProduct(reinterpret_cast<const double*>(frame[lhs_slot_]),
                 reinterpret_cast<const double*>(frame[rhs_slot_]),
                 reinterpret_cast<double*>(frame[output_slot_]), batch_, m_, k_, n_, context.pool);
  } else {
    EigenProduct(reinterpret_cast<const float*>(frame[lhs_slot_]),
                 reinterpret_cast<const float*>(frame[rhs_slot_]),
                 reinterpret_cast<float*>(frame[output_slot_]), batch_, m_, k_, n_, context.pool);
  }
  return OkStatus();
}

std::string EigenDotThunk::ToString(int indent) const {
  return fmt::format("{:{}}library-call {} (Eigen matmul, batch {} [{}x{}] x [{}x{}])\n", "",
                     indent, hlo_name(), batch_, m_, k_, k_, n_);
}

bool IsEigenConvolution(const HloInstruction& conv) {
  if (conv.opcode() != HloOpcode::kConvolution || !conv.convolution_dimension_numbers || !conv.window) {
    return false;
  }
  const Shape& in = conv.operand(0)->shape();
  const Shape& kernel = conv.operand(1)->shape();
  const Shape& out = conv.shape();
  const PrimitiveType t = out.element_type();
  if ((t != PrimitiveType::F32 && t != PrimitiveType::F64) || in.element_type() != t ||
      kernel.element_type() != t) {
    return false;
  }
  if (!IsRowMajor(in) || !IsRowMajor(kernel) || !IsRowMajor(out)) return false;
  if (conv.feature_group_count() != 1 || conv.batch_group_count() != 1) return false;
  const ConvolutionDimensionNumbers& dn = *conv.convolution_dimension_numbers;
  const int64_t n = static_cast<int64_t>(dn.input_spatial_dimensions.size());
  if (in.rank() != n + 2 || kernel.rank() != n + 2 || out.rank() != n + 2) return false;
  if (static_cast<int64_t>(conv.window->dimensions.size()) != n || n > 8) return false;
  if (dn.input_batch_dimension != 0 || dn.input_feature_dimension != n + 1 ||
      dn.output_batch_dimension != 0 || dn.output_feature_dimension != n + 1 ||
      dn.kernel_input_feature_dimension != n || dn.kernel_output_feature_dimension != n + 1) {
    return false;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (dn.input_spatial_dimensions[i] != i + 1 || dn.output_spatial_dimensions[i] != i + 1 ||
        dn.kernel_spatial_dimensions[i] != i || conv.window->dimensions[i].window_reversal) {
      return false;
    }
  }
  return true;
}

EigenConvolutionThunk::EigenConvolutionThunk(std::string hlo_name, const HloInstruction& conv,
                                             int64_t input_slot, int64_t kernel_slot,
                                             int64_t output_slot, int threads)
    : Thunk(std::move(hlo_name)), input_slot_(input_slot), kernel_slot_(kernel_slot),
      output_slot_(output_slot) {
  const Shape& in = conv.operand(0)->shape();
  const Shape& out = conv.shape();
  const int64_t n = in.rank() - 2;
  is_f64_ = out.element_type() == PrimitiveType::F64;
  batch_ = in.dimensions(0);
  in_features_ = in.dimensions(n + 1);
  out_features_ = out.dimensions(n + 1);
  window_ = conv.window->dimensions;
  rows_ = batch_;
  patch_width_ = in_features_;
  for (int64_t i = 0; i < n; ++i) {
    in_spatial_.push_back(in.dimensions(i + 1));
    out_spatial_.push_back(out.dimensions(i + 1));
    rows_ *= out.dimensions(i + 1);
    patch_width_ *= window_[i].size;
  }
  // Blocks of rows whose patches take about 1 MiB: they stay in cache for the product.
  rows_per_block_ = std::clamp<int64_t>((int64_t{1} << 20) / 8 / std::max<int64_t>(1, patch_width_), 1,
                                        std::max<int64_t>(1, rows_));
  in_strides_.resize(n + 1);
  int64_t stride = in_features_;
  for (int64_t i = n - 1; i >= 0; --i) {
    in_strides_[i] = stride;
    stride *= in_spatial_[i];
  }
  in_strides_[n] = stride;  // one batch element
  patches_.resize(std::max(1, threads));
  for (auto& p : patches_) p.resize(static_cast<size_t>(rows_per_block_ * patch_width_));
}

template <typename T>
void EigenConvolutionThunk::Run(const T* input, const T* kernel, T* output, ThreadPool* pool) const {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t n = static_cast<int64_t>(in_spatial_.size());
  const int64_t blocks = (rows_ + rows_per_block_ - 1) / rows_per_block_;
  Eigen::Map<const Matrix> weights(kernel, patch_width_, out_features_);
  const std::vector<int64_t>& in_strides = in_strides_;
  auto run_blocks = [&](int64_t worker, int64_t workers) {
    T* patch = reinterpret_cast<T*>(patches_[worker].data());
    // At most 8 spatial dimensions on the stack (the constructor refuses more).
    int64_t position[8], kernel_index[8];
    for (int64_t block = worker; block < blocks; block += workers) {
      const int64_t r0 = block * rows_per_block_;
      const int64_t rows = std::min(rows_per_block_, rows_ - r0);
      for (int64_t r = 0; r < rows; ++r) {
        // Row r0 + r: batch element and output position.
        int64_t rest = r0 + r;
        for (int64_t i = n - 1; i >= 0; --i) {
          position[i] = rest % out_spatial_[i];
          rest /= out_spatial_[i];
        }
        const T* base = input + rest * in_strides[n];
        T* row = patch + r * patch_width_;
        std::fill(kernel_index, kernel_index + n, 0);
        for (int64_t column = 0; column < patch_width_; column += in_features_) {
          int64_t offset = 0;
          bool inside = true;
          for (int64_t i = 0; i < n && inside; ++i) {
            const WindowDimension& w = window_[i];
            const int64_t dilated = position[i] * w.stride - w.padding_low + kernel_index[i] * w.window_dilation;
            if (dilated < 0 || dilated % w.base_dilation != 0) {
              inside = false;
              break;
            }
            const int64_t p = dilated / w.base_dilation;
            if (p >= in_spatial_[i]) inside = false;
            offset += p * in_strides[i];
          }
          if (inside) {
            std::memcpy(row + column, base + offset, in_features_ * sizeof(T));
          } else {
            std::fill(row + column, row + column + in_features_, T(0));
          }
          for (int64_t i = n - 1; i >= 0; --i) {
            if (++kernel_index[i] < window_[i].size) break;
            kernel_index[i] = 0;
          }
        }
      }
      Eigen::Map<const Matrix> patches(patch, rows, patch_width_);
      Eigen::Map<Matrix> result(output + r0 * out_features_, rows, out_features_);
      result.noalias() = patches * weights;
    }
  };
  const int64_t workers = std::min<int64_t>(static_cast<int64_t>(patches_.size()), blocks);
  if (pool == nullptr || workers <= 1) {
    run_blocks(0, 1);
    return;
  }
  pool->ParallelFor(workers, 1, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) run_blocks(w, workers);
  });
}

Status EigenConvolutionThunk::Execute(char** frame, ExecuteContext& context) const {
  if (rows_ == 0 || out_features_ == 0) return OkStatus();
  if (patch_width_ == 0) {
    std::memset(frame[output_slot_], 0, rows_ * out_features_ * (is_f64_ ? 8 : 4));
    return OkStatus();
  }
  if (is_f64_) {
    Run(reinterpret_cast<const double*>(frame[input_slot_]),
        reinterpret_cast<const double*>(frame[kernel_slot_]),
        reinterpret_cast<double*>(frame[output_slot_]), context.pool);
  } else {
    Run(reinterpret_cast<const float*>(frame[input_slot_]),
        reinterpret_cast<const float*>(frame[kernel_slot_]),
        reinterpret_cast<float*>(frame[output_slot_]), context.pool);
  }
  return OkStatus();
}

std::string EigenConvolutionThunk::ToString(int indent) const {
  return fmt::format("{:{}}library-call {} (im2col + Eigen matmul, [{}x{}] x [{}x{}] in blocks of {} rows)\n",
                     "", indent, hlo_name(), rows_, patch_width_, patch_width_, out_features_,
                     rows_per_block_);
}

}  // namespace xlens::runtime

#include "compiler/runtime/cholesky_thunk.h"

#include <complex>
#include <limits>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <fmt/format.h>

#include "compiler/hlo/numeric_op_attributes.h"
#include "compiler/runtime/layout_walk.h"

namespace xlens::runtime {

struct CholeskyThunk::Impl {
  virtual ~Impl() = default;
  virtual void Run(const char* input, char* output) = 0;
};

namespace {

// XLA's CholeskyExpander factors blocks of this many columns, each block with a loop of
// column updates, except a block of one column, which is a plain square root.
constexpr int64_t kXlaBlockSize = 128;

template <typename S>
class CholeskyRunner : public CholeskyThunk::Impl {
 public:
  using Real = typename Eigen::NumTraits<S>::Real;
  using Matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<S, Eigen::Dynamic, 1>;

  CholeskyRunner(bool lower, const Shape& input, const Shape& output)
      : lower_(lower), n_(input.dimensions(input.rank() - 1)), input_(BatchOf(input)),
        output_(BatchOf(output)), llt_(n_), leading_(n_ > 0 ? n_ - 1 : 0), matrix_(n_, n_),
        factor_(n_, n_), row_(n_ > 0 ? n_ - 1 : 0) {
    const std::vector<int64_t> in = codegen::LayoutStrides(input);
    const std::vector<int64_t> out = codegen::LayoutStrides(output);
    in_row_ = in[input.rank() - 2];
    in_column_ = in[input.rank() - 1];
    out_row_ = out[output.rank() - 2];
    out_column_ = out[output.rank() - 1];
    int64_t batches = 1;
    for (int64_t d : input_.dimensions) batches *= d;
    batch_offsets_.resize(batches);
    // Only one triangle is ever written; the other is read by nothing but is kept defined.
    matrix_.setZero();
  }

  void Run(const char* input, char* output) override {
    if (n_ == 0) return;
    const S* in = reinterpret_cast<const S*>(input);
    S* out = reinterpret_cast<S*>(output);
    // The batch offsets of the operand and the result, walked in the same (row-major) order.
    int64_t b = 0;
    ForEachOffset(input_, [&](int64_t offset) { batch_offsets_[b++] = offset; });
    b = 0;
    ForEachOffset(output_, [&](int64_t offset) {
      Factor(in + batch_offsets_[b++]);
      Write(out + offset);
    });
  }

 private:
  // A shape of the batch dimensions alone, with the strides they have in the whole array.
  static StridedArray BatchOf(const Shape& shape) {
    StridedArray array(shape);
    array.dimensions.resize(shape.rank() - 2);
    array.strides.resize(shape.rank() - 2);
    array.index.resize(shape.rank() - 2);
    return array;
  }

  // factor_ := the lower factor of the matrix at `a`, what XLA gives where there is none.
  void Factor(const S* a) {
    all_nan_ = false;
    // The triangle the factorization reads, as the lower triangle of a Hermitian matrix: for
    // lower=false, U^H U = A is L L^H = A with L = U^H, read from A's upper triangle.
    for (int64_t c = 0; c < n_; ++c) {
      for (int64_t r = c; r < n_; ++r) {
        matrix_(r, c) = lower_ ? a[r * in_row_ + c * in_column_]
                               : Eigen::numext::conj(a[c * in_row_ + r * in_column_]);
      }
    }
    llt_.compute(matrix_);
    if (llt_.info() == Eigen::Success) {
      factor_ = llt_.matrixL();
      // A NaN pivot is an error to XLA too (its square root is NaN).
      for (int64_t i = 0; i < n_; ++i) {
        if (std::isnan(Eigen::numext::real(factor_(i, i)))) return FillNaN();
      }
      return;
    }
    // XLA divides the pivot's column by its square root: a zero pivot in the last column is
    // the only failure that does not spread into other columns (Eigen stops there; XLA goes on
    // with 0/0). Anything else is NaN all over.
    const int64_t m = n_ - 1;
    if (m > 0) {
      leading_.compute(matrix_.topLeftCorner(m, m));
      if (leading_.info() != Eigen::Success) return FillNaN();
    }
    for (int64_t j = 0; j < m; ++j) row_(j) = Eigen::numext::conj(matrix_(m, j));
    if (m > 0) leading_.matrixL().solveInPlace(row_);
    const Real pivot = Eigen::numext::real(matrix_(m, m)) - (m > 0 ? row_.squaredNorm() : Real(0));
    if (!(pivot == Real(0))) return FillNaN();
    factor_.setZero();
    if (m > 0) factor_.topLeftCorner(m, m) = leading_.matrixL();
    for (int64_t j = 0; j < m; ++j) factor_(m, j) = Eigen::numext::conj(row_(j));
    factor_(m, m) = n_ % kXlaBlockSize == 1 ? S(0) : ZeroOverZero();
  }

  void FillNaN() { all_nan_ = true; }

  // What XLA's division of a zero pivot by its square root gives: NaN, in both parts of a
  // complex number (an all-NaN matrix has NaN + 0i, XLA's constant).
  static S ZeroOverZero() {
    const Real nan = std::numeric_limits<Real>::quiet_NaN();
    if constexpr (Eigen::NumTraits<S>::IsComplex) {
      return S(nan, nan);
    } else {
      return nan;
    }
  }

  // The factor into the result at `out`, zeros in the other triangle (an all-NaN matrix is
  // NaN in both).
  void Write(S* out) {
    for (int64_t r = 0; r < n_; ++r) {
      for (int64_t c = 0; c < n_; ++c) {
        S value = all_nan_ ? S(std::numeric_limits<Real>::quiet_NaN())
                  : lower_ ? (r >= c ? factor_(r, c) : S(0))
                  : r == c ? factor_(r, r)  // real: no -0 imaginary part from conj
                           : (r < c ? Eigen::numext::conj(factor_(c, r)) : S(0));
        out[r * out_row_ + c * out_column_] = value;
      }
    }
  }

  bool lower_;
  int64_t n_;
  StridedArray input_, output_;
  int64_t in_row_ = 0, in_column_ = 0, out_row_ = 0, out_column_ = 0;
  Eigen::LLT<Matrix, Eigen::Lower> llt_, leading_;
  Matrix matrix_, factor_;
  Vector row_;
  std::vector<int64_t> batch_offsets_;
  bool all_nan_ = false;
};

}  // namespace

CholeskyThunk::CholeskyThunk(std::string hlo_name) : Thunk(std::move(hlo_name)) {}
CholeskyThunk::~CholeskyThunk() = default;

StatusOr<std::unique_ptr<CholeskyThunk>> CholeskyThunk::Create(std::string hlo_name,
                                                               const HloInstruction& cholesky,
                                                               int64_t input_slot,
                                                               int64_t output_slot) {
  ASSIGN_OR_RETURN(bool lower, GetCholeskyLower(cholesky));
  const Shape& input = cholesky.operand(0)->shape();
  const Shape& output = cholesky.shape();
  if (!input.IsArray() || input.rank() < 2 ||
      input.dimensions(input.rank() - 1) != input.dimensions(input.rank() - 2) ||
      !shape_util::Compatible(input, output)) {
    return Error(fmt::format("{}: cholesky needs square matrices [..., n, n] and a result of the "
                             "same shape, not {} -> {}",
                             cholesky.name(), input.ToString(false), output.ToString(false)));
  }
  std::unique_ptr<CholeskyThunk> thunk(new CholeskyThunk(std::move(hlo_name)));
  switch (input.element_type()) {
    case PrimitiveType::F32:
      thunk->impl_ = std::make_unique<CholeskyRunner<float>>(lower, input, output);
      break;
    case PrimitiveType::F64:
      thunk->impl_ = std::make_unique<CholeskyRunner<double>>(lower, input, output);
      break;
    case PrimitiveType::C64:
      thunk->impl_ = std::make_unique<CholeskyRunner<std::complex<float>>>(lower, input, output);
      break;
    case PrimitiveType::C128:
      thunk->impl_ = std::make_unique<CholeskyRunner<std::complex<double>>>(lower, input, output);
      break;
    default:
      return Error(fmt::format("{}: cholesky takes f32, f64, c64 or c128, not {}", cholesky.name(),
                               PrimitiveTypeName(input.element_type())));
  }
  const int64_t n = input.dimensions(input.rank() - 1);
  thunk->description_ = fmt::format("{}, {} x {}[{},{}]", lower ? "lower" : "upper",
                                    input.num_elements() / std::max<int64_t>(1, n * n),
                                    PrimitiveTypeName(input.element_type()), n, n);
  thunk->input_slot_ = input_slot;
  thunk->output_slot_ = output_slot;
  return thunk;
}

Status CholeskyThunk::Execute(char** frame, ExecuteContext&) const {
  impl_->Run(frame[input_slot_], frame[output_slot_]);
  return OkStatus();
}

std::string CholeskyThunk::ToString(int indent) const {
  return fmt::format("{:{}}cholesky {} ({}, Eigen LLT)\n", "", indent, hlo_name(), description_);
}

}  // namespace xlens::runtime

#include "compiler/runtime/triangular_solve_thunk.h"

#include <complex>
#include <vector>

#include <fmt/format.h>

#include "compiler/hlo/numeric_op_attributes.h"
#include "compiler/runtime/layout_walk.h"

// BLAS' triangular solve with several right-hand sides (the trailing arguments are the hidden
// lengths of the four character arguments).
extern "C" {
#define XLENS_TRSM_DECL(p, T)                                                                  \
  void p##trsm_(const char*, const char*, const char*, const char*, const int*, const int*,   \
                const T*, const T*, const int*, T*, const int*, size_t, size_t, size_t, size_t);
XLENS_TRSM_DECL(s, float)
XLENS_TRSM_DECL(d, double)
XLENS_TRSM_DECL(c, std::complex<float>)
XLENS_TRSM_DECL(z, std::complex<double>)
#undef XLENS_TRSM_DECL
}

namespace xlens::runtime {

struct TriangularSolveThunk::Impl {
  virtual ~Impl() = default;
  virtual void Run(const char* a, const char* b, char* out) = 0;
};

namespace {

template <typename T>
void Trsm(char side, char uplo, char trans, char diag, int m, int n, const T* a, int lda, T* b) {
  const T one(1);
  if constexpr (std::is_same_v<T, float>) {
    strsm_(&side, &uplo, &trans, &diag, &m, &n, &one, a, &lda, b, &m, 1, 1, 1, 1);
  } else if constexpr (std::is_same_v<T, double>) {
    dtrsm_(&side, &uplo, &trans, &diag, &m, &n, &one, a, &lda, b, &m, 1, 1, 1, 1);
  } else if constexpr (std::is_same_v<T, std::complex<float>>) {
    ctrsm_(&side, &uplo, &trans, &diag, &m, &n, &one, a, &lda, b, &m, 1, 1, 1, 1);
  } else {
    ztrsm_(&side, &uplo, &trans, &diag, &m, &n, &one, a, &lda, b, &m, 1, 1, 1, 1);
  }
}

// The element offsets of every matrix of a batched array, in row-major order of the batch
// dimensions, and the strides of a matrix's rows and columns.
struct MatrixWalk {
  explicit MatrixWalk(const Shape& shape) {
    const std::vector<int64_t> strides = codegen::LayoutStrides(shape);
    const int64_t rank = shape.rank();
    row = strides[rank - 2];
    column = strides[rank - 1];
    int64_t count = 1;
    for (int64_t d = 0; d + 2 < rank; ++d) count *= shape.dimensions(d);
    std::vector<int64_t> index(rank > 2 ? rank - 2 : 0, 0);
    for (int64_t i = 0; i < count; ++i) {
      int64_t offset = 0;
      for (size_t d = 0; d < index.size(); ++d) offset += index[d] * strides[d];
      offsets.push_back(offset);
      for (int64_t d = static_cast<int64_t>(index.size()) - 1; d >= 0; --d) {
        if (++index[d] < shape.dimensions(d)) break;
        index[d] = 0;
      }
    }
  }
  std::vector<int64_t> offsets;
  int64_t row = 0, column = 0;
};

template <typename T>
class TrsmRunner : public TriangularSolveThunk::Impl {
 public:
  TrsmRunner(const TriangularSolveAttributes& attributes, const Shape& a, const Shape& b,
             const Shape& out)
      : attributes_(attributes), a_(a), b_(b), out_(out) {
    m_ = b.dimensions(b.rank() - 2);
    n_ = b.dimensions(b.rank() - 1);
    k_ = attributes.left_side ? m_ : n_;
    a_scratch_.resize(k_ * k_);
    b_scratch_.resize(m_ * n_);
  }

  void Run(const char* a_data, const char* b_data, char* out_data) override {
    if (m_ == 0 || n_ == 0) return;
    const T* a = reinterpret_cast<const T*>(a_data);
    const T* b = reinterpret_cast<const T*>(b_data);
    T* out = reinterpret_cast<T*>(out_data);
    const char side = attributes_.left_side ? 'L' : 'R';
    const char uplo = attributes_.lower ? 'L' : 'U';
    const char trans = attributes_.transpose == TriangularSolveTranspose::kNo          ? 'N'
                       : attributes_.transpose == TriangularSolveTranspose::kTranspose ? 'T'
                                                                                       : 'C';
    const char diag = attributes_.unit_diagonal ? 'U' : 'N';
    for (size_t i = 0; i < b_.offsets.size(); ++i) {
      // Column-major copies: element (r, c) at r + c * rows.
      const T* am = a + a_.offsets[i];
      for (int64_t c = 0; c < k_; ++c) {
        for (int64_t r = 0; r < k_; ++r) a_scratch_[r + c * k_] = am[r * a_.row + c * a_.column];
      }
      const T* bm = b + b_.offsets[i];
      for (int64_t c = 0; c < n_; ++c) {
        for (int64_t r = 0; r < m_; ++r) b_scratch_[r + c * m_] = bm[r * b_.row + c * b_.column];
      }
      Trsm<T>(side, uplo, trans, diag, static_cast<int>(m_), static_cast<int>(n_),
              a_scratch_.data(), static_cast<int>(k_), b_scratch_.data());
      T* om = out + out_.offsets[i];
      for (int64_t c = 0; c < n_; ++c) {
        for (int64_t r = 0; r < m_; ++r) om[r * out_.row + c * out_.column] = b_scratch_[r + c * m_];
      }
    }
  }

 private:
  TriangularSolveAttributes attributes_;
  MatrixWalk a_, b_, out_;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  std::vector<T> a_scratch_, b_scratch_;
};

}  // namespace

TriangularSolveThunk::TriangularSolveThunk(std::string hlo_name) : Thunk(std::move(hlo_name)) {}
TriangularSolveThunk::~TriangularSolveThunk() = default;

StatusOr<std::unique_ptr<TriangularSolveThunk>> TriangularSolveThunk::Create(
    std::string hlo_name, const HloInstruction& solve, int64_t a_slot, int64_t b_slot,
    int64_t output_slot) {
  ASSIGN_OR_RETURN(TriangularSolveAttributes attributes, GetTriangularSolveAttributes(solve));
  const Shape& a = solve.operand(0)->shape();
  const Shape& b = solve.operand(1)->shape();
  const Shape& out = solve.shape();
  const int64_t rank = b.IsArray() ? b.rank() : 0;
  bool valid = a.IsArray() && b.IsArray() && out.IsArray() && rank >= 2 && a.rank() == rank &&
               out.dimensions() == b.dimensions() && a.element_type() == b.element_type() &&
               out.element_type() == b.element_type();
  if (valid) {
    const int64_t k = b.dimensions(rank - (attributes.left_side ? 2 : 1));
    valid = a.dimensions(rank - 1) == k && a.dimensions(rank - 2) == k;
    for (int64_t d = 0; d + 2 < rank; ++d) valid = valid && a.dimensions(d) == b.dimensions(d);
  }
  if (!valid) {
    return Error(fmt::format("{}: triangular-solve needs a [..., k, k] matching b [..., m, n] "
                             "(k = m on the left side, n on the right) and a result like b, not "
                             "{}, {} -> {}",
                             solve.name(), a.ToString(false), b.ToString(false),
                             out.ToString(false)));
  }
  std::unique_ptr<TriangularSolveThunk> thunk(new TriangularSolveThunk(std::move(hlo_name)));
  switch (b.element_type()) {
    case PrimitiveType::F32:
      thunk->impl_ = std::make_unique<TrsmRunner<float>>(attributes, a, b, out);
      break;
    case PrimitiveType::F64:
      thunk->impl_ = std::make_unique<TrsmRunner<double>>(attributes, a, b, out);
      break;
    case PrimitiveType::C64:
      thunk->impl_ = std::make_unique<TrsmRunner<std::complex<float>>>(attributes, a, b, out);
      break;
    case PrimitiveType::C128:
      thunk->impl_ = std::make_unique<TrsmRunner<std::complex<double>>>(attributes, a, b, out);
      break;
    default:
      return Error(fmt::format("{}: triangular-solve takes f32, f64, c64 or c128, not {}",
                               solve.name(), PrimitiveTypeName(b.element_type())));
  }
  const char* transpose[] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
  const int64_t m = b.dimensions(rank - 2), n = b.dimensions(rank - 1);
  thunk->description_ = fmt::format(
      "{}, {}, {}{}, {} x {}[{},{}]", attributes.left_side ? "left" : "right",
      attributes.lower ? "lower" : "upper", transpose[static_cast<int>(attributes.transpose)],
      attributes.unit_diagonal ? ", unit diagonal" : "",
      b.num_elements() / std::max<int64_t>(1, m * n), PrimitiveTypeName(b.element_type()), m, n);
  thunk->a_slot_ = a_slot;
  thunk->b_slot_ = b_slot;
  thunk->output_slot_ = output_slot;
  return thunk;
}

Status TriangularSolveThunk::Execute(char** frame, ExecuteContext&) const {
  impl_->Run(frame[a_slot_], frame[b_slot_], frame[output_slot_]);
  return OkStatus();
}

std::string TriangularSolveThunk::ToString(int indent) const {
  return fmt::format("{:{}}triangular-solve {} ({}, BLAS trsm)\n", "", indent, hlo_name(),
                     description_);
}

}  // namespace xlens::runtime

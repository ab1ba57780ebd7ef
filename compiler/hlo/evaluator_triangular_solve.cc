// triangular-solve by plain substitution: op(a) x = b (left_side=true) or x op(a) = b, for a
// batch of triangular a (only the triangle named by `lower` is read; unit_diagonal=true reads
// no diagonal either and takes it as 1), op = transpose_a's NO_TRANSPOSE, TRANSPOSE or ADJOINT.
// XLA's backends solve in blocks with a different order of operations, so results agree to
// rounding, not bit for bit.
#include "compiler/hlo/evaluator_internal.h"
#include "compiler/hlo/numeric_op_attributes.h"

namespace xlens::evaluator_internal {
namespace {

using Transpose = TriangularSolveTranspose;
using SolveOptions = TriangularSolveAttributes;

template <typename T>
T MaybeConj(T v, bool conjugate) {
  if constexpr (kIsComplex<T>) {
    return conjugate ? std::conj(v) : v;
  } else {
    return v;
  }
}

// Solves one matrix: a is k x k, b and x are m x n (k = m for the left side, n for the right).
template <typename T>
void SolveOne(const T* a, const T* b, T* x, int64_t m, int64_t n, int64_t k,
              const SolveOptions& options, std::vector<T>& t) {
  // t = op(triangle of a), dense, zeros outside the triangle.
  for (int64_t r = 0; r < k; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const bool inside = options.lower ? c <= r : c >= r;
      T value = inside ? a[r * k + c] : T(0);
      if (r == c && options.unit_diagonal) value = T(1);
      const int64_t tr = options.transpose == Transpose::kNo ? r : c;
      const int64_t tc = options.transpose == Transpose::kNo ? c : r;
      t[tr * k + tc] = MaybeConj(value, options.transpose == Transpose::kAdjoint);
    }
  }
  // op(a) is lower when exactly one of lower and transposition holds.
  const bool t_lower = options.lower == (options.transpose == Transpose::kNo);
  if (options.left_side) {
    // t x = b, column by column: x[r][j] = (b[r][j] - sum_c t[r][c] x[c][j]) / t[r][r].
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t step = 0; step < m; ++step) {
        const int64_t r = t_lower ? step : m - 1 - step;
        T sum = b[r * n + j];
        for (int64_t s = 0; s < step; ++s) {
          const int64_t c = t_lower ? s : m - 1 - s;
          sum -= t[r * k + c] * x[c * n + j];
        }
        x[r * n + j] = sum / t[r * k + r];
      }
    }
  } else {
    // x t = b, row by row: x[i][c] = (b[i][c] - sum_r x[i][r] t[r][c]) / t[c][c]; a lower t
    // determines the last column first.
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t step = 0; step < n; ++step) {
        const int64_t c = t_lower ? n - 1 - step : step;
        T sum = b[i * n + c];
        for (int64_t s = 0; s < step; ++s) {
          const int64_t r = t_lower ? n - 1 - s : s;
          sum -= x[i * n + r] * t[r * k + c];
        }
        x[i * n + c] = sum / t[c * k + c];
      }
    }
  }
}

template <typename T>
void SolveBatch(const Literal& a, const Literal& b, Literal& x, int64_t batch, int64_t m,
                int64_t n, int64_t k, const SolveOptions& options) {
  std::vector<T> t(k * k);
  const T* a_data = a.data<T>().data();
  const T* b_data = b.data<T>().data();
  T* x_data = x.data<T>().data();
  for (int64_t i = 0; i < batch; ++i) {
    SolveOne(a_data + i * k * k, b_data + i * m * n, x_data + i * m * n, m, n, k, options, t);
  }
}

}  // namespace

StatusOr<Literal> HandleTriangularSolve(const HloInstruction& instruction, const Literal& a,
                                        const Literal& b) {
  ASSIGN_OR_RETURN(SolveOptions options, GetTriangularSolveAttributes(instruction));
  const Shape& a_shape = a.shape();
  const Shape& b_shape = b.shape();
  const int64_t rank = b_shape.IsArray() ? b_shape.rank() : 0;
  bool valid = a_shape.IsArray() && b_shape.IsArray() && rank >= 2 && a_shape.rank() == rank &&
               a_shape.element_type() == b_shape.element_type();
  int64_t m = 0, n = 0, k = 0;
  if (valid) {
    m = b_shape.dimensions(rank - 2);
    n = b_shape.dimensions(rank - 1);
    k = options.left_side ? m : n;
    valid = a_shape.dimensions(rank - 1) == k && a_shape.dimensions(rank - 2) == k;
    for (int64_t d = 0; d + 2 < rank; ++d) {
      valid = valid && a_shape.dimensions(d) == b_shape.dimensions(d);
    }
  }
  if (!valid) {
    return Error(fmt::format("triangular-solve of a {} and b {}: a must be a batch of square "
                             "matrices matching b's {} dimension, with b's batch dimensions",
                             a_shape.ToString(false), b_shape.ToString(false),
                             options.left_side ? "second-last" : "last"));
  }
  RETURN_IF_ERROR(
      ExpectDimensions(instruction.shape(), b_shape.dimensions(), "the triangular-solve result"));
  if (instruction.shape().element_type() != b_shape.element_type()) {
    return Error(fmt::format("triangular-solve of {} into {}", b_shape.ToString(false),
                             instruction.shape().ToString(false)));
  }
  const int64_t batch = m * n == 0 ? 0 : b.element_count() / (m * n);
  Literal x(instruction.shape());
  switch (b_shape.element_type()) {
    case PrimitiveType::F32: SolveBatch<float>(a, b, x, batch, m, n, k, options); break;
    case PrimitiveType::F64: SolveBatch<double>(a, b, x, batch, m, n, k, options); break;
    case PrimitiveType::C64: SolveBatch<complex64>(a, b, x, batch, m, n, k, options); break;
    case PrimitiveType::C128: SolveBatch<complex128>(a, b, x, batch, m, n, k, options); break;
    default:
      return Error(fmt::format("triangular-solve of {}: expected f32, f64, c64 or c128",
                               b_shape.ToString(false)));
  }
  return x;
}

}  // namespace xlens::evaluator_internal

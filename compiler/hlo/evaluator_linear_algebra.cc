// cholesky and topk, with the semantics XLA's CPU backend gives them (checked against jaxlib).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "compiler/hlo/evaluator_internal.h"
#include "compiler/hlo/numeric_op_attributes.h"

namespace xlens::evaluator_internal {
namespace {

// ---------------------------------------------------------------------------------------------
// cholesky
//
// XLA's CPU backend runs cholesky through CholeskyExpander, and its result is what that
// expansion computes, corners included; this follows it step by step:
//   * lower=false factors transpose(a) as lower and transposes the factor back, so upper reads
//     only the upper triangle, lower only the lower one; the other triangle of the result is 0.
//   * column j: s[r] = a[r][j] - sum_k l[r][k] conj(l[j][k]) for r >= j, d = sqrt(re(s[j])),
//     l[r][j] = s[r] / d (the diagonal's imaginary part is not dropped: s[j] / d).
//   * a matrix for which some d is NaN (a negative pivot, or a NaN in the triangle read) comes
//     back all NaN (NaN + 0i for complex types): jaxlib shows it for [[4,12],[-7,1]], where XLA's
//     documentation only says the result is implementation-defined.
//   * a zero pivot is not an error: d = 0 gives 0/0 = NaN or +-inf in that column only (XLA
//     returns [[1,0,0],[1,1,0],[0,0,nan]] for [[1,1,0],[1,2,0],[0,0,0]]), unless a later pivot
//     becomes NaN through it.
// Arithmetic is in the element type, as the expansion's.

template <typename T>
T Conj(T v) {
  if constexpr (kIsComplex<T>) {
    return std::conj(v);
  } else {
    return v;
  }
}

template <typename T>
auto RealPart(T v) {
  if constexpr (kIsComplex<T>) {
    return v.real();
  } else {
    return v;
  }
}

template <typename T>
void CholeskyBatch(const T* a, T* out, int64_t batch, int64_t n, bool lower) {
  using Real = decltype(RealPart(T()));
  std::vector<T> l(n * n);
  std::vector<T> s(n);
  for (int64_t b = 0; b < batch; ++b) {
    const T* matrix = a + b * n * n;
    // The triangle read, as a lower one: lower ? a[r][c] : a[c][r].
    auto at = [&](int64_t r, int64_t c) { return lower ? matrix[r * n + c] : matrix[c * n + r]; };
    std::fill(l.begin(), l.end(), T(0));
    bool failed = false;
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t r = j; r < n; ++r) {
        T dot = T(0);
        for (int64_t k = 0; k < j; ++k) dot += l[r * n + k] * Conj(l[j * n + k]);
        s[r] = at(r, j) - dot;
      }
      const Real d = std::sqrt(RealPart(s[j]));
      if (std::isnan(d)) failed = true;
      for (int64_t r = j; r < n; ++r) {
        if constexpr (kIsComplex<T>) {
          l[r * n + j] = T(s[r].real() / d, s[r].imag() / d);
        } else {
          l[r * n + j] = s[r] / d;
        }
      }
    }
    T* result = out + b * n * n;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        result[r * n + c] = failed ? T(std::numeric_limits<Real>::quiet_NaN())
                                   : (lower ? l[r * n + c] : l[c * n + r]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// topk
//
// XLA orders topk's values by the total order of its sort (jaxlib's CPU output): for floats
// -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN, NaNs among themselves by their payload
// bits; equal values keep their index order, the lower index first, for largest=true and
// largest=false alike. Each value is mapped to an int64 key with that order.

// The unsigned value of an element of an unsigned integer literal.
uint64_t IndexValueUnsigned(const Literal& literal, int64_t linear_index) {
  switch (literal.shape().element_type()) {
    case PrimitiveType::U8: return literal.data<uint8_t>()[linear_index];
    case PrimitiveType::U16: return literal.data<uint16_t>()[linear_index];
    case PrimitiveType::U32: return literal.data<uint32_t>()[linear_index];
    case PrimitiveType::U64: return literal.data<uint64_t>()[linear_index];
    default: return static_cast<uint64_t>(literal.GetAsInt64(linear_index));
  }
}

StatusOr<std::vector<int64_t>> TotalOrderKeys(const Literal& operand) {
  const PrimitiveType type = operand.shape().element_type();
  const int64_t count = operand.element_count();
  std::vector<int64_t> keys(count);
  auto float_keys = [&](auto bits_type_tag) {
    using Bits = decltype(bits_type_tag);
    using Signed = std::make_signed_t<Bits>;
    const uint8_t* data = operand.untyped_data();
    for (int64_t i = 0; i < count; ++i) {
      Bits bits;
      std::memcpy(&bits, data + i * sizeof(Bits), sizeof(Bits));
      const Signed value = static_cast<Signed>(bits);
      // Negative floats order backwards by their bits: flip all but the sign.
      keys[i] = value < 0 ? static_cast<int64_t>(value ^ std::numeric_limits<Signed>::max())
                          : static_cast<int64_t>(value);
    }
  };
  switch (type) {
    case PrimitiveType::F16:
    case PrimitiveType::BF16:
      float_keys(uint16_t());
      break;
    case PrimitiveType::F32:
      float_keys(uint32_t());
      break;
    case PrimitiveType::F64:
      float_keys(uint64_t());
      break;
    case PrimitiveType::S8: case PrimitiveType::S16: case PrimitiveType::S32:
    case PrimitiveType::S64:
      for (int64_t i = 0; i < count; ++i) keys[i] = operand.GetAsInt64(i);
      break;
    case PrimitiveType::U8: case PrimitiveType::U16: case PrimitiveType::U32:
    case PrimitiveType::U64:
      // Flipping the top bit of the unsigned value keeps its order in int64.
      for (int64_t i = 0; i < count; ++i) {
        keys[i] = static_cast<int64_t>(static_cast<uint64_t>(IndexValueUnsigned(operand, i)) ^
                                       (uint64_t{1} << 63));
      }
      break;
    default:
      return Error(fmt::format("topk of {}", operand.shape().ToString(false)));
  }
  return keys;
}

}  // namespace

StatusOr<Literal> HandleCholesky(const HloInstruction& instruction, const Literal& operand) {
  ASSIGN_OR_RETURN(bool lower, GetCholeskyLower(instruction));
  const Shape& shape = operand.shape();
  const int64_t rank = shape.rank();
  if (!shape.IsArray() || rank < 2 || shape.dimensions(rank - 1) != shape.dimensions(rank - 2)) {
    return Error(fmt::format("cholesky of {}: not a batch of square matrices",
                             shape.ToString(false)));
  }
  RETURN_IF_ERROR(ExpectDimensions(instruction.shape(), shape.dimensions(), "the cholesky result"));
  if (instruction.shape().element_type() != shape.element_type()) {
    return Error(fmt::format("cholesky of {} into {}", shape.ToString(false),
                             instruction.shape().ToString(false)));
  }
  const int64_t n = shape.dimensions(rank - 1);
  const int64_t batch = n == 0 ? 0 : operand.element_count() / (n * n);
  Literal result(instruction.shape());
  switch (shape.element_type()) {
    case PrimitiveType::F32:
      CholeskyBatch(operand.data<float>().data(), result.data<float>().data(), batch, n, lower);
      break;
    case PrimitiveType::F64:
      CholeskyBatch(operand.data<double>().data(), result.data<double>().data(), batch, n, lower);
      break;
    case PrimitiveType::C64:
      CholeskyBatch(operand.data<complex64>().data(), result.data<complex64>().data(), batch, n,
                    lower);
      break;
    case PrimitiveType::C128:
      CholeskyBatch(operand.data<complex128>().data(), result.data<complex128>().data(), batch,
                    n, lower);
      break;
    default:
      return Error(fmt::format("cholesky of {}", shape.ToString(false)));
  }
  return result;
}

StatusOr<Literal> HandleTopK(const HloInstruction& instruction, const Literal& operand) {
  ASSIGN_OR_RETURN(TopKAttributes attributes, GetTopKAttributes(instruction));
  const Shape& in_shape = operand.shape();
  const int64_t rank = in_shape.rank();
  if (!in_shape.IsArray() || rank < 1 || attributes.k > in_shape.dimensions(rank - 1)) {
    return Error(fmt::format("topk with k={} of {}", attributes.k, in_shape.ToString(false)));
  }
  std::vector<int64_t> out_dims(in_shape.dimensions().begin(), in_shape.dimensions().end());
  out_dims.back() = attributes.k;
  const Shape& shape = instruction.shape();
  if (!shape.IsTuple() || shape.tuple_shapes_size() != 2 ||
      shape.tuple_shapes(0).element_type() != in_shape.element_type() ||
      shape.tuple_shapes(1).element_type() != PrimitiveType::S32) {
    return Error(fmt::format("topk of {} into {}", in_shape.ToString(false),
                             shape.ToString(false)));
  }
  RETURN_IF_ERROR(ExpectDimensions(shape.tuple_shapes(0), out_dims, "topk's values"));
  RETURN_IF_ERROR(ExpectDimensions(shape.tuple_shapes(1), out_dims, "topk's indices"));
  ASSIGN_OR_RETURN(std::vector<int64_t> keys, TotalOrderKeys(operand));

  Literal values(shape.tuple_shapes(0));
  Literal indices(shape.tuple_shapes(1));
  const int64_t length = in_shape.dimensions(rank - 1);
  const int64_t k = attributes.k;
  const int64_t rows = length == 0 ? 0 : operand.element_count() / length;
  const int64_t width = ByteWidth(in_shape.element_type());
  std::vector<int64_t> order(length);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t* row_keys = keys.data() + row * length;
    std::iota(order.begin(), order.end(), 0);
    // A strict total order (ties broken by index), so any selection algorithm gives one answer.
    auto before = [&](int64_t a, int64_t b) {
      if (row_keys[a] != row_keys[b]) {
        return attributes.largest ? row_keys[a] > row_keys[b] : row_keys[a] < row_keys[b];
      }
      return a < b;
    };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    for (int64_t j = 0; j < k; ++j) {
      std::memcpy(values.untyped_data() + (row * k + j) * width,
                  operand.untyped_data() + (row * length + order[j]) * width, width);
      indices.data<int32_t>()[row * k + j] = static_cast<int32_t>(order[j]);
    }
  }
  std::vector<Literal> elements;
  elements.push_back(std::move(values));
  elements.push_back(std::move(indices));
  return Literal::MakeTuple(std::move(elements));
}

}  // namespace xlens::evaluator_internal

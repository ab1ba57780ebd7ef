// Shared pieces of the CPU kernels of the op library: the dispatch from a DataType to the C++
// type of its elements, NumPy broadcasting of elementwise operands (with the same-shape and
// scalar cases as straight loops), and reductions over a set of axes. Internal to xlens_graph
// (it uses Eigen's half and bfloat16, which the library links privately).
#pragma once

#include <Eigen/Core>
#include <array>
#include <cmath>
#include <complex>
#include <memory>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/partial_shape.h"
#include "compiler/graph/tensor.h"
#include "compiler/graph/types.h"
#include "compiler/support/status.h"

namespace xlens::graph::cwise {

// Sets of element types a kernel accepts; a dispatch outside its set is an error naming the node.
enum TypeSet : unsigned {
  kHalfTypes = 1u << 0,      // half, bfloat16 (computed in float, rounded once per op)
  kFloatTypes = 1u << 1,     // float, double
  kSignedTypes = 1u << 2,    // int8, int16, int32, int64
  kUnsignedTypes = 1u << 3,  // uint8, uint16, uint32, uint64
  kBoolType = 1u << 4,
  kComplexTypes = 1u << 5,   // complex64, complex128
  kFloating = kHalfTypes | kFloatTypes,
  kIntegers = kSignedTypes | kUnsignedTypes,
  kReal = kFloating | kIntegers,
  kNumeric = kReal | kComplexTypes,
  kAllNumeric = kNumeric | kBoolType,
};

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) with T the element type of `dtype` (Eigen::half / Eigen::bfloat16 for
// the 16-bit floats, std::complex for complex) when dtype is in `kSet` (only those are
// instantiated); else an error naming the
// node and the type.
template <unsigned kSet, typename Fn>
Status Dispatch(const OpKernelContext& ctx, DataType dtype, Fn&& fn) {
  switch (RemoveRefType(dtype)) {
#define XLENS_CWISE_CASE(DT, T, SET) \
  case DT:                           \
    if constexpr ((kSet & (SET)) != 0) return fn(TypeTag<T>{}); \
    break;
    XLENS_CWISE_CASE(DT_HALF, Eigen::half, kHalfTypes)
    XLENS_CWISE_CASE(DT_BFLOAT16, Eigen::bfloat16, kHalfTypes)
    XLENS_CWISE_CASE(DT_FLOAT, float, kFloatTypes)
    XLENS_CWISE_CASE(DT_DOUBLE, double, kFloatTypes)
    XLENS_CWISE_CASE(DT_INT8, int8_t, kSignedTypes)
    XLENS_CWISE_CASE(DT_INT16, int16_t, kSignedTypes)
    XLENS_CWISE_CASE(DT_INT32, int32_t, kSignedTypes)
    XLENS_CWISE_CASE(DT_INT64, int64_t, kSignedTypes)
    XLENS_CWISE_CASE(DT_UINT8, uint8_t, kUnsignedTypes)
    XLENS_CWISE_CASE(DT_UINT16, uint16_t, kUnsignedTypes)
    XLENS_CWISE_CASE(DT_UINT32, uint32_t, kUnsignedTypes)
    XLENS_CWISE_CASE(DT_UINT64, uint64_t, kUnsignedTypes)
    XLENS_CWISE_CASE(DT_BOOL, bool, kBoolType)
    XLENS_CWISE_CASE(DT_COMPLEX64, std::complex<float>, kComplexTypes)
    XLENS_CWISE_CASE(DT_COMPLEX128, std::complex<double>, kComplexTypes)
#undef XLENS_CWISE_CASE
    default:
      break;
  }
  return ctx.Error("no CPU kernel for element type " + DataTypeName(dtype));
}

template <typename T>
inline constexpr bool kIsHalf =
    std::is_same_v<T, Eigen::half> || std::is_same_v<T, Eigen::bfloat16>;
template <typename T>
inline constexpr bool kIsComplex = std::is_same_v<T, std::complex<float>> ||
                                   std::is_same_v<T, std::complex<double>>;
// The type a unary math function is evaluated in: float for the 16-bit floats (as Eigen does).
template <typename T>
using ComputeType = std::conditional_t<kIsHalf<T>, float, T>;

// The type a kernel's matrix products over elements of T are computed in (Eigen's GEMM): float for
// the 16-bit floats, uint64_t for every integer type. Products and sums modulo 2^64 truncate to
// exactly the wrapped results of the narrower type, so one instantiation of the GEMM serves all
// eight (each one cost seconds of compile time; integer products are rare).
template <typename T>
using ProductType = std::conditional_t<std::is_integral_v<T>, uint64_t, ComputeType<T>>;

// Typed element pointers of a numeric tensor.
template <typename T>
const T* Data(const Tensor& t) {
  return reinterpret_cast<const T*>(t.raw_data());
}
template <typename T>
T* MutableData(Tensor& t) {
  return reinterpret_cast<T*>(t.raw_data());
}

// The elements of `t` (element type T) converted to C, and back: kernels that compute in float
// for the 16-bit floats (convolutions, softmax) work on these.
template <typename C, typename T>
std::vector<C> LoadAs(const Tensor& t) {
  const T* d = Data<T>(t);
  std::vector<C> v(t.num_elements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<C>(d[i]);
  return v;
}
template <typename T, typename C>
void StoreAs(const std::vector<C>& v, Tensor& t) {
  T* d = MutableData<T>(t);
  for (size_t i = 0; i < v.size(); ++i) d[i] = T(v[i]);
}

// How the operands of an elementwise op map onto its output under NumPy broadcasting.
struct Broadcast {
  std::vector<int64_t> out_dims;
  // Per operand: its strides in elements over the output's dims (0 along broadcast dims).
  std::vector<std::vector<int64_t>> strides;
  // Per operand: it has the output's shape (linear index = output index), or one element.
  std::vector<bool> same, scalar;
  int64_t num_elements = 1;
};

// Broadcasts any number of operand shapes; the error text is TensorFlow's
// ("Incompatible shapes: [2,3] vs. [4]").
StatusOr<Broadcast> MakeBroadcast(const std::vector<std::vector<int64_t>>& operand_dims);

// Calls fn(out_index, offsets) for every output element in order, `offsets` holding each
// operand's element index.
template <size_t N, typename Fn>
void ForEachBroadcast(const Broadcast& bc, Fn&& fn) {
  const int64_t rank = static_cast<int64_t>(bc.out_dims.size());
  std::array<int64_t, N> off{};
  if (bc.num_elements == 0) return;
  if (rank == 0) {
    fn(int64_t{0}, off);
    return;
  }
  std::vector<int64_t> index(rank, 0);
  const int64_t inner = bc.out_dims[rank - 1];
  std::array<int64_t, N> inner_stride{};
  for (size_t k = 0; k < N; ++k) inner_stride[k] = bc.strides[k][rank - 1];
  for (int64_t out = 0; out < bc.num_elements;) {
    std::array<int64_t, N> base{};
    for (size_t k = 0; k < N; ++k)
      for (int64_t d = 0; d + 1 < rank; ++d) base[k] += index[d] * bc.strides[k][d];
    for (int64_t i = 0; i < inner; ++i, ++out) {
      for (size_t k = 0; k < N; ++k) off[k] = base[k] + i * inner_stride[k];
      fn(out, off);
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < bc.out_dims[d]) break;
      index[d] = 0;
    }
  }
}

// The length of the block operand k repeats over the output when it holds the output's
// trailing dims and is broadcast along the leading ones (a bias or a per-channel scale over NHWC
// activations); 0 otherwise.
inline int64_t RepeatedBlock(const Broadcast& bc, size_t k) {
  const int64_t rank = static_cast<int64_t>(bc.out_dims.size());
  int64_t block = 1;
  int64_t d = rank - 1;
  for (; d >= 0 && bc.strides[k][d] == block && bc.out_dims[d] != 1; --d) block *= bc.out_dims[d];
  for (; d >= 0; --d)
    if (bc.strides[k][d] != 0 && bc.out_dims[d] != 1) return 0;
  return block;
}

// The loops of one binary elementwise op for one element type, over a row of n elements: both
// operands contiguous, or one of them a single element. Everything else of the op (broadcasting,
// the output's buffer) is type-independent and compiled once (BinaryOpRows): a kernel
// instantiates only these three loops per element type, not the whole kernel (the ~240 binary
// kernels of the math ops took ~20 s of their ~95 s compile that way).
struct BinaryRowFns {
  using Fn = void (*)(const void* a, const void* b, void* out, int64_t n);
  Fn both;      // out[i] = f(a[i], b[i])
  Fn a_scalar;  // out[i] = f(a[0], b[i])
  Fn b_scalar;  // out[i] = f(a[i], b[0])
};

template <typename A, typename B, typename Out, typename F>
struct BinaryRows {
  // F is a stateless functor (a class of functors or a lambda without captures).
  static_assert(std::is_empty_v<F> && std::is_default_constructible_v<F>);
  static void Both(const void* a, const void* b, void* out, int64_t n) {
    const A* x = static_cast<const A*>(a);
    const B* y = static_cast<const B*>(b);
    Out* o = static_cast<Out*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = F{}(x[i], y[i]);
  }
  static void AScalar(const void* a, const void* b, void* out, int64_t n) {
    const A x = *static_cast<const A*>(a);
    const B* y = static_cast<const B*>(b);
    Out* o = static_cast<Out*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = F{}(x, y[i]);
  }
  static void BScalar(const void* a, const void* b, void* out, int64_t n) {
    const A* x = static_cast<const A*>(a);
    const B y = *static_cast<const B*>(b);
    Out* o = static_cast<Out*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = F{}(x[i], y);
  }
  static constexpr BinaryRowFns kFns = {&Both, &AScalar, &BScalar};
};

// out = f(a, b) under broadcasting, as rows of the row loops: both operands of the output's
// shape, one a single element, one repeated along the leading dims (a bias or a per-channel
// scale over NHWC activations: rows of straight loops), or else row by row over the innermost
// dim. Element sizes in bytes.
void BinaryLoopRows(const Broadcast& bc, const void* a, int64_t a_size, const void* b,
                    int64_t b_size, void* out, int64_t out_size, const BinaryRowFns& fns);

// A binary elementwise kernel: output 0 = f(input 0, input 1) broadcast, with element sizes and
// the row loops of the element type; written over an operand of the output's shape that nothing
// else holds when `may_forward` (input and output types the same). Returns a Broadcast error
// (naming the node) for incompatible shapes.
Status BinaryOpRows(OpKernelContext& ctx, int64_t in_size, int64_t out_size, bool may_forward,
                    const BinaryRowFns& fns);

// A binary elementwise kernel: output 0 (of the node's output type) = f(x, y) broadcast; F is a
// stateless functor of (In, In) returning Out.
template <typename In, typename Out, typename F>
Status BinaryOp(OpKernelContext& ctx, F) {
  return BinaryOpRows(ctx, sizeof(In), sizeof(Out), std::is_same_v<In, Out>,
                      BinaryRows<In, In, Out, F>::kFns);
}

// Output 0 of a unary elementwise kernel, of input 0's shape: input 0's own buffer when
// `may_forward` (the same element type) and nothing else holds it.
StatusOr<Tensor*> UnaryOutput(OpKernelContext& ctx, bool may_forward);

// out[i] = f(in[i]).
template <typename In, typename Out, typename F>
Status UnaryOp(OpKernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * out, UnaryOutput(ctx, std::is_same_v<In, Out>));
  const In* in = Data<In>(x);
  Out* o = MutableData<Out>(*out);
  for (int64_t i = 0, n = x.num_elements(); i < n; ++i) o[i] = f(in[i]);
  return OkStatus();
}

// A reduction of a tensor over a set of axes, as TensorFlow's ReductionHelper sees it.
struct Reduction {
  std::vector<int64_t> in_dims;
  std::vector<bool> reduced;           // per input axis
  std::vector<int64_t> out_dims;       // without the reduced axes
  std::vector<int64_t> keep_dims_out;  // with them as 1
  int64_t num_outputs = 1;
  int64_t reduced_size = 1;  // elements reduced into each output
};

// Axes may be negative (counted from the end) and repeated; each must lie in [-rank, rank).
// Errors are TensorFlow's ("Invalid reduction dimension 3 for input with 2 dimensions.").
StatusOr<Reduction> MakeReduction(const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& axes);

// Calls fn(values, n, out_index, state) for every output element, `values` holding the n input
// elements (of elem_size bytes) reduced into it, contiguous and in input order: type-independent,
// compiled once for every reduction kernel and element type.
using ReductionFn = void (*)(const void* values, int64_t n, int64_t out_index, void* state);
void ForEachReductionErased(const Reduction& r, const void* in, int64_t elem_size, ReductionFn fn,
                            void* state);

// Calls fn(out_index, values, n) for every output element, `values` holding the n input
// elements reduced into it, contiguous and in input order.
template <typename T, typename Fn>
void ForEachReduction(const Reduction& r, const T* in, Fn&& fn) {
  using F = std::remove_reference_t<Fn>;
  ForEachReductionErased(
      r, in, sizeof(T),
      [](const void* values, int64_t n, int64_t out_index, void* state) {
        (*static_cast<F*>(state))(out_index, static_cast<const T*>(values), n);
      },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

// Pairwise summation (blocks of 128 summed in order, then halves added): the error grows with
// log n, like Eigen's tree reductions, instead of with n.
template <typename T>
T PairwiseSum(const T* v, int64_t n) {
  if (n <= 128) {
    T s = T(0);
    for (int64_t i = 0; i < n; ++i) s += v[i];
    return s;
  }
  const int64_t half = (n / 2 + 127) / 128 * 128;
  return PairwiseSum(v, half) + PairwiseSum(v + half, n - half);
}

}  // namespace xlens::graph::cwise

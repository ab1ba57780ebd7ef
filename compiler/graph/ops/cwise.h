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

// out[i] = f(a[.], b[.]) under broadcasting; straight loops when both operands have the
// output's shape, one is a single element, or one repeats along the leading dims.
template <typename A, typename B, typename Out, typename F>
void BinaryLoop(const Broadcast& bc, const A* a, const B* b, Out* out, F f) {
  const int64_t n = bc.num_elements;
  if (bc.same[0] && !bc.scalar[1] && n > 0) {
    // x op y with y repeated along the leading dims: rows of straight loops.
    if (const int64_t block = RepeatedBlock(bc, 1); block > 0 && n % block == 0) {
      for (int64_t r = 0; r < n; r += block) {
        const A* ar = a + r;
        Out* orow = out + r;
        for (int64_t i = 0; i < block; ++i) orow[i] = f(ar[i], b[i]);
      }
      return;
    }
  }
  if (bc.same[1] && !bc.scalar[0] && n > 0) {
    if (const int64_t block = RepeatedBlock(bc, 0); block > 0 && n % block == 0) {
      for (int64_t r = 0; r < n; r += block) {
        const B* br = b + r;
        Out* orow = out + r;
        for (int64_t i = 0; i < block; ++i) orow[i] = f(a[i], br[i]);
      }
      return;
    }
  }
  if (bc.same[0] && bc.same[1]) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  } else if (bc.same[0] && bc.scalar[1]) {
    const B y = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], y);
  } else if (bc.scalar[0] && bc.same[1]) {
    const A x = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(x, b[i]);
  } else {
    ForEachBroadcast<2>(bc, [&](int64_t i, const std::array<int64_t, 2>& o) {
      out[i] = f(a[o[0]], b[o[1]]);
    });
  }
}

// A binary elementwise kernel: output 0 (of the node's output type) = f(x, y) broadcast. F is
// called as f(TypeTag<T>) to get the functor for element type T, whose result type is Out.
// Returns a Broadcast error (naming the node) for incompatible shapes.
template <typename In, typename Out, typename F>
Status BinaryOp(OpKernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  auto bc = MakeBroadcast({x.dims(), y.dims()});
  if (!bc.ok()) return ctx.Error(bc.status().message());
  // In place over an operand of the output's shape that nothing else holds.
  int forward = -1;
  if constexpr (std::is_same_v<In, Out>) {
    if (x.RefCountIsOne() && x.dims() == bc->out_dims) forward = 0;
    else if (y.RefCountIsOne() && y.dims() == bc->out_dims) forward = 1;
  }
  ASSIGN_OR_RETURN(Tensor * out, forward >= 0
                                     ? ctx.forward_input_or_allocate_output(forward, 0, bc->out_dims)
                                     : ctx.allocate_output(0, bc->out_dims));
  BinaryLoop(*bc, Data<In>(x), Data<In>(y), MutableData<Out>(*out), f);
  return OkStatus();
}

// out[i] = f(in[i]).
template <typename In, typename Out, typename F>
Status UnaryOp(OpKernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  Tensor* out;
  if constexpr (std::is_same_v<In, Out>) {
    ASSIGN_OR_RETURN(out, ctx.forward_input_or_allocate_output(0, 0, x.dims()));
  } else {
    ASSIGN_OR_RETURN(out, ctx.allocate_output(0, x.dims()));
  }
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

// Calls fn(out_index, values, n) for every output element, `values` holding the n input
// elements reduced into it, contiguous and in input order.
template <typename T, typename Fn>
void ForEachReduction(const Reduction& r, const T* in, Fn&& fn) {
  const int64_t rank = static_cast<int64_t>(r.in_dims.size());
  const int64_t n = r.reduced_size;
  // Reduced axes all trailing: the values of an output are contiguous already.
  int64_t first_reduced = rank;
  while (first_reduced > 0 && r.reduced[first_reduced - 1]) --first_reduced;
  bool trailing = true;
  for (int64_t d = 0; d < first_reduced; ++d) trailing &= !r.reduced[d];
  if (trailing) {
    for (int64_t o = 0; o < r.num_outputs; ++o) fn(o, in + o * n, n);
    return;
  }
  std::vector<int64_t> stride(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * r.in_dims[d + 1];
  std::vector<int64_t> kept_axes, red_axes;
  for (int64_t d = 0; d < rank; ++d) (r.reduced[d] ? red_axes : kept_axes).push_back(d);
  // Offsets of the reduced elements relative to an output's first element.
  std::vector<int64_t> red_offsets;
  red_offsets.reserve(n);
  {
    std::vector<int64_t> idx(red_axes.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0;
      for (size_t k = 0; k < red_axes.size(); ++k) off += idx[k] * stride[red_axes[k]];
      red_offsets.push_back(off);
      for (int64_t k = static_cast<int64_t>(red_axes.size()) - 1; k >= 0; --k) {
        if (++idx[k] < r.in_dims[red_axes[k]]) break;
        idx[k] = 0;
      }
    }
  }
  std::unique_ptr<T[]> buffer(new T[n > 0 ? n : 1]);
  std::vector<int64_t> idx(kept_axes.size(), 0);
  for (int64_t o = 0; o < r.num_outputs; ++o) {
    int64_t base = 0;
    for (size_t k = 0; k < kept_axes.size(); ++k) base += idx[k] * stride[kept_axes[k]];
    for (int64_t i = 0; i < n; ++i) buffer[i] = in[base + red_offsets[i]];
    fn(o, buffer.get(), n);
    for (int64_t k = static_cast<int64_t>(kept_axes.size()) - 1; k >= 0; --k) {
      if (++idx[k] < r.in_dims[kept_axes[k]]) break;
      idx[k] = 0;
    }
  }
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

// TensorFlow's math ops (tensorflow/core/ops/math_ops.cc): elementwise arithmetic and math,
// comparisons, Cast, Select, MatMul and BatchMatMulV2, reductions, ArgMax/ArgMin, the *Grad
// ops of the unary functions, and grappler's _UnaryOpsComposition. Signatures are TensorFlow's
// (tests/graph/op_signatures_test.cc checks them against TensorFlow's registry), the kernels
// compute what TensorFlow's CPU kernels compute.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include <Eigen/Dense>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/cwise.h"
#include "compiler/graph/ops/math_ops_kernels.h"
#include "compiler/graph/ops/onednn_kernels.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"
#include "compiler/support/thread_pool.h"

namespace xlens::graph {
namespace {

using cwise::BinaryOp;
using cwise::ComputeType;
using cwise::Data;
using cwise::Dispatch;
using cwise::kIsComplex;
using cwise::kIsHalf;
using cwise::MutableData;
using cwise::UnaryOp;

// ----- Binary arithmetic ------------------------------------------------------------------------

// A binary kernel over the types of `set` with output type = input type; `Fn` is a class template
// of functors (Fn<T>{}(a, b)).
template <template <typename> class Fn, unsigned kSet>
KernelFn BinaryKernel() {
  return [](OpKernelContext& ctx) {
    return Dispatch<kSet>(ctx, ctx.input(0).dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      return BinaryOp<T, T>(ctx, Fn<T>{});
    });
  };
}

template <typename T>
struct AddFn {
  T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct SubFn {
  T operator()(T a, T b) const { return a - b; }
};
template <typename T>
struct MulFn {
  T operator()(T a, T b) const { return a * b; }
};
template <typename T>
struct RealDivFn {
  T operator()(T a, T b) const { return a / b; }
};
template <typename T>
struct DivNoNanFn {
  T operator()(T a, T b) const { return b == T(0) ? T(0) : a / b; }
};
template <typename T>
struct SquaredDifferenceFn {
  T operator()(T a, T b) const {
    const T d = a - b;
    return d * d;
  }
};
// Maximum and Minimum propagate NaN, as TensorFlow's do.
template <typename T>
struct MaximumFn {
  T operator()(T a, T b) const {
    if constexpr (!std::numeric_limits<T>::is_integer) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a < b ? b : a;
  }
};
template <typename T>
struct MinimumFn {
  T operator()(T a, T b) const {
    if constexpr (!std::numeric_limits<T>::is_integer) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return b < a ? b : a;
  }
};
template <typename T>
struct PowFn {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // Exponentiation by squaring; negative exponents are refused before the loop runs.
      T result = 1;
      while (b > 0) {
        if (b & 1) result *= a;
        a *= a;
        b >>= 1;
      }
      return result;
    } else if constexpr (kIsHalf<T>) {
      return T(std::pow(static_cast<float>(a), static_cast<float>(b)));
    } else {
      return std::pow(a, b);
    }
  }
};

// Floating FloorDiv/FloorMod as TensorFlow's google_floor_div / google_floor_fmod.
template <typename C>
C FloorModFloat(C x, C y) {
  C r = std::fmod(x, y);
  if (r != C(0) && ((y < C(0)) != (r < C(0)))) r += y;
  return r;
}

// Integer division, FloorDiv, FloorMod: division by zero is TensorFlow's error.
enum class IntDivKind { kTruncate, kFloor, kFloorMod };

template <IntDivKind kKind, unsigned kFloatSet>
KernelFn DivisionKernel() {
  return [](OpKernelContext& ctx) {
    return Dispatch<kFloatSet | cwise::kIntegers>(ctx, ctx.input(0).dtype(),
                                                  [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T>) {
        const Tensor& y = ctx.input(1);
        const T* yd = Data<T>(y);
        for (int64_t i = 0; i < y.num_elements(); ++i)
          if (yd[i] == T(0)) return ctx.Error("Integer division by zero");
        return BinaryOp<T, T>(ctx, [](T a, T b) -> T {
          if constexpr (std::is_signed_v<T>) {
            // The one overflowing quotient: min / -1 wraps as on two's complement hardware; any
            // value modulo -1 is 0.
            if (b == T(-1)) {
              if (kKind == IntDivKind::kFloorMod) return T(0);
              return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(a));
            }
          }
          if constexpr (kKind == IntDivKind::kTruncate) {
            return a / b;
          } else if constexpr (kKind == IntDivKind::kFloor) {
            T q = a / b;
            if constexpr (std::is_signed_v<T>)
              if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
            return q;
          } else {
            if constexpr (std::is_signed_v<T>) {
              T r = a % b;
              if (r != 0 && ((r < 0) != (b < 0))) r += b;
              return r;
            } else {
              return a % b;
            }
          }
        });
      } else {
        using C = ComputeType<T>;
        return BinaryOp<T, T>(ctx, [](T a, T b) -> T {
          const C x = static_cast<C>(a), y = static_cast<C>(b);
          if constexpr (kKind == IntDivKind::kTruncate) {
            return a / b;
          } else if constexpr (kKind == IntDivKind::kFloor) {
            return T(std::floor(x / y));
          } else {
            return T(FloorModFloat(x, y));
          }
        });
      }
    });
  };
}

Status PowKernel(OpKernelContext& ctx) {
  return Dispatch<cwise::kFloating | cwise::kSignedTypes>(ctx, ctx.input(0).dtype(),
                                                         [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      const Tensor& y = ctx.input(1);
      for (int64_t i = 0; i < y.num_elements(); ++i)
        if (Data<T>(y)[i] < 0)
          return ctx.Error("Integers to negative integer powers are not allowed");
    }
    return BinaryOp<T, T>(ctx, PowFn<T>{});
  });
}

Status AddNKernel(OpKernelContext& ctx) {
  const Tensor& first = ctx.input(0);
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dims() != first.dims()) {
      return ctx.Error("Inputs to operation AddN must have the same size and shape.  Input 0: " +
                       DimsToString(first.dims()) + " != input " + std::to_string(i) + ": " +
                       DimsToString(ctx.input(i).dims()));
    }
  }
  return Dispatch<cwise::kNumeric>(ctx, first.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, first.dims()));
    T* o = MutableData<T>(*out);
    std::copy_n(Data<T>(first), first.num_elements(), o);
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      const T* in = Data<T>(ctx.input(i));
      for (int64_t k = 0; k < first.num_elements(); ++k) o[k] += in[k];
    }
    return OkStatus();
  });
}

// ----- Unary math ---------------------------------------------------------------------------------

// Unary ops with integer kernels too: Neg, Abs, Sign, Square, Reciprocal (integer 1/x), Round
// (identity on integers).
KernelFn UnaryKernel(std::string op) {
  return [op](OpKernelContext& ctx) -> Status {
    const DataType dtype = ctx.input(0).dtype();
    if (DataTypeIsFloating(dtype)) return cwise::FloatUnaryKernel(ctx, op);
    return Dispatch<cwise::kSignedTypes>(ctx, dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        return UnaryOp<T, T>(ctx, [&op](T x) -> T {
          if (op == "Neg") return static_cast<T>(-x);
          if (op == "Abs") return x < 0 ? static_cast<T>(-x) : x;
          if (op == "Sign") return static_cast<T>((x > 0) - (x < 0));
          if (op == "Square") return static_cast<T>(x * x);
          if (op == "Reciprocal" || op == "Inv") return x == 0 ? T(0) : static_cast<T>(T(1) / x);
          return x;  // Round, Floor, Ceil
        });
      } else {
        return ctx.Error("no CPU kernel for element type " + DataTypeName(dtype));
      }
    });
  };
}

KernelFn FloatUnary(std::string op) {
  return [op](OpKernelContext& ctx) { return cwise::FloatUnaryKernel(ctx, op); };
}

Status UnaryOpsCompositionKernel(OpKernelContext& ctx) {
  const AttrValue* names = FindAttr(ctx.attrs(), "op_names");
  if (names == nullptr || names->kind() != AttrValue::Kind::kList)
    return ctx.Error("missing attr 'op_names'");
  const std::vector<std::string>& ops = names->list().s;
  return Dispatch<cwise::kFloating>(ctx, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    std::vector<C (*)(C)> fns;
    for (const std::string& op : ops) {
      C (*fn)(C) = nullptr;
      if constexpr (std::is_same_v<C, double>) fn = cwise::FindDoubleUnary(op);
      else fn = cwise::FindFloatUnary(op);
      if (fn == nullptr) return ctx.Error("unsupported unary op '" + op + "' in op_names");
      fns.push_back(fn);
    }
    // Each op of the chain rounds to T, as the separate ops would.
    return UnaryOp<T, T>(ctx, [&fns](T x) {
      for (auto fn : fns) x = T(fn(static_cast<C>(x)));
      return x;
    });
  });
}

// SigmoidGrad, TanhGrad, RsqrtGrad, SqrtGrad, ReciprocalGrad: f(y, dy) with y the forward output,
// in TensorFlow's operation order (cwise_ops_gradients.h).
template <typename T>
struct SigmoidGradFn {
  T operator()(T y, T dy) const { return dy * y * (T(1) - y); }
};
template <typename T>
struct TanhGradFn {
  T operator()(T y, T dy) const { return dy * (T(1) - y * y); }
};
template <typename T>
struct RsqrtGradFn {
  T operator()(T y, T dy) const { return T(-0.5) * (dy * y) * (y * y); }
};
template <typename T>
struct SqrtGradFn {
  T operator()(T y, T dy) const { return T(0.5) * dy / y; }
};
template <typename T>
struct ReciprocalGradFn {
  T operator()(T y, T dy) const { return -dy * y * y; }
};

// The *Grad ops take two same-shape operands (no broadcasting in TensorFlow either).
template <template <typename> class Fn, unsigned kSet>
KernelFn SameShapeBinaryKernel() {
  return [](OpKernelContext& ctx) -> Status {
    if (ctx.input(0).dims() != ctx.input(1).dims()) {
      return ctx.Error("inputs must have the same shape: " + DimsToString(ctx.input(0).dims()) +
                       " vs. " + DimsToString(ctx.input(1).dims()));
    }
    return BinaryKernel<Fn, kSet>()(ctx);
  };
}

// ----- Logical, comparison, Cast, Select ------------------------------------------------------------

template <typename T>
struct LogicalAndFn {
  bool operator()(bool a, bool b) const { return a && b; }
};
template <typename T>
struct LogicalOrFn {
  bool operator()(bool a, bool b) const { return a || b; }
};

template <template <typename> class Fn>
Status LogicalKernel(OpKernelContext& ctx) {
  return BinaryOp<bool, bool>(ctx, Fn<bool>{});
}

// IsFinite (kFinite) and IsNan.
template <bool kFinite>
Status IsFiniteKernel(OpKernelContext& ctx) {
  return Dispatch<cwise::kFloating>(ctx, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return UnaryOp<T, bool>(ctx, [](T x) {
      const ComputeType<T> v = static_cast<ComputeType<T>>(x);
      return kFinite ? std::isfinite(v) : std::isnan(v);
    });
  });
}

Status LogicalNotKernel(OpKernelContext& ctx) {
  return UnaryOp<bool, bool>(ctx, [](bool x) { return !x; });
}

enum class Cmp { kEq, kNe, kLt, kLe, kGt, kGe };

template <Cmp kCmp>
Status CompareKernel(OpKernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  if constexpr (kCmp == Cmp::kEq || kCmp == Cmp::kNe) {
    // With incompatible_shape_error=false, shapes that do not broadcast compare unequal as a
    // whole: a scalar false (Equal) or true (NotEqual).
    ASSIGN_OR_RETURN(bool shape_error,
                     GetBoolAttr(ctx.attrs(), "incompatible_shape_error", ctx.name()));
    if (!shape_error && !cwise::MakeBroadcast({x.dims(), y.dims()}).ok()) {
      ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, {}));
      MutableData<bool>(*out)[0] = kCmp == Cmp::kNe;
      return OkStatus();
    }
  }
  constexpr unsigned kSet =
      (kCmp == Cmp::kEq || kCmp == Cmp::kNe) ? cwise::kAllNumeric : cwise::kReal;
  if (x.dtype() == DT_STRING) {
    if constexpr (kCmp == Cmp::kEq || kCmp == Cmp::kNe) {
      auto bc = cwise::MakeBroadcast({x.dims(), y.dims()});
      if (!bc.ok()) return ctx.Error(bc.status().message());
      ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, bc->out_dims));
      bool* o = MutableData<bool>(*out);
      cwise::ForEachBroadcast<2>(*bc, [&](int64_t i, const std::array<int64_t, 2>& off) {
        o[i] = (x.strings()[off[0]] == y.strings()[off[1]]) == (kCmp == Cmp::kEq);
      });
      return OkStatus();
    }
  }
  return Dispatch<kSet>(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return BinaryOp<T, bool>(ctx, [](T a, T b) -> bool {
      if constexpr (kCmp == Cmp::kEq) return a == b;
      if constexpr (kCmp == Cmp::kNe) return a != b;
      if constexpr (!kIsComplex<T>) {
        if constexpr (kCmp == Cmp::kLt) return a < b;
        if constexpr (kCmp == Cmp::kLe) return a <= b;
        if constexpr (kCmp == Cmp::kGt) return a > b;
        if constexpr (kCmp == Cmp::kGe) return a >= b;
      }
      return false;
    });
  });
}

template <typename D, typename S>
D CastValue(S x) {
  if constexpr (std::is_same_v<D, bool>) {
    return x != S(0);
  } else if constexpr (kIsComplex<S> && !kIsComplex<D>) {
    return CastValue<D>(x.real());
  } else if constexpr (kIsComplex<D>) {
    return D(CastValue<typename D::value_type>(x));
  } else if constexpr (kIsHalf<S> && kIsHalf<D>) {
    return D(static_cast<float>(x));
  } else if constexpr (kIsHalf<D>) {
    return D(static_cast<float>(x));
  } else if constexpr (kIsHalf<S>) {
    return static_cast<D>(static_cast<float>(x));
  } else {
    return static_cast<D>(x);
  }
}

Status CastKernel(OpKernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(DataType dst, GetTypeAttr(ctx.attrs(), "DstT", ctx.name()));
  if (x.dtype() == dst) {
    ctx.set_output(0, x);
    return OkStatus();
  }
  return Dispatch<cwise::kAllNumeric>(ctx, x.dtype(), [&](auto src_tag) -> Status {
    using S = typename decltype(src_tag)::type;
    return Dispatch<cwise::kAllNumeric>(ctx, dst, [&](auto dst_tag) -> Status {
      using D = typename decltype(dst_tag)::type;
      // The same element type (a reference type's value): the input itself, as above.
      if constexpr (std::is_same_v<S, D>) {
        ctx.set_output(0, x);
        return OkStatus();
      } else {
        return UnaryOp<S, D>(ctx, [](S v) { return CastValue<D>(v); });
      }
    });
  });
}

// Copies element `from` of `src` to element `to` of `dst` (any dtype, strings included).
void CopyElement(const Tensor& src, int64_t from, Tensor& dst, int64_t to) {
  if (src.dtype() == DT_STRING) {
    dst.strings()[to] = src.strings()[from];
  } else if (src.dtype() == DT_RESOURCE) {
    dst.handles()[to] = src.handles()[from];
  } else {
    const size_t size = DataTypeSize(src.dtype());
    std::memcpy(static_cast<char*>(dst.raw_data()) + to * size,
                static_cast<const char*>(src.raw_data()) + from * size, size);
  }
}

Status SelectKernel(OpKernelContext& ctx) {
  const Tensor& cond = ctx.input(0);
  const Tensor& t = ctx.input(1);
  const Tensor& e = ctx.input(2);
  if (t.dims() != e.dims()) {
    return ctx.Error("'then' and 'else' must have the same size.  but received: " +
                     DimsToString(t.dims()) + " vs. " + DimsToString(e.dims()));
  }
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, t.dims()));
  const bool* c = Data<bool>(cond);
  const int64_t n = t.num_elements();
  if (cond.rank() == 0) {
    ctx.set_output(0, c[0] ? t : e);
    return OkStatus();
  }
  if (cond.dims() == t.dims()) {
    for (int64_t i = 0; i < n; ++i) CopyElement(c[i] ? t : e, i, *out, i);
    return OkStatus();
  }
  if (cond.rank() == 1 && t.rank() >= 1 && cond.dim(0) == t.dim(0)) {
    const int64_t row = t.dim(0) == 0 ? 0 : n / t.dim(0);
    for (int64_t i = 0; i < n; ++i) CopyElement(c[i / row] ? t : e, i, *out, i);
    return OkStatus();
  }
  return ctx.Error("'condition' must be a scalar, a vector of the size of the first dimension of "
                   "'then', or have the shape of 'then': " + DimsToString(cond.dims()) + " vs. " +
                   DimsToString(t.dims()));
}

Status SelectV2Kernel(OpKernelContext& ctx) {
  const Tensor& cond = ctx.input(0);
  const Tensor& t = ctx.input(1);
  const Tensor& e = ctx.input(2);
  auto bc = cwise::MakeBroadcast({cond.dims(), t.dims(), e.dims()});
  if (!bc.ok()) return ctx.Error(bc.status().message());
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, bc->out_dims));
  const bool* c = Data<bool>(cond);
  cwise::ForEachBroadcast<3>(*bc, [&](int64_t i, const std::array<int64_t, 3>& off) {
    if (c[off[0]]) CopyElement(t, off[1], *out, i);
    else CopyElement(e, off[2], *out, i);
  });
  return OkStatus();
}

// ----- MatMul ----------------------------------------------------------------------------------

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

// An integer product in uint64_t arithmetic: products and sums modulo 2^64 truncate to exactly
// the wrapped results of the narrower type, so one loop serves every integer type. Eigen's GEMM
// instantiated for the four of them took ~18 s of this file's compile (of ~95 s), for products
// no model runs at scale. a [m, k] and b [k, n] row-major: each row of the output adds rows of b,
// read with unit stride.
void IntegerMatMul(const uint64_t* a, const uint64_t* b, int64_t m, int64_t k, int64_t n,
                   uint64_t* out) {
  std::fill(out, out + m * n, uint64_t{0});
  for (int64_t i = 0; i < m; ++i) {
    uint64_t* row = out + i * n;
    for (int64_t q = 0; q < k; ++q) {
      const uint64_t x = a[i * k + q];
      const uint64_t* brow = b + q * n;
      for (int64_t j = 0; j < n; ++j) row[j] += x * brow[j];
    }
  }
}

// MatMulInto for the floating and complex types: Eigen's GEMM (oneDNN's for float), rows of the
// output split among the pool's threads when the product is large.
template <typename T>
void MatMulFloating(const T* a, bool ta, const T* b, bool tb, int64_t m, int64_t k, int64_t n,
                    T* out, ThreadPool* pool) {
  Eigen::Map<RowMajor<T>> o(out, m, n);
  if (k == 0) {
    o.setZero();
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    // oneDNN's kernels for this CPU (the rest is compiled for generic x86-64), on the intra-op
    // threads; a product too small to gain stays with Eigen. A oneDNN error falls back too.
    if (onednn::Available() && m * n * k >= (int64_t{1} << 12) &&
        onednn::MatMul(a, ta, b, tb, m, k, n, nullptr, out, pool).ok()) {
      return;
    }
  }
  auto rows = [&](int64_t begin, int64_t end) {
    auto product = [&](const auto& lhs, const auto& rhs) {
      o.middleRows(begin, end - begin).noalias() = lhs.middleRows(begin, end - begin) * rhs;
    };
    auto with_rhs = [&](const auto& lhs) {
      if (tb) product(lhs, Eigen::Map<const ColMajor<T>>(b, k, n));
      else product(lhs, Eigen::Map<const RowMajor<T>>(b, k, n));
    };
    if (ta) with_rhs(Eigen::Map<const ColMajor<T>>(a, m, k));
    else with_rhs(Eigen::Map<const RowMajor<T>>(a, m, k));
  };
  const int64_t work = m * n * k;
  if (pool != nullptr && pool->parallelism() > 1 && work >= (int64_t{1} << 18) && m >= 2) {
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, n * k));
    pool->ParallelFor(m, grain, rows);
  } else {
    rows(0, m);
  }
}

// out[m, n] = op(a) * op(b) with a stored [m, k] (or [k, m] when transposed) row-major.
template <typename T>
void MatMulInto(const T* a, bool ta, const T* b, bool tb, int64_t m, int64_t k, int64_t n, T* out,
                ThreadPool* pool) {
  if constexpr (std::is_integral_v<T>) {
    // Widened to uint64_t (a negative value to its residue modulo 2^64) in row-major order, a
    // transposed operand transposed as it is widened (read in place, b's transpose strode over
    // its rows for every element of the product), and truncated back.
    std::vector<uint64_t> x(m * k), y(k * n), product(m * n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t q = 0; q < k; ++q) {
        x[i * k + q] = static_cast<uint64_t>(ta ? a[q * m + i] : a[i * k + q]);
      }
    }
    for (int64_t q = 0; q < k; ++q) {
      for (int64_t j = 0; j < n; ++j) {
        y[q * n + j] = static_cast<uint64_t>(tb ? b[j * k + q] : b[q * n + j]);
      }
    }
    IntegerMatMul(x.data(), y.data(), m, k, n, product.data());
    for (int64_t i = 0; i < m * n; ++i) out[i] = static_cast<T>(product[i]);
  } else {
    MatMulFloating(a, ta, b, tb, m, k, n, out, pool);
  }
}

constexpr unsigned kMatMulTypes = cwise::kFloating | cwise::kSignedTypes | cwise::kComplexTypes;

Status MatMulKernel(OpKernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  ASSIGN_OR_RETURN(bool ta, GetBoolAttr(ctx.attrs(), "transpose_a", ctx.name()));
  ASSIGN_OR_RETURN(bool tb, GetBoolAttr(ctx.attrs(), "transpose_b", ctx.name()));
  if (a.rank() != 2 || b.rank() != 2) {
    return ctx.Error("In[0] and In[1] must be matrices: " + DimsToString(a.dims()) + " vs. " +
                     DimsToString(b.dims()));
  }
  const int64_t m = a.dim(ta ? 1 : 0), k = a.dim(ta ? 0 : 1);
  const int64_t k2 = b.dim(tb ? 1 : 0), n = b.dim(tb ? 0 : 1);
  if (k != k2) {
    return ctx.Error("Matrix size-incompatible: In[0]: " + DimsToString(a.dims()) +
                     ", In[1]: " + DimsToString(b.dims()));
  }
  return Dispatch<kMatMulTypes>(ctx, a.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, {m, n}));
    MatMulInto<T>(Data<T>(a), ta, Data<T>(b), tb, m, k, n, MutableData<T>(*out), ctx.pool());
    return OkStatus();
  });
}

Status BatchMatMulV2Kernel(OpKernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  ASSIGN_OR_RETURN(bool adj_x, GetBoolAttr(ctx.attrs(), "adj_x", ctx.name()));
  ASSIGN_OR_RETURN(bool adj_y, GetBoolAttr(ctx.attrs(), "adj_y", ctx.name()));
  if (x.rank() < 2 || y.rank() < 2) {
    return ctx.Error("In[0] and In[1] must have rank at least 2: " + DimsToString(x.dims()) +
                     " vs. " + DimsToString(y.dims()));
  }
  const int64_t m = x.dim(x.rank() - (adj_x ? 1 : 2)), k = x.dim(x.rank() - (adj_x ? 2 : 1));
  const int64_t k2 = y.dim(y.rank() - (adj_y ? 1 : 2)), n = y.dim(y.rank() - (adj_y ? 2 : 1));
  if (k != k2) {
    return ctx.Error("Matrix size-incompatible: In[0]: " + DimsToString(x.dims()) +
                     ", In[1]: " + DimsToString(y.dims()));
  }
  std::vector<int64_t> xb(x.dims().begin(), x.dims().end() - 2);
  std::vector<int64_t> yb(y.dims().begin(), y.dims().end() - 2);
  auto bc = cwise::MakeBroadcast({xb, yb});
  if (!bc.ok()) {
    return ctx.Error("In[0] and In[1] must have compatible batch dimensions: " +
                     DimsToString(x.dims()) + " vs. " + DimsToString(y.dims()));
  }
  std::vector<int64_t> out_dims = bc->out_dims;
  out_dims.push_back(m);
  out_dims.push_back(n);
  return Dispatch<kMatMulTypes>(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, out_dims));
    const T* xd = Data<T>(x);
    const T* yd = Data<T>(y);
    T* od = MutableData<T>(*out);
    auto one = [&](int64_t i, int64_t xo, int64_t yo) {
      MatMulInto<T>(xd + xo * m * k, adj_x, yd + yo * k * n, adj_y, m, k, n, od + i * m * n,
                    ctx.pool());
      if constexpr (kIsComplex<T>) {
        // adj_x/adj_y take the conjugate transpose, which MatMulInto does not: recomputed
        // directly (complex batch products are rare).
        if (adj_x || adj_y) {
          Eigen::Map<RowMajor<T>> o(od + i * m * n, m, n);
          for (int64_t r = 0; r < m; ++r)
            for (int64_t c = 0; c < n; ++c) {
              T s(0);
              for (int64_t q = 0; q < k; ++q) {
                T av = adj_x ? std::conj(xd[xo * m * k + q * m + r]) : xd[xo * m * k + r * k + q];
                T bv = adj_y ? std::conj(yd[yo * k * n + c * k + q]) : yd[yo * k * n + q * n + c];
                s += av * bv;
              }
              o(r, c) = s;
            }
        }
      }
    };
    cwise::ForEachBroadcast<2>(*bc, [&](int64_t i, const std::array<int64_t, 2>& off) {
      one(i, off[0], off[1]);
    });
    return OkStatus();
  });
}

// ----- Reductions ------------------------------------------------------------------------------

enum class Red { kSum, kMean, kProd, kMax, kMin, kAll, kAny };

template <Red kRed, typename T>
T ReduceValues(const T* v, int64_t n) {
  if constexpr (kRed == Red::kSum || kRed == Red::kMean) {
    T s;
    if constexpr (kIsHalf<T>) {
      // 16-bit floats accumulate in float, as TensorFlow's reductions do for them.
      std::vector<float> f(v, v + n);
      for (int64_t i = 0; i < n; ++i) f[i] = static_cast<float>(v[i]);
      float sum = cwise::PairwiseSum(f.data(), n);
      if constexpr (kRed == Red::kMean) sum /= static_cast<float>(n);
      return T(sum);
    } else {
      s = cwise::PairwiseSum(v, n);
      if constexpr (kRed == Red::kMean) {
        if constexpr (kIsComplex<T>) s /= typename T::value_type(n);
        else s /= static_cast<T>(n);
      }
      return s;
    }
  } else if constexpr (kRed == Red::kProd) {
    T p = T(1);
    for (int64_t i = 0; i < n; ++i) p *= v[i];
    return p;
  } else if constexpr (kRed == Red::kAll) {
    for (int64_t i = 0; i < n; ++i)
      if (!v[i]) return false;
    return true;
  } else if constexpr (kRed == Red::kAny) {
    for (int64_t i = 0; i < n; ++i)
      if (v[i]) return true;
    return false;
  } else {
    // Max and Min of nothing are the identities TensorFlow gives (lowest / highest value).
    if constexpr (kIsComplex<T>) {
      return T(0);
    } else {
      T r = kRed == Red::kMax ? Eigen::NumTraits<T>::lowest() : Eigen::NumTraits<T>::highest();
      if constexpr (!std::numeric_limits<T>::is_integer && !std::is_same_v<T, bool>) {
        if (kRed == Red::kMax && !std::is_same_v<T, bool>) r = -Eigen::NumTraits<T>::infinity();
        if (kRed == Red::kMin && !std::is_same_v<T, bool>) r = Eigen::NumTraits<T>::infinity();
      }
      for (int64_t i = 0; i < n; ++i) {
        if (v[i] != v[i]) return v[i];  // NaN propagates
        if (kRed == Red::kMax ? r < v[i] : v[i] < r) r = v[i];
      }
      return r;
    }
  }
}

template <Red kRed>
Status ReductionKernel(OpKernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(bool keep_dims, GetBoolAttr(ctx.attrs(), "keep_dims", ctx.name()));
  auto r = cwise::MakeReduction(x.dims(), ctx.input(1).AsInt64Vector());
  if (!r.ok()) return ctx.Error(r.status().message());
  constexpr unsigned kSet = kRed == Red::kAll || kRed == Red::kAny ? cwise::kBoolType
                       : kRed == Red::kMax || kRed == Red::kMin ? cwise::kReal
                                                                : cwise::kNumeric;
  return Dispatch<kSet>(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, keep_dims ? r->keep_dims_out
                                                                     : r->out_dims));
    T* o = MutableData<T>(*out);
    cwise::ForEachReduction(*r, Data<T>(x), [&](int64_t i, const T* v, int64_t n) {
      o[i] = ReduceValues<kRed, T>(v, n);
    });
    return OkStatus();
  });
}

template <bool kMax>
Status ArgKernel(OpKernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& dim_t = ctx.input(1);
  if (dim_t.num_elements() != 1)
    return ctx.Error("dim must be a scalar, but received tensor of shape: " +
                     DimsToString(dim_t.dims()));
  int64_t axis = dim_t.GetAsInt64(0);
  const int64_t rank = x.rank();
  if (axis < -rank || axis >= rank) {
    return ctx.Error("Expected dimension in the range [" + std::to_string(-rank) + ", " +
                     std::to_string(rank) + "), but got " + std::to_string(axis));
  }
  if (axis < 0) axis += rank;
  if (x.dim(axis) == 0)
    return ctx.Error("Reduction axis " + std::to_string(axis) + " is empty in shape " +
                     DimsToString(x.dims()));
  auto r = cwise::MakeReduction(x.dims(), {axis});
  if (!r.ok()) return ctx.Error(r.status().message());
  return Dispatch<cwise::kReal | cwise::kBoolType>(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, r->out_dims));
    cwise::ForEachReduction(*r, Data<T>(x), [&](int64_t i, const T* v, int64_t n) {
      // First index of the extreme value; a NaN wins (Eigen's ArgMax propagates it).
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        if constexpr (!std::numeric_limits<T>::is_integer && !std::is_same_v<T, bool>) {
          if (v[best] != v[best]) break;
          if (v[j] != v[j]) {
            best = j;
            break;
          }
        }
        if (kMax ? v[best] < v[j] : v[j] < v[best]) best = j;
      }
      out->SetFromInt64(i, best);
    });
    return OkStatus();
  });
}

// ----- Shape functions ---------------------------------------------------------------------------

Status MatMulShape(InferenceContext& c) {
  PartialShape a, b;
  RETURN_IF_ERROR(c.WithRank(0, 2, &a));
  RETURN_IF_ERROR(c.WithRank(1, 2, &b));
  ASSIGN_OR_RETURN(bool ta, GetBoolAttr(c.attrs(), "transpose_a", c.node_name()));
  ASSIGN_OR_RETURN(bool tb, GetBoolAttr(c.attrs(), "transpose_b", c.node_name()));
  if (a.unknown_rank() || b.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownOfRank(2));
    return OkStatus();
  }
  const int64_t m = a.dim(ta ? 1 : 0), k = a.dim(ta ? 0 : 1);
  const int64_t k2 = b.dim(tb ? 1 : 0), n = b.dim(tb ? 0 : 1);
  if (k >= 0 && k2 >= 0 && k != k2) {
    return c.Error("Dimensions must be equal, but are " + std::to_string(k) + " and " +
                   std::to_string(k2) + " for MatMul with input shapes: " + a.ToString() +
                   ", " + b.ToString());
  }
  c.set_output(0, PartialShape({m, n}));
  return OkStatus();
}

Status BatchMatMulV2Shape(InferenceContext& c) {
  PartialShape x, y;
  RETURN_IF_ERROR(c.WithRankAtLeast(0, 2, &x));
  RETURN_IF_ERROR(c.WithRankAtLeast(1, 2, &y));
  if (x.unknown_rank() || y.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  ASSIGN_OR_RETURN(bool adj_x, GetBoolAttr(c.attrs(), "adj_x", c.node_name()));
  ASSIGN_OR_RETURN(bool adj_y, GetBoolAttr(c.attrs(), "adj_y", c.node_name()));
  const int64_t xr = x.rank(), yr = y.rank();
  const int64_t m = x.dim(xr - (adj_x ? 1 : 2)), k = x.dim(xr - (adj_x ? 2 : 1));
  const int64_t k2 = y.dim(yr - (adj_y ? 1 : 2)), n = y.dim(yr - (adj_y ? 2 : 1));
  if (k >= 0 && k2 >= 0 && k != k2) {
    return c.Error("Dimensions must be equal, but are " + std::to_string(k) + " and " +
                   std::to_string(k2) + " for BatchMatMulV2 with input shapes: " + x.ToString() +
                   ", " + y.ToString());
  }
  PartialShape xb(std::vector<int64_t>(x.dims().begin(), x.dims().end() - 2));
  PartialShape yb(std::vector<int64_t>(y.dims().begin(), y.dims().end() - 2));
  auto batch = shape_fn::BroadcastShapes(xb, yb);
  if (!batch.ok()) return c.Error(batch.status().message());
  std::vector<int64_t> dims = batch->dims();
  dims.push_back(m);
  dims.push_back(n);
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

// Sum, Mean, ...: the axes input known: the reduced shape; else the rank when keep_dims, or an
// unknown shape (TensorFlow's ReductionShape).
Status ReductionShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(bool keep_dims, GetBoolAttr(c.attrs(), "keep_dims", c.node_name()));
  const PartialShape& in = c.input(0);
  const Tensor* axes = c.input_tensor(1);
  if (axes == nullptr || in.unknown_rank()) {
    if (keep_dims && !in.unknown_rank()) c.set_output(0, PartialShape::UnknownOfRank(in.rank()));
    else if (c.input(1).rank() == 1 && c.input(1).dim(0) == 0) c.set_output(0, in);
    else c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  const int64_t rank = in.rank();
  std::vector<bool> reduced(rank, false);
  for (int64_t axis : axes->AsInt64Vector()) {
    if (axis < -rank || axis >= rank) {
      return c.Error("Invalid reduction dimension " + std::to_string(axis) + " for input with " +
                     std::to_string(rank) + " dimensions.");
    }
    reduced[axis < 0 ? axis + rank : axis] = true;
  }
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) dims.push_back(in.dim(d));
    else if (keep_dims) dims.push_back(1);
  }
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

Status ArgShape(InferenceContext& c) {
  const PartialShape& in = c.input(0);
  const Tensor* dim = c.input_tensor(1);
  if (in.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  if (in.rank() == 0) return c.Error("input must have rank at least 1");
  if (dim == nullptr) {
    c.set_output(0, PartialShape::UnknownOfRank(in.rank() - 1));
    return OkStatus();
  }
  int64_t axis = dim->GetAsInt64(0);
  if (axis < -in.rank() || axis >= in.rank()) {
    return c.Error("Expected dimension in the range [" + std::to_string(-in.rank()) + ", " +
                   std::to_string(in.rank()) + "), but got " + std::to_string(axis));
  }
  if (axis < 0) axis += in.rank();
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < in.rank(); ++d)
    if (d != axis) dims.push_back(in.dim(d));
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

// Shape functions that merge all inputs (AddN, the *Grad ops).
Status MergeAllInputsShape(InferenceContext& c) {
  PartialShape merged = c.input(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    if (!merged.IsCompatibleWith(c.input(i))) {
      return c.Error("Shapes must be equal rank, but are " + merged.ToString() + " and " +
                     c.input(i).ToString());
    }
    merged = merged.Merge(c.input(i));
  }
  c.set_output(0, merged);
  return OkStatus();
}

Status EqualShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(bool shape_error,
                   GetBoolAttr(c.attrs(), "incompatible_shape_error", c.node_name()));
  if (!shape_error) {
    auto s = shape_fn::BroadcastShapes(c.input(0), c.input(1));
    c.set_output(0, s.ok() ? *s : PartialShape::UnknownRank());
    return OkStatus();
  }
  return shape_fn::BroadcastBinaryOpShape(c);
}

Status SelectShape(InferenceContext& c) {
  const PartialShape& t = c.input(1);
  const PartialShape& e = c.input(2);
  if (!t.IsCompatibleWith(e)) {
    return c.Error("'then' and 'else' must have the same shape: " + t.ToString() + " vs. " +
                   e.ToString());
  }
  c.set_output(0, t.Merge(e));
  return OkStatus();
}

Status SelectV2Shape(InferenceContext& c) {
  auto te = shape_fn::BroadcastShapes(c.input(1), c.input(2));
  if (!te.ok()) return c.Error(te.status().message());
  auto all = shape_fn::BroadcastShapes(c.input(0), *te);
  if (!all.ok()) return c.Error(all.status().message());
  c.set_output(0, *all);
  return OkStatus();
}

}  // namespace

void RegisterMathOps(OpRegistry& r) {
  RegisterSegmentOps(r);
  REGISTER_OP(r, "AddV2")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, int64, complex64, complex128}")
      .SetIsCommutative()
      .SetIsAggregate()
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(BinaryKernel<AddFn, cwise::kNumeric>());
  REGISTER_OP(r, "Add")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, complex128, string}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(BinaryKernel<AddFn, cwise::kNumeric>());
  REGISTER_OP(r, "AddN")
      .Input("inputs: N * T")
      .Output("sum: T")
      .Attr("N: int >= 1")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64, variant}")
      .SetIsCommutative()
      .SetIsAggregate()
      .SetShapeFn(MergeAllInputsShape)
      .SetKernel(AddNKernel);
  REGISTER_OP(r, "Sub")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, int64, complex64, complex128, uint32, uint64}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(BinaryKernel<SubFn, cwise::kNumeric>());
  REGISTER_OP(r, "Mul")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, complex64, complex128}")
      .SetIsCommutative()
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(BinaryKernel<MulFn, cwise::kNumeric>());
  REGISTER_OP(r, "RealDiv")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, complex64, complex128}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(BinaryKernel<RealDivFn, cwise::kNumeric>());
  REGISTER_OP(r, "Div")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, complex64, complex128}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(DivisionKernel<IntDivKind::kTruncate, cwise::kFloating | cwise::kComplexTypes>());
  REGISTER_OP(r, "DivNoNan")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {half, float, bfloat16, double, complex64, complex128}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(BinaryKernel<DivNoNanFn, cwise::kFloating | cwise::kComplexTypes>());
  REGISTER_OP(r, "FloorDiv")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, int64, complex64, complex128}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(DivisionKernel<IntDivKind::kFloor, cwise::kFloating>());
  REGISTER_OP(r, "FloorMod")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {int8, int16, int32, int64, uint8, uint16, uint32, uint64, bfloat16, half, float, double}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(DivisionKernel<IntDivKind::kFloorMod, cwise::kFloating>());
  REGISTER_OP(r, "Maximum")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, uint64}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(BinaryKernel<MaximumFn, cwise::kReal>());
  REGISTER_OP(r, "Minimum")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, uint64}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(BinaryKernel<MinimumFn, cwise::kReal>());
  REGISTER_OP(r, "Pow")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, float, half, double, int8, int16, int32, int64, complex64, complex128}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(PowKernel);
  REGISTER_OP(r, "SquaredDifference")
      .Input("x: T")
      .Input("y: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, int32, int64, complex64, complex128}")
      .SetIsCommutative()
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(BinaryKernel<SquaredDifferenceFn, cwise::kFloating | cwise::kSignedTypes>());
  REGISTER_OP(r, "Square")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, int8, int16, int32, int64, uint8, uint16, uint32, uint64, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(UnaryKernel("Square"));
  REGISTER_OP(r, "Neg")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(UnaryKernel("Neg"));
  REGISTER_OP(r, "Abs")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, int8, int16, int32, int64}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(UnaryKernel("Abs"));
  REGISTER_OP(r, "Sign")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(UnaryKernel("Sign"));
  REGISTER_OP(r, "Reciprocal")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(UnaryKernel("Reciprocal"));
  REGISTER_OP(r, "Sqrt")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Sqrt"));
  REGISTER_OP(r, "Rsqrt")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Rsqrt"));
  REGISTER_OP(r, "Exp")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Exp"));
  REGISTER_OP(r, "Log")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Log"));
  REGISTER_OP(r, "Log1p")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Log1p"));
  REGISTER_OP(r, "Tanh")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Tanh"));
  REGISTER_OP(r, "Sigmoid")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Sigmoid"));
  REGISTER_OP(r, "Sin")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Sin"));
  REGISTER_OP(r, "Cos")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Cos"));
  REGISTER_OP(r, "Floor")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Floor"));
  REGISTER_OP(r, "Ceil")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Ceil"));
  REGISTER_OP(r, "Round")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(UnaryKernel("Round"));
  REGISTER_OP(r, "Erf")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Erf"));
  REGISTER_OP(r, "IsFinite")
      .Input("x: T")
      .Output("y: bool")
      .Attr("T: {bfloat16, half, float, double}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(IsFiniteKernel<true>);
  REGISTER_OP(r, "IsNan")
      .Input("x: T")
      .Output("y: bool")
      .Attr("T: {bfloat16, half, float, double}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(IsFiniteKernel<false>);
  REGISTER_OP(r, "LogicalAnd")
      .Input("x: bool")
      .Input("y: bool")
      .Output("z: bool")
      .SetIsCommutative()
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(LogicalKernel<LogicalAndFn>);
  REGISTER_OP(r, "LogicalOr")
      .Input("x: bool")
      .Input("y: bool")
      .Output("z: bool")
      .SetIsCommutative()
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(LogicalKernel<LogicalOrFn>);
  REGISTER_OP(r, "LogicalNot")
      .Input("x: bool")
      .Output("y: bool")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(LogicalNotKernel);
  REGISTER_OP(r, "Cast")
      .Input("x: SrcT")
      .Output("y: DstT")
      .Attr("SrcT: type")
      .Attr("DstT: type")
      .Attr("Truncate: bool = false")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(CastKernel);
  REGISTER_OP(r, "Equal")
      .Input("x: T")
      .Input("y: T")
      .Output("z: bool")
      .Attr("T: type")
      .Attr("incompatible_shape_error: bool = true")
      .SetIsCommutative()
      .SetShapeFn(EqualShape)
      .SetKernel(CompareKernel<Cmp::kEq>);
  REGISTER_OP(r, "NotEqual")
      .Input("x: T")
      .Input("y: T")
      .Output("z: bool")
      .Attr("T: type")
      .Attr("incompatible_shape_error: bool = true")
      .SetIsCommutative()
      .SetShapeFn(EqualShape)
      .SetKernel(CompareKernel<Cmp::kNe>);
  REGISTER_OP(r, "Less")
      .Input("x: T")
      .Input("y: T")
      .Output("z: bool")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(CompareKernel<Cmp::kLt>);
  REGISTER_OP(r, "LessEqual")
      .Input("x: T")
      .Input("y: T")
      .Output("z: bool")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(CompareKernel<Cmp::kLe>);
  REGISTER_OP(r, "Greater")
      .Input("x: T")
      .Input("y: T")
      .Output("z: bool")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(CompareKernel<Cmp::kGt>);
  REGISTER_OP(r, "GreaterEqual")
      .Input("x: T")
      .Input("y: T")
      .Output("z: bool")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(CompareKernel<Cmp::kGe>);
  REGISTER_OP(r, "Select")
      .Input("condition: bool")
      .Input("t: T")
      .Input("e: T")
      .Output("output: T")
      .Attr("T: type")
      .SetShapeFn(SelectShape)
      .SetKernel(SelectKernel);
  REGISTER_OP(r, "SelectV2")
      .Input("condition: bool")
      .Input("t: T")
      .Input("e: T")
      .Output("output: T")
      .Attr("T: type")
      .SetShapeFn(SelectV2Shape)
      .SetKernel(SelectV2Kernel);
  REGISTER_OP(r, "MatMul")
      .Input("a: T")
      .Input("b: T")
      .Output("product: T")
      .Attr("transpose_a: bool = false")
      .Attr("transpose_b: bool = false")
      .Attr("T: {bfloat16, half, float, double, int32, int64, uint8, uint16, uint32, uint64, complex64, complex128}")
      .Attr("grad_a: bool = false")
      .Attr("grad_b: bool = false")
      .SetShapeFn(MatMulShape)
      .SetKernel(MatMulKernel);
  REGISTER_OP(r, "BatchMatMulV2")
      .Input("x: T")
      .Input("y: T")
      .Output("output: T")
      .Attr("T: {bfloat16, half, float, double, int16, int32, int64, uint8, uint16, uint32, uint64, complex64, complex128}")
      .Attr("adj_x: bool = false")
      .Attr("adj_y: bool = false")
      .Attr("grad_x: bool = false")
      .Attr("grad_y: bool = false")
      .SetShapeFn(BatchMatMulV2Shape)
      .SetKernel(BatchMatMulV2Kernel);
  REGISTER_OP(r, "Sum")
      .Input("input: T")
      .Input("reduction_indices: Tidx")
      .Output("output: T")
      .Attr("keep_dims: bool = false")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .SetShapeFn(ReductionShape)
      .SetKernel(ReductionKernel<Red::kSum>)
      .CompileTimeConstInput("reduction_indices");
  REGISTER_OP(r, "Mean")
      .Input("input: T")
      .Input("reduction_indices: Tidx")
      .Output("output: T")
      .Attr("keep_dims: bool = false")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .SetShapeFn(ReductionShape)
      .SetKernel(ReductionKernel<Red::kMean>)
      .CompileTimeConstInput("reduction_indices");
  REGISTER_OP(r, "Max")
      .Input("input: T")
      .Input("reduction_indices: Tidx")
      .Output("output: T")
      .Attr("keep_dims: bool = false")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64, qint8, quint8, qint32, qint16, quint16}")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .SetShapeFn(ReductionShape)
      .SetKernel(ReductionKernel<Red::kMax>)
      .CompileTimeConstInput("reduction_indices");
  REGISTER_OP(r, "Min")
      .Input("input: T")
      .Input("reduction_indices: Tidx")
      .Output("output: T")
      .Attr("keep_dims: bool = false")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64, qint8, quint8, qint32, qint16, quint16}")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .SetShapeFn(ReductionShape)
      .SetKernel(ReductionKernel<Red::kMin>)
      .CompileTimeConstInput("reduction_indices");
  REGISTER_OP(r, "Prod")
      .Input("input: T")
      .Input("reduction_indices: Tidx")
      .Output("output: T")
      .Attr("keep_dims: bool = false")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .SetShapeFn(ReductionShape)
      .SetKernel(ReductionKernel<Red::kProd>)
      .CompileTimeConstInput("reduction_indices");
  REGISTER_OP(r, "All")
      .Input("input: bool")
      .Input("reduction_indices: Tidx")
      .Output("output: bool")
      .Attr("keep_dims: bool = false")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .SetShapeFn(ReductionShape)
      .SetKernel(ReductionKernel<Red::kAll>)
      .CompileTimeConstInput("reduction_indices");
  REGISTER_OP(r, "Any")
      .Input("input: bool")
      .Input("reduction_indices: Tidx")
      .Output("output: bool")
      .Attr("keep_dims: bool = false")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .SetShapeFn(ReductionShape)
      .SetKernel(ReductionKernel<Red::kAny>)
      .CompileTimeConstInput("reduction_indices");
  REGISTER_OP(r, "ArgMax")
      .Input("input: T")
      .Input("dimension: Tidx")
      .Output("output: output_type")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64, qint8, quint8, qint32, qint16, quint16, bool}")
      .Attr("Tidx: {int16, int32, int64} = DT_INT32")
      .Attr("output_type: {int16, uint16, int32, int64} = DT_INT64")
      .SetShapeFn(ArgShape)
      .SetKernel(ArgKernel<true>)
      .CompileTimeConstInput("dimension");
  REGISTER_OP(r, "ArgMin")
      .Input("input: T")
      .Input("dimension: Tidx")
      .Output("output: output_type")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64, qint8, quint8, qint32, qint16, quint16, bool}")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .Attr("output_type: {int32, int64} = DT_INT64")
      .SetShapeFn(ArgShape)
      .SetKernel(ArgKernel<false>)
      .CompileTimeConstInput("dimension");
  REGISTER_OP(r, "_UnaryOpsComposition")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {float, half, double}")
      .Attr("op_names: list(string)")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(UnaryOpsCompositionKernel);
  REGISTER_OP(r, "SigmoidGrad")
      .Input("y: T")
      .Input("dy: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(MergeAllInputsShape)
      .SetKernel(SameShapeBinaryKernel<SigmoidGradFn, cwise::kFloating>());
  REGISTER_OP(r, "TanhGrad")
      .Input("y: T")
      .Input("dy: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(MergeAllInputsShape)
      .SetKernel(SameShapeBinaryKernel<TanhGradFn, cwise::kFloating>());
  REGISTER_OP(r, "RsqrtGrad")
      .Input("y: T")
      .Input("dy: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(MergeAllInputsShape)
      .SetKernel(SameShapeBinaryKernel<RsqrtGradFn, cwise::kFloating>());
  REGISTER_OP(r, "SqrtGrad")
      .Input("y: T")
      .Input("dy: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(MergeAllInputsShape)
      .SetKernel(SameShapeBinaryKernel<SqrtGradFn, cwise::kFloating>());
  REGISTER_OP(r, "ReciprocalGrad")
      .Input("y: T")
      .Input("dy: T")
      .Output("z: T")
      .Attr("T: {bfloat16, half, float, double, complex64, complex128}")
      .SetShapeFn(MergeAllInputsShape)
      .SetKernel(SameShapeBinaryKernel<ReciprocalGradFn, cwise::kFloating>());
}

}  // namespace xlens::graph

#include "compiler/graph/ops/math_ops_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace xlens::graph::cwise {
namespace {

// TensorFlow's SELU constants (nn_ops.cc / selu_op).
constexpr double kSeluScale = 1.0507009873554804934193349852946;
constexpr double kSeluScaleAlpha = 1.7580993408473768599402175208123;

template <typename C>
C Sign(C x) {
  if (x > C(0)) return C(1);
  if (x < C(0)) return C(-1);
  return x;  // 0, -0 and NaN stay
}

template <typename C>
C (*FindUnary(const std::string& op))(C) {
  using Fn = C (*)(C);
  static const std::pair<const char*, Fn> kTable[] = {
      {"Abs", [](C x) { return std::abs(x); }},
      {"Neg", [](C x) { return -x; }},
      {"Sign", [](C x) { return Sign(x); }},
      {"Square", [](C x) { return x * x; }},
      {"Sqrt", [](C x) { return std::sqrt(x); }},
      {"Rsqrt", [](C x) { return C(1) / std::sqrt(x); }},
      {"Reciprocal", [](C x) { return C(1) / x; }},
      {"Inv", [](C x) { return C(1) / x; }},
      {"Exp", [](C x) { return std::exp(x); }},
      {"Expm1", [](C x) { return std::expm1(x); }},
      {"Log", [](C x) { return std::log(x); }},
      {"Log1p", [](C x) { return std::log1p(x); }},
      {"Tanh", [](C x) { return std::tanh(x); }},
      {"Sigmoid", [](C x) { return C(1) / (C(1) + std::exp(-x)); }},
      {"Sin", [](C x) { return std::sin(x); }},
      {"Cos", [](C x) { return std::cos(x); }},
      {"Tan", [](C x) { return std::tan(x); }},
      {"Asin", [](C x) { return std::asin(x); }},
      {"Acos", [](C x) { return std::acos(x); }},
      {"Atan", [](C x) { return std::atan(x); }},
      {"Sinh", [](C x) { return std::sinh(x); }},
      {"Cosh", [](C x) { return std::cosh(x); }},
      {"Asinh", [](C x) { return std::asinh(x); }},
      {"Acosh", [](C x) { return std::acosh(x); }},
      {"Atanh", [](C x) { return std::atanh(x); }},
      {"Floor", [](C x) { return std::floor(x); }},
      {"Ceil", [](C x) { return std::ceil(x); }},
      // Round and Rint round halves to even (the default rounding mode).
      {"Round", [](C x) { return std::nearbyint(x); }},
      {"Rint", [](C x) { return std::nearbyint(x); }},
      {"Erf", [](C x) { return std::erf(x); }},
      {"Relu", [](C x) { return x > C(0) ? x : (x == x ? C(0) : x); }},
      {"Relu6", [](C x) { return std::min(std::max(x, C(0)), C(6)); }},
      // TensorFlow's Elu and Selu use exp(x) - 1, not expm1.
      {"Elu", [](C x) { return x < C(0) ? std::exp(x) - C(1) : x; }},
      {"Selu",
       [](C x) {
         return x < C(0) ? C(kSeluScaleAlpha) * (std::exp(x) - C(1)) : C(kSeluScale) * x;
       }},
      {"Softplus",
       [](C x) {
         // As TensorFlow's softplus functor: past a threshold the result is x (or exp(x)).
         const C threshold = std::log(std::numeric_limits<C>::epsilon()) + C(2);
         if (x > -threshold) return x;
         if (x < threshold) return std::exp(x);
         return std::log1p(std::exp(x));
       }},
  };
  for (const auto& [name, fn] : kTable)
    if (op == name) return fn;
  return nullptr;
}

}  // namespace

FloatUnaryFn FindFloatUnary(const std::string& op) { return FindUnary<float>(op); }
DoubleUnaryFn FindDoubleUnary(const std::string& op) { return FindUnary<double>(op); }

Status FloatUnaryKernel(OpKernelContext& ctx, const std::string& op) {
  return Dispatch<kFloating>(ctx, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    C (*fn)(C) = FindUnary<C>(op);
    if (fn == nullptr) return ctx.Error("'" + op + "' is not a unary op");
    return UnaryOp<T, T>(ctx, [fn](T x) { return T(fn(static_cast<C>(x))); });
  });
}

}  // namespace xlens::graph::cwise

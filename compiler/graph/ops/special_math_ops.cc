// The special functions of TensorFlow's math_ops that Keras layers reach: Erfc (exact GELU),
// Erfinv and Ndtri (truncated-normal initializers, inverse CDFs), Lgamma and Digamma (the
// distributions' log-probabilities), and Zeta and Polygamma (Digamma's gradient). Each is evaluated in double and rounded once to the element
// type, so float results are the correctly rounded ones TensorFlow's Eigen kernels approximate.
#include "compiler/graph/ops/special_math.h"

#include <cmath>
#include <limits>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/cwise.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {

namespace special {

namespace {
constexpr double kPi = 3.14159265358979323846264338327950288;
constexpr double kSqrt2 = 1.41421356237309504880168872420969808;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Acklam's rational approximation of the normal quantile (relative error < 1.2e-9), the
// starting point of one Halley step on erfc below.
double NdtriApprox(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                             -2.759285104469687e+02, 1.383577518672690e+02,
                             -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                             -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                             -2.400758277161838e+00, -2.549732539343734e+00,
                             4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                             2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  if (p < kLow) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - kLow) return -NdtriApprox(1 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}
}  // namespace

double Ndtri(double p) {
  if (std::isnan(p) || p < 0 || p > 1) return kNaN;
  if (p == 0) return -kInf;
  if (p == 1) return kInf;
  // The lower half is refined on the lower tail (0.5 * erfc(-x / sqrt 2) = p), which keeps full
  // relative precision for tiny p; the upper half by symmetry.
  if (p > 0.5) return -Ndtri(1 - p);
  double x = NdtriApprox(p);
  for (int i = 0; i < 2; ++i) {
    const double e = 0.5 * std::erfc(-x / kSqrt2) - p;
    const double u = e * std::sqrt(2 * kPi) * std::exp(x * x / 2);
    x = x - u / (1 + x * u / 2);
  }
  return x;
}

double Erfinv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return kNaN;
  if (y == 1) return kInf;
  if (y == -1) return -kInf;
  const double a = std::fabs(y);
  double x;
  if (a <= 0.5) {
    // Newton on erf itself from the series' first terms: full relative precision near 0.
    x = y * (std::sqrt(kPi) / 2) * (1 + kPi * y * y / 12);
    for (int i = 0; i < 4; ++i) {
      x -= (std::erf(x) - y) / (2 / std::sqrt(kPi) * std::exp(-x * x));
    }
    return x;
  }
  // Near +-1: erfinv(y) = -ndtri((1 - |y|) / 2) / sqrt 2, 1 - |y| exact.
  x = -Ndtri((1 - a) / 2) / kSqrt2;
  return y < 0 ? -x : x;
}

double Digamma(double x) {
  if (std::isnan(x)) return x;
  if (x == kInf) return kInf;
  if (x == -kInf) return kNaN;
  double result = 0;
  if (x <= 0) {
    // Poles at the non-positive integers; elsewhere the reflection psi(1 - x) - pi / tan(pi x).
    if (x == std::floor(x)) return kNaN;
    result = -kPi / std::tan(kPi * x);
    x = 1 - x;
  }
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  // The asymptotic series ln x - 1/(2x) - sum B_2k / (2k x^2k).
  const double f = 1 / (x * x);
  const double t =
      f * (-1.0 / 12 +
           f * (1.0 / 120 +
                f * (-1.0 / 252 + f * (1.0 / 240 + f * (-1.0 / 132 + f * (691.0 / 32760))))));
  return result + std::log(x) - 0.5 / x + t;
}

double Lgamma(double x) {
  // lgamma_r: no write to the global signgam from the executor's threads.
  int sign = 0;
  return lgamma_r(x, &sign);
}

double Erfc(double x) { return std::erfc(x); }

double Zeta(double x, double q) {
  // Cephes' zeta (as Eigen's): Euler-Maclaurin summation, corrections by the Bernoulli numbers
  // (A[i] = (2i + 2)! / B_(2i + 2)).
  static const double A[] = {12.0,
                             -720.0,
                             30240.0,
                             -1209600.0,
                             47900160.0,
                             -1.8924375803183791606e9,
                             7.47242496e10,
                             -2.950130727918164224e12,
                             1.1646782814350067249e14,
                             -4.5979787224074726105e15,
                             1.8152105401943546773e17,
                             -7.1661652561756670113e18};
  constexpr double kMachEp = 1.11022302462515654042e-16;
  if (x == 1) return kInf;
  if (x < 1 || std::isnan(x) || std::isnan(q)) return kNaN;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    if (x != std::floor(x)) return kNaN;  // q^-x is not real
  }
  double s = std::pow(q, -x), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= 9.0) {
    i += 1;
    a += 1.0;
    b = std::pow(a, -x);
    s += b;
    if (std::fabs(b / s) < kMachEp) return s;
  }
  const double w = a;
  s += b * w / (x - 1);
  s -= 0.5 * b;
  a = 1.0;
  double k = 0.0;
  for (i = 0; i < 12; ++i) {
    a *= x + k;
    b /= w;
    const double t = a * b / A[i];
    s += t;
    if (std::fabs(t / s) < kMachEp) return s;
    k += 1.0;
    a *= x + k;
    b /= w;
    k += 1.0;
  }
  return s;
}

double Polygamma(double n, double x) {
  if (std::isnan(n) || n != std::floor(n) || n < 0) return kNaN;
  if (n == 0) return Digamma(x);
  const double n1 = n + 1;
  const double factorial = std::exp(Lgamma(n1));
  return ((static_cast<int64_t>(n1) % 2 == 0) ? 1.0 : -1.0) * factorial * Zeta(n1, x);
}

}  // namespace special

namespace {

using cwise::ComputeType;
using cwise::Dispatch;

template <double (*kFn)(double)>
Status SpecialKernel(OpKernelContext& ctx) {
  return Dispatch<cwise::kFloating>(ctx, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    return cwise::UnaryOp<T, T>(
        ctx, [](T x) { return T(static_cast<C>(kFn(static_cast<double>(static_cast<C>(x))))); });
  });
}

template <double (*kFn)(double, double)>
Status SpecialBinaryKernel(OpKernelContext& ctx) {
  return Dispatch<cwise::kFloatTypes>(ctx, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return cwise::BinaryOp<T, T>(ctx, [](T a, T b) { return T(kFn(a, b)); });
  });
}

void RegisterUnary(OpRegistry& r, const char* name, KernelFn kernel) {
  REGISTER_OP(r, name)
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(std::move(kernel));
}

}  // namespace

void RegisterSpecialMathOps(OpRegistry& r) {
  RegisterUnary(r, "Erfc", SpecialKernel<special::Erfc>);
  RegisterUnary(r, "Erfinv", SpecialKernel<special::Erfinv>);
  RegisterUnary(r, "Ndtri", SpecialKernel<special::Ndtri>);
  RegisterUnary(r, "Lgamma", SpecialKernel<special::Lgamma>);
  RegisterUnary(r, "Digamma", SpecialKernel<special::Digamma>);
  REGISTER_OP(r, "Zeta")
      .Input("x: T")
      .Input("q: T")
      .Output("z: T")
      .Attr("T: {float, double}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(SpecialBinaryKernel<special::Zeta>);
  REGISTER_OP(r, "Polygamma")
      .Input("a: T")
      .Input("x: T")
      .Output("z: T")
      .Attr("T: {float, double}")
      .SetShapeFn(shape_fn::BroadcastBinaryOpShape)
      .SetKernel(SpecialBinaryKernel<special::Polygamma>);
}

}  // namespace xlens::graph

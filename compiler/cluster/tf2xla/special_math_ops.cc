// The special functions TensorFlow's XLA bridge compiles (unary_ops.cc, Erfc/Erfinv/Ndtri/Lgamma/
// Digamma), as polynomial and rational approximations in elementwise HLO, the way XLA's math
// library builds them: Erfinv with Giles' single-precision polynomials, Ndtri as
// sqrt(2) * erfinv(2p - 1), Lgamma and Digamma with the Lanczos approximation (g = 7, nine
// terms) and the reflection formula below 1/2. Erfc is the Chebyshev fit of Numerical Recipes'
// erfcc (fractional error below 1.2e-7 everywhere, tails included); Zeta is Cephes'
// Euler-Maclaurin summation at a fixed length, Polygamma n! zeta(n + 1, x). 16-bit floats compute
// in f32.
#include <cmath>
#include <limits>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

constexpr double kPi = 3.14159265358979323846264338327950288;

// Elementwise arithmetic on values of one shape, constants made to match.
class Math {
 public:
  Math(HloBuilder& b, HloInstruction* like) : b_(b), like_(like) {}
  StatusOr<HloInstruction*> C(double v) {
    return b_.FullConstant(like_->shape().element_type(), v, like_->shape().dimensions());
  }
  StatusOr<HloInstruction*> Op(HloOpcode op, HloInstruction* x, HloInstruction* y) {
    return b_.Binary(op, x, y);
  }
  StatusOr<HloInstruction*> Op(HloOpcode op, HloInstruction* x, double y) {
    ASSIGN_OR_RETURN(HloInstruction * c, C(y));
    return b_.Binary(op, x, c);
  }
  StatusOr<HloInstruction*> Op(HloOpcode op, double x, HloInstruction* y) {
    ASSIGN_OR_RETURN(HloInstruction * c, C(x));
    return b_.Binary(op, c, y);
  }
  StatusOr<HloInstruction*> F(HloOpcode op, HloInstruction* x) { return b_.Unary(op, x); }
  StatusOr<HloInstruction*> Cmp(HloInstruction* x, double y, ComparisonDirection dir) {
    ASSIGN_OR_RETURN(HloInstruction * c, C(y));
    return b_.Compare(x, c, dir);
  }
  StatusOr<HloInstruction*> Select(HloInstruction* p, HloInstruction* t, HloInstruction* f) {
    return b_.Select(p, t, f);
  }
  StatusOr<HloInstruction*> SelectC(HloInstruction* p, double t, HloInstruction* f) {
    ASSIGN_OR_RETURN(HloInstruction * c, C(t));
    return b_.Select(p, c, f);
  }
  // c[0] * x^(n-1) + ... + c[n-1], Horner's rule.
  StatusOr<HloInstruction*> Polynomial(HloInstruction* x, const std::vector<double>& c) {
    ASSIGN_OR_RETURN(HloInstruction * p, C(c[0]));
    for (size_t i = 1; i < c.size(); ++i) {
      ASSIGN_OR_RETURN(p, Op(HloOpcode::kMultiply, p, x));
      ASSIGN_OR_RETURN(p, Op(HloOpcode::kAdd, p, c[i]));
    }
    return p;
  }
  HloBuilder& b() { return b_; }

 private:
  HloBuilder& b_;
  HloInstruction* like_;
};

using HloOp = HloOpcode;
using Dir = ComparisonDirection;

StatusOr<HloInstruction*> Erfc(Math& m, HloInstruction* x) {
  ASSIGN_OR_RETURN(HloInstruction * z, m.F(HloOp::kAbs, x));
  ASSIGN_OR_RETURN(HloInstruction * half_z, m.Op(HloOp::kMultiply, z, 0.5));
  ASSIGN_OR_RETURN(HloInstruction * den, m.Op(HloOp::kAdd, half_z, 1.0));
  ASSIGN_OR_RETURN(HloInstruction * t, m.Op(HloOp::kDivide, 1.0, den));
  ASSIGN_OR_RETURN(HloInstruction * poly,
                   m.Polynomial(t, {0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
                                    -0.18628806, 0.09678418, 0.37409196, 1.00002368,
                                    -1.26551223}));
  ASSIGN_OR_RETURN(HloInstruction * zz, m.Op(HloOp::kMultiply, z, z));
  ASSIGN_OR_RETURN(HloInstruction * arg, m.Op(HloOp::kSubtract, poly, zz));
  ASSIGN_OR_RETURN(HloInstruction * e, m.F(HloOp::kExp, arg));
  ASSIGN_OR_RETURN(HloInstruction * ans, m.Op(HloOp::kMultiply, t, e));
  ASSIGN_OR_RETURN(HloInstruction * two_minus, m.Op(HloOp::kSubtract, 2.0, ans));
  ASSIGN_OR_RETURN(HloInstruction * neg, m.Cmp(x, 0, Dir::kLt));
  return m.Select(neg, two_minus, ans);
}

StatusOr<HloInstruction*> Erfinv(Math& m, HloInstruction* x) {
  // w = -log((1 - x)(1 + x)); two polynomials in w split at 5.
  ASSIGN_OR_RETURN(HloInstruction * one_minus, m.Op(HloOp::kSubtract, 1.0, x));
  ASSIGN_OR_RETURN(HloInstruction * one_plus, m.Op(HloOp::kAdd, x, 1.0));
  ASSIGN_OR_RETURN(HloInstruction * prod, m.Op(HloOp::kMultiply, one_minus, one_plus));
  ASSIGN_OR_RETURN(HloInstruction * log, m.F(HloOp::kLog, prod));
  ASSIGN_OR_RETURN(HloInstruction * w, m.F(HloOp::kNegate, log));
  ASSIGN_OR_RETURN(HloInstruction * small, m.Cmp(w, 5, Dir::kLt));
  ASSIGN_OR_RETURN(HloInstruction * w_small, m.Op(HloOp::kSubtract, w, 2.5));
  ASSIGN_OR_RETURN(HloInstruction * sqrt_w, m.F(HloOp::kSqrt, w));
  ASSIGN_OR_RETURN(HloInstruction * w_large, m.Op(HloOp::kSubtract, sqrt_w, 3.0));
  ASSIGN_OR_RETURN(HloInstruction * p_small,
                   m.Polynomial(w_small, {2.81022636e-08, 3.43273939e-07, -3.5233877e-06,
                                          -4.39150654e-06, 0.00021858087, -0.00125372503,
                                          -0.00417768164, 0.246640727, 1.50140941}));
  ASSIGN_OR_RETURN(HloInstruction * p_large,
                   m.Polynomial(w_large, {-0.000200214257, 0.000100950558, 0.00134934322,
                                          -0.00367342844, 0.00573950773, -0.0076224613,
                                          0.00943887047, 1.00167406, 2.83297682}));
  ASSIGN_OR_RETURN(HloInstruction * p, m.Select(small, p_small, p_large));
  ASSIGN_OR_RETURN(HloInstruction * r, m.Op(HloOp::kMultiply, p, x));
  // +-1 give +-inf.
  ASSIGN_OR_RETURN(HloInstruction * abs, m.F(HloOp::kAbs, x));
  ASSIGN_OR_RETURN(HloInstruction * at_one, m.Cmp(abs, 1, Dir::kEq));
  ASSIGN_OR_RETURN(HloInstruction * inf, m.Op(HloOp::kMultiply, x,
                                              std::numeric_limits<double>::infinity()));
  return m.Select(at_one, inf, r);
}

StatusOr<HloInstruction*> Ndtri(Math& m, HloInstruction* p) {
  ASSIGN_OR_RETURN(HloInstruction * two_p, m.Op(HloOp::kMultiply, p, 2.0));
  ASSIGN_OR_RETURN(HloInstruction * y, m.Op(HloOp::kSubtract, two_p, 1.0));
  ASSIGN_OR_RETURN(HloInstruction * e, Erfinv(m, y));
  return m.Op(HloOp::kMultiply, e, std::sqrt(2.0));
}

constexpr double kLanczosGamma = 7;
constexpr double kBaseLanczosCoeff = 0.99999999999980993227684700473478;
constexpr double kLanczosCoefficients[] = {
    676.520368121885098567009190444019, -1259.13921672240287047156078755283,
    771.3234287776530788486528258894,   -176.61502916214059906584551354,
    12.507343278686904814458936853,     -0.13857109526572011689554707,
    9.984369578019570859563e-6,         1.50563273514931155834e-7};

// For z = x - 1 (x >= 1/2): the Lanczos sum a, its derivative's ratio num/a, and log(t) with
// t = z + g + 1/2.
struct Lanczos {
  HloInstruction* a;
  HloInstruction* num;  // -sum c_i / (z + i + 1)^2
  HloInstruction* t;
  HloInstruction* log_t;
};

StatusOr<Lanczos> LanczosSum(Math& m, HloInstruction* z) {
  Lanczos l;
  ASSIGN_OR_RETURN(l.a, m.C(kBaseLanczosCoeff));
  ASSIGN_OR_RETURN(l.num, m.C(0));
  for (int i = 0; i < 8; ++i) {
    ASSIGN_OR_RETURN(HloInstruction * d, m.Op(HloOp::kAdd, z, i + 1.0));
    ASSIGN_OR_RETURN(HloInstruction * q, m.Op(HloOp::kDivide, kLanczosCoefficients[i], d));
    ASSIGN_OR_RETURN(l.a, m.Op(HloOp::kAdd, l.a, q));
    ASSIGN_OR_RETURN(HloInstruction * q2, m.Op(HloOp::kDivide, q, d));
    ASSIGN_OR_RETURN(l.num, m.Op(HloOp::kSubtract, l.num, q2));
  }
  const double g_half = kLanczosGamma + 0.5;
  ASSIGN_OR_RETURN(l.t, m.Op(HloOp::kAdd, z, g_half));
  // log(t) = log(g + 1/2) + log1p(z / (g + 1/2)), accurate for small z.
  ASSIGN_OR_RETURN(HloInstruction * ratio, m.Op(HloOp::kDivide, z, g_half));
  ASSIGN_OR_RETURN(HloInstruction * lp, m.F(HloOp::kLog1p, ratio));
  ASSIGN_OR_RETURN(l.log_t, m.Op(HloOp::kAdd, lp, std::log(g_half)));
  return l;
}

// The reflected argument: x itself where x >= 1/2, else 1 - x; and the predicate.
StatusOr<std::pair<HloInstruction*, HloInstruction*>> Reflect(Math& m, HloInstruction* x) {
  ASSIGN_OR_RETURN(HloInstruction * reflect, m.Cmp(x, 0.5, Dir::kLt));
  ASSIGN_OR_RETURN(HloInstruction * one_minus, m.Op(HloOp::kSubtract, 1.0, x));
  ASSIGN_OR_RETURN(HloInstruction * arg, m.Select(reflect, one_minus, x));
  return std::make_pair(reflect, arg);
}

// True at 0, -1, -2, ... (the poles).
StatusOr<HloInstruction*> AtPole(Math& m, HloInstruction* x) {
  ASSIGN_OR_RETURN(HloInstruction * floor, m.F(HloOp::kFloor, x));
  ASSIGN_OR_RETURN(HloInstruction * integral, m.b().Compare(x, floor, Dir::kEq));
  ASSIGN_OR_RETURN(HloInstruction * non_positive, m.Cmp(x, 0, Dir::kLe));
  return m.Op(HloOp::kAnd, integral, non_positive);
}

StatusOr<HloInstruction*> Lgamma(Math& m, HloInstruction* x) {
  ASSIGN_OR_RETURN(auto reflected, Reflect(m, x));
  auto [reflect, arg] = reflected;
  ASSIGN_OR_RETURN(HloInstruction * z, m.Op(HloOp::kSubtract, arg, 1.0));
  ASSIGN_OR_RETURN(Lanczos l, LanczosSum(m, z));
  // lgamma(arg) = log(sqrt(2 pi)) + (z + 1/2) log(t) - t + log(a).
  ASSIGN_OR_RETURN(HloInstruction * zh, m.Op(HloOp::kAdd, z, 0.5));
  ASSIGN_OR_RETURN(HloInstruction * term, m.Op(HloOp::kMultiply, zh, l.log_t));
  ASSIGN_OR_RETURN(HloInstruction * log_a, m.F(HloOp::kLog, l.a));
  ASSIGN_OR_RETURN(HloInstruction * y, m.Op(HloOp::kSubtract, term, l.t));
  ASSIGN_OR_RETURN(y, m.Op(HloOp::kAdd, y, log_a));
  ASSIGN_OR_RETURN(y, m.Op(HloOp::kAdd, y, 0.5 * std::log(2 * kPi)));
  // x < 1/2: log(pi) - log|sin(pi x)| - lgamma(1 - x); sin(pi x) on x's distance to the nearest
  // integer, which keeps it exact near the integers.
  ASSIGN_OR_RETURN(HloInstruction * ax, m.F(HloOp::kAbs, x));
  ASSIGN_OR_RETURN(HloInstruction * fl, m.F(HloOp::kFloor, ax));
  ASSIGN_OR_RETURN(HloInstruction * frac, m.Op(HloOp::kSubtract, ax, fl));
  ASSIGN_OR_RETURN(HloInstruction * big, m.Cmp(frac, 0.5, Dir::kGt));
  ASSIGN_OR_RETURN(HloInstruction * other, m.Op(HloOp::kSubtract, 1.0, frac));
  ASSIGN_OR_RETURN(HloInstruction * dist, m.Select(big, other, frac));
  ASSIGN_OR_RETURN(HloInstruction * pix, m.Op(HloOp::kMultiply, dist, kPi));
  ASSIGN_OR_RETURN(HloInstruction * sin, m.F(HloOp::kSin, pix));
  ASSIGN_OR_RETURN(HloInstruction * log_sin, m.F(HloOp::kLog, sin));
  ASSIGN_OR_RETURN(HloInstruction * refl, m.Op(HloOp::kSubtract, std::log(kPi), log_sin));
  ASSIGN_OR_RETURN(refl, m.Op(HloOp::kSubtract, refl, y));
  ASSIGN_OR_RETURN(HloInstruction * result, m.Select(reflect, refl, y));
  ASSIGN_OR_RETURN(HloInstruction * pole, AtPole(m, x));
  ASSIGN_OR_RETURN(result, m.SelectC(pole, std::numeric_limits<double>::infinity(), result));
  ASSIGN_OR_RETURN(HloInstruction * is_inf, m.Cmp(ax, std::numeric_limits<double>::infinity(),
                                                  Dir::kEq));
  return m.SelectC(is_inf, std::numeric_limits<double>::infinity(), result);
}

StatusOr<HloInstruction*> Digamma(Math& m, HloInstruction* x) {
  ASSIGN_OR_RETURN(auto reflected, Reflect(m, x));
  auto [reflect, arg] = reflected;
  ASSIGN_OR_RETURN(HloInstruction * z, m.Op(HloOp::kSubtract, arg, 1.0));
  ASSIGN_OR_RETURN(Lanczos l, LanczosSum(m, z));
  // digamma(arg) = log(t) + num / a - g / t.
  ASSIGN_OR_RETURN(HloInstruction * ratio, m.Op(HloOp::kDivide, l.num, l.a));
  ASSIGN_OR_RETURN(HloInstruction * g_t, m.Op(HloOp::kDivide, kLanczosGamma, l.t));
  ASSIGN_OR_RETURN(HloInstruction * y, m.Op(HloOp::kAdd, l.log_t, ratio));
  ASSIGN_OR_RETURN(y, m.Op(HloOp::kSubtract, y, g_t));
  // x < 1/2: digamma(1 - x) - pi cos(pi x) / sin(pi x), on x's fractional part.
  ASSIGN_OR_RETURN(HloInstruction * fl, m.F(HloOp::kFloor, x));
  ASSIGN_OR_RETURN(HloInstruction * frac, m.Op(HloOp::kSubtract, x, fl));
  ASSIGN_OR_RETURN(HloInstruction * pix, m.Op(HloOp::kMultiply, frac, kPi));
  ASSIGN_OR_RETURN(HloInstruction * sin, m.F(HloOp::kSin, pix));
  ASSIGN_OR_RETURN(HloInstruction * cos, m.F(HloOp::kCos, pix));
  ASSIGN_OR_RETURN(HloInstruction * pi_cos, m.Op(HloOp::kMultiply, cos, kPi));
  ASSIGN_OR_RETURN(HloInstruction * cot, m.Op(HloOp::kDivide, pi_cos, sin));
  ASSIGN_OR_RETURN(HloInstruction * refl, m.Op(HloOp::kSubtract, y, cot));
  ASSIGN_OR_RETURN(HloInstruction * result, m.Select(reflect, refl, y));
  ASSIGN_OR_RETURN(HloInstruction * pole, AtPole(m, x));
  return m.SelectC(pole, std::numeric_limits<double>::quiet_NaN(), result);
}

// The Hurwitz zeta function by Cephes' Euler-Maclaurin summation with a fixed number of terms
// (ten of the series, twelve Bernoulli corrections), vectorised; x and q have one shape.
StatusOr<HloInstruction*> Zeta(Math& m, HloInstruction* x, HloInstruction* q) {
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0,
                             -1.8924375803183791606e9, 7.47242496e10, -2.950130727918164224e12,
                             1.1646782814350067249e14, -4.5979787224074726105e15,
                             1.8152105401943546773e17, -7.1661652561756670113e18};
  ASSIGN_OR_RETURN(HloInstruction * neg_x, m.F(HloOp::kNegate, x));
  ASSIGN_OR_RETURN(HloInstruction * s, m.Op(HloOp::kPower, q, neg_x));
  HloInstruction* a = q;
  HloInstruction* b = nullptr;
  for (int i = 0; i < 10; ++i) {
    ASSIGN_OR_RETURN(a, m.Op(HloOp::kAdd, a, 1.0));
    ASSIGN_OR_RETURN(b, m.Op(HloOp::kPower, a, neg_x));
    ASSIGN_OR_RETURN(s, m.Op(HloOp::kAdd, s, b));
  }
  HloInstruction* w = a;
  ASSIGN_OR_RETURN(HloInstruction * x_minus_1, m.Op(HloOp::kSubtract, x, 1.0));
  ASSIGN_OR_RETURN(HloInstruction * bw, m.Op(HloOp::kMultiply, b, w));
  ASSIGN_OR_RETURN(HloInstruction * tail, m.Op(HloOp::kDivide, bw, x_minus_1));
  ASSIGN_OR_RETURN(s, m.Op(HloOp::kAdd, s, tail));
  ASSIGN_OR_RETURN(HloInstruction * half_b, m.Op(HloOp::kMultiply, b, 0.5));
  ASSIGN_OR_RETURN(s, m.Op(HloOp::kSubtract, s, half_b));
  ASSIGN_OR_RETURN(HloInstruction * fac, m.C(1.0));
  double k = 0;
  for (int i = 0; i < 12; ++i) {
    ASSIGN_OR_RETURN(HloInstruction * xk, m.Op(HloOp::kAdd, x, k));
    ASSIGN_OR_RETURN(fac, m.Op(HloOp::kMultiply, fac, xk));
    ASSIGN_OR_RETURN(b, m.Op(HloOp::kDivide, b, w));
    ASSIGN_OR_RETURN(HloInstruction * fb, m.Op(HloOp::kMultiply, fac, b));
    ASSIGN_OR_RETURN(HloInstruction * t, m.Op(HloOp::kDivide, fb, A[i]));
    ASSIGN_OR_RETURN(s, m.Op(HloOp::kAdd, s, t));
    k += 1;
    ASSIGN_OR_RETURN(xk, m.Op(HloOp::kAdd, x, k));
    ASSIGN_OR_RETURN(fac, m.Op(HloOp::kMultiply, fac, xk));
    ASSIGN_OR_RETURN(b, m.Op(HloOp::kDivide, b, w));
    k += 1;
  }
  // x == 1: inf; x < 1: NaN; q a non-positive integer: inf; q <= 0 with x not an integer: NaN.
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ASSIGN_OR_RETURN(HloInstruction * q_pole, AtPole(m, q));
  ASSIGN_OR_RETURN(s, m.SelectC(q_pole, inf, s));
  ASSIGN_OR_RETURN(HloInstruction * q_neg, m.Cmp(q, 0, Dir::kLe));
  ASSIGN_OR_RETURN(HloInstruction * x_floor, m.F(HloOp::kFloor, x));
  ASSIGN_OR_RETURN(HloInstruction * x_frac, m.b().Compare(x, x_floor, Dir::kNe));
  ASSIGN_OR_RETURN(HloInstruction * not_real, m.Op(HloOp::kAnd, q_neg, x_frac));
  ASSIGN_OR_RETURN(s, m.SelectC(not_real, nan, s));
  ASSIGN_OR_RETURN(HloInstruction * x_small, m.Cmp(x, 1, Dir::kLt));
  ASSIGN_OR_RETURN(s, m.SelectC(x_small, nan, s));
  ASSIGN_OR_RETURN(HloInstruction * x_one, m.Cmp(x, 1, Dir::kEq));
  return m.SelectC(x_one, inf, s);
}

// (-1)^(n+1) n! zeta(n + 1, x); digamma at n = 0; NaN for n not a non-negative integer.
StatusOr<HloInstruction*> Polygamma(Math& m, HloInstruction* n, HloInstruction* x) {
  ASSIGN_OR_RETURN(HloInstruction * n1, m.Op(HloOp::kAdd, n, 1.0));
  ASSIGN_OR_RETURN(HloInstruction * lg, Lgamma(m, n1));
  ASSIGN_OR_RETURN(HloInstruction * factorial, m.F(HloOp::kExp, lg));
  ASSIGN_OR_RETURN(HloInstruction * z, Zeta(m, n1, x));
  ASSIGN_OR_RETURN(HloInstruction * half, m.Op(HloOp::kMultiply, n1, 0.5));
  ASSIGN_OR_RETURN(HloInstruction * half_floor, m.F(HloOp::kFloor, half));
  ASSIGN_OR_RETURN(HloInstruction * twice, m.Op(HloOp::kMultiply, half_floor, 2.0));
  ASSIGN_OR_RETURN(HloInstruction * parity, m.Op(HloOp::kSubtract, n1, twice));  // 0 or 1
  ASSIGN_OR_RETURN(HloInstruction * two_parity, m.Op(HloOp::kMultiply, parity, 2.0));
  ASSIGN_OR_RETURN(HloInstruction * sign, m.Op(HloOp::kSubtract, 1.0, two_parity));
  ASSIGN_OR_RETURN(HloInstruction * r, m.Op(HloOp::kMultiply, sign, factorial));
  ASSIGN_OR_RETURN(r, m.Op(HloOp::kMultiply, r, z));
  ASSIGN_OR_RETURN(HloInstruction * dg, Digamma(m, x));
  ASSIGN_OR_RETURN(HloInstruction * n_zero, m.Cmp(n, 0, Dir::kEq));
  ASSIGN_OR_RETURN(r, m.Select(n_zero, dg, r));
  ASSIGN_OR_RETURN(HloInstruction * n_floor, m.F(HloOp::kFloor, n));
  ASSIGN_OR_RETURN(HloInstruction * n_frac, m.b().Compare(n, n_floor, Dir::kNe));
  ASSIGN_OR_RETURN(HloInstruction * n_neg, m.Cmp(n, 0, Dir::kLt));
  ASSIGN_OR_RETURN(HloInstruction * bad, m.Op(HloOp::kOr, n_frac, n_neg));
  return m.SelectC(bad, std::numeric_limits<double>::quiet_NaN(), r);
}

using SpecialFn = StatusOr<HloInstruction*> (*)(Math&, HloInstruction*);
using SpecialBinaryFn = StatusOr<HloInstruction*> (*)(Math&, HloInstruction*, HloInstruction*);

template <SpecialBinaryFn kFn>
Status LowerSpecialBinary(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * y, ctx.Input(1));
  HloBuilder& b = ctx.builder();
  ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                   BroadcastShapes(ctx, x->shape().dimensions(), y->shape().dimensions()));
  LOWER_OR_RETURN(x, ctx, b.BroadcastTo(x, dims));
  LOWER_OR_RETURN(y, ctx, b.BroadcastTo(y, dims));
  if (!IsFloatingPointType(x->shape().element_type())) {
    return ctx.Error("expects floating-point inputs");
  }
  Math m(b, x);
  LOWER_OR_RETURN(HloInstruction * z, ctx, kFn(m, x, y));
  ctx.SetOutput(0, z);
  return OkStatus();
}

template <SpecialFn kFn>
Status LowerSpecial(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = x->shape().element_type();
  if (!IsFloatingPointType(type)) return ctx.Error("expects a floating-point input");
  const bool widen = type == PrimitiveType::F16 || type == PrimitiveType::BF16;
  if (widen) {
    LOWER_OR_RETURN(x, ctx, b.Convert(x, PrimitiveType::F32));
  }
  Math m(b, x);
  LOWER_OR_RETURN(HloInstruction * y, ctx, kFn(m, x));
  if (widen) {
    LOWER_OR_RETURN(y, ctx, b.Convert(y, type));
  }
  ctx.SetOutput(0, y);
  return OkStatus();
}

}  // namespace

void RegisterSpecialMathXlaOps(XlaOpRegistry& registry) {
  registry.Register("Erfc", LowerSpecial<Erfc>);
  registry.Register("Erfinv", LowerSpecial<Erfinv>);
  registry.Register("Ndtri", LowerSpecial<Ndtri>);
  registry.Register("Lgamma", LowerSpecial<Lgamma>);
  registry.Register("Digamma", LowerSpecial<Digamma>);
  registry.Register("Zeta", LowerSpecialBinary<Zeta>);
  registry.Register("Polygamma", LowerSpecialBinary<Polygamma>);
}

}  // namespace xlens::cluster

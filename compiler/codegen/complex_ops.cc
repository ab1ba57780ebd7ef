#include "compiler/codegen/complex_ops.h"

#include <cfloat>
#include <string>

#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Triple.h>

#include "compiler/codegen/llvm_ir_util.h"

namespace xlens::codegen {
namespace {

using llvm::Value;

struct Cx {
  Value* re;
  Value* im;
};

// The formulas over one floating-point type (float for complex64, double for complex128).
class ComplexMath {
 public:
  ComplexMath(llvm::IRBuilder<>& b, llvm::Type* t) : b_(b), t_(t) {}

  Value* C(double v) { return llvm::ConstantFP::get(t_, v); }
  Value* Inf() { return llvm::ConstantFP::getInfinity(t_); }
  Value* Unary(llvm::Intrinsic::ID id, Value* x) { return b_.CreateUnaryIntrinsic(id, x); }
  Value* Fabs(Value* x) { return Unary(llvm::Intrinsic::fabs, x); }
  Value* Copysign(Value* m, Value* s) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, m, s);
  }
  Value* Exp(Value* x) { return Unary(llvm::Intrinsic::exp, x); }
  Value* Log(Value* x) { return Unary(llvm::Intrinsic::log, x); }
  Value* Sin(Value* x) { return Unary(llvm::Intrinsic::sin, x); }
  Value* Cos(Value* x) { return Unary(llvm::Intrinsic::cos, x); }
  Value* Sqrt(Value* x) { return Unary(llvm::Intrinsic::sqrt, x); }
  // A C library function (float: the "f" name) that the NVPTX path maps to libdevice.
  Value* Libm(std::string_view name, std::vector<Value*> args) {
    std::string full(name);
    if (t_->isFloatTy()) full += "f";
    std::vector<llvm::Type*> params(args.size(), t_);
    return b_.CreateCall(DeclareFunction(*b_.GetInsertBlock()->getModule(), full, t_, params), args);
  }
  Value* IsNan(Value* x) { return b_.CreateFCmpUNO(x, x); }
  Value* IsInf(Value* x) { return b_.CreateFCmpOEQ(Fabs(x), Inf()); }
  Value* IsFinite(Value* x) { return b_.CreateFCmpONE(Fabs(x), Inf()); }
  Value* Sel(Value* c, Value* x, Value* y) { return b_.CreateSelect(c, x, y); }
  Value* Add(Value* x, Value* y) { return b_.CreateFAdd(x, y); }
  Value* Sub(Value* x, Value* y) { return b_.CreateFSub(x, y); }
  Value* Mul(Value* x, Value* y) { return b_.CreateFMul(x, y); }
  Value* Div(Value* x, Value* y) { return b_.CreateFDiv(x, y); }
  Value* Or(Value* x, Value* y) { return b_.CreateOr(x, y); }
  Value* And(Value* x, Value* y) { return b_.CreateAnd(x, y); }
  // copysign(isinf(x) ? 1 : 0, x): an infinity's direction, anything else as a signed zero.
  Value* Box(Value* x) { return Copysign(Sel(IsInf(x), C(1), C(0)), x); }
  // NaN as a signed zero where `when` holds.
  Value* NanToZero(Value* when, Value* x) { return Sel(And(when, IsNan(x)), Copysign(C(0), x), x); }

  // __mulsc3: the textbook product, and where both parts are NaN although an operand or a
  // partial product is infinite, the infinite product C99 Annex G asks for.
  Cx Multiply(Cx l, Cx r) {
    Value *a = l.re, *b = l.im, *c = r.re, *d = r.im;
    Value *ac = Mul(a, c), *bd = Mul(b, d), *ad = Mul(a, d), *bc = Mul(b, c);
    Value* x = Sub(ac, bd);
    Value* y = Add(ad, bc);
    Value* both_nan = And(IsNan(x), IsNan(y));
    Value* ab_inf = Or(IsInf(a), IsInf(b));
    a = Sel(ab_inf, Box(a), a);
    b = Sel(ab_inf, Box(b), b);
    c = NanToZero(ab_inf, c);
    d = NanToZero(ab_inf, d);
    Value* cd_inf = Or(IsInf(c), IsInf(d));
    c = Sel(cd_inf, Box(c), c);
    d = Sel(cd_inf, Box(d), d);
    a = NanToZero(cd_inf, a);
    b = NanToZero(cd_inf, b);
    Value* recalc = Or(ab_inf, cd_inf);
    Value* products_inf = Or(Or(IsInf(ac), IsInf(bd)), Or(IsInf(ad), IsInf(bc)));
    Value* third = And(b_.CreateNot(recalc), products_inf);
    a = NanToZero(third, a);
    b = NanToZero(third, b);
    c = NanToZero(third, c);
    d = NanToZero(third, d);
    Value* fix = And(both_nan, Or(recalc, third));
    Value* x2 = Mul(Inf(), Sub(Mul(a, c), Mul(b, d)));
    Value* y2 = Mul(Inf(), Add(Mul(a, d), Mul(b, c)));
    return {Sel(fix, x2, x), Sel(fix, y2, y)};
  }

  // __divdc3 (libgcc 12): Smith's algorithm, operands scaled where the denominator is near the
  // top or bottom of the range, and Annex G's infinities and zeros where the quotient is NaN.
  Cx Divide(Cx l, Cx r) {
    const bool is_double = t_->isDoubleTy();
    const double max = is_double ? DBL_MAX : FLT_MAX;
    const double min = is_double ? DBL_MIN : FLT_MIN;
    const double eps = is_double ? DBL_EPSILON : FLT_EPSILON;
    const double rbig = max / 2, rmin2 = eps, rminscal = 1 / eps, rmax2 = rbig * rmin2;
    Value *a = l.re, *b = l.im, *c = r.re, *d = r.im;
    // Swapping the roles of (c, d) and of the outputs makes the |c| >= |d| case the other one.
    Value* d_bigger = b_.CreateFCmpOLT(Fabs(c), Fabs(d));
    Value* big = Sel(d_bigger, d, c);    // the larger denominator part
    Value* small = Sel(d_bigger, c, d);  // the smaller
    Value* halve = b_.CreateFCmpOGE(Fabs(big), C(rbig));
    auto scale = [&](Value* when, double by) {
      a = Sel(when, Mul(a, C(by)), a);
      b = Sel(when, Mul(b, C(by)), b);
      big = Sel(when, Mul(big, C(by)), big);
      small = Sel(when, Mul(small, C(by)), small);
    };
    scale(halve, 0.5);
    Value* tiny = b_.CreateFCmpOLT(Fabs(big), C(rmin2));
    Value* num_tiny =
        Or(And(b_.CreateFCmpOLT(Fabs(a), C(min)),
               And(b_.CreateFCmpOLT(Fabs(b), C(rmax2)), b_.CreateFCmpOLT(Fabs(big), C(rmax2)))),
           And(b_.CreateFCmpOLT(Fabs(b), C(min)),
               And(b_.CreateFCmpOLT(Fabs(a), C(rmax2)), b_.CreateFCmpOLT(Fabs(big), C(rmax2)))));
    scale(Or(tiny, num_tiny), rminscal);
    Value* ratio = Div(small, big);
    Value* denom = Add(Mul(small, ratio), big);
    // (a + bi) / (c + di). With |c| >= |d| (big = c, small = d):
    //   x = (a + b r) / denom, y = (b - a r) / denom.
    // With |d| > |c| (big = d, small = c):
    //   x = (a r + b) / denom, y = (b r - a) / denom.
    Value* normal_ratio = b_.CreateFCmpOGT(Fabs(ratio), C(min));
    Value* a_r = Sel(normal_ratio, Mul(a, ratio), Mul(small, Div(a, big)));
    Value* b_r = Sel(normal_ratio, Mul(b, ratio), Mul(small, Div(b, big)));
    Value* x = Div(Sel(d_bigger, Add(a_r, b), Add(a, b_r)), denom);
    Value* y = Div(Sel(d_bigger, Sub(b_r, a), Sub(b, a_r)), denom);
    // Annex G, on the unscaled operands.
    a = l.re, b = l.im, c = r.re, d = r.im;
    Value* both_nan = And(IsNan(x), IsNan(y));
    Value* zero_denominator =
        And(And(b_.CreateFCmpOEQ(c, C(0)), b_.CreateFCmpOEQ(d, C(0))),
            Or(b_.CreateNot(IsNan(a)), b_.CreateNot(IsNan(b))));
    Value* signed_inf = Copysign(Inf(), c);
    Value* num_inf = And(Or(IsInf(a), IsInf(b)), And(IsFinite(c), IsFinite(d)));
    Value* den_inf = And(Or(IsInf(c), IsInf(d)), And(IsFinite(a), IsFinite(b)));
    Value *ab = Box(a), *bb = Box(b), *cb = Box(c), *db = Box(d);
    Value* x_num = Mul(Inf(), Add(Mul(ab, c), Mul(bb, d)));
    Value* y_num = Mul(Inf(), Sub(Mul(bb, c), Mul(ab, d)));
    Value* x_den = Mul(C(0), Add(Mul(a, cb), Mul(b, db)));
    Value* y_den = Mul(C(0), Sub(Mul(b, cb), Mul(a, db)));
    Value* x_fix = Sel(zero_denominator, Mul(signed_inf, a), Sel(num_inf, x_num, Sel(den_inf, x_den, x)));
    Value* y_fix = Sel(zero_denominator, Mul(signed_inf, b), Sel(num_inf, y_num, Sel(den_inf, y_den, y)));
    return {Sel(both_nan, x_fix, x), Sel(both_nan, y_fix, y)};
  }

  Value* Abs(Cx z) { return Libm("hypot", {z.re, z.im}); }

  // e^a (cos b + i sin b), e^a as e^(a/2) twice so that e^a cos b survives where only e^a
  // overflows; a real argument keeps a zero imaginary part (not inf * 0).
  Cx Exp(Cx z) {
    Value* half = Exp(Mul(z.re, C(0.5)));
    Value* re = Mul(Mul(half, Cos(z.im)), half);
    Value* im = Sel(b_.CreateFCmpOEQ(z.im, C(0)), z.im, Mul(Mul(half, Sin(z.im)), half));
    // Annex G: exp(+inf + i(inf|nan)) = +-inf + i nan, exp(-inf + i(inf|nan)) = 0 + 0i.
    Value* bad_im = b_.CreateNot(IsFinite(z.im));
    Value* pos_inf = And(b_.CreateFCmpOEQ(z.re, Inf()), bad_im);
    Value* neg_inf = And(b_.CreateFCmpOEQ(z.re, b_.CreateFNeg(Inf())), bad_im);
    re = Sel(pos_inf, Inf(), Sel(neg_inf, C(0), re));
    im = Sel(neg_inf, C(0), im);
    return {re, im};
  }

  Cx Log(Cx z) {
    Value *fa = Fabs(z.re), *fb = Fabs(z.im);
    Value* m = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, fa, fb);
    Value* n = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, fa, fb);
    Value* q = Div(n, m);
    Value* re = Add(Log(m), Mul(C(0.5), Libm("log1p", {Mul(q, q)})));
    re = Sel(b_.CreateFCmpOEQ(m, C(0)), b_.CreateFNeg(Inf()), re);
    re = Sel(Or(IsInf(z.re), IsInf(z.im)), Inf(), re);
    // maxnum/minnum drop a NaN; a NaN part makes the modulus NaN unless the other is infinite.
    re = Sel(And(Or(IsNan(z.re), IsNan(z.im)), b_.CreateNot(Or(IsInf(z.re), IsInf(z.im)))),
             llvm::ConstantFP::getNaN(t_), re);
    return {re, Libm("atan2", {z.im, z.re})};
  }

  // t = sqrt((|a| + |z|) / 2); a >= 0: (t, b / 2t), a < 0: (|b| / 2t, copysign(t, b)).
  Cx Sqrt(Cx z) {
    Value* r = Abs(z);
    Value* t = Sqrt(Add(Mul(C(0.5), Fabs(z.re)), Mul(C(0.5), r)));
    Value* two_t = Mul(C(2), t);
    Value* nonnegative = b_.CreateFCmpOGE(z.re, C(0));
    Value* re = Sel(nonnegative, t, Div(Fabs(z.im), two_t));
    Value* im = Sel(nonnegative, Div(z.im, two_t), Copysign(t, z.im));
    Value* zero = b_.CreateFCmpOEQ(r, C(0));
    re = Sel(zero, C(0), re);
    im = Sel(zero, z.im, im);
    // Annex G: sqrt(x +- i inf) = inf +- i inf, whatever x is.
    Value* inf_im = IsInf(z.im);
    return {Sel(inf_im, Inf(), re), Sel(inf_im, z.im, im)};
  }

  // sinh(2a) / (cosh(2a) + cos(2b)) as sinh(a)cosh(a) / (sinh^2 a + cos^2 b); past |a| = 20
  // (where tanh rounds to 1 in double) 1 and 4 sin b cos b e^-2|a|, which stay finite.
  Cx Tanh(Cx z) {
    Value* sa = Libm("sinh", {z.re});
    Value* ca = Libm("cosh", {z.re});
    Value* sb = Sin(z.im);
    Value* cb = Cos(z.im);
    Value* den = Add(Mul(sa, sa), Mul(cb, cb));
    Value* re = Div(Mul(sa, ca), den);
    Value* im = Div(Mul(sb, cb), den);
    Value* large = b_.CreateFCmpOGT(Fabs(z.re), C(20));
    Value* far_im = Mul(Mul(C(4), Mul(sb, cb)), Exp(Mul(C(-2), Fabs(z.re))));
    // Annex G: a real argument (NaN included) keeps its zero imaginary part.
    return {Sel(large, Copysign(C(1), z.re), re), Sel(RealZero(z), z.im, Sel(large, far_im, im))};
  }

  // A zero imaginary part stays zero where the real part is infinite or NaN (Annex G), rather
  // than NaN from inf * 0.
  Value* RealZero(Cx z) { return b_.CreateFCmpOEQ(z.im, C(0)); }
  Cx Sin(Cx z) {
    Value* im = Mul(Cos(z.re), Libm("sinh", {z.im}));
    return {Mul(Sin(z.re), Libm("cosh", {z.im})), Sel(RealZero(z), z.im, im)};
  }
  Cx Cos(Cx z) {
    Value* im = b_.CreateFNeg(Mul(Sin(z.re), Libm("sinh", {z.im})));
    return {Mul(Cos(z.re), Libm("cosh", {z.im})), Sel(RealZero(z), b_.CreateFNeg(Mul(Copysign(C(0), Sin(z.re)), z.im)), im)};
  }

  // The evaluator's ComplexExpm1 and ComplexLog1p (complex_math.h), term by term.
  Cx Expm1(Cx z) {
    Value* half_sin = Sin(Mul(z.im, C(0.5)));
    return {Sub(Mul(Libm("expm1", {z.re}), Cos(z.im)), Mul(Mul(C(2), half_sin), half_sin)),
            Mul(Exp(z.re), Sin(z.im))};
  }
  Cx Log1p(Cx z) {
    Value* x = z.re;
    Value* y = z.im;
    return {Div(Libm("log1p", {Add(Mul(x, Add(C(2), x)), Mul(y, y))}), C(2)),
            Libm("atan2", {y, Add(C(1), x)})};
  }

  Cx Sign(Cx z) {
    Value* m = Abs(z);
    Value* zero = b_.CreateFCmpOEQ(m, C(0));
    return {Sel(zero, C(0), Div(z.re, m)), Sel(zero, C(0), Div(z.im, m))};
  }

  // cpow: exp(y log x), and x^0 = 1 as the evaluator defines it.
  Cx Power(Cx x, Cx y) {
    Cx r = Exp(Multiply(y, Log(x)));
    Value* y_zero = And(b_.CreateFCmpOEQ(y.re, C(0)), b_.CreateFCmpOEQ(y.im, C(0)));
    return {Sel(y_zero, C(1), r.re), Sel(y_zero, C(0), r.im)};
  }

 private:
  llvm::IRBuilder<>& b_;
  llvm::Type* t_;
};

Cx Parts(llvm::IRBuilder<>& b, Value* z) { return {b.CreateExtractValue(z, 0), b.CreateExtractValue(z, 1)}; }

Value* Pack(llvm::IRBuilder<>& b, llvm::Type* type, Cx z) {
  Value* v = llvm::UndefValue::get(type);
  v = b.CreateInsertValue(v, z.re, 0);
  return b.CreateInsertValue(v, z.im, 1);
}

Cx Extend(llvm::IRBuilder<>& b, Cx z) {
  return {b.CreateFPExt(z.re, b.getDoubleTy()), b.CreateFPExt(z.im, b.getDoubleTy())};
}

Cx Truncate(llvm::IRBuilder<>& b, Cx z) {
  return {b.CreateFPTrunc(z.re, b.getFloatTy()), b.CreateFPTrunc(z.im, b.getFloatTy())};
}

}  // namespace

bool UseInlineComplexMath(llvm::IRBuilder<>& b) {
  const llvm::Module* module = b.GetInsertBlock()->getModule();
  return llvm::Triple(module->getTargetTriple()).isNVPTX() ||
         module->getModuleFlag(kNoRuntimeFlag) != nullptr;
}

StatusOr<Value*> EmitInlineComplexUnary(llvm::IRBuilder<>& b, HloOpcode op, Value* z) {
  llvm::Type* part = z->getType()->getStructElementType(0);
  ComplexMath m(b, part);
  const Cx x = Parts(b, z);
  Cx r;
  switch (op) {
    case HloOpcode::kAbs: return m.Abs(x);
    case HloOpcode::kExp: r = m.Exp(x); break;
    case HloOpcode::kExpm1: r = m.Expm1(x); break;
    case HloOpcode::kLog: r = m.Log(x); break;
    case HloOpcode::kLog1p: r = m.Log1p(x); break;
    case HloOpcode::kSqrt: r = m.Sqrt(x); break;
    case HloOpcode::kTanh: r = m.Tanh(x); break;
    case HloOpcode::kSin: r = m.Sin(x); break;
    case HloOpcode::kCos: r = m.Cos(x); break;
    case HloOpcode::kSign: r = m.Sign(x); break;
    case HloOpcode::kRsqrt: case HloOpcode::kLogistic: {
      // 1 / sqrt(z) and 1 / (1 + exp(-z)), divided as the evaluator's std::complex divides.
      Cx den = op == HloOpcode::kRsqrt
                   ? m.Sqrt(x)
                   : [&] {
                       Cx e = m.Exp({b.CreateFNeg(x.re), b.CreateFNeg(x.im)});
                       return Cx{b.CreateFAdd(m.C(1), e.re), b.CreateFAdd(m.C(0), e.im)};
                     }();
      Cx one{m.C(1), m.C(0)};
      if (part->isFloatTy()) {
        ComplexMath d(b, b.getDoubleTy());
        r = Truncate(b, d.Divide(Extend(b, one), Extend(b, den)));
      } else {
        r = m.Divide(one, den);
      }
      break;
    }
    default:
      return Error(fmt::format("{} of a complex value is not supported by code generation",
                               HloOpcodeString(op)));
  }
  return Pack(b, z->getType(), r);
}

StatusOr<Value*> EmitInlineComplexBinary(llvm::IRBuilder<>& b, HloOpcode op, Value* lhs, Value* rhs) {
  llvm::Type* part = lhs->getType()->getStructElementType(0);
  ComplexMath m(b, part);
  const Cx x = Parts(b, lhs), y = Parts(b, rhs);
  switch (op) {
    case HloOpcode::kMultiply: return Pack(b, lhs->getType(), m.Multiply(x, y));
    case HloOpcode::kDivide:
      // libgcc divides complex64 in double precision; so does this.
      if (part->isFloatTy()) {
        ComplexMath d(b, b.getDoubleTy());
        return Pack(b, lhs->getType(), Truncate(b, d.Divide(Extend(b, x), Extend(b, y))));
      }
      return Pack(b, lhs->getType(), m.Divide(x, y));
    case HloOpcode::kPower: return Pack(b, lhs->getType(), m.Power(x, y));
    default:
      return Error(fmt::format("{} of complex values is not supported by code generation",
                               HloOpcodeString(op)));
  }
}

Value* EmitInlineIntegerPower(llvm::IRBuilder<>& b, bool is_signed, Value* x, Value* y) {
  llvm::Type* t = x->getType();
  const unsigned bits = t->getIntegerBitWidth();
  Value* one = llvm::ConstantInt::get(t, 1);
  Value* result = one;
  Value* base = x;
  // A non-negative signed exponent has its top bit clear: one square fewer.
  const unsigned steps = is_signed ? bits - 1 : bits;
  for (unsigned i = 0; i < steps; ++i) {
    Value* bit = b.CreateICmpNE(b.CreateAnd(y, llvm::ConstantInt::get(t, uint64_t{1} << i)),
                                llvm::ConstantInt::get(t, 0));
    result = b.CreateSelect(bit, b.CreateMul(result, base), result);
    if (i + 1 < steps) base = b.CreateMul(base, base);
  }
  if (!is_signed) return result;
  Value* minus_one = llvm::ConstantInt::getSigned(t, -1);
  Value* odd = b.CreateICmpNE(b.CreateAnd(y, one), llvm::ConstantInt::get(t, 0));
  Value* negative_power =
      b.CreateSelect(b.CreateICmpEQ(x, one), one,
                     b.CreateSelect(b.CreateICmpEQ(x, minus_one),
                                    b.CreateSelect(odd, minus_one, one), llvm::ConstantInt::get(t, 0)));
  return b.CreateSelect(b.CreateICmpSLT(y, llvm::ConstantInt::get(t, 0)), negative_power, result);
}

}  // namespace xlens::codegen

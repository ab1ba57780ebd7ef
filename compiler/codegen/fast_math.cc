#include "compiler/codegen/fast_math.h"

#include <initializer_list>

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/PatternMatch.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Triple.h>

namespace xlens::codegen {
namespace {

using llvm::Value;

Value* F(llvm::IRBuilder<>& b, double v) { return llvm::ConstantFP::get(b.getFloatTy(), v); }
Value* I(llvm::IRBuilder<>& b, int32_t v) { return b.getInt32(static_cast<uint32_t>(v)); }

Value* Call(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id, std::initializer_list<Value*> args) {
  return b.CreateIntrinsic(id, {b.getFloatTy()}, args);
}

// c[0] * z^(n-1) + ... + c[n-1], by Horner's rule with fused multiply-adds where the target has
// them.
Value* Polynomial(llvm::IRBuilder<>& b, Value* z, std::initializer_list<double> c) {
  auto it = c.begin();
  Value* p = F(b, *it++);
  for (; it != c.end(); ++it) p = Call(b, llvm::Intrinsic::fmuladd, {p, z, F(b, *it)});
  return p;
}

Value* IsNan(llvm::IRBuilder<>& b, Value* x) { return b.CreateFCmpUNO(x, x); }

// Whether `x` is known to be zero, negative or NaN: -(a * a) (JAX's erfc takes exp of it, from
// every erf GELU) and -a * a (a Gaussian), or whatever LLVM's value tracking can tell.
bool KnownNotPositive(llvm::IRBuilder<>& b, Value* x) {
  Value* a = nullptr;
  if (llvm::PatternMatch::match(x, llvm::PatternMatch::m_c_FMul(
                                       llvm::PatternMatch::m_FNeg(llvm::PatternMatch::m_Value(a)),
                                       llvm::PatternMatch::m_Deferred(a)))) {
    return true;
  }
  const llvm::DataLayout& layout = b.GetInsertBlock()->getModule()->getDataLayout();
  return llvm::computeKnownFPClass(x, layout, llvm::KnownFPClass::OrderedGreaterThanZeroMask)
      .cannotBeOrderedGreaterThanZero();
}

}  // namespace

bool UseInlineTranscendentals(llvm::IRBuilder<>& b) {
  const llvm::Module* module = b.GetInsertBlock()->getModule();
  const llvm::Triple triple(module->getTargetTriple());
  return triple.getArch() != llvm::Triple::UnknownArch && !triple.isNVPTX() &&
         !triple.isAMDGPU();
}

namespace {

// e^r - 1 for the reduced argument r in [-ln2/2, ln2/2] (or a little past it).
Value* ExpMinusOneReduced(llvm::IRBuilder<>& b, Value* r) {
  // e^r - 1 = r + r^2 P(r), P of degree 4 minimax for relative error on [-ln2/2, ln2/2]
  // (3.1e-9 with its f32 coefficients; 1 ulp in all), evaluated as a tree of fused
  // multiply-adds in r and r^2 (Estrin's scheme) rather than one Horner chain: one operation
  // more, but the chain from r to the result is a square and three fused multiply-adds instead
  // of six, and a loop of these waits on that latency as much as on the multiply ports.
  Value* r2 = b.CreateFMul(r, r);
  Value* lo = Call(b, llvm::Intrinsic::fmuladd, {F(b, 1.66665211e-1), r, F(b, 4.99999940e-1)});
  Value* hi = Call(b, llvm::Intrinsic::fmuladd, {F(b, 8.36874545e-3), r, F(b, 4.16683890e-2)});
  hi = Call(b, llvm::Intrinsic::fmuladd, {F(b, 1.38145394e-3), r2, hi});
  Value* h = Call(b, llvm::Intrinsic::fmuladd, {hi, r2, lo});
  return Call(b, llvm::Intrinsic::fmuladd, {h, r2, r});
}

// e^x, or with `scaled` (x <= 0 or NaN) e^x 2^34 before its last multiply.
Value* EmitFastExp(llvm::IRBuilder<>& b, Value* x, bool not_positive, bool scaled) {
  llvm::IRBuilder<>::FastMathFlagGuard guard(b);
  b.clearFastMathFlags();
  // Beyond [-110, 89] the result is 0 or inf already; with `scaled`, below -110 it is the
  // clamped e^-110 2^34 (about 2^-125), which only the last multiply flushes to 0, so a caller
  // that skips that multiply must know its terms are not all that small (cpu_row_loops.cc shifts
  // by the row's own maximum, one term e^0). The clamps are compares and selects, which
  // x86 does in one min or max each and which pass NaN through: NaN then flows through every
  // step below to the result, with no compare and blend at the end for it.
  // The upper one is left out where x cannot be positive.
  not_positive = not_positive || KnownNotPositive(b, x);
  Value* xc = b.CreateSelect(b.CreateFCmpOLT(x, F(b, -110.0)), F(b, -110.0), x);
  if (!not_positive) {
    xc = b.CreateSelect(b.CreateFCmpOGT(xc, F(b, 89.0)), F(b, 89.0), xc);
  }
  // x = n ln2 + r, |r| <= ln2 / 2, with ln2 in two parts so that n * ln2_hi is exact. n is
  // rounded by adding 1.5 * 2^23 in the same fused multiply-add that scales x (the sum's ulp is
  // 1, so it rounds x log2(e) to the nearest integer, ties to even), and its integer is the
  // sum's low bits: no round instruction, and no float-to-int conversion, whose NaN would be
  // poison.
  constexpr double kRoundMagic = 12582912.0;  // 1.5 * 2^23, bits 0x4b400000
  Value* t = Call(b, llvm::Intrinsic::fmuladd, {xc, F(b, 1.44269504088896341), F(b, kRoundMagic)});
  Value* n = b.CreateFSub(t, F(b, kRoundMagic));
  Value* r = Call(b, llvm::Intrinsic::fmuladd, {n, F(b, -0.693359375), xc});
  r = Call(b, llvm::Intrinsic::fmuladd, {n, F(b, 2.12194440e-4), r});
  Value* q = ExpMinusOneReduced(b, r);
  // e^x = (1 + q) 2^n, n in [-159, 128]: more than one float's exponent range, so 2^n is
  // 2^(n + k) 2^-k, the first factor a normal number whose bits are (n + k + 127) << 23 and
  // whose product with 1 + q is exact (normal), the second rounding once where the result is
  // subnormal. For n <= 0, k = 34 (n + k >= -125: 1 + q >= 0.7 stays normal); for n > 0, k = -1
  // (n + k <= 127). Where x cannot be positive k is a constant: two integer operations and two
  // multiplies in all, where halving n into two powers took seven and two. The sum's bits are
  // 0x4b400000 + n, and 0x4b400000 << 23 is 0 in 32 bits, so the shift takes n from them as is.
  // (1 + q) p is one fused multiply-add, q p + p: p is a power of two, so it rounds as 1 + q
  // does. A result below 2^-126 rounds to a subnormal here, which the runtime's FTZ flushes to 0
  // as XLA:CPU's does (fast_math.h): matching XLA takes no compare and select.
  Value* bits = b.CreateBitCast(t, b.getInt32Ty());
  Value* k = I(b, 127 + 34);
  Value* scale = F(b, 0x1p-34);
  if (!not_positive) {
    Value* negative = b.CreateFCmpOLT(xc, F(b, 0.0));
    k = b.CreateSelect(negative, k, I(b, 127 - 1));
    scale = b.CreateSelect(negative, scale, F(b, 2.0));
  }
  Value* p = b.CreateBitCast(b.CreateShl(b.CreateAdd(bits, k), I(b, 23)), b.getFloatTy());
  if (scaled) return Call(b, llvm::Intrinsic::fmuladd, {q, p, p});
  return b.CreateFMul(Call(b, llvm::Intrinsic::fmuladd, {q, p, p}), scale);
}

// e^(-a^2) 2^34 of a float `a` in [0, kExpMinusSquareMaxArgument] or NaN, with a^2 exact: what
// EmitFastExpF32Scaled(-(a a)) computes, but where that rounds a a first (near a = 8 half an ulp
// of 64, so e^(-a^2) 4e-6 off), here the product enters the reduction unrounded: r = -a a -
// n ln2_hi is one fused multiply-add, exact but for its one rounding, since n ln2_hi is exact (9
// and 8 significant bits). n is rounded from -a (a log2(e)), whose error moves r a hair past
// ln2/2 at worst, which the polynomial covers. The bound keeps -a^2 at -110 or above, so there
// is no clamp.
constexpr double kExpMinusSquareMaxArgument = 10.48;  // 10.48^2 = 109.83
Value* EmitFastExpOfMinusSquareScaled(llvm::IRBuilder<>& b, Value* a) {
  constexpr double kRoundMagic = 12582912.0;  // as in EmitFastExp
  Value* minus_a_log2e = b.CreateFMul(a, F(b, -1.44269504088896341));
  Value* t = Call(b, llvm::Intrinsic::fmuladd, {minus_a_log2e, a, F(b, kRoundMagic)});
  Value* n = b.CreateFSub(t, F(b, kRoundMagic));
  Value* r = Call(b, llvm::Intrinsic::fmuladd,
                  {b.CreateFNeg(a), a, b.CreateFMul(n, F(b, -0.693359375))});
  r = Call(b, llvm::Intrinsic::fmuladd, {n, F(b, 2.12194440e-4), r});
  Value* q = ExpMinusOneReduced(b, r);
  // 2^(n + 34) as EmitFastExp's scaled form makes it (n in [-159, 0]).
  Value* bits = b.CreateBitCast(t, b.getInt32Ty());
  Value* p = b.CreateBitCast(b.CreateShl(b.CreateAdd(bits, I(b, 127 + 34)), I(b, 23)),
                             b.getFloatTy());
  return Call(b, llvm::Intrinsic::fmuladd, {q, p, p});
}

}  // namespace

Value* EmitFastExpF32(llvm::IRBuilder<>& b, Value* x, bool not_positive) {
  return EmitFastExp(b, x, not_positive, false);
}

Value* EmitFastExpF32Scaled(llvm::IRBuilder<>& b, Value* x) { return EmitFastExp(b, x, true, true); }

Value* EmitFastLogF32(llvm::IRBuilder<>& b, Value* x) {
  llvm::IRBuilder<>::FastMathFlagGuard guard(b);
  b.clearFastMathFlags();
  // Denormals are scaled into the normal range first.
  Value* denormal = b.CreateFCmpOLT(x, F(b, 1.17549435e-38));
  Value* xs = b.CreateSelect(denormal, b.CreateFMul(x, F(b, 8388608.0)), x);
  Value* bits = b.CreateBitCast(xs, b.getInt32Ty());
  // x = m 2^e with m in [sqrt(1/2), sqrt(2)).
  Value* e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, I(b, 23)), I(b, 0xff)), I(b, 126));
  e = b.CreateSub(e, b.CreateSelect(denormal, I(b, 23), I(b, 0)));
  Value* m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, I(b, 0x007fffff)), I(b, 0x3f000000)),
                             b.getFloatTy());
  Value* below = b.CreateFCmpOLT(m, F(b, 0.707106781186547524));
  e = b.CreateSub(e, b.CreateZExt(below, b.getInt32Ty()));
  m = b.CreateFSub(b.CreateSelect(below, b.CreateFAdd(m, m), m), F(b, 1.0));
  // log(1 + m) = m - m^2/2 + m^3 P(m) (Cephes' logf), plus e ln2 in two parts.
  Value* z = b.CreateFMul(m, m);
  Value* p = Polynomial(b, m, {7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                               -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                               2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1});
  Value* fe = b.CreateSIToFP(e, b.getFloatTy());
  Value* y = b.CreateFMul(b.CreateFMul(m, z), p);
  y = b.CreateFAdd(y, b.CreateFMul(fe, F(b, -2.12194440e-4)));
  y = b.CreateFSub(y, b.CreateFMul(z, F(b, 0.5)));
  Value* result = b.CreateFAdd(b.CreateFAdd(m, y), b.CreateFMul(fe, F(b, 0.693359375)));
  const auto inf = llvm::ConstantFP::getInfinity(b.getFloatTy());
  result = b.CreateSelect(b.CreateFCmpOEQ(x, inf), inf, result);
  result = b.CreateSelect(b.CreateFCmpOEQ(x, F(b, 0.0)),
                          llvm::ConstantFP::getInfinity(b.getFloatTy(), /*Negative=*/true), result);
  result = b.CreateSelect(b.CreateFCmpOLT(x, F(b, 0.0)),
                          llvm::ConstantFP::getQNaN(b.getFloatTy()), result);
  return b.CreateSelect(IsNan(b, x), x, result);
}

Value* EmitFastTanhF32(llvm::IRBuilder<>& b, Value* x) {
  llvm::IRBuilder<>::FastMathFlagGuard guard(b);
  b.clearFastMathFlags();
  // XLA's CPU tanh (Eigen's): x P(x^2) / Q(x^2), one divide and eleven fused multiply-adds. The
  // half-angle form this replaced (3 ulp) took two divides and twice the arithmetic, the most
  // of any function in a loop of them (sigmoid * tanh + exp: 95 cycles a 16-lane vector against
  // 75). The clamp is where the quotient reaches 1 exactly, so tanh(+-inf) is +-1; the compares
  // let NaN through. Below 0.0004, tanh(x) is x in f32 (and the sign of zero is kept), where
  // the ratio of the constant terms is 2 ulp short of 1.
  constexpr double kClamp = 7.99881172180175781;
  Value* xc = b.CreateSelect(b.CreateFCmpOGT(x, F(b, kClamp)), F(b, kClamp), x);
  xc = b.CreateSelect(b.CreateFCmpOLT(xc, F(b, -kClamp)), F(b, -kClamp), xc);
  Value* z = b.CreateFMul(xc, xc);
  Value* p = Polynomial(b, z, {-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                               5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                               4.89352455891786e-03});
  Value* q = Polynomial(b, z, {1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                               4.89352518554385e-03});
  // Below the cutoff x times 1 rather than x itself, so that a flushing runtime flushes a
  // denormal x as it does every arithmetic result. (x P) / Q, not x (P / Q): 4 ulp, not 5.
  Value* small = b.CreateFCmpOLT(Call(b, llvm::Intrinsic::fabs, {x}), F(b, 0.0004));
  Value* xp = b.CreateFMul(xc, b.CreateSelect(small, F(b, 1.0), p));
  return b.CreateSelect(small, xp, b.CreateFDiv(xp, q));
}

Value* EmitFastLogisticF32(llvm::IRBuilder<>& b, Value* x) {
  llvm::IRBuilder<>::FastMathFlagGuard guard(b);
  b.clearFastMathFlags();
  Value* e = EmitFastExpF32(b, b.CreateFNeg(x));
  return b.CreateFDiv(F(b, 1.0), b.CreateFAdd(F(b, 1.0), e));
}

Value* EmitFastErfF32(llvm::IRBuilder<>& b, Value* x) {
  llvm::IRBuilder<>::FastMathFlagGuard guard(b);
  b.clearFastMathFlags();
  // |x| < 1: x T(x^2) (Cephes' erff); otherwise 1 - erfc(|x|) with erfc as EmitFastErfcF32
  // takes it (one divide, one exp and one polynomial, where Cephes' erfcf, which this took
  // before, has two divides and two polynomials, both computed by a vectorized loop). erfc(|x|)
  // is at most 0.16 there, so its relative error of a few ulp is at most about an ulp of erf.
  // erfc(+-inf) is 0, and NaN flows through both branches to the result.
  Value* z = b.CreateFMul(x, x);
  Value* small = b.CreateFMul(
      x, Polynomial(b, z, {7.853861353153693e-5, -8.010193625184903e-4, 5.188327685732524e-3,
                           -2.685381193529856e-2, 1.128358514861418e-1, -3.761262582423300e-1,
                           1.128379165726710e+0}));
  Value* ax = Call(b, llvm::Intrinsic::fabs, {x});
  Value* large = Call(b, llvm::Intrinsic::copysign,
                      {b.CreateFSub(F(b, 1.0), EmitFastErfcF32(b, ax)), x});
  return b.CreateSelect(b.CreateFCmpOLT(ax, F(b, 1.0)), small, large);
}

Value* EmitFastErfcF32(llvm::IRBuilder<>& b, Value* x) {
  llvm::IRBuilder<>::FastMathFlagGuard guard(b);
  b.clearFastMathFlags();
  // erfc(a) = t G(t) e^(-a^2) for a = |x|, t = 1 / (1 + a/2) in (0, 1], where G(t) =
  // erfcx(a) / t runs smoothly from 1/(2 sqrt(pi)) at t = 0 (a -> inf) to 1 at t = 1 (a = 0)
  // and is one polynomial of degree 10 over the whole line (fitted for relative error by
  // reweighted least squares; 1.1e-8 in double precision); erfc(x) = 2 - erfc(-x) for x < 0.
  // The form of Numerical Recipes' erfcc (the same t), with e^(-a^2) apart from the polynomial
  // rather than e^(-a^2 + c(t)), so that the divide and the polynomial run beside the exp
  // instead of before it: a vectorized loop of it is held to its instructions rather than to
  // one long chain of latencies. Cephes' form (JAX's expansion of erfc) takes two divides, an
  // exp and three polynomials whose results a select throws away but one: a loop of JAX's exact
  // GELU took 0.55-0.64 ns an element with it and 0.44 with this, on one core in cache (best of
  // 3000 runs of 8192 elements, 5 rounds, load 5-9); e^(-a^2 + c(t)) with c's polynomial before
  // the exp, 0.56.
  //
  // Such a loop is bound by the vector ports (AVX-512 runs on two): every operation counts. On
  // AVX-512 the exact GELU's vector body is 36 arithmetic instructions (one divide). e^(-a^2)
  // takes a a unrounded into its reduction (EmitFastExpOfMinusSquareScaled), where rounding a a
  // first and correcting the result by the product's error to first order took two more, and
  // its clamp is this function's: a is held at 10.48, where erfc is 1e-49, 0 in f32 (erfc(10)
  // is 2e-45), so that -a^2 needs none of exp's. Within 6 ulp of double precision over the line
  // (fast_math_accuracy_test), 1 for x < -1. e^(-a^2) is taken before its last scaling by 2^-34,
  // which the polynomial's coefficients carry instead: exact, powers of two.
  //
  // The compare lets NaN through, and NaN flows to the result.
  Value* ax = Call(b, llvm::Intrinsic::fabs, {x});
  Value* a = b.CreateSelect(b.CreateFCmpOGT(ax, F(b, kExpMinusSquareMaxArgument)),
                            F(b, kExpMinusSquareMaxArgument), ax);
  Value* t = b.CreateFDiv(F(b, 1.0), Call(b, llvm::Intrinsic::fmuladd, {a, F(b, 0.5), F(b, 1.0)}));
  constexpr double k = kFastExpScaledFactor;
  Value* g = Polynomial(b, t, {4.235239327e-02 * k, -2.308566719e-01 * k, 4.861768484e-01 * k,
                               -4.469751418e-01 * k, 1.270878464e-01 * k, -5.723176897e-02 * k,
                               9.300038964e-02 * k, 1.753768623e-01 * k, 2.468805760e-01 * k,
                               2.820938528e-01 * k, 2.820948064e-01 * k});
  Value* y = b.CreateFMul(b.CreateFMul(t, g), EmitFastExpOfMinusSquareScaled(b, a));
  return b.CreateSelect(b.CreateFCmpOLT(x, F(b, 0.0)), b.CreateFSub(F(b, 2.0), y), y);
}

llvm::Function* EmitUnaryF32Loop(llvm::Module& module, const std::string& name,
                                 UnaryF32Emitter emit) {
  llvm::IRBuilder<> b(module.getContext());
  llvm::Type* ptr = b.getPtrTy();
  llvm::Function* f = llvm::Function::Create(
      llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, b.getInt64Ty()}, false),
      llvm::Function::ExternalLinkage, name, &module);
  llvm::LLVMContext& context = module.getContext();
  auto* entry = llvm::BasicBlock::Create(context, "entry", f);
  auto* loop = llvm::BasicBlock::Create(context, "loop", f);
  auto* exit = llvm::BasicBlock::Create(context, "exit", f);
  b.SetInsertPoint(entry);
  b.CreateCondBr(b.CreateICmpSGT(f->getArg(2), b.getInt64(0)), loop, exit);
  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2);
  i->addIncoming(b.getInt64(0), entry);
  llvm::Value* x = b.CreateLoad(b.getFloatTy(), b.CreateGEP(b.getFloatTy(), f->getArg(0), i));
  b.CreateStore(emit(b, x), b.CreateGEP(b.getFloatTy(), f->getArg(1), i));
  llvm::Value* next = b.CreateAdd(i, b.getInt64(1));
  i->addIncoming(next, loop);
  b.CreateCondBr(b.CreateICmpSLT(next, f->getArg(2)), loop, exit);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
  return f;
}

}  // namespace xlens::codegen

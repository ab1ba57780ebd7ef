#include "compiler/codegen/float8_ir.h"

#include <cmath>

#include <llvm/IR/Intrinsics.h>

namespace xlens::codegen {

namespace {

using llvm::Value;

int MaxField(const Float8Format& f) { return (1 << f.exponent_bits) - 1; }

uint8_t NanBits(const Float8Format& f) {
  switch (f.kind) {
    case Float8Kind::kIeee:
      return static_cast<uint8_t>((MaxField(f) << f.mantissa_bits) | (1 << (f.mantissa_bits - 1)));
    case Float8Kind::kFiniteNan: return 0x7f;
    case Float8Kind::kFiniteUnsignedZero: break;
  }
  return 0x80;
}

// The largest finite magnitude, as bits without the sign.
int MaxFiniteBits(const Float8Format& f) {
  switch (f.kind) {
    case Float8Kind::kIeee: return (MaxField(f) << f.mantissa_bits) - 1;
    case Float8Kind::kFiniteNan: return 0x7e;
    case Float8Kind::kFiniteUnsignedZero: break;
  }
  return 0x7f;
}

}  // namespace

Value* EmitFloat8ToF32(llvm::IRBuilder<>& b, const Float8Format& f, Value* bits) {
  const int m = f.mantissa_bits;
  Value* u = b.CreateZExt(bits, b.getInt32Ty());
  Value* magnitude_bits = b.CreateAnd(u, 0x7f);
  Value* field = b.CreateLShr(magnitude_bits, m);
  Value* mantissa = b.CreateAnd(u, (1 << m) - 1);
  // A normal number: rebias the exponent and widen the mantissa into f32's fields.
  Value* normal = b.CreateBitCast(
      b.CreateOr(b.CreateShl(b.CreateAdd(field, b.getInt32(127 - f.bias)), 23),
                 b.CreateShl(mantissa, 23 - m)),
      b.getFloatTy());
  // A subnormal (or zero): mantissa * 2^(1 - bias - m), exact in f32.
  Value* subnormal = b.CreateFMul(b.CreateUIToFP(mantissa, b.getFloatTy()),
                                  llvm::ConstantFP::get(b.getFloatTy(), std::ldexp(1.0, 1 - f.bias - m)));
  Value* value = b.CreateSelect(b.CreateICmpEQ(field, b.getInt32(0)), subnormal, normal);
  llvm::Type* ft = b.getFloatTy();
  Value* nan = llvm::ConstantFP::getNaN(ft);
  switch (f.kind) {
    case Float8Kind::kIeee: {
      Value* top = b.CreateICmpEQ(field, b.getInt32(MaxField(f)));
      Value* special = b.CreateSelect(b.CreateICmpEQ(mantissa, b.getInt32(0)),
                                      llvm::ConstantFP::getInfinity(ft), nan);
      value = b.CreateSelect(top, special, value);
      break;
    }
    case Float8Kind::kFiniteNan:
      value = b.CreateSelect(b.CreateICmpEQ(magnitude_bits, b.getInt32(0x7f)), nan, value);
      break;
    case Float8Kind::kFiniteUnsignedZero:
      // 0x80 is the NaN: its magnitude bits are those of zero, and the sign below makes it -NaN.
      value = b.CreateSelect(b.CreateICmpEQ(u, b.getInt32(0x80)), nan, value);
      break;
  }
  return b.CreateSelect(b.CreateICmpNE(b.CreateAnd(u, 0x80), b.getInt32(0)), b.CreateFNeg(value),
                        value);
}

Value* EmitToFloat8(llvm::IRBuilder<>& b, const Float8Format& f, Value* value) {
  llvm::Type* ft = value->getType();
  const bool is_double = ft->isDoubleTy();
  const int width = is_double ? 64 : 32;
  const int wide_mantissa = is_double ? 52 : 23;
  const int wide_bias = is_double ? 1023 : 127;
  llvm::Type* it = b.getIntNTy(width);
  const int m = f.mantissa_bits;
  const int shift = wide_mantissa - m;
  auto c = [&](uint64_t v) { return llvm::ConstantInt::get(it, v); };

  Value* u = b.CreateBitCast(value, it);
  Value* negative = b.CreateICmpSLT(u, c(0));
  Value* a = b.CreateAnd(u, c(~(uint64_t{1} << (width - 1))));  // |value|'s bits
  // A normal result: round the wide mantissa to m bits (to nearest even, by integer addition,
  // which carries into the exponent), then rebias. Past the largest finite value the result is
  // compared away below, so the arithmetic may wrap there.
  Value* lsb = b.CreateAnd(b.CreateLShr(a, shift), c(1));
  Value* rounded = b.CreateAdd(b.CreateAdd(a, c((uint64_t{1} << (shift - 1)) - 1)), lsb);
  Value* normal = b.CreateSub(b.CreateLShr(rounded, shift),
                              c(static_cast<uint64_t>(wide_bias - f.bias) << m));
  // A subnormal result: |value| in units of the smallest subnormal, rounded to nearest even (a
  // value that rounds up to 2^m is the smallest normal, whose bits are 2^m too).
  Value* magnitude = b.CreateBitCast(a, ft);
  Value* units = b.CreateFMul(magnitude, llvm::ConstantFP::get(ft, std::ldexp(1.0, f.bias - 1 + m)));
  Value* even = b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, units);
  Value* subnormal = b.CreateFPToUI(even, it);
  const uint64_t min_normal_bits = static_cast<uint64_t>(wide_bias + 1 - f.bias) << wide_mantissa;
  Value* bits = b.CreateSelect(b.CreateICmpULT(a, c(min_normal_bits)), subnormal, normal);
  // Too large (inf included): inf where the format has one, else NaN. NaN: the format's NaN.
  const uint64_t inf_bits = static_cast<uint64_t>(MaxField(f)) << m;
  const uint64_t overflow = f.kind == Float8Kind::kIeee ? inf_bits : NanBits(f);
  Value* too_large = b.CreateICmpUGT(bits, c(MaxFiniteBits(f)));
  // Compare the wide magnitude too: `normal` wraps for huge values.
  const uint64_t wide_limit = static_cast<uint64_t>(wide_bias + MaxField(f) + 1 - f.bias)
                              << wide_mantissa;
  too_large = b.CreateOr(too_large, b.CreateICmpUGE(a, c(wide_limit)));
  bits = b.CreateSelect(too_large, c(overflow), bits);
  const uint64_t wide_inf = ((uint64_t{1} << (width - wide_mantissa - 1)) - 1) << wide_mantissa;
  Value* is_nan = b.CreateICmpUGT(a, c(wide_inf));
  bits = b.CreateSelect(is_nan, c(NanBits(f)), bits);
  Value* result = b.CreateTrunc(bits, b.getInt8Ty());
  // The sign: none on the fnuz formats' zero and NaN (0x80 is NaN there, its own pattern).
  Value* signed_result = b.CreateOr(result, b.getInt8(0x80));
  Value* keep_sign = negative;
  if (f.kind == Float8Kind::kFiniteUnsignedZero) {
    keep_sign = b.CreateAnd(keep_sign, b.CreateAnd(b.CreateICmpNE(result, b.getInt8(0)),
                                                   b.CreateICmpNE(result, b.getInt8(0x80))));
  }
  return b.CreateSelect(keep_sign, signed_result, result);
}

}  // namespace xlens::codegen

#include "compiler/codegen/cpu/runtime_symbols.h"

#include <cmath>
#include <complex>
#include <cstdint>

#include "compiler/hlo/complex_math.h"
#include "compiler/hlo/opcode.h"

namespace xlens::codegen {
namespace {

int64_t PowiSigned(int64_t a, int64_t b) {
  // Negative exponents: only 1 and -1 have integer reciprocals; everything else gives 0.
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return (b & 1) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, base = static_cast<uint64_t>(a), e = static_cast<uint64_t>(b);
  while (e != 0) {
    if (e & 1) result *= base;
    base *= base;
    e >>= 1;
  }
  return static_cast<int64_t>(result);
}

uint64_t PowiUnsigned(uint64_t a, uint64_t e) {
  uint64_t result = 1;
  while (e != 0) {
    if (e & 1) result *= a;
    a *= a;
    e >>= 1;
  }
  return result;
}


template <typename C>
void ComplexUnary(int32_t op, C* z) {
  switch (static_cast<HloOpcode>(op)) {
    case HloOpcode::kAbs: *z = C(std::abs(*z), 0); break;
    case HloOpcode::kExp: *z = std::exp(*z); break;
    case HloOpcode::kExpm1: *z = ComplexExpm1(*z); break;
    case HloOpcode::kLog: *z = std::log(*z); break;
    case HloOpcode::kLog1p: *z = ComplexLog1p(*z); break;
    case HloOpcode::kSqrt: *z = std::sqrt(*z); break;
    case HloOpcode::kRsqrt: *z = C(1) / std::sqrt(*z); break;
    case HloOpcode::kTanh: *z = std::tanh(*z); break;
    case HloOpcode::kLogistic: *z = C(1) / (C(1) + std::exp(-*z)); break;
    case HloOpcode::kSin: *z = std::sin(*z); break;
    case HloOpcode::kCos: *z = std::cos(*z); break;
    case HloOpcode::kSign: {
      const auto magnitude = std::abs(*z);
      if (magnitude != 0) *z = *z / magnitude;
      break;
    }
    default: break;
  }
}

template <typename C>
void ComplexBinary(int32_t op, C* a, const C* b) {
  switch (static_cast<HloOpcode>(op)) {
    case HloOpcode::kMultiply: *a = *a * *b; break;
    case HloOpcode::kDivide: *a = *a / *b; break;
    case HloOpcode::kPower: *a = *b == C(0) ? C(1) : std::pow(*a, *b); break;
    default: break;
  }
}

extern "C" {
void XlensComplex64Unary(int32_t op, std::complex<float>* z) { ComplexUnary(op, z); }
void XlensComplex128Unary(int32_t op, std::complex<double>* z) { ComplexUnary(op, z); }
void XlensComplex64Binary(int32_t op, std::complex<float>* a, const std::complex<float>* b) {
  ComplexBinary(op, a, b);
}
void XlensComplex128Binary(int32_t op, std::complex<double>* a, const std::complex<double>* b) {
  ComplexBinary(op, a, b);
}
// What LLVM calls for conversions the target has no instruction for (half travels in xmm
// registers, as _Float16 does).
_Float16 XlensTruncDoubleToHalf(double d) { return static_cast<_Float16>(d); }
_Float16 XlensTruncFloatToHalf(float f) { return static_cast<_Float16>(f); }
float XlensExtendHalfToFloat(_Float16 h) { return static_cast<float>(h); }
}

}  // namespace

const std::vector<std::pair<std::string, void*>>& CpuRuntimeSymbols() {
  static const auto* symbols = new std::vector<std::pair<std::string, void*>>{
      {"xlens_powi_s64", reinterpret_cast<void*>(&PowiSigned)},
      {"xlens_powi_u64", reinterpret_cast<void*>(&PowiUnsigned)},
      {"xlens_complex64_unary", reinterpret_cast<void*>(&XlensComplex64Unary)},
      {"xlens_complex128_unary", reinterpret_cast<void*>(&XlensComplex128Unary)},
      {"xlens_complex64_binary", reinterpret_cast<void*>(&XlensComplex64Binary)},
      {"xlens_complex128_binary", reinterpret_cast<void*>(&XlensComplex128Binary)},
      {"__truncdfhf2", reinterpret_cast<void*>(&XlensTruncDoubleToHalf)},
      {"__truncsfhf2", reinterpret_cast<void*>(&XlensTruncFloatToHalf)},
      {"__extendhfsf2", reinterpret_cast<void*>(&XlensExtendHalfToFloat)},
  };
  return *symbols;
}

}  // namespace xlens::codegen

// Binary elementwise instructions (arithmetic, logic, shifts, compare, complex) and clamp. Each
// instruction picks one typed loop, by opcode and element type, and runs it over the arrays.
#include <bit>
#include <cmath>
#include <limits>

#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {
namespace {

template <typename T>
using WideUnsigned = std::conditional_t<(sizeof(T) < sizeof(uint32_t)), uint32_t,
                                        std::make_unsigned_t<T>>;

// Integer arithmetic wraps around, as it does in XLA (two's complement, no undefined behaviour).
template <typename T>
T WrapAdd(T a, T b) {
  return static_cast<T>(static_cast<WideUnsigned<T>>(a) + static_cast<WideUnsigned<T>>(b));
}
template <typename T>
T WrapSubtract(T a, T b) {
  return static_cast<T>(static_cast<WideUnsigned<T>>(a) - static_cast<WideUnsigned<T>>(b));
}
template <typename T>
T WrapMultiply(T a, T b) {
  return static_cast<T>(static_cast<WideUnsigned<T>>(a) * static_cast<WideUnsigned<T>>(b));
}

template <typename T>
using RealOf = std::conditional_t<kIsComplex<T>, typename T::value_type, T>;

// Floating-point maximum/minimum propagate NaN and order -0 below +0.
template <typename C>
C FloatMax(C a, C b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
template <typename C>
C FloatMin(C a, C b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

// --- Binary operations. Apply works on storage types; floats compute in ComputeType.

#define XLENS_FLOAT_BINARY(expr)                 \
  auto x = ToCompute(a);                         \
  auto y = ToCompute(b);                         \
  return FromCompute<T>(expr);

struct AddOp {
  template <typename T>
  static constexpr bool kSupports = true;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsPred<T>) return a || b;
    else if constexpr (kIsInteger<T>) return WrapAdd(a, b);
    else if constexpr (kIsComplex<T>) return a + b;
    else { XLENS_FLOAT_BINARY(x + y) }
  }
};

struct SubtractOp {
  template <typename T>
  static constexpr bool kSupports = !kIsPred<T>;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsInteger<T>) return WrapSubtract(a, b);
    else if constexpr (kIsComplex<T>) return a - b;
    else { XLENS_FLOAT_BINARY(x - y) }
  }
};

struct MultiplyOp {
  template <typename T>
  static constexpr bool kSupports = true;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsPred<T>) return a && b;
    else if constexpr (kIsInteger<T>) return WrapMultiply(a, b);
    else if constexpr (kIsComplex<T>) return a * b;
    else { XLENS_FLOAT_BINARY(x * y) }
  }
};

struct DivideOp {
  template <typename T>
  static constexpr bool kSupports = !kIsPred<T>;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsInteger<T>) {
      // XLA defines what C++ leaves undefined: x/0 is all ones, INT_MIN/-1 is INT_MIN.
      if (b == 0) return static_cast<T>(-1);
      if constexpr (std::is_signed_v<T>) {
        if (a == std::numeric_limits<T>::min() && b == -1) return a;
      }
      return static_cast<T>(a / b);
    } else if constexpr (kIsComplex<T>) {
      return a / b;
    } else {
      XLENS_FLOAT_BINARY(x / y)
    }
  }
};

struct RemainderOp {
  template <typename T>
  static constexpr bool kSupports = kIsInteger<T> || kIsFloat<T>;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsInteger<T>) {
      // x%0 is x, INT_MIN%-1 is 0.
      if (b == 0) return a;
      if constexpr (std::is_signed_v<T>) {
        if (a == std::numeric_limits<T>::min() && b == -1) return 0;
      }
      return static_cast<T>(a % b);
    } else {
      XLENS_FLOAT_BINARY(std::fmod(x, y))
    }
  }
};

struct PowerOp {
  template <typename T>
  static constexpr bool kSupports = !kIsPred<T>;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsInteger<T>) {
      if constexpr (std::is_signed_v<T>) {
        // Negative exponents: only 1 and -1 have integer reciprocals; everything else gives 0.
        if (b < 0) {
          if (a == 1) return 1;
          if (a == -1) return (b & 1) ? -1 : 1;
          return 0;
        }
      }
      T result = 1;
      T base = a;
      auto exponent = static_cast<std::make_unsigned_t<T>>(b);
      while (exponent != 0) {
        if (exponent & 1) result = WrapMultiply(result, base);
        base = WrapMultiply(base, base);
        exponent >>= 1;
      }
      return result;
    } else if constexpr (kIsComplex<T>) {
      if (b == T(0)) return T(1);
      return std::pow(a, b);
    } else {
      XLENS_FLOAT_BINARY(std::pow(x, y))
    }
  }
};

struct MaximumOp {
  template <typename T>
  static constexpr bool kSupports = !kIsComplex<T>;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsPred<T>) return a || b;
    else if constexpr (kIsInteger<T>) return a > b ? a : b;
    else { XLENS_FLOAT_BINARY(FloatMax(x, y)) }
  }
};

struct MinimumOp {
  template <typename T>
  static constexpr bool kSupports = !kIsComplex<T>;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsPred<T>) return a && b;
    else if constexpr (kIsInteger<T>) return a < b ? a : b;
    else { XLENS_FLOAT_BINARY(FloatMin(x, y)) }
  }
};

struct AndOp {
  template <typename T>
  static constexpr bool kSupports = kIsPred<T> || kIsInteger<T>;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsPred<T>) return a && b;
    else return static_cast<T>(a & b);
  }
};

struct OrOp {
  template <typename T>
  static constexpr bool kSupports = kIsPred<T> || kIsInteger<T>;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsPred<T>) return a || b;
    else return static_cast<T>(a | b);
  }
};

struct XorOp {
  template <typename T>
  static constexpr bool kSupports = kIsPred<T> || kIsInteger<T>;
  template <typename T>
  static T Apply(T a, T b) {
    if constexpr (kIsPred<T>) return a != b;
    else return static_cast<T>(a ^ b);
  }
};

struct Atan2Op {
  template <typename T>
  static constexpr bool kSupports = kIsFloat<T>;
  template <typename T>
  static T Apply(T a, T b) {
    XLENS_FLOAT_BINARY(std::atan2(x, y))
  }
};

#undef XLENS_FLOAT_BINARY

// Shift amounts are read as unsigned; amounts of at least the bit width shift everything out.
struct ShiftLeftOp {
  template <typename T>
  static constexpr bool kSupports = kIsInteger<T>;
  template <typename T>
  static T Apply(T a, T b) {
    using U = std::make_unsigned_t<T>;
    const U amount = static_cast<U>(b);
    if (amount >= sizeof(T) * 8) return 0;
    return static_cast<T>(static_cast<WideUnsigned<T>>(static_cast<U>(a)) << amount);
  }
};

struct ShiftRightLogicalOp {
  template <typename T>
  static constexpr bool kSupports = kIsInteger<T>;
  template <typename T>
  static T Apply(T a, T b) {
    using U = std::make_unsigned_t<T>;
    const U amount = static_cast<U>(b);
    if (amount >= sizeof(T) * 8) return 0;
    return static_cast<T>(static_cast<U>(a) >> amount);
  }
};

// Arithmetic on the bit pattern whatever the signedness of the type, as XLA's ashr.
struct ShiftRightArithmeticOp {
  template <typename T>
  static constexpr bool kSupports = kIsInteger<T>;
  template <typename T>
  static T Apply(T a, T b) {
    using U = std::make_unsigned_t<T>;
    using S = std::make_signed_t<T>;
    const U amount = static_cast<U>(b);
    const S value = static_cast<S>(a);
    if (amount >= sizeof(T) * 8) return static_cast<T>(value < 0 ? S{-1} : S{0});
    return static_cast<T>(static_cast<S>(value >> amount));
  }
};

struct ComplexOp {
  template <typename T>
  static constexpr bool kSupports = std::is_same_v<T, float> || std::is_same_v<T, double>;
  template <typename T>
  static std::complex<T> Apply(T a, T b) {
    return {a, b};
  }
};

// The key a comparison of kind K orders values of T by.
template <ComparisonType K, typename T>
auto CompareKey(T v) {
  if constexpr (kIsFloat<T>) {
    if constexpr (K == ComparisonType::kFloatTotalOrder) {
      // -NaN < -inf < ... < -0 < +0 < ... < inf < NaN: flip all but the sign bit of negatives.
      using Bits = std::conditional_t<
          sizeof(T) == 1, int8_t,
          std::conditional_t<sizeof(T) == 2, int16_t,
                             std::conditional_t<sizeof(T) == 4, int32_t, int64_t>>>;
      Bits bits = std::bit_cast<Bits>(v);
      return bits < 0 ? static_cast<Bits>(bits ^ std::numeric_limits<Bits>::max()) : bits;
    } else {
      return ToCompute(v);
    }
  } else if constexpr (kIsInteger<T> && K == ComparisonType::kSigned) {
    return static_cast<std::make_signed_t<T>>(v);
  } else if constexpr (kIsInteger<T> && K == ComparisonType::kUnsigned) {
    return static_cast<std::make_unsigned_t<T>>(v);
  } else {
    return v;
  }
}

template <ComparisonType K, ComparisonDirection D>
struct CompareOp {
  template <typename T>
  static constexpr bool kSupports =
      !kIsComplex<T> || D == ComparisonDirection::kEq || D == ComparisonDirection::kNe;
  template <typename T>
  static bool Apply(T a, T b) {
    if constexpr (kIsComplex<T>) {
      return D == ComparisonDirection::kEq ? a == b : a != b;
    } else {
      auto x = CompareKey<K>(a);
      auto y = CompareKey<K>(b);
      switch (D) {
        case ComparisonDirection::kEq: return x == y;
        case ComparisonDirection::kNe: return x != y;
        case ComparisonDirection::kGe: return x >= y;
        case ComparisonDirection::kGt: return x > y;
        case ComparisonDirection::kLe: return x <= y;
        case ComparisonDirection::kLt: return x < y;
      }
      return false;
    }
  }
};

template <typename Op, typename T>
void BinaryLoop(const void* lhs, const void* rhs, void* out, int64_t n) {
  using R = decltype(Op::Apply(T{}, T{}));
  const T* a = static_cast<const T*>(lhs);
  const T* b = static_cast<const T*>(rhs);
  R* o = static_cast<R*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = Op::Apply(a[i], b[i]);
}

// The kernel of Op for `type` and the element type it produces; null when unsupported.
template <typename Op>
std::pair<BinaryKernel, PrimitiveType> BinaryKernelFor(PrimitiveType type) {
  std::pair<BinaryKernel, PrimitiveType> result{nullptr, type};
  DispatchSupportedType(type, [&]<PrimitiveType P>() {
    using T = NativeType<P>;
    if constexpr (Op::template kSupports<T>) {
      result.first = &BinaryLoop<Op, T>;
      using R = decltype(Op::Apply(T{}, T{}));
      if constexpr (std::is_same_v<R, bool>) result.second = PrimitiveType::PRED;
      if constexpr (std::is_same_v<R, complex64>) result.second = PrimitiveType::C64;
      if constexpr (std::is_same_v<R, complex128>) result.second = PrimitiveType::C128;
    }
  });
  return result;
}

template <ComparisonType K>
std::pair<BinaryKernel, PrimitiveType> CompareKernelFor(ComparisonDirection direction,
                                                        PrimitiveType type) {
  using D = ComparisonDirection;
  switch (direction) {
    case D::kEq: return BinaryKernelFor<CompareOp<K, D::kEq>>(type);
    case D::kNe: return BinaryKernelFor<CompareOp<K, D::kNe>>(type);
    case D::kGe: return BinaryKernelFor<CompareOp<K, D::kGe>>(type);
    case D::kGt: return BinaryKernelFor<CompareOp<K, D::kGt>>(type);
    case D::kLe: return BinaryKernelFor<CompareOp<K, D::kLe>>(type);
    case D::kLt: return BinaryKernelFor<CompareOp<K, D::kLt>>(type);
  }
  return {nullptr, type};
}

}  // namespace

StatusOr<BinaryKernel> SelectBinaryKernel(const HloInstruction& instruction,
                                          PrimitiveType operand_type) {
  std::pair<BinaryKernel, PrimitiveType> kernel{nullptr, operand_type};
  switch (instruction.opcode()) {
    case HloOpcode::kAdd: kernel = BinaryKernelFor<AddOp>(operand_type); break;
    case HloOpcode::kSubtract: kernel = BinaryKernelFor<SubtractOp>(operand_type); break;
    case HloOpcode::kMultiply: kernel = BinaryKernelFor<MultiplyOp>(operand_type); break;
    case HloOpcode::kDivide: kernel = BinaryKernelFor<DivideOp>(operand_type); break;
    case HloOpcode::kRemainder: kernel = BinaryKernelFor<RemainderOp>(operand_type); break;
    case HloOpcode::kPower: kernel = BinaryKernelFor<PowerOp>(operand_type); break;
    case HloOpcode::kMaximum: kernel = BinaryKernelFor<MaximumOp>(operand_type); break;
    case HloOpcode::kMinimum: kernel = BinaryKernelFor<MinimumOp>(operand_type); break;
    case HloOpcode::kAnd: kernel = BinaryKernelFor<AndOp>(operand_type); break;
    case HloOpcode::kOr: kernel = BinaryKernelFor<OrOp>(operand_type); break;
    case HloOpcode::kXor: kernel = BinaryKernelFor<XorOp>(operand_type); break;
    case HloOpcode::kAtan2: kernel = BinaryKernelFor<Atan2Op>(operand_type); break;
    case HloOpcode::kShiftLeft: kernel = BinaryKernelFor<ShiftLeftOp>(operand_type); break;
    case HloOpcode::kShiftRightLogical:
      kernel = BinaryKernelFor<ShiftRightLogicalOp>(operand_type);
      break;
    case HloOpcode::kShiftRightArithmetic:
      kernel = BinaryKernelFor<ShiftRightArithmeticOp>(operand_type);
      break;
    case HloOpcode::kComplex: kernel = BinaryKernelFor<ComplexOp>(operand_type); break;
    case HloOpcode::kCompare: {
      if (!instruction.comparison_direction) return Error("compare without a direction");
      const ComparisonDirection direction = *instruction.comparison_direction;
      switch (instruction.EffectiveComparisonType()) {
        case ComparisonType::kFloat:
          kernel = CompareKernelFor<ComparisonType::kFloat>(direction, operand_type);
          break;
        case ComparisonType::kFloatTotalOrder:
          kernel = CompareKernelFor<ComparisonType::kFloatTotalOrder>(direction, operand_type);
          break;
        case ComparisonType::kSigned:
          kernel = CompareKernelFor<ComparisonType::kSigned>(direction, operand_type);
          break;
        case ComparisonType::kUnsigned:
          kernel = CompareKernelFor<ComparisonType::kUnsigned>(direction, operand_type);
          break;
      }
      break;
    }
    default:
      return Error(fmt::format("{} is not a binary elementwise opcode",
                               HloOpcodeString(instruction.opcode())));
  }
  if (kernel.first == nullptr) {
    return Error(fmt::format("{} does not support element type {}",
                             HloOpcodeString(instruction.opcode()), PrimitiveTypeName(operand_type)));
  }
  if (kernel.second != instruction.shape().element_type()) {
    return Error(fmt::format("{} of {} operands produces {}, but the instruction has type {}",
                             HloOpcodeString(instruction.opcode()), PrimitiveTypeName(operand_type),
                             PrimitiveTypeName(kernel.second),
                             PrimitiveTypeName(instruction.shape().element_type())));
  }
  return kernel.first;
}

StatusOr<Literal> HandleBinary(const HloInstruction& instruction, const Literal& lhs,
                               const Literal& rhs) {
  const Shape& shape = instruction.shape();
  RETURN_IF_ERROR(ExpectDimensions(lhs.shape(), shape.dimensions(), "lhs"));
  RETURN_IF_ERROR(ExpectDimensions(rhs.shape(), shape.dimensions(), "rhs"));
  if (lhs.shape().element_type() != rhs.shape().element_type()) {
    return Error(fmt::format("operand types differ: {} and {}",
                             PrimitiveTypeName(lhs.shape().element_type()),
                             PrimitiveTypeName(rhs.shape().element_type())));
  }
  ASSIGN_OR_RETURN(BinaryKernel kernel, SelectBinaryKernel(instruction, lhs.shape().element_type()));
  Literal result(shape);
  kernel(lhs.untyped_data(), rhs.untyped_data(), result.untyped_data(), result.element_count());
  return result;
}

// ---------------------------------------------------------------------------------------------
// Clamp

namespace {

// The linear index of element i of an operand that is either a full array or a scalar.
inline int64_t ScalarOr(bool is_scalar, int64_t i) { return is_scalar ? 0 : i; }

}  // namespace

StatusOr<Literal> HandleClamp(const HloInstruction& instruction,
                              std::span<const Literal* const> operands) {
  const Literal& min = *operands[0];
  const Literal& operand = *operands[1];
  const Literal& max = *operands[2];
  const Shape& shape = instruction.shape();
  RETURN_IF_ERROR(ExpectDimensions(operand.shape(), shape.dimensions(), "operand"));
  for (const Literal* bound : {&min, &max}) {
    if (bound->shape().element_type() != shape.element_type() ||
        operand.shape().element_type() != shape.element_type()) {
      return Error("clamp operands must have the result's element type");
    }
    if (bound->shape().rank() != 0) {
      RETURN_IF_ERROR(ExpectDimensions(bound->shape(), shape.dimensions(), "clamp bound"));
    }
  }
  Literal result(shape);
  const bool min_is_scalar = min.shape().rank() == 0;
  const bool max_is_scalar = max.shape().rank() == 0;
  bool supported = false;
  DispatchSupportedType(shape.element_type(), [&]<PrimitiveType P>() {
    using T = NativeType<P>;
    if constexpr (!kIsComplex<T>) {
      supported = true;
      const T* lo = min.data<T>().data();
      const T* hi = max.data<T>().data();
      const T* x = operand.data<T>().data();
      T* out = result.data<T>().data();
      const int64_t n = result.element_count();
      for (int64_t i = 0; i < n; ++i) {
        out[i] = MinimumOp::Apply(MaximumOp::Apply(x[i], lo[ScalarOr(min_is_scalar, i)]),
                                  hi[ScalarOr(max_is_scalar, i)]);
      }
    }
  });
  if (!supported) {
    return Error(fmt::format("clamp does not support element type {}",
                             PrimitiveTypeName(shape.element_type())));
  }
  return result;
}

}  // namespace xlens::evaluator_internal

// Unary elementwise instructions: one typed loop per (opcode, element type).
#include <bit>
#include <cmath>
#include <limits>

#include "compiler/hlo/complex_math.h"
#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {
namespace {

template <typename T>
inline constexpr bool kIsFloatOrComplex = kIsFloat<T> || kIsComplex<T>;

// A float-or-complex function: floats compute in ComputeType and round once.
#define XLENS_MATH_UNARY(Name, float_expr, complex_expr)        \
  struct Name {                                                 \
    template <typename T>                                       \
    static constexpr bool kSupports = kIsFloatOrComplex<T>;     \
    template <typename T>                                       \
    static T Apply(T a) {                                       \
      if constexpr (kIsComplex<T>) {                            \
        const T z = a;                                          \
        return complex_expr;                                    \
      } else {                                                  \
        const auto x = ToCompute(a);                            \
        using C = decltype(x);                                  \
        return FromCompute<T>(static_cast<C>(float_expr));      \
      }                                                         \
    }                                                           \
  };


XLENS_MATH_UNARY(ExpOp, std::exp(x), std::exp(z))
XLENS_MATH_UNARY(Expm1Op, std::expm1(x), ComplexExpm1(z))
XLENS_MATH_UNARY(LogOp, std::log(x), std::log(z))
XLENS_MATH_UNARY(Log1pOp, std::log1p(x), ComplexLog1p(z))
XLENS_MATH_UNARY(SqrtOp, std::sqrt(x), std::sqrt(z))
XLENS_MATH_UNARY(RsqrtOp, C{1} / std::sqrt(x), T(1) / std::sqrt(z))
XLENS_MATH_UNARY(TanhOp, std::tanh(x), std::tanh(z))
XLENS_MATH_UNARY(LogisticOp, C{1} / (C{1} + std::exp(-x)), T(1) / (T(1) + std::exp(-z)))
XLENS_MATH_UNARY(SinOp, std::sin(x), std::sin(z))
XLENS_MATH_UNARY(CosOp, std::cos(x), std::cos(z))
#undef XLENS_MATH_UNARY

// A function of real floats only.
#define XLENS_FLOAT_UNARY(Name, float_expr)                \
  struct Name {                                            \
    template <typename T>                                  \
    static constexpr bool kSupports = kIsFloat<T>;         \
    template <typename T>                                  \
    static T Apply(T a) {                                  \
      const auto x = ToCompute(a);                         \
      return FromCompute<T>(float_expr);                   \
    }                                                      \
  };

XLENS_FLOAT_UNARY(CbrtOp, std::cbrt(x))
XLENS_FLOAT_UNARY(ErfOp, std::erf(x))
XLENS_FLOAT_UNARY(FloorOp, std::floor(x))
XLENS_FLOAT_UNARY(CeilOp, std::ceil(x))
XLENS_FLOAT_UNARY(RoundNearestEvenOp, std::nearbyint(x))  // the default mode rounds to even
XLENS_FLOAT_UNARY(RoundNearestAfzOp, std::round(x))
#undef XLENS_FLOAT_UNARY

struct AbsOp {
  template <typename T>
  static constexpr bool kSupports = !kIsPred<T>;
  template <typename T>
  static auto Apply(T a) {
    if constexpr (kIsComplex<T>) {
      return std::abs(a);
    } else if constexpr (kIsInteger<T> && std::is_signed_v<T>) {
      // abs(INT_MIN) wraps to INT_MIN.
      using U = std::make_unsigned_t<T>;
      return a < 0 ? static_cast<T>(U{0} - static_cast<U>(a)) : a;
    } else if constexpr (kIsInteger<T>) {
      return a;
    } else {
      return FromCompute<T>(std::fabs(ToCompute(a)));
    }
  }
};

struct NegateOp {
  template <typename T>
  static constexpr bool kSupports = !kIsPred<T>;
  template <typename T>
  static T Apply(T a) {
    if constexpr (kIsInteger<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(U{0} - static_cast<U>(a));
    } else if constexpr (kIsComplex<T>) {
      return -a;
    } else {
      return FromCompute<T>(-ToCompute(a));
    }
  }
};

struct SignOp {
  template <typename T>
  static constexpr bool kSupports = !kIsPred<T>;
  template <typename T>
  static T Apply(T a) {
    if constexpr (kIsInteger<T> && std::is_signed_v<T>) {
      return static_cast<T>((a > 0) - (a < 0));
    } else if constexpr (kIsInteger<T>) {
      return static_cast<T>(a > 0 ? 1 : 0);
    } else if constexpr (kIsComplex<T>) {
      const auto magnitude = std::abs(a);
      return magnitude == 0 ? T(0) : a / magnitude;
    } else {
      // NaN stays NaN and a zero keeps its sign.
      const auto x = ToCompute(a);
      if (std::isnan(x) || x == 0) return a;
      return FromCompute<T>(std::copysign(decltype(x){1}, x));
    }
  }
};

struct NotOp {
  template <typename T>
  static constexpr bool kSupports = kIsPred<T> || kIsInteger<T>;
  template <typename T>
  static T Apply(T a) {
    if constexpr (kIsPred<T>) return !a;
    else return static_cast<T>(~a);
  }
};

struct IsFiniteOp {
  template <typename T>
  static constexpr bool kSupports = kIsFloat<T>;
  template <typename T>
  static bool Apply(T a) {
    return std::isfinite(ToCompute(a));
  }
};

struct PopulationCountOp {
  template <typename T>
  static constexpr bool kSupports = kIsInteger<T>;
  template <typename T>
  static T Apply(T a) {
    return static_cast<T>(std::popcount(static_cast<std::make_unsigned_t<T>>(a)));
  }
};

// real and imag of a real value are the value and zero.
struct RealOp {
  template <typename T>
  static constexpr bool kSupports = kIsFloatOrComplex<T>;
  template <typename T>
  static auto Apply(T a) {
    if constexpr (kIsComplex<T>) return a.real();
    else return a;
  }
};

struct ImagOp {
  template <typename T>
  static constexpr bool kSupports = kIsFloatOrComplex<T>;
  template <typename T>
  static auto Apply(T a) {
    if constexpr (kIsComplex<T>) return a.imag();
    else return FromCompute<T>(0.0f);
  }
};

template <typename Op, typename T>
void UnaryLoop(const void* in, void* out, int64_t n) {
  using R = decltype(Op::Apply(T{}));
  const T* a = static_cast<const T*>(in);
  R* o = static_cast<R*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = Op::Apply(a[i]);
}

template <typename R>
constexpr PrimitiveType ResultTypeOf(PrimitiveType operand_type) {
  if constexpr (std::is_same_v<R, bool>) return PrimitiveType::PRED;
  else if constexpr (std::is_same_v<R, float>) return PrimitiveType::F32;
  else if constexpr (std::is_same_v<R, double>) return PrimitiveType::F64;
  else return operand_type;
}

template <typename Op>
std::pair<UnaryKernel, PrimitiveType> UnaryKernelFor(PrimitiveType type) {
  std::pair<UnaryKernel, PrimitiveType> result{nullptr, type};
  DispatchSupportedType(type, [&]<PrimitiveType P>() {
    using T = NativeType<P>;
    if constexpr (Op::template kSupports<T>) {
      result.first = &UnaryLoop<Op, T>;
      result.second = ResultTypeOf<decltype(Op::Apply(T{}))>(type);
    }
  });
  return result;
}

}  // namespace

StatusOr<UnaryKernel> SelectUnaryKernel(const HloInstruction& instruction, PrimitiveType type) {
  std::pair<UnaryKernel, PrimitiveType> kernel{nullptr, type};
  switch (instruction.opcode()) {
    case HloOpcode::kAbs: kernel = UnaryKernelFor<AbsOp>(type); break;
    case HloOpcode::kNegate: kernel = UnaryKernelFor<NegateOp>(type); break;
    case HloOpcode::kExp: kernel = UnaryKernelFor<ExpOp>(type); break;
    case HloOpcode::kExpm1: kernel = UnaryKernelFor<Expm1Op>(type); break;
    case HloOpcode::kLog: kernel = UnaryKernelFor<LogOp>(type); break;
    case HloOpcode::kLog1p: kernel = UnaryKernelFor<Log1pOp>(type); break;
    case HloOpcode::kSqrt: kernel = UnaryKernelFor<SqrtOp>(type); break;
    case HloOpcode::kRsqrt: kernel = UnaryKernelFor<RsqrtOp>(type); break;
    case HloOpcode::kCbrt: kernel = UnaryKernelFor<CbrtOp>(type); break;
    case HloOpcode::kTanh: kernel = UnaryKernelFor<TanhOp>(type); break;
    case HloOpcode::kErf: kernel = UnaryKernelFor<ErfOp>(type); break;
    case HloOpcode::kLogistic: kernel = UnaryKernelFor<LogisticOp>(type); break;
    case HloOpcode::kSin: kernel = UnaryKernelFor<SinOp>(type); break;
    case HloOpcode::kCos: kernel = UnaryKernelFor<CosOp>(type); break;
    case HloOpcode::kFloor: kernel = UnaryKernelFor<FloorOp>(type); break;
    case HloOpcode::kCeil: kernel = UnaryKernelFor<CeilOp>(type); break;
    case HloOpcode::kRoundNearestEven: kernel = UnaryKernelFor<RoundNearestEvenOp>(type); break;
    case HloOpcode::kRoundNearestAfz: kernel = UnaryKernelFor<RoundNearestAfzOp>(type); break;
    case HloOpcode::kSign: kernel = UnaryKernelFor<SignOp>(type); break;
    case HloOpcode::kNot: kernel = UnaryKernelFor<NotOp>(type); break;
    case HloOpcode::kIsFinite: kernel = UnaryKernelFor<IsFiniteOp>(type); break;
    case HloOpcode::kPopulationCount: kernel = UnaryKernelFor<PopulationCountOp>(type); break;
    case HloOpcode::kReal: kernel = UnaryKernelFor<RealOp>(type); break;
    case HloOpcode::kImag: kernel = UnaryKernelFor<ImagOp>(type); break;
    default:
      return Error(fmt::format("{} is not a unary elementwise opcode",
                               HloOpcodeString(instruction.opcode())));
  }
  if (kernel.first == nullptr) {
    return Error(fmt::format("{} does not support element type {}",
                             HloOpcodeString(instruction.opcode()), PrimitiveTypeName(type)));
  }
  if (kernel.second != instruction.shape().element_type()) {
    return Error(fmt::format("{} of {} produces {}, but the instruction has type {}",
                             HloOpcodeString(instruction.opcode()), PrimitiveTypeName(type),
                             PrimitiveTypeName(kernel.second),
                             PrimitiveTypeName(instruction.shape().element_type())));
  }
  return kernel.first;
}

StatusOr<Literal> HandleUnary(const HloInstruction& instruction, const Literal& operand) {
  const Shape& shape = instruction.shape();
  RETURN_IF_ERROR(ExpectDimensions(operand.shape(), shape.dimensions(), "operand"));
  ASSIGN_OR_RETURN(UnaryKernel kernel, SelectUnaryKernel(instruction, operand.shape().element_type()));
  Literal result(shape);
  kernel(operand.untyped_data(), result.untyped_data(), result.element_count());
  return result;
}

}  // namespace xlens::evaluator_internal

// Elementwise instructions other than the unary and binary math: convert, bitcast-convert,
// select, reduce-precision, iota and map.
#include <bit>
#include <cmath>
#include <limits>

#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {

// ---------------------------------------------------------------------------------------------
// Convert

namespace {

template <typename From, typename To>
To ConvertElement(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else if constexpr (kIsComplex<From>) {
    if constexpr (kIsComplex<To>) {
      using C = typename To::value_type;
      return To(static_cast<C>(v.real()), static_cast<C>(v.imag()));
    } else {
      // Complex to real keeps the real part.
      return ConvertElement<typename From::value_type, To>(v.real());
    }
  } else if constexpr (kIsPred<To>) {
    return ToCompute(v) != 0;  // NaN is true
  } else if constexpr (kIsPred<From>) {
    return ConvertElement<int32_t, To>(v ? 1 : 0);
  } else if constexpr (kIsComplex<To>) {
    using C = typename To::value_type;
    return To(static_cast<C>(ToCompute(v)), C{0});
  } else if constexpr (kIsInteger<To> && kIsFloat<From>) {
    // Saturating, NaN to 0, rounding toward zero: XLA's CPU semantics.
    const auto x = ToCompute(v);
    if (std::isnan(x)) return 0;
    constexpr int kValueBits = std::numeric_limits<To>::digits;  // without the sign bit
    const double lowest = static_cast<double>(std::numeric_limits<To>::lowest());
    const double upper = std::ldexp(1.0, kValueBits);  // one past the largest value
    if (x <= lowest) return std::numeric_limits<To>::lowest();
    if (x >= upper) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else if constexpr (kIsInteger<To>) {
    return static_cast<To>(v);  // integer to integer: two's complement truncation/extension
  } else if constexpr (kIsInteger<From>) {
    // Integers reach f16 and bf16 through f32, as XLA converts them.
    return FromCompute<To>(static_cast<ComputeType<To>>(v));
  } else if constexpr (std::is_same_v<To, bfloat16>) {
    return bfloat16(static_cast<float>(ToCompute(v)));
  } else if constexpr (kIsWrappedFloat<To>) {
    return To(ToCompute(v));  // an f64 rounds once, straight to the 8-bit float, as XLA's does
  } else {
    return static_cast<To>(ToCompute(v));
  }
}

template <typename From, typename To>
void ConvertLoop(const void* in, void* out, int64_t n) {
  const From* a = static_cast<const From*>(in);
  To* o = static_cast<To*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = ConvertElement<From, To>(a[i]);
}

}  // namespace

StatusOr<UnaryKernel> SelectConvertKernel(PrimitiveType from, PrimitiveType to) {
  UnaryKernel kernel = nullptr;
  DispatchSupportedType(from, [&]<PrimitiveType From>() {
    DispatchSupportedType(to, [&]<PrimitiveType To>() {
      kernel = &ConvertLoop<NativeType<From>, NativeType<To>>;
    });
  });
  if (kernel == nullptr) {
    return Error(fmt::format("unsupported conversion from {} to {}", PrimitiveTypeName(from),
                             PrimitiveTypeName(to)));
  }
  return kernel;
}

StatusOr<Literal> ConvertLiteral(const Literal& literal, PrimitiveType type) {
  if (!literal.shape().IsArray()) return Error("cannot convert " + literal.shape().ToString(false));
  ASSIGN_OR_RETURN(UnaryKernel kernel, SelectConvertKernel(literal.shape().element_type(), type));
  Literal result(shape_util::ChangeElementType(literal.shape(), type));
  kernel(literal.untyped_data(), result.untyped_data(), literal.element_count());
  return result;
}

StatusOr<Literal> HandleConvert(const HloInstruction& instruction, const Literal& operand) {
  RETURN_IF_ERROR(ExpectDimensions(operand.shape(), instruction.shape().dimensions(), "operand"));
  ASSIGN_OR_RETURN(Literal result, ConvertLiteral(operand, instruction.shape().element_type()));
  if (instruction.shape().has_layout()) result.set_layout(instruction.shape().layout());
  return result;
}

StatusOr<Literal> HandleBitcastConvert(const HloInstruction& instruction, const Literal& operand) {
  const Shape& shape = instruction.shape();
  const int from_bits = BitWidth(operand.shape().element_type());
  const int to_bits = BitWidth(shape.element_type());
  std::vector<int64_t> expected = operand.shape().dimensions();
  // Between widths, the wider type's element spans a new minor dimension of the narrower type.
  if (from_bits > to_bits) {
    expected.push_back(from_bits / to_bits);
  } else if (from_bits < to_bits) {
    if (expected.empty() || expected.back() != to_bits / from_bits) {
      return Error(fmt::format("cannot bitcast-convert {} to {}", operand.shape().ToString(false),
                               shape.ToString(false)));
    }
    expected.pop_back();
  }
  RETURN_IF_ERROR(ExpectDimensions(shape, expected, "bitcast-convert result"));
  Literal result(shape);
  if (result.size_bytes() != operand.size_bytes()) {
    return Error(fmt::format("cannot bitcast-convert {} to {}", operand.shape().ToString(false),
                             shape.ToString(false)));
  }
  // Narrow elements of one wide element are in little-endian order (lowest bits first).
  std::memcpy(result.untyped_data(), operand.untyped_data(), result.size_bytes());
  return result;
}

// ---------------------------------------------------------------------------------------------
// Select

namespace {

template <int kSize>
void SelectLoop(const bool* pred, const uint8_t* on_true, const uint8_t* on_false, uint8_t* out,
                int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* chosen = pred[i] ? on_true : on_false;
    std::memcpy(out + i * kSize, chosen + i * kSize, kSize);
  }
}

}  // namespace

StatusOr<Literal> HandleSelect(const HloInstruction& instruction,
                               std::span<const Literal* const> operands) {
  const Literal& pred = *operands[0];
  const Literal& on_true = *operands[1];
  const Literal& on_false = *operands[2];
  const Shape& shape = instruction.shape();
  if (!pred.shape().IsArray() || pred.shape().element_type() != PrimitiveType::PRED) {
    return Error("select predicate must be a pred array, got " + pred.shape().ToString(false));
  }
  if (!shape_util::Compatible(on_true.shape(), shape) ||
      !shape_util::Compatible(on_false.shape(), shape)) {
    return Error(fmt::format("select of {} and {} into {}", on_true.shape().ToString(false),
                             on_false.shape().ToString(false), shape.ToString(false)));
  }
  const bool pred_is_scalar = pred.shape().rank() == 0;
  if (pred_is_scalar) {
    Literal result(pred.data<bool>()[0] ? on_true : on_false);
    if (shape.IsArray() && shape.has_layout()) result.set_layout(shape.layout());
    return result;
  }
  if (!shape.IsArray()) return Error("select of tuples needs a scalar predicate");
  RETURN_IF_ERROR(ExpectDimensions(pred.shape(), shape.dimensions(), "predicate"));
  Literal result(shape);
  const bool* p = pred.data<bool>().data();
  const int64_t n = result.element_count();
  const uint8_t* t = on_true.untyped_data();
  const uint8_t* f = on_false.untyped_data();
  uint8_t* out = result.untyped_data();
  switch (ByteWidth(shape.element_type())) {
    case 1: SelectLoop<1>(p, t, f, out, n); break;
    case 2: SelectLoop<2>(p, t, f, out, n); break;
    case 4: SelectLoop<4>(p, t, f, out, n); break;
    case 8: SelectLoop<8>(p, t, f, out, n); break;
    case 16: SelectLoop<16>(p, t, f, out, n); break;
    default: return Error("unsupported element width");
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Reduce-precision

namespace {

// Rounds to `mantissa_bits` (nearest, ties to even) and then clamps the exponent range to
// `exponent_bits` (overflow to infinity, underflow to zero), on the bit pattern, as XLA does.
template <typename T, typename Bits>
T ReducePrecisionElement(T input, int src_exponent_bits, int src_mantissa_bits,
                         int64_t exponent_bits, int64_t mantissa_bits) {
  constexpr int kBitWidth = sizeof(Bits) * 8;
  Bits value = std::bit_cast<Bits>(input);
  if (mantissa_bits < src_mantissa_bits) {
    const int shift = src_mantissa_bits - static_cast<int>(mantissa_bits);
    const Bits last_mantissa_bit_mask = Bits{1} << shift;
    const Bits base_rounding_bias = (last_mantissa_bit_mask >> 1) - 1;
    const Bits x_last_mantissa_bit = (value & last_mantissa_bit_mask) >> shift;
    const Bits x_rounding_bias = x_last_mantissa_bit + base_rounding_bias;
    const Bits truncation_mask = ~(last_mantissa_bit_mask - 1);
    value = static_cast<Bits>(value + x_rounding_bias);
    value = value & truncation_mask;
  }
  if (exponent_bits < src_exponent_bits) {
    const Bits sign_bit_mask = Bits{1} << (kBitWidth - 1);
    const Bits exp_bits_mask = ((Bits{1} << src_exponent_bits) - 1) << src_mantissa_bits;
    const Bits exponent_bias = (Bits{1} << (src_exponent_bits - 1)) - 1;
    const Bits reduced_exponent_bias = (Bits{1} << (exponent_bits - 1)) - 1;
    const Bits reduced_max_exponent = exponent_bias + reduced_exponent_bias;
    const Bits reduced_min_exponent = exponent_bias - reduced_exponent_bias;
    const Bits x_exponent = value & exp_bits_mask;
    const bool x_overflows = x_exponent > (reduced_max_exponent << src_mantissa_bits);
    const bool x_underflows = x_exponent <= (reduced_min_exponent << src_mantissa_bits);
    const Bits x_signed_zero = value & sign_bit_mask;
    const Bits x_signed_inf = x_signed_zero | exp_bits_mask;
    if (x_overflows) value = x_signed_inf;
    if (x_underflows) value = x_signed_zero;
  }
  if (std::isnan(ToCompute(input))) {
    return mantissa_bits > 0 ? input : FromCompute<T>(std::numeric_limits<float>::infinity());
  }
  return std::bit_cast<T>(value);
}

template <typename T, typename Bits>
void ReducePrecisionLoop(const Literal& operand, Literal& result, int src_exponent_bits,
                         int src_mantissa_bits, int64_t exponent_bits, int64_t mantissa_bits) {
  const T* in = operand.data<T>().data();
  T* out = result.data<T>().data();
  const int64_t n = result.element_count();
  for (int64_t i = 0; i < n; ++i) {
    out[i] = ReducePrecisionElement<T, Bits>(in[i], src_exponent_bits, src_mantissa_bits,
                                             exponent_bits, mantissa_bits);
  }
}

}  // namespace

StatusOr<Literal> HandleReducePrecision(const HloInstruction& instruction,
                                        const Literal& operand) {
  const Shape& shape = instruction.shape();
  if (!shape_util::Compatible(operand.shape(), shape)) {
    return Error("operand shape " + operand.shape().ToString(false) + " differs from result");
  }
  if (!instruction.exponent_bits_attr || !instruction.mantissa_bits_attr) {
    return Error("reduce-precision needs exponent_bits and mantissa_bits");
  }
  const int64_t exponent_bits = *instruction.exponent_bits_attr;
  const int64_t mantissa_bits = *instruction.mantissa_bits_attr;
  if (exponent_bits < 1 || mantissa_bits < 0) {
    return Error(fmt::format("invalid reduce-precision to {} exponent and {} mantissa bits",
                             exponent_bits, mantissa_bits));
  }
  Literal result(shape);
  switch (shape.element_type()) {
    case PrimitiveType::F16:
      ReducePrecisionLoop<half, uint16_t>(operand, result, 5, 10, exponent_bits, mantissa_bits);
      break;
    case PrimitiveType::BF16:
      ReducePrecisionLoop<bfloat16, uint16_t>(operand, result, 8, 7, exponent_bits, mantissa_bits);
      break;
    case PrimitiveType::F32:
      ReducePrecisionLoop<float, uint32_t>(operand, result, 8, 23, exponent_bits, mantissa_bits);
      break;
    case PrimitiveType::F64:
      ReducePrecisionLoop<double, uint64_t>(operand, result, 11, 52, exponent_bits, mantissa_bits);
      break;
    default:
      return Error(fmt::format("reduce-precision does not support element type {}",
                               PrimitiveTypeName(shape.element_type())));
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Iota, map

StatusOr<Literal> HandleIota(const HloInstruction& instruction) {
  const Shape& shape = instruction.shape();
  const int64_t dimension = instruction.iota_dimension_attr.value_or(0);
  if (!shape.IsArray() || dimension < 0 || dimension >= std::max<int64_t>(shape.rank(), 1) ||
      (shape.rank() == 0 && dimension != 0)) {
    return Error(fmt::format("iota_dimension={} out of range for {}", dimension,
                             shape.ToString(false)));
  }
  Literal result(shape);
  if (shape.rank() == 0) return result;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dimension; ++d) outer *= shape.dimensions(d);
  for (int64_t d = dimension + 1; d < shape.rank(); ++d) inner *= shape.dimensions(d);
  const int64_t size = shape.dimensions(dimension);
  DispatchSupportedType(shape.element_type(), [&]<PrimitiveType P>() {
    using T = NativeType<P>;
    T* out = result.data<T>().data();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < size; ++k) {
        const T value = ConvertElement<int64_t, T>(k);
        T* row = out + (o * size + k) * inner;
        for (int64_t i = 0; i < inner; ++i) row[i] = value;
      }
    }
  });
  return result;
}

StatusOr<Literal> HandleMap(HloEvaluator& evaluator, const HloInstruction& instruction,
                            std::span<const Literal* const> operands) {
  const Shape& shape = instruction.shape();
  std::vector<PrimitiveType> argument_types;
  for (const Literal* operand : operands) {
    RETURN_IF_ERROR(ExpectDimensions(operand->shape(), shape.dimensions(), "map operand"));
    argument_types.push_back(operand->shape().element_type());
  }
  ASSIGN_OR_RETURN(ScalarCaller caller,
                   ScalarCaller::Create(evaluator, instruction.to_apply(), argument_types,
                                        {shape.element_type()}));
  Literal result(shape);
  const int64_t n = result.element_count();
  const int64_t out_width = ByteWidth(shape.element_type());
  std::vector<const void*> arguments(operands.size());
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < operands.size(); ++k) {
      arguments[k] = operands[k]->untyped_data() + i * ByteWidth(argument_types[k]);
    }
    void* out[] = {result.untyped_data() + i * out_width};
    RETURN_IF_ERROR(caller.Call(arguments, out));
  }
  return result;
}

}  // namespace xlens::evaluator_internal

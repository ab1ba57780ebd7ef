// fft: XLA's four discrete Fourier transforms over the last 1 to 3 dimensions, as a plain DFT.
//
// The reference computes each transformed dimension in turn by the definition,
//   X[k] = sum_j x[j] exp(sign 2 pi i j k / L),
// accumulated in long double with twiddles taken from exact integer phases (j k mod L), so it is
// correct for every length (prime ones included) and more accurate than any f32 or f64 FFT. It
// costs elements * sum(fft_length) complex multiply-adds (evaluator_work.cc counts that). The
// inverse transforms scale each dimension by 1/L, so IFFT and IRFFT divide by the product of
// fft_length, as XLA's CPU backend (and numpy.fft) does.
#include <cmath>

#include "compiler/hlo/evaluator_internal.h"
#include "compiler/hlo/numeric_op_attributes.h"

namespace xlens::evaluator_internal {
namespace {

using Complex = std::complex<long double>;

// A dense row-major complex array being transformed.
struct Buffer {
  std::vector<int64_t> dims;
  std::vector<Complex> values;
};

// exp(sign 2 pi i m / length) for m in [0, length).
std::vector<Complex> Twiddles(int64_t length, int sign) {
  constexpr long double kTwoPi = 6.283185307179586476925286766559005768L;
  std::vector<Complex> twiddles(length);
  for (int64_t m = 0; m < length; ++m) {
    const long double angle = kTwoPi * static_cast<long double>(m) / static_cast<long double>(length);
    twiddles[m] = Complex(std::cos(angle), sign * std::sin(angle));
  }
  return twiddles;
}

// Transforms `buffer` along `axis`: out[k] = scale * sum_{j < length} in[j] w^(j k) for
// k < out_length, where `length` is the transform's length (the axis holds `in_length` of its
// first points) and the axis holds `out_length` points afterwards.
void TransformAxis(Buffer& buffer, int64_t axis, int64_t length, int64_t out_length, int sign,
                   long double scale) {
  const int64_t in_length = buffer.dims[axis];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= buffer.dims[d];
  for (int64_t d = axis + 1; d < static_cast<int64_t>(buffer.dims.size()); ++d) {
    inner *= buffer.dims[d];
  }
  const std::vector<Complex> twiddles = Twiddles(length, sign);
  std::vector<Complex> out(outer * out_length * inner);
  std::vector<Complex> line(in_length);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < in_length; ++j) {
        line[j] = buffer.values[(o * in_length + j) * inner + i];
      }
      for (int64_t k = 0; k < out_length; ++k) {
        Complex sum = 0;
        int64_t phase = 0;  // j k mod length
        for (int64_t j = 0; j < in_length; ++j) {
          sum += line[j] * twiddles[phase];
          phase += k;
          if (phase >= length) phase %= length;
        }
        out[(o * out_length + k) * inner + i] = sum * scale;
      }
    }
  }
  buffer.dims[axis] = out_length;
  buffer.values = std::move(out);
}

// IRFFT's last dimension: the half spectrum Z[0 .. length/2] stands for the Hermitian spectrum
// Y[k] = Z[k] (k <= length/2), conj(Z[length - k]) (k > length/2), whose inverse DFT is real:
// out[m] = Re(sum_k Y[k] w^(k m)) / length. Taking the real part ignores the imaginary parts of
// Z[0] and (for even lengths) Z[length/2], as every c2r transform does.
void RealInverseLastAxis(Buffer& buffer, int64_t length) {
  const int64_t axis = static_cast<int64_t>(buffer.dims.size()) - 1;
  const int64_t half = buffer.dims[axis];
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= buffer.dims[d];
  const std::vector<Complex> twiddles = Twiddles(length, +1);
  std::vector<Complex> out(outer * length);
  std::vector<Complex> full(length);
  for (int64_t o = 0; o < outer; ++o) {
    const Complex* z = &buffer.values[o * half];
    for (int64_t k = 0; k < length; ++k) {
      full[k] = k <= length / 2 ? z[k] : std::conj(z[length - k]);
    }
    for (int64_t m = 0; m < length; ++m) {
      long double sum = 0;
      int64_t phase = 0;
      for (int64_t k = 0; k < length; ++k) {
        sum += (full[k] * twiddles[phase]).real();
        phase += m;
        if (phase >= length) phase %= length;
      }
      out[o * length + m] = sum / static_cast<long double>(length);
    }
  }
  buffer.dims[axis] = length;
  buffer.values = std::move(out);
}

}  // namespace

StatusOr<Literal> HandleFft(const HloInstruction& instruction, const Literal& operand) {
  ASSIGN_OR_RETURN(FftAttributes attributes, GetFftAttributes(instruction));
  const Shape& in_shape = operand.shape();
  const int64_t rank = in_shape.rank();
  const int64_t fft_rank = static_cast<int64_t>(attributes.lengths.size());
  if (!in_shape.IsArray() || rank < fft_rank) {
    return Error(fmt::format("fft over {} dimensions of {}", fft_rank, in_shape.ToString(false)));
  }
  const int64_t first = rank - fft_rank;
  const PrimitiveType in_type = in_shape.element_type();
  const bool real_input = attributes.type == FftType::kRfft;
  if (real_input ? (in_type != PrimitiveType::F32 && in_type != PrimitiveType::F64)
                 : !IsComplexType(in_type)) {
    return Error(fmt::format("{} of {}", FftTypeName(attributes.type), in_shape.ToString(false)));
  }
  // The result's dimensions, derived from the operand's (never from the declared shape).
  std::vector<int64_t> out_dims(in_shape.dimensions().begin(), in_shape.dimensions().end());
  const int64_t last = attributes.lengths.back();
  for (int64_t i = 0; i < fft_rank; ++i) {
    const bool half_spectrum_operand = attributes.type == FftType::kIrfft && i == fft_rank - 1;
    const int64_t expected = half_spectrum_operand && last != 0 ? last / 2 + 1
                                                                : attributes.lengths[i];
    if (in_shape.dimensions(first + i) != expected) {
      return Error(fmt::format("{} with fft_length={{{}}} of {}", FftTypeName(attributes.type),
                               fmt::join(attributes.lengths, ","), in_shape.ToString(false)));
    }
  }
  if (attributes.type == FftType::kRfft && last != 0) out_dims.back() = last / 2 + 1;
  if (attributes.type == FftType::kIrfft) out_dims.back() = last;
  PrimitiveType out_type = in_type;
  if (attributes.type == FftType::kRfft) {
    out_type = in_type == PrimitiveType::F32 ? PrimitiveType::C64 : PrimitiveType::C128;
  } else if (attributes.type == FftType::kIrfft) {
    out_type = ComplexComponentType(in_type);
  }
  const Shape& shape = instruction.shape();
  RETURN_IF_ERROR(ExpectDimensions(shape, out_dims, "the fft result"));
  if (shape.element_type() != out_type) {
    return Error(fmt::format("{} of {} gives {}, not {}", FftTypeName(attributes.type),
                             in_shape.ToString(false), PrimitiveTypeName(out_type),
                             shape.ToString(false)));
  }
  Literal result(shape);
  if (operand.element_count() == 0 || result.element_count() == 0) return result;

  Buffer buffer;
  buffer.dims.assign(in_shape.dimensions().begin(), in_shape.dimensions().end());
  buffer.values.resize(operand.element_count());
  for (int64_t i = 0; i < operand.element_count(); ++i) {
    const complex128 v = real_input ? complex128(operand.GetAsDouble(i), 0)
                                    : operand.GetAsComplex(i);
    buffer.values[i] = Complex(v.real(), v.imag());
  }
  switch (attributes.type) {
    case FftType::kFft:
    case FftType::kIfft: {
      const int sign = attributes.type == FftType::kFft ? -1 : +1;
      for (int64_t i = 0; i < fft_rank; ++i) {
        const int64_t length = attributes.lengths[i];
        const long double scale = sign < 0 ? 1.0L : 1.0L / static_cast<long double>(length);
        TransformAxis(buffer, first + i, length, length, sign, scale);
      }
      break;
    }
    case FftType::kRfft:
      // The last dimension first, keeping the non-negative frequencies, then the others.
      TransformAxis(buffer, rank - 1, last, last / 2 + 1, -1, 1.0L);
      for (int64_t i = 0; i + 1 < fft_rank; ++i) {
        TransformAxis(buffer, first + i, attributes.lengths[i], attributes.lengths[i], -1, 1.0L);
      }
      break;
    case FftType::kIrfft:
      for (int64_t i = 0; i + 1 < fft_rank; ++i) {
        const int64_t length = attributes.lengths[i];
        TransformAxis(buffer, first + i, length, length, +1,
                      1.0L / static_cast<long double>(length));
      }
      RealInverseLastAxis(buffer, last);
      break;
  }
  for (int64_t i = 0; i < result.element_count(); ++i) {
    const Complex& v = buffer.values[i];
    if (attributes.type == FftType::kIrfft) {
      result.SetFromDouble(i, static_cast<double>(v.real()));
    } else {
      result.SetFromComplex(i, complex128(static_cast<double>(v.real()),
                                          static_cast<double>(v.imag())));
    }
  }
  return result;
}

}  // namespace xlens::evaluator_internal

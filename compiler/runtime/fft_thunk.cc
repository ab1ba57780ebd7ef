#include "compiler/runtime/fft_thunk.h"

#include <complex>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <unsupported/Eigen/FFT>

#include "compiler/hlo/numeric_op_attributes.h"
#include "compiler/runtime/layout_walk.h"

namespace xlens::runtime {

struct FftThunk::Impl {
  virtual ~Impl() = default;
  virtual void Run(const char* input, char* output) = 0;
};

namespace {

// One fft over working buffers sized when the thunk is built: the operand is gathered into a
// row-major array, transformed one dimension at a time in place, and scattered into the result
// in its layout.
template <typename T>
class FftRunner : public FftThunk::Impl {
 public:
  using Complex = std::complex<T>;

  FftRunner(FftType type, const std::vector<int64_t>& lengths, const Shape& input,
            const Shape& output)
      : type_(type), input_(input), output_(output),
        first_axis_(input.rank() - static_cast<int64_t>(lengths.size())) {
    // The complex array the transforms work on: the result's dimensions for FFT, IFFT and
    // RFFT, the operand's (n/2+1 along the last) for IRFFT.
    work_dimensions_ = type == FftType::kIrfft ? input.dimensions() : output.dimensions();
    int64_t work = 1, longest = 1;
    for (int64_t d : work_dimensions_) work *= d;
    for (int64_t d : lengths) longest = std::max(longest, d);
    work_.resize(work);
    line_in_.resize(longest);
    line_out_.resize(longest);
    last_length_ = lengths.back();
    if (type == FftType::kRfft) real_.resize(input.num_elements());
    if (type == FftType::kIrfft) real_.resize(output.num_elements());
    fft_.SetFlag(Eigen::FFT<T>::HalfSpectrum);
  }

  void Run(const char* input, char* output) override {
    if (HasNoElements()) {
      std::memset(output, 0, OutputBytes());
      return;
    }
    const int64_t rank = static_cast<int64_t>(work_dimensions_.size());
    const int64_t n = last_length_, half = n / 2 + 1;
    switch (type_) {
      case FftType::kFft:
      case FftType::kIfft: {
        const bool inverse = type_ == FftType::kIfft;
        Gather(reinterpret_cast<const Complex*>(input), work_.data());
        for (int64_t axis = first_axis_; axis < rank; ++axis) TransformAxis(axis, inverse);
        Scatter(work_.data(), reinterpret_cast<Complex*>(output));
        return;
      }
      case FftType::kRfft: {
        Gather(reinterpret_cast<const T*>(input), real_.data());
        const int64_t rows = static_cast<int64_t>(real_.size()) / n;
        for (int64_t r = 0; r < rows; ++r) RealForward(&work_[r * half], &real_[r * n], n);
        for (int64_t axis = first_axis_; axis < rank - 1; ++axis) TransformAxis(axis, false);
        Scatter(work_.data(), reinterpret_cast<Complex*>(output));
        return;
      }
      case FftType::kIrfft: {
        Gather(reinterpret_cast<const Complex*>(input), work_.data());
        for (int64_t axis = first_axis_; axis < rank - 1; ++axis) TransformAxis(axis, true);
        const int64_t rows = static_cast<int64_t>(real_.size()) / n;
        for (int64_t r = 0; r < rows; ++r) RealInverse(&real_[r * n], &work_[r * half], n);
        Scatter(real_.data(), reinterpret_cast<T*>(output));
        return;
      }
    }
  }

 private:
  bool HasNoElements() const {
    for (int64_t d : input_.dimensions) {
      if (d == 0) return true;
    }
    return last_length_ == 0;
  }

  int64_t OutputBytes() const {
    int64_t n = 1;
    for (int64_t d : output_.dimensions) n *= d;
    return n * static_cast<int64_t>(type_ == FftType::kIrfft ? sizeof(T) : sizeof(Complex));
  }

  template <typename E>
  void Gather(const E* from, E* to) {
    int64_t i = 0;
    ForEachOffset(input_, [&](int64_t offset) { to[i++] = from[offset]; });
  }

  template <typename E>
  void Scatter(const E* from, E* to) {
    int64_t i = 0;
    ForEachOffset(output_, [&](int64_t offset) { to[offset] = from[i++]; });
  }

  // Every line of the row-major work array along `axis`, transformed in place (a length-1
  // transform is the identity, which kissfft does not plan).
  void TransformAxis(int64_t axis, bool inverse) {
    const int64_t n = work_dimensions_[axis];
    if (n <= 1) return;
    int64_t stride = 1, outer = 1;
    for (int64_t d = axis + 1; d < static_cast<int64_t>(work_dimensions_.size()); ++d) {
      stride *= work_dimensions_[d];
    }
    for (int64_t d = 0; d < axis; ++d) outer *= work_dimensions_[d];
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < stride; ++i) {
        Complex* line = &work_[o * n * stride + i];
        for (int64_t j = 0; j < n; ++j) line_in_[j] = line[j * stride];
        if (inverse) {
          fft_.inv(line_out_.data(), line_in_.data(), n);  // scaled by 1/n
        } else {
          fft_.fwd(line_out_.data(), line_in_.data(), n);
        }
        for (int64_t j = 0; j < n; ++j) line[j * stride] = line_out_[j];
      }
    }
  }

  // n reals to their n/2+1 non-negative frequencies.
  void RealForward(Complex* dst, const T* src, int64_t n) {
    if (n == 1) {
      dst[0] = Complex(src[0], 0);
      return;
    }
    fft_.fwd(dst, src, n);
  }

  // n/2+1 frequencies of a Hermitian spectrum to n reals, scaled by 1/n.
  void RealInverse(T* dst, const Complex* src, int64_t n) {
    if (n == 1) {
      dst[0] = src[0].real();
      return;
    }
    fft_.inv(dst, src, n);
  }

  FftType type_;
  StridedArray input_, output_;
  int64_t first_axis_;
  int64_t last_length_ = 0;
  std::vector<int64_t> work_dimensions_;
  std::vector<Complex> work_, line_in_, line_out_;
  std::vector<T> real_;
  Eigen::FFT<T> fft_;
};

std::string TypeName(PrimitiveType type) { return std::string(PrimitiveTypeName(type)); }

}  // namespace

FftThunk::FftThunk(std::string hlo_name) : Thunk(std::move(hlo_name)) {}
FftThunk::~FftThunk() = default;

StatusOr<std::unique_ptr<FftThunk>> FftThunk::Create(std::string hlo_name,
                                                     const HloInstruction& fft,
                                                     int64_t input_slot, int64_t output_slot) {
  ASSIGN_OR_RETURN(FftAttributes attributes, GetFftAttributes(fft));
  const Shape& input = fft.operand(0)->shape();
  const Shape& output = fft.shape();
  const std::vector<int64_t>& lengths = attributes.lengths;
  const int64_t fft_rank = static_cast<int64_t>(lengths.size());
  if (!input.IsArray() || !output.IsArray() || input.rank() < fft_rank ||
      output.rank() != input.rank()) {
    return Error(fmt::format("{}: fft over {} dimensions of {} cannot make {}", fft.name(),
                             fft_rank, input.ToString(), output.ToString()));
  }
  // The element types XLA allows: complex in and out, real into complex, complex into real,
  // of one precision.
  const PrimitiveType in = input.element_type(), out = output.element_type();
  const bool single = in == PrimitiveType::C64 || in == PrimitiveType::F32;
  PrimitiveType want_in = single ? PrimitiveType::C64 : PrimitiveType::C128;
  PrimitiveType want_out = want_in;
  if (attributes.type == FftType::kRfft) want_in = single ? PrimitiveType::F32 : PrimitiveType::F64;
  if (attributes.type == FftType::kIrfft) want_out = single ? PrimitiveType::F32 : PrimitiveType::F64;
  if (in != want_in || out != want_out) {
    return Error(fmt::format("{}: {} takes c64 or c128{} and gives {}, not {} -> {}", fft.name(),
                             FftTypeName(attributes.type),
                             attributes.type == FftType::kRfft ? " (f32 or f64)" : "",
                             TypeName(want_out), TypeName(in), TypeName(out)));
  }
  // The transformed dimensions hold fft_length, except the last one of the complex side of a
  // real transform, which holds n/2+1.
  const int64_t first = input.rank() - fft_rank;
  for (int64_t i = 0; i < fft_rank; ++i) {
    const int64_t d = first + i;
    const bool last = i == fft_rank - 1;
    const int64_t half = lengths[i] / 2 + 1;
    const int64_t want_input =
        attributes.type == FftType::kIrfft && last ? half : lengths[i];
    const int64_t want_output =
        attributes.type == FftType::kRfft && last ? half : lengths[i];
    if (input.dimensions(d) != want_input || output.dimensions(d) != want_output) {
      return Error(fmt::format(
          "{}: fft_length={{{}}} does not match the operand {} and result {} of an {}", fft.name(),
          fmt::join(lengths, ","), input.ToString(false), output.ToString(false),
          FftTypeName(attributes.type)));
    }
  }
  for (int64_t d = 0; d < first; ++d) {
    if (input.dimensions(d) != output.dimensions(d)) {
      return Error(fmt::format("{}: batch dimensions of {} and {} differ", fft.name(),
                               input.ToString(false), output.ToString(false)));
    }
  }
  std::unique_ptr<FftThunk> thunk(new FftThunk(std::move(hlo_name)));
  if (single) {
    thunk->impl_ = std::make_unique<FftRunner<float>>(attributes.type, lengths, input, output);
  } else {
    thunk->impl_ = std::make_unique<FftRunner<double>>(attributes.type, lengths, input, output);
  }
  thunk->description_ = fmt::format("{} {{{}}} {}", FftTypeName(attributes.type),
                                    fmt::join(lengths, ","), TypeName(in));
  thunk->input_slot_ = input_slot;
  thunk->output_slot_ = output_slot;
  return thunk;
}

Status FftThunk::Execute(char** frame, ExecuteContext&) const {
  impl_->Run(frame[input_slot_], frame[output_slot_]);
  return OkStatus();
}

std::string FftThunk::ToString(int indent) const {
  return fmt::format("{:{}}fft {} ({}, Eigen FFT)\n", "", indent, hlo_name(), description_);
}

}  // namespace xlens::runtime

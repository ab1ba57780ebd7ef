#include "compiler/hlo/numeric_op_attributes.h"

#include <charconv>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace xlens {
namespace {

StatusOr<const std::string*> Required(const HloInstruction& instruction, std::string_view key) {
  const std::string* value = instruction.raw_attribute(key);
  if (value == nullptr) {
    return Error(fmt::format("{} needs the attribute {}=",
                             HloOpcodeString(instruction.opcode()), key));
  }
  return value;
}

StatusOr<int64_t> ParseInteger(std::string_view text, std::string_view key) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return Error(fmt::format("{}={} is not an integer", key, text));
  }
  return value;
}

StatusOr<bool> ParseBool(std::string_view text, std::string_view key) {
  if (text == "true") return true;
  if (text == "false") return false;
  return Error(fmt::format("{}={} is neither true nor false", key, text));
}

// "{5,7}" or "{}".
StatusOr<std::vector<int64_t>> ParseIntegerList(std::string_view text, std::string_view key) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') {
    return Error(fmt::format("{}={} is not a list of integers in braces", key, text));
  }
  std::vector<int64_t> values;
  std::string_view rest = text.substr(1, text.size() - 2);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    ASSIGN_OR_RETURN(int64_t value, ParseInteger(item, key));
    values.push_back(value);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return values;
}

}  // namespace

std::string_view FftTypeName(FftType type) {
  switch (type) {
    case FftType::kFft: return "FFT";
    case FftType::kIfft: return "IFFT";
    case FftType::kRfft: return "RFFT";
    case FftType::kIrfft: return "IRFFT";
  }
  return "FFT";
}

StatusOr<FftAttributes> GetFftAttributes(const HloInstruction& instruction) {
  FftAttributes attributes;
  ASSIGN_OR_RETURN(const std::string* type, Required(instruction, "fft_type"));
  if (*type == "FFT") {
    attributes.type = FftType::kFft;
  } else if (*type == "IFFT") {
    attributes.type = FftType::kIfft;
  } else if (*type == "RFFT") {
    attributes.type = FftType::kRfft;
  } else if (*type == "IRFFT") {
    attributes.type = FftType::kIrfft;
  } else {
    return Error(fmt::format("fft_type={} is not one of FFT, IFFT, RFFT, IRFFT", *type));
  }
  ASSIGN_OR_RETURN(const std::string* lengths, Required(instruction, "fft_length"));
  ASSIGN_OR_RETURN(attributes.lengths, ParseIntegerList(*lengths, "fft_length"));
  if (attributes.lengths.empty() || attributes.lengths.size() > 3) {
    return Error(fmt::format("fft_length={} must name 1 to 3 dimensions", *lengths));
  }
  for (int64_t length : attributes.lengths) {
    if (length < 0) return Error(fmt::format("fft_length={} holds a negative length", *lengths));
  }
  return attributes;
}

StatusOr<TopKAttributes> GetTopKAttributes(const HloInstruction& instruction) {
  TopKAttributes attributes;
  ASSIGN_OR_RETURN(const std::string* k, Required(instruction, "k"));
  ASSIGN_OR_RETURN(attributes.k, ParseInteger(*k, "k"));
  if (attributes.k < 0) return Error(fmt::format("k={} is negative", attributes.k));
  if (const std::string* largest = instruction.raw_attribute("largest")) {
    ASSIGN_OR_RETURN(attributes.largest, ParseBool(*largest, "largest"));
  }
  return attributes;
}

StatusOr<bool> GetCholeskyLower(const HloInstruction& instruction) {
  const std::string* lower = instruction.raw_attribute("lower");
  if (lower == nullptr) return false;
  return ParseBool(*lower, "lower");
}

StatusOr<TriangularSolveAttributes> GetTriangularSolveAttributes(
    const HloInstruction& instruction) {
  TriangularSolveAttributes attributes;
  for (auto [key, field] : {std::pair{"left_side", &attributes.left_side},
                            std::pair{"lower", &attributes.lower},
                            std::pair{"unit_diagonal", &attributes.unit_diagonal}}) {
    if (const std::string* text = instruction.raw_attribute(key)) {
      ASSIGN_OR_RETURN(*field, ParseBool(*text, key));
    }
  }
  const std::string* transpose = instruction.raw_attribute("transpose_a");
  if (transpose == nullptr || *transpose == "NO_TRANSPOSE") {
    attributes.transpose = TriangularSolveTranspose::kNo;
  } else if (*transpose == "TRANSPOSE") {
    attributes.transpose = TriangularSolveTranspose::kTranspose;
  } else if (*transpose == "ADJOINT") {
    attributes.transpose = TriangularSolveTranspose::kAdjoint;
  } else {
    return Error(fmt::format("transpose_a={}: expected NO_TRANSPOSE, TRANSPOSE or ADJOINT",
                             *transpose));
  }
  return attributes;
}

StatusOr<BatchNormAttributes> GetBatchNormAttributes(const HloInstruction& instruction) {
  BatchNormAttributes attributes;
  ASSIGN_OR_RETURN(const std::string* epsilon, Required(instruction, "epsilon"));
  char* end = nullptr;
  attributes.epsilon = std::strtod(epsilon->c_str(), &end);
  if (epsilon->empty() || end != epsilon->c_str() + epsilon->size()) {
    return Error(fmt::format("epsilon={} is not a number", *epsilon));
  }
  // XLA holds epsilon as a float whatever the operand's type: an f64 batch norm with
  // epsilon=0.01 adds 0.00999999977648258 (jaxlib's CPU output shows it).
  attributes.epsilon = static_cast<float>(attributes.epsilon);
  ASSIGN_OR_RETURN(const std::string* feature_index, Required(instruction, "feature_index"));
  ASSIGN_OR_RETURN(attributes.feature_index, ParseInteger(*feature_index, "feature_index"));
  return attributes;
}

}  // namespace xlens

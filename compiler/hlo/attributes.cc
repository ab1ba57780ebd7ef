#include "compiler/hlo/attributes.h"

#include <fmt/format.h>

namespace xlens {

std::string QuoteString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string OpMetadata::ToString() const {
  std::vector<std::string> parts;
  if (!op_type.empty()) parts.push_back("op_type=" + QuoteString(op_type));
  if (!op_name.empty()) parts.push_back("op_name=" + QuoteString(op_name));
  if (!source_file.empty()) parts.push_back("source_file=" + QuoteString(source_file));
  if (source_line) parts.push_back(fmt::format("source_line={}", *source_line));
  for (const auto& [key, value] : other) parts.push_back(key + "=" + value);
  if (stack_frame_id) parts.push_back(fmt::format("stack_frame_id={}", *stack_frame_id));
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string Window::ToString() const {
  auto join = [&](auto field) {
    std::vector<std::string> v;
    for (const WindowDimension& d : dimensions) v.push_back(field(d));
    return fmt::format("{}", fmt::join(v, "x"));
  };
  auto any = [&](auto pred) {
    for (const WindowDimension& d : dimensions) {
      if (pred(d)) return true;
    }
    return false;
  };
  std::vector<std::string> parts;
  if (!dimensions.empty()) {
    parts.push_back("size=" + join([](const WindowDimension& d) { return std::to_string(d.size); }));
  }
  if (any([](const WindowDimension& d) { return d.stride != 1; })) {
    parts.push_back("stride=" + join([](const WindowDimension& d) { return std::to_string(d.stride); }));
  }
  if (any([](const WindowDimension& d) { return d.padding_low != 0 || d.padding_high != 0; })) {
    parts.push_back("pad=" + join([](const WindowDimension& d) {
                      return fmt::format("{}_{}", d.padding_low, d.padding_high);
                    }));
  }
  if (any([](const WindowDimension& d) { return d.base_dilation != 1; })) {
    parts.push_back("lhs_dilate=" + join([](const WindowDimension& d) {
                      return std::to_string(d.base_dilation);
                    }));
  }
  if (any([](const WindowDimension& d) { return d.window_dilation != 1; })) {
    parts.push_back("rhs_dilate=" + join([](const WindowDimension& d) {
                      return std::to_string(d.window_dilation);
                    }));
  }
  if (any([](const WindowDimension& d) { return d.window_reversal; })) {
    parts.push_back("rhs_reversal=" + join([](const WindowDimension& d) {
                      return std::string(d.window_reversal ? "1" : "0");
                    }));
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string ConvolutionDimensionNumbers::ToString() const {
  auto labels = [](int64_t rank, int64_t batch, char batch_c, int64_t feature, char feature_c,
                   const std::vector<int64_t>& spatial) {
    std::string s(static_cast<size_t>(rank), '?');
    if (batch >= 0 && batch < rank) s[batch] = batch_c;
    if (feature >= 0 && feature < rank) s[feature] = feature_c;
    for (size_t i = 0; i < spatial.size(); ++i) {
      if (spatial[i] >= 0 && spatial[i] < rank) s[spatial[i]] = static_cast<char>('0' + i);
    }
    return s;
  };
  int64_t rank = static_cast<int64_t>(input_spatial_dimensions.size()) + 2;
  return labels(rank, input_batch_dimension, 'b', input_feature_dimension, 'f',
                input_spatial_dimensions) +
         "_" +
         labels(rank, kernel_input_feature_dimension, 'i', kernel_output_feature_dimension, 'o',
                kernel_spatial_dimensions) +
         "->" +
         labels(rank, output_batch_dimension, 'b', output_feature_dimension, 'f',
                output_spatial_dimensions);
}

std::string PaddingConfig::ToString() const {
  bool interior = false;
  for (const PaddingDimension& d : dimensions) interior |= d.interior_padding != 0;
  std::vector<std::string> parts;
  for (const PaddingDimension& d : dimensions) {
    std::string p = fmt::format("{}_{}", d.edge_padding_low, d.edge_padding_high);
    if (interior) p += fmt::format("_{}", d.interior_padding);
    parts.push_back(p);
  }
  return fmt::format("{}", fmt::join(parts, "x"));
}

std::string_view ComparisonDirectionString(ComparisonDirection d) {
  switch (d) {
    case ComparisonDirection::kEq: return "EQ";
    case ComparisonDirection::kNe: return "NE";
    case ComparisonDirection::kGe: return "GE";
    case ComparisonDirection::kGt: return "GT";
    case ComparisonDirection::kLe: return "LE";
    case ComparisonDirection::kLt: return "LT";
  }
  return "?";
}

std::optional<ComparisonDirection> ParseComparisonDirection(std::string_view s) {
  for (auto d : {ComparisonDirection::kEq, ComparisonDirection::kNe, ComparisonDirection::kGe,
                 ComparisonDirection::kGt, ComparisonDirection::kLe, ComparisonDirection::kLt}) {
    if (ComparisonDirectionString(d) == s) return d;
  }
  return std::nullopt;
}

std::string_view ComparisonTypeString(ComparisonType t) {
  switch (t) {
    case ComparisonType::kFloat: return "FLOAT";
    case ComparisonType::kFloatTotalOrder: return "TOTALORDER";
    case ComparisonType::kSigned: return "SIGNED";
    case ComparisonType::kUnsigned: return "UNSIGNED";
  }
  return "?";
}

std::optional<ComparisonType> ParseComparisonType(std::string_view s) {
  for (auto t : {ComparisonType::kFloat, ComparisonType::kFloatTotalOrder,
                 ComparisonType::kSigned, ComparisonType::kUnsigned}) {
    if (ComparisonTypeString(t) == s) return t;
  }
  return std::nullopt;
}

std::string_view FusionKindString(FusionKind k) {
  switch (k) {
    case FusionKind::kLoop: return "kLoop";
    case FusionKind::kInput: return "kInput";
    case FusionKind::kOutput: return "kOutput";
    case FusionKind::kCustom: return "kCustom";
  }
  return "?";
}

std::optional<FusionKind> ParseFusionKind(std::string_view s) {
  for (auto k : {FusionKind::kLoop, FusionKind::kInput, FusionKind::kOutput, FusionKind::kCustom}) {
    if (FusionKindString(k) == s) return k;
  }
  return std::nullopt;
}

}  // namespace xlens

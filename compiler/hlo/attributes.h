// The structured attributes of HLO instructions, each with the text form XLA prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xlens {

// `s` in double quotes with '"', '\\' and newlines escaped: how HLO text writes a string value.
std::string QuoteString(std::string_view s);

// metadata={op_type="..." op_name="..." source_file="..." source_line=N ... stack_frame_id=N}.
// Keys xlens does not act on (deduplicated_name, source_column, ...) are kept verbatim in `other`.
// stack_frame_id names a frame of the module's stack-frame table (stack_frames.h); XLA writes it
// last, and so does ToString.
struct OpMetadata {
  std::string op_type;
  std::string op_name;
  std::string source_file;
  std::optional<int64_t> source_line;
  std::vector<std::pair<std::string, std::string>> other;  // key, verbatim value
  std::optional<int64_t> stack_frame_id;

  bool empty() const {
    return op_type.empty() && op_name.empty() && source_file.empty() && !source_line &&
           other.empty() && !stack_frame_id;
  }
  std::string ToString() const;  // the text inside metadata={...}
  bool operator==(const OpMetadata&) const = default;
};

struct WindowDimension {
  int64_t size = 1;
  int64_t stride = 1;
  int64_t padding_low = 0;
  int64_t padding_high = 0;
  int64_t window_dilation = 1;  // rhs_dilate
  int64_t base_dilation = 1;    // lhs_dilate
  bool window_reversal = false;
  bool operator==(const WindowDimension&) const = default;
};

// window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x0}
struct Window {
  std::vector<WindowDimension> dimensions;
  std::string ToString() const;  // the text inside window={...}
  bool operator==(const Window&) const = default;
};

// dim_labels=b01f_01io->b01f
struct ConvolutionDimensionNumbers {
  int64_t input_batch_dimension = 0;
  int64_t input_feature_dimension = 0;
  std::vector<int64_t> input_spatial_dimensions;
  int64_t kernel_input_feature_dimension = 0;
  int64_t kernel_output_feature_dimension = 0;
  std::vector<int64_t> kernel_spatial_dimensions;
  int64_t output_batch_dimension = 0;
  int64_t output_feature_dimension = 0;
  std::vector<int64_t> output_spatial_dimensions;
  std::string ToString() const;  // "b01f_01io->b01f"
  bool operator==(const ConvolutionDimensionNumbers&) const = default;
};

struct DotDimensionNumbers {
  std::vector<int64_t> lhs_batch_dimensions;
  std::vector<int64_t> lhs_contracting_dimensions;
  std::vector<int64_t> rhs_batch_dimensions;
  std::vector<int64_t> rhs_contracting_dimensions;
  bool operator==(const DotDimensionNumbers&) const = default;
};

struct PaddingDimension {
  int64_t edge_padding_low = 0;
  int64_t edge_padding_high = 0;
  int64_t interior_padding = 0;
  bool operator==(const PaddingDimension&) const = default;
};
// padding=0_0x1_2_1: low_high[_interior] per dimension, joined by 'x'.
struct PaddingConfig {
  std::vector<PaddingDimension> dimensions;
  std::string ToString() const;
  bool operator==(const PaddingConfig&) const = default;
};

struct GatherDimensionNumbers {
  std::vector<int64_t> offset_dims;
  std::vector<int64_t> collapsed_slice_dims;
  std::vector<int64_t> start_index_map;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> operand_batching_dims;
  std::vector<int64_t> start_indices_batching_dims;
  bool operator==(const GatherDimensionNumbers&) const = default;
};

struct ScatterDimensionNumbers {
  std::vector<int64_t> update_window_dims;
  std::vector<int64_t> inserted_window_dims;
  std::vector<int64_t> scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> input_batching_dims;
  std::vector<int64_t> scatter_indices_batching_dims;
  bool operator==(const ScatterDimensionNumbers&) const = default;
};

enum class ComparisonDirection { kEq, kNe, kGe, kGt, kLe, kLt };
std::string_view ComparisonDirectionString(ComparisonDirection d);  // "EQ", ...
std::optional<ComparisonDirection> ParseComparisonDirection(std::string_view s);

// type= on compare: FLOAT (IEEE, NaN unordered), TOTALORDER, SIGNED, UNSIGNED.
enum class ComparisonType { kFloat, kFloatTotalOrder, kSigned, kUnsigned };
std::string_view ComparisonTypeString(ComparisonType t);
std::optional<ComparisonType> ParseComparisonType(std::string_view s);

enum class FusionKind { kLoop, kInput, kOutput, kCustom };
std::string_view FusionKindString(FusionKind k);  // "kLoop", ...
std::optional<FusionKind> ParseFusionKind(std::string_view s);

// An attribute xlens carries but does not interpret (backend_config, sharding, channel_id, ...):
// the key and the value exactly as written, printed back unchanged.
struct RawAttribute {
  std::string key;
  std::string value;
  bool operator==(const RawAttribute&) const = default;
};

}  // namespace xlens

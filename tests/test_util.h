// Helpers shared by the tests: where the shared corpus is, and reading test files.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace xlens::testing {

// ../shared/corpus/hlo beside the clone; empty when absent (tests then skip with a reason).
inline std::string HloCorpusDir() {
  std::string dir = std::string(XLENS_SHARED_DIR) + "/corpus/hlo";
  return std::filesystem::is_directory(dir) ? dir : "";
}

// The *.hlo files directly in `dir`, sorted.
inline std::vector<std::string> HloFilesIn(const std::string& dir) {
  std::vector<std::string> files;
  if (dir.empty() || !std::filesystem::is_directory(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".hlo") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The names (without .hlo) of the corpus modules, for parameterized tests; one placeholder name
// when the corpus is absent, so that the test reports the skip instead of vanishing.
inline std::vector<std::string> HloCorpusModuleNames() {
  std::vector<std::string> names;
  for (const std::string& path : HloFilesIn(HloCorpusDir())) {
    names.push_back(std::filesystem::path(path).stem().string());
  }
  if (names.empty()) names.push_back("corpus_absent");
  return names;
}

// A module name as a gtest parameter name (letters, digits and underscores).
inline std::string TestNameOf(std::string name) {
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

inline std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The 46 corpus modules the corpus README lists as good inputs for a single-device reference
// evaluator (no custom-calls, collectives or elided constants; every array under 1M elements).
inline const std::vector<std::string>& EvaluatorCorpusModules() {
  static const std::vector<std::string> kModules = {
      "axpy_broadcast_long_form", "fibonacci_add_chain", "pred_add_not_fusion",
      "map_mixed_input_types", "reduce_variadic_tuple_reducer", "reduce_c128_complex_literal",
      "reduce_max_shape_omitted", "reduce_argmax_variadic_iota", "reduce_to_vector_and_scalar",
      "reduce_transpose_bitcast_oneline", "dot_batch_bf16_algorithm",
      "dot_int_batch_jax_precision", "dot_fused_batch_call_jaxpr", "conv3d_bias_relu",
      "reduce_window_variadic", "reduce_window_s64_pytorch", "select_and_scatter_ge_add",
      "fused_concat_slices_kinput", "concat_11_operands_f16", "transpose_reverse_diamond_f64",
      "tf_fully_connected_model", "fft_transpose_c64", "gather_tf_v2_fused_add",
      "gather_nd_multiple_batch_dims", "scatter_tf_add", "scatter_variadic_multioutput",
      "scatter_in_kinput_fusion", "sort_two_dims_same_comparator", "sort_key_value_scheduled",
      "topk_of_transpose", "while_scalar_s32", "while_jax_tpu_tiled_scalar",
      "conditional_tf_if_tuple", "conditional_indexed_branches", "conditional_dot_pred",
      "multi_output_reduce_fusion_kinput", "dot_add_fusion_koutput",
      "dus_fusion_bitcast_root_bf16", "fusion_tuple_operands", "triton_gemm_kcustom_fusion",
      "composite_call_frontend_attributes", "cholesky_f64", "batch_norm_training_literals",
      "nested_anonymous_operands", "while_complex_cholesky_c64", "jax2tf_call_tf_cos_sin",
  };
  return kModules;
}

// The text after "// expect error: " on the first line, or empty.
inline std::string ExpectedError(const std::string& text) {
  const std::string marker = "// expect error: ";
  if (text.rfind(marker, 0) != 0) return "";
  size_t end = text.find('\n');
  return text.substr(marker.size(), end == std::string::npos ? end : end - marker.size());
}

}  // namespace xlens::testing

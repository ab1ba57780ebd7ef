// Runs one pass over every corpus module the reference evaluator runs (the 46 the corpus README
// lists) and checks that each result verifies and computes what the original did.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens::testing {

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

struct CorpusPassSummary {
  int checked = 0;  // modules that evaluated before the pass
  int changed = 0;  // of those, the ones the pass changed
  std::vector<std::string> changed_names;
};

// Runs a fresh pass from `make_pass` on each module; a failure names the module. Modules the
// evaluator cannot run before the pass are skipped (they test nothing here). `summary` is filled
// when given. Returns false (after GTEST_SKIP-worthy reasons are logged) when the corpus is absent.
inline bool CheckPassOverCorpus(const std::function<std::unique_ptr<HloPass>()>& make_pass,
                                CorpusPassSummary* summary = nullptr) {
  const std::string dir = std::string(XLENS_SHARED_DIR) + "/corpus/hlo/";
  if (!std::filesystem::exists(dir)) return false;
  CorpusPassSummary local;
  for (const std::string& name : EvaluatorCorpusModules()) {
    SCOPED_TRACE(name);
    std::ifstream file(dir + name + ".hlo");
    if (!file) continue;
    std::stringstream text;
    text << file.rdbuf();
    auto parsed = ParseHloModule(text.str(), ParseOptions{.verify = true, .filename = name});
    if (!parsed.ok()) continue;
    std::unique_ptr<HloModule> module = std::move(parsed).value();
    std::unique_ptr<HloModule> before = CloneModule(*module);
    {
      // Skip modules the evaluator cannot run as they are.
      std::mt19937_64 rng(7);
      std::vector<Literal> args;
      bool ok = true;
      for (const HloInstruction* p : before->entry_computation()->parameter_instructions()) {
        auto lit = MakeRandomLiteral(p->shape(), rng);
        if (!lit.ok()) { ok = false; break; }
        args.push_back(std::move(*lit));
      }
      if (!ok || !EvaluateModule(*before, args).ok()) continue;
    }
    std::unique_ptr<HloPass> pass = make_pass();
    auto changed = RunPassChecked(*pass, *module);
    EXPECT_TRUE(changed.ok()) << changed.status().message();
    if (!changed.ok()) continue;
    ++local.checked;
    if (*changed) {
      ++local.changed;
      local.changed_names.push_back(name);
    }
    EXPECT_TRUE(SameResults(*before, *module, 7, ErrorSpec{1e-3, 1e-3}));
    // A second run must not fail, and the printed result must parse back.
    auto again = RunPassChecked(*pass, *module);
    EXPECT_TRUE(again.ok()) << again.status().message();
    EXPECT_NE(CloneModule(*module), nullptr);
  }
  if (summary != nullptr) *summary = local;
  return true;
}

}  // namespace xlens::testing

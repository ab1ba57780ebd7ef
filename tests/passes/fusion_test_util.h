// Modules and helpers shared by the fusion pass tests.
#pragma once

#include "test_util.h"

#include <string>
#include <vector>

#include "compiler/passes/fusion_utils.h"
#include "pass_test_util.h"

namespace xlens::testing {

// The modules the corpus README lists as good first inputs for the reference evaluator.

inline std::string CorpusDir() { return std::string(XLENS_SHARED_DIR) + "/corpus/hlo"; }

// The fusion instructions of the entry computation.
inline std::vector<const HloInstruction*> EntryFusions(const HloModule& module) {
  std::vector<const HloInstruction*> out;
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (i->opcode() == HloOpcode::kFusion) out.push_back(i);
  }
  return out;
}

// reduce_sum(x + y * z): the example every XLA introduction fuses into one kernel.
inline constexpr char kReduceSumModule[] = R"(HloModule reduce_sum
%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %model_fn (x: f32[1024], y: f32[1024], z: f32[1024]) -> f32[] {
  %x = f32[1024]{0} parameter(0)
  %y = f32[1024]{0} parameter(1)
  %z = f32[1024]{0} parameter(2)
  %multiply.1 = f32[1024]{0} multiply(%y, %z), metadata={op_type="Mul" op_name="mul"}
  %add.2 = f32[1024]{0} add(%x, %multiply.1), metadata={op_type="AddV2" op_name="add"}
  %zero = f32[] constant(0)
  ROOT %reduce.3 = f32[] reduce(%add.2, %zero), dimensions={0}, to_apply=%add_f32, metadata={op_type="Sum" op_name="Sum"}
})";

// Softmax over the rows of f32[R,C].
inline std::string SoftmaxModule(int rows, int cols) {
  std::string text = R"(HloModule softmax
%max_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}
%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %softmax (x: f32[R,C]) -> f32[R,C] {
  %x = f32[R,C]{1,0} parameter(0)
  %ninf = f32[] constant(-inf)
  %max = f32[R]{0} reduce(%x, %ninf), dimensions={1}, to_apply=%max_f32
  %max_b = f32[R,C]{1,0} broadcast(%max), dimensions={0}
  %sub = f32[R,C]{1,0} subtract(%x, %max_b)
  %exp = f32[R,C]{1,0} exponential(%sub)
  %zero = f32[] constant(0)
  %sum = f32[R]{0} reduce(%exp, %zero), dimensions={1}, to_apply=%add_f32
  %sum_b = f32[R,C]{1,0} broadcast(%sum), dimensions={0}
  ROOT %div = f32[R,C]{1,0} divide(%exp, %sum_b)
})";
  auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
      text.replace(at, from.size(), to);
    }
  };
  replace("R,C", std::to_string(rows) + "," + std::to_string(cols));
  replace("[R]", "[" + std::to_string(rows) + "]");
  return text;
}

// Layer norm over the rows of f32[R,C]: (x - mean) * rsqrt(var + eps) * scale + shift.
inline std::string LayerNormModule(int rows, int cols) {
  std::string text = R"(HloModule layer_norm
%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %layer_norm (x: f32[R,C], scale: f32[C], shift: f32[C]) -> f32[R,C] {
  %x = f32[R,C]{1,0} parameter(0)
  %scale = f32[C]{0} parameter(1)
  %shift = f32[C]{0} parameter(2)
  %zero = f32[] constant(0)
  %n = f32[] constant(NN)
  %n_b = f32[R]{0} broadcast(%n), dimensions={}
  %sum = f32[R]{0} reduce(%x, %zero), dimensions={1}, to_apply=%add_f32
  %mean = f32[R]{0} divide(%sum, %n_b)
  %mean_b = f32[R,C]{1,0} broadcast(%mean), dimensions={0}
  %centered = f32[R,C]{1,0} subtract(%x, %mean_b)
  %square = f32[R,C]{1,0} multiply(%centered, %centered)
  %sum_sq = f32[R]{0} reduce(%square, %zero), dimensions={1}, to_apply=%add_f32
  %var = f32[R]{0} divide(%sum_sq, %n_b)
  %eps = f32[] constant(1e-05)
  %eps_b = f32[R]{0} broadcast(%eps), dimensions={}
  %var_eps = f32[R]{0} add(%var, %eps_b)
  %inv = f32[R]{0} rsqrt(%var_eps)
  %inv_b = f32[R,C]{1,0} broadcast(%inv), dimensions={0}
  %normed = f32[R,C]{1,0} multiply(%centered, %inv_b)
  %scale_b = f32[R,C]{1,0} broadcast(%scale), dimensions={1}
  %scaled = f32[R,C]{1,0} multiply(%normed, %scale_b)
  %shift_b = f32[R,C]{1,0} broadcast(%shift), dimensions={1}
  ROOT %out = f32[R,C]{1,0} add(%scaled, %shift_b)
})";
  auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
      text.replace(at, from.size(), to);
    }
  };
  replace("R,C", std::to_string(rows) + "," + std::to_string(cols));
  replace("[R]", "[" + std::to_string(rows) + "]");
  replace("[C]", "[" + std::to_string(cols) + "]");
  replace("NN", std::to_string(cols));
  return text;
}

}  // namespace xlens::testing

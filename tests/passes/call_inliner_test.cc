#include "compiler/passes/call_inliner.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/passes/dce.h"
#include "corpus_pass_check.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CloneModule;
using xlens::testing::CountOpcode;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;
using xlens::testing::SameResults;

std::unique_ptr<HloModule> Inline(std::string_view text, CallInliner pass = CallInliner(),
                                  bool expect_change = true) {
  auto module = ParseModuleOrDie(text);
  if (module == nullptr) return nullptr;
  auto before = CloneModule(*module);
  auto changed = RunPassChecked(pass, *module);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  if (!changed.ok()) return nullptr;
  EXPECT_EQ(*changed, expect_change) << PrintModule(*module);
  EXPECT_TRUE(SameResults(*before, *module));
  auto again = RunPassChecked(pass, *module);
  EXPECT_TRUE(again.ok() && !*again) << PrintModule(*module);
  return module;
}

TEST(CallInlinerTest, InlinesNestedCallsKeepingMetadata) {
  auto module = Inline(R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
inner {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x), metadata={op_type="Neg" op_name="inner/neg"}
}
outer {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  c = f32[4] call(y), to_apply=inner
  z = f32[] constant(0)
  r = f32[] reduce(x, z), dimensions={0}, to_apply=add
  b = f32[4] broadcast(r), dimensions={}
  ROOT m = f32[4] multiply(c, b)
}
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  ROOT k = f32[4] call(p, q), to_apply=outer
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kCall), 0);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  ASSERT_EQ(root->opcode(), HloOpcode::kMultiply);
  ASSERT_EQ(root->operand(0)->opcode(), HloOpcode::kNegate);
  EXPECT_EQ(root->operand(0)->metadata.op_name, "inner/neg");
  EXPECT_EQ(root->operand(0)->operand(0)->name(), "q");
  // The callees are left for dce.
  HloDce dce;
  ASSERT_TRUE(dce.Run(*module).ok());
  EXPECT_EQ(module->computation_count(), 2);  // the entry and the reducer
}

TEST(CallInlinerTest, InlinesTheSameCalleeTwiceAndInsideLoops) {
  auto module = Inline(R"(HloModule m
twice { x = s32[] parameter(0) ROOT y = s32[] add(x, x) }
cond { s = s32[] parameter(0) n = s32[] constant(100) ROOT c = pred[] compare(s, n), direction=LT }
body { s = s32[] parameter(0) ROOT t = s32[] call(s), to_apply=twice }
ENTRY e {
  p = s32[] parameter(0)
  a = s32[] call(p), to_apply=twice
  b = s32[] call(a), to_apply=twice
  one = s32[] constant(1)
  start = s32[] add(b, one)
  ROOT w = s32[] while(start), condition=cond, body=body
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kCall), 0);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kAdd), 3);
  EXPECT_EQ(module->GetComputationWithName("body")->root_instruction()->opcode(), HloOpcode::kAdd);
}

TEST(CallInlinerTest, CompositeCallsAreInlinedUnlessPreserved) {
  constexpr std::string_view kText = R"(HloModule m
plus_two { x = f32[] parameter(0) c = f32[] constant(2) ROOT s = f32[] add(x, c) }
ENTRY e {
  p = f32[] parameter(0)
  ROOT k = f32[] call(p), to_apply=plus_two, is_composite=true, frontend_attributes={composite.name="foo.bar",composite.version="1"}
})";
  auto inlined = Inline(kText);
  ASSERT_NE(inlined, nullptr);
  EXPECT_EQ(CountOpcode(*inlined, HloOpcode::kCall), 0);
  auto kept = Inline(kText, CallInliner(/*preserve_composites=*/true), /*expect_change=*/false);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(CountOpcode(*kept, HloOpcode::kCall), 1);
}

TEST(CallInlinerTest, CalleeControlDependenciesAreCloned) {
  auto module = Inline(R"(HloModule m
f {
  x = f32[2] parameter(0)
  a = f32[2] exponential(x)
  ROOT b = f32[2] negate(x), control-predecessors={a}
}
ENTRY e {
  p = f32[2] parameter(0)
  ROOT k = f32[2] call(p), to_apply=f
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  ASSERT_EQ(root->control_predecessors().size(), 1u);
  EXPECT_EQ(root->control_predecessors()[0]->opcode(), HloOpcode::kExp);
}

// A chain of nested calls is inlined into the entry once: the dead callees are not inlined into
// themselves level by level, which made 5,000 levels N^2 instructions (gigabytes).
TEST(CallInlinerTest, DeepCallChainsInlineInLinearSize) {
  constexpr int kDepth = 5000;
  std::string text = "HloModule chain\n";
  text += fmt::format("c{} {{ p = f32[] parameter(0) one = f32[] constant(1) ROOT r = f32[] add(p, one) }}\n",
                      kDepth - 1);
  for (int i = kDepth - 2; i >= 0; --i) {
    text += fmt::format(
        "c{} {{ p = f32[] parameter(0) one = f32[] constant(1) x = f32[] call(p), to_apply=c{} "
        "ROOT r = f32[] add(x, one) }}\n", i, i + 1);
  }
  text += "ENTRY main { p = f32[] parameter(0) ROOT r = f32[] call(p), to_apply=c0 }\n";
  auto module = ParseModuleOrDie(text);
  ASSERT_NE(module, nullptr);
  const int64_t before = module->instruction_count();
  auto changed = CallInliner().Run(*module);
  ASSERT_TRUE(changed.ok() && *changed);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kCall), 0);
  // The entry holds two instructions per level plus its parameter; nothing else grew.
  EXPECT_EQ(module->entry_computation()->instruction_count(), 1 + 2 * kDepth);
  EXPECT_LE(module->instruction_count(), before + 2 * kDepth + 1);
  Literal x = Literal::CreateR0(PrimitiveType::F32, 2.0f);
  auto result = EvaluateModule(*module, std::span<const Literal>(&x, 1));
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->GetAsDouble(0), 2.0 + kDepth);
}

TEST(CallInlinerTest, CorpusModulesComputeTheSame) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus([] { return std::make_unique<CallInliner>(); },
                                           &summary)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  EXPECT_GT(summary.checked, 30);
  std::string names;
  for (const std::string& n : summary.changed_names) names += " " + n;
  std::cout << "call-inliner changed " << summary.changed << " of " << summary.checked
            << " corpus modules:" << names << "\n";
}

}  // namespace
}  // namespace xlens

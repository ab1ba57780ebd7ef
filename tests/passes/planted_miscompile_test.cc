#include "compiler/passes/planted_miscompile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/verifier.h"
#include "compiler/passes/hlo_optimizer.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<HloModule> Parse(std::string_view text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  return std::move(*module);
}

TEST(PlantedMiscompileTest, AddsOneToTheFirstNumericOutputOnce) {
  auto module = Parse(R"(HloModule m
ENTRY e {
  p = s32[3] parameter(0)
  q = pred[] parameter(1)
  ROOT t = (pred[], s32[3]) tuple(q, p)
})");
  PlantedMiscompile pass;
  ASSERT_TRUE(*pass.Run(*module));
  EXPECT_FALSE(*pass.Run(*module)) << "it fires once per compilation";
  ASSERT_TRUE(VerifyModule(*module).ok());
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<int32_t>(PrimitiveType::S32, {1, 2, 3}));
  args.push_back(Literal::CreateR0<bool>(PrimitiveType::PRED, true));
  auto result = EvaluateModule(*module, args);
  ASSERT_TRUE(result.ok()) << result.status().message();
  // The first leaf is a pred: flipped; the second is untouched.
  EXPECT_EQ(result->tuple_elements()[0].ToStringWithoutShape(), "false");
  EXPECT_EQ(result->tuple_elements()[1].ToStringWithoutShape(), "{1, 2, 3}");
}

TEST(PlantedMiscompileTest, InsertedAfterANamedPassOfThePipeline) {
  const char* text = R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[] constant(3)
  b = f32[4] broadcast(c), dimensions={}
  ROOT m = f32[4] multiply(p, b)
})";
  auto module = Parse(text);
  OptimizeOptions options;
  options.planted.miscompile_after_pass = "algebraic-simplifier";  // inside a fixed point
  options.verify_each_pass = true;
  auto result = OptimizeHloModule(*module, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_TRUE(result->warnings.empty()) << "the fixed point still converges";
  int planted = 0;
  for (const PassEvent& e : result->events) {
    if (e.pass == "planted-miscompile" && e.changed) {
      ++planted;
      EXPECT_EQ(e.pipeline, "simplification");
    }
  }
  EXPECT_EQ(planted, 1);
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {1, 2, 3, 4}));
  auto value = EvaluateModule(*module, args);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->ToStringWithoutShape(), "{4, 7, 10, 13}");

  auto unknown = Parse(text);
  options.planted.miscompile_after_pass = "no-such-pass";
  auto refused = OptimizeHloModule(*unknown, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("has no pass of that name"));
}

}  // namespace
}  // namespace xlens

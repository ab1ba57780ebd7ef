// Constants XLA printed as {...}: kept, refused by name where values are needed, filled on request.
#include "compiler/hlo/elided_constants.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;

// The smallest of TensorFlow's dumps that crashed `xlens run`.
constexpr std::string_view kElided = R"(HloModule m
ENTRY e {
  c = f32[64]{0} constant({...})
  d = f32[] constant(2)
  ROOT n = f32[64]{0} negate(c)
})";

std::unique_ptr<HloModule> Parse(std::string_view text) {
  auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = "m.hlo"});
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

TEST(ElidedConstantsTest, PrintsBackAndIsFoundByName) {
  auto module = Parse(kElided);
  ASSERT_NE(module, nullptr);
  EXPECT_THAT(PrintModule(*module), HasSubstr("constant({...})"));
  std::vector<const HloInstruction*> elided = ElidedConstants(*module);
  ASSERT_EQ(elided.size(), 1u);
  EXPECT_EQ(elided[0]->name(), "c");
}

TEST(ElidedConstantsTest, RunningWithoutAFillIsRefusedNamingTheConstant) {
  auto module = Parse(kElided);
  ASSERT_NE(module, nullptr);
  auto filled = ResolveElidedConstants(*module, "", 42);
  ASSERT_FALSE(filled.ok());
  EXPECT_THAT(filled.status().message(), HasSubstr("constant c is elided"));
  EXPECT_THAT(filled.status().message(), HasSubstr("--fill_elided_constants"));
  EXPECT_EQ(filled.status().message().find('\n'), std::string::npos);
  EXPECT_FALSE(ResolveElidedConstants(*module, "ones", 42).ok());
}

TEST(ElidedConstantsTest, ZerosAndSeededRandomValuesFillIn) {
  auto zeros = Parse(kElided);
  ASSERT_NE(zeros, nullptr);
  auto filled = ResolveElidedConstants(*zeros, "zeros", 42);
  ASSERT_TRUE(filled.ok()) << filled.status().message();
  EXPECT_EQ(*filled, 1);
  EXPECT_TRUE(ElidedConstants(*zeros).empty());
  auto result = EvaluateModule(*zeros, {});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->GetAsDouble(63), 0.0);

  auto a = Parse(kElided);
  auto b = Parse(kElided);
  auto c = Parse(kElided);
  ASSERT_TRUE(ResolveElidedConstants(*a, "random", 7).ok());
  ASSERT_TRUE(ResolveElidedConstants(*b, "random", 7).ok());
  ASSERT_TRUE(ResolveElidedConstants(*c, "random", 8).ok());
  const Literal& la = a->entry_computation()->GetInstructionWithName("c")->literal();
  EXPECT_EQ(la, b->entry_computation()->GetInstructionWithName("c")->literal());
  EXPECT_FALSE(la == c->entry_computation()->GetInstructionWithName("c")->literal());
  EXPECT_NE(la.GetAsDouble(0), 0.0);
}

TEST(ElidedConstantsTest, ModulesWithoutElidedConstantsAreLeftAlone) {
  auto module = Parse("HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1, 2})\n}\n");
  ASSERT_NE(module, nullptr);
  auto filled = ResolveElidedConstants(*module, "", 1);
  ASSERT_TRUE(filled.ok());
  EXPECT_EQ(*filled, 0);
}

}  // namespace
}  // namespace xlens

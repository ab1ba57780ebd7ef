// What the evaluator counts as the work of an instruction, and the work it refuses to start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<HloModule> Parse(std::string_view text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

const HloInstruction& Named(const HloModule& module, std::string_view name) {
  for (const HloComputation* computation : module.computations()) {
    if (const HloInstruction* instruction = computation->GetInstructionWithName(name)) {
      return *instruction;
    }
  }
  ADD_FAILURE() << "no instruction " << name;
  return *module.entry_computation()->root_instruction();
}

constexpr std::string_view kOps = R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[8,16] parameter(0)
  b = f32[16,4] parameter(1)
  d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  r = f32[8] reduce(a, z), dimensions={1}, to_apply=add
  w = f32[8,8] reduce-window(a, z), window={size=1x3 stride=1x2 pad=0_0x1_0}, to_apply=add
  img = f32[1,5,5,2] parameter(2)
  k = f32[3,3,2,6] parameter(3)
  c = f32[1,5,5,6] convolution(img, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  n = f32[8,16] negate(a)
  ROOT t = (f32[8,4], f32[8], f32[8,8], f32[1,5,5,6], f32[8,16]) tuple(d, r, w, c, n)
})";

TEST(EvaluatorWorkTest, CountsMultiplyAddsApplicationsAndElements) {
  std::unique_ptr<HloModule> module = Parse(kOps);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(EvaluationWork(Named(*module, "d")), 8 * 4 * 16);
  EXPECT_EQ(EvaluationWork(Named(*module, "r")), 8 * 16);
  EXPECT_EQ(EvaluationWork(Named(*module, "w")), 8 * 8 * 3);
  EXPECT_EQ(EvaluationWork(Named(*module, "c")), 5 * 5 * 6 * (3 * 3 * 2));
  EXPECT_EQ(EvaluationWork(Named(*module, "n")), 8 * 16);
  EXPECT_EQ(EvaluationWork(Named(*module, "t")), 0);
  EXPECT_TRUE(CheckEvaluationWork(*module, kDefaultMaxEvaluatorWork).ok());
}

// A 2^62-wide window over f32[4] verifies, then ran until the end of time.
constexpr std::string_view kAbsurdWindow = R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce-window(p, z), window={size=4611686018427387904 pad=2305843009213693952_2305843009213693951}, to_apply=add
})";

TEST(EvaluatorWorkTest, AbsurdWorkIsRefusedBeforeItStartsWithTheFigure) {
  std::unique_ptr<HloModule> module = Parse(kAbsurdWindow);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(EvaluationWork(*module->entry_computation()->root_instruction()), 4 * 4611686018427387904.0);
  std::vector<Literal> arguments;
  arguments.emplace_back(Shape(PrimitiveType::F32, {4}));
  StatusOr<Literal> result = EvaluateModule(*module, arguments);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("%r = f32[4] reduce-window(...) needs 1.84e+19"));
  EXPECT_THAT(result.status().message(), HasSubstr("limit of 1e+12"));
  Status check = CheckEvaluationWork(*module, kDefaultMaxEvaluatorWork);
  EXPECT_THAT(check.message(), HasSubstr("1.84e+19"));
  EXPECT_TRUE(CheckEvaluationWork(*module, 0).ok());  // 0: no limit
  // A lower limit refuses ordinary work too, and names it.
  std::unique_ptr<HloModule> ops = Parse(kOps);
  ASSERT_NE(ops, nullptr);
  EXPECT_THAT(CheckEvaluationWork(*ops, 100).message(), HasSubstr("needs 512 scalar operations"));
}

TEST(EvaluatorWorkTest, HugeShapesSaturateInsteadOfWrapping) {
  // 2^32 x 2^32 x 2 windows over 2^31 outputs: far beyond int64, still a positive figure.
  std::unique_ptr<HloModule> module = Parse(R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[2147483648] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2147483648] reduce-window(p, z), window={size=4294967296 pad=2147483648_2147483647}, to_apply=add
})");
  ASSERT_NE(module, nullptr);
  EXPECT_GT(EvaluationWork(*module->entry_computation()->root_instruction()), 9e18);
}

}  // namespace
}  // namespace xlens

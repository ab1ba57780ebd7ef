// Bounded dynamic shapes run at their bounds; unbounded ones and run-time sizes are refused by
// name, leaving the module as it was.
#include "compiler/hlo/bounded_dynamic_shapes.h"

#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

std::unique_ptr<HloModule> Parse(std::string_view text) {
  auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = "m.hlo"});
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

// What TensorFlow's XLA bridge writes for a tensor with a bounded dynamic dimension (cut down
// from the corpus's dynamic_bounded_param_tiled_layout).
constexpr std::string_view kBounded = R"(HloModule m, entry_computation_layout={(f32[<=6])->f32[<=2,3]{1,0}}
ENTRY e {
  p = f32[<=6]{0} parameter(0)
  n = f32[<=6]{0} negate(p)
  ROOT r = f32[<=2,3]{1,0} reshape(n)
})";

TEST(BoundedDynamicShapesTest, BoundedDimensionsBecomeTheirBounds) {
  auto module = Parse(kBounded);
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(HasDynamicShapes(*module));
  auto made = RunBoundedDynamicShapesAtTheirBounds(*module);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(*made, 3);
  EXPECT_FALSE(HasDynamicShapes(*module));
  EXPECT_EQ(module->entry_computation()->root_instruction()->shape().ToString(), "f32[2,3]{1,0}");
  EXPECT_EQ(module->entry_computation_layout()->parameters[0].ToString(false), "f32[6]");
  // The evaluator, which refuses dynamic shapes, now runs it on a full-size input.
  Literal input(Shape(PrimitiveType::F32, {6}));
  for (int64_t i = 0; i < 6; ++i) input.SetFromDouble(i, static_cast<double>(i));
  std::vector<Literal> args;
  args.push_back(std::move(input));
  auto result = EvaluateModule(*module, args);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->GetAsDouble(5), -5.0);
}

// TensorFlow's bridge ends top_k with a set-dimension-size to the slice's own size; a size read
// is the bound.
TEST(BoundedDynamicShapesTest, SizeOpsAtTheBoundsFoldAway) {
  auto module = Parse(R"(HloModule m
ENTRY e {
  p = f32[8,8]{1,0} parameter(0)
  s = f32[8,3]{1,0} slice(p), slice={[0:8], [0:3]}
  three = s32[] constant(3)
  d = f32[8,3]{1,0} set-dimension-size(s, three), dimensions={1}
  n = s32[] get-dimension-size(d), dimensions={1}
  ROOT t = (f32[8,3]{1,0}, s32[]) tuple(d, n)
})");
  ASSERT_NE(module, nullptr);
  auto made = RunBoundedDynamicShapesAtTheirBounds(*module);
  ASSERT_TRUE(made.ok()) << made.status().message();
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_EQ(root->operand(0)->name(), "s");
  ASSERT_EQ(root->operand(1)->opcode(), HloOpcode::kConstant);
  EXPECT_EQ(root->operand(1)->literal().GetAsInt64(0), 3);
}

TEST(BoundedDynamicShapesTest, RunTimeSizesAndUnboundedDimensionsAreRefusedUnchanged) {
  auto sliced = Parse(R"(HloModule m
ENTRY e {
  p = s32[2,2]{1,0} parameter(0)
  one = s32[] constant(1)
  two = s32[] constant(2)
  ROOT d = s32[<=2,2]{1,0} custom-call(p, one, two), custom_call_target="SliceToDynamic"
})");
  ASSERT_NE(sliced, nullptr);
  auto refused = RunBoundedDynamicShapesAtTheirBounds(*sliced);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("%d (custom-call \"SliceToDynamic\") sets a dimension's "
                                            "size at run time"),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(HasDynamicShapes(*sliced));

  auto smaller = Parse(R"(HloModule m
ENTRY e {
  p = f32[8]{0} parameter(0)
  two = s32[] constant(2)
  ROOT d = f32[<=8]{0} set-dimension-size(p, two), dimensions={0}
})");
  ASSERT_NE(smaller, nullptr);
  refused = RunBoundedDynamicShapesAtTheirBounds(*smaller);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("(set-dimension-size) sets a dimension's size"),
            std::string::npos)
      << refused.status().message();

  auto unbounded = Parse(R"(HloModule m
ENTRY e {
  p = f32[?]{0} parameter(0)
  ROOT n = f32[?]{0} negate(p)
})");
  ASSERT_NE(unbounded, nullptr);
  refused = RunBoundedDynamicShapesAtTheirBounds(*unbounded);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("unbounded dynamic shape f32[?]"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace xlens

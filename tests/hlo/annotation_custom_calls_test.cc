// Sharding annotations (XLA's Sharding, Shardy's xla.sdy.FuncResultSharding) and host-offload
// placements (annotate_device_placement, MoveToHost, MoveToDevice) are identities on one CPU
// device; the shape-changing SPMD custom calls are not annotations.
#include "compiler/hlo/annotation_custom_calls.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

// What jaxlib 0.10.2 writes for with_sharding_constraint and a sharded result (cut down).
constexpr std::string_view kAnnotated = R"(HloModule m, num_partitions=4
ENTRY e {
  p = f32[8]{0} parameter(0), sharding={devices=[4]<=[4]}
  n = f32[8]{0} negate(p)
  s = f32[8]{0} custom-call(n), custom_call_target="Sharding", sharding={devices=[4]<=[4]}
  ROOT r = f32[8]{0} custom-call(s), custom_call_target="xla.sdy.FuncResultSharding", custom_call_has_side_effect=true
})";

std::unique_ptr<HloModule> Parse(std::string_view text) {
  auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = "m.hlo"});
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

TEST(AnnotationCustomCallsTest, OnlyShapeKeepingAnnotationsQualify) {
  auto module = Parse(kAnnotated);
  ASSERT_NE(module, nullptr);
  const HloComputation* entry = module->entry_computation();
  EXPECT_TRUE(IsAnnotationCustomCall(*entry->GetInstructionWithName("s")));
  EXPECT_TRUE(IsAnnotationCustomCall(*entry->GetInstructionWithName("r")));
  EXPECT_FALSE(IsAnnotationCustomCall(*entry->GetInstructionWithName("n")));
  auto shape_changing = Parse(R"(HloModule m
ENTRY e {
  p = f32[8]{0} parameter(0)
  ROOT l = f32[2]{0} custom-call(p), custom_call_target="xla.sdy.GlobalToLocalShape"
})");
  ASSERT_NE(shape_changing, nullptr);
  EXPECT_FALSE(IsAnnotationCustomCall(*shape_changing->entry_computation()->root_instruction()));
  auto full_to_shard = Parse(R"(HloModule m
ENTRY e {
  p = f32[8]{0} parameter(0)
  ROOT l = f32[8]{0} custom-call(p), custom_call_target="SPMDFullToShardShape"
})");
  ASSERT_NE(full_to_shard, nullptr);
  EXPECT_FALSE(IsAnnotationCustomCall(*full_to_shard->entry_computation()->root_instruction()));
}

TEST(AnnotationCustomCallsTest, TheEvaluatorPassesTheOperandThrough) {
  auto module = Parse(kAnnotated);
  ASSERT_NE(module, nullptr);
  Literal input(module->entry_computation()->parameter_instruction(0)->shape());
  for (int64_t i = 0; i < 8; ++i) input.SetFromDouble(i, static_cast<double>(i));
  std::vector<Literal> args;
  args.push_back(std::move(input));
  auto result = EvaluateModule(*module, args);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->GetAsDouble(3), -3.0);
}

// A scan that offloads its carried buffer to pinned host memory, as XLA's host-offload tests
// write it: the placement sits inside the loop body and has a side effect.
constexpr std::string_view kOffloaded = R"(HloModule m
body {
  t = (s32[], f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  buffer = f32[4]{0} get-tuple-element(t), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[] convert(i)
  placed = f32[] custom-call(x), custom_call_target="annotate_device_placement", custom_call_has_side_effect=true, frontend_attributes={_xla_buffer_placement="pinned_host"}
  to_host = f32[] custom-call(placed), custom_call_target="MoveToHost"
  back = f32[] custom-call(to_host), custom_call_target="MoveToDevice"
  r = f32[1]{0} reshape(back)
  updated = f32[4]{0} dynamic-update-slice(buffer, r, i)
  ROOT out = (s32[], f32[4]{0}) tuple(next, updated)
}
cond {
  t = (s32[], f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  four = s32[] constant(4)
  ROOT lt = pred[] compare(i, four), direction=LT
}
ENTRY e {
  zero = s32[] constant(0)
  init = f32[4]{0} constant({9, 9, 9, 9})
  t = (s32[], f32[4]{0}) tuple(zero, init)
  w = (s32[], f32[4]{0}) while(t), condition=cond, body=body
  ROOT r = f32[4]{0} get-tuple-element(w), index=1
})";

TEST(AnnotationCustomCallsTest, HostPlacementsAreTheirOperand) {
  auto module = Parse(kOffloaded);
  ASSERT_NE(module, nullptr);
  const HloComputation* body = module->GetComputationWithName("body");
  ASSERT_NE(body, nullptr);
  for (const char* name : {"placed", "to_host", "back"}) {
    EXPECT_TRUE(IsAnnotationCustomCall(*body->GetInstructionWithName(name))) << name;
  }
  auto result = EvaluateModule(*module, {});
  ASSERT_TRUE(result.ok()) << result.status().message();
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(result->GetAsDouble(i), static_cast<double>(i));
  auto removed = RemoveAnnotationCustomCalls(*module);
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(*removed, 3);
  EXPECT_EQ(body->GetInstructionWithName("placed"), nullptr);
}

TEST(AnnotationCustomCallsTest, RemovalLeavesTheAnnotatedValue) {
  auto module = Parse(kAnnotated);
  ASSERT_NE(module, nullptr);
  auto removed = RemoveAnnotationCustomCalls(*module);
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(module->entry_computation()->root_instruction()->name(), "n");
}

}  // namespace
}  // namespace xlens

#include "compiler/runtime/frame_plan.h"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"

namespace xlens::runtime {
namespace {

constexpr const char* kBody = R"(HloModule m
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8] get-tuple-element(s), index=1
  b = f32[2,4] bitcast(v)
  n = f32[8] negate(v)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[8]) tuple(j, n)
}
ENTRY e {
  x = f32[8] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[8]) tuple(z, x)
  ROOT c = (s32[], f32[8]) call(init), to_apply=body
})";

TEST(FramePlanTest, NestedComputationsAliasTuplesAndPackTheirOwnValues) {
  auto module = ParseHloModule(kBody);
  ASSERT_TRUE(module.ok()) << module.status().message();
  const HloComputation* body = (*module)->GetComputationWithName("body");
  auto plan = FramePlan::ForNested(*body, 128);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const HloInstruction* s = body->parameter_instruction(0);
  // The parameter's two leaves are slots the caller fills.
  ASSERT_EQ(plan->parameter_slots().size(), 2u);
  for (int64_t slot : plan->parameter_slots()) EXPECT_EQ(plan->slot_offsets()[slot], -1);
  // get-tuple-element and bitcast name their source's slot; the root tuple its operands'.
  EXPECT_EQ(plan->Slot(body->GetInstructionWithName("v")), plan->Slot(s, {1}));
  EXPECT_EQ(plan->Slot(body->GetInstructionWithName("b")), plan->Slot(s, {1}));
  EXPECT_EQ(plan->root_slots()[1], plan->Slot(body->GetInstructionWithName("n")));
  // Values the computation defines get 64-byte aligned regions from the arena offset on.
  std::set<int64_t> offsets;
  for (const char* name : {"n", "one", "j"}) {
    const int64_t offset = plan->slot_offsets()[plan->Slot(body->GetInstructionWithName(name))];
    EXPECT_GE(offset, 128);
    EXPECT_EQ(offset % 64, 0);
    offsets.insert(offset);
  }
  EXPECT_EQ(offsets.size(), 3u);
  EXPECT_EQ(plan->arena_end(), 128 + 3 * 64);
}

TEST(FramePlanTest, EntrySlotsComeFromTheBufferAssignment) {
  auto module = ParseHloModule(kBody);
  ASSERT_TRUE(module.ok());
  auto assignment = AssignBuffers(**module);
  ASSERT_TRUE(assignment.ok()) << assignment.status().message();
  std::vector<int64_t> offsets;
  int64_t next = 1024;
  for (const BufferAllocation& a : assignment->allocations()) {
    offsets.push_back(next);
    next += AlignedSize(a.size);
  }
  auto plan = FramePlan::ForEntry(*(*module)->entry_computation(), *assignment, offsets);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const HloComputation* entry = (*module)->entry_computation();
  // The tuple's leaf 1 is parameter x's buffer.
  EXPECT_EQ(plan->slot_offsets()[plan->Slot(entry->GetInstructionWithName("init"), {1})],
            plan->slot_offsets()[plan->Slot(entry->GetInstructionWithName("x"))]);
  EXPECT_EQ(plan->parameter_slots().size(), 1u);
  EXPECT_EQ(plan->root_slots().size(), 2u);
  for (int64_t slot = 0; slot < plan->slot_count(); ++slot) EXPECT_GE(plan->slot_offsets()[slot], 1024);
}

}  // namespace
}  // namespace xlens::runtime

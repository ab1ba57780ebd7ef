#include "compiler/passes/early_result_schedule.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/passes/buffer_assignment.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::ParseModuleOrDie;

std::vector<std::string> Names(const std::vector<HloInstruction*>& order) {
  std::vector<std::string> names;
  for (const HloInstruction* instr : order) names.push_back(instr->name());
  return names;
}

// Every instruction once, each after its operands and control predecessors.
void ExpectValidOrder(const HloComputation& computation, const std::vector<HloInstruction*>& order) {
  EXPECT_EQ(order.size(), computation.MakeInstructionPostOrder().size());
  std::unordered_map<const HloInstruction*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_TRUE(position.emplace(order[i], i).second) << order[i]->name() << " twice";
  }
  for (const HloInstruction* instr : order) {
    for (const HloInstruction* operand : instr->operands()) {
      ASSERT_TRUE(position.count(operand)) << operand->name() << " missing";
      EXPECT_LT(position[operand], position[instr]) << operand->name() << " after its user " << instr->name();
    }
    for (const HloInstruction* predecessor : instr->control_predecessors()) {
      EXPECT_LT(position[predecessor], position[instr]) << predecessor->name() << " after " << instr->name();
    }
  }
}

// A training step's shape: the root's first result (u1) needs a long chain (h, g1, g2), the
// second (u2) only h and the parameter w2. The post-order runs u2 after the whole chain; the
// schedule runs it as soon as h is there.
constexpr char kStep[] = R"(HloModule step
ENTRY e {
  x = f32[64,32] parameter(0)
  w1 = f32[32,32] parameter(1)
  w2 = f32[64,32] parameter(2)
  h = f32[64,32] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  g1 = f32[64,32] multiply(h, h)
  g2 = f32[32,32] dot(x, g1), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  u1 = f32[32,32] subtract(w1, g2)
  u2 = f32[64,32] subtract(w2, h)
  ROOT r = (f32[32,32], f32[64,32]) tuple(u1, u2)
})";

TEST(EarlyResultScheduleTest, AResultRunsRightAfterItsLastOperand) {
  auto module = ParseModuleOrDie(kStep);
  const HloComputation& entry = *module->entry_computation();
  const std::vector<std::string> post_order = Names(entry.MakeInstructionPostOrder());
  const std::vector<HloInstruction*> order = EarlyResultSchedule(entry);
  ExpectValidOrder(entry, order);
  const std::vector<std::string> names = Names(order);
  auto at = [](const std::vector<std::string>& v, const std::string& name) {
    return std::find(v.begin(), v.end(), name) - v.begin();
  };
  // The walk from the root reaches u2 after u1's chain; the schedule, right after h (and w2).
  ASSERT_GT(at(post_order, "u2"), at(post_order, "g2"));
  EXPECT_EQ(at(names, "u2"), std::max(at(names, "h"), at(names, "w2")) + 1);
  EXPECT_LT(at(names, "u2"), at(names, "g1"));
  EXPECT_EQ(names.back(), "r");
  // The others keep their post-order.
  std::vector<std::string> rest = names, rest_post = post_order;
  rest.erase(rest.begin() + at(rest, "u2"));
  rest_post.erase(rest_post.begin() + at(rest_post, "u2"));
  EXPECT_EQ(rest, rest_post);
}

TEST(EarlyResultScheduleTest, AValueOtherInstructionsReadKeepsItsPlace) {
  // h is a result and an operand of u1: not a result alone, so the walk places it.
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  h = f32[8] add(a, b)
  m = f32[8] multiply(h, h)
  u1 = f32[8] subtract(m, h)
  ROOT r = (f32[8], f32[8]) tuple(u1, h)
})");
  const HloComputation& entry = *module->entry_computation();
  const std::vector<HloInstruction*> order = EarlyResultSchedule(entry);
  ExpectValidOrder(entry, order);
  EXPECT_EQ(Names(order), Names(entry.MakeInstructionPostOrder()));
}

TEST(EarlyResultScheduleTest, ANonTupleRootKeepsThePostOrder) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  b = f32[8] add(a, a)
  ROOT c = f32[8] multiply(b, a)
})");
  const HloComputation& entry = *module->entry_computation();
  EXPECT_EQ(Names(EarlyResultSchedule(entry)), Names(entry.MakeInstructionPostOrder()));
}

TEST(EarlyResultScheduleTest, BufferAssignmentRunsTheEntryInThisOrder) {
  auto module = ParseModuleOrDie(kStep);
  auto assignment = AssignBuffers(*module, {});
  ASSERT_TRUE(assignment.ok()) << assignment.status().message();
  std::vector<std::string> scheduled;
  for (const HloInstruction* instr : assignment->schedule()) scheduled.push_back(instr->name());
  EXPECT_EQ(scheduled, Names(EarlyResultSchedule(*module->entry_computation())));
}

}  // namespace
}  // namespace xlens

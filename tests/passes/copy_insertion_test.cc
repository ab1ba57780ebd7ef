#include "compiler/passes/copy_insertion.h"

#include <gtest/gtest.h>

#include "corpus_pass_check.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CloneModule;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;
using xlens::testing::SameResults;

int64_t CountCopies(const HloComputation& comp) {
  int64_t n = 0;
  for (const HloInstruction* i : comp.instructions()) n += i->opcode() == HloOpcode::kCopy;
  return n;
}

// Runs the pass with the verifier and the evaluator as oracle; a second run must change nothing.
bool RunCopies(HloModule& module) {
  auto before = CloneModule(module);
  CopyInsertion pass;
  auto changed = RunPassChecked(pass, module);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  if (!changed.ok()) return false;
  EXPECT_TRUE(SameResults(*before, module));
  auto again = RunPassChecked(pass, module);
  EXPECT_TRUE(again.ok() && !*again) << "a second run changed the module:\n" << module.ToString();
  return *changed;
}

TEST(CopyInsertionTest, EntryOutputsNeverAliasParametersConstantsOrEachOther) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  a = f32[4] add(p, c)
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(p, c, a, a)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(RunCopies(*module));
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_EQ(root->operand(0)->opcode(), HloOpcode::kCopy);
  EXPECT_EQ(root->operand(1)->opcode(), HloOpcode::kCopy);
  EXPECT_EQ(root->operand(2)->name(), "a");
  EXPECT_EQ(root->operand(3)->opcode(), HloOpcode::kCopy);
  EXPECT_EQ(CountCopies(*module->entry_computation()), 3);
}

TEST(CopyInsertionTest, ComputedOutputNeedsNothing) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_FALSE(RunCopies(*module));
}

TEST(CopyInsertionTest, BareParameterRootIsCopied) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  ROOT p = f32[4] parameter(0)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(RunCopies(*module));
  EXPECT_EQ(module->entry_computation()->root_instruction()->opcode(), HloOpcode::kCopy);
}

TEST(CopyInsertionTest, InputOutputAliasLetsTheOutputBeTheParameter) {
  auto module = ParseModuleOrDie(R"(HloModule m, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  ROOT t = (f32[4], f32[4]) tuple(p0, p1)
})");
  ASSERT_NE(module, nullptr);
  auto aliases = ParseInputOutputAliases(*module);
  ASSERT_TRUE(aliases.ok());
  ASSERT_EQ(aliases->size(), 1u);
  EXPECT_EQ((*aliases)[0].output_index, (std::vector<int64_t>{0}));
  EXPECT_EQ((*aliases)[0].parameter, 0);
  EXPECT_TRUE(RunCopies(*module));
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_EQ(root->operand(0)->name(), "p0");
  EXPECT_EQ(root->operand(1)->opcode(), HloOpcode::kCopy);
}

constexpr const char* kCountingLoop = R"(HloModule m
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[4] get-tuple-element(s), index=1
  i1 = s32[] add(i, s32[] constant(1))
  v1 = f32[4] multiply(v, v)
  ROOT t = (s32[], f32[4]) tuple(i1, v1)
}
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(3)), direction=LT
}
ENTRY e {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, n)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
})";

TEST(CopyInsertionTest, WhileInitConstantIsCopiedExclusiveValueIsNot) {
  auto module = ParseModuleOrDie(kCountingLoop);
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(RunCopies(*module));
  HloComputation* entry = module->entry_computation();
  const HloInstruction* init = entry->GetInstructionWithName("init");
  EXPECT_EQ(init->operand(0)->opcode(), HloOpcode::kCopy);  // the constant
  EXPECT_EQ(init->operand(1)->name(), "n");                  // only the loop uses it
  // Both state elements are updated in place: no copy and no ordering needed in the body.
  HloComputation* body = module->GetComputationWithName("body");
  EXPECT_EQ(CountCopies(*body), 0);
  for (const HloInstruction* instr : body->instructions()) {
    EXPECT_TRUE(instr->control_predecessors().empty()) << instr->name();
  }
}

TEST(CopyInsertionTest, WhileInitValueUsedAfterTheLoopIsCopied) {
  auto module = ParseModuleOrDie(R"(HloModule m
body {
  s = (f32[4]) parameter(0)
  v = f32[4] get-tuple-element(s), index=0
  ROOT t = (f32[4]) tuple(f32[4] negate(v))
}
cond {
  s = (f32[4]) parameter(0)
  ROOT f = pred[] constant(false)
}
ENTRY e {
  p = f32[4] parameter(0)
  n = f32[4] exponential(p)
  init = (f32[4]) tuple(n)
  w = (f32[4]) while(init), condition=cond, body=body
  out = f32[4] get-tuple-element(w), index=0
  ROOT r = f32[4] add(out, n)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(RunCopies(*module));
  const HloInstruction* init = module->entry_computation()->GetInstructionWithName("init");
  ASSERT_EQ(init->operand(0)->opcode(), HloOpcode::kCopy);
  EXPECT_EQ(init->operand(0)->operand(0)->name(), "n");
}

TEST(CopyInsertionTest, SwappedLoopStateGoesThroughScratchCopies) {
  auto module = ParseModuleOrDie(R"(HloModule m
body {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[4] get-tuple-element(s), index=1
  b = f32[4] get-tuple-element(s), index=2
  i1 = s32[] add(i, s32[] constant(1))
  ROOT t = (s32[], f32[4], f32[4]) tuple(i1, b, a)
}
cond {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(3)), direction=LT
}
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  a0 = f32[4] negate(p)
  b0 = f32[4] negate(q)
  init = (s32[], f32[4], f32[4]) tuple(s32[] constant(0), a0, b0)
  w = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body
  x = f32[4] get-tuple-element(w), index=1
  y = f32[4] get-tuple-element(w), index=2
  ROOT r = f32[4] subtract(x, y)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(RunCopies(*module));
  HloComputation* body = module->GetComputationWithName("body");
  EXPECT_EQ(CountCopies(*body), 4);
  const HloInstruction* root = body->root_instruction();
  for (int64_t slot : {1, 2}) {
    const HloInstruction* outer = root->operand(slot);
    ASSERT_EQ(outer->opcode(), HloOpcode::kCopy);
    ASSERT_EQ(outer->operand(0)->opcode(), HloOpcode::kCopy);
    // The write into the slot waits for the scratch copy that reads the slot's old value.
    EXPECT_FALSE(outer->control_predecessors().empty()) << slot;
  }
}

TEST(CopyInsertionTest, LateReaderOfTheOldStateForcesACopy) {
  auto module = ParseModuleOrDie(R"(HloModule m
body {
  s = (f32[4], f32[4]) parameter(0)
  v = f32[4] get-tuple-element(s), index=0
  u = f32[4] get-tuple-element(s), index=1
  v1 = f32[4] exponential(v)
  late = f32[4] add(v1, v)
  ROOT t = (f32[4], f32[4]) tuple(v1, late)
}
cond {
  s = (f32[4], f32[4]) parameter(0)
  ROOT f = pred[] constant(false)
}
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  b = f32[4] exponential(p)
  init = (f32[4], f32[4]) tuple(a, b)
  w = (f32[4], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
})");
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(RunCopies(*module));
  HloComputation* body = module->GetComputationWithName("body");
  const HloInstruction* root = body->root_instruction();
  // `late` reads slot 0 after v1 is computed, so v1 goes to scratch and a copy writes slot 0
  // after `late`.
  const HloInstruction* slot0 = root->operand(0);
  ASSERT_EQ(slot0->opcode(), HloOpcode::kCopy);
  EXPECT_EQ(slot0->operand(0)->name(), "v1");
  const auto& preds = slot0->control_predecessors();
  EXPECT_NE(std::find_if(preds.begin(), preds.end(),
                         [](const HloInstruction* p) { return p->name() == "late"; }),
            preds.end());
  EXPECT_EQ(root->operand(1)->name(), "late");  // nothing reads slot 1
}

// A loop writing one row of a buffer per step (a list's SetItem): the dynamic-update-slice of
// the state slot updates it in place, no copy of the buffer per iteration; one that also reads
// the slot as its update still gets its copy.
TEST(CopyInsertionTest, DynamicUpdateSliceOfTheStateSlotIsInPlace) {
  const char* text = R"(HloModule m
body {
  s = (s32[], f32[8,4], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  buf = f32[8,4] get-tuple-element(s), index=1
  other = f32[8,4] get-tuple-element(s), index=2
  z = s32[] constant(0)
  row = f32[1,4] dynamic-slice(buf, i, z), dynamic_slice_sizes={1,4}
  e = f32[1,4] exponential(row)
  upd = f32[8,4] dynamic-update-slice(buf, e, i, z)
  self = f32[1,4] dynamic-slice(other, i, z), dynamic_slice_sizes={1,4}
  upd2 = f32[8,4] dynamic-update-slice(other, self, i, z)
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT t = (s32[], f32[8,4], f32[8,4]) tuple(next, upd, upd2)
}
cond {
  s = (s32[], f32[8,4], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(8)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  p = f32[8,4] parameter(0)
  q = f32[8,4] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[8,4], f32[8,4]) tuple(zero, p, q)
  w = (s32[], f32[8,4], f32[8,4]) while(init), condition=cond, body=body
  ROOT r = f32[8,4] get-tuple-element(w), index=1
})";
  auto module = ParseModuleOrDie(text);
  ASSERT_NE(module, nullptr);
  RunCopies(*module);
  const HloInstruction* root = module->GetComputationWithName("body")->root_instruction();
  EXPECT_EQ(root->operand(1)->name(), "upd");
  // upd2's update is read from its own slot (through `self`, read before it): still in place.
  EXPECT_EQ(root->operand(2)->name(), "upd2");
  // The dynamic-slice reading the slot runs before the update.
  const auto& preds = root->operand(1)->control_predecessors();
  EXPECT_NE(std::find_if(preds.begin(), preds.end(),
                         [](const HloInstruction* p) { return p->name() == "row"; }),
            preds.end());
}

TEST(CopyInsertionTest, DynamicUpdateSliceWhoseUpdateIsTheSlotIsCopied) {
  auto module = ParseModuleOrDie(R"(HloModule m
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  buf = f32[4] get-tuple-element(s), index=1
  upd = f32[4] dynamic-update-slice(buf, buf, i)
  ROOT t = (s32[], f32[4]) tuple(i, upd)
}
cond {
  s = (s32[], f32[4]) parameter(0)
  ROOT f = pred[] constant(false)
}
ENTRY e {
  p = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, p)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
})");
  ASSERT_NE(module, nullptr);
  RunCopies(*module);
  const HloInstruction* root = module->GetComputationWithName("body")->root_instruction();
  EXPECT_EQ(root->operand(1)->opcode(), HloOpcode::kCopy);
}

TEST(CopyInsertionTest, ConditionalBranchReturningItsParameterIsCopied) {
  auto module = ParseModuleOrDie(R"(HloModule m
on_true {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
}
on_false {
  ROOT x = f32[4] parameter(0)
}
ENTRY e {
  c = pred[] parameter(0)
  p = f32[4] parameter(1)
  ROOT r = f32[4] conditional(c, p, p), true_computation=on_true, false_computation=on_false
})");
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(RunCopies(*module));
  EXPECT_EQ(module->GetComputationWithName("on_false")->root_instruction()->opcode(),
            HloOpcode::kCopy);
  EXPECT_EQ(module->GetComputationWithName("on_true")->root_instruction()->name(), "n");
}

TEST(CopyInsertionTest, CorpusKeepsItsResults) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus([] { return std::make_unique<CopyInsertion>(); },
                                           &summary)) {
    GTEST_SKIP() << "no corpus at " << XLENS_SHARED_DIR;
  }
  EXPECT_GE(summary.checked, 40);
  EXPECT_GT(summary.changed, 0);
}

}  // namespace
}  // namespace xlens

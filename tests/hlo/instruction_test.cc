#include "compiler/hlo/instruction.h"

#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

std::unique_ptr<HloModule> Parse(std::string_view text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

TEST(InstructionTest, CloneKeepsEveryAttributeAndTakesNewOperands) {
  auto module = Parse(R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[4,6] parameter(0)
  q = f32[4,6] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add, metadata={op_name="sum"}, backend_config="x"
})");
  ASSERT_NE(module, nullptr);
  HloComputation* entry = module->entry_computation();
  HloInstruction* reduce = entry->root_instruction();
  HloInstruction* q = entry->parameter_instruction(1);
  auto clone = reduce->CloneWithNewOperands(reduce->shape(), {q, reduce->operand(1)});
  EXPECT_EQ(clone->opcode(), HloOpcode::kReduce);
  EXPECT_EQ(clone->operand(0), q);
  EXPECT_EQ(clone->dimensions(), std::vector<int64_t>{1});
  EXPECT_EQ(clone->to_apply(), reduce->to_apply());
  EXPECT_EQ(clone->metadata.op_name, "sum");
  EXPECT_EQ(clone->AttributesToString(), reduce->AttributesToString());
  EXPECT_FALSE(clone->Identical(*reduce)) << "different operands";
  HloInstruction* added = entry->AddInstruction(std::move(clone));
  EXPECT_EQ(added->name(), "r.1") << "a clone gets a fresh unique name";
  EXPECT_TRUE(std::find(q->users().begin(), q->users().end(), added) != q->users().end());
}

TEST(InstructionTest, IdenticalComparesWhatCseMayMerge) {
  auto module = Parse(R"(HloModule m
ENTRY e {
  p = f32[4,6] parameter(0)
  t0 = f32[6,4] transpose(p), dimensions={1,0}, metadata={op_name="a"}
  t1 = f32[6,4] transpose(p), dimensions={1,0}, metadata={op_name="b"}
  c0 = f32[] constant(1)
  c1 = f32[] constant(1)
  c2 = f32[] constant(2)
  ROOT t = (f32[6,4], f32[6,4], f32[], f32[], f32[]) tuple(t0, t1, c0, c1, c2)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_TRUE(root->operand(0)->Identical(*root->operand(1))) << "metadata does not matter";
  EXPECT_TRUE(root->operand(2)->Identical(*root->operand(3)));
  EXPECT_FALSE(root->operand(2)->Identical(*root->operand(4))) << "different literals";
}

}  // namespace
}  // namespace xlens

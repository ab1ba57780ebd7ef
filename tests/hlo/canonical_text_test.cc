#include "compiler/hlo/canonical_text.h"

#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

// Five fusions over the same operands: b is a with every name changed and its instructions
// added in another order; c has another constant; d another layout; e its add's operands swapped.
constexpr char kModule[] = R"(HloModule m
add_a { x = f32[] parameter(0) y = f32[] parameter(1) ROOT s = f32[] add(x, y) }
add_b { u = f32[] parameter(0) v = f32[] parameter(1) ROOT w = f32[] add(u, v) }
fa {
  p0 = f32[8,16]{1,0} parameter(0)
  p1 = f32[8]{0} parameter(1)
  two = f32[] constant(2)
  b2 = f32[8,16]{1,0} broadcast(two), dimensions={}
  m = f32[8,16]{1,0} multiply(p0, b2)
  b1 = f32[8,16]{1,0} broadcast(p1), dimensions={0}
  s = f32[8,16]{1,0} subtract(m, b1)
  zero = f32[] constant(0)
  ROOT r = f32[8]{0} reduce(s, zero), dimensions={1}, to_apply=add_a
}
fb {
  q1 = f32[8]{0} parameter(1)
  q0 = f32[8,16]{1,0} parameter(0)
  bb1 = f32[8,16]{1,0} broadcast(q1), dimensions={0}
  z = f32[] constant(0)
  c2 = f32[] constant(2)
  bb2 = f32[8,16]{1,0} broadcast(c2), dimensions={}
  mm = f32[8,16]{1,0} multiply(q0, bb2)
  ss = f32[8,16]{1,0} subtract(mm, bb1)
  ROOT rr = f32[8]{0} reduce(ss, z), dimensions={1}, to_apply=add_b
}
fc {
  p0 = f32[8,16]{1,0} parameter(0)
  p1 = f32[8]{0} parameter(1)
  two = f32[] constant(2.0000002)
  b2 = f32[8,16]{1,0} broadcast(two), dimensions={}
  m = f32[8,16]{1,0} multiply(p0, b2)
  b1 = f32[8,16]{1,0} broadcast(p1), dimensions={0}
  s = f32[8,16]{1,0} subtract(m, b1)
  zero = f32[] constant(0)
  ROOT r = f32[8]{0} reduce(s, zero), dimensions={1}, to_apply=add_a
}
fd {
  p0 = f32[8,16]{1,0} parameter(0)
  p1 = f32[8]{0} parameter(1)
  two = f32[] constant(2)
  b2 = f32[8,16]{0,1} broadcast(two), dimensions={}
  m = f32[8,16]{0,1} multiply(p0, b2)
  b1 = f32[8,16]{1,0} broadcast(p1), dimensions={0}
  s = f32[8,16]{1,0} subtract(m, b1)
  zero = f32[] constant(0)
  ROOT r = f32[8]{0} reduce(s, zero), dimensions={1}, to_apply=add_a
}
fe {
  p0 = f32[8,16]{1,0} parameter(0)
  p1 = f32[8]{0} parameter(1)
  two = f32[] constant(2)
  b2 = f32[8,16]{1,0} broadcast(two), dimensions={}
  m = f32[8,16]{1,0} multiply(p0, b2)
  b1 = f32[8,16]{1,0} broadcast(p1), dimensions={0}
  s = f32[8,16]{1,0} subtract(b1, m)
  zero = f32[] constant(0)
  ROOT r = f32[8]{0} reduce(s, zero), dimensions={1}, to_apply=add_a
}
ENTRY e {
  a = f32[8,16]{1,0} parameter(0)
  v = f32[8]{0} parameter(1)
  fa.1 = f32[8]{0} fusion(a, v), kind=kInput, calls=fa, metadata={op_name="one"}
  fb.1 = f32[8]{0} fusion(a, v), kind=kInput, calls=fb, metadata={op_name="two"}
  fc.1 = f32[8]{0} fusion(a, v), kind=kInput, calls=fc
  fd.1 = f32[8]{0} fusion(a, v), kind=kInput, calls=fd
  fe.1 = f32[8]{0} fusion(a, v), kind=kInput, calls=fe
  fl.1 = f32[8]{0} fusion(a, v), kind=kLoop, calls=fa
  ROOT t = (f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}) tuple(fa.1, fb.1, fc.1, fd.1, fe.1, fl.1)
})";

class CanonicalTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto module = ParseHloModule(kModule);
    ASSERT_TRUE(module.ok()) << module.status().message();
    module_ = std::move(module).value();
  }
  std::string Text(std::string_view name) {
    const HloInstruction* instruction = module_->entry_computation()->GetInstructionWithName(name);
    EXPECT_NE(instruction, nullptr) << name;
    if (instruction == nullptr) return "";
    std::optional<std::string> text = CanonicalInstructionText(*instruction);
    EXPECT_TRUE(text.has_value()) << name;
    return text.value_or("");
  }
  std::unique_ptr<HloModule> module_;
};

TEST_F(CanonicalTextTest, NamesMetadataAndInstructionOrderLeaveNoTrace) {
  const std::string a = Text("fa.1");
  EXPECT_EQ(a, Text("fb.1"));
  for (std::string_view name : {"fa", "fa.1", "p0", "add_a", "one", "two"}) {
    EXPECT_EQ(a.find(name), std::string::npos) << name << " in " << a;
  }
}

TEST_F(CanonicalTextTest, ConstantLayoutOperandOrderAndAttributesDistinguish) {
  const std::string a = Text("fa.1");
  EXPECT_NE(a, Text("fc.1")) << "a constant's value (2 and the next float up)";
  EXPECT_NE(a, Text("fd.1")) << "an intermediate's layout";
  EXPECT_NE(a, Text("fe.1")) << "the order of a subtract's operands";
  EXPECT_NE(a, Text("fl.1")) << "the fusion kind";
}

TEST(CanonicalText, OperandShapesAndSignedZerosDistinguish) {
  auto module = ParseHloModule(R"(HloModule m
ENTRY e {
  a = f32[4,8]{1,0} parameter(0)
  b = f32[4,8]{0,1} parameter(1)
  na = f32[4,8]{1,0} negate(a)
  nb = f32[4,8]{1,0} negate(b)
  z = f32[] constant(0)
  nz = f32[] constant(-0)
  ROOT t = (f32[4,8]{1,0}, f32[4,8]{1,0}, f32[], f32[]) tuple(na, nb, z, nz)
})");
  ASSERT_TRUE(module.ok()) << module.status().message();
  const HloComputation* entry = (*module)->entry_computation();
  auto text = [&](std::string_view name) {
    return CanonicalInstructionText(*entry->GetInstructionWithName(name)).value_or("");
  };
  EXPECT_NE(text("na"), text("nb")) << "an operand's layout";
  EXPECT_NE(text("z"), text("nz")) << "0 and -0";
}

TEST(CanonicalText, ADeadInstructionDistinguishes) {
  auto module = ParseHloModule(R"(HloModule m
f {
  p = f32[8]{0} parameter(0)
  ROOT n = f32[8]{0} negate(p)
}
g {
  p = f32[8]{0} parameter(0)
  dead = f32[8]{0} exponential(p)
  ROOT n = f32[8]{0} negate(p)
}
ENTRY e {
  a = f32[8]{0} parameter(0)
  x = f32[8]{0} fusion(a), kind=kLoop, calls=f
  y = f32[8]{0} fusion(a), kind=kLoop, calls=g
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(x, y)
})");
  ASSERT_TRUE(module.ok()) << module.status().message();
  const HloComputation* entry = (*module)->entry_computation();
  auto text = [&](std::string_view name) {
    return CanonicalInstructionText(*entry->GetInstructionWithName(name)).value_or("");
  };
  EXPECT_NE(text("x"), text("y")) << "the emitters see a dead instruction among the users";
  EXPECT_NE(text("y").find("exponential"), std::string::npos);
}

TEST(CanonicalText, ElidedConstantHasNone) {
  auto module = ParseHloModule(R"(HloModule m
ENTRY e {
  ROOT c = f32[4]{0} constant({...})
})");
  ASSERT_TRUE(module.ok()) << module.status().message();
  EXPECT_FALSE(CanonicalInstructionText(*(*module)->entry_computation()->root_instruction()));
}

}  // namespace
}  // namespace xlens

#include "compiler/passes/algebraic_simplifier.h"

#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "corpus_pass_check.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CloneModule;
using xlens::testing::CountOpcode;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;
using xlens::testing::SameResults;

// Runs the simplifier on `text`; checks the result computes the same and that a second run finds
// nothing left to do. `expect_change` is what the first run must report.
std::unique_ptr<HloModule> Simplify(std::string_view text, bool expect_change = true) {
  AlgebraicSimplifier pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change);
}

const HloInstruction* Root(const HloModule& module) {
  return module.entry_computation()->root_instruction();
}

TEST(AlgebraicSimplifierTest, IntegerIdentitiesFold) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  p = s32[4] parameter(0)
  zero = s32[] constant(0)
  zeros = s32[4] broadcast(zero), dimensions={}
  one = s32[4] constant({1, 1, 1, 1})
  a = s32[4] add(zeros, p)
  b = s32[4] multiply(a, one)
  c = s32[4] subtract(b, zeros)
  d = s32[4] divide(c, one)
  ROOT n = s32[4] negate(s32[4] negate(d))
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Root(*module)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(module->entry_computation()->instruction_count(), 1);
}

TEST(AlgebraicSimplifierTest, FloatZerosFoldOnlyWhereExact) {
  // x + 0.0 turns -0.0 into +0.0 and x * 0 is NaN for inf: both stay. x + -0.0, x - 0.0 and
  // x * 1 go.
  auto module = Simplify(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  pz = f32[] constant(0)
  nz = f32[] constant(-0)
  one = f32[] constant(1)
  pzs = f32[4] broadcast(pz), dimensions={}
  nzs = f32[4] broadcast(nz), dimensions={}
  ones = f32[4] broadcast(one), dimensions={}
  keep_add = f32[4] add(p, pzs)
  keep_mul = f32[4] multiply(p, pzs)
  gone_add = f32[4] add(nzs, p)
  gone_sub = f32[4] subtract(p, pzs)
  gone_mul = f32[4] multiply(ones, p)
  ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(keep_add, keep_mul, gone_add, gone_sub, gone_mul)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = Root(*module);
  EXPECT_EQ(root->operand(0)->opcode(), HloOpcode::kAdd);
  EXPECT_EQ(root->operand(1)->opcode(), HloOpcode::kMultiply);
  for (int i = 2; i < 5; ++i) EXPECT_EQ(root->operand(i)->opcode(), HloOpcode::kParameter) << i;
}

TEST(AlgebraicSimplifierTest, IntegerTimesZeroIsZero) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  p = u8[3] parameter(0)
  z = u8[3] constant({0, 0, 0})
  ROOT r = u8[3] multiply(p, z)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Root(*module)->opcode(), HloOpcode::kConstant);
}

TEST(AlgebraicSimplifierTest, ReshapeTransposeBroadcastChainsCollapse) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  p = f32[2,3,4] parameter(0)
  r1 = f32[6,4] reshape(p)
  r2 = f32[24] reshape(r1)
  t1 = f32[3,4,2] transpose(p), dimensions={1,2,0}
  t2 = f32[4,2,3] transpose(t1), dimensions={1,2,0}
  t3 = f32[2,3,4] transpose(t1), dimensions={2,0,1}
  s = f32[] parameter(1)
  b1 = f32[5] broadcast(s), dimensions={}
  b2 = f32[5,6] broadcast(b1), dimensions={0}
  q = f32[3] parameter(2)
  b3 = f32[3,2] broadcast(q), dimensions={0}
  b4 = f32[4,3,2] broadcast(b3), dimensions={1,2}
  ROOT t = (f32[24], f32[4,2,3], f32[2,3,4], f32[5,6], f32[4,3,2]) tuple(r2, t2, t3, b2, b4)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = Root(*module);
  EXPECT_EQ(root->operand(0)->opcode(), HloOpcode::kReshape);
  EXPECT_EQ(root->operand(0)->operand(0)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(root->operand(1)->opcode(), HloOpcode::kTranspose);
  EXPECT_EQ(root->operand(1)->dimensions(), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(root->operand(1)->operand(0)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(root->operand(2)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(root->operand(3)->opcode(), HloOpcode::kBroadcast);
  EXPECT_EQ(root->operand(3)->operand(0)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(root->operand(4)->dimensions(), (std::vector<int64_t>{1}));
  EXPECT_EQ(root->operand(4)->operand(0)->opcode(), HloOpcode::kParameter);
}

TEST(AlgebraicSimplifierTest, ConvertChainsFoldOnlyWhenTheInnerConvertIsLossless) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  same = f32[4] convert(p)
  wide = f64[4] convert(same)
  back = f32[4] convert(wide)
  narrow = f16[4] convert(p)
  keep = f32[4] convert(narrow)
  i = s8[4] parameter(1)
  i32 = s32[4] convert(i)
  f = f32[4] convert(i32)
  ROOT t = (f32[4], f32[4], f32[4]) tuple(back, keep, f)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = Root(*module);
  EXPECT_EQ(root->operand(0)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(root->operand(1)->opcode(), HloOpcode::kConvert);
  EXPECT_EQ(root->operand(1)->operand(0)->opcode(), HloOpcode::kConvert);
  EXPECT_EQ(root->operand(2)->opcode(), HloOpcode::kConvert);
  EXPECT_EQ(root->operand(2)->operand(0)->opcode(), HloOpcode::kParameter);
}

TEST(AlgebraicSimplifierTest, NoOpDataMovementGoes) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  z = f32[] constant(0)
  s = f32[2,3]{1,0} slice(p), slice={[0:2], [0:3]}
  pd = f32[2,3]{1,0} pad(s, z), padding=0_0x0_0
  c = f32[2,3]{1,0} concatenate(pd), dimensions={0}
  cp = f32[2,3]{1,0} copy(c)
  r = f32[2,3]{1,0} reshape(cp)
  t = f32[2,3]{1,0} transpose(r), dimensions={0,1}
  b = f32[2,3]{1,0} broadcast(t), dimensions={0,1}
  relayout = f32[2,3]{0,1} copy(b)
  ROOT out = (f32[2,3]{1,0}, f32[2,3]{0,1}) tuple(b, relayout)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = Root(*module);
  EXPECT_EQ(root->operand(0)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(root->operand(1)->opcode(), HloOpcode::kCopy);
  EXPECT_EQ(module->entry_computation()->instruction_count(), 3);
}

TEST(AlgebraicSimplifierTest, ReduceOverUnitDimensionsKeepsTheInitValue) {
  auto module = Simplify(R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
max { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] maximum(b, a) }
ENTRY e {
  p = f32[4,1,3] parameter(0)
  q = s32[1,5] parameter(1)
  two = f32[] constant(2)
  lowest = s32[] constant(-2147483648)
  with_init = f32[4,3] reduce(p, two), dimensions={1}, to_apply=add
  identity = s32[5] reduce(q, lowest), dimensions={0}, to_apply=max
  ROOT t = (f32[4,3], s32[5]) tuple(with_init, identity)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = Root(*module);
  EXPECT_EQ(root->operand(0)->opcode(), HloOpcode::kAdd);
  EXPECT_EQ(root->operand(1)->opcode(), HloOpcode::kReshape);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kReduce), 0);
}

TEST(AlgebraicSimplifierTest, ReduceOfNothingIsTheInitValue) {
  auto module = Simplify(R"(HloModule m
mul { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] multiply(a, b) }
ENTRY e {
  p = f32[3,0] parameter(0)
  init = f32[] parameter(1)
  ROOT r = f32[3] reduce(p, init), dimensions={1}, to_apply=mul
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Root(*module)->opcode(), HloOpcode::kBroadcast);
}

TEST(AlgebraicSimplifierTest, ReduceOverLargeDimensionsStays) {
  Simplify(R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[4,2] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add
})", /*expect_change=*/false);
}

TEST(AlgebraicSimplifierTest, DotWithUnitContractionBecomesMultiply) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  a = f32[2,3,1] parameter(0)
  b = f32[2,1,4] parameter(1)
  ROOT d = f32[2,3,4] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Root(*module)->opcode(), HloOpcode::kMultiply);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kDot), 0);
}

TEST(AlgebraicSimplifierTest, MixedTypeOuterProductConvertsFirst) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  a = s8[1,3] parameter(0)
  b = s8[1,2] parameter(1)
  ROOT d = s32[3,2] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Root(*module)->opcode(), HloOpcode::kMultiply);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kConvert), 2);
}

TEST(AlgebraicSimplifierTest, RealDotsAndAlgorithmDotsStay) {
  Simplify(R"(HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  c = f32[2,1] parameter(2)
  d = f32[1,4] parameter(3)
  real = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  rounded = f32[2,4] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}, algorithm=dot_bf16_bf16_f32
  ROOT t = (f32[2,4], f32[2,4]) tuple(real, rounded)
})", /*expect_change=*/false);
}

TEST(AlgebraicSimplifierTest, IntegerSelfCompareIsConstantFloatIsNot) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  p = s32[4] parameter(0)
  f = f32[4] parameter(1)
  eq = pred[4] compare(p, p), direction=GE
  lt = pred[4] compare(p, p), direction=LT
  nan_check = pred[4] compare(f, f), direction=EQ
  ROOT t = (pred[4], pred[4], pred[4]) tuple(eq, lt, nan_check)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = Root(*module);
  ASSERT_EQ(root->operand(0)->opcode(), HloOpcode::kBroadcast);
  EXPECT_EQ(root->operand(0)->operand(0)->literal().GetAsInt64(0), 1);
  ASSERT_EQ(root->operand(1)->opcode(), HloOpcode::kBroadcast);
  EXPECT_EQ(root->operand(1)->operand(0)->literal().GetAsInt64(0), 0);
  EXPECT_EQ(root->operand(2)->opcode(), HloOpcode::kCompare);
}

TEST(AlgebraicSimplifierTest, SelectWithKnownPredicateOrEqualBranches) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  p = pred[4] parameter(2)
  t = pred[] constant(true)
  ts = pred[4] broadcast(t), dimensions={}
  fs = pred[4] constant({0, 0, 0, 0})
  a = f32[4] select(ts, x, y)
  b = f32[4] select(fs, x, y)
  c = f32[4] select(p, y, y)
  d = f32[4] select(p, x, y)
  ROOT out = (f32[4], f32[4], f32[4], f32[4]) tuple(a, b, c, d)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = Root(*module);
  EXPECT_EQ(root->operand(0)->name(), "x");
  EXPECT_EQ(root->operand(1)->name(), "y");
  EXPECT_EQ(root->operand(2)->name(), "y");
  EXPECT_EQ(root->operand(3)->opcode(), HloOpcode::kSelect);
}

TEST(AlgebraicSimplifierTest, NewInstructionsKeepTheMetadataOfWhatTheyReplace) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  r1 = f32[6] reshape(p), metadata={op_type="Reshape" op_name="inner"}
  ROOT r2 = f32[3,2] reshape(r1), metadata={op_type="Reshape" op_name="outer"}
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(Root(*module)->opcode(), HloOpcode::kReshape);
  EXPECT_EQ(Root(*module)->operand(0)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(Root(*module)->metadata.op_name, "outer");
}

TEST(AlgebraicSimplifierTest, SimplifiesCalledComputationsButNotFusions) {
  auto module = Simplify(R"(HloModule m
body { a = s32[] parameter(0) z = s32[] constant(0) ROOT s = s32[] add(a, z) }
fused { a = s32[] parameter(0) z = s32[] constant(0) ROOT s = s32[] add(a, z) }
ENTRY e {
  p = s32[] parameter(0)
  c = s32[] call(p), to_apply=body
  ROOT f = s32[] fusion(c), kind=kLoop, calls=fused
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->GetComputationWithName("body")->root_instruction()->opcode(),
            HloOpcode::kParameter);
  EXPECT_EQ(module->GetComputationWithName("fused")->root_instruction()->opcode(), HloOpcode::kAdd);
}

// Evaluates `before` and `after` on `args`: the same bits in every output.
::testing::AssertionResult SameBits(const HloModule& before, const HloModule& after,
                                    const std::vector<Literal>& args) {
  auto expected = EvaluateModule(before, args);
  if (!expected.ok()) return ::testing::AssertionFailure() << "before: " << expected.status().message();
  auto actual = EvaluateModule(after, args);
  if (!actual.ok()) return ::testing::AssertionFailure() << "after: " << actual.status().message();
  if (!(*expected == *actual)) {
    return ::testing::AssertionFailure() << "before " << expected->ToStringWithoutShape() << ", after "
                                         << actual->ToStringWithoutShape();
  }
  return ::testing::AssertionSuccess();
}

// The gradient of jnp.maximum(x, 0) times g, as JAX writes it (ties split: x == 0 gets half).
constexpr char kReluGradient[] = R"(HloModule m
ENTRY e {
  x = f32[8] parameter(0)
  g = f32[8] parameter(1)
  zero = f32[] constant(0)
  zeros = f32[8] broadcast(zero), dimensions={}
  m = f32[8] maximum(x, zeros)
  one = f32[] constant(1)
  two = f32[] constant(2)
  ones = f32[8] broadcast(one), dimensions={}
  twos = f32[8] broadcast(two), dimensions={}
  x_is_max = pred[8] compare(x, m), direction=EQ
  zero_is_max = pred[8] compare(zeros, m), direction=EQ
  share = f32[8] select(x_is_max, ones, zeros)
  ties = f32[8] select(zero_is_max, twos, ones)
  d = f32[8] divide(share, ties)
  ROOT r = f32[8] multiply(g, d)
})";

TEST(AlgebraicSimplifierTest, DivideOfSelectsBetweenConstantsIsSelectsBetweenTheQuotients) {
  auto module = Simplify(kReluGradient);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kDivide), 0);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kSelect), 3) << "one on each predicate's quotients";
  // Bit for bit, at the tie and around it: +-0, NaN, infinities, denormals.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32,
                                          {0.0f, -0.0f, 1.5f, -2.0f, nan, inf, -inf, 1e-45f}));
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32,
                                          {3.0f, -3.0f, -0.0f, 5.0f, 1.0f, nan, 2.0f, 7.0f}));
  EXPECT_TRUE(SameBits(*ParseModuleOrDie(kReluGradient), *module, args));
}

TEST(AlgebraicSimplifierTest, DivideOfOneSelectByAConstantOrTheSamePredicateIsOneSelect) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  p = pred[4] compare(x, y), direction=LT
  c1 = f32[] constant(1)
  c3 = f32[] constant(3)
  c7 = f32[] constant(-7)
  b1 = f32[4] broadcast(c1), dimensions={}
  b3 = f32[4] broadcast(c3), dimensions={}
  b7 = f32[4] constant({-7, -7, -7, -7})
  s = f32[4] select(p, b1, b7)
  t = f32[4] select(p, b3, b1)
  over_constant = f32[4] divide(s, b3)
  constant_over = f32[4] divide(b7, t)
  same_predicate = f32[4] divide(s, t)
  ROOT r = (f32[4], f32[4], f32[4]) tuple(over_constant, constant_over, same_predicate)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = Root(*module);
  for (int i = 0; i < 3; ++i) {
    const HloInstruction* select = root->operand(i);
    ASSERT_EQ(select->opcode(), HloOpcode::kSelect) << i;
    EXPECT_EQ(select->operand(0)->name(), "p") << i;
    EXPECT_EQ(select->operand(1)->opcode(), HloOpcode::kBroadcast) << i;
    EXPECT_EQ(select->operand(2)->opcode(), HloOpcode::kBroadcast) << i;
  }
  // 1/3 rounded as f32 divides it; -7/3 and 1/-7 too.
  EXPECT_EQ(root->operand(0)->operand(1)->operand(0)->literal().GetAsDouble(0),
            static_cast<double>(1.0f / 3.0f));
  EXPECT_EQ(root->operand(2)->operand(2)->operand(0)->literal().GetAsDouble(0),
            static_cast<double>(-7.0f / 1.0f));
}

TEST(AlgebraicSimplifierTest, HalfPrecisionQuotientsRoundAsTheDivideDoes) {
  for (const char* type : {"bf16", "f16", "f64"}) {
    const std::string text = fmt::format(R"(HloModule m
ENTRY e {{
  x = {0}[6] parameter(0)
  zero = {0}[] constant(0)
  zeros = {0}[6] broadcast(zero), dimensions={{}}
  p = pred[6] compare(x, zeros), direction=GT
  q = pred[6] compare(x, zeros), direction=NE
  a = {0}[] constant(1)
  b = {0}[] constant(-5)
  c = {0}[] constant(3)
  d = {0}[] constant(0.7)
  as = {0}[6] broadcast(a), dimensions={{}}
  bs = {0}[6] broadcast(b), dimensions={{}}
  cs = {0}[6] broadcast(c), dimensions={{}}
  ds = {0}[6] broadcast(d), dimensions={{}}
  n = {0}[6] select(p, as, bs)
  m = {0}[6] select(q, cs, ds)
  ROOT r = {0}[6] divide(n, m)
}})", type);
    SCOPED_TRACE(type);
    auto module = Simplify(text);
    ASSERT_NE(module, nullptr);
    EXPECT_EQ(CountOpcode(*module, HloOpcode::kDivide), 0);
    auto before = ParseModuleOrDie(text);
    std::vector<Literal> args;
    args.push_back(Literal(before->entry_computation()->parameter_instruction(0)->shape()));
    const double xs[] = {2, -1, 0, -0.0, 0.5, -3};
    for (int i = 0; i < 6; ++i) args.back().SetFromDouble(i, xs[i]);
    EXPECT_TRUE(SameBits(*before, *module, args));
  }
}

TEST(AlgebraicSimplifierTest, OnOnePredicateOnlyTheQuotientsTakenCount) {
  // select(p, 0, 1) / select(p, 1, 0) is 0/1 or 1/0: the 0/0 it never takes keeps nothing.
  constexpr char kText[] = R"(HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[4] broadcast(zero), dimensions={}
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  p = pred[4] compare(x, zeros), direction=GT
  s = f32[4] select(p, zeros, ones)
  t = f32[4] select(p, ones, zeros)
  ROOT d = f32[4] divide(s, t)
})";
  auto module = Simplify(kText);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kDivide), 0);
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {1.0f, -1.0f, 0.0f, -0.0f}));
  EXPECT_TRUE(SameBits(*ParseModuleOrDie(kText), *module, args));
}

TEST(AlgebraicSimplifierTest, DivideIsKeptWhereAQuotientIsNaNOrAConstantVaries) {
  Simplify(R"(HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[2] broadcast(zero), dimensions={}
  one = f32[] constant(1)
  ones = f32[2] broadcast(one), dimensions={}
  p = pred[2] compare(x, zeros), direction=GT
  s = f32[2] select(p, zeros, ones)
  nan_quotient = f32[2] divide(s, s)
  mixed = f32[2] constant({1, 2})
  t = f32[2] select(p, mixed, ones)
  varying = f32[2] divide(t, s)
  ROOT r = (f32[2], f32[2]) tuple(nan_quotient, varying)
})", /*expect_change=*/false);
}

TEST(AlgebraicSimplifierTest, CorpusModulesComputeTheSame) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus(
          [] { return std::make_unique<AlgebraicSimplifier>(); }, &summary)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  EXPECT_GT(summary.checked, 30);
  std::string names;
  for (const std::string& n : summary.changed_names) names += " " + n;
  std::cout << "algebraic-simplifier changed " << summary.changed << " of " << summary.checked
            << " corpus modules:" << names << "\n";
}

}  // namespace
}  // namespace xlens

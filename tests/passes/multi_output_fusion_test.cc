#include "compiler/passes/multi_output_fusion.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/passes/horizontal_fusion.h"
#include "compiler/passes/instruction_fusion.h"
#include "fusion_test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using xlens::testing::CloneModule;
using xlens::testing::CountOpcode;
using xlens::testing::EntryFusions;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;
using xlens::testing::SameResults;

bool AnyOf(const HloComputation& computation, HloOpcode opcode) {
  for (const HloInstruction* i : computation.instructions()) {
    if (i->opcode() == opcode) return true;
  }
  return false;
}

std::string Explain(const std::vector<FusionDecision>& decisions) {
  std::string out;
  for (const FusionDecision& d : decisions) out += d.ToString() + "\n";
  return out;
}

TEST(MultiOutputFusionTest, TwoReductionsOfOneInputBecomeOneKernel) {
  auto module = ParseModuleOrDie(R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
max { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] maximum(a, b) }
ENTRY e {
  p = f32[16,32] parameter(0)
  zero = f32[] constant(0)
  sum = f32[16] reduce(p, zero), dimensions={1}, to_apply=add
  big = f32[16] reduce(p, zero), dimensions={1}, to_apply=max
  ROOT t = (f32[16], f32[16]) tuple(sum, big)
})");
  auto before = CloneModule(*module);
  EXPECT_EQ(CountKernels(*module), 2);
  MultiOutputFusion fusion;
  auto changed = RunPassChecked(fusion, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  ASSERT_EQ(EntryFusions(*module).size(), 1u);
  const HloInstruction* f = EntryFusions(*module)[0];
  EXPECT_EQ(f->fusion_kind, FusionKind::kInput);
  EXPECT_EQ(f->fused_computation()->root_instruction()->opcode(), HloOpcode::kTuple);
  EXPECT_EQ(f->operand_count(), 2);  // p read once (and the init value)
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kGetTupleElement), 2);
  EXPECT_EQ(CountKernels(*module), 1);
  EXPECT_THAT(Explain(fusion.decisions()), HasSubstr("(kInput): siblings reading p"));
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(MultiOutputFusionTest, ExpensiveProducerJoinsItsReductionAsAnOutput) {
  auto module = ParseModuleOrDie(R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[16,32] parameter(0)
  exp = f32[16,32] exponential(p)
  zero = f32[] constant(0)
  sum = f32[16] reduce(exp, zero), dimensions={1}, to_apply=add
  ROOT t = (f32[16], f32[16,32]) tuple(sum, exp)
})");
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kGpu);
  ASSERT_TRUE(RunPassChecked(fusion, *module).ok());
  EXPECT_EQ(CountKernels(*module), 2);
  MultiOutputFusion mof;
  auto changed = RunPassChecked(mof, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(CountKernels(*module), 1) << module->ToString();
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kExp), 0);
  EXPECT_THAT(Explain(mof.decisions()),
              HasSubstr("fused exp into fusion (kInput): its 1 other users read it as an output"));
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(MultiOutputFusionTest, RefusesAMergeThatWouldCreateACycle) {
  // `first` and `mixed` both read p, but mixed also waits for first (through an opaque
  // custom-call): one kernel holding both would wait for itself.
  auto module = ParseModuleOrDie(R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[16,32] parameter(0)
  zero = f32[] constant(0)
  first = f32[16] reduce(p, zero), dimensions={1}, to_apply=add
  first_b = f32[16,32] broadcast(first), dimensions={0}
  mid = f32[16,32] custom-call(first_b), custom_call_target="opaque"
  mixed = f32[16,32] add(p, mid)
  ROOT sum2 = f32[16] reduce(mixed, zero), dimensions={1}, to_apply=add
})");
  MultiOutputFusion mof;
  auto changed = RunPassChecked(mof, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_THAT(Explain(mof.decisions()),
              HasSubstr("refused mixed into first: merging would create a cycle: first_b lies "
                        "on a path from one to the other"));
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kFusion), 0) << module->ToString();
}

// A column sum of x, its per-column rsqrt (also a result, so neither is copied into a reader),
// and x scaled by it: the sum and the scaling both sweep x, and the rsqrt lies between them.
std::string ScaledByColumnStatistic(int rows) {
  return fmt::format(R"(HloModule m
add {{ a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }}
ENTRY e {{
  x = f32[{0},32] parameter(0)
  zero = f32[] constant(0)
  sum = f32[32] reduce(x, zero), dimensions={{0}}, to_apply=add
  r = f32[32] rsqrt(sum)
  rb = f32[{0},32] broadcast(r), dimensions={{1}}
  y = f32[{0},32] multiply(x, rb)
  ROOT t = (f32[32], f32[32], f32[{0},32]) tuple(sum, r, y)
}})",
                     rows);
}

TEST(MultiOutputFusionTest, SiblingsTakeInASmallKernelBetweenThem) {
  // 64 rows: the rsqrt's 32 elements are at most 1/16 of the 2048 the siblings sweep, so the
  // merged kernel computes it between its sweep and its loop, and x is read in one kernel.
  auto module = ParseModuleOrDie(ScaledByColumnStatistic(64));
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kCpu);
  ASSERT_TRUE(RunPassChecked(fusion, *module).ok());
  EXPECT_EQ(CountKernels(*module), 3) << module->ToString();
  MultiOutputFusion mof;
  auto changed = RunPassChecked(mof, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(CountKernels(*module), 1) << module->ToString();
  EXPECT_THAT(Explain(mof.decisions()), HasSubstr("siblings reading x, with r between them"));
  EXPECT_TRUE(SameResults(*before, *module));

  // 4 rows: the rsqrt is a quarter of the sweep's size; the kernels stay apart.
  auto small = ParseModuleOrDie(ScaledByColumnStatistic(4));
  ASSERT_TRUE(RunPassChecked(fusion, *small).ok());
  MultiOutputFusion apart;
  ASSERT_TRUE(RunPassChecked(apart, *small).ok());
  EXPECT_EQ(CountKernels(*small), 3) << small->ToString();
  EXPECT_THAT(Explain(apart.decisions()), HasSubstr("r lies on a path from one to the other"));
}

TEST(MultiOutputFusionTest, RefusesSiblingsWithDifferentIterationSpaces) {
  auto module = ParseModuleOrDie(R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[16,32] parameter(0)
  zero = f32[] constant(0)
  rows = f32[16] reduce(p, zero), dimensions={1}, to_apply=add
  cols = f32[32] reduce(p, zero), dimensions={0}, to_apply=add
  ROOT t = (f32[16], f32[32]) tuple(rows, cols)
})");
  MultiOutputFusion mof;
  auto changed = RunPassChecked(mof, *module);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_THAT(Explain(mof.decisions()), HasSubstr("reduce different dimensions"));
}

// Adam's update as JAX lowers it (f32[N] p, g, m, v): the new moments are results and the new
// parameter reads them.
std::string AdamModule(int n) {
  std::string text = R"(HloModule adam
ENTRY e {
  p = f32[N]{0} parameter(0)
  g = f32[N]{0} parameter(1)
  m = f32[N]{0} parameter(2)
  v = f32[N]{0} parameter(3)
  c9 = f32[] constant(0.9)
  b9 = f32[N]{0} broadcast(c9), dimensions={}
  m9 = f32[N]{0} multiply(m, b9)
  c1 = f32[] constant(0.1)
  b1 = f32[N]{0} broadcast(c1), dimensions={}
  g1 = f32[N]{0} multiply(g, b1)
  m_new = f32[N]{0} add(m9, g1)
  m_hat = f32[N]{0} divide(m_new, b1)
  c3 = f32[] constant(0.001)
  b3 = f32[N]{0} broadcast(c3), dimensions={}
  lr_m = f32[N]{0} multiply(m_hat, b3)
  c999 = f32[] constant(0.999)
  b999 = f32[N]{0} broadcast(c999), dimensions={}
  v9 = f32[N]{0} multiply(v, b999)
  g3 = f32[N]{0} multiply(g, b3)
  gg = f32[N]{0} multiply(g3, g)
  v_new = f32[N]{0} add(v9, gg)
  v_hat = f32[N]{0} divide(v_new, b3)
  root_v = f32[N]{0} sqrt(v_hat)
  eps = f32[] constant(1e-08)
  beps = f32[N]{0} broadcast(eps), dimensions={}
  den = f32[N]{0} add(root_v, beps)
  step = f32[N]{0} divide(lr_m, den)
  p_new = f32[N]{0} subtract(p, step)
  ROOT t = (f32[N]{0}, f32[N]{0}, f32[N]{0}) tuple(p_new, m_new, v_new)
})";
  for (size_t at = text.find("[N]"); at != std::string::npos; at = text.find("[N]", at)) {
    text.replace(at, 3, "[" + std::to_string(n) + "]");
  }
  return text;
}

TEST(MultiOutputFusionTest, AdamIsOneLoopKernelReadingEachInputOnce) {
  // Instruction fusion leaves the moments' kernel (siblings reading g) and the update that reads
  // them back; the update takes them in as outputs: one pass reads p, g, m, v and writes p, m, v.
  auto module = ParseModuleOrDie(AdamModule(1037));
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kCpu);
  ASSERT_TRUE(RunPassChecked(fusion, *module).ok());
  MultiOutputFusion mof;
  auto changed = RunPassChecked(mof, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  ASSERT_EQ(EntryFusions(*module).size(), 1u) << module->ToString();
  const HloInstruction* f = EntryFusions(*module)[0];
  EXPECT_EQ(f->fusion_kind, FusionKind::kLoop);
  EXPECT_EQ(f->operand_count(), 4) << module->ToString();  // p, g, m, v, each read once
  const HloInstruction* root = f->fused_computation()->root_instruction();
  ASSERT_EQ(root->opcode(), HloOpcode::kTuple);
  EXPECT_EQ(root->operand_count(), 3);
  EXPECT_EQ(CountKernels(*module), 1);
  EXPECT_THAT(Explain(mof.decisions()), HasSubstr("other users read it as an output"));
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(MultiOutputFusionTest, ALoopKernelThatTransposesAProducerDoesNotTakeIt) {
  // `e` (expensive, two readers) is read elementwise by `a` but transposed by `b`; `a` and `b`
  // are siblings reading `e`. Inside their kernel `e` would be computed again at the transposed
  // index, so it stays a kernel of its own, which that one reads.
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  x = f32[33,33] parameter(0)
  y = f32[33,33] parameter(1)
  z = f32[33,33] parameter(2)
  e = f32[33,33] exponential(x)
  a = f32[33,33] add(e, y)
  t = f32[33,33] transpose(e), dimensions={1,0}
  b = f32[33,33] multiply(t, z)
  ROOT r = (f32[33,33], f32[33,33]) tuple(a, b)
})");
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kCpu);
  ASSERT_TRUE(RunPassChecked(fusion, *module).ok());
  MultiOutputFusion mof;
  auto changed = RunPassChecked(mof, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(CountKernels(*module), 2) << module->ToString();
  int64_t exps = CountOpcode(*module, HloOpcode::kExp);
  for (const HloInstruction* f : EntryFusions(*module)) {
    exps += AnyOf(*f->fused_computation(), HloOpcode::kExp);
    if (!AnyOf(*f->fused_computation(), HloOpcode::kTranspose)) continue;
    EXPECT_FALSE(AnyOf(*f->fused_computation(), HloOpcode::kExp)) << module->ToString();
  }
  EXPECT_EQ(exps, 1) << module->ToString();
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(HorizontalLoopFusionTest, IndependentSmallKernelsLaunchAsOne) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  q = f32[4,4] parameter(1)
  a = f32[8] negate(p)
  b = f32[4,4] exponential(q)
  c = f32[8] abs(a)
  ROOT t = (f32[8], f32[4,4]) tuple(c, b)
})");
  auto before = CloneModule(*module);
  HorizontalLoopFusion horizontal;
  auto changed = RunPassChecked(horizontal, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  // a and b are independent; c depends on a and stays apart.
  EXPECT_EQ(CountKernels(*module), 2) << module->ToString();
  EXPECT_THAT(Explain(horizontal.decisions()), HasSubstr("fused b into a (kLoop)"));
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(HorizontalLoopFusionTest, RespectsTheGroupLimitAndLeavesBigKernels) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  big = f32[1000000] parameter(1)
  a = f32[8] negate(p)
  b = f32[8] abs(p)
  c = f32[8] sine(p)
  d = f32[1000000] negate(big)
  ROOT t = (f32[8], f32[8], f32[8], f32[1000000]) tuple(a, b, c, d)
})");
  auto before = CloneModule(*module);
  HorizontalLoopFusion horizontal(HorizontalFusionOptions{.max_fused = 2});
  auto changed = RunPassChecked(horizontal, *module);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(CountKernels(*module), 3) << module->ToString();  // {a,b}, c, d
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kNegate), 1);     // d, too big to be small
  EXPECT_TRUE(SameResults(*before, *module));
}

// The whole fusion stage, as the pipelines run it, over the corpus.
TEST(FusionPipelineTest, CorpusKeepsResultsAndNeverAddsKernels) {
  const std::string dir = xlens::testing::CorpusDir();
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no HLO corpus at " << dir;
  int64_t totals[3] = {0, 0, 0};
  for (const std::string& name : xlens::testing::EvaluatorCorpusModules()) {
    std::ifstream in(dir + "/" + name + ".hlo");
    std::stringstream text;
    text << in.rdbuf();
    auto original = ParseModuleOrDie(text.str());
    ASSERT_NE(original, nullptr) << name;
    int64_t counts[3] = {CountKernels(*original), 0, 0};
    for (FusionBackend backend : {FusionBackend::kCpu, FusionBackend::kGpu}) {
      auto module = CloneModule(*original);
      InstructionFusion fusion(backend);
      MultiOutputFusion mof;
      HorizontalLoopFusion horizontal;
      std::vector<HloPass*> passes = {&fusion, &mof};
      if (backend == FusionBackend::kGpu) passes.push_back(&horizontal);
      for (HloPass* pass : passes) {
        const int64_t kernels = CountKernels(*module);
        auto changed = RunPassChecked(*pass, *module);
        ASSERT_TRUE(changed.ok()) << name << ": " << changed.status().message();
        EXPECT_LE(CountKernels(*module), kernels) << name << " after " << pass->name();
      }
      counts[backend == FusionBackend::kCpu ? 1 : 2] = CountKernels(*module);
      EXPECT_NE(ParseModuleOrDie(module->ToString()), nullptr) << name;
      auto same = SameResults(*original, *module);
      if (!same && std::string(same.message()).rfind("before:", 0) == 0) continue;
      EXPECT_TRUE(same) << name << "\n" << module->ToString();
    }
    for (int k = 0; k < 3; ++k) totals[k] += counts[k];
    std::printf("%-36s kernels %3lld -> cpu %3lld, gpu %3lld\n", name.c_str(),
                static_cast<long long>(counts[0]), static_cast<long long>(counts[1]),
                static_cast<long long>(counts[2]));
  }
  std::printf("%-36s kernels %3lld -> cpu %3lld, gpu %3lld\n", "TOTAL",
              static_cast<long long>(totals[0]), static_cast<long long>(totals[1]),
              static_cast<long long>(totals[2]));
}

}  // namespace
}  // namespace xlens

#include "compiler/passes/instruction_fusion.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

// Runs the pass checked and returns its decisions as explain lines.
std::vector<std::string> Fuse(InstructionFusion& fusion, HloModule& module) {
  auto changed = RunPassChecked(fusion, module);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  std::vector<std::string> lines;
  for (const FusionDecision& d : fusion.decisions()) lines.push_back(d.ToString());
  return lines;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

TEST(InstructionFusionTest, ReduceSumOfMultiplyAddIsOneInputFusion) {
  for (FusionBackend backend : {FusionBackend::kCpu, FusionBackend::kGpu}) {
    auto module = ParseModuleOrDie(xlens::testing::kReduceSumModule);
    auto before = CloneModule(*module);
    EXPECT_EQ(CountKernels(*module), 3);
    InstructionFusion fusion(backend);
    std::vector<std::string> lines = Fuse(fusion, *module);
    ASSERT_EQ(EntryFusions(*module).size(), 1u) << module->ToString();
    const HloInstruction* root = module->entry_computation()->root_instruction();
    ASSERT_EQ(root->opcode(), HloOpcode::kFusion);
    EXPECT_EQ(root->fusion_kind, FusionKind::kInput);
    EXPECT_EQ(root->name(), "fusion");
    EXPECT_EQ(root->fused_computation()->name(), "fused_computation");
    EXPECT_EQ(root->fused_computation()->root_instruction()->name(), "reduce.3");
    EXPECT_EQ(root->operand_count(), 3);
    EXPECT_EQ(root->fused_computation()->parameter_instruction(0)->name(), "param_0");
    // Every graph op inside is named in the kernel's metadata; each fused op keeps its own.
    EXPECT_EQ(root->metadata.op_name, "mul;add;Sum");
    EXPECT_EQ(root->metadata.op_type, "Sum");
    EXPECT_EQ(root->fused_computation()->GetInstructionWithName("multiply.1")->metadata.op_name,
              "mul");
    EXPECT_EQ(CountKernels(*module), 1);
    EXPECT_THAT(Joined(lines), HasSubstr("fused add.2 into reduce.3 (kInput)"));
    EXPECT_THAT(Joined(lines), HasSubstr("fused multiply.1 into fusion (kInput)"));
    EXPECT_TRUE(SameResults(*before, *module));
    // The fused computation is printed before its caller and the text parses back.
    std::string text = module->ToString();
    EXPECT_LT(text.find("%fused_computation"), text.find("ENTRY"));
    EXPECT_NE(ParseModuleOrDie(text), nullptr);
  }
}

// --explain-fusion says which line of the user's program each fused producer came from.
TEST(InstructionFusionTest, DecisionsNameTheProducersSourceLine) {
  auto module = ParseModuleOrDie(R"(HloModule m

FileNames
1 "train.py"

FunctionNames
1 "loss"

FileLocations
1 {file_name_id=1 function_name_id=1 line=15 end_line=15 column=11 end_column=20}
2 {file_name_id=1 function_name_id=1 line=16 end_line=16 column=4 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}

ENTRY e {
  p = f32[64]{0} parameter(0)
  e = f32[64]{0} exponential(p), metadata={op_name="jit(loss)/exp" stack_frame_id=1}
  ROOT n = f32[64]{0} negate(e), metadata={op_name="jit(loss)/neg" stack_frame_id=2}
})");
  InstructionFusion fusion(FusionBackend::kCpu);
  const std::string explained = Joined(Fuse(fusion, *module));
  EXPECT_THAT(explained, HasSubstr("fused e into n (kLoop)  at train.py:15:11 (loss)"));
}

TEST(InstructionFusionTest, SoftmaxIsAtMostTwoKernelsOnBothBackends) {
  for (FusionBackend backend : {FusionBackend::kCpu, FusionBackend::kGpu}) {
    auto module = ParseModuleOrDie(xlens::testing::SoftmaxModule(4096, 1000));
    EXPECT_EQ(CountKernels(*module), 7);
    InstructionFusion fusion(backend);
    std::vector<std::string> lines = Fuse(fusion, *module);
    EXPECT_LE(CountKernels(*module), 2) << module->ToString() << Joined(lines);
    // The exponential is refused while it has a second user outside the kernel, and joins once
    // the reduction that reads it is inside: its refusal is withdrawn, not left behind.
    EXPECT_THAT(Joined(lines), HasSubstr("fused exp into fusion"));
    EXPECT_THAT(Joined(lines), ::testing::Not(HasSubstr("refused exp")));
  }
  // The same module, small enough for the evaluator to compare quickly.
  auto module = ParseModuleOrDie(xlens::testing::SoftmaxModule(64, 100));
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kGpu);
  Fuse(fusion, *module);
  EXPECT_LE(CountKernels(*module), 2);
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(InstructionFusionTest, LayerNormIsAtMostTwoKernels) {
  for (FusionBackend backend : {FusionBackend::kCpu, FusionBackend::kGpu}) {
    auto module = ParseModuleOrDie(xlens::testing::LayerNormModule(4096, 1024));
    EXPECT_GE(CountKernels(*module), 15);
    InstructionFusion fusion(backend);
    std::vector<std::string> lines = Fuse(fusion, *module);
    EXPECT_LE(CountKernels(*module), 2) << module->ToString() << Joined(lines);
  }
  auto module = ParseModuleOrDie(xlens::testing::LayerNormModule(32, 64));
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kCpu);
  Fuse(fusion, *module);
  EXPECT_LE(CountKernels(*module), 2);
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(InstructionFusionTest, RefusesToDuplicateAnExpensiveProducer) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  exponential.2 = f32[8] exponential(p)
  neg = f32[8] negate(exponential.2)
  add.7 = f32[8] add(exponential.2, p)
  ROOT t = (f32[8], f32[8]) tuple(neg, add.7)
})");
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kCpu);
  std::vector<std::string> lines = Fuse(fusion, *module);
  EXPECT_THAT(Joined(lines),
              HasSubstr("refused exponential.2 into add.7: exponential is expensive and has 2 "
                        "users; duplicating it would compute it twice"));
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kExp), 1);
  EXPECT_TRUE(SameResults(*before, *module));
}

// Batch norm's statistics over N, H and W of f32[N,H,W,C] and the normalised output.
constexpr char kBatchNormStatistics[] = R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[3,5,7,12] parameter(0)
  zero = f32[] constant(0)
  sum = f32[12] reduce(x, zero), dimensions={0,1,2}, to_apply=add
  n = f32[] constant(105)
  nb = f32[12] broadcast(n), dimensions={}
  mean = f32[12] divide(sum, nb)
  mb = f32[3,5,7,12] broadcast(mean), dimensions={3}
  xc = f32[3,5,7,12] subtract(x, mb)
  sq = f32[3,5,7,12] multiply(xc, xc)
  ssq = f32[12] reduce(sq, zero), dimensions={0,1,2}, to_apply=add
  var = f32[12] divide(ssq, nb)
  inv = f32[12] rsqrt(var)
  ib = f32[3,5,7,12] broadcast(inv), dimensions={3}
  y = f32[3,5,7,12] multiply(xc, ib)
  ROOT t = (f32[3,5,7,12], f32[12], f32[12]) tuple(y, mean, var)
})";

TEST(InstructionFusionTest, BatchMeanEndsItsKernelAndTheCentredValueIsCopiedIntoItsReaders) {
  // The mean's divide stays with its column sum (a kernel of 12 outputs); x - mean is cheap and
  // copied into the sum of squares and the output, so no kernel writes the centred x.
  auto module = ParseModuleOrDie(kBatchNormStatistics);
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kCpu);
  std::vector<std::string> lines = Fuse(fusion, *module);
  int64_t batch_sized = 0;
  for (const HloInstruction* i : module->entry_computation()->instructions()) {
    if (CountsAsKernel(*i) && i->shape().IsArray() && i->shape().num_elements() == 3 * 5 * 7 * 12) {
      ++batch_sized;
    }
  }
  EXPECT_EQ(batch_sized, 1) << module->ToString();  // y alone
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kSubtract), 0) << module->ToString();
  const HloInstruction* mean = module->entry_computation()->root_instruction()->operand(1);
  ASSERT_EQ(mean->opcode(), HloOpcode::kFusion) << module->ToString();
  EXPECT_EQ(mean->fusion_kind, FusionKind::kInput);
  EXPECT_EQ(mean->fused_computation()->root_instruction()->opcode(), HloOpcode::kDivide);
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(InstructionFusionTest, DuplicatesACheapProducerIntoEachConsumer) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  q = f32[8] parameter(1)
  mul = f32[8] multiply(p, q)
  a = f32[8] exponential(mul)
  b = f32[8] log(mul)
  ROOT t = (f32[8], f32[8]) tuple(a, b)
})");
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kCpu);
  std::vector<std::string> lines = Fuse(fusion, *module);
  // Both consumers compute the multiply themselves; the original is dead and gone.
  EXPECT_EQ(EntryFusions(*module).size(), 2u) << module->ToString();
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kMultiply), 0);
  EXPECT_EQ(CountKernels(*module), 2);
  EXPECT_THAT(Joined(lines), HasSubstr("it stays for its 1 other user"));
  EXPECT_TRUE(SameResults(*before, *module));
}

constexpr char kDotBiasRelu[] = R"(HloModule m
ENTRY e {
  a = f32[16,32] parameter(0)
  b = f32[32,8] parameter(1)
  bias = f32[8] parameter(2)
  dot.3 = f32[16,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bias_b = f32[16,8] broadcast(bias), dimensions={1}
  add.4 = f32[16,8] add(dot.3, bias_b)
  zero = f32[] constant(0)
  zero_b = f32[16,8] broadcast(zero), dimensions={}
  ROOT relu = f32[16,8] maximum(add.4, zero_b)
})";

TEST(InstructionFusionTest, CpuNeverFusesADot) {
  auto module = ParseModuleOrDie(kDotBiasRelu);
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kCpu);
  std::vector<std::string> lines = Fuse(fusion, *module);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kDot), 1);
  for (const HloInstruction* f : EntryFusions(*module)) EXPECT_EQ(f->fusion_kind, FusionKind::kLoop);
  EXPECT_THAT(Joined(lines),
              HasSubstr("refused dot.3 into fusion: the CPU backend keeps dot as its own kernel"));
  EXPECT_EQ(CountKernels(*module), 2);
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(InstructionFusionTest, GpuFusesTheEpilogueIntoTheDotAsOutputFusion) {
  auto module = ParseModuleOrDie(kDotBiasRelu);
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kGpu);
  std::vector<std::string> lines = Fuse(fusion, *module);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  ASSERT_EQ(root->opcode(), HloOpcode::kFusion) << module->ToString();
  EXPECT_EQ(root->fusion_kind, FusionKind::kOutput);
  EXPECT_EQ(root->fused_computation()->root_instruction()->opcode(), HloOpcode::kMaximum);
  EXPECT_NE(root->fused_computation()->GetInstructionWithName("dot.3"), nullptr);
  EXPECT_EQ(CountKernels(*module), 1);
  EXPECT_THAT(Joined(lines), HasSubstr("(kOutput): elementwise epilogue of the dot"));
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(InstructionFusionTest, NothingIsFusedIntoADotsOperands) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  a = f32[32,16] parameter(0)
  b = f32[32,8] parameter(1)
  t = f32[16,32] transpose(a), dimensions={1,0}
  ROOT dot.3 = f32[16,8] dot(t, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  for (FusionBackend backend : {FusionBackend::kCpu, FusionBackend::kGpu}) {
    auto copy = CloneModule(*module);
    InstructionFusion fusion(backend);
    std::vector<std::string> lines = Fuse(fusion, *copy);
    EXPECT_EQ(CountOpcode(*copy, HloOpcode::kFusion), 0);
    EXPECT_THAT(Joined(lines), HasSubstr("refused t into dot.3: dot.3 "));
  }
}

TEST(InstructionFusionTest, SizeLimitStopsGrowth) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] negate(p)
  b = f32[8] abs(a)
  c = f32[8] negate(b)
  d = f32[8] abs(c)
  ROOT e = f32[8] negate(d)
})");
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kCpu, FusionLimits{.max_instructions = 4});
  std::vector<std::string> lines = Fuse(fusion, *module);
  EXPECT_THAT(Joined(lines), HasSubstr("instructions, over the limit of 4"));
  for (const HloInstruction* f : EntryFusions(*module)) {
    EXPECT_LE(f->fused_computation()->instruction_count(), 4);
  }
  EXPECT_EQ(CountKernels(*module), 2);
  EXPECT_TRUE(SameResults(*before, *module));

  auto wide = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  p2 = f32[8] parameter(2)
  a = f32[8] add(p0, p1)
  ROOT b = f32[8] add(a, p2)
})");
  InstructionFusion narrow(FusionBackend::kCpu, FusionLimits{.max_operands = 2});
  lines = Fuse(narrow, *wide);
  EXPECT_THAT(Joined(lines), HasSubstr("refused a into b: the fusion would take 3 operands"));
  EXPECT_EQ(CountOpcode(*wide, HloOpcode::kFusion), 0);
}

TEST(InstructionFusionTest, GrowsExistingFusionsFromBothSides) {
  auto module = ParseModuleOrDie(R"(HloModule m
%fused_computation (param_0: f32[8], param_1: f32[8]) -> f32[8] {
  %param_0 = f32[8] parameter(0)
  %param_1 = f32[8] parameter(1)
  ROOT %mul = f32[8] multiply(%param_0, %param_1)
}
%fused_computation.1 (param_0: f32[8]) -> f32[8] {
  %param_0 = f32[8] parameter(0)
  ROOT %neg = f32[8] negate(%param_0)
}
ENTRY e {
  p = f32[8] parameter(0)
  q = f32[8] parameter(1)
  s = f32[8] subtract(p, q)
  fusion.1 = f32[8] fusion(s, q), kind=kLoop, calls=%fused_computation, metadata={op_name="m"}
  fusion.2 = f32[8] fusion(fusion.1), kind=kLoop, calls=%fused_computation.1
  ROOT r = f32[8] abs(fusion.2)
})");
  auto before = CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kGpu);
  std::vector<std::string> lines = Fuse(fusion, *module);
  ASSERT_EQ(EntryFusions(*module).size(), 1u) << module->ToString();
  EXPECT_EQ(CountKernels(*module), 1);
  EXPECT_EQ(module->computation_count(), 2);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kSubtract), 0);
  EXPECT_EQ(root->fused_computation()->instruction_count(), 6);  // p, q, subtract ... abs
  EXPECT_EQ(root->metadata.op_name, "m");
  EXPECT_TRUE(SameResults(*before, *module));
}

TEST(InstructionFusionTest, LeavesWhatItMustNotTouchAndReportsNoChange) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  big = f32[32] constant({0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31})
  s = f32[8] slice(big), slice={[0:8]}
  c = f32[8] custom-call(p), custom_call_target="foo"
  ROOT t = (f32[8], f32[8]) tuple(c, s)
})");
  InstructionFusion fusion(FusionBackend::kGpu);
  auto changed = RunPassChecked(fusion, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kFusion), 0);
  EXPECT_THAT(Joined(Fuse(fusion, *module)), HasSubstr("the constant has 32 elements"));
}

TEST(InstructionFusionTest, CountKernelsIgnoresBookkeeping) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  c = f32[] constant(1)
  b = f32[8] broadcast(c), dimensions={}
  a = f32[8] add(p, b)
  bc = f32[2,4] bitcast(a)
  t = (f32[2,4], f32[8]) tuple(bc, a)
  ROOT g = f32[2,4] get-tuple-element(t), index=0
})");
  EXPECT_EQ(CountKernels(*module), 2);
}

// Every corpus module the evaluator runs: same results after fusion, verified, never more
// kernels. The kernel counts are printed for the record.
TEST(InstructionFusionTest, CorpusKeepsResultsAndNeverAddsKernels) {
  const std::string dir = xlens::testing::CorpusDir();
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no HLO corpus at " << dir;
  int64_t totals[3] = {0, 0, 0};
  int compared = 0;
  for (const std::string& name : xlens::testing::EvaluatorCorpusModules()) {
    std::ifstream in(dir + "/" + name + ".hlo");
    std::stringstream text;
    text << in.rdbuf();
    auto original = ParseModuleOrDie(text.str());
    ASSERT_NE(original, nullptr) << name;
    const int64_t kernels = CountKernels(*original);
    int64_t after[2] = {0, 0};
    int index = 0;
    for (FusionBackend backend : {FusionBackend::kCpu, FusionBackend::kGpu}) {
      auto module = CloneModule(*original);
      InstructionFusion fusion(backend);
      auto changed = RunPassChecked(fusion, *module);
      ASSERT_TRUE(changed.ok()) << name << ": " << changed.status().message();
      after[index++] = CountKernels(*module);
      EXPECT_LE(CountKernels(*module), kernels) << name;
      EXPECT_NE(ParseModuleOrDie(module->ToString()), nullptr) << name;
      auto same = SameResults(*original, *module);
      if (!same && std::string(same.message()).rfind("before:", 0) == 0) continue;
      EXPECT_TRUE(same) << name << "\n" << module->ToString();
      ++compared;
    }
    totals[0] += kernels;
    totals[1] += after[0];
    totals[2] += after[1];
    std::printf("%-36s kernels %3lld -> cpu %3lld, gpu %3lld\n", name.c_str(),
                static_cast<long long>(kernels), static_cast<long long>(after[0]),
                static_cast<long long>(after[1]));
  }
  // Modules whose evaluation fails before fusion (unsupported opcodes) are not compared.
  EXPECT_GE(compared, 2 * 40);
  std::printf("compared results on %d of %zu module/backend pairs\n", compared,
              2 * xlens::testing::EvaluatorCorpusModules().size());
  std::printf("%-36s kernels %3lld -> cpu %3lld, gpu %3lld\n", "TOTAL",
              static_cast<long long>(totals[0]), static_cast<long long>(totals[1]),
              static_cast<long long>(totals[2]));
}

}  // namespace
}  // namespace xlens

namespace xlens {
namespace {

TEST(InstructionFusionTest, CopiesOfCheapProducersDoNotCascadeOnAGraphThatFansOut) {
  // v_i = v_{i-1} op v_{i-3}, with a reduction every ten values cutting the graph into kernels:
  // values have two users, often in different kernels. Copying a producer into both gives its
  // own operands another user each, and so on: the kernels would recompute the graph many times
  // over. The work inside all fusions must stay proportional to the module.
  std::string text = "HloModule fan_out\n"
                     "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
                     "ENTRY e {\n  v0 = f32[16,8] parameter(0)\n  v1 = f32[16,8] parameter(1)\n"
                     "  v2 = f32[16,8] parameter(2)\n  zero = f32[] constant(0)\n";
  constexpr int kCount = 300;
  const char* ops[] = {"add", "multiply", "subtract", "maximum"};
  int computed = 0;
  for (int i = 3; i < kCount; ++i) {
    std::string v = "v" + std::to_string(i);
    if (i % 10 == 0) {
      text += "  r" + std::to_string(i) + " = f32[16] reduce(v" + std::to_string(i - 1) +
              ", zero), dimensions={1}, to_apply=add\n";
      text += "  " + v + " = f32[16,8] broadcast(r" + std::to_string(i) + "), dimensions={0}\n";
      computed += 2;
      continue;
    }
    text += "  " + v + " = f32[16,8] " + ops[i % 4] + "(v" + std::to_string(i - 1) + ", v" +
            std::to_string(i - 3) + ")\n";
    ++computed;
  }
  text += "  ROOT out = f32[16,8] negate(v" + std::to_string(kCount - 1) + ")\n}\n";
  auto module = xlens::testing::ParseModuleOrDie(text);
  auto before = xlens::testing::CloneModule(*module);
  InstructionFusion fusion(FusionBackend::kCpu);
  auto changed = xlens::testing::RunPassChecked(fusion, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  int64_t fused = 0;
  for (const HloComputation* c : module->computations()) {
    if (!c->IsFusionComputation()) continue;
    for (const HloInstruction* i : c->instructions()) {
      fused += i->opcode() != HloOpcode::kParameter && i->opcode() != HloOpcode::kConstant;
    }
  }
  EXPECT_LE(fused, 2 * computed) << "copies cascaded: " << fused << " fused ops for " << computed;
  EXPECT_TRUE(xlens::testing::SameResults(*before, *module));
}

// Everything the printer leaves out that later passes read: each instruction's users, in order.
std::string UserLists(const HloModule& module) {
  std::string out;
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* instruction : computation->instructions()) {
      out += computation->name() + "/" + instruction->name() + ":";
      for (const HloInstruction* user : instruction->users()) out += " " + user->name();
      out += "\n";
    }
  }
  return out;
}

// Growing a fusion in place must leave the module exactly as rebuilding it does: names, parameter
// numbers, instruction and computation order, metadata and user lists; with producers that move
// in, producers that are copied (a has a user outside), and operands the producer shares with the
// fusion (parameters merge).
TEST(InstructionFusionTest, GrowingInPlaceLeavesWhatARebuildLeaves) {
  constexpr char kModule[] = R"(HloModule grow
ENTRY %e {
  %p0 = f32[8]{0} parameter(0)
  %p1 = f32[8]{0} parameter(1)
  %a = f32[8]{0} add(%p0, %p1), metadata={op_type="Add" op_name="l/a"}
  %b = f32[8]{0} multiply(%a, %p0), metadata={op_type="Mul" op_name="l/b"}
  %c = f32[8]{0} subtract(%b, %a), metadata={op_type="Sub" op_name="l/c"}
  %d = f32[8]{0} negate(%c), metadata={op_type="Neg" op_name="l/c"}
  %e = f32[8]{0} add(%d, %p1), metadata={op_type="Add" op_name="l/e;l/x"}
  %f = f32[8]{0} maximum(%e, %b), metadata={op_type="Max" op_name="l/f"}
  %g = f32[8]{0} negate(%a)
  ROOT %t = (f32[8]{0}, f32[8]{0}) tuple(%f, %g)
})";
  auto in_place = ParseModuleOrDie(kModule);
  auto rebuilt = ParseModuleOrDie(kModule);
  auto named = [](HloModule& module, const std::string& name) {
    return module.entry_computation()->GetInstructionWithName(name);
  };
  HloInstruction* fusion_a = nullptr;
  HloInstruction* fusion_b = nullptr;
  for (HloModule* module : {in_place.get(), rebuilt.get()}) {
    auto fusion = BuildFusion(FusionPlan{.members = {named(*module, "e"), named(*module, "f")}});
    ASSERT_TRUE(fusion.ok()) << fusion.status().message();
    (module == in_place.get() ? fusion_a : fusion_b) = *fusion;
  }
  for (int step = 0; step < 8; ++step) {
    HloInstruction* producer = nullptr;
    for (HloInstruction* operand : fusion_a->operands()) {
      if (operand->opcode() != HloOpcode::kParameter) producer = operand;
    }
    if (producer == nullptr) break;
    const bool duplicate = UseCount(*producer) > 1;
    const std::string name = producer->name();
    auto grown = FuseProducerInPlace(producer, fusion_a, duplicate);
    ASSERT_TRUE(grown.ok()) << grown.status().message();
    fusion_a = *grown;
    FusionPlan plan{.members = {named(*rebuilt, name), fusion_b}, .keep_name_of = fusion_b};
    if (duplicate) plan.duplicated = {named(*rebuilt, name)};
    auto built = BuildFusion(plan);
    ASSERT_TRUE(built.ok()) << built.status().message();
    fusion_b = *built;
    SCOPED_TRACE("after fusing " + name);
    EXPECT_EQ(PrintModule(*in_place), PrintModule(*rebuilt));
    EXPECT_EQ(UserLists(*in_place), UserLists(*rebuilt));
    EXPECT_TRUE(VerifyModule(*in_place).ok());
  }
  EXPECT_EQ(CountOpcode(*in_place, HloOpcode::kFusion), 1);
  EXPECT_NE(named(*in_place, "a"), nullptr);  // copied for %g, not moved
}

}  // namespace
}  // namespace xlens

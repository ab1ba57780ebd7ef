#include "compiler/hlo/hlo_cost_analysis.h"

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"
#include "nested_modules.h"
#include "test_util.h"

namespace xlens {
namespace {

std::unique_ptr<HloModule> Parse(const std::string& text) {
  StatusOr<std::unique_ptr<HloModule>> module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

// The instruction called `name` in any computation of `module`.
const HloInstruction& Find(const HloModule& module, const std::string& name) {
  for (const HloComputation* computation : module.computations()) {
    if (const HloInstruction* instruction = computation->GetInstructionWithName(name)) {
      return *instruction;
    }
  }
  ADD_FAILURE() << "no instruction " << name;
  static const HloInstruction kMissing(HloOpcode::kParameter, Shape(PrimitiveType::F32, {}));
  return kMissing;
}

HloCost Cost(double flops, double transcendentals, int64_t bytes_accessed, int64_t output_bytes) {
  return HloCost{flops, transcendentals, bytes_accessed, output_bytes};
}

void ExpectCost(const HloCost& actual, const HloCost& expected) {
  EXPECT_DOUBLE_EQ(actual.flops, expected.flops);
  EXPECT_DOUBLE_EQ(actual.transcendentals, expected.transcendentals);
  EXPECT_EQ(actual.bytes_accessed, expected.bytes_accessed);
  EXPECT_EQ(actual.output_bytes, expected.output_bytes);
}

// --- Elementwise ----------------------------------------------------------------------------

TEST(HloCostAnalysisTest, AddCountsOneFlopPerElementAndReadsBothOperands) {
  auto module = Parse(R"(
HloModule m
ENTRY e {
  a = f32[1024] parameter(0)
  b = f32[1024] parameter(1)
  ROOT add = f32[1024] add(a, b)
})");
  ASSERT_NE(module, nullptr);
  // 4096 bytes read twice, 4096 written.
  ExpectCost(CostOf(Find(*module, "add")), Cost(1024, 0, 12288, 4096));
  // Parameters move nothing, so the module costs what the add costs.
  ExpectCost(ModuleCost(*module), Cost(1024, 0, 12288, 4096));
}

TEST(HloCostAnalysisTest, TranscendentalsAreCountedApartFromFlops) {
  auto module = Parse(R"(
HloModule m
ENTRY e {
  a = f32[256] parameter(0)
  exp = f32[256] exponential(a)
  tanh = f32[256] tanh(exp)
  sqrt = f32[256] sqrt(tanh)
  neg = f32[256] negate(sqrt)
  ROOT cmp = pred[256] compare(neg, a), direction=LT
})");
  ASSERT_NE(module, nullptr);
  ExpectCost(CostOf(Find(*module, "exp")), Cost(0, 256, 2048, 1024));
  ExpectCost(CostOf(Find(*module, "tanh")), Cost(0, 256, 2048, 1024));
  ExpectCost(CostOf(Find(*module, "sqrt")), Cost(0, 256, 2048, 1024));
  ExpectCost(CostOf(Find(*module, "neg")), Cost(256, 0, 2048, 1024));
  // Compare reads two f32 arrays and writes a pred (one byte per element).
  ExpectCost(CostOf(Find(*module, "cmp")), Cost(256, 0, 2304, 256));
  ExpectCost(ModuleCost(*module), Cost(512, 768, 3 * 2048 + 2048 + 2304, 3 * 1024 + 1024 + 256));
}

TEST(HloCostAnalysisTest, SelectAndClampAreOneFlopPerElement) {
  auto module = Parse(R"(
HloModule m
ENTRY e {
  p = pred[10] parameter(0)
  a = f32[10] parameter(1)
  b = f32[10] parameter(2)
  sel = f32[10] select(p, a, b)
  ROOT c = f32[10] clamp(a, sel, b)
})");
  ASSERT_NE(module, nullptr);
  ExpectCost(CostOf(Find(*module, "sel")), Cost(10, 0, 10 + 40 + 40 + 40, 40));
  ExpectCost(CostOf(Find(*module, "c")), Cost(10, 0, 160, 40));
}

// --- Dot and convolution ----------------------------------------------------------------------

TEST(HloCostAnalysisTest, DotIsTwoFlopsPerMultiplyAdd) {
  auto module = Parse(R"(
HloModule m
ENTRY e {
  a = f32[64,128] parameter(0)
  b = f32[128,32] parameter(1)
  ROOT dot = f32[64,32] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  ASSERT_NE(module, nullptr);
  const int64_t lhs = 64 * 128 * 4, rhs = 128 * 32 * 4, out = 64 * 32 * 4;
  ExpectCost(CostOf(Find(*module, "dot")), Cost(2.0 * 64 * 32 * 128, 0, lhs + rhs + out, out));
}

TEST(HloCostAnalysisTest, BatchedAndComplexDots) {
  auto module = Parse(R"(
HloModule m
ENTRY e {
  a = f32[4,8,16] parameter(0)
  b = f32[4,16,2] parameter(1)
  batched = f32[4,8,2] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
  c = c64[2,3] parameter(2)
  d = c64[3,4] parameter(3)
  ROOT complex = c64[2,4] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  ASSERT_NE(module, nullptr);
  // Batch dimensions are output dimensions: 64 outputs of 16 multiply-adds each.
  EXPECT_DOUBLE_EQ(CostOf(Find(*module, "batched")).flops, 2.0 * 64 * 16);
  // A complex multiply-add is four real ones.
  EXPECT_DOUBLE_EQ(CostOf(Find(*module, "complex")).flops, 4 * 2.0 * 8 * 3);
}

TEST(HloCostAnalysisTest, ConvolutionWithoutPadding) {
  auto module = Parse(R"(
HloModule m
ENTRY e {
  input = f32[1,5,5,2] parameter(0)
  kernel = f32[3,3,2,4] parameter(1)
  ROOT conv = f32[1,3,3,4] convolution(input, kernel), window={size=3x3}, dim_labels=b01f_01io->b01f
})");
  ASSERT_NE(module, nullptr);
  // 2 * 36 outputs * 9 window positions * 2 input features.
  const int64_t bytes = 1 * 5 * 5 * 2 * 4 + 3 * 3 * 2 * 4 * 4 + 36 * 4;
  ExpectCost(CostOf(Find(*module, "conv")), Cost(2.0 * 36 * 9 * 2, 0, bytes, 36 * 4));
}

TEST(HloCostAnalysisTest, ConvolutionPaddingDoesNotCount) {
  auto module = Parse(R"(
HloModule m
ENTRY e {
  input = f32[1,3,3,1] parameter(0)
  kernel = f32[3,3,1,1] parameter(1)
  ROOT conv = f32[1,3,3,1] convolution(input, kernel), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
})");
  ASSERT_NE(module, nullptr);
  // Per spatial dimension the kernel taps that land on real input are 2 + 3 + 2 = 7 (not 9),
  // so 49 multiply-adds instead of the 81 of a window-size count.
  EXPECT_DOUBLE_EQ(CostOf(Find(*module, "conv")).flops, 2.0 * 49);
}

TEST(HloCostAnalysisTest, GroupedConvolutionDividesInputFeatures) {
  auto module = Parse(R"(
HloModule m
ENTRY e {
  input = f32[1,4,4,4] parameter(0)
  kernel = f32[1,1,2,4] parameter(1)
  ROOT conv = f32[1,4,4,4] convolution(input, kernel), window={size=1x1}, dim_labels=b01f_01io->b01f, feature_group_count=2
})");
  ASSERT_NE(module, nullptr);
  // 64 outputs * 1 window position * (4 / 2) input features each.
  EXPECT_DOUBLE_EQ(CostOf(Find(*module, "conv")).flops, 2.0 * 64 * 2);
}

// --- Ops applying a computation ---------------------------------------------------------------

constexpr const char* kAddComputation = R"(
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
)";

TEST(HloCostAnalysisTest, ReduceAppliesTheReducerInputMinusOutputTimes) {
  auto module = Parse(std::string("HloModule m\n") + kAddComputation + R"(
ENTRY e {
  a = f32[8,16] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[8] reduce(a, z), dimensions={1}, to_apply=add
})");
  ASSERT_NE(module, nullptr);
  // 128 - 8 = 120 additions; reads 512 + 4 bytes, writes 32.
  ExpectCost(CostOf(Find(*module, "r")), Cost(120, 0, 512 + 4 + 32, 32));
  ExpectCost(ModuleCost(*module), Cost(120, 0, 548, 32));
}

TEST(HloCostAnalysisTest, ReduceWindowMapAndScatter) {
  auto module = Parse(std::string("HloModule m\n") + kAddComputation + R"(
ENTRY e {
  a = f32[4,4] parameter(0)
  z = f32[] constant(0)
  rw = f32[3,3] reduce-window(a, z), window={size=2x2}, to_apply=add
  m = f32[4,4] map(a, a), dimensions={0,1}, to_apply=add
  operand = f32[8] parameter(1)
  indices = s32[2,1] parameter(2)
  updates = f32[2] parameter(3)
  ROOT sc = f32[8] scatter(operand, indices, updates), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})");
  ASSERT_NE(module, nullptr);
  // Each of the 9 outputs combines 4 values: 3 additions.
  EXPECT_DOUBLE_EQ(CostOf(Find(*module, "rw")).flops, 9 * 3);
  EXPECT_DOUBLE_EQ(CostOf(Find(*module, "m")).flops, 16);
  // Scatter: one combine per update element; 3 * 8 update bytes + 8 index bytes.
  ExpectCost(CostOf(Find(*module, "sc")), Cost(2, 0, 3 * 8 + 8, 8));
}

TEST(HloCostAnalysisTest, SortIsNLogNComparisons) {
  auto module = Parse(R"(
HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  keys = f32[64] parameter(0)
  values = s32[64] parameter(1)
  ROOT sort = (f32[64], s32[64]) sort(keys, values), dimensions={0}, to_apply=less
})");
  ASSERT_NE(module, nullptr);
  // 64 * log2(64) comparisons; both arrays read and written (tuple: the sum of its leaves).
  ExpectCost(CostOf(Find(*module, "sort")), Cost(64 * 6, 0, 4 * 256, 2 * 256));
}

// --- Data movement ----------------------------------------------------------------------------

TEST(HloCostAnalysisTest, TupleGetTupleElementAndBitcastMoveNothing) {
  auto module = Parse(R"(
HloModule m
ENTRY e {
  a = f32[16] parameter(0)
  b = f32[4,4] bitcast(a)
  c = f32[16] constant({0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15})
  t = (f32[16], f32[4,4], f32[16]) tuple(a, b, c)
  ROOT g = f32[4,4] get-tuple-element(t), index=1
})");
  ASSERT_NE(module, nullptr);
  for (const char* name : {"a", "b", "c", "t", "g"}) {
    ExpectCost(CostOf(Find(*module, name)), HloCost{});
  }
  ExpectCost(ModuleCost(*module), HloCost{});
}

TEST(HloCostAnalysisTest, MovementOpsCostBytesButNoFlops) {
  auto module = Parse(R"(
HloModule m
ENTRY e {
  a = f32[100] parameter(0)
  i = s32[] parameter(1)
  s = f32[20] slice(a), slice={[10:30]}
  ds = f32[20] dynamic-slice(a, i), dynamic_slice_sizes={20}
  u = f32[5] parameter(2)
  dus = f32[100] dynamic-update-slice(a, u, i)
  tr = f32[10,10] reshape(a)
  t = f32[10,10] transpose(tr), dimensions={1,0}
  br = f32[3,100] broadcast(a), dimensions={1}
  ROOT cc = f32[300] custom-call(br), custom_call_target="opaque"
})");
  ASSERT_NE(module, nullptr);
  // Slices read only what they produce.
  ExpectCost(CostOf(Find(*module, "s")), Cost(0, 0, 80 + 80, 80));
  ExpectCost(CostOf(Find(*module, "ds")), Cost(0, 0, 80 + 4 + 80, 80));
  // In place: reads the update and the index, writes the update.
  ExpectCost(CostOf(Find(*module, "dus")), Cost(0, 0, 20 + 4 + 20, 20));
  ExpectCost(CostOf(Find(*module, "tr")), Cost(0, 0, 800, 400));
  ExpectCost(CostOf(Find(*module, "t")), Cost(0, 0, 800, 400));
  ExpectCost(CostOf(Find(*module, "br")), Cost(0, 0, 400 + 1200, 1200));
  // Unknown work: no flops, operands and result.
  ExpectCost(CostOf(Find(*module, "cc")), Cost(0, 0, 2400, 1200));
}

// --- Fusion -----------------------------------------------------------------------------------

TEST(HloCostAnalysisTest, LoopFusionSumsArithmeticAndCountsOnlyItsBoundary) {
  auto module = Parse(R"(
HloModule m
fused {
  p0 = f32[256] parameter(0)
  p1 = f32[256] parameter(1)
  add = f32[256] add(p0, p1)
  mul = f32[256] multiply(add, p1)
  ROOT exp = f32[256] exponential(mul)
}
ENTRY e {
  a = f32[256] parameter(0)
  b = f32[256] parameter(1)
  ROOT f = f32[256] fusion(a, b), kind=kLoop, calls=fused
})");
  ASSERT_NE(module, nullptr);
  // Each parameter is read once (p1 has two users), the result written once; add and mul stay
  // in registers.
  ExpectCost(CostOf(Find(*module, "f")), Cost(512, 256, 1024 + 1024 + 1024, 1024));
  // The same instructions unfused would touch memory for every intermediate.
  const HloComputation* fused = module->GetComputationWithName("fused");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(ComputationCost(*fused).bytes_accessed, 3072 + 3072 + 2048);
  ExpectCost(ModuleCost(*module), Cost(512, 256, 3072, 1024));
}

TEST(HloCostAnalysisTest, FusionReadsOnlyTheDynamicSliceOfABigParameter) {
  auto module = Parse(R"(
HloModule m
fused {
  table = f32[1024,256] parameter(0)
  row = s32[] parameter(1)
  zero = s32[] constant(0)
  ds = f32[1,256] dynamic-slice(table, row, zero), dynamic_slice_sizes={1,256}
  ROOT neg = f32[1,256] negate(ds)
}
ENTRY e {
  table = f32[1024,256] parameter(0)
  row = s32[] parameter(1)
  ROOT f = f32[1,256] fusion(table, row), kind=kLoop, calls=fused
})");
  ASSERT_NE(module, nullptr);
  // One 1 KiB row of the 1 MiB table, the 4-byte index, 1 KiB written.
  ExpectCost(CostOf(Find(*module, "f")), Cost(256, 0, 1024 + 4 + 1024, 1024));
}

TEST(HloCostAnalysisTest, InPlaceDynamicUpdateSliceFusionWritesOnlyTheUpdate) {
  auto module = Parse(R"(
HloModule m
fused {
  buffer = f32[1024,256] parameter(0)
  update = f32[1,256] parameter(1)
  row = s32[] parameter(2)
  zero = s32[] constant(0)
  dus = f32[1024,256] dynamic-update-slice(buffer, update, row, zero)
  ROOT b = f32[256,1024] bitcast(dus)
}
ENTRY e {
  buffer = f32[1024,256] parameter(0)
  update = f32[1,256] parameter(1)
  row = s32[] parameter(2)
  ROOT f = f32[256,1024] fusion(buffer, update, row), kind=kLoop, calls=fused
})");
  ASSERT_NE(module, nullptr);
  ExpectCost(CostOf(Find(*module, "f")), Cost(0, 0, 1024 + 4 + 1024, 1024));
}

TEST(HloCostAnalysisTest, FusionCountsReductionsAndMultipleOutputs) {
  auto module = Parse(std::string("HloModule m\n") + kAddComputation + R"(
fused {
  p = f32[8,16] parameter(0)
  ex = f32[8,16] exponential(p)
  z = f32[] constant(0)
  r = f32[8] reduce(ex, z), dimensions={1}, to_apply=add
  ROOT t = (f32[8,16], f32[8]) tuple(ex, r)
}
ENTRY e {
  p = f32[8,16] parameter(0)
  ROOT f = (f32[8,16], f32[8]) fusion(p), kind=kInput, calls=fused
})");
  ASSERT_NE(module, nullptr);
  // 128 exps, 120 adds; reads 512 bytes, writes 512 + 32.
  ExpectCost(CostOf(Find(*module, "f")), Cost(120, 128, 512 + 544, 544));
}

// --- Control flow -----------------------------------------------------------------------------

TEST(HloCostAnalysisTest, WhileCostsOneTripThroughConditionAndBody) {
  auto module = Parse(R"(
HloModule m
body {
  s = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[256] get-tuple-element(s), index=1
  e = f32[256] exponential(x)
  ROOT t = (s32[], f32[256]) tuple(next, e)
}
cond {
  s = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[256] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[256]) tuple(zero, x)
  ROOT w = (s32[], f32[256]) while(init), condition=cond, body=body
})");
  ASSERT_NE(module, nullptr);
  // Body: add (1 flop, 12 bytes) and exp (256 transcendentals, 2048 bytes). Condition: compare
  // (1 flop, 9 bytes). The trip count is not known statically: one trip is counted.
  const HloCost one_trip = Cost(2, 256, 12 + 2048 + 9, 4 + 1024 + 1);
  ExpectCost(CostOf(Find(*module, "w")), one_trip);
  ExpectCost(ModuleCost(*module), one_trip);
}

TEST(HloCostAnalysisTest, ConditionalCostsItsMostExpensiveBranchAndCallItsComputation) {
  auto module = Parse(R"(
HloModule m
cheap {
  x = f32[64] parameter(0)
  ROOT n = f32[64] negate(x)
}
costly {
  x = f32[64] parameter(0)
  a = f32[64] add(x, x)
  ROOT e = f32[64] exponential(a)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[64] parameter(1)
  c = f32[64] conditional(p, x, x), true_computation=cheap, false_computation=costly
  ROOT k = f32[64] call(c), to_apply=costly
})");
  ASSERT_NE(module, nullptr);
  // Field by field: flops 64 either way, transcendentals 64, bytes 768 + 512 of the costly one.
  ExpectCost(CostOf(Find(*module, "c")), Cost(64, 64, 768 + 512, 512));
  ExpectCost(CostOf(Find(*module, "k")), Cost(64, 64, 768 + 512, 512));
}

// --- Robustness -------------------------------------------------------------------------------

bool Sane(const HloCost& cost) {
  return std::isfinite(cost.flops) && cost.flops >= 0 && std::isfinite(cost.transcendentals) &&
         cost.transcendentals >= 0 && cost.bytes_accessed >= 0 && cost.output_bytes >= 0 &&
         cost.output_bytes <= cost.bytes_accessed;
}

// Every opcode, even without the operands and attributes it needs, is costed without crashing.
// Callees are costed before callers without recursion: 100,000 nested calls overflowed the stack.
TEST(HloCostAnalysisTest, HundredThousandNestedCallsCostTheirInnermostAdd) {
  auto module = ParseHloModule(testing::NestedCallsText(100000));
  ASSERT_TRUE(module.ok()) << module.status().message();
  HloCost cost = ModuleCost(**module);
  EXPECT_EQ(cost.flops, 1);
  HloCostAnalysis analysis;
  EXPECT_EQ(analysis.InstructionCost(*(*module)->entry_computation()->root_instruction()).flops, 1);
}

TEST(HloCostAnalysisTest, EveryOpcodeWithoutOperandsOrAttributes) {
  const std::vector<HloOpcode> opcodes = {
#define XLENS_LIST_OPCODE(e, name, arity) HloOpcode::e,
      XLENS_HLO_OPCODES(XLENS_LIST_OPCODE)
#undef XLENS_LIST_OPCODE
  };
  for (HloOpcode opcode : opcodes) {
    for (const Shape& shape :
         {Shape(PrimitiveType::F32, {4, 8}), Shape::Scalar(PrimitiveType::S32),
          Shape::Tuple({Shape(PrimitiveType::F32, {3}), Shape::Token()})}) {
      HloInstruction instruction(opcode, shape, "i");
      const HloCost cost = CostOf(instruction);
      EXPECT_TRUE(Sane(cost)) << HloOpcodeString(opcode) << " " << shape.ToString();
    }
  }
}

class HloCostAnalysisCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HloCostAnalysisCorpusTest, EntryCostIsFiniteAndNonNegative) {
  const std::string dir = xlens::testing::HloCorpusDir();
  if (dir.empty()) GTEST_SKIP() << "corpus absent: " << XLENS_SHARED_DIR << "/corpus/hlo";
  const std::string path = dir + "/" + GetParam() + ".hlo";
  auto module = ParseHloModule(xlens::testing::ReadTestFile(path),
                               ParseOptions{.verify = false, .filename = path});
  if (!module.ok()) GTEST_SKIP() << "does not parse: " << module.status().message();
  if ((*module)->entry_computation() == nullptr) GTEST_SKIP() << "no entry computation";

  HloCostAnalysis analysis;
  for (const HloComputation* computation : (*module)->computations()) {
    for (const auto& [instruction, cost] : analysis.InstructionCosts(*computation)) {
      EXPECT_TRUE(Sane(cost)) << instruction->ToString(/*short_form=*/true);
    }
  }
  const HloCost total = analysis.ModuleCost(**module);
  EXPECT_TRUE(Sane(total));
  // The memoized total agrees with a fresh one.
  EXPECT_EQ(total, ModuleCost(**module));
}

INSTANTIATE_TEST_SUITE_P(Corpus, HloCostAnalysisCorpusTest,
                         ::testing::ValuesIn(xlens::testing::HloCorpusModuleNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return xlens::testing::TestNameOf(info.param);
                         });

}  // namespace
}  // namespace xlens

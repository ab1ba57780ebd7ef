// The CPU column reduction (compiler/codegen/cpu/cpu_column_reduction.cc): how its plan tiles and
// slices a reduction that keeps the contiguous dimension, which phases the emitter makes of it,
// and that every form (sliced and not, grouped output rows, narrow and wide tiles, odd sizes, one
// row, one column, no rows, integers, max and min, a fused producer, variadic and sibling
// reductions, non-default layouts) computes what the reference evaluator computes; and which
// strided row reductions take the same sweep with the minor dimension as lanes, and that they too
// compute what the evaluator computes.
#include "compiler/codegen/cpu/cpu_column_reduction.h"

#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "codegen_test_util.h"
#include "compiler/codegen/cpu/cpu_jit.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/parser.h"
#include "fused_kernel_test_util.h"

namespace xlens::codegen {
namespace {

using cpu::ColumnReductionPlan;
using cpu::PlanColumnReduction;
using testing::InInputFusion;
using testing::SpecOfRoot;

constexpr const char* kReducers = R"(
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
iadd { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = s32[] add(a, b) }
imin { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = s32[] minimum(a, b) }
parity { a = pred[] parameter(0)  b = pred[] parameter(1)  ROOT r = pred[] xor(a, b) }
)";

// `x` of `shape` reduced over `dims` with `reducer` from `init` (a constant of its type).
std::string Reduce(const std::string& shape, const std::string& out, const std::string& dims,
                   const std::string& reducer, const std::string& init) {
  const std::string type = shape.substr(0, shape.find('['));
  return std::string("HloModule m\n") + kReducers + "ENTRY e {\n  x = " + shape +
         " parameter(0)\n  z = " + type + "[] constant(" + init + ")\n  ROOT r = " + out +
         " reduce(x, z), dimensions={" + dims + "}, to_apply=" + reducer + "\n}\n";
}

const ErrorSpec kFloat{1e-3, 1e-3};

TEST(CpuColumnReductionPlanTest, ASumOverRowsOfOneWideRowIsSlicedAcrossTheRows) {
  // f32[4096,1024] over dimension 0: one output row of 1024, so the kept dimension gives one
  // task; 64 slices of 64 rows, each reading whole 4 KiB rows.
  ColumnReductionPlan p = PlanColumnReduction(1, 1024, 4096, true);
  EXPECT_EQ(p.block, 1024);
  EXPECT_EQ(p.blocks, 1);
  EXPECT_EQ(p.group, 1);
  EXPECT_EQ(p.slices, 64);
  EXPECT_EQ(p.slice_length, 64);
  EXPECT_EQ(p.tasks(), 64);
  // Narrow rows: slices as many as the work affords (1M elements: 16 of 64K).
  p = PlanColumnReduction(1, 64, 16384, true);
  EXPECT_EQ(p.block, 64);
  EXPECT_EQ(p.slices, 16);
  EXPECT_EQ(p.slice_length, 1024);
}

TEST(CpuColumnReductionPlanTest, SmallReductionsStayOneTask) {
  for (auto [rows, n, length] : {std::tuple<int64_t, int64_t, int64_t>{1, 33, 64}, {1, 300, 200},
                                 {4, 16, 1000}, {1, 1, 65535},
                                 // Batch norm's shifted mean, 1.53 grains (kColumnMinTaskElements).
                                 {1, 128, 784}}) {
    EXPECT_EQ(PlanColumnReduction(rows, n, length, true).tasks(), 1) << rows << "x" << n << "x" << length;
  }
}

TEST(CpuColumnReductionPlanTest, ManyShortOutputRowsAreGroupedAndNeverSliced) {
  // f32[64,256,256] over dimension 0: 256 output rows of 256; four rows per task, 64 tasks.
  ColumnReductionPlan p = PlanColumnReduction(256, 256, 64, true);
  EXPECT_EQ(p.block, 256);
  EXPECT_EQ(p.group, 4);
  EXPECT_EQ(p.groups, 64);
  EXPECT_EQ(p.slices, 1);
  EXPECT_EQ(p.slice_length, 64);
}

TEST(CpuColumnReductionPlanTest, WideRowsAreCutIntoTilesOfWholeVectors) {
  // 5000 outputs: three blocks of 1680 (a multiple of 16), the last one shorter.
  ColumnReductionPlan p = PlanColumnReduction(1, 5000, 100, true);
  EXPECT_EQ(p.blocks, 3);
  EXPECT_EQ(p.block, 1680);
  EXPECT_EQ(p.block % 16, 0);
  EXPECT_GE(p.block * p.blocks, 5000);
}

TEST(CpuColumnReductionPlanTest, WithoutSlicingBlocksNarrowForThreads) {
  // Materialised inside a fusion (no scratch for partials): 16 blocks of 64 columns instead.
  ColumnReductionPlan p = PlanColumnReduction(1, 1024, 4096, false);
  EXPECT_EQ(p.slices, 1);
  EXPECT_EQ(p.block, 64);
  EXPECT_EQ(p.blocks, 16);
}

TEST(CpuColumnReductionPlanTest, ALibraryCallsOutputIsSlicedAtTheSmallerLeast) {
  // The MLP's bias gradient, f32[128,256] over its rows: one task at the default least, two
  // slices of 64 rows where two split products wrote the rows.
  EXPECT_EQ(PlanColumnReduction(1, 256, 128, true).tasks(), 1);
  ColumnReductionPlan p = PlanColumnReduction(1, 256, 128, true, cpu::kColumnSpreadMinTaskElements);
  EXPECT_EQ(p.slices, 2);
  EXPECT_EQ(p.slice_length, 64);
  EXPECT_EQ(PlanColumnReduction(1, 256, 128, false, cpu::kColumnSpreadMinTaskElements).slices, 1);
}

TEST(CpuColumnReductionPlanTest, NoOutputsNoTasks) {
  EXPECT_EQ(PlanColumnReduction(1, 0, 100, true).tasks(), 0);
  EXPECT_EQ(PlanColumnReduction(0, 5, 100, true).tasks(), 0);
  // No rows: one task writes the init values.
  EXPECT_EQ(PlanColumnReduction(1, 5, 0, true).tasks(), 1);
}

TEST(CpuColumnReductionTest, SlicedSumIsASweepAndACombinePhase) {
  const std::string text = Reduce("f32[4099,129]", "f32[129]", "0", "add", "0");
  KernelSpec spec = SpecOfRoot(text);
  ASSERT_EQ(spec.phases.size(), 2u);
  // 528771 elements afford 8 tasks of 64K: 8 slices of 513 rows (the last of 508).
  EXPECT_EQ(spec.phases[0].tasks, 8);
  EXPECT_EQ(spec.phases[0].work_per_task, 129 * 513);
  EXPECT_EQ(spec.scratch_bytes, (8 * 129 * 4 + 63) / 64 * 64);
  testing::ExpectMatchesEvaluator(text, {}, kFloat);
}

TEST(CpuColumnReductionTest, IntegerSumWithANonIdentityInitAddsItOnce) {
  // Sliced: each slice starts from its first row, the init enters in the combine phase only.
  const std::string text = Reduce("s32[4000,70]", "s32[70]", "0", "iadd", "7");
  EXPECT_EQ(SpecOfRoot(text).phases.size(), 2u);
  testing::ExpectMatchesEvaluator(text);
  // Not sliced: the tile starts from the init.
  testing::ExpectMatchesEvaluator(Reduce("s32[100,70]", "s32[70]", "0", "iadd", "7"));
}

TEST(CpuColumnReductionTest, MaxMinAndParityOverOddShapes) {
  testing::ExpectMatchesEvaluator(Reduce("f32[3001,77]", "f32[77]", "0", "max", "-inf"));
  testing::ExpectMatchesEvaluator(Reduce("f32[5,17]", "f32[17]", "0", "max", "-inf"));
  testing::ExpectMatchesEvaluator(Reduce("s32[2500,61]", "s32[61]", "0", "imin", "2147483647"));
  // pred: the parity of each column, folded four rows per visit (xor is one instruction) and
  // sliced.
  const std::string parity = Reduce("pred[3000,50]", "pred[50]", "0", "parity", "false");
  EXPECT_EQ(SpecOfRoot(parity).phases.size(), 2u);
  testing::ExpectMatchesEvaluator(parity);
}

TEST(CpuColumnReductionTest, OneRowOneColumnAndNoRows) {
  // One row, wider than a tile: two blocks.
  testing::ExpectMatchesEvaluator(Reduce("f32[1,4100]", "f32[4100]", "0", "add", "0"), {}, kFloat);
  // One column: sliced rows of one element each.
  const std::string column = Reduce("f32[300000,1]", "f32[1]", "0", "add", "0");
  EXPECT_EQ(SpecOfRoot(column).phases.size(), 2u);
  testing::ExpectMatchesEvaluator(column, {}, kFloat);
  // No rows: the init value; no columns: nothing to write.
  Literal empty = testing::ExpectMatchesEvaluator(Reduce("f32[0,5]", "f32[5]", "0", "add", "2.5"));
  ASSERT_EQ(empty.element_count(), 5);
  EXPECT_EQ(empty.data<float>()[4], 2.5f);
  testing::ExpectMatchesEvaluator(Reduce("f32[5,0]", "f32[0]", "0", "add", "0"));
}

TEST(CpuColumnReductionTest, SeveralReducedAndKeptDimensions) {
  // Reduced {0,1} major to the kept minor dimension, sliced.
  testing::ExpectMatchesEvaluator(Reduce("f32[96,33,45]", "f32[45]", "0,1", "add", "0"), {}, kFloat);
  // A reduced dimension between two kept ones.
  testing::ExpectMatchesEvaluator(Reduce("f32[6,300,77]", "f32[6,77]", "1", "add", "0"), {}, kFloat);
  // Short output rows grouped 102 per task (a tile of 2040 outputs; 128000 elements afford two
  // tasks), the last group of 98.
  const std::string grouped = Reduce("f32[32,200,20]", "f32[200,20]", "0", "add", "0");
  KernelSpec spec = SpecOfRoot(grouped);
  ASSERT_EQ(spec.phases.size(), 1u);
  EXPECT_EQ(spec.phases[0].tasks, 2);
  EXPECT_EQ(spec.phases[0].work_per_task, 102 * 20 * 32);
  testing::ExpectMatchesEvaluator(grouped, {}, kFloat);
}

TEST(CpuColumnReductionTest, NonDefaultLayouts) {
  // The operand's minor dimension is its logical dimension 0; the output is column-major too,
  // and its partial tiles (sliced: 300000 elements over 2 column tasks) follow its layout.
  const std::string text = Reduce("f32[3000,50,2]{1,2,0}", "f32[50,2]{0,1}", "0", "add", "0");
  EXPECT_EQ(SpecOfRoot(text).phases.size(), 2u);
  testing::ExpectMatchesEvaluator(text, {}, kFloat);
  testing::ExpectMatchesEvaluator(Reduce("f32[300,500]{0,1}", "f32[300]", "1", "add", "0"), {}, kFloat);
}

TEST(CpuColumnReductionTest, FusedProducerIsComputedInTheSweep) {
  const std::string text = InInputFusion(kReducers, R"(
  x = f32[2048,100] parameter(0)
  e = f32[2048,100] exponential(x)
  z = f32[] constant(0)
  ROOT r = f32[100] reduce(e, z), dimensions={0}, to_apply=add
)");
  KernelSpec spec = SpecOfRoot(text);
  ASSERT_EQ(spec.phases.size(), 2u);
  EXPECT_EQ(spec.phases[0].tasks, 3);
  testing::ExpectMatchesEvaluator(text, {}, kFloat);
}

TEST(CpuColumnReductionTest, SiblingReductionsShareOneSweep) {
  // sum(x) and sum(x * x) over the same rows, and a max: one sweep phase and one combine phase
  // for all three, not one pair per output.
  const std::string text = InInputFusion(kReducers, R"(
  x = f32[3000,130] parameter(0)
  sq = f32[3000,130] multiply(x, x)
  z = f32[] constant(0)
  lo = f32[] constant(-inf)
  s = f32[130] reduce(x, z), dimensions={0}, to_apply=add
  s2 = f32[130] reduce(sq, z), dimensions={0}, to_apply=add
  m = f32[130] reduce(x, lo), dimensions={0}, to_apply=max
  ROOT t = (f32[130], f32[130], f32[130]) tuple(s, s2, m)
)");
  KernelSpec spec = SpecOfRoot(text);
  ASSERT_EQ(spec.phases.size(), 2u);
  EXPECT_EQ(spec.phases[0].tasks, 5);
  EXPECT_EQ(spec.scratch_bytes, 3 * ((5 * 130 * 4 + 63) / 64 * 64));
  testing::ExpectMatchesEvaluator(text, {}, kFloat);
}

TEST(CpuColumnReductionTest, MaterialisedReductionIsSlicedIntoScratchPastItsResult) {
  // x - mean(x, axis=0): the column sum that the output reads is materialised in scratch, and
  // sliced too (its one output row would otherwise be one task): its partials go past the sum.
  const std::string text = InInputFusion(kReducers, R"(
  x = f32[4000,96] parameter(0)
  z = f32[] constant(0)
  s = f32[96] reduce(x, z), dimensions={0}, to_apply=add
  c = f32[] constant(0.00025)
  cb = f32[96] broadcast(c), dimensions={}
  m = f32[96] multiply(s, cb)
  mb = f32[4000,96] broadcast(m), dimensions={1}
  ROOT d = f32[4000,96] subtract(x, mb)
)");
  KernelSpec spec = SpecOfRoot(text);
  // 384000 elements afford 5 slices: the sweep, the combine, then the output loop.
  ASSERT_EQ(spec.phases.size(), 3u);
  EXPECT_EQ(spec.phases[0].tasks, 5);
  EXPECT_EQ(spec.scratch_bytes, 384 + 5 * 384);
  testing::ExpectMatchesEvaluator(text, {}, kFloat);
}

TEST(CpuColumnReductionTest, ReductionOnlyTheRootReadsIsSweptIntoScratch) {
  // mean(x * x, axis=0) as the root divides it: computed per output it would be one strided
  // scalar walk of the rows on one thread; it is the sliced sweep, the combine, then the root's
  // loop over the 96 means.
  const std::string text = InInputFusion(kReducers, R"(
  x = f32[4000,96] parameter(0)
  sq = f32[4000,96] multiply(x, x)
  z = f32[] constant(0)
  s = f32[96] reduce(sq, z), dimensions={0}, to_apply=add
  c = f32[] constant(4000)
  cb = f32[96] broadcast(c), dimensions={}
  ROOT m = f32[96] divide(s, cb)
)");
  KernelSpec spec = SpecOfRoot(text);
  ASSERT_EQ(spec.phases.size(), 3u);
  EXPECT_EQ(spec.phases[0].tasks, 5);
  EXPECT_EQ(spec.scratch_bytes, 384 + 5 * 384);
  testing::ExpectMatchesEvaluator(text, {}, kFloat);
}

TEST(CpuColumnReductionTest, IndependentMaterialisedReductionsShareOneSweep) {
  // Batch norm's gradient in small: sum(dy) and sum(dy * x) read nothing materialised and share
  // one sweep; sum(x * k) reads their result k, so it is a second sweep; then the outputs.
  const std::string text = InInputFusion(kReducers, R"(
  x = f32[4000,96] parameter(0)
  dy = f32[4000,96] parameter(1)
  z = f32[] constant(0)
  s1 = f32[96] reduce(dy, z), dimensions={0}, to_apply=add
  p = f32[4000,96] multiply(dy, x)
  s2 = f32[96] reduce(p, z), dimensions={0}, to_apply=add
  k = f32[96] multiply(s1, s2)
  kb = f32[4000,96] broadcast(k), dimensions={1}
  q = f32[4000,96] multiply(x, kb)
  s3 = f32[96] reduce(q, z), dimensions={0}, to_apply=add
  c = f32[] constant(0.00025)
  cb = f32[96] broadcast(c), dimensions={}
  mean = f32[96] multiply(s3, cb)
  s3b = f32[4000,96] broadcast(mean), dimensions={1}
  o = f32[4000,96] subtract(q, s3b)
  s1b = f32[4000,96] broadcast(s1), dimensions={1}
  o2 = f32[4000,96] add(dy, s1b)
  ROOT t = (f32[4000,96], f32[4000,96]) tuple(o, o2)
)");
  KernelSpec spec = SpecOfRoot(text);
  // Two sweeps, each with its combine, then the outputs' loop.
  ASSERT_EQ(spec.phases.size(), 5u);
  EXPECT_EQ(spec.phases[0].tasks, 5);
  EXPECT_EQ(spec.phases[2].tasks, 5);
  testing::ExpectMatchesEvaluator(text, {}, kFloat);
}

TEST(CpuColumnReductionTest, PerColumnFactorOfASumIsComputedOncePerColumn) {
  // x / sum(x, axis=0): the divide by the broadcast sum is per element, but 1 / sum, a divide of
  // 96 values, is written to scratch once instead of computed again for each of the 4000 rows.
  const std::string text = std::string("HloModule m\n") + kReducers + R"(
fused {
  x = f32[4000,96] parameter(0)
  z = f32[] constant(0)
  s = f32[96] reduce(x, z), dimensions={0}, to_apply=add
  one = f32[] constant(1)
  ones = f32[96] broadcast(one), dimensions={}
  inv = f32[96] divide(ones, s)
  invb = f32[4000,96] broadcast(inv), dimensions={1}
  ROOT d = f32[4000,96] multiply(x, invb)
}
ENTRY e {
  x = f32[4000,96] parameter(0)
  ROOT f = f32[4000,96] fusion(x), kind=kInput, calls=fused
})";
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  llvm::LLVMContext context;
  llvm::Module llvm_module("test", context);
  auto spec = EmitKernel(*(*module)->entry_computation()->root_instruction(), "k", llvm_module);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  // The sweep, its combine, the 96 factors, then the output loop, which divides nothing.
  ASSERT_EQ(spec->phases.size(), 4u);
  EXPECT_EQ(spec->phases[2].tasks, 1);
  llvm::Function* output_loop = llvm_module.getFunction(spec->phases.back().function_name);
  ASSERT_NE(output_loop, nullptr);
  int64_t divides = 0;
  for (const llvm::BasicBlock& block : *output_loop) {
    for (const llvm::Instruction& instruction : block) {
      divides += instruction.getOpcode() == llvm::Instruction::FDiv;
    }
  }
  EXPECT_EQ(divides, 0);
  testing::ExpectMatchesEvaluator(text, {}, kFloat);
}

TEST(CpuColumnReductionTest, VariadicArgmaxKeepsTheFirstIndexAcrossSlices) {
  // Ties between slices: every row equal, so the first row's index must win, as the evaluator's
  // sequential fold keeps it; slices combine in order.
  const std::string text = InInputFusion(testing::kArgmax, R"(
  x = f32[4000,40] parameter(0)
  i = s32[4000,40] iota(), iota_dimension=0
  lo = f32[] constant(-inf)
  z = s32[] constant(0)
  ROOT r = (f32[40], s32[40]) reduce(x, i, lo, z), dimensions={0}, to_apply=argmax
)");
  EXPECT_EQ(SpecOfRoot(text).phases.size(), 2u);
  testing::ExpectMatchesEvaluator(text);
  Literal ones(Shape(PrimitiveType::F32, {4000, 40}));
  for (float& v : ones.data<float>()) v = 1.0f;
  std::vector<Literal> args;
  args.push_back(std::move(ones));
  Literal out = testing::ExpectMatchesEvaluator(text, std::move(args));
  ASSERT_EQ(out.tuple_size(), 2);
  for (int32_t i : out.tuple_element(1).data<int32_t>()) EXPECT_EQ(i, 0);
}

// The reduce at the root of the entry of `text`.
bool StridedRowReductionAtRoot(const std::string& text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() && cpu::IsStridedRowReduction(*(*module)->entry_computation()->root_instruction());
}

TEST(CpuColumnReductionTest, RowsPerVisitFollowsTheReducerTheRowStrideAndTheCache) {
  auto sum = ParseHloModule(Reduce("f32[64,128]", "f32[128]", "0", "add", "0"));
  auto max = ParseHloModule(Reduce("f32[64,16]", "f32[16]", "0", "max", "-inf"));
  ASSERT_TRUE(sum.ok() && max.ok());
  const std::vector<const HloInstruction*> sums = {(*sum)->entry_computation()->root_instruction()};
  // From memory, four rows of a line or two each, or of a page or more each: four per visit.
  EXPECT_EQ(cpu::ColumnRowsPerVisit(sums, 64, true), 4);
  EXPECT_EQ(cpu::ColumnRowsPerVisit(sums, 128, true), 4);
  EXPECT_EQ(cpu::ColumnRowsPerVisit(sums, 4096, true), 4);
  EXPECT_EQ(cpu::ColumnRowsPerVisit(sums, 65536, true), 4);
  // Rows 256 bytes to 4 KiB apart (batch norm's 128 channels: 512 bytes): one, in address order.
  EXPECT_EQ(cpu::ColumnRowsPerVisit(sums, 256, true), 1);
  EXPECT_EQ(cpu::ColumnRowsPerVisit(sums, 512, true), 1);
  EXPECT_EQ(cpu::ColumnRowsPerVisit(sums, 4095, true), 1);
  // From the cache: four at any stride.
  EXPECT_EQ(cpu::ColumnRowsPerVisit(sums, 512, false), 4);
  // A float max is several dependent instructions: one at any stride.
  EXPECT_EQ(cpu::ColumnRowsPerVisit({(*max)->entry_computation()->root_instruction()}, 64, false), 1);
}

TEST(CpuColumnReductionTest, AVisitOfPageLongRowsFoldsTheNextRowOfEachRun) {
  EXPECT_TRUE(cpu::ColumnVisitsWalkRuns(4096));
  EXPECT_TRUE(cpu::ColumnVisitsWalkRuns(65536));
  EXPECT_FALSE(cpu::ColumnVisitsWalkRuns(4095));
  EXPECT_FALSE(cpu::ColumnVisitsWalkRuns(128));
  // f32[65,1024], rows of 4 KiB: one task (66560 elements), four rows a visit, rows 0-63 in four
  // runs of 16 (a visit folds rows v, 16 + v, 32 + v, 48 + v) and row 64 after them. The order
  // shows in the rounding: with 1 in row 1, 1e8 in row 16 and -1e8 in row 32, consecutive rows
  // fold 1 into 1e8 (a float's spacing there is 8) and leave 0; the runs cancel 1e8 first and
  // leave 1.
  const std::string text = Reduce("f32[65,1024]", "f32[1024]", "0", "add", "0");
  EXPECT_EQ(SpecOfRoot(text).phases.size(), 1u);
  Literal x = testing::RandomArguments(text)[0];
  std::span<float> values = x.data<float>();
  std::fill(values.begin(), values.end(), 0.0f);
  for (int64_t c = 0; c < 1024; ++c) {
    values[1 * 1024 + c] = 1.0f;
    values[16 * 1024 + c] = 1e8f;
    values[32 * 1024 + c] = -1e8f;
  }
  std::vector<Literal> arguments;
  arguments.push_back(std::move(x));
  auto sum = testing::CompileAndRun(text, arguments);
  ASSERT_TRUE(sum.ok()) << sum.status().message();
  EXPECT_EQ(sum->data<float>()[0], 1.0f);
  EXPECT_EQ(sum->data<float>()[1023], 1.0f);
  // Sliced, with rows left over after the runs: f32[303,1030] in 4 slices of 76 rows (the last
  // of 75), each 18 visits of four runs after its first row, then 3 (2) rows one at a time.
  const std::string sliced = Reduce("f32[303,1030]", "f32[1030]", "0", "add", "0");
  EXPECT_EQ(SpecOfRoot(sliced).phases.size(), 2u);
  EXPECT_EQ(SpecOfRoot(sliced).phases[0].tasks, 4);
  testing::ExpectMatchesEvaluator(sliced, {}, kFloat);
}

// The float adds in the sweep phase of the kernel emitted for the entry's root: the rows a visit
// folds (ColumnRowsPerVisit), plus one for the rest loop when a visit folds several.
int SweepAdds(const std::string& text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok()) return -1;
  llvm::LLVMContext context;
  llvm::Module llvm_module("test", context);
  auto spec = EmitKernel(*(*module)->entry_computation()->root_instruction(), "k", llvm_module);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  const llvm::Function* sweep = llvm_module.getFunction("k");
  if (!spec.ok() || sweep == nullptr) return -1;
  int adds = 0;
  for (const llvm::BasicBlock& block : *sweep) {
    for (const llvm::Instruction& i : block) adds += i.getOpcode() == llvm::Instruction::FAdd;
  }
  return adds;
}

TEST(CpuColumnReductionTest, TheEmittedSweepFoldsAsTheRowStrideAndTheCacheAsk) {
  // Only emitted, never run: the large operands (2 GiB, 1.5 GiB) stream from memory on any
  // machine, the small ones (512 KiB) stay in the cache.
  // Batch norm's sum over N, H and W, rows of 128 channels 512 bytes apart: one per visit from
  // memory, four (and the rest loop's one) from the cache.
  EXPECT_EQ(SweepAdds(Reduce("f32[16384,16,16,128]", "f32[128]", "0,1,2", "add", "0")), 1);
  EXPECT_EQ(SweepAdds(Reduce("f32[8,16,16,128]", "f32[128]", "0,1,2", "add", "0")), 5);
  // Rows of 2048 channels, 8 KiB apart, each its own stream: four per visit from memory too.
  EXPECT_EQ(SweepAdds(Reduce("f32[16384,16,2048]", "f32[2048]", "0,1", "add", "0")), 5);
  // NCHW batch statistics, 64 lanes: the sweep walks rows of W, 256 bytes apart, not the 16 KiB
  // between channels nor the 96 KiB between images.
  EXPECT_EQ(SweepAdds(Reduce("f32[16384,6,64,64]", "f32[6]", "0,2,3", "add", "0")), 1);
  EXPECT_EQ(SweepAdds(Reduce("f32[4,6,64,64]", "f32[6]", "0,2,3", "add", "0")), 5);
}

// Vector values the sweep function of `text`'s root kernel carries from one row to the next
// (phis of <16 x float>), its IR optimized as the JIT optimizes it.
int SweepVectorPhis(const std::string& text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok()) return -1;
  llvm::LLVMContext context;
  llvm::Module llvm_module("test", context);
  auto spec = EmitKernel(*(*module)->entry_computation()->root_instruction(), "k", llvm_module);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  if (!spec.ok()) return -1;
  if (!OptimizeModuleForHost(llvm_module, 3).ok()) return -1;
  const llvm::Function* sweep = llvm_module.getFunction("k");
  if (sweep == nullptr) return -1;
  int phis = 0;
  for (const llvm::BasicBlock& block : *sweep) {
    for (const llvm::PHINode& phi : block.phis()) {
      auto* vector = llvm::dyn_cast<llvm::FixedVectorType>(phi.getType());
      phis += vector != nullptr && vector->getNumElements() == 16 && vector->getElementType()->isFloatTy();
    }
  }
  return phis;
}

// Batch norm's sums of x and x * x over rows of 128 channels.
std::string SumAndSumOfSquares(const std::string& shape) {
  return InInputFusion(kReducers, "  x = " + shape + R"( parameter(0)
  sq = )" + shape + R"( multiply(x, x)
  z = f32[] constant(0)
  s = f32[128] reduce(x, z), dimensions={0}, to_apply=add
  s2 = f32[128] reduce(sq, z), dimensions={0}, to_apply=add
  ROOT t = (f32[128], f32[128]) tuple(s, s2)
)");
}

TEST(CpuColumnReductionTest, AWholeRowTileOfAccumulatorsStaysInRegisters) {
  // Two sums of 128 channels, 1 KiB of accumulators: sixteen vectors carried across the rows,
  // not loaded and stored at every row, in one task and in slices; 1024 channels (4 KiB) stay
  // in memory.
  EXPECT_GE(SweepVectorPhis(SumAndSumOfSquares("f32[512,128]")), 16);
  EXPECT_GE(SweepVectorPhis(SumAndSumOfSquares("f32[8192,128]")), 16);
  EXPECT_EQ(SweepVectorPhis(Reduce("f32[512,1024]", "f32[1024]", "0", "add", "0")), 0);
  for (const char* shape : {"f32[512,128]", "f32[8192,128]", "f32[3,128]"}) {
    SCOPED_TRACE(shape);
    testing::ExpectMatchesEvaluator(SumAndSumOfSquares(shape), {}, kFloat);
  }
  testing::ExpectMatchesEvaluator(R"(HloModule m
add { a = f64[] parameter(0)  b = f64[] parameter(1)  ROOT r = f64[] add(a, b) }
ENTRY e {
  x = f64[300,32] parameter(0)
  z = f64[] constant(0)
  ROOT r = f64[32] reduce(x, z), dimensions={0}, to_apply=add
})", {}, kFloat);
}

// The levels PlanColumnSweepLevels gives batch norm's column sums over N, H and W (channels
// kept): `extra` is appended to the fused computation, `roots` its tuple's operands.
std::unordered_map<std::string, int> SweepLevels(const std::string& extra, const std::string& roots) {
  std::string tuple = "(f32[16]";
  for (char c : roots) {
    if (c == ',') tuple += ", f32[16]";
  }
  tuple += ")";
  const std::string text = std::string("HloModule m\n") + kReducers + R"(
fused {
  x = f32[64,8,8,16] parameter(0)
  dy = f32[64,8,8,16] parameter(1)
  z = f32[] constant(0)
  sx = f32[16] reduce(x, z), dimensions={0,1,2}, to_apply=add
  c = f32[] constant(0.000244140625)
  cb = f32[16] broadcast(c), dimensions={}
  mean = f32[16] multiply(sx, cb)
  mb = f32[64,8,8,16] broadcast(mean), dimensions={3}
  xm = f32[64,8,8,16] subtract(x, mb)
  sq = f32[64,8,8,16] multiply(xm, xm)
  sv = f32[16] reduce(sq, z), dimensions={0,1,2}, to_apply=add
  sdy = f32[16] reduce(dy, z), dimensions={0,1,2}, to_apply=add
)" + extra + "  ROOT t = " + tuple + " tuple(" + roots + R"()
}
ENTRY e {
  x = f32[64,8,8,16] parameter(0)
  dy = f32[64,8,8,16] parameter(1)
  ROOT f = )" + tuple + R"( fusion(x, dy), kind=kInput, calls=fused
})";
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok()) return {};
  std::vector<const HloInstruction*> reductions;
  for (const HloInstruction* i :
       (*module)->entry_computation()->root_instruction()->fused_computation()->MakeInstructionPostOrder()) {
    if (i->opcode() == HloOpcode::kReduce) reductions.push_back(i);
  }
  std::unordered_map<std::string, int> levels;
  for (const auto& [reduce, level] : cpu::PlanColumnSweepLevels(reductions)) levels[reduce->name()] = level;
  return levels;
}

TEST(CpuColumnSweepLevelsTest, ASumThatNeedsNoStatisticWaitsForTheSweepThatReadsItsArray) {
  // The mean's sweep reads x alone; the variance's and sum(dy * (x - mean))'s read x and dy. So
  // sum(dy), which could go first, joins them: two sweeps of the batch where it would be three.
  EXPECT_EQ(SweepLevels("  g = f32[64,8,8,16] multiply(dy, xm)\n"
                        "  sg = f32[16] reduce(g, z), dimensions={0,1,2}, to_apply=add\n",
                        "sx, sv, sdy, sg"),
            (std::unordered_map<std::string, int>{{"sx", 0}, {"sv", 1}, {"sdy", 1}, {"sg", 1}}));
  // Where no later sweep reads dy, sum(dy) goes first, beside the mean.
  EXPECT_EQ(SweepLevels("", "sx, sv, sdy"),
            (std::unordered_map<std::string, int>{{"sx", 0}, {"sv", 1}, {"sdy", 0}}));
}

TEST(CpuColumnSweepLevelsTest, AReductionStaysBelowTheReductionsThatReadIt) {
  // sum(dy) read by a third level's sum, each sum one level past the sums it reads: though the
  // only later sweep that reads dy is that third level's, sum(dy) must run before it, and with
  // no sweep between that reads dy it goes first.
  EXPECT_EQ(SweepLevels("  sd = f32[16] add(sv, sdy)\n"
                        "  sdb = f32[64,8,8,16] broadcast(sd), dimensions={3}\n"
                        "  h = f32[64,8,8,16] multiply(dy, sdb)\n"
                        "  sh = f32[16] reduce(h, z), dimensions={0,1,2}, to_apply=add\n",
                        "sx, sv, sdy, sh"),
            (std::unordered_map<std::string, int>{{"sx", 0}, {"sv", 1}, {"sdy", 0}, {"sh", 2}}));
}

TEST(CpuStridedRowReductionTest, WhichReductionsAreSweptWithLanes) {
  // A reduced dimension major to the kept one, a short minor dimension, enough rows.
  EXPECT_TRUE(StridedRowReductionAtRoot(Reduce("f32[64,256,64]", "f32[256]", "0,2", "add", "0")));
  EXPECT_TRUE(StridedRowReductionAtRoot(Reduce("f32[4,6,10,12]", "f32[6]", "0,2,3", "max", "-inf")));
  EXPECT_TRUE(StridedRowReductionAtRoot(Reduce("s32[64,6,10]", "s32[6]", "0,2", "imin", "0")));
  // The minor dimension longer than kMaxLanes: a row reduction's loop is better.
  EXPECT_FALSE(StridedRowReductionAtRoot(Reduce("f32[64,64,1024]", "f32[64]", "0,2", "add", "0")));
  // Fewer than 8 rows besides the lanes: the partials would be too large a share.
  EXPECT_FALSE(StridedRowReductionAtRoot(Reduce("f32[4,16,64]", "f32[16]", "0,2", "add", "0")));
  // Reduced dimensions all minor to the kept ones: a row reduction.
  EXPECT_FALSE(StridedRowReductionAtRoot(Reduce("f32[3,5,70]", "f32[3]", "1,2", "add", "0")));
  // The minor dimension kept: a column reduction.
  EXPECT_FALSE(StridedRowReductionAtRoot(Reduce("f32[64,5,70]", "f32[5,70]", "0", "add", "0")));
  // A reducer that is not one associative operation of its parameters.
  const std::string sub = std::string("HloModule m\n") +
                          "sub { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] subtract(a, b) }\n"
                          "ENTRY e {\n  x = f32[64,8,16] parameter(0)\n  z = f32[] constant(0)\n"
                          "  ROOT r = f32[8] reduce(x, z), dimensions={0,2}, to_apply=sub\n}\n";
  EXPECT_FALSE(StridedRowReductionAtRoot(sub));
}

TEST(CpuStridedRowReductionTest, LanesMatchTheEvaluator) {
  // 20 lanes (not a whole vector), a sweep and a lane combine phase.
  const std::string text = Reduce("f32[32,200,20]", "f32[200]", "0,2", "add", "0");
  KernelSpec spec = SpecOfRoot(text);
  ASSERT_EQ(spec.phases.size(), 2u);
  EXPECT_EQ(spec.scratch_bytes, (200 * 20 * 4 + 63) / 64 * 64);
  testing::ExpectMatchesEvaluator(text, {}, kFloat);
  // NCHW batch statistics: rows N x H, lanes W.
  testing::ExpectMatchesEvaluator(Reduce("f32[4,6,10,12]", "f32[6]", "0,2,3", "add", "0"), {}, kFloat);
  testing::ExpectMatchesEvaluator(Reduce("f32[4,6,10,12]", "f32[6]", "0,2,3", "max", "-inf"));
  // Rows of 64 lanes, 256 bytes apart, from the cache: four per visit (the fold each stride and
  // size emits: TheEmittedSweepFoldsAsTheRowStrideAndTheCacheAsk).
  testing::ExpectMatchesEvaluator(Reduce("f32[5,6,9,64]", "f32[6]", "0,2,3", "add", "0"), {}, kFloat);
  // Integers with a non-identity init: it enters once, in the combine.
  testing::ExpectMatchesEvaluator(Reduce("s32[64,6,10]", "s32[6]", "0,2", "iadd", "7"));
  testing::ExpectMatchesEvaluator(Reduce("s32[64,6,10]", "s32[6]", "0,2", "imin", "2147483647"));
  // Sliced too: 640000 elements over two outputs afford four slices.
  const std::string sliced = Reduce("f32[8000,2,40]", "f32[2]", "0,2", "add", "0");
  spec = SpecOfRoot(sliced);
  ASSERT_EQ(spec.phases.size(), 2u);
  EXPECT_EQ(spec.phases[0].tasks, 8);
  testing::ExpectMatchesEvaluator(sliced, {}, kFloat);
  // A non-default layout: the minor dimension is logical dimension 0.
  testing::ExpectMatchesEvaluator(Reduce("f32[12,30,20]{0,2,1}", "f32[20]", "0,1", "add", "0"), {}, kFloat);
}

TEST(CpuStridedRowReductionTest, FusedProducerAndSiblingsShareTheSweep) {
  const std::string text = InInputFusion(kReducers, R"(
  x = f32[16,24,48] parameter(0)
  sq = f32[16,24,48] multiply(x, x)
  z = f32[] constant(0)
  s = f32[24] reduce(x, z), dimensions={0,2}, to_apply=add
  s2 = f32[24] reduce(sq, z), dimensions={0,2}, to_apply=add
  ROOT t = (f32[24], f32[24]) tuple(s, s2)
)");
  KernelSpec spec = SpecOfRoot(text);
  ASSERT_EQ(spec.phases.size(), 2u);
  testing::ExpectMatchesEvaluator(text, {}, kFloat);
}

// --- Elementwise outputs written by the sweep ---

// The MLP's bias gradient as JAX's step fuses it, over T[rows, cols]: the ReLU's mask of the
// pre-activation `a` times the gradient `g` is an output (the next product's operand) and the
// operand of the column sum; the sum feeds the bias update (materialised: `nb` reads it) or, with
// `sum_out`, is itself an output.
std::string BiasGradient(const std::string& type, int64_t rows, int64_t cols, bool sum_out = false) {
  const std::string rc = type + "[" + std::to_string(rows) + "," + std::to_string(cols) + "]";
  const std::string c = type + "[" + std::to_string(cols) + "]";
  const std::string reducer = "add_" + type + " { a = " + type + "[] parameter(0)  b = " + type +
                              "[] parameter(1)  ROOT r = " + type + "[] add(a, b) }\n";
  std::string body = "  a = " + rc + " parameter(0)\n  g = " + rc + " parameter(1)\n  b = " + c +
                     " parameter(2)\n  z = " + type + "[] constant(0)\n  zb = " + rc +
                     " broadcast(z), dimensions={}\n  p = pred[" + rc.substr(rc.find('[') + 1) +
                     " compare(a, zb), direction=GT\n  m = " + rc + " select(p, g, zb)\n  s = " + c +
                     " reduce(m, z), dimensions={0}, to_apply=add_" + type + "\n";
  if (sum_out) return InInputFusion(reducer, body + "  ROOT t = (" + rc + ", " + c + ") tuple(m, s)\n");
  body += "  k = " + type + "[] constant(0.1)\n  kb = " + c + " broadcast(k), dimensions={}\n  u = " + c +
          " multiply(s, kb)\n  nb = " + c + " subtract(b, u)\n  ROOT t = (" + rc + ", " + c +
          ") tuple(m, nb)\n";
  return InInputFusion(reducer, body);
}

// Arguments for BiasGradient: random, with NaN, infinities and zeros of both signs in `a` and `g`
// (the mask of a NaN or -0 pre-activation is 0: JAX's ReLU gradient).
std::vector<Literal> SpecialArguments(const std::string& text) {
  std::vector<Literal> args = testing::RandomArguments(text);
  const double special[] = {std::nan(""), INFINITY, -INFINITY, -0.0, 0.0, 1e-30};
  for (int k = 0; k < 2; ++k) {
    for (int64_t i = 0; i < args[k].element_count(); i += 7 + k) args[k].SetFromDouble(i, special[(i / 7 + k) % 6]);
  }
  return args;
}

// The kernel's outputs equal the evaluator's: the elementwise ones bit for bit (signs of zero and
// NaNs included), the sums within `sums` (a sliced sweep adds in another order).
void ExpectSweptOutputsMatch(const std::string& text, ErrorSpec sums) {
  SCOPED_TRACE(text.substr(text.find("fused {")));
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  const std::vector<Literal> args = SpecialArguments(text);
  auto expected = EvaluateModule(**module, args);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto actual = testing::CompileAndRun(text, args);
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  const Literal& want = expected->tuple_elements()[0];
  const Literal& got = actual->tuple_elements()[0];
  ASSERT_EQ(want.size_bytes(), got.size_bytes());
  EXPECT_EQ(std::memcmp(want.untyped_data(), got.untyped_data(), want.size_bytes()), 0)
      << "the masked gradient differs from the evaluator's";
  Status match = ExpectLiteralNear(*expected, *actual, sums);
  EXPECT_TRUE(match.ok()) << match.message();
}

TEST(CpuColumnSweepOutputsTest, TheMaskedGradientIsWrittenByTheSweep) {
  // The MLP step's shape: the sweep (one task: 32K elements) writes m as it sums it, then the
  // bias update's loop. Before, a loop of its own read a and g again for m.
  KernelSpec spec = SpecOfRoot(BiasGradient("f32", 128, 256));
  ASSERT_EQ(spec.phases.size(), 2u);
  EXPECT_EQ(spec.phases[0].tasks, 1);
  EXPECT_EQ(spec.phases[1].tasks, 1);
  // The sum an output itself: the sweep alone, and sliced, the sweep and the combine.
  EXPECT_EQ(SpecOfRoot(BiasGradient("f32", 128, 256, /*sum_out=*/true)).phases.size(), 1u);
  spec = SpecOfRoot(BiasGradient("f32", 3001, 100, /*sum_out=*/true));
  ASSERT_EQ(spec.phases.size(), 2u);
  EXPECT_GT(spec.phases[0].tasks, 1);
}

TEST(CpuColumnSweepOutputsTest, MatchTheEvaluatorOverWidthsAndRows) {
  // Widths from one column to 100 (partial vectors, several tiles), rows that are no multiple of
  // the sweep's four-row visits, sliced sweeps (3001 x 100) and one-task ones; f32 and bf16.
  for (const int64_t cols : {1, 3, 16, 17, 100}) {
    for (const int64_t rows : {1, 37, 3001}) {
      ExpectSweptOutputsMatch(BiasGradient("f32", rows, cols), kFloat);
      ExpectSweptOutputsMatch(BiasGradient("f32", rows, cols, /*sum_out=*/true), kFloat);
    }
  }
  for (const int64_t cols : {5, 64}) {
    ExpectSweptOutputsMatch(BiasGradient("bf16", 37, cols), {0.1, 0.05, true});
    ExpectSweptOutputsMatch(BiasGradient("bf16", 37, cols, /*sum_out=*/true), {0.1, 0.05, true});
  }
}

TEST(CpuColumnSweepOutputsTest, OutputsWithOtherUsersAndOutputsLeftToTheLoops) {
  // m read by the sum and by a second output, q = m * a: both written by the sweep.
  const std::string both = InInputFusion(kReducers, R"(
  a = f32[300,40] parameter(0)
  g = f32[300,40] parameter(1)
  z = f32[] constant(0)
  zb = f32[300,40] broadcast(z), dimensions={}
  p = pred[300,40] compare(a, zb), direction=GT
  m = f32[300,40] select(p, g, zb)
  q = f32[300,40] multiply(m, a)
  s = f32[40] reduce(m, z), dimensions={0}, to_apply=add
  ROOT t = (f32[300,40], f32[40], f32[300,40]) tuple(m, s, q)
)");
  EXPECT_EQ(SpecOfRoot(both).phases.size(), 1u);
  testing::ExpectMatchesEvaluator(both, SpecialArguments(both), kFloat);
  // y reads the sum, so it is a later loop; it reads a, which m reads too, so m stays in that
  // loop beside it (an output in place over a would clobber what y reads there).
  const std::string later = InInputFusion(kReducers, R"(
  a = f32[300,40] parameter(0)
  g = f32[300,40] parameter(1)
  z = f32[] constant(0)
  zb = f32[300,40] broadcast(z), dimensions={}
  p = pred[300,40] compare(a, zb), direction=GT
  m = f32[300,40] select(p, g, zb)
  s = f32[40] reduce(m, z), dimensions={0}, to_apply=add
  sb = f32[300,40] broadcast(s), dimensions={1}
  y = f32[300,40] add(a, sb)
  ROOT t = (f32[300,40], f32[300,40]) tuple(m, y)
)");
  EXPECT_EQ(SpecOfRoot(later).phases.size(), 2u);
  testing::ExpectMatchesEvaluator(later, SpecialArguments(later), kFloat);
  // A strided row reduction's sweep (lanes) writes its elementwise output too.
  const std::string lanes = InInputFusion(kReducers, R"(
  x = f32[32,20,12] parameter(0)
  e = f32[32,20,12] multiply(x, x)
  z = f32[] constant(0)
  s = f32[20] reduce(e, z), dimensions={0,2}, to_apply=add
  ROOT t = (f32[20], f32[32,20,12]) tuple(s, e)
)");
  EXPECT_EQ(SpecOfRoot(lanes).phases.size(), 2u);
  testing::ExpectMatchesEvaluator(lanes, {}, kFloat);
}

// The bias gradient's kernel over `a`, written by a library call (a kCustom fusion of a product)
// or, with `a_from_library` false, an entry parameter.
std::string BiasGradientAfterProduct(bool a_from_library) {
  const std::string a = a_from_library ? "  a = f32[128,256] fusion(x, w), kind=kCustom, calls=product\n"
                                       : "  a = f32[128,256] parameter(3)\n";
  return std::string("HloModule m\n") + kReducers +
         "product {\n  x = f32[128,64] parameter(0)\n  w = f32[64,256] parameter(1)\n"
         "  ROOT d = f32[128,256] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n"
         "fused {\n  a = f32[128,256] parameter(0)\n  g = f32[128,256] parameter(1)\n"
         "  z = f32[] constant(0)\n  zb = f32[128,256] broadcast(z), dimensions={}\n"
         "  p = pred[128,256] compare(a, zb), direction=GT\n  m = f32[128,256] select(p, g, zb)\n"
         "  ROOT s = f32[256] reduce(m, z), dimensions={0}, to_apply=add\n}\n"
         "ENTRY e {\n  x = f32[128,64] parameter(0)\n  w = f32[64,256] parameter(1)\n"
         "  g = f32[128,256] parameter(2)\n" + a +
         "  ROOT f = f32[256] fusion(a, g), kind=kInput, calls=fused\n}\n";
}

TEST(CpuColumnSweepOutputsTest, ASweepOverALibraryCallsOutputIsSplitAcrossTheCores) {
  // Two slices, each a chunk of its own for the runtime: each core sums the rows it wrote.
  KernelSpec spec = SpecOfRoot(BiasGradientAfterProduct(true));
  ASSERT_EQ(spec.phases.size(), 2u);
  EXPECT_EQ(spec.phases[0].tasks, 2);
  EXPECT_EQ(spec.phases[0].chunk_work, cpu::kColumnSpreadMinTaskElements);
  EXPECT_EQ(spec.phases[0].work_per_task, 64 * 256);
  testing::ExpectMatchesEvaluator(BiasGradientAfterProduct(true), {}, kFloat);
  // Over an entry parameter: one task at the runtime's default grain.
  spec = SpecOfRoot(BiasGradientAfterProduct(false));
  ASSERT_EQ(spec.phases.size(), 1u);
  EXPECT_EQ(spec.phases[0].tasks, 1);
  EXPECT_EQ(spec.phases[0].chunk_work, 0);
}

}  // namespace
}  // namespace xlens::codegen

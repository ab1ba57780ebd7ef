// What the kernel emitter makes of a fusion: its phases, their task counts, and valid IR.
#include "compiler/codegen/kernel_emitter.h"

#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen_test_util.h"
#include "compiler/codegen/cpu/cpu_jit.h"
#include "compiler/codegen/scalar_ops.h"
#include "compiler/hlo/parser.h"

namespace xlens::codegen {
namespace {

// Emits the kernel of the instruction called `name` in the entry of `text`.
// With `optimized_ir`, also the module's IR after the host's optimization pipeline.
StatusOr<KernelSpec> EmitFor(const std::string& text, const std::string& name,
                             std::string* errors = nullptr, std::string* optimized_ir = nullptr) {
  auto module = ParseHloModule(text);
  if (!module.ok()) return module.status();
  const HloInstruction* hlo = (*module)->entry_computation()->GetInstructionWithName(name);
  if (hlo == nullptr) return Error("no instruction " + name);
  llvm::LLVMContext context;
  llvm::Module llvm_module("test", context);
  auto spec = EmitKernel(*hlo, SanitizeName(name), llvm_module);
  std::string verify;
  llvm::raw_string_ostream os(verify);
  if (llvm::verifyModule(llvm_module, &os)) return Error("invalid IR: " + verify);
  if (errors) *errors = verify;
  if (optimized_ir != nullptr && spec.ok()) {
    RETURN_IF_ERROR(OptimizeModuleForHost(llvm_module, 2));
    llvm::raw_string_ostream ir(*optimized_ir);
    llvm_module.print(ir, nullptr);
  }
  return spec;
}

constexpr const char* kSoftmax = R"(HloModule softmax
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
fused {
  x = f32[64,100] parameter(0)
  lo = f32[] constant(-inf)
  m = f32[64] reduce(x, lo), dimensions={1}, to_apply=max
  mb = f32[64,100] broadcast(m), dimensions={0}
  s = f32[64,100] subtract(x, mb)
  e = f32[64,100] exponential(s)
  z = f32[] constant(0)
  sum = f32[64] reduce(e, z), dimensions={1}, to_apply=add
  sb = f32[64,100] broadcast(sum), dimensions={0}
  ROOT d = f32[64,100] divide(e, sb)
}
ENTRY e {
  x = f32[64,100] parameter(0)
  ROOT f = f32[64,100] fusion(x), kind=kLoop, calls=fused
})";

TEST(KernelEmitterTest, SoftmaxComputesEachRowReductionOncePerRow) {
  auto spec = EmitFor(kSoftmax, "f");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  // One task per row: the row's max, its sum, then its outputs; nothing goes through scratch.
  ASSERT_EQ(spec->phases.size(), 1u);
  EXPECT_EQ(spec->phases[0].tasks, 64);
  EXPECT_EQ(spec->scratch_bytes, 0);
  // Its tasks are rows of the reductions as much as of the outputs: not published as runs.
  EXPECT_EQ(spec->phases[0].elements_per_task, 0);
  testing::ExpectMatchesEvaluator(kSoftmax, {}, {1e-6, 1e-5});
}

TEST(KernelEmitterTest, ALongVectorIsSplitIntoBlocksForThreads) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[1000000] parameter(0)
  ROOT n = f32[1000000] negate(a)
})";
  auto spec = EmitFor(text, "n");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->phases.size(), 1u);
  EXPECT_EQ(spec->phases[0].tasks, (1000000 + 8191) / 8192);
  EXPECT_FALSE(spec->phases[0].sequential);
  // The last block is short: the tasks are not runs of one length.
  EXPECT_EQ(spec->phases[0].elements_per_task, 0);
  // Rows of 3 x 8192 elements: task t is the t-th run of 8192, which the phase publishes.
  const char* even = R"(HloModule m
ENTRY e {
  a = f32[5,24576] parameter(0)
  ROOT n = f32[5,24576] negate(a)
})";
  auto even_spec = EmitFor(even, "n");
  ASSERT_TRUE(even_spec.ok()) << even_spec.status().message();
  ASSERT_EQ(even_spec->phases.size(), 1u);
  EXPECT_EQ(even_spec->phases[0].tasks, 15);
  EXPECT_EQ(even_spec->phases[0].elements_per_task, 8192);
}

TEST(KernelEmitterTest, ScatterAppliesUpdatesInOneSequentialPhase) {
  const char* text = R"(HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY e {
  a = f32[8,3] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4,3] parameter(2)
  ROOT s = f32[8,3] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})";
  auto spec = EmitFor(text, "s");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->phases.size(), 2u);
  EXPECT_FALSE(spec->phases[0].sequential);
  EXPECT_TRUE(spec->phases[1].sequential);
  // Duplicate indices accumulate in order.
  std::vector<Literal> args;
  args.push_back(Literal(Shape(PrimitiveType::F32, {8, 3})));
  Literal indices(Shape(PrimitiveType::S32, {4, 1}));
  const int32_t idx[] = {2, 2, 7, 9};  // 9 is out of bounds: skipped
  for (int k = 0; k < 4; ++k) indices.data<int32_t>()[k] = idx[k];
  args.push_back(std::move(indices));
  Literal updates(Shape(PrimitiveType::F32, {4, 3}));
  for (int k = 0; k < 12; ++k) updates.data<float>()[k] = 1.0f + k;
  args.push_back(std::move(updates));
  Literal out = testing::ExpectMatchesEvaluator(text, std::move(args));
  EXPECT_EQ(out.data<float>()[2 * 3 + 0], 1.0f + 4.0f);
}

TEST(KernelEmitterTest, ColumnReductionsSweepRowsOverBlocksOfOutputs) {
  // Reducing dimension 0 of a row-major [512,300] keeps the contiguous dimension: a task owns
  // the whole row of 300 outputs and sweeps a slice of the rows over it (153600 elements afford
  // two slices of 256 rows at the runtime's grain), a second phase combines the two.
  const char* text = R"(HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY e {
  x = f32[512,300] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[300] reduce(x, z), dimensions={0}, to_apply=add
})";
  auto spec = EmitFor(text, "r");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->phases.size(), 2u);
  EXPECT_EQ(spec->phases[0].tasks, 2);
  EXPECT_EQ(spec->phases[0].work_per_task, 300 * 256);
  testing::ExpectMatchesEvaluator(text, {}, {1e-5, 1e-5});
  // A variadic column reduction inside a fusion whose result other fused ops read.
  const std::string fused = std::string("HloModule m\n") + testing::kArgmax + R"(
fused {
  x = f32[64,33] parameter(0)
  i = s32[64,33] iota(), iota_dimension=0
  lo = f32[] constant(-inf)
  z = s32[] constant(0)
  r = (f32[33], s32[33]) reduce(x, i, lo, z), dimensions={0}, to_apply=argmax
  m = f32[33] get-tuple-element(r), index=0
  mb = f32[64,33] broadcast(m), dimensions={1}
  ROOT d = f32[64,33] subtract(x, mb)
}
ENTRY e {
  x = f32[64,33] parameter(0)
  ROOT f = f32[64,33] fusion(x), kind=kLoop, calls=fused
})";
  auto fused_spec = EmitFor(fused, "f");
  ASSERT_TRUE(fused_spec.ok()) << fused_spec.status().message();
  EXPECT_EQ(fused_spec->phases.size(), 2u);
  testing::ExpectMatchesEvaluator(fused);
}

// The ReLU gradient of an NHWC activation with 8 channels, its incoming gradient read through a
// reshape from the dense layer's [batch, features] (as JAX differentiates a small CNN).
constexpr const char* kReluGradient = R"(HloModule m
fused {
  x = f32[32,14,14,8] parameter(0)
  zero = f32[] constant(0)
  zb = f32[32,14,14,8] broadcast(zero), dimensions={}
  one = f32[] constant(1)
  ob = f32[32,14,14,8] broadcast(one), dimensions={}
  two = f32[] constant(2)
  tb = f32[32,14,14,8] broadcast(two), dimensions={}
  m = f32[32,14,14,8] maximum(x, zb)
  at_zero = pred[32,14,14,8] compare(zb, m), direction=EQ
  divisor = f32[32,14,14,8] select(at_zero, tb, ob)
  kept = pred[32,14,14,8] compare(x, m), direction=EQ
  mask = f32[32,14,14,8] select(kept, ob, zb)
  q = f32[32,14,14,8] divide(mask, divisor)
  g = f32[32,1568] parameter(1)
  gr = f32[32,14,14,8] reshape(g)
  ROOT r = f32[32,14,14,8] multiply(gr, q)
}
ENTRY e {
  x = f32[32,14,14,8] parameter(0)
  g = f32[32,1568] parameter(1)
  ROOT f = f32[32,14,14,8] fusion(x, g), kind=kLoop, calls=fused
})";

TEST(KernelEmitterTest, AColumnSweepLoadsWholeVectorsOfItsRows) {
  // The sweep's offsets (its row's times the stride, plus the vectorized column) are summed
  // major first: summed the other way, the vectorizer no longer saw the column loads as
  // consecutive and gathered them, a column sum over f32[4096,1024] 4x slower.
  const char* text = R"(HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY e {
  x = f32[4096,1024] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[1024] reduce(x, z), dimensions={0}, to_apply=add
})";
  std::string ir;
  auto spec = EmitFor(text, "r", nullptr, &ir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_THAT(ir, ::testing::HasSubstr("load <16 x float>"));
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("gather")));
}

TEST(KernelEmitterTest, ColumnSlicesOfAWiderRowLoadWholeVectors) {
  // The LSTM gates: slices of one [64, 2048] product's columns. Each slice's start joins the
  // row's term before the column counter is added (IrArray): summed after it, LLVM rewrote the
  // offsets into ors the vectorizer no longer read as consecutive, and it gathered every load.
  const char* text = R"(HloModule m
fused {
  p = f32[64,2048] parameter(0)
  i = f32[64,512] slice(p), slice={[0:64], [512:1024]}
  g = f32[64,512] slice(p), slice={[0:64], [1536:2048]}
  ROOT r = f32[64,512] multiply(i, g)
}
ENTRY e {
  p = f32[64,2048] parameter(0)
  ROOT f = f32[64,512] fusion(p), kind=kLoop, calls=fused
})";
  std::string ir;
  auto spec = EmitFor(text, "f", nullptr, &ir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_THAT(ir, ::testing::HasSubstr("load <"));
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("gather"))) << ir;
}

TEST(KernelEmitterTest, AShortMinorDimensionJoinsTheDimensionsAboveItInOneUnitStrideLoop) {
  // A task per image: its 14x14x8 elements as one loop, not 196 tasks of 8 (whose stride-8
  // accesses the vectorizer shuffles apart), and no division left per element once optimized.
  std::string ir;
  auto spec = EmitFor(kReluGradient, "f", nullptr, &ir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->phases.size(), 1u);
  EXPECT_EQ(spec->phases[0].tasks, 32);
  EXPECT_EQ(spec->phases[0].work_per_task, 14 * 14 * 8);
  EXPECT_EQ(spec->phases[0].elements_per_task, 14 * 14 * 8);
  EXPECT_THAT(ir, ::testing::HasSubstr("load <16 x float>"));
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("udiv")));
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("urem")));
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("gather")));
  // Bit for bit what the evaluator computes, zeros (the divisor 2) included.
  std::vector<Literal> args = testing::RandomArguments(kReluGradient);
  for (int64_t k = 0; k < args[0].shape().num_elements(); k += 7) args[0].data<float>()[k] = 0.0f;
  testing::ExpectMatchesEvaluator(kReluGradient, std::move(args));
}

TEST(KernelEmitterTest, ABroadcastOrTransposedOperandKeepsTheLoopOverTheMinorDimension) {
  // A per-channel bias read at every element: joined dimensions would index it by a remainder
  // per element, so the loop stays a task per row of 8.
  const char* text = R"(HloModule m
fused {
  x = f32[4,6,6,8] parameter(0)
  b = f32[8] parameter(1)
  bb = f32[4,6,6,8] broadcast(b), dimensions={3}
  ROOT r = f32[4,6,6,8] add(x, bb)
}
ENTRY e {
  x = f32[4,6,6,8] parameter(0)
  b = f32[8] parameter(1)
  ROOT f = f32[4,6,6,8] fusion(x, b), kind=kLoop, calls=fused
})";
  auto spec = EmitFor(text, "f");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->phases.size(), 1u);
  EXPECT_EQ(spec->phases[0].tasks, 4 * 6 * 6);
  EXPECT_EQ(spec->phases[0].elements_per_task, 8);
  testing::ExpectMatchesEvaluator(text);
  // A transposed layout: the loop runs the physical order (dimension 1 minor, then 3, 2, 0).
  const char* transposed = R"(HloModule m
ENTRY e {
  x = f32[4,3,6,5]{1,3,2,0} parameter(0)
  y = f32[4,3,6,5]{1,3,2,0} parameter(1)
  ROOT r = f32[4,3,6,5]{1,3,2,0} multiply(x, y)
})";
  auto joined = EmitFor(transposed, "r");
  ASSERT_TRUE(joined.ok()) << joined.status().message();
  ASSERT_EQ(joined->phases.size(), 1u);
  EXPECT_EQ(joined->phases[0].tasks, 1);
  testing::ExpectMatchesEvaluator(transposed);
  // An operand read through a transpose: its offsets would not fold, so a task per row of 10.
  const char* through_transpose = R"(HloModule m
fused {
  g = f32[10,300] parameter(0)
  t = f32[300,10] transpose(g), dimensions={1,0}
  w = f32[300,10] parameter(1)
  ROOT r = f32[300,10] subtract(w, t)
}
ENTRY e {
  g = f32[10,300] parameter(0)
  w = f32[300,10] parameter(1)
  ROOT f = f32[300,10] fusion(g, w), kind=kLoop, calls=fused
})";
  auto rows = EmitFor(through_transpose, "f");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->phases.size(), 1u);
  EXPECT_EQ(rows->phases[0].tasks, 300);
  testing::ExpectMatchesEvaluator(through_transpose);
}

// An LSTM cell's gates: three logistics (as exp and divide) and two tanhs per element of two
// f32[64,512] outputs, the first read again by the second's tanh.
constexpr const char* kLstmGates = R"(HloModule m
gates {
  z = f32[64,2048] parameter(0)
  c = f32[64,512] parameter(1)
  one = f32[] constant(1)
  ones = f32[64,512] broadcast(one), dimensions={}
  zi = f32[64,512] slice(z), slice={[0:64], [0:512]}
  ni = f32[64,512] negate(zi)
  ei = f32[64,512] exponential(ni)
  di = f32[64,512] add(ei, ones)
  i = f32[64,512] divide(ones, di)
  zf = f32[64,512] slice(z), slice={[0:64], [512:1024]}
  nf = f32[64,512] negate(zf)
  ef = f32[64,512] exponential(nf)
  df = f32[64,512] add(ef, ones)
  f = f32[64,512] divide(ones, df)
  zg = f32[64,512] slice(z), slice={[0:64], [1024:1536]}
  g = f32[64,512] tanh(zg)
  zo = f32[64,512] slice(z), slice={[0:64], [1536:2048]}
  no = f32[64,512] negate(zo)
  eo = f32[64,512] exponential(no)
  do = f32[64,512] add(eo, ones)
  o = f32[64,512] divide(ones, do)
  fc = f32[64,512] multiply(f, c)
  ig = f32[64,512] multiply(i, g)
  c2 = f32[64,512] add(fc, ig)
  tc = f32[64,512] tanh(c2)
  h2 = f32[64,512] multiply(o, tc)
  ROOT t = (f32[64,512], f32[64,512]) tuple(c2, h2)
}
ENTRY e {
  z = f32[64,2048] parameter(0)
  c = f32[64,512] parameter(1)
  ROOT f = (f32[64,512], f32[64,512]) fusion(z, c), kind=kLoop, calls=gates
})";

TEST(KernelEmitterTest, TranscendentalsWeighALoopsShareOfTheThreads) {
  // Each of the gates' transcendentals is counted once, at two plain elements' work, so that the
  // 32K elements (five transcendentals each) make more than the 64K elements' worth that one
  // thread's share of a loop must reach.
  // The functions priced are the polynomial ones, not XLA's transcendentals: sqrt and rsqrt are
  // one instruction each in a loop.
  EXPECT_TRUE(IsPolynomialTranscendental(HloOpcode::kLogistic));
  EXPECT_TRUE(IsPolynomialTranscendental(HloOpcode::kTanh));
  EXPECT_FALSE(IsPolynomialTranscendental(HloOpcode::kSqrt));
  EXPECT_FALSE(IsPolynomialTranscendental(HloOpcode::kRsqrt));
  auto spec = EmitFor(kLstmGates, "f");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->phases.size(), 1u);
  EXPECT_EQ(spec->phases[0].tasks, 64);
  EXPECT_EQ(spec->phases[0].work_per_task, 512 * (1 + 2 * 5));
  EXPECT_GT(spec->phases[0].tasks * spec->phases[0].work_per_task, 2 * (int64_t{1} << 16));
  // A plain loop of as many elements stays one thread's.
  const char* plain = R"(HloModule m
ENTRY e {
  a = f32[64,512] parameter(0)
  ROOT n = f32[64,512] negate(a)
})";
  auto inline_spec = EmitFor(plain, "n");
  ASSERT_TRUE(inline_spec.ok()) << inline_spec.status().message();
  ASSERT_EQ(inline_spec->phases.size(), 1u);
  EXPECT_EQ(inline_spec->phases[0].work_per_task * inline_spec->phases[0].tasks, 64 * 512);
  // An unfused tanh counts itself, not the exponential it reads from another kernel's buffer.
  const char* unfused = R"(HloModule m
ENTRY e {
  a = f32[64,512] parameter(0)
  x = f32[64,512] exponential(a)
  ROOT t = f32[64,512] tanh(x)
})";
  auto own = EmitFor(unfused, "t");
  ASSERT_TRUE(own.ok()) << own.status().message();
  ASSERT_EQ(own->phases.size(), 1u);
  EXPECT_EQ(own->phases[0].work_per_task * own->phases[0].tasks, 64 * 512 * (1 + 2));
}

// The hints of each loop of `module` by its header block's name: each operand of the loop's
// `!llvm.loop` node after its self-reference, as "name" or "name=value" (an access group as
// its bare name).
std::map<std::string, std::vector<std::string>> LoopHintsByHeader(const llvm::Module& module) {
  std::map<std::string, std::vector<std::string>> hints;
  for (const llvm::Function& f : module) {
    for (const llvm::BasicBlock& block : f) {
      const auto* branch = llvm::dyn_cast<llvm::BranchInst>(block.getTerminator());
      if (branch == nullptr || branch->isConditional()) continue;
      const llvm::MDNode* loop = branch->getMetadata(llvm::LLVMContext::MD_loop);
      if (loop == nullptr) continue;
      std::vector<std::string>& names = hints[branch->getSuccessor(0)->getName().str()];
      for (unsigned i = 1; i < loop->getNumOperands(); ++i) {
        const auto* hint = llvm::dyn_cast<llvm::MDNode>(loop->getOperand(i));
        if (hint == nullptr || hint->getNumOperands() == 0) continue;
        const auto* name = llvm::dyn_cast<llvm::MDString>(hint->getOperand(0));
        if (name == nullptr) continue;
        std::string entry = name->getString().str();
        if (hint->getNumOperands() == 2) {
          if (const auto* value = llvm::mdconst::dyn_extract_or_null<llvm::ConstantInt>(hint->getOperand(1))) {
            entry += "=" + std::to_string(value->getSExtValue());
          }
        }
        names.push_back(entry);
      }
    }
  }
  return hints;
}

TEST(KernelEmitterTest, ALoopOfTranscendentalsComputesTwoVectorsAnIteration) {
  // The gates' loop asks the vectorizer for two vectors an iteration, whose five transcendentals'
  // polynomials then overlap.
  auto module = ParseHloModule(kLstmGates);
  ASSERT_TRUE(module.ok()) << module.status().message();
  llvm::LLVMContext context;
  llvm::Module llvm_module("test", context);
  auto spec = EmitKernel(*(*module)->entry_computation()->GetInstructionWithName("f"), "f", llvm_module);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  std::string ir;
  llvm::raw_string_ostream os(ir);
  llvm_module.print(os, nullptr);
  // The hint joins the element loop's own node, beside its parallel accesses; the loop over
  // tasks carries none.
  const auto hints = LoopHintsByHeader(llvm_module);
  ASSERT_TRUE(hints.count("element.header")) << ir;
  EXPECT_THAT(hints.at("element.header"),
              ::testing::UnorderedElementsAre("llvm.loop.parallel_accesses", "llvm.loop.interleave.count=2"))
      << ir;
  EXPECT_FALSE(hints.count("task.header")) << ir;
  // A loop of one transcendental is left to the cost model.
  const char* one = R"(HloModule m
ENTRY e {
  a = f32[64,512] parameter(0)
  ROOT t = f32[64,512] tanh(a)
})";
  auto one_module = ParseHloModule(one);
  ASSERT_TRUE(one_module.ok()) << one_module.status().message();
  llvm::Module one_llvm("one", context);
  ASSERT_TRUE(EmitKernel(*(*one_module)->entry_computation()->GetInstructionWithName("t"), "t", one_llvm).ok());
  std::string one_ir;
  llvm::raw_string_ostream one_os(one_ir);
  one_llvm.print(one_os, nullptr);
  EXPECT_THAT(one_ir, ::testing::Not(::testing::HasSubstr("llvm.loop.interleave.count")));
  testing::ExpectMatchesEvaluator(kLstmGates, {}, {1e-5, 1e-4});
}

TEST(KernelEmitterTest, SanitizedNamesAreValidSymbols) {
  EXPECT_EQ(SanitizeName("fusion.3"), "fusion_3");
  EXPECT_EQ(SanitizeName("0weird-name"), "k_0weird_name");
}

}  // namespace
}  // namespace xlens::codegen

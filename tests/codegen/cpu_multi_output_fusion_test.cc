// Multi-output kernels compiled for the CPU: Adam's update and batch norm's training step (as
// JAX lowers them, at odd sizes) take the fewest passes over their big arrays that their data
// dependences allow, and compute what the reference evaluator computes.
#include <regex>

#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "codegen_test_util.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/parser.h"
#include "compiler/passes/fusion_utils.h"
#include "compiler/passes/hlo_optimizer.h"

namespace xlens::codegen {
namespace {

constexpr char kAdam[] = R"(HloModule jit_adam, entry_computation_layout={(f32[1037]{0}, f32[1037]{0}, f32[1037]{0}, f32[1037]{0})->(f32[1037]{0}, f32[1037]{0}, f32[1037]{0})}

ENTRY main.1 {
  p.1 = f32[1037]{0} parameter(0)
  m.1 = f32[1037]{0} parameter(2)
  constant.9 = f32[] constant(0.9)
  mul.9 = f32[1037]{0} broadcast(constant.9), dimensions={}
  mul.10 = f32[1037]{0} multiply(m.1, mul.9)
  g.1 = f32[1037]{0} parameter(1)
  constant.8 = f32[] constant(0.1)
  broadcast.3 = f32[1037]{0} broadcast(constant.8), dimensions={}
  mul.11 = f32[1037]{0} multiply(g.1, broadcast.3)
  add.5 = f32[1037]{0} add(mul.10, mul.11)
  div.3 = f32[1037]{0} divide(add.5, broadcast.3)
  constant.6 = f32[] constant(0.001)
  broadcast.2 = f32[1037]{0} broadcast(constant.6), dimensions={}
  mul.15 = f32[1037]{0} multiply(div.3, broadcast.2)
  v.1 = f32[1037]{0} parameter(3)
  constant.7 = f32[] constant(0.999)
  mul.8 = f32[1037]{0} broadcast(constant.7), dimensions={}
  mul.12 = f32[1037]{0} multiply(v.1, mul.8)
  mul.13 = f32[1037]{0} multiply(g.1, broadcast.2)
  mul.14 = f32[1037]{0} multiply(mul.13, g.1)
  add.6 = f32[1037]{0} add(mul.12, mul.14)
  div.4 = f32[1037]{0} divide(add.6, broadcast.2)
  sqrt.1 = f32[1037]{0} sqrt(div.4)
  constant.5 = f32[] constant(1e-08)
  add.4 = f32[1037]{0} broadcast(constant.5), dimensions={}
  add.7 = f32[1037]{0} add(sqrt.1, add.4)
  div.5 = f32[1037]{0} divide(mul.15, add.7)
  sub.1 = f32[1037]{0} subtract(p.1, div.5)
  ROOT tuple.1 = (f32[1037]{0}, f32[1037]{0}, f32[1037]{0}) tuple(sub.1, add.5, add.6)
})";

// f32[3,5,7,37] x and dy, 37 channels: forward with the batch's statistics, and the backward
// pass for dy (jax.vjp), as tests/bench/codegen_vs_xla.py's batch_norm_train.
constexpr char kBatchNormTrain[] = R"(HloModule jit_batch_norm_train, entry_computation_layout={(f32[3,5,7,37]{3,2,1,0}, f32[37]{0}, f32[37]{0}, f32[3,5,7,37]{3,2,1,0})->(f32[3,5,7,37]{3,2,1,0}, f32[3,5,7,37]{3,2,1,0}, f32[37]{0}, f32[37]{0})}

region_0.1 {
  reduce_sum.3 = f32[] parameter(0)
  reduce_sum.4 = f32[] parameter(1)
  ROOT reduce_sum.5 = f32[] add(reduce_sum.3, reduce_sum.4)
}

region_1.2 {
  reduce_sum.10 = f32[] parameter(0)
  reduce_sum.11 = f32[] parameter(1)
  ROOT reduce_sum.12 = f32[] add(reduce_sum.10, reduce_sum.11)
}

region_2.3 {
  reduce_sum.17 = f32[] parameter(0)
  reduce_sum.18 = f32[] parameter(1)
  ROOT reduce_sum.19 = f32[] add(reduce_sum.17, reduce_sum.18)
}

region_3.4 {
  reduce_sum.24 = f32[] parameter(0)
  reduce_sum.25 = f32[] parameter(1)
  ROOT reduce_sum.26 = f32[] add(reduce_sum.24, reduce_sum.25)
}

region_4.5 {
  reduce_sum.31 = f32[] parameter(0)
  reduce_sum.32 = f32[] parameter(1)
  ROOT reduce_sum.33 = f32[] add(reduce_sum.31, reduce_sum.32)
}

region_5.6 {
  reduce_sum.38 = f32[] parameter(0)
  reduce_sum.39 = f32[] parameter(1)
  ROOT reduce_sum.40 = f32[] add(reduce_sum.38, reduce_sum.39)
}

region_6.7 {
  reduce_sum.45 = f32[] parameter(0)
  reduce_sum.46 = f32[] parameter(1)
  ROOT reduce_sum.47 = f32[] add(reduce_sum.45, reduce_sum.46)
}

region_7.8 {
  reduce_sum.52 = f32[] parameter(0)
  reduce_sum.53 = f32[] parameter(1)
  ROOT reduce_sum.54 = f32[] add(reduce_sum.52, reduce_sum.53)
}

region_8.9 {
  reduce_sum.59 = f32[] parameter(0)
  reduce_sum.60 = f32[] parameter(1)
  ROOT reduce_sum.61 = f32[] add(reduce_sum.59, reduce_sum.60)
}

region_9.10 {
  reduce_sum.66 = f32[] parameter(0)
  reduce_sum.67 = f32[] parameter(1)
  ROOT reduce_sum.68 = f32[] add(reduce_sum.66, reduce_sum.67)
}

region_10.11 {
  reduce_sum.73 = f32[] parameter(0)
  reduce_sum.74 = f32[] parameter(1)
  ROOT reduce_sum.75 = f32[] add(reduce_sum.73, reduce_sum.74)
}

region_11.12 {
  reduce_sum.80 = f32[] parameter(0)
  reduce_sum.81 = f32[] parameter(1)
  ROOT reduce_sum.82 = f32[] add(reduce_sum.80, reduce_sum.81)
}

ENTRY main.13 {
  x.1 = f32[3,5,7,37]{3,2,1,0} parameter(0)
  constant.9 = f32[] constant(0)
  reduce_sum.84 = f32[37]{0} reduce(x.1, constant.9), dimensions={0,1,2}, to_apply=region_0.1
  constant.8 = f32[] constant(105)
  broadcast.1 = f32[37]{0} broadcast(constant.8), dimensions={}
  div.5 = f32[37]{0} divide(reduce_sum.84, broadcast.1)
  broadcast_in_dim.8 = f32[1,1,1,37]{3,2,1,0} reshape(div.5)
  sub.12 = f32[1,1,1,37]{3,2,1,0} broadcast(broadcast_in_dim.8), dimensions={0,1,2,3}
  sub.13 = f32[37]{0} reshape(sub.12)
  sub.14 = f32[3,5,7,37]{3,2,1,0} broadcast(sub.13), dimensions={3}
  sub.15 = f32[3,5,7,37]{3,2,1,0} subtract(x.1, sub.14)
  broadcast_in_dim.7 = f32[1,1,1,37]{3,2,1,0} reshape(div.5)
  sub.8 = f32[1,1,1,37]{3,2,1,0} broadcast(broadcast_in_dim.7), dimensions={0,1,2,3}
  sub.9 = f32[37]{0} reshape(sub.8)
  sub.10 = f32[3,5,7,37]{3,2,1,0} broadcast(sub.9), dimensions={3}
  sub.11 = f32[3,5,7,37]{3,2,1,0} subtract(x.1, sub.10)
  square.1 = f32[3,5,7,37]{3,2,1,0} multiply(sub.11, sub.11)
  reduce_sum.85 = f32[37]{0} reduce(square.1, constant.9), dimensions={0,1,2}, to_apply=region_1.2
  div.6 = f32[37]{0} divide(reduce_sum.85, broadcast.1)
  constant.6 = f32[] constant(1e-05)
  add.6 = f32[37]{0} broadcast(constant.6), dimensions={}
  add.7 = f32[37]{0} add(div.6, add.6)
  rsqrt.1 = f32[37]{0} rsqrt(add.7)
  broadcast_in_dim.9 = f32[1,1,1,37]{3,2,1,0} reshape(rsqrt.1)
  mul.28 = f32[1,1,1,37]{3,2,1,0} broadcast(broadcast_in_dim.9), dimensions={0,1,2,3}
  mul.29 = f32[37]{0} reshape(mul.28)
  mul.30 = f32[3,5,7,37]{3,2,1,0} broadcast(mul.29), dimensions={3}
  mul.31 = f32[3,5,7,37]{3,2,1,0} multiply(sub.15, mul.30)
  gamma.1 = f32[37]{0} parameter(1)
  broadcast_in_dim.10 = f32[1,1,1,37]{3,2,1,0} reshape(gamma.1)
  mul.32 = f32[1,1,1,37]{3,2,1,0} broadcast(broadcast_in_dim.10), dimensions={0,1,2,3}
  mul.33 = f32[37]{0} reshape(mul.32)
  mul.34 = f32[3,5,7,37]{3,2,1,0} broadcast(mul.33), dimensions={3}
  mul.35 = f32[3,5,7,37]{3,2,1,0} multiply(mul.31, mul.34)
  beta.1 = f32[37]{0} parameter(2)
  broadcast_in_dim.11 = f32[1,1,1,37]{3,2,1,0} reshape(beta.1)
  add.8 = f32[1,1,1,37]{3,2,1,0} broadcast(broadcast_in_dim.11), dimensions={0,1,2,3}
  add.9 = f32[37]{0} reshape(add.8)
  add.10 = f32[3,5,7,37]{3,2,1,0} broadcast(add.9), dimensions={3}
  add.11 = f32[3,5,7,37]{3,2,1,0} add(mul.35, add.10)
  dy.1 = f32[3,5,7,37]{3,2,1,0} parameter(3)
  mul.37 = f32[1,1,1,37]{3,2,1,0} broadcast(broadcast_in_dim.10), dimensions={0,1,2,3}
  mul.38 = f32[37]{0} reshape(mul.37)
  mul.39 = f32[3,5,7,37]{3,2,1,0} broadcast(mul.38), dimensions={3}
  mul.40 = f32[3,5,7,37]{3,2,1,0} multiply(dy.1, mul.39)
  mul.42 = f32[1,1,1,37]{3,2,1,0} broadcast(broadcast_in_dim.9), dimensions={0,1,2,3}
  mul.43 = f32[37]{0} reshape(mul.42)
  mul.44 = f32[3,5,7,37]{3,2,1,0} broadcast(mul.43), dimensions={3}
  mul.45 = f32[3,5,7,37]{3,2,1,0} multiply(mul.40, mul.44)
  mul.41 = f32[3,5,7,37]{3,2,1,0} multiply(sub.15, mul.40)
  reduce_sum.90 = f32[37]{0} reduce(mul.41, constant.9), dimensions={0,1,2}, to_apply=region_6.7
  reshape.7 = f32[1,1,1,37]{3,2,1,0} reshape(reduce_sum.90)
  reduce_sum.91 = f32[37]{0} reduce(reshape.7, constant.9), dimensions={0,1,2}, to_apply=region_7.8
  div.7 = f32[37]{0} divide(rsqrt.1, add.7)
  constant.5 = f32[] constant(-0.5)
  mul.24 = f32[37]{0} broadcast(constant.5), dimensions={}
  mul.27 = f32[37]{0} multiply(div.7, mul.24)
  mul.46 = f32[37]{0} multiply(reduce_sum.91, mul.27)
  div.8 = f32[37]{0} divide(mul.46, broadcast.1)
  broadcast_in_dim.12 = f32[3,5,7,37]{3,2,1,0} broadcast(div.8), dimensions={3}
  constant.7 = f32[] constant(2)
  mul.25 = f32[3,5,7,37]{3,2,1,0} broadcast(constant.7), dimensions={}
  mul.26 = f32[3,5,7,37]{3,2,1,0} multiply(sub.11, mul.25)
  mul.47 = f32[3,5,7,37]{3,2,1,0} multiply(broadcast_in_dim.12, mul.26)
  add_any.3 = f32[3,5,7,37]{3,2,1,0} add(mul.45, mul.47)
  neg.2 = f32[3,5,7,37]{3,2,1,0} negate(mul.45)
  reduce_sum.92 = f32[37]{0} reduce(neg.2, constant.9), dimensions={0,1,2}, to_apply=region_8.9
  reshape.8 = f32[1,1,1,37]{3,2,1,0} reshape(reduce_sum.92)
  reduce_sum.93 = f32[37]{0} reduce(reshape.8, constant.9), dimensions={0,1,2}, to_apply=region_9.10
  neg.3 = f32[3,5,7,37]{3,2,1,0} negate(mul.47)
  reduce_sum.94 = f32[37]{0} reduce(neg.3, constant.9), dimensions={0,1,2}, to_apply=region_10.11
  reshape.9 = f32[1,1,1,37]{3,2,1,0} reshape(reduce_sum.94)
  reduce_sum.95 = f32[37]{0} reduce(reshape.9, constant.9), dimensions={0,1,2}, to_apply=region_11.12
  add_any.4 = f32[37]{0} add(reduce_sum.93, reduce_sum.95)
  div.9 = f32[37]{0} divide(add_any.4, broadcast.1)
  broadcast_in_dim.13 = f32[3,5,7,37]{3,2,1,0} broadcast(div.9), dimensions={3}
  add_any.5 = f32[3,5,7,37]{3,2,1,0} add(add_any.3, broadcast_in_dim.13)
  mul.36 = f32[3,5,7,37]{3,2,1,0} multiply(mul.31, dy.1)
  reduce_sum.88 = f32[37]{0} reduce(mul.36, constant.9), dimensions={0,1,2}, to_apply=region_4.5
  reshape.6 = f32[1,1,1,37]{3,2,1,0} reshape(reduce_sum.88)
  reduce_sum.89 = f32[37]{0} reduce(reshape.6, constant.9), dimensions={0,1,2}, to_apply=region_5.6
  reduce_sum.86 = f32[37]{0} reduce(dy.1, constant.9), dimensions={0,1,2}, to_apply=region_2.3
  reshape.5 = f32[1,1,1,37]{3,2,1,0} reshape(reduce_sum.86)
  reduce_sum.87 = f32[37]{0} reduce(reshape.5, constant.9), dimensions={0,1,2}, to_apply=region_3.4
  ROOT tuple.1 = (f32[3,5,7,37]{3,2,1,0}, f32[3,5,7,37]{3,2,1,0}, f32[37]{0}, f32[37]{0}) tuple(add.11, add_any.5, reduce_sum.89, reduce_sum.87)
})";

std::unique_ptr<HloModule> Optimized(const char* text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok()) return nullptr;
  OptimizeOptions options;
  options.backend = Backend::kCpu;
  auto result = OptimizeHloModule(**module, options);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return std::move(*module);
}

// The kernels of the entry that write an array of `elements` elements (a leaf of their result).
int64_t KernelsWriting(const HloModule& module, int64_t elements) {
  int64_t count = 0;
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (!CountsAsKernel(*i)) continue;
    bool writes = false;
    i->shape().ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) {
      writes |= leaf.IsArray() && leaf.num_elements() == elements;
    });
    count += writes;
  }
  return count;
}

TEST(CpuMultiOutputFusionTest, AdamIsOneKernelAndMatchesTheEvaluator) {
  auto module = Optimized(kAdam);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountKernels(*module), 1) << module->ToString();
  testing::ExpectMatchesEvaluator(kAdam, {}, ErrorSpec{1e-5, 1e-5});
}

TEST(CpuMultiOutputFusionTest, BatchNormTrainingWritesOnlyItsTwoOutputsAndMatchesTheEvaluator) {
  // The centred x is copied into each of its readers, never written out: the only kernel that
  // writes batch-sized arrays is the one that writes y and dx.
  auto module = Optimized(kBatchNormTrain);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(KernelsWriting(*module, 3 * 5 * 7 * 37), 1) << module->ToString();
  testing::ExpectMatchesEvaluator(kBatchNormTrain, {}, ErrorSpec{1e-4, 1e-4});
}

TEST(CpuMultiOutputFusionTest, BatchNormTrainingSweepsTheBatchTwice) {
  // With the per-channel factors out of the backward pass's sums (reduce-factor-hoisting), every
  // sum needs only the mean, and about the mean of the first batch entry (shifted-moments) not
  // even that: one sweep over x and dy for sum(x - K), sum((x - K)^2), sum((x - K) * dy) and
  // sum(dy) (multi-output fusion takes the per-channel rsqrt(var + eps) after them into the same
  // kernel), and the one that writes y and dx. The sample's own sum reads 1/32 of x in one task.
  // The sums a kernel already holds in scratch are copied out, not swept again.
  // At 401408 elements, so that the sweeps are sliced over tasks (the mean divides by 6272).
  auto big = ParseHloModule(std::regex_replace(
      std::regex_replace(
          std::regex_replace(std::string(kBatchNormTrain), std::regex("3,5,7,37"), "32,14,14,64"),
          std::regex("37\\]"), "64]"),
      std::regex("constant\\(105\\)"), "constant(6272)"));
  ASSERT_TRUE(big.ok()) << big.status().message();
  OptimizeOptions options;
  options.backend = Backend::kCpu;
  ASSERT_TRUE(OptimizeHloModule(**big, options).ok());
  // The sweeps and the output loops are the phases of many tasks; the rest (combines,
  // per-channel factors) are one task each.
  int64_t sweeps = 0, kernels = 0;
  for (const HloInstruction* i : (*big)->entry_computation()->instructions()) {
    if (i->opcode() != HloOpcode::kFusion) continue;
    ++kernels;
    llvm::LLVMContext context;
    llvm::Module llvm_module("test", context);
    auto spec = EmitKernel(*i, "k", llvm_module);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    for (const KernelPhase& phase : spec->phases) sweeps += phase.tasks > 1;
  }
  EXPECT_EQ(kernels, CountKernels(**big));
  EXPECT_EQ(sweeps, 2) << (*big)->ToString();
}

}  // namespace
}  // namespace xlens::codegen

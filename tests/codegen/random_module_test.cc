// Differential test of the CPU compiler: random modules (random_module_generator.h), compiled
// and run, must agree with the reference evaluator. 2,000 modules per run in 8 shards (fixed
// seed); XLENS_RANDOM_MODULES=N runs N instead, XLENS_RANDOM_SEED=S another sequence.
#include <gtest/gtest.h>

#include "compiler/runtime/cpu_compiler.h"
#include "differential_harness.h"

namespace xlens {
namespace {

class RandomModuleTest : public ::testing::TestWithParam<int> {};

TEST_P(RandomModuleTest, CompiledModulesAgreeWithTheEvaluator) {
  const int shard = GetParam();
  testing::ShardCounts counts;
  auto compile = [](std::unique_ptr<HloModule> module) {
    runtime::CompileOptions options;
    options.opt_level = 2;
    return runtime::CompileForCpu(std::move(module), options);
  };
  // The CPU backend refuses nothing the generator makes: every compile error fails the test.
  ASSERT_NO_FATAL_FAILURE(
      testing::CompareRandomModuleShard(shard, ErrorSpec{1e-3, 1e-3}, compile, nullptr, &counts));
  EXPECT_EQ(counts.refused, 0);
  EXPECT_EQ(counts.agreed, testing::RandomModulesInShard(shard));
}

INSTANTIATE_TEST_SUITE_P(Shards, RandomModuleTest, ::testing::Range(0, testing::kRandomModuleShards));

}  // namespace
}  // namespace xlens

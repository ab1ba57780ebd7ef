// The GPU backend's kernels on the GPU simulator against the reference evaluator: every corpus
// module the GPU backend compiles, and 2,000 random modules per run in 8 shards (fixed seed;
// XLENS_RANDOM_MODULES=N runs N instead, XLENS_RANDOM_SEED=S another sequence). What the GPU
// backend refuses must be refused by name (custom-calls, what code generation does not support);
// of the random modules, which use nothing the GPU backend lacks, none may be refused.
#include <cstdio>

#include <gtest/gtest.h>

#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "differential_harness.h"

namespace xlens::runtime {
namespace {

// The evaluator is an interpreter (about 1e8 simple operations a second): corpus modules that
// need more work than this are left to the CPU backend's corpus test, which keeps this test to a
// few seconds in CI.
constexpr double kMaxEvaluatorWork = 3e8;

// Whether `message` is one of the GPU backend's named refusals.
bool IsNamedRefusal(const std::string& message) {
  for (const char* phrase : {"runs on the CPU backend only", "cannot run on the GPU backend", "no GPU implementation",
                             "not supported"}) {
    if (message.find(phrase) != std::string::npos) return true;
  }
  return false;
}

std::unique_ptr<GpuSimDevice> OpenDevice() {
  auto device = OpenSimulatedGpuDevice();
  return device.ok() ? std::move(*device) : nullptr;
}

class GpuSimCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuSimCorpusTest, AgreesWithTheEvaluator) {
  auto loaded = xlens::testing::LoadCorpusCase(GetParam(), kMaxEvaluatorWork);
  if (!loaded.ok()) GTEST_SKIP() << loaded.status().message();
  std::unique_ptr<GpuSimDevice> device = OpenDevice();
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  auto& [module, arguments] = *loaded;
  auto expected = EvaluateModule(*module, arguments);
  if (!expected.ok()) GTEST_SKIP() << "the evaluator refuses it: " << expected.status().message();
  auto executable = GpuExecutable::Create(std::move(module), {}, *device);
  if (!executable.ok()) {
    EXPECT_TRUE(IsNamedRefusal(executable.status().message())) << executable.status().message();
    GTEST_SKIP() << "the GPU backend refuses it: " << executable.status().message();
  }
  auto actual = (*executable)->Execute(arguments);
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  Status match = ExpectLiteralNear(*expected, *actual, ErrorSpec{1e-3, 1e-3});
  EXPECT_TRUE(match.ok()) << match.message();
}

INSTANTIATE_TEST_SUITE_P(Corpus, GpuSimCorpusTest, ::testing::ValuesIn(xlens::testing::HloCorpusModuleNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return xlens::testing::TestNameOf(info.param);
                         });

class GpuSimRandomModuleTest : public ::testing::TestWithParam<int> {};

TEST_P(GpuSimRandomModuleTest, CompiledModulesAgreeWithTheEvaluator) {
  std::unique_ptr<GpuSimDevice> device = OpenDevice();
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  const int shard = GetParam();
  xlens::testing::ShardCounts counts;
  auto compile = [&](std::unique_ptr<HloModule> module) { return GpuExecutable::Create(std::move(module), {}, *device); };
  ASSERT_NO_FATAL_FAILURE(xlens::testing::CompareRandomModuleShard(shard, ErrorSpec{1e-3, 1e-3}, compile,
                                                                    IsNamedRefusal, &counts));
  std::printf("shard %d: %lld modules agree with the evaluator on the simulator, %lld refused by the GPU backend\n",
              shard, static_cast<long long>(counts.agreed), static_cast<long long>(counts.refused));
  EXPECT_EQ(counts.refused, 0) << "the GPU backend compiles every operation the generator uses";
  EXPECT_EQ(counts.agreed + counts.refused, xlens::testing::RandomModulesInShard(shard));
}

INSTANTIATE_TEST_SUITE_P(Shards, GpuSimRandomModuleTest, ::testing::Range(0, xlens::testing::kRandomModuleShards));

}  // namespace
}  // namespace xlens::runtime

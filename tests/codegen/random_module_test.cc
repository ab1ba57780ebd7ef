// Differential test of the CPU compiler: random modules (random_module_generator.h), compiled
// and run, must agree with the reference evaluator. 2,000 modules per run in 8 shards (fixed
// seed); XLENS_RANDOM_MODULES=N runs N instead, XLENS_RANDOM_SEED=S another sequence.
#include <cstdlib>
#include <random>

#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/cpu_compiler.h"
#include "random_module_generator.h"

namespace xlens {
namespace {

constexpr int kShards = 8;

int64_t EnvOr(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value ? std::strtoll(value, nullptr, 10) : fallback;
}

class RandomModuleTest : public ::testing::TestWithParam<int> {};

TEST_P(RandomModuleTest, CompiledModulesAgreeWithTheEvaluator) {
  const int64_t total = EnvOr("XLENS_RANDOM_MODULES", 2000);
  const uint64_t seed = static_cast<uint64_t>(EnvOr("XLENS_RANDOM_SEED", 20261122));
  const int shard = GetParam();
  int64_t checked = 0;
  for (int64_t id = shard; id < total; id += kShards) {
    testing::RandomModuleGenerator generator(seed * 1000003 + id);
    const std::string text = generator.Generate(id);
    SCOPED_TRACE(text);
    auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = "random"});
    ASSERT_TRUE(module.ok()) << "the generator made an invalid module: " << module.status().message();
    std::mt19937_64 rng(id);
    std::vector<Literal> arguments;
    for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
      auto literal = MakeRandomLiteral(p->shape(), rng);
      ASSERT_TRUE(literal.ok()) << literal.status().message();
      arguments.push_back(std::move(*literal));
    }
    auto expected = EvaluateModule(**module, arguments);
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    runtime::CompileOptions options;
    options.opt_level = 2;
    auto executable = runtime::CompileForCpu(std::move(*module), options);
    ASSERT_TRUE(executable.ok()) << executable.status().message();
    auto actual = (*executable)->Execute(arguments);
    ASSERT_TRUE(actual.ok()) << actual.status().message();
    Status match = ExpectLiteralNear(*expected, *actual, ErrorSpec{1e-3, 1e-3});
    ASSERT_TRUE(match.ok()) << "module " << id << ": " << match.message();
    ++checked;
  }
  EXPECT_EQ(checked, (total - shard + kShards - 1) / kShards);
}

INSTANTIATE_TEST_SUITE_P(Shards, RandomModuleTest, ::testing::Range(0, kShards));

}  // namespace
}  // namespace xlens

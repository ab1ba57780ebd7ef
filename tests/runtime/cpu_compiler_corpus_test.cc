// The CPU compiler on every module of the shared corpus the reference evaluator runs: compiled,
// run and compared with the evaluator on the same pseudo-random inputs. Modules the evaluator
// cannot run (custom-calls, collectives, elided constants, fft, ...) are skipped with the
// evaluator's reason; those must also be refused by the compiler with a message, never a crash.
#include <gtest/gtest.h>

#include "compiler/runtime/cpu_compiler.h"
#include "differential_harness.h"

namespace xlens {
namespace {

// The evaluator is an interpreter (about 1e8 simple operations a second): modules that need more
// than this many multiply-adds would take minutes there.
constexpr double kMaxEvaluatorWork = 4e9;

class CpuCompilerCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuCompilerCorpusTest, CompiledResultMatchesTheEvaluator) {
  auto loaded = testing::LoadCorpusCase(GetParam(), kMaxEvaluatorWork);
  if (!loaded.ok()) GTEST_SKIP() << loaded.status().message();
  auto& [module, arguments] = *loaded;
  auto expected = EvaluateModule(*module, arguments);
  runtime::CompileOptions options;
  auto executable = runtime::CompileForCpu(std::move(module), options);
  if (!expected.ok()) {
    // What the evaluator refuses, the compiler refuses too (or runs); it never crashes.
    if (!executable.ok()) {
      EXPECT_FALSE(executable.status().message().empty());
    }
    GTEST_SKIP() << "the evaluator refuses it: " << expected.status().message();
  }
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  auto actual = (*executable)->Execute(arguments);
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  Status match = ExpectLiteralNear(*expected, *actual, ErrorSpec{1e-4, 1e-4});
  EXPECT_TRUE(match.ok()) << match.message();
}

INSTANTIATE_TEST_SUITE_P(Corpus, CpuCompilerCorpusTest, ::testing::ValuesIn(testing::HloCorpusModuleNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return testing::TestNameOf(info.param); });

}  // namespace
}  // namespace xlens

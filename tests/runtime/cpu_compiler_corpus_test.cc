// The CPU compiler on every module of the shared corpus the reference evaluator runs: compiled,
// run and compared with the evaluator on the same pseudo-random inputs. Modules the evaluator
// cannot run (custom-calls, collectives, elided constants, fft, ...) are skipped with the
// evaluator's reason; those must also be refused by the compiler with a message, never a crash.
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/cpu_compiler.h"
#include "test_util.h"

namespace xlens {
namespace {

// The evaluator is an interpreter (about 1e8 simple operations a second): modules that need more
// than this many multiply-adds would take minutes there.
constexpr double kMaxEvaluatorWork = 4e9;


// Rough operation count of evaluating the module once (loops counted once).
double EvaluatorWork(const HloModule& module) {
  double work = 0;
  for (const HloComputation* c : module.computations()) {
    for (const HloInstruction* hlo : c->instructions()) {
      double elements = 0;
      hlo->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
        if (s.IsArray() && s.is_static()) elements += static_cast<double>(s.num_elements());
      });
      double per_element = 1;
      if (hlo->opcode() == HloOpcode::kConvolution) {
        for (const WindowDimension& w : hlo->window->dimensions) per_element *= w.size;
        per_element *= hlo->operand(1)->shape().dimensions(
            hlo->convolution_dimension_numbers->kernel_input_feature_dimension);
      } else if (hlo->opcode() == HloOpcode::kDot) {
        for (int64_t d : hlo->dot_dimension_numbers->lhs_contracting_dimensions) {
          per_element *= hlo->operand(0)->shape().dimensions(d);
        }
      }
      work += elements * per_element;
    }
  }
  return work;
}

class CpuCompilerCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuCompilerCorpusTest, CompiledResultMatchesTheEvaluator) {
  const std::string dir = testing::HloCorpusDir();
  if (dir.empty()) GTEST_SKIP() << "corpus absent under " << XLENS_SHARED_DIR;
  const std::string path = dir + "/" + GetParam() + ".hlo";
  auto module = ParseHloModule(testing::ReadTestFile(path), ParseOptions{.verify = true, .filename = path});
  if (!module.ok()) GTEST_SKIP() << "does not verify: " << module.status().message();
  if (double work = EvaluatorWork(**module); work > kMaxEvaluatorWork) {
    GTEST_SKIP() << "too large for the reference evaluator: about " << work << " operations";
  }
  std::mt19937_64 rng(0x5eed);
  std::vector<Literal> arguments;
  for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
    auto literal = MakeRandomLiteral(p->shape(), rng);
    if (!literal.ok()) GTEST_SKIP() << "no random input: " << literal.status().message();
    arguments.push_back(std::move(*literal));
  }
  auto expected = EvaluateModule(**module, arguments);
  runtime::CompileOptions options;
  auto executable = runtime::CompileForCpu(std::move(*module), options);
  if (!expected.ok()) {
    // What the evaluator refuses, the compiler refuses too (or runs); it never crashes.
    if (!executable.ok()) EXPECT_FALSE(executable.status().message().empty());
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

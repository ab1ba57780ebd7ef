// Ahead-of-time compilation on every module of the shared corpus: each one either links into a
// program of its own whose results equal the reference evaluator's (on the inputs every corpus
// test uses), or is refused by name for a reason ahead-of-time code cannot meet (a library call,
// several devices, a sort, a non-row-major interface, a run-time size).
#include <gtest/gtest.h>

#include "aot/aot_test_util.h"
#include "compiler/support/temporary_directory.h"
#include "differential_harness.h"

namespace xlens::aot {
namespace {

// The evaluator interprets: modules needing more work than this are only compiled here (and
// checked against the evaluator by the JIT's corpus test), to keep this one to seconds.
constexpr double kMaxEvaluatorWork = 2e8;

bool IsNamedRefusal(const std::string& message) {
  for (const char* reason : {"cannot be compiled ahead of time", "passes row-major arrays only",
                             "the module has dynamic shapes"}) {
    if (message.find(reason) != std::string::npos) return true;
  }
  return false;
}

class AotCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AotCorpusTest, ProgramMatchesTheEvaluatorOrIsRefusedByName) {
  if (testing::HloCorpusDir().empty()) GTEST_SKIP() << "no corpus under " << XLENS_SHARED_DIR;
  auto loaded = testing::LoadCorpusModule(GetParam());
  if (!loaded.ok()) GTEST_SKIP() << loaded.status().message();
  const HloModule& module = **loaded;
  auto compiled = CompileAheadOfTime(module, {});
  if (!compiled.ok()) {
    EXPECT_TRUE(IsNamedRefusal(compiled.status().message())) << compiled.status().message();
    RecordProperty("refused", compiled.status().message());
    return;
  }
  // Compiled either way; run and compared only where the evaluator can check it in time.
  if (const double work = testing::EvaluatorWork(module); work > kMaxEvaluatorWork) {
    RecordProperty("not_run", fmt::format("about {:.0f} operations: too many for the evaluator", work));
    return;
  }
  std::mt19937_64 rng(0x5eed);
  auto arguments = testing::RandomArguments(module, rng);
  ASSERT_TRUE(arguments.ok()) << arguments.status().message();
  auto expected = EvaluateModule(module, *arguments);
  if (!expected.ok()) GTEST_SKIP() << "the evaluator refuses it: " << expected.status().message();
  std::vector<const Literal*> expected_leaves;
  AppendLeaves(*expected, expected_leaves);
  std::vector<Shape> shapes;
  for (const Literal* leaf : expected_leaves) shapes.push_back(leaf->shape());
  ASSERT_EQ(shapes.size(), compiled->results.size());
  auto dir = TemporaryDirectory::Create("aot-corpus");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  auto actual = LinkAndRun(*compiled, "entry", LeavesOf(*arguments), shapes, {{"cc", "-O1"}, {}},
                           dir->path());
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  for (size_t j = 0; j < shapes.size(); ++j) {
    Status match = ExpectLiteralNear(*expected_leaves[j], (*actual)[j], ErrorSpec{1e-4, 1e-4});
    EXPECT_TRUE(match.ok()) << "result " << j << ": " << match.message();
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, AotCorpusTest, ::testing::ValuesIn(testing::HloCorpusModuleNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return testing::TestNameOf(info.param);
                         });

}  // namespace
}  // namespace xlens::aot

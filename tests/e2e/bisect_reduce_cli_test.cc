// `xlens bisect` and `xlens reduce` as a user runs them, against bugs planted with the hidden
// --xla_test_miscompile_* flags, and against hostile arguments.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kModule[] = R"(HloModule m
ENTRY main {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  c = f32[] constant(2)
  b = f32[4] broadcast(c), dimensions={}
  m = f32[4] multiply(p0, b)
  a = f32[4] add(m, p1)
  ROOT e = f32[4] exponential(a)
}
)";

class BisectReduceCliTest : public CliTest {};

TEST_F(BisectReduceCliTest, BisectNamesThePlantedPassAndWritesTheReport) {
  const std::string file = Write("m.hlo", kModule);
  const std::string out = (dir_ / "report").string();
  RunResult r = RunXlens("bisect " + file + " -o " + out + " --xla_test_miscompile_after_pass=cse");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("culprit: pass planted-miscompile (pipeline optimization"));
  EXPECT_THAT(r.output, HasSubstr("expected 6.21620846, got 7.21620846"));
  EXPECT_THAT(r.output, HasSubstr("reproduce: xlens run " + file + " --inputs " + out + "/inputs"));
  for (const char* name : {"before.hlo", "after.hlo", "change.diff", "inputs/arg0.npy", "inputs/arg1.npy",
                           "report.txt"}) {
    EXPECT_TRUE(std::filesystem::exists(dir_ / "report" / name)) << name;
  }
  // The printed command reproduces the failure, and the inputs written are the ones bisect used.
  const std::string reproduce = r.output.substr(r.output.find("reproduce: ") + 17);
  RunResult again = RunXlens(reproduce.substr(0, reproduce.find('\n')));
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_THAT(again.output, HasSubstr("MISMATCH"));
  // The pass can be disabled like any other: then nothing departs (exit 2).
  RunResult without = RunXlens("bisect " + file + " -o " + out +
                               " --xla_test_miscompile_after_pass=cse --xla_disable_hlo_passes=planted-miscompile");
  EXPECT_EQ(without.exit_code, 2) << without.output;
  EXPECT_THAT(without.output, HasSubstr("not reproduced"));
}

TEST_F(BisectReduceCliTest, BisectSaysCodeGenerationForAWrongKernel) {
  const std::string file = Write("m.hlo", kModule);
  RunResult r = RunShellCommand("cd " + dir_.string() + " && XLA_FLAGS=--xla_test_miscompile_kernel=fusion " +
                                XLENS_BINARY_DIR + "/compiler/cli/xlens bisect m.hlo 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("culprit: code generation: kernel fusion computes wrong values"));
  EXPECT_THAT(r.output, HasSubstr("disabling fusion avoids it"));
  EXPECT_THAT(r.output, HasSubstr("the fusion decision after which it departs: fusing %"));
  EXPECT_THAT(r.output, HasSubstr("--reference --xla_disable_hlo_passes=fusion"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "xlens-bisect" / "kernel.hlo"));
}

TEST_F(BisectReduceCliTest, BisectFindsAWrongGpuKernelOnTheSimulator) {
  // The same planted fault in the GPU backend's kernel, found without a GPU.
  const std::string file = Write("m.hlo", kModule);
  RunResult r = RunShellCommand("cd " + dir_.string() + " && XLA_FLAGS=--xla_test_miscompile_kernel=fusion " +
                                XLENS_BINARY_DIR + "/compiler/cli/xlens bisect m.hlo --backend=gpu-sim 2>&1");
  if (r.output.find("unavailable") != std::string::npos) GTEST_SKIP() << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("backend gpu-sim"));
  EXPECT_THAT(r.output, HasSubstr("culprit: code generation: kernel fusion computes wrong values"));
}

// Bisect judges an f16 result as `xlens run --reference`, its reproducer, does: within 1e-2 for
// f16 (here a planted + 1 on values near 300, 0.33%), not within the --tolerance 1e-3 of f32.
TEST_F(BisectReduceCliTest, BisectHoldsHalfResultsToTheToleranceRunDoes) {
  const std::string file = Write("h.hlo", R"(HloModule h
ENTRY main {
  p = f16[4] parameter(0)
  c = f16[4] broadcast(f16[] constant(300)), dimensions={}
  ROOT a = f16[4] add(p, c)
}
)");
  const std::string planted = " --xla_test_miscompile_kernel=fusion";
  RunResult run = RunXlens("run " + file + " --reference" + planted);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("(tolerance 0.001, f16 0.01): match"));
  RunResult bisect = RunXlens("bisect " + file + " -o " + (dir_ / "report").string() + planted);
  EXPECT_EQ(bisect.exit_code, 2) << bisect.output;
  EXPECT_THAT(bisect.output, HasSubstr("culprit: not reproduced"));
  // A --tolerance given is held to as given, f16 too: both find the + 1, and the reproducer
  // repeats it.
  RunResult tight = RunXlens("run " + file + " --reference --tolerance 0" + planted);
  EXPECT_EQ(tight.exit_code, 1) << tight.output;
  EXPECT_THAT(tight.output, HasSubstr("(tolerance 0): MISMATCH"));
  RunResult found = RunXlens("bisect " + file + " --tolerance 0 -o " + (dir_ / "tight").string() + planted);
  EXPECT_EQ(found.exit_code, 0) << found.output;
  EXPECT_THAT(found.output, HasSubstr("--reference --tolerance 0 "));
}

TEST_F(BisectReduceCliTest, BisectReadsSnapshotArguments) {
  const std::string file = Write("m.hlo", kModule);
  // Arguments bisect wrote once, renamed as a snapshot dump names them.
  RunResult first = RunXlens("bisect " + file + " -o " + (dir_ / "a").string() +
                             " --seed 7 --xla_test_miscompile_after_pass=cse");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  std::filesystem::create_directories(dir_ / "snap");
  for (int i = 0; i < 2; ++i) {
    std::filesystem::copy_file(dir_ / "a" / "inputs" / ("arg" + std::to_string(i) + ".npy"),
                               dir_ / "snap" / ("module_0001.m.execution_0001.arg" + std::to_string(i) + ".npy"));
  }
  RunResult r = RunXlens("bisect " + file + " --inputs " + (dir_ / "snap").string() + " -o " +
                         (dir_ / "b").string() + " --xla_test_miscompile_after_pass=cse");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("module_0001.m.execution_0001.arg*.npy"));
  // The same values as with --seed 7: the same first element departs by the same amount.
  const auto where = [](const std::string& s) { return s.substr(s.find("where: "), 60); };
  EXPECT_EQ(where(r.output), where(first.output));
}

TEST_F(BisectReduceCliTest, ReduceShrinksWithACommandAndWritesTheModule) {
  std::string text = "HloModule big\nENTRY main {\n  p0 = f32[8] parameter(0)\n";
  for (int i = 1; i < 60; ++i) {
    text += "  v" + std::to_string(i) + " = f32[8] " + (i % 7 == 0 ? "maximum" : "add") + "(" +
            (i == 1 ? std::string("p0") : "v" + std::to_string(i - 1)) + ", p0)\n";
  }
  text += "  ROOT r = f32[8] negate(v59)\n}\n";
  const std::string file = Write("big.hlo", text);
  const std::string out = (dir_ / "small.hlo").string();
  RunResult r = RunXlens("reduce " + file + " -o " + out + " --test 'grep -q maximum {} && exit 1; exit 0'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("xlens reduce: 61 -> "));
  RunResult verify = RunXlens("verify " + out);
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_THAT(verify.output, HasSubstr("1 computations, 3 instructions"));  // maximum(p, q)
}

// The candidates go in a private directory under $TMPDIR, which is gone when reduce ends.
TEST_F(BisectReduceCliTest, ReduceWorksUnderTmpdirAndLeavesNothingThere) {
  std::string text = "HloModule small\nENTRY main {\n  p0 = f32[8] parameter(0)\n";
  for (int i = 1; i < 8; ++i) {
    text += "  v" + std::to_string(i) + " = f32[8] " + (i == 4 ? "maximum" : "add") + "(" +
            (i == 1 ? std::string("p0") : "v" + std::to_string(i - 1)) + ", p0)\n";
  }
  text += "  ROOT r = f32[8] negate(v7)\n}\n";
  const std::string file = Write("small.hlo", text);
  const std::filesystem::path tmp = dir_ / "tmp";
  std::filesystem::create_directories(tmp);
  const std::string record = (dir_ / "candidates.txt").string();
  RunResult r = RunShellCommand("TMPDIR=" + tmp.string() + " " + XLENS_BINARY_DIR +
                                "/compiler/cli/xlens reduce " + file + " -o " + (dir_ / "out.hlo").string() +
                                " --test 'echo {} >>" + record + "; grep -q maximum {} && exit 1; exit 0' 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream lines(record);
  int tested = 0;
  for (std::string line; std::getline(lines, line); ++tested) {
    EXPECT_EQ(line.rfind(tmp.string() + "/xlens-reduce-", 0), 0u) << line;
  }
  EXPECT_GT(tested, 0);
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "left behind in " << tmp;
}

TEST_F(BisectReduceCliTest, HostileInputsGetOneMessageAndExit1) {
  const std::string good = Write("m.hlo", kModule);
  const std::string bad = Write("bad.hlo", "HloModule m\nENTRY main {\n  ROOT x = f32[4] add(y, z)\n}\n");
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"bisect " + bad, "bad.hlo:3:"},
      {"bisect " + good + " --inputs " + (dir_ / "nowhere").string(), "no such directory"},
      {"bisect " + good + " --backend=tpu", "expected cpu, gpu or gpu-sim, found 'tpu'"},
      {"bisect " + good + " --xla_test_miscompile_after_pass=nonsense", "unknown pass 'nonsense'"},
      {"reduce " + bad + " --test=miscompare", "bad.hlo:3:"},
      {"reduce " + good + " --test=/nonexistent/test-command", "cannot run (exit 127"},
      {"reduce " + good + " --test 'sleep 5; test -f {}' --timeout 0.2",
       "timed out after 0.2 s on the module as given"},
      {"reduce " + good + " --test true", "the test passes on the module as given"},
      {"reduce " + good + " --test=miscompare", "the test passes on the module as given"},
  };
  for (const Case& c : cases) {
    RunResult r = RunXlens(c.args + " -o " + (dir_ / "out").string());
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
    EXPECT_THAT(r.output, Not(HasSubstr("internal error"))) << c.args;
    // One message (a parse error adds the line and a caret under the column, as everywhere).
    int messages = 0;
    for (size_t at = r.output.find("xlens: "); at != std::string::npos; at = r.output.find("xlens: ", at + 1)) {
      ++messages;
    }
    EXPECT_EQ(messages, 1) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace xlens

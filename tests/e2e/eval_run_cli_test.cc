// `xlens eval` and `xlens run` on what must not lose a result or run forever: outputs of types
// .npy lacks, an output that cannot be written, and --timeout.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "compiler/hlo/npy.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// Three outputs, the middle one bf16: writing used to stop there, losing out2.
constexpr const char* kMixedOutputs = R"(HloModule mixed
ENTRY main {
  x = f32[3] constant({1.5, -2, 3.140625})
  b = bf16[3] convert(x)
  n = f32[3] negate(x)
  ROOT t = (f32[3], bf16[3], f32[3]) tuple(x, b, n)
}
)";

TEST_F(CliTest, OutputsOfEveryTypeAreWrittenBf16AsExactFloat32) {
  const std::string file = Write("mixed.hlo", kMixedOutputs);
  for (const std::string command : {"eval", "run"}) {
    SCOPED_TRACE(command);
    const fs::path out = dir_ / ("out_" + command);
    RunResult result = RunXlens(command + " " + file + " --outputs " + out.string());
    ASSERT_EQ(result.exit_code, 0) << result.output;
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(fs::exists(out / ("out" + std::to_string(i) + ".npy"))) << i;
    }
    EXPECT_THAT(result.output, HasSubstr("note: .npy has no dtype for bf16"));
    StatusOr<Literal> widened = ReadNpy((out / "out1.npy").string());
    ASSERT_TRUE(widened.ok()) << widened.status().message();
    ASSERT_EQ(widened->shape().element_type(), PrimitiveType::F32);
    EXPECT_EQ(widened->GetAsDouble(0), 1.5);
    EXPECT_EQ(widened->GetAsDouble(1), -2.0);
    EXPECT_EQ(widened->GetAsDouble(2), 3.140625);
    StatusOr<Literal> last = ReadNpy((out / "out2.npy").string());
    ASSERT_TRUE(last.ok()) << last.status().message();
    EXPECT_EQ(last->GetAsDouble(0), -1.5);
  }
}

TEST_F(CliTest, AnOutputThatCannotBeWrittenDoesNotStopTheOthers) {
  const std::string file = Write("mixed.hlo", kMixedOutputs);
  const fs::path out = dir_ / "out";
  fs::create_directories(out / "out1.npy");  // a directory where out1.npy should go
  RunResult result = RunXlens("eval " + file + " --outputs " + out.string());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("out1.npy"));
  EXPECT_THAT(result.output, HasSubstr("1 of 3 outputs could not be written ("));
  EXPECT_THAT(result.output, HasSubstr("out1.npy: is a directory"));
  EXPECT_THAT(result.output, HasSubstr("; the others were"));
  // The two outputs written, and the failure in one line.
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 3) << result.output;
  EXPECT_TRUE(fs::is_regular_file(out / "out0.npy"));
  EXPECT_TRUE(fs::is_regular_file(out / "out2.npy"));
}

// A loop whose condition is always true: only --timeout ends it.
constexpr const char* kSpin = R"(HloModule spin
cond {
  p = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  p = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT n = s32[] add(p, one)
}
ENTRY main {
  z = s32[] constant(0)
  ROOT w = s32[] while(z), condition=cond, body=body
}
)";

// A window of 2^62 over four elements: 2^62 applications of the reducer for one output.
constexpr const char* kHugeWindow = R"(HloModule window
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[1] reduce-window(x, z), window={size=4611686018427387904 pad=0_4611686018427387900}, to_apply=add
}
)";

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_F(CliTest, TimeoutStopsTheEvaluatorAndSaysWhere) {
  const std::string file = Write("spin.hlo", kSpin);
  const auto start = std::chrono::steady_clock::now();
  RunResult result = RunXlens("eval " + file + " --timeout 0.5");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("stopped by --timeout after 0.5 s, while evaluating module spin"));
  EXPECT_THAT(result.output, HasSubstr("%w"));  // the while loop it was in
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  // Generous: the point is that it ends, not how fast.
  EXPECT_LT(SecondsSince(start), 60);
}

TEST_F(CliTest, TimeoutStopsCompiledCodeThatNeverPolls) {
  const std::string file = Write("spin.hlo", kSpin);
  RunResult result = RunXlens("run " + file + " --timeout 0.5");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("xlens run: stopped by --timeout after 0.5 s, while running module spin"));
}

TEST_F(CliTest, AbsurdWorkIsRefusedBeforeItStartsWithTheFigure) {
  const std::string file = Write("window.hlo", kHugeWindow);
  for (const std::string command : {"eval", "run"}) {
    SCOPED_TRACE(command);
    RunResult result = RunXlens(command + " " + file);
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_THAT(result.output, HasSubstr("%r = f32[1] reduce-window(...) needs 4.61e+18 scalar operations"));
    EXPECT_THAT(result.output, HasSubstr("--max-work"));
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  }
  // Lifting the limit lets it start; --timeout then ends it.
  RunResult result = RunXlens("eval " + file + " --max-work 0 --timeout 0.5");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("stopped by --timeout"));
}

TEST_F(CliTest, TimeoutAndMaxWorkRefuseNonsense) {
  const std::string file = Write("spin.hlo", kSpin);
  for (const std::string bad : {"--timeout -1", "--timeout nan", "--max-work -5", "--timeout abc"}) {
    SCOPED_TRACE(bad);
    RunResult result = RunXlens("eval " + file + " " + bad);
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_THAT(result.output, HasSubstr("expected a finite number >= 0"));
  }
}

}  // namespace
}  // namespace xlens

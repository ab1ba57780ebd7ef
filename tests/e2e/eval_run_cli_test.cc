// `xlens eval` and `xlens run` on what must not lose a result or run forever: outputs of types
// .npy lacks, an output that cannot be written, and --timeout.
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
  EXPECT_THAT(result.output, HasSubstr("1 of 3 outputs could not be written (out1.npy)"));
  EXPECT_TRUE(fs::is_regular_file(out / "out0.npy"));
  EXPECT_TRUE(fs::is_regular_file(out / "out2.npy"));
}

}  // namespace
}  // namespace xlens

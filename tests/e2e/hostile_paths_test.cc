// The command line against hostile paths and values: every output goes where the user said and
// nowhere else, special files are never replaced, and every refusal is one line and exit 1.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kAdd = R"(HloModule add
ENTRY main {
  x = f32[4] parameter(0)
  ROOT r = f32[4] add(x, x)
}
)";

// One message: a single line starting with "xlens: ".
void ExpectOneLineError(const RunResult& result, const std::string& what) {
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, StartsWith("xlens: "));
  EXPECT_THAT(result.output, HasSubstr(what));
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
}

TEST_F(CliTest, OutputToACharacterDeviceWritesThroughIt) {
  std::string module = Write("add.hlo", kAdd);
  std::string null = (dir_ / "null").string();
  if (::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) GTEST_SKIP() << "mknod needs root";
  RunResult result = RunXlens("compile " + module + " --emit=llvm -o " + null);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  struct stat st;
  ASSERT_EQ(::stat(null.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "-o replaced the device with a regular file";
  result = RunXlens("dot " + module + " -o " + null);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  ASSERT_EQ(::stat(null.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(CliTest, OutputThroughASymlinkReplacesItsTarget) {
  std::string module = Write("add.hlo", kAdd);
  std::string target = Write("real.ll", "stale");
  std::filesystem::create_symlink("real.ll", dir_ / "link.ll");
  RunResult result = RunXlens("compile " + module + " --emit=llvm -o " + (dir_ / "link.ll").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(std::filesystem::is_symlink(dir_ / "link.ll"));
  EXPECT_GT(std::filesystem::file_size(target), 100u) << "the link's target was left stale";
}

TEST_F(CliTest, SpecialFilesAndDirectoriesAreNotReadAsModules) {
  ExpectOneLineError(RunXlens("verify " + dir_.string()), "is a directory");
  ExpectOneLineError(RunXlens("print /dev/zero"), "is a character device, not a regular file");
  std::string fifo = (dir_ / "m.hlo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectOneLineError(RunXlens("verify " + fifo), "is a FIFO");
}

TEST_F(CliTest, InputsOverTheSizeLimitAreRefusedAndTheLimitCanBeRaised) {
  std::string module = Write("add.hlo", kAdd);
  ExpectOneLineError(RunXlens("--max-input-size=10 verify " + module), "limit on input files");
  ExpectOneLineError(RunXlens("verify " + module + " --max-input-size 10"), "limit on input files");
  EXPECT_EQ(RunXlens("--max-input-size=1M verify " + module).exit_code, 0);
  ExpectOneLineError(RunXlens("--max-input-size=lots verify " + module), "--max-input-size: 'lots' is not a size");
  RunResult env = RunXlens("--version >/dev/null; XLENS_MAX_INPUT_SIZE=10 " + std::string(XLENS_BINARY_DIR) +
                           "/compiler/cli/xlens verify " + module);
  EXPECT_THAT(env.output, HasSubstr("limit on input files"));
}

TEST_F(CliTest, InputsDirectoryProblemsAreOneMessage) {
  std::string module = Write("add.hlo", kAdd);
  std::filesystem::create_symlink("loop_b", dir_ / "loop_a");
  std::filesystem::create_symlink("loop_a", dir_ / "loop_b");
  ExpectOneLineError(RunXlens("eval " + module + " --inputs " + (dir_ / "loop_a").string()), "symbolic links");
  std::string long_path = (dir_ / std::string(5000, 'd')).string();
  ExpectOneLineError(RunXlens("eval " + module + " --inputs " + long_path), "--inputs");
  ExpectOneLineError(RunXlens("eval " + module + " --inputs " + module), "is a file; expected a directory");
  ExpectOneLineError(RunXlens("eval " + module + " --inputs /nonexistent/in"), "no such directory");
}

TEST_F(CliTest, TheRandomKeywordDoesNotShadowADirectoryNamedRandom) {
  std::string module = Write("add.hlo", kAdd);
  std::filesystem::create_directories(dir_ / "random");
  EXPECT_EQ(RunXlens("eval " + module + " --inputs random").exit_code, 0);  // no such directory here
  // From dir_, "random" names the directory there.
  RunResult result = RunXlens("--version >/dev/null; cd " + dir_.string() + " && " + std::string(XLENS_BINARY_DIR) +
                              "/compiler/cli/xlens eval " + module + " --inputs random");
  EXPECT_THAT(result.output, HasSubstr("--inputs random is ambiguous"));
  EXPECT_EQ(result.exit_code, 1);
  RunResult explicit_dir = RunXlens("eval " + module + " --inputs " + (dir_ / "random").string());
  ExpectOneLineError(explicit_dir, "arg0.npy: missing");
}

TEST_F(CliTest, NumericOptionsAreCheckedWithReadableMessages) {
  std::string module = Write("add.hlo", kAdd);
  ExpectOneLineError(RunXlens("run " + module + " --reference --tolerance nan"), "expected a finite number >= 0");
  ExpectOneLineError(RunXlens("run " + module + " --reference --tolerance -1"), "expected a finite number >= 0");
  ExpectOneLineError(RunXlens("run " + module + " --iterations 0"), "expected a whole number from 1");
  RunResult zero_nodes = RunXlens("dot " + module + " --max-nodes 0");
  ExpectOneLineError(zero_nodes, "expected a whole number from 1 to 2147483647, found '0'");
  EXPECT_LT(zero_nodes.output.size(), 300u);
  ExpectOneLineError(RunXlens("eval " + module + " --seed 99999999999999999999999"),
                     "--seed: expected a whole number from 0 to 18446744073709551615");
  ExpectOneLineError(RunXlens("eval " + module + " --seed -1"), "--seed: expected a whole number");
  // Nothing after '=': named as such, not "file is required" after the file was taken as the value.
  ExpectOneLineError(RunXlens("compile --emit=ptx --gpu_arch= " + module), "--gpu_arch: expected a value after '='");
}

TEST_F(CliTest, NamesFromTheCommandLineOrTheFileReachTheTerminalEscapedAndBounded) {
  std::string module = Write("add.hlo", kAdd);
  ExpectOneLineError(RunXlens("dot " + module + " --node \"$(printf '\033[2J')\""),
                     "no instruction named '\\x1b[2J'");
  // A parse error quoting a 1 MB name: the line at fault and the caret, and a message of a few
  // hundred bytes that keeps both ends of the name.
  std::string long_name(1 << 20, 'n');
  std::string bad = Write("long.hlo", "HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] add(p, " +
                                          long_name + ")\n}\n");
  RunResult result = RunXlens("verify " + bad);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, HasSubstr("bytes) ..."));
  EXPECT_LT(result.output.size(), 2000u);
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 3) << "message, line, caret";
}

TEST_F(CliTest, AnUnknownArchitectureIsRefusedOnceWithTheKnownOnes) {
  std::string module = Write("add.hlo", kAdd);
  RunResult result = RunXlens("compile " + module + " --emit=ptx --gpu_arch=sm_9999");
  ExpectOneLineError(result, "'sm_9999' is not an architecture LLVM");
  EXPECT_THAT(result.output, HasSubstr("sm_90"));
  EXPECT_THAT(result.output, Not(HasSubstr("not a recognized processor")));
}

TEST_F(CliTest, AnUnknownCommandIsNamedWithTheClosestOne) {
  ExpectOneLineError(RunXlens("verfy x.hlo"), "unknown command 'verfy' (did you mean 'verify'?)");
  ExpectOneLineError(RunXlens("frobnicate"), "the commands are print, verify");
  ExpectOneLineError(RunXlens(""), "no command given");
  ExpectOneLineError(RunXlens("\"$(printf '\\033[2J')\""), "unknown command '\\x1b[2J'");
}

}  // namespace
}  // namespace xlens

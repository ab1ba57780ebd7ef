// Kernel choices made by timing at compile time (a depthwise convolution's loops against oneDNN's
// kernel), as a user meets them across processes: kept in the persistent cache directory so a
// second `xlens run` takes the pick without timing, a damaged cache entry rejected with a message,
// the module's choices dumped as kernel_choices.json, and a choices file loaded by flag forcing
// the kernel it names, whichever the timings favour.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "compiler/support/cpu_features.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// MobileNet's depthwise layer with bias and ReLU6, which both the loops and oneDNN run (without
// the epilogue the loops take only outputs of 6 MiB and more); small enough to time in a few
// milliseconds.
constexpr const char* kDepthwise = R"(HloModule dw
ENTRY main {
  x = f32[2,9,11,80] parameter(0)
  w = f32[3,3,1,80] parameter(1)
  bias = f32[80] parameter(2)
  c = f32[2,9,11,80] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=80
  bb = f32[2,9,11,80] broadcast(bias), dimensions={3}
  s = f32[2,9,11,80] add(c, bb)
  z = f32[] constant(0)
  six = f32[] constant(6)
  ROOT r = f32[2,9,11,80] clamp(z, s, six)
}
)";

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The one file of the dump directory whose name ends with `suffix`.
std::filesystem::path DumpFile(const std::filesystem::path& dir, const std::string& suffix) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().ends_with(suffix)) return entry.path();
  }
  ADD_FAILURE() << "no " << suffix << " in " << dir;
  return {};
}

class KernelChoiceCliTest : public CliTest {
 protected:
  // The one choice made by timing is the depthwise convolution's, between xlens's loops and
  // oneDNN's kernel; the loops run on AVX-512 only, so elsewhere no trial runs and none is kept.
  void SetUp() override {
    if (!CpuHasAvx512F()) GTEST_SKIP() << "the depthwise loops, one of the timed candidates, run on AVX-512 only";
    CliTest::SetUp();
  }
  // `xlens run` of the module with `flags`, dumped into `dump`; its thunk listing.
  std::string Run(const std::string& dump, const std::string& flags, RunResult* result = nullptr) {
    const std::string module = Write("dw.hlo", kDepthwise);
    RunResult r = RunXlens("run " + module + " --xla_dump_to=" + (dir_ / dump).string() + " " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (result != nullptr) *result = r;
    return ReadText(DumpFile(dir_ / dump, "thunk_sequence.txt"));
  }
  std::string CacheFlag() const { return "--xla_xlens_persistent_cache_dir=" + (dir_ / "cache").string(); }
};

TEST_F(KernelChoiceCliTest, SecondProcessTakesTheCachedChoiceWithoutTiming) {
  const std::string first = Run("d1", CacheFlag());
  EXPECT_THAT(first, HasSubstr(", timed "));
  EXPECT_THAT(first, Not(HasSubstr("cached")));
  // The dump records the choice as the loader reads it.
  const nlohmann::json choices = nlohmann::json::parse(ReadText(DumpFile(dir_ / "d1", "kernel_choices.json")));
  EXPECT_EQ(choices["format"], "xlens kernel choices");
  ASSERT_EQ(choices["choices"].size(), 1u);
  EXPECT_EQ(choices["choices"][0]["candidates"][0], "depthwise:avx512");
  EXPECT_THAT(ReadText(dir_ / "d1" / "manifest.json"), HasSubstr("kernel_choices.json"));

  const std::string second = Run("d2", CacheFlag());
  EXPECT_THAT(second, HasSubstr(", cached: timed "));
  // The same kernel, with the first process's times.
  const std::regex kernel(R"(kernel ([^,;]+))");
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(first, a, kernel)) << first;
  ASSERT_TRUE(std::regex_search(second, b, kernel)) << second;
  EXPECT_EQ(a[1].str(), b[1].str());
}

TEST_F(KernelChoiceCliTest, DamagedCacheEntryIsRejectedWithAMessage) {
  (void)Run("d1", CacheFlag());
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / "cache")) {
    if (entry.path().extension() != ".xlenschoice") continue;
    std::ofstream(entry.path(), std::ios::trunc) << "{\"format\": \"xlens kernel choices\", \"version\": 1, \"cho";
    ++entries;
  }
  ASSERT_EQ(entries, 1);
  RunResult r;
  const std::string again = Run("d2", CacheFlag(), &r);
  // One line, saying what is wrong and where nlohmann stopped.
  EXPECT_THAT(r.output, ::testing::ContainsRegex(
                            "xlens: kernel choice cache entry .*cache/[0-9a-f]{64}\\.xlenschoice is rejected "
                            "\\(it: not JSON \\(parse error at line 1, column [0-9]+: .*\\)\\); timing again"));
  EXPECT_EQ(r.output.find("kernel choice cache entry"), r.output.rfind("kernel choice cache entry")) << r.output;
  EXPECT_THAT(again, HasSubstr(", timed "));
  // Rewritten: the next process takes it.
  EXPECT_THAT(Run("d3", CacheFlag()), HasSubstr(", cached: timed "));
}

TEST_F(KernelChoiceCliTest, LoadedChoicesForceTheKernel) {
  (void)Run("d1", "");
  nlohmann::json choices = nlohmann::json::parse(ReadText(DumpFile(dir_ / "d1", "kernel_choices.json")));
  // Each candidate in turn, whichever was faster here, and the module still matches the evaluator.
  for (int forced = 0; forced < 2; ++forced) {
    const std::string name = choices["choices"][0]["candidates"][forced];
    SCOPED_TRACE(name);
    choices["choices"][0]["winner"] = name;
    const std::string file = Write("forced.json", choices.dump());
    const std::string listing = Run("forced" + std::to_string(forced), "--reference --xla_cpu_xlens_load_kernel_choices_from=" + file);
    EXPECT_THAT(listing, HasSubstr("kernel " + name));
    EXPECT_THAT(listing, HasSubstr(", loaded: timed "));
  }
  // A malformed file is the user's error, named.
  const std::string bad = Write("bad.json", "{\"format\": \"xlens kernel choices\", \"version\": 3, \"choices\": []}");
  RunResult r = RunXlens("run " + Write("dw.hlo", kDepthwise) + " --xla_cpu_xlens_load_kernel_choices_from=" + bad);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--xla_cpu_xlens_load_kernel_choices_from"));
  EXPECT_THAT(r.output, HasSubstr("format version 3, expected 1 to 2"));
}

// Over the trial's budget (here 0 ms, so the small module stands for a large one) the loops are
// kept without timing: the listing and the dump say so, the persistent cache keeps nothing (a
// process with the default budget times it), and a bundle's replay forces the untimed choice.
TEST_F(KernelChoiceCliTest, OverTheTrialsBudgetTheRuleIsKeptUntimed) {
  const std::string bound = " --xla_cpu_xlens_kernel_choice_trial_budget_ms=0";
  const std::string listing = Run("d", "--xla_dump_hlo_snapshots " + CacheFlag() + bound);
  EXPECT_THAT(listing, HasSubstr("kernel depthwise:avx512"));
  EXPECT_THAT(listing, HasSubstr(", not timed: one run estimated at "));
  EXPECT_THAT(listing, HasSubstr(" ms, a trial of 2 x 6 runs over the 0 ms budget"));
  EXPECT_THAT(listing, Not(HasSubstr(", timed ")));
  const nlohmann::json choices = nlohmann::json::parse(ReadText(DumpFile(dir_ / "d", "kernel_choices.json")));
  ASSERT_EQ(choices["choices"].size(), 1u);
  EXPECT_EQ(choices["version"], 2);
  EXPECT_EQ(choices["choices"][0]["winner"], "depthwise:avx512");
  EXPECT_FALSE(choices["choices"][0].contains("best_ms"));
  // f32[2,9,11,80] in and out, 3x3x80 weights and 80 biases at 10 GB/s.
  EXPECT_NEAR(choices["choices"][0]["estimated_run_ms"].get<double>(), 4.0 * (2 * 2 * 9 * 11 * 80 + 10 * 80) / 1e7,
              1e-4);
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / "cache")) {
    EXPECT_NE(entry.path().extension(), ".xlenschoice") << entry.path();
  }
  // The bundle's replay forces the recorded (untimed) choice, whatever its own bound.
  const std::string bundle = (dir_ / "b.tar.gz").string();
  ASSERT_EQ(RunXlens("bundle " + (dir_ / "d").string() + " -o " + bundle).exit_code, 0);
  RunResult replay = RunXlens("replay " + bundle);
  EXPECT_EQ(replay.exit_code, 2) << replay.output;  // not reproduced: the outputs match
  EXPECT_THAT(replay.output, HasSubstr(", the recording's 1 kernel choice, "));
  EXPECT_THAT(replay.output, Not(HasSubstr("matched no call")));
  // The default budget times this call, and caches that.
  EXPECT_THAT(Run("d2", CacheFlag()), HasSubstr(", timed "));
}

// A bug bundle carries the module's kernel_choices.json and `xlens replay` forces it; a broken
// one fails the replay with a message naming it.
TEST_F(KernelChoiceCliTest, ReplayForcesTheRecordedChoices) {
  (void)Run("d", "--xla_dump_hlo_snapshots");
  const std::string bundle = (dir_ / "b.tar.gz").string();
  RunResult made = RunXlens("bundle " + (dir_ / "d").string() + " -o " + bundle);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_THAT(made.output, HasSubstr("kernel_choices.json"));
  RunResult replay = RunXlens("replay " + bundle);
  EXPECT_EQ(replay.exit_code, 2) << replay.output;  // not reproduced: the outputs match
  EXPECT_THAT(replay.output, HasSubstr(", the recording's 1 kernel choice, "));
  EXPECT_THAT(replay.output, Not(HasSubstr("matched no call")));

  // A choice whose key matches no call (another shape, other CPUs) forces nothing, and says so.
  const std::filesystem::path choices = DumpFile(dir_ / "d", "kernel_choices.json");
  nlohmann::json document = nlohmann::json::parse(ReadText(choices));
  document["choices"][0]["key"] = document["choices"][0]["key"].get<std::string>() + " elsewhere";
  std::ofstream(choices, std::ios::trunc) << document.dump();
  const std::string elsewhere = (dir_ / "elsewhere.tar.gz").string();
  ASSERT_EQ(RunXlens("bundle " + (dir_ / "d").string() + " -o " + elsewhere).exit_code, 0);
  replay = RunXlens("replay " + elsewhere);
  EXPECT_THAT(replay.output, HasSubstr("1 of the recording's 1 kernel choice matched no call here and forced nothing"));
  EXPECT_THAT(replay.output, HasSubstr(" elsewhere"));

  std::ofstream(choices, std::ios::trunc) << "{\"format\": 3}";
  const std::string broken = (dir_ / "broken.tar.gz").string();
  ASSERT_EQ(RunXlens("bundle " + (dir_ / "d").string() + " -o " + broken).exit_code, 0);
  replay = RunXlens("replay " + broken);
  EXPECT_EQ(replay.exit_code, 1) << replay.output;
  EXPECT_THAT(replay.output, HasSubstr("module_0001.dw.kernel_choices.json"));
  EXPECT_THAT(replay.output, HasSubstr("not a kernel choices file"));
}

}  // namespace
}  // namespace xlens

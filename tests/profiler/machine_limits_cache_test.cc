#include "profiler/machine_limits_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/support/file_io.h"
#include "compiler/support/temporary_directory.h"

namespace xlens::profiler {
namespace {

using ::testing::HasSubstr;

MachineLimits SomeLimits() {
  MachineLimits limits;
  limits.threads = 2;
  limits.caches = {{1, 32 << 10, 2}, {2, 1 << 20, 2}, {3, 32 << 20, 1}};
  limits.sweep = {{16 << 10, 400.5, 450, 500}, {64 << 20, 30, 31, 33.25}};
  limits.memory = {192 << 20, 20, 25, 28};
  limits.peak_gflops = 236.5;
  return limits;
}

TEST(MachineLimitsCache, RoundTripKeepsEveryFigure) {
  const MachineLimits limits = SomeLimits();
  int64_t measured = 0;
  StatusOr<MachineLimits> back =
      MachineLimitsFromJson(MachineLimitsToJson(limits, "cpu A", 1796000000), "cpu A", &measured);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(measured, 1796000000);
  EXPECT_EQ(back->threads, 2);
  ASSERT_EQ(back->caches.size(), 3u);
  EXPECT_EQ(back->caches[2].bytes, 32 << 20);
  EXPECT_EQ(back->caches[0].instances, 2);
  ASSERT_EQ(back->sweep.size(), 2u);
  EXPECT_DOUBLE_EQ(back->sweep[0].copy_gbps, 400.5);
  EXPECT_DOUBLE_EQ(back->sweep[1].read_gbps, 33.25);
  EXPECT_DOUBLE_EQ(back->memory.triad_gbps, 25);
  EXPECT_DOUBLE_EQ(back->peak_gflops, 236.5);
  // The bound a profile row gets is the same from the kept figures.
  EXPECT_DOUBLE_EQ(back->BoundNs(1e9, 1e9), limits.BoundNs(1e9, 1e9));
}

TEST(MachineLimitsCache, AnotherMachinesFiguresAreNotUsed) {
  StatusOr<MachineLimits> back =
      MachineLimitsFromJson(MachineLimitsToJson(SomeLimits(), "cpu A", 1), "cpu B", nullptr);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("another machine (cpu A)"));
}

// Each damage the file can take, and the field the reason names.
TEST(MachineLimitsCache, DamagedFilesAreRefusedWithTheFieldThatIsWrong) {
  const nlohmann::json good = nlohmann::json::parse(MachineLimitsToJson(SomeLimits(), "m", 1));
  auto with = [&](const std::function<void(nlohmann::json&)>& damage) {
    nlohmann::json json = good;
    damage(json);
    return MachineLimitsFromJson(json.dump(), "m", nullptr);
  };
  struct Damage {
    std::function<void(nlohmann::json&)> apply;
    const char* reason;
  };
  const std::vector<Damage> damages = {
      {[](nlohmann::json& j) { j["format"] = "xlens machine limits 0"; }, "format"},
      {[](nlohmann::json& j) { j.erase("machine"); }, "machine is missing"},
      {[](nlohmann::json& j) { j["threads"] = 0; }, "threads is 0"},
      {[](nlohmann::json& j) { j["threads"] = "two"; }, "threads is not an integer"},
      {[](nlohmann::json& j) { j["peak_gflops"] = -1; }, "peak_gflops is -1"},
      {[](nlohmann::json& j) { j["peak_gflops"] = 1e300; }, "peak_gflops"},
      {[](nlohmann::json& j) { j["peak_gflops"] = 0; }, "no peak"},
      {[](nlohmann::json& j) { j["caches"] = 3; }, "caches is not a list"},
      {[](nlohmann::json& j) { j["caches"][1]["bytes"] = 18446744073709551615ull; }, "caches[1].bytes"},
      {[](nlohmann::json& j) { j["caches"][0]["level"] = 99; }, "caches[0].level is 99"},
      {[](nlohmann::json& j) { j["sweep"][1].erase("read_gbps"); }, "sweep[1].read_gbps is missing"},
      {[](nlohmann::json& j) { j["sweep"][0]["copy_gbps"] = nullptr; }, "sweep[0].copy_gbps is not a number"},
      {[](nlohmann::json& j) { j["sweep"] = nlohmann::json::array(); j["sweep"].get_ref<nlohmann::json::array_t&>().resize(300, nlohmann::json::object()); }, "at most 256 points"},
      {[](nlohmann::json& j) { j["memory"] = {1, 2}; }, "memory is not an object"},
      {[](nlohmann::json& j) { j["memory"]["copy_gbps"] = 0; j["memory"]["triad_gbps"] = 0; j["memory"]["read_gbps"] = 0; }, "no memory bandwidth"},
  };
  for (const Damage& damage : damages) {
    StatusOr<MachineLimits> back = with(damage.apply);
    ASSERT_FALSE(back.ok()) << damage.reason;
    EXPECT_THAT(back.status().message(), HasSubstr(damage.reason));
  }
  for (std::string_view text : {"", "{", "[]", "null", "{\"format\": 1}", "\xff\xfe"}) {
    EXPECT_FALSE(MachineLimitsFromJson(text, "m", nullptr).ok()) << text;
  }
}

class KeptLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<TemporaryDirectory> dir = TemporaryDirectory::Create("machine-limits-test");
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    dir_ = std::make_unique<TemporaryDirectory>(std::move(*dir));
    path_ = dir_->path() + "/cache/machine_limits.json";
  }
  std::unique_ptr<TemporaryDirectory> dir_;
  std::string path_;
};

TEST_F(KeptLimitsTest, KeptInAPrivateDirectoryAndReadBack) {
  ASSERT_TRUE(KeepMachineLimits(path_, SomeLimits(), "m", 42).ok());
  struct stat st;
  ASSERT_EQ(::stat((dir_->path() + "/cache").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "the directory is made private";
  int64_t measured = 0;
  StatusOr<MachineLimits> back = ReadKeptMachineLimits(path_, "m", &measured);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(measured, 42);
  EXPECT_DOUBLE_EQ(back->peak_gflops, 236.5);
}

TEST_F(KeptLimitsTest, ALinkInThePlaceOfTheFileIsNeitherFollowedNorWrittenThrough) {
  ASSERT_TRUE(KeepMachineLimits(path_, SomeLimits(), "m", 1).ok());
  const std::string elsewhere = dir_->path() + "/elsewhere.json";
  ASSERT_TRUE(WriteFile(elsewhere, MachineLimitsToJson(SomeLimits(), "m", 7)).ok());
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), path_.c_str()), 0);
  EXPECT_FALSE(ReadKeptMachineLimits(path_, "m", nullptr).ok()) << "a planted link is refused";
  ASSERT_TRUE(KeepMachineLimits(path_, SomeLimits(), "m", 9).ok());
  StatusOr<std::string> target = ReadFile(elsewhere);
  ASSERT_TRUE(target.ok());
  EXPECT_THAT(*target, HasSubstr("\"measured_unix_seconds\": 7")) << "the link's target is untouched";
  EXPECT_EQ(GetPathKind(path_), PathKind::kRegular) << "the link is replaced by the file";
}

TEST_F(KeptLimitsTest, ADirectoryOthersCanWriteToIsNotTrusted) {
  ASSERT_TRUE(KeepMachineLimits(path_, SomeLimits(), "m", 1).ok());
  ASSERT_EQ(::chmod((dir_->path() + "/cache").c_str(), 0777), 0);
  StatusOr<MachineLimits> back = ReadKeptMachineLimits(path_, "m", nullptr);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("can be written by every user"));
  EXPECT_FALSE(KeepMachineLimits(path_, SomeLimits(), "m", 1).ok());
}

TEST_F(KeptLimitsTest, AnOversizedFileIsRefusedBeforeItIsRead) {
  ASSERT_TRUE(KeepMachineLimits(path_, SomeLimits(), "m", 1).ok());
  ASSERT_TRUE(WriteFile(path_, std::string(2 << 20, ' ')).ok());
  EXPECT_FALSE(ReadKeptMachineLimits(path_, "m", nullptr).ok());
}

TEST(MachineLimitsCache, PathFollowsTheEnvironment) {
  const char* old = std::getenv("XLENS_MACHINE_LIMITS_CACHE");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("XLENS_MACHINE_LIMITS_CACHE", "off", 1);
  EXPECT_EQ(MachineLimitsCachePath(), "");
  ::setenv("XLENS_MACHINE_LIMITS_CACHE", "/somewhere/limits.json", 1);
  EXPECT_EQ(MachineLimitsCachePath(), "/somewhere/limits.json");
  ::unsetenv("XLENS_MACHINE_LIMITS_CACHE");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved_xdg = xdg != nullptr ? xdg : "";
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  EXPECT_EQ(MachineLimitsCachePath(), "/x/cache/xlens/machine_limits.json");
  if (xdg != nullptr) ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1); else ::unsetenv("XDG_CACHE_HOME");
  if (old != nullptr) ::setenv("XLENS_MACHINE_LIMITS_CACHE", saved.c_str(), 1);
}

TEST(MachineLimitsCache, FingerprintNamesTheVectorUnitAndCpus) {
  const std::string fingerprint = MachineFingerprint();
  EXPECT_THAT(fingerprint, HasSubstr(WidestVectorIsa()));
  EXPECT_THAT(fingerprint, HasSubstr("CPUs"));
  EXPECT_EQ(fingerprint, MachineFingerprint()) << "stable within a process";
}

}  // namespace
}  // namespace xlens::profiler

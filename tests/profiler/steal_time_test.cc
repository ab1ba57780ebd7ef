#include "profiler/steal_time.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens::profiler {
namespace {

using ::testing::HasSubstr;

// The head of /proc/stat on a 2-vCPU cloud VM (Linux 6.1), as the kernel writes it.
constexpr std::string_view kTwoCpus =
    "cpu  1584348 827 214989 2007176 7472 0 2437 79249 0 0\n"
    "cpu0 786427 487 105389 1014427 2156 0 191 39034 0 0\n"
    "cpu1 797921 340 109600 992748 5316 0 2245 40214 0 0\n"
    "intr 7904228 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 1 11\n"
    "ctxt 140520317\n"
    "btime 1764733390\n"
    "processes 318828\n"
    "procs_running 1\n"
    "procs_blocked 0\n"
    "softirq 5566541 0 1057437 3 1112452 2 0 58 2130620 0 1265969\n";

TEST(StealTime, SumsTheChosenCpusThroughSteal) {
  StatusOr<CpuTicks> both = ParseCpuTicks(kTwoCpus, {0, 1});
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->steal, 39034u + 40214u);
  EXPECT_EQ(both->total, (786427u + 487 + 105389 + 1014427 + 2156 + 0 + 191 + 39034) +
                             (797921u + 340 + 109600 + 992748 + 5316 + 0 + 2245 + 40214));
  StatusOr<CpuTicks> one = ParseCpuTicks(kTwoCpus, {1});
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->steal, 40214u);
  EXPECT_EQ(one->total, 797921u + 340 + 109600 + 992748 + 5316 + 0 + 2245 + 40214);
}

TEST(StealTime, GuestTimeIsNotCountedTwice) {
  // guest and guest_nice (the last two) are inside user and nice already.
  StatusOr<CpuTicks> ticks = ParseCpuTicks("cpu0 100 0 0 100 0 0 0 0 60 40\n", {0});
  ASSERT_TRUE(ticks.ok()) << ticks.status().message();
  EXPECT_EQ(ticks->total, 200u);
  EXPECT_EQ(ticks->steal, 0u);
}

TEST(StealTime, MalformedLinesAreNamed) {
  struct Case {
    std::string_view text;
    std::string_view says;
  };
  const Case cases[] = {
      {"cpu  1 2 3\ncpu0 1 2 3 4 5 6 7\n", "line 2: cpu0 has 7 counters, expected at least 8"},
      {"cpu0 1 2 3 4 5 6 7 x\n", "line 1: cpu0's counter 8 is \"x\", expected a count of ticks"},
      {"cpu0 1 2 -3 4 5 6 7 8\n", "counter 3 is \"-3\""},
      {"cpu0 1 2 3 4 5 6 7 99999999999999999999\n", "counter 8 is \"99999999999999999999\""},
      {"cpu0x 1 2 3 4 5 6 7 8\n", "line 1: \"cpu0x\" is not a CPU's name"},
      {"cpu0 1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n", "line 2: a second line for cpu0"},
      {"cpu0 18446744073709551615 1 0 0 0 0 0 0\n", "cpu0's counters overflow"},
      {"cpu1 1 2 3 4 5 6 7 8\n", "/proc/stat has no line for cpu0"},
      {"", "/proc/stat has no line for cpu0"},
  };
  for (const Case& c : cases) {
    StatusOr<CpuTicks> ticks = ParseCpuTicks(c.text, {0});
    ASSERT_FALSE(ticks.ok()) << c.text;
    EXPECT_THAT(ticks.status().message(), HasSubstr(c.says)) << c.text;
    EXPECT_EQ(ticks.status().message().find('\n'), std::string::npos);
  }
  // A malformed line of a CPU not asked for is no concern of this reading.
  EXPECT_TRUE(ParseCpuTicks("cpu0 1 2 3 4 5 6 7 8\ncpu1 garbage\n", {0}).ok());
}

TEST(StealTime, ShareOfTheTicksBetweenTwoReadings) {
  const CpuTicks before{1000, 100};
  std::optional<double> share = StealShare(before, CpuTicks{1200, 150});
  ASSERT_TRUE(share.has_value());
  EXPECT_DOUBLE_EQ(*share, 0.25);
  EXPECT_EQ(StealShare(before, CpuTicks{1200, 100}), 0.0);
  // Too few ticks to say (a tick is 10 ms), and counters that went back.
  EXPECT_FALSE(StealShare(before, CpuTicks{1049, 110}).has_value());
  EXPECT_TRUE(StealShare(before, CpuTicks{1049, 110}, 10).has_value());
  EXPECT_FALSE(StealShare(before, CpuTicks{900, 100}).has_value());
  EXPECT_FALSE(StealShare(before, CpuTicks{1200, 90}).has_value());
  EXPECT_FALSE(StealShare(before, before, 0).has_value());
}

TEST(StealTime, ReadsThisMachine) {
  // Every machine that runs the tests is Linux with /proc.
  std::optional<CpuTicks> first = ReadProcessCpuTicks();
  ASSERT_TRUE(first.has_value());
  EXPECT_GT(first->total, 0u);
  EXPECT_LE(first->steal, first->total);
  std::optional<CpuTicks> second = ReadProcessCpuTicks();
  ASSERT_TRUE(second.has_value());
  EXPECT_GE(second->total, first->total);
  EXPECT_GE(second->steal, first->steal);
}

}  // namespace
}  // namespace xlens::profiler

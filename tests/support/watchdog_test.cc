#include "compiler/support/watchdog.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

TEST(WatchdogTest, NoLimitNeverFires) {
  Watchdog watchdog(0, "eval");
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(watchdog.fired());
  EXPECT_FALSE(watchdog.cancel_flag()->load());
}

TEST(WatchdogTest, EndingBeforeTheLimitDoesNotFireOrWait) {
  const auto start = std::chrono::steady_clock::now();
  {
    Watchdog watchdog(3600, "eval");
    EXPECT_FALSE(watchdog.fired());
  }
  // The destructor wakes the watching thread instead of sleeping out the hour.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST(WatchdogTest, PastTheLimitTheCancelFlagIsSetForWorkThatPolls) {
  Watchdog watchdog(0.01, "eval", /*grace=*/3600s);
  watchdog.SetActivity("evaluating module m");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!watchdog.cancel_flag()->load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(watchdog.fired());
  EXPECT_EQ(watchdog.StopMessage(), "stopped by --timeout after 0.01 s, while evaluating module m");
}

TEST(WatchdogDeathTest, WorkThatNeverPollsIsEndedAfterTheGracePeriodWithOneLine) {
  EXPECT_EXIT(
      {
        Watchdog watchdog(0.01, "run", /*grace=*/10ms);
        watchdog.SetActivity("running module spin (iteration 1 of 1)");
        for (;;) std::this_thread::sleep_for(1ms);
      },
      ::testing::ExitedWithCode(1),
      "^xlens run: stopped by --timeout after 0.01 s, while running module spin \\(iteration 1 of 1\\)\n$");
}

// The final work (the trace so far) runs before the process ends, and says where it left it.
TEST(WatchdogDeathTest, FinalWorkRunsBeforeTheEndAndIsNamedInTheLine) {
  EXPECT_EXIT(
      {
        Watchdog watchdog(0.01, "run", /*grace=*/10ms);
        watchdog.SetActivity("running module spin");
        watchdog.SetFinalWork([](const std::string& stop) {
          std::fprintf(stderr, "final work saw: %s\n", stop.c_str());
          return std::string("; the trace up to here is in t.json");
        });
        for (;;) std::this_thread::sleep_for(1ms);
      },
      ::testing::ExitedWithCode(1),
      "^final work saw: stopped by --timeout after 0.01 s, while running module spin\n"
      "xlens run: stopped by --timeout after 0.01 s, while running module spin; the trace up to here is in "
      "t.json\n$");
}

}  // namespace
}  // namespace xlens

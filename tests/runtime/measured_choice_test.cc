// ChooseByMeasuring: how often it runs each candidate and in what order, that its winner is the
// candidate of lowest best time, and that a key's choice is kept for the process. Which
// candidate is faster is not asserted: that is a timing, left to the benchmarks.
#include "compiler/runtime/measured_choice.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace xlens::runtime {
namespace {

class MeasuredChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override { ClearMeasuredChoices(); }
  void TearDown() override { ClearMeasuredChoices(); }
};

TEST_F(MeasuredChoiceTest, RunsEachCandidateInBlocksAndKeepsTheChoice) {
  std::vector<int> order;
  volatile double sink = 0;
  auto candidate = [&](int index, int work) {
    return [&order, &sink, index, work] {
      order.push_back(index);
      for (int i = 0; i < work; ++i) sink = sink + 1.0 / (i + 1);
    };
  };
  const std::vector<std::function<void()>> candidates = {candidate(0, 20000), candidate(1, 1000),
                                                          candidate(2, 5000)};
  const MeasuredChoice choice = ChooseByMeasuring("shape a", candidates);
  // Each candidate's runs come in one block per pass, the passes in opposite orders.
  const int block = kSettleRuns + kRunsPerBlock;
  ASSERT_EQ(order.size(), static_cast<size_t>(3 * kPasses * block));
  for (int pass = 0; pass < kPasses; ++pass) {
    for (int i = 0; i < 3; ++i) {
      const int expected = pass % 2 == 0 ? i : 2 - i;
      for (int r = 0; r < block; ++r) EXPECT_EQ(order[(pass * 3 + i) * block + r], expected);
    }
  }
  ASSERT_EQ(choice.best_ms.size(), 3u);
  EXPECT_FALSE(choice.cached);
  for (double ms : choice.best_ms) EXPECT_GT(ms, 0.0);
  EXPECT_EQ(choice.best_ms[choice.winner], *std::min_element(choice.best_ms.begin(), choice.best_ms.end()));

  // The same key again: nothing runs, the same choice comes back.
  order.clear();
  const MeasuredChoice again = ChooseByMeasuring("shape a", candidates);
  EXPECT_TRUE(order.empty());
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.winner, choice.winner);
  EXPECT_EQ(again.best_ms, choice.best_ms);

  // Another key is timed anew.
  (void)ChooseByMeasuring("shape b", candidates);
  EXPECT_EQ(order.size(), static_cast<size_t>(3 * kPasses * block));
}

}  // namespace
}  // namespace xlens::runtime

// The part runner: every part written once; a helper that stalls in the middle of a part does
// not hold the call back (the caller computes that part itself, and the helper's late result is
// dropped); without leave to go the caller waits for it; errors come back; the timings choose
// the caller alone for a kind of call whose helped runs were slower.
#include "compiler/graph/ops/part_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "compiler/support/thread_pool.h"

namespace xlens::graph {
namespace {

using Clock = std::chrono::steady_clock;

// Part t writes t + 1 into out[t]. With `slow`, the caller takes 5 ms a part (so a helper
// wakes and takes some) and a helper 300 ms (it stalls).
class FillJob : public PartJob {
 public:
  FillJob(int64_t parts, bool slow) : out(std::make_shared<std::vector<int>>(parts, 0)), slow_(slow) {}
  std::shared_ptr<std::vector<int>> out;
  std::atomic<int> in_place{0}, into{0}, committed{0};
  std::atomic<bool> fail{false};

  void RunInPlace(int64_t t) override {
    if (fail) throw std::runtime_error("part failed");
    ++in_place;
    if (slow_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    (*out)[t] += static_cast<int>(t) + 1;
  }
  size_t ScratchBytes(int64_t) const override { return sizeof(int); }
  void RunInto(int64_t t, void* scratch) override {
    ++into;
    if (slow_) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    *static_cast<int*>(scratch) = static_cast<int>(t) + 1;
  }
  void Commit(int64_t t, const void* scratch) override {
    ++committed;
    (*out)[t] += *static_cast<const int*>(scratch);
  }

 private:
  bool slow_;
};

bool HasHelpers() { return ThreadPool::SchedulableCpus() > 1; }

TEST(PartRunnerTest, EveryPartIsWrittenOnce) {
  for (int round = 0; round < 50; ++round) {
    auto job = std::make_shared<FillJob>(37, false);
    EXPECT_EQ(RunPartsLeavingLateHelpers(job, 37, 1, true, nullptr), "");
    for (int64_t t = 0; t < 37; ++t) ASSERT_EQ((*job->out)[t], t + 1) << "part " << t;
    EXPECT_EQ(job->in_place + job->committed, 37);
  }
}

TEST(PartRunnerTest, AStalledHelperDoesNotHoldTheCallBack) {
  if (!HasHelpers()) GTEST_SKIP() << "one CPU: no helper threads";
  auto job = std::make_shared<FillJob>(8, true);
  const auto start = Clock::now();
  EXPECT_EQ(RunPartsLeavingLateHelpers(job, 8, 1, true, nullptr), "");
  const auto took = Clock::now() - start;
  for (int64_t t = 0; t < 8; ++t) ASSERT_EQ((*job->out)[t], t + 1) << "part " << t;
  EXPECT_GT(job->into, 0);           // a helper took a part...
  EXPECT_EQ(job->committed, 0);      // ...and had not finished it when the call returned
  EXPECT_EQ(job->in_place, 8);       // the caller computed every part
  EXPECT_LT(took, std::chrono::milliseconds(250));
  std::vector<int> seen = *job->out;
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the helper ends: drops its part
  EXPECT_EQ(*job->out, seen);
  EXPECT_EQ(job->committed, 0);
}

TEST(PartRunnerTest, WithoutLeaveTheCallerWaitsForItsHelpers) {
  if (!HasHelpers()) GTEST_SKIP() << "one CPU: no helper threads";
  auto job = std::make_shared<FillJob>(8, true);
  const auto start = Clock::now();
  EXPECT_EQ(RunPartsLeavingLateHelpers(job, 8, 1, false, nullptr), "");
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300));
  for (int64_t t = 0; t < 8; ++t) ASSERT_EQ((*job->out)[t], t + 1) << "part " << t;
  EXPECT_GT(job->into, 0);
  EXPECT_EQ(job->committed, job->into);  // every helper's part was waited for and written
}

TEST(PartRunnerTest, APartsErrorIsReturned) {
  auto job = std::make_shared<FillJob>(4, false);
  job->fail = true;
  EXPECT_EQ(RunPartsLeavingLateHelpers(job, 4, 0, true, nullptr), "part failed");
}

TEST(PartRunnerTest, TimingsChooseTheCallerAloneWhereHelpedRunsWereSlower) {
  PartTimings timings;
  timings.calls = 5;  // past the first measurements
  timings.helped_ns = 1'000'000'000;
  timings.alone_ns = 1;
  for (int call = 0; call < 10; ++call) {
    if ((timings.calls.load() % PartTimings::kProbeEvery) == 0) timings.calls += 1;  // not a probe
    auto job = std::make_shared<FillJob>(64, false);
    EXPECT_EQ(RunPartsLeavingLateHelpers(job, 64, 1, true, &timings), "");
    EXPECT_EQ(job->into, 0) << "call " << call;
    EXPECT_EQ(job->in_place, 64);
    timings.alone_ns = 1;  // keep the caller alone the faster
  }
}

}  // namespace
}  // namespace xlens::graph

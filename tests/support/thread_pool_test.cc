#include "compiler/support/thread_pool.h"

#include <atomic>
#include <vector>

#include <gtest/gtest.h>

namespace xlens {
namespace {

TEST(ThreadPoolTest, EveryTaskRunsExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t tasks : {0, 1, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(tasks);
    pool.ParallelFor(tasks, 5, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < tasks; ++i) ASSERT_EQ(hits[i].load(), 1) << i << " of " << tasks;
  }
}

TEST(ThreadPoolTest, SmallRangesRunInlineOnTheCaller) {
  ThreadPool pool(2);
  std::thread::id runner;
  pool.ParallelFor(10, 100, [&](int64_t, int64_t) { runner = std::this_thread::get_id(); });
  EXPECT_EQ(runner, std::this_thread::get_id());
}

}  // namespace
}  // namespace xlens

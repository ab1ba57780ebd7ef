#include "compiler/support/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/support/float_environment.h"

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

TEST(ThreadPoolTest, AStalledThreadHoldsBackOnlyTheChunkItIsIn) {
  // The first chunk a worker takes stalls (as a thread descheduled on a busy machine would); the
  // caller takes every other chunk meanwhile, so the stalled thread ran a small share.
  ThreadPool pool(1);
  const int64_t tasks = 640;
  std::atomic<int64_t> on_worker{0};
  std::atomic<bool> stalled{false};
  const std::thread::id caller = std::this_thread::get_id();
  pool.ParallelFor(tasks, 1, [&](int64_t begin, int64_t end) {
    if (std::this_thread::get_id() == caller) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // some work
      return;
    }
    on_worker += end - begin;
    if (!stalled.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  EXPECT_LE(on_worker.load(), tasks / 16);
}

TEST(ThreadPoolTest, ChunksRunUnderTheCallersFloatControl) {
  ThreadPool pool(3);
  auto controls = [&] {
    std::vector<uint32_t> seen(64);
    pool.ParallelFor(64, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) seen[i] = GetFloatControl();
    });
    return seen;
  };
  const uint32_t plain = GetFloatControl();
  {
    ScopedFlushDenormal flush;
    const uint32_t flushing = GetFloatControl();
    EXPECT_NE(flushing, plain);
    for (uint32_t c : controls()) EXPECT_EQ(c & ~0x3fu, flushing & ~0x3fu);
  }
  EXPECT_EQ(GetFloatControl(), plain);
  for (uint32_t c : controls()) EXPECT_EQ(c & ~0x3fu, plain & ~0x3fu);
}

TEST(ThreadPoolTest, FlushedSubnormalsReadAndComputeAsZero) {
  volatile float tiny = 1e-39f;  // subnormal
  volatile float scale = 1e-20f;
  {
    ScopedFlushDenormal flush;
    EXPECT_EQ(tiny + 0.0f, 0.0f);    // inputs as zero
    EXPECT_EQ(scale * scale, 0.0f);  // results as zero
  }
  EXPECT_EQ(tiny + 0.0f, 1e-39f);
  EXPECT_GT(scale * scale, 0.0f);
}

}  // namespace
}  // namespace xlens

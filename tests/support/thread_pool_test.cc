#include "compiler/support/thread_pool.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <initializer_list>
#include <stdexcept>
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

TEST(ThreadPoolTest, EveryTaskRunsExactlyOnceUnderContention) {
  // More pool threads than this machine may have cores, and two spinning threads beside them
  // (another process' work): threads are descheduled mid-loop and their runs stolen.
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (int i = 0; i < 2; ++i) {
    hogs.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  ThreadPool pool(3);
  for (int round = 0; round < 200; ++round) {
    const int64_t tasks = 1 + (round * 7919) % 5000;
    const int64_t grain = 1 + round % 7;
    std::vector<std::atomic<int>> hits(tasks);
    pool.ParallelFor(tasks, grain, [&](int64_t begin, int64_t end) {
      ASSERT_LT(begin, end);
      // A chunk, or the whole range where the loop ran inline.
      ASSERT_TRUE(end - begin <= std::max<int64_t>(grain, (tasks + 63) / 64) + grain ||
                  (begin == 0 && end == tasks));
      for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    });
    for (int64_t i = 0; i < tasks; ++i) ASSERT_EQ(hits[i].load(), 1) << i << " of " << tasks;
  }
  stop = true;
  for (std::thread& t : hogs) t.join();
}

// The loop a pool worker last joined (ThreadPool::SetJoinHookForTesting).
thread_local uint64_t joined_generation = 0;

// Spins until `done` or 5 s have passed (a test that would hang fails instead).
template <typename Done>
bool WaitFor(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(ThreadPoolTest, ADescheduledWorkerDoesNotStallTheLoop) {
  // The first chunk the worker takes stalls until every other chunk of the loop has run (5 s at
  // most), as a thread descheduled by a busy machine for that long would. Split into one part per
  // thread, the rest of the worker's half would wait behind the stalled chunk, which would wait
  // out its 5 s; taken chunk by chunk, the caller runs the rest of the worker's half meanwhile and
  // the loop ends with the stalled chunk. The caller's first chunk waits until the worker is in
  // its stall, which a busy machine may otherwise wake too late to take a chunk at all.
  ThreadPool pool(1);
  const int64_t tasks = 64;  // 32 chunks of 2 tasks
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> on_worker{0}, chunks_run{0};
  std::atomic<bool> stalled{false}, rest_ran_meanwhile{false};
  pool.ParallelFor(tasks, 1, [&](int64_t begin, int64_t end) {
    if (std::this_thread::get_id() != caller) {
      on_worker += end - begin;
      if (!stalled.exchange(true)) rest_ran_meanwhile = WaitFor([&] { return chunks_run.load() == 31; });
    } else if (begin == 0) {
      ASSERT_TRUE(WaitFor([&] { return stalled.load(); })) << "no worker took a chunk in 5 s";
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500) * (end - begin));  // some work
    ++chunks_run;
  });
  EXPECT_TRUE(rest_ran_meanwhile.load());
  EXPECT_EQ(on_worker.load(), 2);  // of its 32 under a split into parts
}

TEST(ThreadPoolTest, AWorkerDescheduledBeforeItTakesAChunkHoldsNothingBack) {
  // The worker joins the first loop and is held, before it takes a chunk, as a thread
  // descheduled on a busy machine would be: the caller runs every chunk and returns, for it waits
  // for chunks, not for workers. The worker is let go during the second loop: it must take
  // nothing of that loop in the first one's name (its chunks would run with the first loop's
  // float control, and race its end), but join the second loop and run chunks of it.
  std::atomic<int> joins{0};
  std::atomic<bool> held{false}, release{false};
  uint64_t first_generation = 0;
  ThreadPool pool(1);
  pool.SetJoinHookForTesting([&](uint64_t generation) {
    joined_generation = generation;
    if (joins++ == 0) {
      first_generation = generation;
      held = true;
      WaitFor([&] { return release.load(); });
    }
  });
  std::vector<std::atomic<int>> first(32), second(32);
  const std::thread::id caller = std::this_thread::get_id();
  pool.ParallelFor(32, 1, [&](int64_t begin, int64_t end) {
    // The caller's first chunk waits until the worker is held inside the loop.
    if (std::this_thread::get_id() == caller) {
      ASSERT_TRUE(WaitFor([&] { return held.load(); }));
    }
    for (int64_t i = begin; i < end; ++i) first[i]++;
  });
  EXPECT_FALSE(release.load());  // returned with the worker still held in the first loop
  for (int64_t i = 0; i < 32; ++i) ASSERT_EQ(first[i].load(), 1) << i;
  std::atomic<int64_t> on_worker{0}, in_a_stale_name{0};
  pool.ParallelFor(32, 1, [&](int64_t begin, int64_t end) {
    if (std::this_thread::get_id() == caller) {
      // Let the worker go, and wait until it has run a chunk of this loop.
      release = true;
      ASSERT_TRUE(WaitFor([&] { return on_worker.load() > 0; }));
    } else {
      if (joined_generation == first_generation) ++in_a_stale_name;
      ++on_worker;
    }
    for (int64_t i = begin; i < end; ++i) second[i]++;
  });
  for (int64_t i = 0; i < 32; ++i) {
    ASSERT_EQ(second[i].load(), 1) << i;
    ASSERT_EQ(first[i].load(), 1) << i;
  }
  EXPECT_EQ(in_a_stale_name.load(), 0);
  EXPECT_EQ(joins.load(), 2);
}

TEST(ThreadPoolTest, AnExceptionStopsTheLoopAndReachesTheCaller) {
  ThreadPool pool(2);
  std::atomic<int64_t> ran{0};
  try {
    pool.ParallelFor(300, 1, [&](int64_t begin, int64_t end) {
      if (begin == 0) throw std::runtime_error("chunk 0");  // the caller's first
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ran += end - begin;
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "chunk 0");
  }
  // The chunks already running finished; the rest (about two thirds) never started.
  EXPECT_LT(ran.load(), 150);
  // The pool is whole afterwards.
  std::vector<std::atomic<int>> hits(1000);
  pool.ParallelFor(1000, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[i]++;
  });
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
}

TEST(ThreadPoolTest, AWorkersExceptionReachesTheCaller) {
  ThreadPool pool(1);
  const std::thread::id caller = std::this_thread::get_id();
  EXPECT_THROW(pool.ParallelFor(64, 1,
                                [&](int64_t, int64_t) {
                                  std::this_thread::sleep_for(std::chrono::milliseconds(5));
                                  if (std::this_thread::get_id() != caller) {
                                    throw std::out_of_range("on the worker");
                                  }
                                }),
               std::out_of_range);
}

TEST(ThreadPoolTest, NestedLoopsRunInlineAndCoverEveryPair) {
  ThreadPool pool(2);
  constexpr int64_t kOuter = 48, kInner = 500;
  std::vector<std::atomic<int>> hits(kOuter * kInner);
  pool.ParallelFor(kOuter, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const std::thread::id outer = std::this_thread::get_id();
      pool.ParallelFor(kInner, 1, [&](int64_t b, int64_t e) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        for (int64_t j = b; j < e; ++j) hits[i * kInner + j]++;
      });
    }
  });
  for (int64_t k = 0; k < kOuter * kInner; ++k) ASSERT_EQ(hits[k].load(), 1) << k;
}

TEST(ThreadPoolTest, CallsFromManyThreadsTakeTurns) {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 50; ++round) {
        const int64_t tasks = 100 + 37 * c + round;
        std::vector<std::atomic<int>> hits(tasks);
        pool.ParallelFor(tasks, 1, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < tasks; ++i) wrong += hits[i].load() != 1;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// How a worker comes to the loops LoopsWithWorkerChunks runs.
enum class Worker {
  // The caller's first chunk of a loop run in parallel waits (5 s at most) until the worker has
  // taken a chunk. A worker is woken late on a busy machine (beside four busy loops on two CPUs:
  // 1-3 ms after the loop was published at the median, 12 ms at worst; beside eight, up to 50),
  // and a loop of a few milliseconds then often ends before it comes: a run of the caller
  // alone, which the pool counts as neither stall nor gain, so that a test would check the
  // scheduler, not the pool.
  kJoins,
  // No wait: for a test that holds the worker out of its loops itself.
  kAsItComes,
};

// Runs `loops` loops of 32 one-task chunks; in each, a task takes `caller_us` on the calling
// thread and `worker_us` on a worker. Returns in how many loops a worker ran a chunk. A loop run
// inline is one call over the whole range, on the caller.
int LoopsWithWorkerChunks(ThreadPool& pool, int loops, int caller_us, int worker_us,
                          Worker worker_comes = Worker::kJoins) {
  const std::thread::id caller = std::this_thread::get_id();
  int with_worker = 0;
  for (int l = 0; l < loops; ++l) {
    std::atomic<bool> on_worker{false};
    bool waited = false;  // the caller's, in this loop
    pool.ParallelFor(32, 1, [&](int64_t begin, int64_t end) {
      const bool worker = std::this_thread::get_id() != caller;
      if (worker) on_worker = true;
      if (!worker && !waited && end - begin < 32 && worker_comes == Worker::kJoins) {
        waited = true;
        EXPECT_TRUE(WaitFor([&] { return on_worker.load(); })) << "no worker took a chunk in 5 s";
      }
      std::this_thread::sleep_for(std::chrono::microseconds(worker ? worker_us : caller_us) * (end - begin));
    });
    with_worker += on_worker;
  }
  return with_worker;
}

// Runs `loops` loops of 32 one-task chunks whose worker stalls in the first chunk it takes (its
// core taken by other work), as LoopsWithWorkerChunks with Worker::kJoins; returns in how many a
// worker ran a chunk. The caller's tasks take no time; the stalled chunk holds until every other
// chunk has run (5 s at most), then for as long again as the loop has taken, and 30 ms more: the
// loop takes more than twice what the caller alone would have, and loses more than 25 ms, the
// loss that sends a loop inline for the longest spell (100 ms), however busy the machine. A
// stall of a fixed 30 ms behind caller's tasks of 100 us was none beside eight busy loops on two
// CPUs: a sleep of 100 us took 0.8-1.5 ms, and the worker came up to 50 ms late.
int StalledLoops(ThreadPool& pool, int loops) {
  const std::thread::id caller = std::this_thread::get_id();
  int with_worker = 0;
  for (int l = 0; l < loops; ++l) {
    std::atomic<bool> on_worker{false};
    std::atomic<int> chunks_run{0};
    bool waited = false;  // the caller's, in this loop
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelFor(32, 1, [&](int64_t begin, int64_t end) {
      if (std::this_thread::get_id() != caller) {
        if (!on_worker.exchange(true)) {
          EXPECT_TRUE(WaitFor([&] { return chunks_run.load() == 31; }));
          std::this_thread::sleep_for(std::chrono::steady_clock::now() - start + std::chrono::milliseconds(30));
        }
      } else if (!waited && end - begin < 32) {
        waited = true;
        EXPECT_TRUE(WaitFor([&] { return on_worker.load(); })) << "no worker took a chunk in 5 s";
      }
      ++chunks_run;
    });
    with_worker += on_worker;
  }
  return with_worker;
}

TEST(ThreadPoolTest, ALoopWhoseWorkersOnlyStallItRunsInline) {
  // The first two runs wait for the stalled chunk; the loops after them run on the caller alone
  // until a probe is due, 100 ms after the second: all 18, microseconds each. (With tasks of
  // 100 us on the caller, the inline loops took 5-9 ms each beside four busy loops on two CPUs,
  // and the probe came after 11 or 12 of them.)
  ThreadPool pool(1);
  EXPECT_EQ(StalledLoops(pool, 20), 2);  // 20 if every run waited
}

TEST(ThreadPoolTest, RunsInlineSaysWhenALoopWouldRunOnTheCallerAlone) {
  ThreadPool pool(1);
  EXPECT_TRUE(pool.RunsInline(1, 1));    // one chunk
  EXPECT_TRUE(pool.RunsInline(10, 10));  // one chunk of the grain
  EXPECT_FALSE(pool.RunsInline(32, 1));  // a loop with no history runs in parallel
  pool.ParallelFor(2, 1, [&](int64_t, int64_t) { EXPECT_TRUE(pool.RunsInline(32, 1)); });  // nested
  // A worker stalled in its chunk in two runs in a row turns loops of 32 tasks inline for a
  // while; loops of another size stay parallel.
  EXPECT_EQ(StalledLoops(pool, 2), 2);
  EXPECT_TRUE(pool.RunsInline(32, 1));
  EXPECT_FALSE(pool.RunsInline(33, 1));
}

TEST(ThreadPoolTest, AStallLongAgoDoesNotCountTowardTheNextOne) {
  // One stalled run (a first run faulting its pages in), then 20 runs that the worker joins too
  // late to take a chunk in (held in its join until they are over), so the caller takes every
  // chunk, then one more stall: not two in a row. (A worker held for a fixed 20 ms joined a run
  // that took longer beside eight busy loops on two CPUs, and stalled it.)
  ThreadPool pool(1);
  std::atomic<bool> late{false};
  pool.SetJoinHookForTesting([&](uint64_t) {
    for (int ms = 0; late && ms < 5000; ++ms) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  EXPECT_EQ(StalledLoops(pool, 1), 1);
  late = true;
  EXPECT_EQ(LoopsWithWorkerChunks(pool, 20, 100, 100, Worker::kAsItComes), 0);
  late = false;
  EXPECT_EQ(StalledLoops(pool, 1), 1);
  EXPECT_FALSE(pool.RunsInline(32, 1));
}

TEST(ThreadPoolTest, ALoopThatGainsFromItsWorkersStaysParallel) {
  ThreadPool pool(1);
  EXPECT_GE(LoopsWithWorkerChunks(pool, 20, 1000, 1000), 16);
}

TEST(ThreadPoolTest, OneStalledRunLeavesALoopParallel) {
  // The first run stalls (as a first run faults its outputs' pages in); in the runs after it the
  // worker keeps pace (its tasks take no time: a worker that sleeps as long as the caller is
  // late to wake on a busy machine often enough to stall the second run too, and that is two in
  // a row). One stall says little of the load: the loop stays parallel, where a single stall
  // would send it inline for 100 ms (about ten of these runs).
  ThreadPool pool(1);
  EXPECT_EQ(StalledLoops(pool, 1), 1);
  EXPECT_FALSE(pool.RunsInline(32, 1));
  EXPECT_GE(LoopsWithWorkerChunks(pool, 10, 300, 0), 8);
}

TEST(ThreadPoolTest, ALoopRunInlineGoesParallelAgainOnceItsWorkersKeepUp) {
  ThreadPool pool(1);
  EXPECT_EQ(StalledLoops(pool, 5), 2);
  EXPECT_TRUE(pool.RunsInline(32, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(110));  // past the longest inline spell
  // The probes find the worker keeping pace (its tasks take no time), and the loop's history
  // turns parallel again.
  LoopsWithWorkerChunks(pool, 10, 1000, 0);
  EXPECT_GE(LoopsWithWorkerChunks(pool, 10, 1000, 0), 8);
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(ThreadPoolTest, IdleWorkersSleep) {
  // Between loops the workers spin for microseconds, then sleep: 300 ms without a loop cost the
  // process next to no CPU time (three spinning workers would burn 900 ms of it).
  ThreadPool pool(3);
  pool.ParallelFor(64, 1, [](int64_t, int64_t) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LT(ProcessCpuSeconds() - before, 0.03);
}

// Busy for `us` microseconds of the thread's own CPU time (time it spends descheduled does not
// count), as a chunk of real work would be.
void WorkFor(int us) {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  const int64_t until = ts.tv_sec * 1000000000LL + ts.tv_nsec + us * 1000LL;
  for (;;) {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    if (ts.tv_sec * 1000000000LL + ts.tv_nsec >= until) return;
  }
}

// Runs the calling thread (and the threads it starts) on the first CPU it may use, as under
// `taskset -c N`, until destroyed; `saved()` is the set it had.
class PinnedToOneCpu {
 public:
  PinnedToOneCpu() {
    ok_ = sched_getaffinity(0, sizeof(saved_), &saved_) == 0;
    int first = 0;
    while (ok_ && !CPU_ISSET(first, &saved_)) ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ok_ = ok_ && sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinnedToOneCpu() { Restore(); }
  bool ok() const { return ok_; }
  const cpu_set_t& saved() const { return saved_; }
  bool Restore() {
    if (!ok_) return false;
    ok_ = false;
    return sched_setaffinity(0, sizeof(saved_), &saved_) == 0;
  }

 private:
  cpu_set_t saved_;
  bool ok_ = false;
};

TEST(ThreadPoolTest, ASpinningThreadLetsTheThreadItWaitsForRun) {
  // The caller and the worker share one CPU, as on a machine whose other cores are busy: a
  // worker woken for a loop may preempt the caller and run its chunks, then spin for the next
  // loop while the caller, which would start it, waits for the CPU; and the caller may spin
  // while the worker holding a chunk waits. A spinning thread yields to the one it waits for,
  // so 500 loops of two 10 us chunks cost the process about their 10 ms of work (14-15 ms
  // when each wait spins out its 10-20 us instead). Process CPU time: what other processes
  // take from the CPU does not count.
  PinnedToOneCpu pinned;
  ASSERT_TRUE(pinned.ok());
  double best = 1e30;
  {
    ThreadPool pool(1);  // its worker inherits the one CPU
    for (int attempt = 0; attempt < 3; ++attempt) {
      const double start = ProcessCpuSeconds();
      for (int l = 0; l < 500; ++l) {
        pool.ParallelFor(2, 1, [](int64_t begin, int64_t end) { WorkFor(10 * static_cast<int>(end - begin)); });
      }
      best = std::min(best, (ProcessCpuSeconds() - start) * 1e3);
    }
  }
  ASSERT_TRUE(pinned.Restore());
  EXPECT_LT(best, 12.5) << "ms of CPU time";
}

TEST(ThreadPoolTest, AnIdleWorkerSpinsThroughTheGapsItsLoopsHaveLeft) {
  using std::chrono::microseconds;
  IdleSpinPolicy spin;
  EXPECT_EQ(spin.Limit(), microseconds(20));  // nothing seen yet
  // Loops 60 us apart (a training step's kernels, one step after the next): twice that.
  for (int i = 0; i < 10; ++i) spin.Observe(microseconds(60));
  EXPECT_EQ(spin.Limit(), microseconds(120));
  // One long pause weighs a quarter of the mean, which then leaves the spin to the peak of the
  // close gaps: 60 us, a quarter more, faded by one gap.
  spin.Observe(microseconds(3000));
  EXPECT_NEAR(static_cast<double>(spin.Limit().count()), 1.25 * 60000 * 0.995, 1);
  for (int i = 0; i < 30; ++i) spin.Observe(microseconds(60));
  EXPECT_LT(spin.Limit(), microseconds(130));
  EXPECT_GT(spin.Limit(), microseconds(115));
  // Never more than 200 us.
  for (int i = 0; i < 30; ++i) spin.Observe(microseconds(99));
  EXPECT_LE(spin.Limit(), microseconds(200));
  EXPECT_GT(spin.Limit(), microseconds(190));
  for (int i = 0; i < 30; ++i) spin.Observe(microseconds(199));
  EXPECT_EQ(spin.Limit(), microseconds(200));
}

TEST(ThreadPoolTest, AnIdleWorkerSpinsThroughTheLongestRecentGapNotJustTheMean) {
  using std::chrono::microseconds;
  // A module's loops mostly 2 us apart, one gap in ten 40 us (a worker's part of a call ending
  // before the caller's): the mean's rule alone would spin 20 us and sleep through every long gap.
  IdleSpinPolicy spin;
  for (int run = 0; run < 100; ++run) {
    for (int i = 0; i < 9; ++i) spin.Observe(microseconds(2));
    spin.Observe(microseconds(40));
  }
  EXPECT_GE(spin.Limit(), microseconds(45));
  EXPECT_LE(spin.Limit(), microseconds(50));
  // Even right before the next long gap, after nine short ones.
  for (int i = 0; i < 9; ++i) spin.Observe(microseconds(2));
  EXPECT_GE(spin.Limit(), microseconds(40));
  // Once the long gaps stop, the peak fades back to the sparse loops' 20 us.
  for (int i = 0; i < 1000; ++i) spin.Observe(microseconds(2));
  EXPECT_EQ(spin.Limit(), microseconds(20));
  // Gaps longer than a spin may cover (pauses between steps) never set the peak.
  IdleSpinPolicy paused;
  for (int i = 0; i < 30; ++i) paused.Observe(microseconds(300));
  EXPECT_EQ(paused.Limit(), microseconds(20));
  for (int i = 0; i < 30; ++i) paused.Observe(microseconds(101));
  EXPECT_EQ(paused.Limit(), std::chrono::nanoseconds(126250));  // the peak's 101 us and a quarter
}

TEST(ThreadPoolTest, TheDefaultSizeFollowsTheCpusTheProcessMayUse) {
  PinnedToOneCpu pinned;
  ASSERT_TRUE(pinned.ok());
  const cpu_set_t saved = pinned.saved();
  EXPECT_EQ(ThreadPool::SchedulableCpus(), 1);
  {
    ThreadPool pool;
    EXPECT_EQ(pool.parallelism(), 1);
  }
  ASSERT_TRUE(pinned.Restore());
  EXPECT_EQ(ThreadPool::SchedulableCpus(), CPU_COUNT(&saved));
}

// The first two CPUs this process may run on, or fewer.
std::vector<int> FirstTwoCpus(const cpu_set_t& allowed) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  return cpus;
}

bool SetOwnCpus(std::initializer_list<int> cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

// Runs loops of 8 chunks of 100 us from the calling thread until the pool's worker has taken 20
// chunks (its CPU may be busy with other work for a while) or 1000 loops have run; each worker
// chunk counts whether it runs on, or may be scheduled on, `cpu`.
void RunUntilTheWorkerJoins(ThreadPool& pool, int cpu, int* worker_chunks, int* may_run_on_cpu) {
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> chunks{0}, on_cpu{0};
  for (int l = 0; l < 1000 && chunks < 20; ++l) {
    pool.ParallelFor(8, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != caller) {
        ++chunks;
        cpu_set_t mine;
        const bool may_run_there = sched_getaffinity(0, sizeof(mine), &mine) != 0 || CPU_ISSET(cpu, &mine);
        on_cpu += sched_getcpu() == cpu || may_run_there;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    });
  }
  *worker_chunks = chunks.load();
  *may_run_on_cpu = on_cpu.load();
}

TEST(ThreadPoolTest, WorkersKeepOffTheCallersCpu) {
  // A worker woken onto the caller's CPU would wait there while the caller runs the loop alone.
  // The caller (a thread of its own: the process's CPUs stay all of them) runs on one CPU, then
  // on another: a worker's chunks never run where it is, nor may the worker be woken there.
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  const std::vector<int> cpus = FirstTwoCpus(saved);
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU";
  ThreadPool pool(1);
  std::thread caller([&] {
    for (int cpu : cpus) {
      ASSERT_TRUE(SetOwnCpus({cpu}));
      int worker_chunks = 0, on_callers_cpu = 0;
      RunUntilTheWorkerJoins(pool, cpu, &worker_chunks, &on_callers_cpu);
      EXPECT_GT(worker_chunks, 0) << "caller on CPU " << cpu;
      EXPECT_EQ(on_callers_cpu, 0) << "caller on CPU " << cpu;
    }
  });
  caller.join();
}

TEST(ThreadPoolTest, ACallerThatMovesToItsWorkersCpuMovesThemOffItBeforeWakingThem) {
  // The caller runs on a, so the worker keeps to b; then the caller moves to b. A worker left
  // kept to b would be woken there, behind the caller, and could run no chunk until the caller
  // left b. It must already be off b when it joins the next loop.
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  const std::vector<int> cpus = FirstTwoCpus(saved);
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU";
  const int a = cpus[0], b = cpus[1];
  ThreadPool pool(1);
  std::thread caller([&] {
    ASSERT_TRUE(SetOwnCpus({a}));
    int worker_chunks = 0, on_a = 0;
    RunUntilTheWorkerJoins(pool, a, &worker_chunks, &on_a);
    ASSERT_GT(worker_chunks, 0);
    ASSERT_EQ(on_a, 0);  // the worker keeps to b now
    std::atomic<int> joins{0}, joined_where_it_may_run_on_b{0};
    pool.SetJoinHookForTesting([&](uint64_t) {
      cpu_set_t mine;
      ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
      ++joins;
      joined_where_it_may_run_on_b += CPU_ISSET(b, &mine) ? 1 : 0;
    });
    ASSERT_TRUE(SetOwnCpus({b}));
    // Chunks that sleep leave b free, so the worker joins even where it is still kept to b.
    for (int l = 0; l < 1000 && joins == 0; ++l) {
      pool.ParallelFor(8, 1, [](int64_t, int64_t) { std::this_thread::sleep_for(std::chrono::microseconds(100)); });
    }
    pool.SetJoinHookForTesting(nullptr);
    ASSERT_GT(joins.load(), 0);
    EXPECT_EQ(joined_where_it_may_run_on_b.load(), 0) << "the worker was woken still kept to the caller's new CPU";
  });
  caller.join();
}

TEST(ThreadPoolTest, WorkersStayWithinTheCpusTheProcessWasNarrowedTo) {
  // As `taskset -a -p` does to a running process: every thread, the worker and the process's
  // main thread included, narrowed to the CPU the worker had kept to. A worker must not then
  // move itself onto the CPU it kept off when the caller comes to its CPU.
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  const std::vector<int> cpus = FirstTwoCpus(saved);
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU";
  const int a = cpus[0], b = cpus[1];
  ThreadPool pool(1);
  std::thread caller([&] {
    ASSERT_TRUE(SetOwnCpus({a}));
    int worker_chunks = 0, on_a = 0;
    RunUntilTheWorkerJoins(pool, a, &worker_chunks, &on_a);  // the worker keeps to b now
    ASSERT_GT(worker_chunks, 0);
    // Narrow every thread to b: the worker (from one of its chunks), the main thread (below,
    // before this thread goes on) and this one.
    const std::thread::id self = std::this_thread::get_id();
    std::atomic<bool> worker_narrowed{false};
    for (int l = 0; l < 1000 && !worker_narrowed; ++l) {
      pool.ParallelFor(8, 1, [&](int64_t, int64_t) {
        if (std::this_thread::get_id() != self && SetOwnCpus({b})) worker_narrowed = true;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      });
    }
    ASSERT_TRUE(worker_narrowed);
  });
  caller.join();
  ASSERT_TRUE(SetOwnCpus({b}));
  std::thread narrowed_caller([&] {
    ASSERT_TRUE(SetOwnCpus({b}));
    int worker_chunks = 0, on_a = 0;
    RunUntilTheWorkerJoins(pool, a, &worker_chunks, &on_a);
    EXPECT_GT(worker_chunks, 0);
    EXPECT_EQ(on_a, 0) << "the worker moved itself onto a CPU the process no longer has";
  });
  narrowed_caller.join();
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
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
  // The low six bits are MXCSR's sticky exception flags, which any inexact operation sets (the
  // pool's own timing arithmetic included); the modes are what must come back.
  EXPECT_EQ(GetFloatControl() & ~0x3fu, plain & ~0x3fu);
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

// ThreadPool: a fixed set of worker threads for data-parallel loops. ParallelFor splits a range
// of tasks into contiguous chunks (many per thread), which the workers and the calling thread
// take one at a time until none is left, and returns when all are done. Small ranges run inline:
// a chunk is never smaller than `grain` tasks. Every chunk runs under the caller's floating-point
// control word (rounding, flushing of subnormals), so a loop computes the same wherever its
// chunks land.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace xlens {

class ThreadPool {
 public:
  // `threads` workers besides the caller; 0: hardware_concurrency() - 1.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs fn(begin, end) over [0, tasks) in chunks of at least `grain` tasks.
  void ParallelFor(int64_t tasks, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Threads that run a ParallelFor, the caller included.
  int parallelism() const { return static_cast<int>(workers_.size()) + 1; }

  // One pool per process, sized to the machine.
  static ThreadPool& Default();

  // A ParallelFor splits its range into at most this many chunks per thread.
  static constexpr int kChunksPerThread = 16;

 private:
  void WorkerLoop();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_tasks_ = 0;
  int64_t job_chunk_ = 0;
  int64_t next_chunk_ = 0;
  int64_t chunks_ = 0;
  int64_t chunks_done_ = 0;
  uint32_t job_float_control_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::mutex run_mu_;  // one ParallelFor at a time
};

}  // namespace xlens

#include "compiler/support/thread_pool.h"

#include "compiler/support/float_environment.h"

#include <algorithm>

namespace xlens {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) {
    threads = std::max(1u, std::thread::hardware_concurrency()) - 1;
  }
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : workers_) t.join();
}

ThreadPool& ThreadPool::Default() {
  static ThreadPool* pool = new ThreadPool();
  return *pool;
}

void ThreadPool::ParallelFor(int64_t tasks, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (tasks <= 0) return;
  grain = std::max<int64_t>(1, grain);
  // Many more chunks than threads, taken one at a time: on a machine shared with other processes a
  // thread that is descheduled or slowed holds back only the chunk it is in, and the others take
  // the rest, where a split into a few large chunks would leave them waiting for its share.
  const int64_t max_chunks =
      std::min<int64_t>(parallelism() * kChunksPerThread, (tasks + grain - 1) / grain);
  if (max_chunks <= 1 || workers_.empty()) {
    fn(0, tasks);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  const int64_t chunk = (tasks + max_chunks - 1) / max_chunks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_tasks_ = tasks;
    job_chunk_ = chunk;
    job_float_control_ = GetFloatControl();
    next_chunk_ = 0;
    chunks_ = (tasks + chunk - 1) / chunk;
    chunks_done_ = 0;
    ++generation_;
  }
  work_ready_.notify_all();
  // The caller works too.
  while (true) {
    int64_t c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (next_chunk_ >= chunks_) break;
      c = next_chunk_++;
    }
    fn(c * chunk, std::min(tasks, (c + 1) * chunk));
    std::lock_guard<std::mutex> lock(mu_);
    ++chunks_done_;
  }
  std::unique_lock<std::mutex> lock(mu_);
  work_done_.wait(lock, [&] { return chunks_done_ == chunks_; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_ready_.wait(lock, [&] { return stopping_ || (generation_ != seen && job_ != nullptr); });
    if (stopping_) return;
    seen = generation_;
    while (job_ != nullptr && next_chunk_ < chunks_) {
      const int64_t c = next_chunk_++;
      const auto* fn = job_;
      const int64_t chunk = job_chunk_, tasks = job_tasks_;
      const uint32_t float_control = job_float_control_;
      lock.unlock();
      SetFloatControl(float_control);
      (*fn)(c * chunk, std::min(tasks, (c + 1) * chunk));
      lock.lock();
      if (++chunks_done_ == chunks_) work_done_.notify_all();
    }
  }
}

}  // namespace xlens

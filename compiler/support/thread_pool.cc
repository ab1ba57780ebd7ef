#include "compiler/support/thread_pool.h"

#include "compiler/support/float_environment.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace xlens {
namespace {

// How long an idle worker, and a caller waiting for the last chunks, spin before they sleep.
// About what a sleep costs (a futex wait and the wake-up that ends it), so a loop that follows
// at once finds the worker awake, while a pool between loops holds a core no longer than that:
// on a busy machine a spinning thread takes the core from another process' work (and from this
// process' own descheduled threads).
constexpr auto kIdleSpin = std::chrono::microseconds(20);
constexpr auto kFinishSpin = std::chrono::microseconds(10);

// The pool whose chunk this thread is running (a worker: its own pool, always), so that a
// ParallelFor made from inside a chunk runs inline instead of waiting for the loop it is part of.
thread_local const ThreadPool* inside_pool = nullptr;

class InsidePool {
 public:
  explicit InsidePool(const ThreadPool* pool) : saved_(std::exchange(inside_pool, pool)) {}
  ~InsidePool() { inside_pool = saved_; }

 private:
  const ThreadPool* saved_;
};

void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or the time is up; true when done() came true.
template <typename Done>
bool SpinUntil(Done done, std::chrono::nanoseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int i = 1;; ++i) {
    if (done()) return true;
    if (i % 32 == 0 && std::chrono::steady_clock::now() >= deadline) return false;
    Pause();
  }
}

constexpr uint64_t Pack(uint64_t begin, uint64_t end) { return begin << 32 | end; }

}  // namespace

int ThreadPool::SchedulableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = SchedulableCpus() - 1;
  runs_ = std::make_unique<Run[]>(threads + 1);
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i + 1); });
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
  const int threads = parallelism();
  const int64_t max_chunks = std::min<int64_t>(threads * kChunksPerThread, (tasks + grain - 1) / grain);
  if (max_chunks <= 1 || workers_.empty() || inside_pool == this) {
    fn(0, tasks);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  InsidePool inside(this);
  chunk_ = (tasks + max_chunks - 1) / max_chunks;
  const int64_t chunks = (tasks + chunk_ - 1) / chunk_;
  for (int t = 0; t < threads; ++t) {
    runs_[t].range.store(Pack(chunks * t / threads, chunks * (t + 1) / threads), std::memory_order_relaxed);
  }
  fn_ = &fn;
  tasks_ = tasks;
  float_control_ = GetFloatControl();
  failed_.store(false, std::memory_order_relaxed);
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = nullptr;
    open_ = true;
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) work_ready_.notify_all();
  RunChunks(0);
  // What is left runs on workers; a worker that has not joined yet will find nothing to take.
  SpinUntil([&] { return active_.load(std::memory_order_acquire) == 0; }, kFinishSpin);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    work_done_.wait(lock, [&] { return active_.load(std::memory_order_relaxed) == 0; });
    open_ = false;
    error = std::exchange(error_, nullptr);
  }
  fn_ = nullptr;
  if (error) std::rethrow_exception(error);
}

bool ThreadPool::TakeChunk(int slot, int64_t* chunk) {
  // From the front of this thread's own run...
  std::atomic<uint64_t>& own = runs_[slot].range;
  for (uint64_t r = own.load(std::memory_order_relaxed);;) {
    const uint64_t begin = r >> 32, end = r & 0xffffffffu;
    if (begin >= end) break;
    if (own.compare_exchange_weak(r, Pack(begin + 1, end), std::memory_order_relaxed)) {
      *chunk = static_cast<int64_t>(begin);
      return true;
    }
  }
  // ...then from the back of the others', nearest first: what a late or descheduled thread
  // has not started.
  const int threads = parallelism();
  for (int k = 1; k < threads; ++k) {
    std::atomic<uint64_t>& other = runs_[(slot + k) % threads].range;
    for (uint64_t r = other.load(std::memory_order_relaxed);;) {
      const uint64_t begin = r >> 32, end = r & 0xffffffffu;
      if (begin >= end) break;
      if (other.compare_exchange_weak(r, Pack(begin, end - 1), std::memory_order_relaxed)) {
        *chunk = static_cast<int64_t>(end - 1);
        return true;
      }
    }
  }
  return false;
}

void ThreadPool::RunChunks(int slot) {
  int64_t c;
  while (!failed_.load(std::memory_order_relaxed) && TakeChunk(slot, &c)) {
    const int64_t begin = c * chunk_;
    try {
      (*fn_)(begin, std::min(tasks_, begin + chunk_));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }
}

void ThreadPool::WorkerLoop(int slot) {
  inside_pool = this;
  uint64_t seen = 0;
  while (true) {
    SpinUntil([&] {
      return generation_.load(std::memory_order_acquire) != seen ||
             stopping_.load(std::memory_order_relaxed);
    }, kIdleSpin);
    std::unique_lock<std::mutex> lock(mu_);
    ++sleepers_;
    work_ready_.wait(lock, [&] {
      return stopping_.load(std::memory_order_relaxed) ||
             generation_.load(std::memory_order_relaxed) != seen;
    });
    --sleepers_;
    if (stopping_.load(std::memory_order_relaxed)) return;
    seen = generation_.load(std::memory_order_relaxed);
    if (!open_) continue;  // that loop has ended
    active_.fetch_add(1, std::memory_order_relaxed);
    lock.unlock();
    SetFloatControl(float_control_);
    RunChunks(slot);
    lock.lock();
    if (active_.fetch_sub(1, std::memory_order_release) == 1) work_done_.notify_all();
  }
}

}  // namespace xlens

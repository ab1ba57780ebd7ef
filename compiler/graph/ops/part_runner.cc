#include "compiler/graph/ops/part_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "compiler/support/thread_pool.h"

namespace xlens::graph {
namespace {

using Clock = std::chrono::steady_clock;

void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// How long an idle helper spins for the next call before it sleeps: short. On a machine that
// other work keeps busy a thread that stays runnable (spinning, or yielding between checks)
// gets less of a core than one that sleeps and is woken (measured: a helper that yielded for
// 2 ms between calls ran 0.25 s in 4 s, waiting 3 s in the run queue), and a helper spinning
// on the caller's core takes the time from the caller.
constexpr auto kIdleSpin = std::chrono::microseconds(10);

// A part's state: unclaimed, a helper on it, taken by the caller (computed in place), a helper
// copying its result in, written.
enum PartState : int { kFree, kHelper, kCaller, kCommitting, kDone };

struct Call {
  std::shared_ptr<PartJob> job;
  int64_t parts = 0;
  std::atomic<int64_t> next{0};
  std::unique_ptr<std::atomic<int>[]> state;
  std::atomic<int64_t> done{0};
  std::mutex mu;
  std::string failure;

  void Fail(const char* what) {
    std::lock_guard<std::mutex> lock(mu);
    if (failure.empty()) failure = what;
  }
  void Finish(int64_t t) {
    state[t].store(kDone, std::memory_order_release);
    done.fetch_add(1, std::memory_order_acq_rel);
  }
};

template <typename Fn>
void Guarded(Call& call, Fn fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    call.Fail(e.what());
  } catch (...) {
    call.Fail("unknown error");
  }
}

void* HelperScratch(size_t bytes) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

// A helper takes parts in order; what it computes is written only if the caller has not taken
// the part over meanwhile.
void HelperWork(Call& call) {
  for (;;) {
    const int64_t t = call.next.fetch_add(1, std::memory_order_acq_rel);
    if (t >= call.parts) return;
    int expected = kFree;
    if (!call.state[t].compare_exchange_strong(expected, kHelper, std::memory_order_acq_rel)) continue;
    void* scratch = HelperScratch(call.job->ScratchBytes(t));
    Guarded(call, [&] { call.job->RunInto(t, scratch); });
    expected = kHelper;
    if (call.state[t].compare_exchange_strong(expected, kCommitting, std::memory_order_acq_rel)) {
      Guarded(call, [&] { call.job->Commit(t, scratch); });
      call.Finish(t);
    }
  }
}

class Helpers {
 public:
  static Helpers& Get() {
    static Helpers* helpers = new Helpers(std::max(0, ThreadPool::SchedulableCpus() - 1));
    return *helpers;
  }
  int size() const { return static_cast<int>(threads_.size()); }

  // One call at a time uses the helpers; false: another does (run this one on the caller).
  bool TryAcquire() { return !busy_.exchange(true, std::memory_order_acquire); }
  void Release() { busy_.store(false, std::memory_order_release); }

  void Publish(std::shared_ptr<Call> call) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = std::move(call);
      generation_.fetch_add(1, std::memory_order_release);
      wake = sleepers_ > 0;
    }
    if (wake) ready_.notify_all();
  }
  void Withdraw() {
    std::lock_guard<std::mutex> lock(mu_);
    current_.reset();
  }

 private:
  explicit Helpers(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
    for (std::thread& t : threads_) t.detach();
  }

  void Loop() {
    uint64_t seen = 0;
    for (;;) {
      const auto deadline = Clock::now() + kIdleSpin;
      for (int i = 1; generation_.load(std::memory_order_acquire) == seen; ++i) {
        if (i % 64 == 0 && Clock::now() >= deadline) break;
        Pause();
      }
      std::shared_ptr<Call> call;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ++sleepers_;
        ready_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
        --sleepers_;
        seen = generation_.load(std::memory_order_relaxed);
        call = current_;
      }
      if (call) HelperWork(*call);
    }
  }

  std::vector<std::thread> threads_;
  std::atomic<bool> busy_{false};
  std::mutex mu_;
  std::condition_variable ready_;
  std::atomic<uint64_t> generation_{0};
  int sleepers_ = 0;
  std::shared_ptr<Call> current_;
};

}  // namespace

namespace {

// Whether this call of a kind runs with helpers: the first two calls do, the next two do not
// (each pair's first warms the caches and is not counted), then the faster way, the other one
// every kProbeEvery calls.
bool UseHelpers(PartTimings* timings, int64_t call) {
  if (timings == nullptr || call < 2) return true;
  if (call < 4) return false;
  const int64_t helped = timings->helped_ns.load(std::memory_order_relaxed);
  const int64_t alone = timings->alone_ns.load(std::memory_order_relaxed);
  const bool helped_faster = helped <= alone;
  return call % PartTimings::kProbeEvery == 0 ? !helped_faster : helped_faster;
}

void Record(PartTimings* timings, int64_t call, bool helped, int64_t ns) {
  if (timings == nullptr || call == 0 || call == 2) return;
  std::atomic<int64_t>& average = helped ? timings->helped_ns : timings->alone_ns;
  const int64_t old = average.load(std::memory_order_relaxed);
  average.store(old == 0 ? ns : (old * 3 + ns) / 4, std::memory_order_relaxed);
}

}  // namespace

std::string RunPartsLeavingLateHelpers(const std::shared_ptr<PartJob>& job, int64_t parts,
                                       int helpers, bool may_leave, PartTimings* timings) {
  const int64_t call_index = timings != nullptr ? timings->calls.fetch_add(1, std::memory_order_relaxed) : 0;
  const bool helped = UseHelpers(timings, call_index);
  const auto call_start = Clock::now();
  auto call = std::make_shared<Call>();
  call->job = job;
  call->parts = parts;
  call->state = std::make_unique<std::atomic<int>[]>(parts);
  for (int64_t t = 0; t < parts; ++t) call->state[t].store(kFree, std::memory_order_relaxed);
  Helpers& pool = Helpers::Get();
  const bool parallel = helped && parts > 1 && helpers > 0 && pool.size() > 0 && pool.TryAcquire();
  if (parallel) pool.Publish(call);
  // The caller's own parts, in the same order as the helpers take theirs.
  Clock::duration own{0};
  int64_t own_parts = 0;
  Clock::time_point last = Clock::now();
  for (;;) {
    const int64_t t = call->next.fetch_add(1, std::memory_order_acq_rel);
    if (t >= parts) break;
    int expected = kFree;
    if (!call->state[t].compare_exchange_strong(expected, kCaller, std::memory_order_acq_rel)) continue;
    const auto start = Clock::now();
    Guarded(*call, [&] { job->RunInPlace(t); });
    call->Finish(t);
    last = Clock::now();
    own += last - start;
    ++own_parts;
  }
  // Parts a helper is on: waited for about as long as a part takes, then computed here (unless
  // the job cannot outlive this call); a helper copying its result in is waited for.
  const auto patience = own_parts > 0 ? own / own_parts : std::chrono::microseconds(50);
  while (call->done.load(std::memory_order_acquire) < parts) {
    const bool impatient = may_leave && Clock::now() - last > patience;
    bool took = false;
    for (int64_t t = 0; t < parts && impatient; ++t) {
      int expected = call->state[t].load(std::memory_order_acquire);
      if (expected != kFree && expected != kHelper) continue;
      if (!call->state[t].compare_exchange_strong(expected, kCaller, std::memory_order_acq_rel)) continue;
      Guarded(*call, [&] { job->RunInPlace(t); });
      call->Finish(t);
      took = true;
    }
    if (took) last = Clock::now();
    // Yielded, not spun: a helper on this core then runs and finishes its part.
    std::this_thread::yield();
  }
  if (parallel) {
    pool.Withdraw();
    pool.Release();
  }
  if (parallel == helped) {
    Record(timings, call_index, helped,
           std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - call_start).count());
  }
  std::lock_guard<std::mutex> lock(call->mu);
  return call->failure;
}

}  // namespace xlens::graph

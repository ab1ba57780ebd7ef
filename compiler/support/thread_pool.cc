#include "compiler/support/thread_pool.h"

#include "compiler/support/float_environment.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

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
// A worker whose loops have recently come closer together than half this spins through twice
// their gap (IdleSpinPolicy); each gap's weight then decays by kGapDecay per later one. Measured
// on a 2-CPU virtual machine, where a sleeping worker takes tens of microseconds to wake: the
// MLP training step 0.61-0.65 -> 0.54-0.58 ms with the other CPU idle.
constexpr auto kIdleSpinAtMost = std::chrono::microseconds(200);
constexpr double kGapDecay = 0.75;
// The mean alone misses a module whose gaps are mostly a few microseconds with some of 30-60
// (a worker whose part of a library call ended before the caller's, a small kernel the caller
// runs alone between two calls): twice the mean stays under kIdleSpin, and the worker slept
// through those longer gaps, about once a run of the convolution training step, and joined the
// next call some 40 us late (a median of 27 us from its wake-up to running, by `perf sched`),
// when the caller had taken its part. So a worker also spins through the longest recent gap a
// spin may cover (at most kIdleSpinAtMost), with kPeakMargin to spare; that peak decays by
// kPeakDecay per later loop, so it outlasts many runs of a module (eight to nine loops each)
// and fades within a few hundred loops of shorter gaps. Measured on a 2-CPU VM, 10 processes of
// 2000 runs each, alternating with the mean's rule alone: the worker's sleeps per 1000 runs of
// the convolution step 1057 -> 104; its median of medians 0.633 -> 0.562 ms (lower in 9 of
// 10), the MLP step's 0.667 -> 0.568 (10 of 10), with the host's steal at 0-2%; the MNIST step,
// attention and the LSTM cell within noise; the process's CPU time 4-7% more (8 pairs later,
// with the host taking 6-13%: 0.690 -> 0.655 ms, lower in 7 of 8; 0.747 -> 0.679, 5 of 8).
// Beside a busy core (tests/bench/load_stability.py, the two builds in the same rounds) the
// convolution step took 0.868 and 0.887 ms against 0.747 and 0.960 (two runs), the MLP step
// 0.840 against 0.884: within the noise of such runs, each within 10% of its ideal. The idle
// CPU a spin costs is checked by OneDnnThunkTest.AnIdleProcessSpendsNoCpuAfterItsProducts, on
// every thread but the sleeping caller (whose wake-up a VM's host can make cost milliseconds).
constexpr double kPeakDecay = 0.995;
constexpr double kPeakMargin = 1.25;
constexpr auto kFinishSpin = std::chrono::microseconds(10);
// Measured and not taken: a caller that, its chunks done, goes on spinning without yielding for
// the chunks its workers (kept off its CPU) are running, for up to one chunk at its own pace,
// before it sleeps. On a busy machine a sleeping caller is woken when the last chunk ends, but
// the CPU it left has gone to another process for a time slice: traced on the GELU MLP at load
// 2.4 on 2 CPUs, a product's call whose worker's part ended after the caller's returned 2.5 ms
// after that part at the median (46 of 400 calls had the worker's part end within 300 us of the
// caller's, and returned 5.3 ms after it), where a call whose caller's part ended last returned
// 4 us after it; at load 14 the spin cut that median to 77 us. The module's median did not move
// (xlens run, 300 runs a process, the variants alternating in one binary: 10 rounds at load 7-9,
// median of the medians 29.8 ms with kFinishSpin alone, 29.6 with the spin capped at 300 us,
// 32.3 at 1 ms, 34.7 at 5 ms; 12 rounds at load 5-9, 12.05 against 12.07 ms with the 300 us cap,
// lower in 5 of 12), and the process took 1.4-5% more CPU: beside other work, its share of the
// CPUs is what it gets either way.

// A loop runs inline once its recent parallel runs took this much longer than the caller alone
// would have (a margin for the error of that estimate: chunks of unequal cost); each parallel
// run's weight then decays by kHistoryDecay per later one.
constexpr double kInlineAbove = 1.2;
constexpr double kHistoryDecay = 0.75;
// A loop that runs inline tries a parallel run again after kProbeShare times what its last
// parallel run lost, within [kProbeEvery, kProbeAtMost]: a probe that stalls again then costs a
// fifth of the time at most, and a machine that has become free is noticed soon.
constexpr std::chrono::milliseconds kProbeEvery{4};
constexpr std::chrono::milliseconds kProbeAtMost{100};
// A stall counts toward the next one across at most this many runs whose every chunk the caller
// took (its workers came too late): a late worker between two stalls says nothing of the load,
// but a stall long ago (a first run faulting its pages in) followed by many such runs is not
// "two in a row".
constexpr int kStallKeptAcrossCallerOnlyRuns = 3;
constexpr int kProbeShare = 4;

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
    if (i % 32 == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      // A thread this one waits for may be runnable on this very CPU (a caller preempted by
      // the worker it woke, a worker holding a chunk): give it the CPU rather than spin
      // through it (a no-op when nothing else waits for this CPU).
      sched_yield();
    }
    Pause();
  }
}

// A run's word: its loop's tag and [begin, end) (ThreadPool::Run).
constexpr uint64_t Pack(uint32_t tag, uint64_t begin, uint64_t end) {
  return uint64_t{tag} << 32 | begin << 16 | end;
}
constexpr uint32_t TagOf(uint64_t r) { return static_cast<uint32_t>(r >> 32); }
constexpr uint64_t BeginOf(uint64_t r) { return r >> 16 & 0xffffu; }
constexpr uint64_t EndOf(uint64_t r) { return r & 0xffffu; }
// Chunks a loop may have: a run's begin and end are 16 bits.
constexpr int64_t kMaxChunks = 0xffff;

// How many chunks a loop of `tasks` and `grain` is cut into at most, on `threads` threads.
int64_t MaxChunks(int threads, int64_t tasks, int64_t grain) {
  return std::min({int64_t{threads} * ThreadPool::kChunksPerThread, kMaxChunks, (tasks + grain - 1) / grain});
}

}  // namespace

void IdleSpinPolicy::Observe(std::chrono::nanoseconds gap) {
  const double ns = static_cast<double>(std::max<int64_t>(0, gap.count()));
  gap_ns_ = gap_ns_ < 0 ? ns : kGapDecay * gap_ns_ + (1 - kGapDecay) * ns;
  // A gap no spin may cover (a pause between steps) leaves the peak to fade.
  const double at_most = static_cast<double>(std::chrono::nanoseconds(kIdleSpinAtMost).count());
  peak_ns_ = ns <= at_most ? std::max(ns, kPeakDecay * peak_ns_) : kPeakDecay * peak_ns_;
}

std::chrono::nanoseconds IdleSpinPolicy::Limit() const {
  const double at_most = static_cast<double>(std::chrono::nanoseconds(kIdleSpinAtMost).count());
  const double mean_rule = gap_ns_ < 0 || 2 * gap_ns_ > at_most ? 0 : 2 * gap_ns_;
  const double limit = std::min(at_most, std::max(mean_rule, kPeakMargin * peak_ns_));
  return std::max<std::chrono::nanoseconds>(kIdleSpin, std::chrono::nanoseconds(static_cast<int64_t>(limit)));
}

int ThreadPool::SchedulableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = SchedulableCpus() - 1;
  CPU_ZERO(&cpus_);
  keep_off_caller_ = sched_getaffinity(0, sizeof(cpus_), &cpus_) == 0 && threads < CPU_COUNT(&cpus_);
  runs_ = std::make_unique<Run[]>(threads + 1);
  worker_tids_ = std::make_unique<std::atomic<pid_t>[]>(threads);
  for (int i = 0; i < threads; ++i) worker_tids_[i].store(0, std::memory_order_relaxed);
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

ThreadPool::LoopHistory& ThreadPool::HistoryOf(int64_t tasks, int64_t grain) {
  return history_[(static_cast<uint64_t>(tasks) * 0x9e3779b97f4a7c15u ^ static_cast<uint64_t>(grain)) %
                  kHistorySlots];
}

bool ThreadPool::Shareable(int64_t tasks, int64_t grain) const {
  return MaxChunks(parallelism(), tasks, grain) > 1 && !workers_.empty() && inside_pool != this;
}

bool ThreadPool::RunsInline(int64_t tasks, int64_t grain) {
  grain = std::max<int64_t>(1, grain);
  if (tasks <= 0 || !Shareable(tasks, grain)) return true;
  std::lock_guard<std::mutex> run_lock(run_mu_);
  return std::chrono::steady_clock::now() < HistoryOf(tasks, grain).inline_until;
}

void ThreadPool::ParallelFor(int64_t tasks, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (tasks <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int threads = parallelism();
  const int64_t max_chunks = MaxChunks(threads, tasks, grain);
  if (!Shareable(tasks, grain)) {
    fn(0, tasks);
    return;
  }
  std::unique_lock<std::mutex> run_lock(run_mu_);
  InsidePool inside(this);
  // A loop whose recent parallel runs took longer than its caller alone would have (the workers
  // descheduled while holding chunks, on a machine that other work keeps busy) runs inline until
  // a probe, a parallel run again, is due.
  LoopHistory& history = HistoryOf(tasks, grain);
  const auto start = std::chrono::steady_clock::now();
  if (start < history.inline_until) {
    run_lock.unlock();
    fn(0, tasks);
    return;
  }
  chunk_ = (tasks + max_chunks - 1) / max_chunks;
  const int64_t chunks = (tasks + chunk_ - 1) / chunk_;
  // Only this thread advances the generation (under run_mu_): this loop's is the next.
  const auto tag = static_cast<uint32_t>(generation_.load(std::memory_order_relaxed) + 1);
  for (int t = 0; t < threads; ++t) {
    runs_[t].range.store(Pack(tag, chunks * t / threads, chunks * (t + 1) / threads), std::memory_order_relaxed);
  }
  fn_ = &fn;
  tasks_ = tasks;
  chunks_ = chunks;
  finished_.store(0, std::memory_order_relaxed);
  float_control_ = GetFloatControl();
  failed_.store(false, std::memory_order_relaxed);
  const int caller_cpu = sched_getcpu();
  if (keep_off_caller_ && caller_cpu >= 0 && caller_cpu != workers_off_cpu_) MoveWorkersOff(caller_cpu);
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = nullptr;
    open_ = true;
    published_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    caller_cpu_.store(caller_cpu, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) work_ready_.notify_all();
  const int64_t own_chunks = RunChunks(0, tag);
  const auto caller_done = std::chrono::steady_clock::now();
  // After a chunk threw, the chunks nobody took are dropped (the caller takes them all).
  for (int64_t c; failed_.load(std::memory_order_relaxed) && TakeChunk(0, tag, &c);) FinishChunk();
  // What is left is running on workers. The loop ends when its last chunk does, not when the
  // workers leave it: one that joined and was then descheduled, holding no chunk, would
  // otherwise hold the caller until it ran again (a 21 us loop took 1 ms under load).
  auto all_finished = [&] { return finished_.load(std::memory_order_acquire) == chunks; };
  SpinUntil(all_finished, kFinishSpin);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    work_done_.wait(lock, all_finished);
    open_ = false;
    error = std::exchange(error_, nullptr);
  }
  fn_ = nullptr;
  if (error) std::rethrow_exception(error);
  if (own_chunks > 0) {
    // The caller's own pace, over all the chunks, is what the loop would have cost it alone.
    const auto end = std::chrono::steady_clock::now();
    const double took = std::chrono::duration<double, std::nano>(end - start).count();
    const double alone = std::chrono::duration<double, std::nano>(caller_done - start).count() *
                         static_cast<double>(chunks) / static_cast<double>(own_chunks);
    history.parallel_ns = history.parallel_ns * kHistoryDecay + took;
    history.alone_ns = history.alone_ns * kHistoryDecay + alone;
    const bool stalled = took > kInlineAbove * alone;
    const bool again = stalled && history.stalled;
    // A run whose every chunk the caller took (its workers came too late) says nothing either
    // way, for a few runs (kStallKeptAcrossCallerOnlyRuns).
    if (own_chunks < chunks) {
      history.stalled = stalled;
      history.caller_only_runs = 0;
    } else if (++history.caller_only_runs > kStallKeptAcrossCallerOnlyRuns) {
      history.stalled = false;
    }
    if (again && history.parallel_ns > kInlineAbove * history.alone_ns) {
      const auto lost = std::chrono::nanoseconds(static_cast<int64_t>(std::max(0.0, took - alone)));
      history.inline_until =
          end + std::clamp<std::chrono::nanoseconds>(kProbeShare * lost, kProbeEvery, kProbeAtMost);
    }
  }
}

bool ThreadPool::TakeChunk(int slot, uint32_t tag, int64_t* chunk) {
  // From the front of this thread's own run...
  std::atomic<uint64_t>& own = runs_[slot].range;
  for (uint64_t r = own.load(std::memory_order_relaxed);;) {
    const uint64_t begin = BeginOf(r), end = EndOf(r);
    if (TagOf(r) != tag || begin >= end) break;
    if (own.compare_exchange_weak(r, Pack(tag, begin + 1, end), std::memory_order_relaxed)) {
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
      const uint64_t begin = BeginOf(r), end = EndOf(r);
      if (TagOf(r) != tag || begin >= end) break;
      if (other.compare_exchange_weak(r, Pack(tag, begin, end - 1), std::memory_order_relaxed)) {
        *chunk = static_cast<int64_t>(end - 1);
        return true;
      }
    }
  }
  return false;
}

int64_t ThreadPool::RunChunks(int slot, uint32_t tag) {
  int64_t c, ran = 0;
  // A chunk taken under the loop's tag keeps that loop from ending until it finishes, so the
  // loop's fn_, chunk_ and tasks_ stay as they are while it runs.
  while (!failed_.load(std::memory_order_relaxed) && TakeChunk(slot, tag, &c)) {
    const int64_t begin = c * chunk_;
    try {
      (*fn_)(begin, std::min(tasks_, begin + chunk_));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
    FinishChunk();
    ++ran;
  }
  return ran;
}

void ThreadPool::FinishChunk() {
  // Read before the count: once it reaches the last chunk the caller may publish the next loop.
  const int64_t chunks = chunks_;
  if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
    // The caller may be waiting (under mu_, for finished_ to reach chunks_): taking mu_ before
    // the notification means it either saw the count or is already waiting for this.
    std::lock_guard<std::mutex> lock(mu_);
    work_done_.notify_all();
  }
}

bool ThreadPool::CpusOffCaller(int cpu, cpu_set_t* set) const {
  // The pool's CPUs less the caller's (all of them when the caller runs outside them), within
  // the process's CPUs as they are now: its main thread's affinity, which `taskset -a -p` and
  // the like change for every thread after the pool was made, so a worker never widens what
  // the user narrowed. When that leaves no CPU, the worker stays where it is allowed.
  *set = cpus_;
  cpu_set_t process;
  CPU_ZERO(&process);
  if (sched_getaffinity(getpid(), sizeof(process), &process) == 0) CPU_AND(set, set, &process);
  if (cpu < CPU_SETSIZE) CPU_CLR(cpu, set);
  return CPU_COUNT(set) > 0;
}

void ThreadPool::KeepOffCallersCpu(int* off) {
  const int cpu = caller_cpu_.load(std::memory_order_relaxed);
  if (!keep_off_caller_ || cpu < 0 || cpu == *off) return;
  *off = cpu;
  // Setting its own affinity moves a thread at once; a CPU taken offline since leaves the call
  // failing and the worker where it was.
  cpu_set_t set;
  if (CpusOffCaller(cpu, &set)) (void)sched_setaffinity(0, sizeof(set), &set);
}

void ThreadPool::MoveWorkersOff(int cpu) {
  // A worker asleep, or waiting for a CPU, moves at once; one that has not started yet keeps
  // off the caller's CPU itself when it joins its first loop (KeepOffCallersCpu).
  workers_off_cpu_ = cpu;
  cpu_set_t set;
  if (!CpusOffCaller(cpu, &set)) return;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const pid_t tid = worker_tids_[i].load(std::memory_order_acquire);
    if (tid != 0) (void)sched_setaffinity(tid, sizeof(set), &set);
  }
}

void ThreadPool::WorkerLoop(int slot) {
  inside_pool = this;
  worker_tids_[slot - 1].store(static_cast<pid_t>(syscall(SYS_gettid)), std::memory_order_release);
  uint64_t seen = 0;
  // The gaps from the end of this worker's last loop to the publishing of the next set how long
  // it spins for the next one.
  int64_t idle_since = 0;  // steady clock, ns; 0 before the first loop
  IdleSpinPolicy spin;
  int off_cpu = -1;  // the CPU this worker keeps off (KeepOffCallersCpu)
  while (true) {
    SpinUntil([&] {
      return generation_.load(std::memory_order_acquire) != seen ||
             stopping_.load(std::memory_order_relaxed);
    }, spin.Limit());
    std::unique_lock<std::mutex> lock(mu_);
    ++sleepers_;
    work_ready_.wait(lock, [&] {
      return stopping_.load(std::memory_order_relaxed) ||
             generation_.load(std::memory_order_relaxed) != seen;
    });
    --sleepers_;
    if (stopping_.load(std::memory_order_relaxed)) return;
    seen = generation_.load(std::memory_order_relaxed);
    if (idle_since != 0) {
      spin.Observe(std::chrono::nanoseconds(published_ns_.load(std::memory_order_relaxed) - idle_since));
    }
    if (open_) {  // else that loop has ended
      const uint32_t float_control = float_control_;
      lock.unlock();
      if (join_hook_) join_hook_(seen);
      KeepOffCallersCpu(&off_cpu);
      SetFloatControl(float_control);
      RunChunks(slot, static_cast<uint32_t>(seen));
    } else {
      // Woken too late for the loop, perhaps on the caller's CPU, where it waited for it.
      lock.unlock();
      KeepOffCallersCpu(&off_cpu);
    }
    idle_since = std::chrono::steady_clock::now().time_since_epoch().count();
  }
}

}  // namespace xlens

// ThreadPool: a fixed set of worker threads for data-parallel loops, built for a machine that
// other work shares.
//
// ParallelFor splits a range of tasks into contiguous chunks (up to kChunksPerThread per thread,
// none smaller than `grain` tasks) and deals each thread, the calling thread included, an equal
// run of them; a thread takes chunks from the front of its own run and, when that is empty,
// steals from the back of another's. On an idle machine every thread works through its own part
// of the range (the same part in every call, so consecutive loops over the same data find it in
// that core's cache); on a busy one a thread that is descheduled, or woken late, holds back only
// the chunk it is running, and the others take the rest of its share. The caller returns once
// every chunk has run: a worker that joined the loop and was descheduled before it took a chunk
// (or after its last) holds nothing back, and should it wake during a later loop it takes none of
// that loop's chunks in the old one's name (each run of chunks carries its loop's tag).
//
// Idle workers spin for a few microseconds (a loop that follows at once then starts without a
// wake-up) and then sleep on a condition variable: a pool never keeps a core that another
// process could use. Where loops have been following each other closely (a training step's
// kernels, one step after the next), a worker spins for up to twice the recent gap between them,
// or through the longest recent gap, 200 us at most, so that the next loop finds it awake: waking
// a sleeping thread takes tens of microseconds on a virtual machine, more than a small loop's
// share of the work. A spinning thread yields the CPU every microsecond or so, so that a thread
// it waits for (the caller, preempted on the same CPU by the worker it woke) or another process
// runs.
//
// A worker keeps off the CPU its loop's caller runs on, where the pool has fewer workers than
// CPUs (a default pool: one fewer). Linux may wake a thread on its waker's CPU (it does when it
// judges the other CPUs busy, as right after a process streamed memory on all of them), and a
// worker woken onto the caller's CPU waits there while the caller runs every chunk alone; the
// next wake-up then finds the same CPU. On a 2-CPU virtual machine, in the CPU benchmark's own
// sequence (STREAM on both CPUs, then `xlens run`), 100 of 189 loops of b + 3c and layer norm
// had the worker on the caller's CPU, 75 ran without it, and 14 had it apart; layer norm over
// f32[4096,1024] took one core's time (0.60-0.69 ms, its best run in 5 of 6 benchmark runs)
// where 0.31-0.33 with the threads apart. A worker that joins a loop published from another CPU
// than the one it keeps off moves itself (its affinity: the pool's CPUs less the caller's, within
// those the process's main thread may use now, so that no worker widens a later `taskset -a`), so
// no later wake-up puts it there; on a busy machine it then shares another core with other
// work, where stealing covers for it (medians beside a busy core unchanged, 1.01 -> 0.99 ms).
// The caller moves on as well (nothing pins it): where it publishes a loop from the very CPU its
// workers keep to, a worker woken there cannot run elsewhere and waits for the caller to leave
// that CPU, which, running the loop's chunks and the next loops', it does only when its time
// slice ends (a millisecond or more with Linux's EEVDF, which lets a woken thread wait out the
// running one's slice): every loop of those runs on the caller alone. So the caller, before it
// wakes them, moves its workers off the CPU it publishes from whenever that has changed.
//
// A loop too small for two chunks, and a ParallelFor made from inside a chunk of the same pool, run
// inline on the caller; so does, for a while, a loop (known by its task count and grain) whose
// recent parallel runs took longer than the caller alone would have taken, which happens when the
// workers' cores are so busy that a worker is descheduled while holding a chunk and the loop waits
// for it: the loop then loses no more than one core's worth. It takes two such runs in a row: one
// alone says little of the load (a first run faulting its outputs' pages in, one preemption), and
// sent the loop inline for four times what it lost (layer norm, timed in 15 processes of 20 runs
// beside other work, ran 103 of its 315 loops inline after single stalls, and none when it takes
// two; its median 0.70 -> 0.57 ms). Every chunk runs under the caller's floating-point control word (rounding, flushing of
// subnormals), so a loop computes the same wherever its chunks land. An exception thrown by a chunk
// stops the handing out of chunks and is rethrown by ParallelFor once the chunks already running
// have finished.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace xlens {

// How long an idle worker spins before it sleeps: 20 us, or, where the loops it was given have
// recently come at most 100 us apart, twice that gap (averaged with decaying weights), or the
// longest recent gap of up to 200 us with a quarter to spare (a peak that fades slowly), so that
// a loop that follows as closely finds it awake. 200 us at most.
class IdleSpinPolicy {
 public:
  // A loop was published `gap` after the end of the worker's previous one.
  void Observe(std::chrono::nanoseconds gap);
  std::chrono::nanoseconds Limit() const;

 private:
  double gap_ns_ = -1;  // none seen yet
  double peak_ns_ = 0;  // the longest recent gap of up to 200 us, decaying per later gap
};

class ThreadPool {
 public:
  // `threads` workers besides the caller; 0: one fewer than the CPUs this process may run on.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs fn(begin, end) over [0, tasks) in chunks of at least `grain` tasks; returns when all
  // have run. Calls from different threads take turns.
  void ParallelFor(int64_t tasks, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Whether ParallelFor(tasks, grain), called now from this thread, would run on the caller
  // alone (too few chunks, no workers, from inside a chunk, or a loop its history runs inline for
  // now), so that a caller with a cheaper way to do the whole range on one thread takes that
  // instead: a library call split in parts runs as one call rather than its parts one after the
  // other. Calls from different threads take turns with ParallelFor.
  bool RunsInline(int64_t tasks, int64_t grain);

  // Threads that run a ParallelFor, the caller included.
  int parallelism() const { return static_cast<int>(workers_.size()) + 1; }

  // For tests: called by a worker as it joins a loop (with the loop's generation, counted from
  // 1), before it takes a chunk, where a busy machine may deschedule it. Set while the pool is
  // idle.
  void SetJoinHookForTesting(std::function<void(uint64_t)> hook) { join_hook_ = std::move(hook); }

  // One pool per process, sized to the CPUs the process may run on.
  static ThreadPool& Default();

  // A ParallelFor splits its range into at most this many chunks per thread.
  static constexpr int kChunksPerThread = 16;

  // The CPUs this process may run on (its affinity mask; `taskset` and cgroups' cpusets narrow it).
  static int SchedulableCpus();

 private:
  // One thread's run of chunks of one loop: the loop's tag (the low 32 bits of its generation)
  // and [begin, end), packed into one word (tag, begin, end from the high bits down, 32, 16 and
  // 16 bits) so that the owner taking from the front and a thief taking from the back agree by one
  // compare-and-swap, and a thread still working for an earlier loop takes nothing from a later
  // one. Each on its own cache line.
  struct alignas(64) Run {
    std::atomic<uint64_t> range{0};
  };

  // What the parallel runs of one kind of loop took, and what the caller alone would have taken
  // (its own pace times all the chunks), each a sum that decays with every later run.
  struct LoopHistory {
    double parallel_ns = 0;
    double alone_ns = 0;
    bool stalled = false;  // the last parallel run took longer than the caller alone would have
    int caller_only_runs = 0;  // runs since, whose every chunk the caller took
    std::chrono::steady_clock::time_point inline_until;  // runs until then are inline
  };
  static constexpr int kHistorySlots = 64;

  // The history of loops of `tasks` and `grain` (a slot shared by some other kinds); under run_mu_.
  LoopHistory& HistoryOf(int64_t tasks, int64_t grain);
  // More than one chunk to share and someone to share them with.
  bool Shareable(int64_t tasks, int64_t grain) const;

  void WorkerLoop(int slot);
  // Runs chunks of the loop tagged `tag` until none is left to take or one has thrown; how many.
  int64_t RunChunks(int slot, uint32_t tag);
  bool TakeChunk(int slot, uint32_t tag, int64_t* chunk);
  // Counts a chunk of the current loop as finished (run, or dropped after a chunk threw).
  void FinishChunk();
  // Keeps the calling worker off the CPU the current loop was published from: `*off` is the CPU
  // it keeps off now (-1: none), updated when the caller's CPU has changed.
  void KeepOffCallersCpu(int* off);
  // Moves the workers whose thread ids are known off `cpu`, the caller's, where they keep off
  // another; under run_mu_.
  void MoveWorkersOff(int cpu);
  // The CPUs a worker may run on while it keeps off `cpu`; false where that leaves none.
  bool CpusOffCaller(int cpu, cpu_set_t* set) const;

  std::vector<std::thread> workers_;
  std::unique_ptr<Run[]> runs_;  // one per thread; the caller's is runs_[0]

  // The current loop; written by the caller before it is published, read by the workers.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t tasks_ = 0;
  int64_t chunk_ = 0;
  int64_t chunks_ = 0;
  std::atomic<int64_t> finished_{0};  // chunks of the current loop run or dropped
  uint32_t float_control_ = 0;
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;  // the first chunk's exception, under mu_

  std::mutex mu_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::atomic<uint64_t> generation_{0};  // advanced under mu_ when a loop is published
  std::atomic<int64_t> published_ns_{0};  // when the current loop was published (steady clock)
  bool open_ = false;                    // workers may still join the current loop (under mu_)
  std::atomic<int> caller_cpu_{-1};       // the CPU the current loop was published from
  cpu_set_t cpus_;                       // the CPUs the pool may run on (its creator's affinity)
  bool keep_off_caller_ = false;         // fewer workers than CPUs: workers keep off the caller's
  // Each worker's thread id, once it has started (0 before); the CPU the caller last moved them
  // off (-1: none yet; under run_mu_).
  std::unique_ptr<std::atomic<pid_t>[]> worker_tids_;
  int workers_off_cpu_ = -1;
  int sleepers_ = 0;                     // workers waiting on work_ready_ (under mu_)
  std::atomic<bool> stopping_{false};
  std::mutex run_mu_;  // one ParallelFor at a time; guards history_
  LoopHistory history_[kHistorySlots];
  std::function<void(uint64_t)> join_hook_;
};

}  // namespace xlens

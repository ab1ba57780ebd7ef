#include "compiler/runtime/measured_choice.h"

#include <algorithm>
#include <atomic>
#include <ctime>
#include <limits>
#include <map>
#include <mutex>

namespace xlens::runtime {
namespace {

std::atomic<KernelChoiceMode> kernel_choice_mode{KernelChoiceMode::kMeasured};

std::mutex& CacheMutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<std::string, MeasuredChoice>& Cache() {
  static auto* cache = new std::map<std::string, MeasuredChoice>;
  return *cache;
}

double ThreadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

// The calling thread's CPU time, not the wall clock's: on a machine shared with other work a
// thread descheduled for a while would charge the candidate it was running with that while.
double TimeMs(const std::function<void()>& run) {
  const double start = ThreadCpuMs();
  run();
  return ThreadCpuMs() - start;
}

}  // namespace

KernelChoiceMode GetKernelChoiceMode() { return kernel_choice_mode.load(); }
void SetKernelChoiceMode(KernelChoiceMode mode) { kernel_choice_mode.store(mode); }

MeasuredChoice ChooseByMeasuring(const std::string& key, const std::vector<std::function<void()>>& candidates) {
  {
    std::lock_guard<std::mutex> lock(CacheMutex());
    auto it = Cache().find(key);
    if (it != Cache().end()) {
      MeasuredChoice choice = it->second;
      choice.cached = true;
      return choice;
    }
  }
  // Timed outside the lock: two threads compiling the same shape at once both time it, and the
  // first to finish is kept; neither waits on the other's runs.
  MeasuredChoice choice;
  choice.best_ms.assign(candidates.size(), std::numeric_limits<double>::infinity());
  for (int pass = 0; pass < kPasses; ++pass) {
    // The second pass in the other order: a stretch of load on the machine falls on both.
    for (size_t i = 0; i < candidates.size(); ++i) {
      const size_t c = pass % 2 == 0 ? i : candidates.size() - 1 - i;
      // Untimed: the runs after another candidate's find the caches as that one left them. A
      // depthwise convolution's output, evicted by the other's streaming stores, took oneDNN's
      // kernel 2.1-2.3 ms, then 1.1-1.4, then 1.0-1.1 as in runs of its own; run by run, the
      // candidates alternating, it ranked the two wrongly.
      double settle_ms = 0;
      for (int r = 0; r < kSettleRuns; ++r) settle_ms = TimeMs(candidates[c]);
      const int runs = settle_ms > kLongRunMs ? 1 : kRunsPerBlock;
      for (int r = 0; r < runs; ++r) choice.best_ms[c] = std::min(choice.best_ms[c], TimeMs(candidates[c]));
    }
  }
  choice.winner = static_cast<int>(std::min_element(choice.best_ms.begin(), choice.best_ms.end()) -
                                   choice.best_ms.begin());
  std::lock_guard<std::mutex> lock(CacheMutex());
  return Cache().emplace(key, choice).first->second;
}

void ClearMeasuredChoices() {
  std::lock_guard<std::mutex> lock(CacheMutex());
  Cache().clear();
}

}  // namespace xlens::runtime

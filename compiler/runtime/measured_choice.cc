#include "compiler/runtime/measured_choice.h"

#include <algorithm>
#include <atomic>
#include <ctime>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "profiler/host_tracer.h"
#include "profiler/trace.h"

namespace xlens::runtime {
namespace {

std::atomic<KernelChoiceMode> kernel_choice_mode{KernelChoiceMode::kMeasured};
std::atomic<double> trial_budget_ms{kDefaultTrialBudgetMs};

thread_local KernelChoiceScope* current_scope = nullptr;

// Everything below under one mutex: choices are few (one per shape) and taken at compile time.
struct Choices {
  std::mutex mutex;
  std::map<std::string, MeasuredChoice> made;    // timed or cached, by key
  std::map<std::string, KernelChoiceRecord> loaded;  // forced, by key
  std::set<std::string> loaded_taken;                 // the loaded keys a call has taken
  std::string loaded_from;
  std::string dump_path;
};

Choices& State() {
  static auto* state = new Choices;
  return *state;
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

std::vector<std::string> Names(const std::vector<KernelCandidate>& candidates) {
  std::vector<std::string> names;
  for (const KernelCandidate& c : candidates) names.push_back(c.name);
  return names;
}

KernelChoiceRecord RecordOf(const std::string& key, const MeasuredChoice& choice) {
  return {MachineForKernelChoices(), key, choice.names, choice.best_ms, choice.winner, choice.estimated_run_ms};
}

MeasuredChoice ChoiceOf(const KernelChoiceRecord& record, ChoiceOrigin origin) {
  MeasuredChoice choice;
  choice.winner = record.winner;
  choice.names = record.candidates;
  choice.best_ms = record.best_ms;
  choice.estimated_run_ms = record.estimated_run_ms;
  choice.origin = origin;
  return choice;
}

// The trial: candidates[0] (the rule's pick) unless another's best run beats the rule's best by
// kMargin. The best of all the runs, not of each pass: load only ever slows a run down, so the
// best is the least disturbed estimate, where requiring the margin in each pass let one pass's
// load keep the rule (load 13-14: 6 of 12 processes kept the loops, oneDNN's best 0.93-1.04 ms
// against their 1.39-1.44 in three of them).
// `settling_ms`: the CPU time the runs past the plan's (kStillSettling) may take in all.
MeasuredChoice Time(const std::vector<KernelCandidate>& candidates, const TrialPlan& plan, double settling_ms) {
  const size_t n = candidates.size();
  MeasuredChoice choice;
  choice.names = Names(candidates);
  choice.best_ms.assign(n, std::numeric_limits<double>::infinity());
  for (int pass = 0; pass < kPasses; ++pass) {
    // The second pass in the other order: a stretch of load on the machine falls on both.
    for (size_t i = 0; i < n; ++i) {
      const size_t c = pass % 2 == 0 ? i : n - 1 - i;
      // Untimed: the runs after another candidate's find the caches as that one left them. A
      // depthwise convolution's output, evicted by the other's streaming stores, took oneDNN's
      // kernel 2.1-2.3 ms, then 1.1-1.4, then 1.0-1.1 as in runs of its own; run by run, the
      // candidates alternating, it ranked the two wrongly.
      double settle_ms = 0;
      for (int r = 0; r < plan.settle_runs; ++r) settle_ms = TimeMs(candidates[c].run);
      const int runs = settle_ms > kLongRunMs ? 1 : plan.timed_runs;
      // The block's best before its last run, and that run.
      double before_ms = std::numeric_limits<double>::infinity(), last_ms = before_ms;
      // Past the plan's runs (of the full plan), another while the last was still settling.
      auto run_on = [&](int r) {
        return runs == kRunsPerBlock && r < kMaxTimedRunsPerBlock && last_ms <= settling_ms &&
               last_ms < (1 - kStillSettling) * before_ms && before_ms - last_ms >= kStillSettlingMinMs;
      };
      for (int r = 0; r < runs || run_on(r); ++r) {
        before_ms = std::min(before_ms, last_ms);
        last_ms = TimeMs(candidates[c].run);
        if (r >= runs) settling_ms -= last_ms;
        choice.best_ms[c] = std::min(choice.best_ms[c], last_ms);
      }
    }
  }
  choice.winner = 0;
  for (size_t c = 1; c < n; ++c) {
    const bool clear = choice.best_ms[c] <= (1 - kMargin) * choice.best_ms[0];
    if (clear && choice.best_ms[c] < choice.best_ms[choice.winner]) choice.winner = static_cast<int>(c);
  }
  return choice;
}

// A time for the listing: `decimals` places, or 4 significant digits from a million ms on, where
// fixed point would grow with the value: a cache entry or loaded file (bytes from elsewhere) may
// hold any finite time, and 1e300 took 301 digits.
std::string FormatMs(double ms, int decimals) {
  return ms < 1e6 ? fmt::format("{:.{}f}", ms, decimals) : fmt::format("{:.4g}", ms);
}

}  // namespace

std::string PersistentKernelChoiceKey(const std::string& key, const TrialPlan& plan) {
  return fmt::format("{} | trial: {} passes of {}+{} runs, up to {} while {} faster, margin {} on the best run", key,
                     kPasses, plan.settle_runs, plan.timed_runs, kMaxTimedRunsPerBlock, kStillSettling, kMargin);
}

KernelChoiceMode GetKernelChoiceMode() { return kernel_choice_mode.load(); }
void SetKernelChoiceMode(KernelChoiceMode mode) { kernel_choice_mode.store(mode); }

double GetTrialBudgetMs() { return trial_budget_ms.load(); }
void SetTrialBudgetMs(double ms) { trial_budget_ms.store(ms); }

TrialPlan FullTrialPlan(double estimated_run_ms) {
  return TrialPlan{kSettleRuns, estimated_run_ms > kLongRunMs ? 1 : kRunsPerBlock};
}

std::optional<TrialPlan> PlanTrial(double estimated_run_ms, size_t candidates) {
  const double budget_ms = GetTrialBudgetMs();
  if (budget_ms <= 0) return std::nullopt;
  // The full plan, as Time runs it where runs are estimated long; then one timed run a block, the
  // plan long runs take anyway (the settle runs stay: without them the first run after another
  // candidate's is charged that one's cache misses).
  for (const TrialPlan& plan : {FullTrialPlan(estimated_run_ms), TrialPlan{kSettleRuns, 1}}) {
    if (estimated_run_ms * static_cast<double>(plan.RunsPerCandidate() * candidates) <= budget_ms) return plan;
  }
  return std::nullopt;
}

double EstimatedStreamingRunMs(double bytes) { return bytes / kTrialStreamBytesPerMs; }

std::string MeasuredChoice::Summary() const {
  const auto w = static_cast<size_t>(winner);
  std::string text = origin == ChoiceOrigin::kCached   ? "cached: "
                     : origin == ChoiceOrigin::kLoaded ? "loaded: "
                                                       : "";
  if (!timed()) {
    // The budget only where it was this process's that kept the trial from running.
    text += fmt::format("not timed: one run estimated at {} ms", FormatMs(estimated_run_ms, 1));
    if (origin == ChoiceOrigin::kTimed) {
      const TrialPlan shortest{kSettleRuns, 1};
      text += fmt::format(", a trial of {} x {} runs over the {:g} ms budget", names.size(),
                          shortest.RunsPerCandidate(), GetTrialBudgetMs());
    }
    return text;
  }
  text += fmt::format("timed {} ms", FormatMs(best_ms[w], 3));
  bool faster_kept_out = false;
  for (size_t c = 0; c < names.size(); ++c) {
    if (c == w) continue;
    text += fmt::format(" against {} {} ms", names[c], FormatMs(best_ms[c], 3));
    faster_kept_out |= best_ms[c] < best_ms[w];
  }
  if (faster_kept_out && origin != ChoiceOrigin::kLoaded) {
    text += fmt::format(", within the {:.0f}% margin", kMargin * 100);
  }
  return text;
}

KernelChoiceScope::KernelChoiceScope(std::string persistent_cache_dir)
    : dir_(std::move(persistent_cache_dir)), outer_(current_scope) {
  current_scope = this;
}

KernelChoiceScope::~KernelChoiceScope() { current_scope = outer_; }

MeasuredChoice KernelChoiceScope::Taken(const std::string& key, const MeasuredChoice& choice) {
  if (current_scope != nullptr) current_scope->choices_.push_back(RecordOf(key, choice));
  return choice;
}

std::optional<MeasuredChoice> FindKernelChoice(const std::string& key, const std::vector<std::string>& names,
                                               double estimated_run_ms) {
  KernelChoiceScope* scope = current_scope;
  // A choice made without a trial stands only while the budget still keeps the trial from running.
  const std::optional<TrialPlan> plan = PlanTrial(estimated_run_ms, names.size());
  const bool over_bound = !plan.has_value();
  auto usable = [&](const MeasuredChoice& choice) { return choice.names == names && (choice.timed() || over_bound); };
  // Said once, though a caller that asks here first then calls ChooseByMeasuring asks twice.
  auto warn = [&](std::string warning) {
    std::vector<std::string>& warnings = scope->warnings_;
    if (std::find(warnings.begin(), warnings.end(), warning) == warnings.end()) warnings.push_back(std::move(warning));
  };
  Choices& state = State();
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (auto it = state.loaded.find(key); it != state.loaded.end()) {
      if (it->second.candidates == names) {
        state.loaded_taken.insert(key);
        return KernelChoiceScope::Taken(key, ChoiceOf(it->second, ChoiceOrigin::kLoaded));
      }
      if (scope != nullptr) {
        warn(fmt::format(
            "{}: the choice for this key names other candidates than this build's ({}); timing them",
            DisplayPath(state.loaded_from), EscapeForTerminal(fmt::format("{}", fmt::join(names, ", ")))));
      }
    }
    if (auto it = state.made.find(key); it != state.made.end() && usable(it->second)) {
      MeasuredChoice choice = it->second;
      choice.origin = ChoiceOrigin::kCached;
      return KernelChoiceScope::Taken(key, choice);
    }
  }
  const std::string dir = scope != nullptr ? scope->dir_ : "";
  if (!dir.empty()) {
    // A choice timed with as many runs as this process's plan or more: the full plan's entry, then
    // (where this process's budget allows no more) the shorter plan's. A choice the short plan made
    // is timed again where the full plan fits: its key names the plan it was made with.
    std::vector<TrialPlan> plans = {FullTrialPlan(estimated_run_ms)};
    const TrialPlan shortest{kSettleRuns, 1};
    if ((!plan || plan->timed_runs == shortest.timed_runs) && plans[0].timed_runs != shortest.timed_runs) {
      plans.push_back(shortest);
    }
    for (const TrialPlan& made_with : plans) {
      std::string warning;
      std::optional<KernelChoiceRecord> stored =
          LookupKernelChoice(dir, MachineForKernelChoices(), PersistentKernelChoiceKey(key, made_with), &warning);
      if (!warning.empty()) warn(std::move(warning));
      if (!stored) continue;
      // Only timed choices are written there: an entry saying otherwise was not written by a trial.
      MeasuredChoice choice = ChoiceOf(*stored, ChoiceOrigin::kCached);
      if (!choice.timed() || !usable(choice)) continue;
      std::lock_guard<std::mutex> lock(state.mutex);
      state.made.insert_or_assign(key, choice);
      return KernelChoiceScope::Taken(key, choice);
    }
  }
  if (!over_bound) return std::nullopt;
  // The trial would cost more than the choice could save at compile time: the rule's pick,
  // untimed, kept for the process (and its dumps) but not in the persistent cache.
  MeasuredChoice choice;
  choice.names = names;
  choice.estimated_run_ms = estimated_run_ms;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.made.insert_or_assign(key, choice);
  }
  return KernelChoiceScope::Taken(key, choice);
}

MeasuredChoice ChooseByMeasuring(const std::string& key, const std::vector<KernelCandidate>& candidates,
                                 double estimated_run_ms) {
  if (std::optional<MeasuredChoice> known = FindKernelChoice(key, Names(candidates), estimated_run_ms)) {
    return *known;
  }
  // FindKernelChoice answers wherever no plan fits.
  const TrialPlan plan = PlanTrial(estimated_run_ms, candidates.size()).value_or(TrialPlan{});
  KernelChoiceScope* scope = current_scope;
  Choices& state = State();
  const std::string dir = scope != nullptr ? scope->dir_ : "";
  // Timed outside the lock: two threads compiling the same shape at once both time it, and the
  // first to finish is kept; neither waits on the other's runs. A span in the compilation's
  // trace shows what the trial cost, which a cached choice does not pay.
  MeasuredChoice choice;
  {
    profiler::TraceSpan span("time kernel candidates", profiler::category::kCodegen);
    span.AddArg("key", key);
    // The runs past the plan's take what the plan leaves of the budget as estimated, not as
    // spent: a machine whose load slowed the plan's runs (and the trial's budget with them) is
    // where a block is most often still settling.
    const double planned_ms = estimated_run_ms * plan.RunsPerCandidate() * static_cast<double>(candidates.size());
    choice = Time(candidates, plan, std::max(0.0, GetTrialBudgetMs() - planned_ms));
    span.AddArg("winner", choice.names[static_cast<size_t>(choice.winner)]);
  }
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    auto [it, inserted] = state.made.emplace(key, choice);
    if (!inserted && it->second.names == choice.names && it->second.timed()) {  // another thread timed it first
      choice = it->second;
      choice.origin = ChoiceOrigin::kCached;
      return KernelChoiceScope::Taken(key, choice);
    }
    // The key's other candidates (never two builds' in one process), or a choice made untimed
    // under a smaller budget.
    if (!inserted) it->second = choice;
  }
  if (!dir.empty()) {
    std::string warning;
    StoreKernelChoice(dir, RecordOf(PersistentKernelChoiceKey(key, plan), choice), &warning);
    if (!warning.empty()) scope->warnings_.push_back(std::move(warning));
  }
  return KernelChoiceScope::Taken(key, choice);
}

StatusOr<size_t> LoadKernelChoices(const std::string& path) {
  std::map<std::string, KernelChoiceRecord> loaded;
  if (!path.empty()) {
    {
      // Its own limit, said as such (the input limit's hint, --max-input-size, would not raise it).
      ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
      if (file.size() > kMaxChoicesFileBytes) {
        return Error(fmt::format("{}: {} is more than the {} a kernel choices file may hold", DisplayPath(path),
                                 FormatBytes(file.size()), FormatBytes(kMaxChoicesFileBytes)));
      }
    }
    ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxChoicesFileBytes));
    ASSIGN_OR_RETURN(std::vector<KernelChoiceRecord> records, ParseKernelChoices(text, DisplayPath(path)));
    for (KernelChoiceRecord& record : records) {
      auto [it, inserted] = loaded.emplace(record.key, record);
      if (!inserted && (it->second.candidates != record.candidates || it->second.winner != record.winner)) {
        return Error(fmt::format("{}: two different choices for the key {}", DisplayPath(path),
                                 EscapeForTerminal(record.key)));
      }
    }
  }
  Choices& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.loaded = std::move(loaded);
  state.loaded_taken.clear();
  state.loaded_from = path;
  return state.loaded.size();
}

std::vector<std::string> LoadedKernelChoicesNotTaken() {
  Choices& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  std::vector<std::string> keys;
  for (const auto& [key, record] : state.loaded) {
    if (!state.loaded_taken.count(key)) keys.push_back(key);
  }
  return keys;
}

void SetKernelChoicesDumpPath(const std::string& path) {
  Choices& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.dump_path = path;
}

std::string WriteKernelChoicesDump() {
  Choices& state = State();
  std::string path;
  std::vector<KernelChoiceRecord> records;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (state.dump_path.empty()) return "";
    path = state.dump_path;
    // The loaded choices first (a replay's dump says what it was forced to), then the others.
    for (const auto& [key, record] : state.loaded) records.push_back(record);
    for (const auto& [key, choice] : state.made) {
      if (!state.loaded.count(key)) records.push_back(RecordOf(key, choice));
    }
  }
  Status written = WriteFile(path, SerializeKernelChoices(records));
  return written.ok() ? "" : fmt::format("cannot write the kernel choices to {}: {}", DisplayPath(path),
                                         written.message());
}

void ClearMeasuredChoices() {
  Choices& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.made.clear();
  state.loaded.clear();
  state.loaded_taken.clear();
  state.loaded_from.clear();
}

}  // namespace xlens::runtime

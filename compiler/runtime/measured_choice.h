// A choice between implementations of one call made by timing them, as XLA's GPU autotuner
// chooses a GEMM or convolution algorithm: when a thunk has two kernels for its shape and no
// rule picks the faster on every machine, it runs each on scratch buffers at build, a few
// alternating rounds, and keeps the faster. As the autotuner's results, the pick is kept:
//   - for the process, under a key that names the shape;
//   - across processes, with --xla_xlens_persistent_cache_dir=DIR, in DIR beside the compiled
//     kernels, one entry per machine and key (kernel_choice_file.h), so a second process takes
//     the pick without timing anything (the listing says "cached" where a trial says "timed");
//   - in the dump (module_NNNN.NAME.kernel_choices.json, the module's choices) and, with
//     --xla_cpu_xlens_dump_kernel_choices_to=FILE, in FILE (every choice of the process);
//     --xla_cpu_xlens_load_kernel_choices_from=FILE forces the choices FILE holds, whatever the
//     timings would say, on any machine whose call has the same key and candidates (a replay
//     computes the recorded bits; where oneDNN picks another kernel of its own, the key differs
//     and the call is timed), and `xlens replay` loads a bundle's own.
//
// Each candidate runs on the calling thread and is timed by that thread's CPU time, which a
// machine busy with other work disturbs far less than the wall clock (a run descheduled halfway
// is not charged the wait); what remains (caches and memory shared with that work) is met by
// taking each candidate's best run, in blocks of runs of its own, the blocks alternating, and by
// a margin: the first candidate is the fixed rule's pick, and another overturns it only when its
// best run is kMargin faster than the rule's.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compiler/runtime/kernel_choice_file.h"
#include "compiler/support/status.h"

namespace xlens::runtime {

// How a thunk with candidates chooses: by timing them (the default), or by the fixed rule it
// falls back on (deterministic: what tests that check a kernel by name use, and
// --xla_cpu_xlens_measure_kernel_choice=false).
enum class KernelChoiceMode { kMeasured, kRule };
KernelChoiceMode GetKernelChoiceMode();
void SetKernelChoiceMode(KernelChoiceMode mode);

struct KernelCandidate {
  std::string name;  // the kernel's name as the listing gives it
  std::function<void()> run;
};

// Where a choice came from: made now (by a trial, or without one where a run would take too
// long), an earlier trial (this process's or the persistent cache's), or a file loaded by flag.
enum class ChoiceOrigin { kTimed, kCached, kLoaded };

struct MeasuredChoice {
  int winner = 0;                   // index of the chosen candidate
  std::vector<std::string> names;   // the candidates' names
  std::vector<double> best_ms;      // each candidate's best run, milliseconds; empty: not timed
  double estimated_run_ms = 0;      // where not timed: the estimate of one run that kept it so
  ChoiceOrigin origin = ChoiceOrigin::kTimed;

  bool timed() const { return !best_ms.empty(); }
  // For the listing: "timed 0.941 ms against depthwise:avx512 1.340 ms", "cached: timed ...",
  // "loaded: timed ...", and ", within the 10% margin" where the rule's pick was kept though
  // another ran faster; "not timed: one run estimated at 9.6 ms, a trial of 2 x 6 runs over the
  // 60 ms budget" where the trial's budget kept the rule's pick.
  std::string Summary() const;
};

// The trial's budget. A trial runs each candidate 6 or 10 times on operands of the call's size
// that it allocates and writes, so its cost grows with the call's and has no bound of its own:
// a depthwise f32[16,112,112,256] compiled in 2070 ms timed against 4.1 ms by the rule (load
// 11). A bound on one run's time alone left a dozen runs of two candidates under it:
// f32[15,112,112,64], one run estimated at 9.6 ms, compiled in 465-629 ms against 5.9-27 ms
// just over a 10 ms bound. So the whole trial is bounded: one run of the rule's pick as the
// caller estimates it, times the runs a plan makes of each candidate, times the candidates, must
// fit this budget. The full plan (TrialPlan below) first; where it does not fit, the plan that
// calls of kLongRunMs or more already take (one timed run a block, the settle runs kept: they
// are what made the trial rank right, see Time in the .cc); where neither fits, the rule's pick
// is kept without a trial and recorded as not timed. A choice already made, cached or loaded for
// the key is still taken. Not timed choices are not kept in the persistent cache: they cost
// nothing to make again, and a process with a larger budget times them.
// --xla_cpu_xlens_kernel_choice_trial_budget_ms sets it (0: no trial runs).
//
// Why 60 ms: the benchmark's depthwise row, 8x56x56x128, is the call the trial exists for
// (oneDNN's kernel 0.92-0.98 ms against the loops' 1.30-1.44 on one thread, picked in 15 of 15
// processes at load 0.8-5); one run estimated at 2.6 ms, its full trial at 52 ms, and it compiled
// in 46-69 ms with the trial against 4.3 without (load 0.8). 60 ms keeps that trial whole and
// keeps a call from adding much more than that to its compile time; the estimate runs slow (that
// shape ran at 19-27 GB/s on one thread, f32[15,112,112,64] at 11-15), so a trial's CPU time
// has stayed under its estimate. f32[15,112,112,64] (9.6 ms a run) now compiles in 4.3-11.7 ms
// against 200-397 with its trial (6 alternating pairs, load 5). The one-timed-run plan, against
// the full one in alternating processes at load 5-5.5: 10x56x56x128 (3.2 ms a run estimated)
// picked oneDNN's kernel in 5 of 8 against 6 of 8, compiling in 86-222 ms against 120-427;
// 12x56x56x128, whose two kernels are within the margin there, 1 of 8 against 3 of 8.
inline constexpr double kDefaultTrialBudgetMs = 60;
double GetTrialBudgetMs();
void SetTrialBudgetMs(double ms);
// One run's time estimated from the bytes it reads and writes, streamed by one thread (the
// trial runs a call's parts in turn on the calling thread) at 10 GB/s: the depthwise loops'
// runs of f32[32,112,112,64] and f32[16,112,112,256] took 9.5 and 8.8 GB/s here (one thread,
// load 3-4), smaller calls that stay in the caches more.
inline constexpr double kTrialStreamBytesPerMs = 10e6;
double EstimatedStreamingRunMs(double bytes);

// Runs `candidates` in kPasses passes, the second in the opposite order; in each pass each
// candidate runs kSettleRuns times untimed (to find the caches as its own runs leave them) and
// then kRunsPerBlock times timed (once where its runs take kLongRunMs or more, or where the
// budget holds only that plan), and on while its runs are still settling (kStillSettling).
// candidates[0] is the fixed rule's pick; another wins only when its best run is at most
// (1 - kMargin) times the rule's best (of those that are, the lowest best). A later call
// with the same `key` returns the same choice without running anything, and so does a first call
// whose choice is loaded or in the persistent cache (with the same candidates' names, in order).
//
// Why 10%: the trial exists for gaps like depthwise 8x56x56x128's on the Xeon VM, oneDNN's
// kernel 26-34% faster than the loops (12 processes at load 5-7: 0.885-0.990 ms against
// 1.258-1.372 on one thread, 12 of 12 picking oneDNN's); the same kernel's best moved by up to 12%
// between those processes, so a gap under 10% is one the load can make or unmake. Below it the
// rule's pick stays: 32x112x112x64 timed 16.6 ms (oneDNN's) against 17.3 (the loops), and keeps
// the loops in every process instead of whichever the load favoured. Under heavy load a trial
// can still go either way (a whole block of runs slowed); the persistent cache is what makes one
// pick hold for every process.
inline constexpr int kPasses = 2, kSettleRuns = 2, kRunsPerBlock = 3;
inline constexpr double kLongRunMs = 5;
inline constexpr double kMargin = 0.10;
// A block of the full plan whose last timed run was still kStillSettling faster than the
// block's best before it (and by kStillSettlingMinMs at least, which a clock of microseconds
// resolves) is not yet settled: it runs on, one run at a time, until a run no longer is, up to
// kMaxTimedRunsPerBlock timed runs, while such runs' CPU time stays within what the plan leaves
// of the trial's budget (by its estimate: under load the plan itself runs over). After another
// candidate's block, oneDNN's kernels took several runs to come back to their own speed:
// depthwise 2x56x56x128's jit_dw, 0.15 ms a run settled, ran 0.78, 0.66, 0.36 ms in its three
// timed runs after the generic kernel's 4 ms runs (its two settle runs before them), and 0.22,
// 0.20, 0.20 in the other pass, so the trial kept brdgmm_dw (0.21 ms) by the margin, a kernel
// that then ran its parts 45% slower (105 us an image against 72). With a copy loop over 64 MiB
// on the other core, 40 processes of each alternating: brdgmm_dw in 10 of 40 with the plan's
// runs alone, in 2 of 40 with the blocks run until settled (2 to 11 more runs a trial).
inline constexpr double kStillSettling = 0.05, kStillSettlingMinMs = 0.005;
inline constexpr int kMaxTimedRunsPerBlock = 10;
// The runs a trial makes of each candidate in each pass.
struct TrialPlan {
  int settle_runs = kSettleRuns;
  int timed_runs = kRunsPerBlock;
  int RunsPerCandidate() const { return kPasses * (settle_runs + timed_runs); }
};
// The plan with the most runs for one run estimated at `estimated_run_ms` (one timed run a block
// where runs are long, as Time takes them anyway).
TrialPlan FullTrialPlan(double estimated_run_ms);
// The plan a trial of `candidates` candidates takes where one run is estimated at
// `estimated_run_ms` (0: not estimated, the full plan), within GetTrialBudgetMs(); none: no trial.
std::optional<TrialPlan> PlanTrial(double estimated_run_ms, size_t candidates);
// `estimated_run_ms`: one run of candidates[0], as the caller estimates it (0: not estimated);
// where no plan fits the budget nothing runs (see there).
MeasuredChoice ChooseByMeasuring(const std::string& key, const std::vector<KernelCandidate>& candidates,
                                 double estimated_run_ms = 0);
// The choice ChooseByMeasuring would return without running anything (loaded, made before in
// the process, in the persistent cache, or not timed as over the trial's budget), if there is
// one: a caller whose trial needs scratch buffers asks first.
std::optional<MeasuredChoice> FindKernelChoice(const std::string& key, const std::vector<std::string>& names,
                                               double estimated_run_ms = 0);

// The key of `key`'s entry in the persistent cache: the caller's key and how the trial decided
// (its passes, the runs of the plan it was made with, and its margin), so that a change to the
// trial makes its picks anew instead of reusing the old trial's, as the object cache's format
// string does for compiled code, and a pick the shorter plan made is made again where the full
// plan fits.
std::string PersistentKernelChoiceKey(const std::string& key, const TrialPlan& plan = TrialPlan{});

// The choices made, in order, while one is alive on this thread, and where they are kept: a
// compilation opens one around building its thunks with its persistent cache directory (empty:
// none), then dumps choices() and reports warnings() (an unusable cache entry or directory).
class KernelChoiceScope {
 public:
  explicit KernelChoiceScope(std::string persistent_cache_dir);
  ~KernelChoiceScope();
  KernelChoiceScope(const KernelChoiceScope&) = delete;
  KernelChoiceScope& operator=(const KernelChoiceScope&) = delete;

  const std::vector<KernelChoiceRecord>& choices() const { return choices_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  friend MeasuredChoice ChooseByMeasuring(const std::string&, const std::vector<KernelCandidate>&, double);
  friend std::optional<MeasuredChoice> FindKernelChoice(const std::string&, const std::vector<std::string>&, double);
  // `choice`, recorded as taken for `key` by the compilation whose scope is open on this thread.
  static MeasuredChoice Taken(const std::string& key, const MeasuredChoice& choice);
  std::string dir_;
  std::vector<KernelChoiceRecord> choices_;
  std::vector<std::string> warnings_;
  KernelChoiceScope* outer_;
};

// --xla_cpu_xlens_load_kernel_choices_from: the choices of `path` are forced from now on (they
// replace any loaded before; an empty path forgets them); how many. An unreadable or malformed
// file is an error naming it and what is wrong, and forces nothing.
StatusOr<size_t> LoadKernelChoices(const std::string& path);
// The keys of the loaded choices no call has taken since they were loaded. A key holds the call's
// shape, its parallelism and oneDNN's kernel, so a recording's choice is not taken where any of
// them differs (a replay on fewer CPUs): that call is timed again instead.
std::vector<std::string> LoadedKernelChoicesNotTaken();
// --xla_cpu_xlens_dump_kernel_choices_to: every choice the process has made or taken is written
// to `path` (empty: nowhere) after each compilation that made one, by WriteKernelChoicesDump.
void SetKernelChoicesDumpPath(const std::string& path);
// Writes the dump of SetKernelChoicesDumpPath, if any, atomically; a failure is returned as text.
std::string WriteKernelChoicesDump();

// Forgets every choice held in memory, the loaded ones included (tests; a persistent cache
// directory is left as it is).
void ClearMeasuredChoices();

}  // namespace xlens::runtime

// ChooseByMeasuring: how often it runs each candidate and in what order, that another candidate
// overturns the rule's pick (the first) only by the margin on their best runs, that a key's choice is
// kept for the process and, with a persistent cache directory, for the next process (an entry
// that is damaged or another's is rejected with a message and timed again), that a loaded file
// forces its choice, and that the choices made are dumped as the loader reads them. Candidates
// whose speed matters spend a set amount of the thread's CPU time, the clock the trial reads, so
// the outcome does not depend on the machine's load.
#include "compiler/runtime/measured_choice.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/runtime/kernel_choice_file.h"
#include "tests/scratch_directory.h"

namespace xlens::runtime {
namespace {

double ThreadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

// A candidate taking `ms` of the thread's CPU time per run (`ms_of_run` by the run's index).
KernelCandidate Spending(const std::string& name, std::function<double(int)> ms_of_run, int* runs) {
  return {name, [ms_of_run, runs] {
            const double end = ThreadCpuMs() + ms_of_run((*runs)++);
            while (ThreadCpuMs() < end) {
            }
          }};
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lengths of the runs of equal candidates in `order`, which must be one block per candidate and
// pass, the passes in opposite orders (so the last candidate's two blocks are one run, in the
// middle), each block of the full plan's runs or more up to the settling cap.
std::vector<int> ExpectBlocks(const std::vector<int>& order, int candidates) {
  std::vector<int> lengths, who;
  for (size_t r = 0; r < order.size(); ++r) {
    if (r == 0 || order[r] != order[r - 1]) {
      lengths.push_back(0);
      who.push_back(order[r]);
    }
    ++lengths.back();
  }
  static_assert(kPasses == 2, "the passes' blocks are read as two");
  const size_t expected = static_cast<size_t>(2 * candidates - 1);
  EXPECT_EQ(lengths.size(), expected);
  for (size_t b = 0; b < std::min(lengths.size(), expected); ++b) {
    const int i = static_cast<int>(b) < candidates ? static_cast<int>(b) : 2 * candidates - 2 - static_cast<int>(b);
    const int blocks = i == candidates - 1 ? 2 : 1;
    EXPECT_EQ(who[b], i) << "run " << b;
    EXPECT_GE(lengths[b], blocks * (kSettleRuns + kRunsPerBlock)) << "run " << b;
    EXPECT_LE(lengths[b], blocks * (kSettleRuns + kMaxTimedRunsPerBlock)) << "run " << b;
  }
  return lengths;
}

// Candidates whose run takes ms[i] of the thread's CPU time, i its runs in a row so far (the
// last of ms once past its end): a kernel that comes back to its speed over several runs after
// another's ran. Each run is recorded in `order`.
struct Streaks {
  std::vector<int> order;
  KernelCandidate Candidate(int id, std::vector<double> ms) {
    return {"k" + std::to_string(id), [this, id, ms] {
              const int in_a_row = static_cast<int>(
                  std::find_if(order.rbegin(), order.rend(), [id](int o) { return o != id; }) - order.rbegin());
              order.push_back(id);
              const double end = ThreadCpuMs() + ms[std::min<size_t>(static_cast<size_t>(in_a_row), ms.size() - 1)];
              while (ThreadCpuMs() < end) {
              }
            }};
  }
};

class MeasuredChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override { ClearMeasuredChoices(); }
  void TearDown() override {
    ClearMeasuredChoices();
    SetKernelChoicesDumpPath("");
    SetTrialBudgetMs(kDefaultTrialBudgetMs);
  }
};

TEST_F(MeasuredChoiceTest, RunsEachCandidateInBlocksAndKeepsTheChoice) {
  std::vector<int> order;
  volatile double sink = 0;
  auto candidate = [&](int index, int work) {
    return KernelCandidate{"k" + std::to_string(index), [&order, &sink, index, work] {
                             order.push_back(index);
                             for (int i = 0; i < work; ++i) sink = sink + 1.0 / (i + 1);
                           }};
  };
  const std::vector<KernelCandidate> candidates = {candidate(0, 20000), candidate(1, 1000), candidate(2, 5000)};
  const MeasuredChoice choice = ChooseByMeasuring("shape a", candidates);
  // Each candidate's runs come in one block per pass, the passes in opposite orders; a block is
  // the plan's runs, or more where its runs were still settling (the machine's load can make
  // them look so).
  ExpectBlocks(order, 3);
  ASSERT_EQ(choice.best_ms.size(), 3u);
  EXPECT_EQ(choice.names, (std::vector<std::string>{"k0", "k1", "k2"}));
  EXPECT_EQ(choice.origin, ChoiceOrigin::kTimed);
  for (double ms : choice.best_ms) EXPECT_GT(ms, 0.0);

  // The same key again: nothing runs, the same choice comes back.
  order.clear();
  const MeasuredChoice again = ChooseByMeasuring("shape a", candidates);
  EXPECT_TRUE(order.empty());
  EXPECT_EQ(again.origin, ChoiceOrigin::kCached);
  EXPECT_EQ(again.winner, choice.winner);
  EXPECT_EQ(again.best_ms, choice.best_ms);
  EXPECT_EQ(again.Summary().rfind("cached: timed ", 0), 0u) << again.Summary();

  // Another key is timed anew.
  (void)ChooseByMeasuring("shape b", candidates);
  ExpectBlocks(order, 3);
}

// The rule's pick (the first) stays unless another's best run is kMargin faster than the rule's,
// whichever pass a run was slowed in.
TEST_F(MeasuredChoiceTest, AnotherCandidateWinsOnlyByTheMargin) {
  const int block = kSettleRuns + kRunsPerBlock;
  auto fixed = [](double ms) { return [ms](int) { return ms; }; };
  // `slow` ms in the first pass's block of runs (load), `ms` in the second's.
  auto slowed_first = [block](double slow, double ms) { return [=](int run) { return run < block ? slow : ms; }; };
  struct Case {
    const char* what;
    std::function<double(int)> rule_ms, other_ms;
    int winner;
  } cases[] = {
      {"half the time", fixed(1.0), fixed(0.5), 1},
      {"15% faster", fixed(1.0), fixed(0.85), 1},
      {"5% faster: within the margin", fixed(1.0), fixed(0.95), 0},
      {"slower", fixed(0.5), fixed(1.0), 0},
      {"half the time, slowed in one pass", fixed(1.0), slowed_first(2.0, 0.5), 1},
      {"5% faster, the rule slowed in one pass", slowed_first(2.0, 1.0), fixed(0.95), 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ClearMeasuredChoices();
    int rule_runs = 0, other_runs = 0;
    const MeasuredChoice choice =
        ChooseByMeasuring("shape", {Spending("rule", c.rule_ms, &rule_runs), Spending("other", c.other_ms, &other_runs)});
    EXPECT_EQ(choice.winner, c.winner);
    EXPECT_EQ(choice.Summary().find("within the 10% margin") != std::string::npos,
              c.winner == 0 && choice.best_ms[1] < choice.best_ms[0])
        << choice.Summary();
  }
}

// A block whose last timed run was still kStillSettling faster than its best before runs on until
// a run is not: a kernel that takes several runs after another's to come back to its speed is
// timed at that speed. Its three planned runs alone (4.2, 3.4, 2.6 ms) would keep the rule's
// 2.4 ms; settled, at 1.6, it wins. Runs that take the same time every time run the plan alone. The
// kernel is the middle one of three, so that each of its blocks follows another's. (Times of
// milliseconds, so that what the load adds to a run of CPU time stays well under 5% of it, and
// settle runs under kLongRunMs.)
TEST_F(MeasuredChoiceTest, ABlockStillSettlingRunsOnUntilItSettles) {
  Streaks streaks;
  const MeasuredChoice choice =
      ChooseByMeasuring("shape", {streaks.Candidate(0, {2.4}), streaks.Candidate(1, {4.8, 4.8, 4.2, 3.4, 2.6, 1.6}),
                                  streaks.Candidate(2, {3.0})});
  EXPECT_EQ(choice.winner, 1) << choice.Summary();
  EXPECT_NEAR(choice.best_ms[1], 1.6, 0.16);
  // Its blocks: the 2 + 3 planned runs, then 1.6 (still 38% faster), then 1.6 (settled).
  EXPECT_EQ(ExpectBlocks(streaks.order, 3), (std::vector<int>{5, 7, 10, 7, 5}));
}

// A block whose runs never settle stops at kMaxTimedRunsPerBlock timed runs, and where the runs
// past the plan's would take more than the plan leaves of the trial's budget, sooner.
TEST_F(MeasuredChoiceTest, SettlingStopsAtTheCapAndTheBudget) {
  std::vector<double> faster_and_faster;  // each run 0.25 ms faster than the one before
  for (double ms = 3.5; faster_and_faster.size() < 12; ms -= 0.25) faster_and_faster.push_back(ms);
  {
    Streaks streaks;
    (void)ChooseByMeasuring("shape a", {streaks.Candidate(0, {2.0}), streaks.Candidate(1, faster_and_faster),
                                        streaks.Candidate(2, {2.0})});
    const int capped = kSettleRuns + kMaxTimedRunsPerBlock;
    EXPECT_EQ(ExpectBlocks(streaks.order, 3), (std::vector<int>{5, capped, 10, capped, 5}));
  }
  {
    // Not estimated, the plan claims none of a budget of 3 ms: the runs past the plan's have it
    // all, one of them in the first pass (2.25 ms after its third run's 2.5), none in the second.
    SetTrialBudgetMs(3);
    Streaks streaks;
    (void)ChooseByMeasuring("shape b", {streaks.Candidate(0, {2.0}), streaks.Candidate(1, faster_and_faster),
                                        streaks.Candidate(2, {2.0})});
    EXPECT_EQ(ExpectBlocks(streaks.order, 3), (std::vector<int>{5, 6, 10, 5, 5}));
  }
}

// A second process (here: the memory forgotten) takes the persistent cache's choice without
// timing; the scope lists the choice either way.
TEST_F(MeasuredChoiceTest, PersistentCacheServesTheNextProcessWithoutTiming) {
  const std::string dir = testing::FreshScratchDir("choices").string() + "/cache";
  int rule_runs = 0, other_runs = 0;
  auto candidates = [&] {
    return std::vector<KernelCandidate>{Spending("rule", [](int) { return 0.6; }, &rule_runs),
                                        Spending("other", [](int) { return 0.2; }, &other_runs)};
  };
  {
    KernelChoiceScope scope(dir);
    const MeasuredChoice first = ChooseByMeasuring("shape", candidates());
    EXPECT_EQ(first.origin, ChoiceOrigin::kTimed);
    EXPECT_EQ(first.winner, 1);
    EXPECT_TRUE(scope.warnings().empty());
    ASSERT_EQ(scope.choices().size(), 1u);
    EXPECT_EQ(scope.choices()[0].key, "shape");
  }
  const std::string entry = KernelChoiceCachePath(dir, MachineForKernelChoices(), PersistentKernelChoiceKey("shape"));
  ASSERT_TRUE(std::filesystem::exists(entry));
  EXPECT_EQ(std::filesystem::status(dir).permissions() & std::filesystem::perms::all, std::filesystem::perms::owner_all);

  ClearMeasuredChoices();
  rule_runs = other_runs = 0;
  {
    KernelChoiceScope scope(dir);
    const MeasuredChoice second = ChooseByMeasuring("shape", candidates());
    EXPECT_EQ(rule_runs + other_runs, 0);
    EXPECT_EQ(second.origin, ChoiceOrigin::kCached);
    EXPECT_EQ(second.winner, 1);
    EXPECT_EQ(scope.choices().size(), 1u);
  }
  // Other candidates' names under the same key (another build): timed, not taken.
  ClearMeasuredChoices();
  {
    KernelChoiceScope scope(dir);
    int a = 0, b = 0;
    const MeasuredChoice other = ChooseByMeasuring(
        "shape", {Spending("rule", [](int) { return 0.1; }, &a), Spending("renamed", [](int) { return 0.1; }, &b)});
    EXPECT_EQ(other.origin, ChoiceOrigin::kTimed);
    EXPECT_GT(a + b, 0);
  }
}

// A directory others can write to is not trusted: refused once in the process, with a message,
// and nothing is written there.
TEST_F(MeasuredChoiceTest, SharedDirectoryIsRefusedOnce) {
  const std::filesystem::path dir = testing::FreshScratchDir("shared");
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_all |
                                        std::filesystem::perms::others_read | std::filesystem::perms::others_exec);
  int a = 0, b = 0;
  auto candidates = [&] {
    return std::vector<KernelCandidate>{Spending("rule", [](int) { return 0.02; }, &a),
                                        Spending("other", [](int) { return 0.01; }, &b)};
  };
  {
    KernelChoiceScope scope(dir.string());
    (void)ChooseByMeasuring("shape a", candidates());
    (void)ChooseByMeasuring("shape b", candidates());
    ASSERT_EQ(scope.warnings().size(), 1u);
    EXPECT_NE(scope.warnings()[0].find("persistent cache directory"), std::string::npos) << scope.warnings()[0];
    EXPECT_NE(scope.warnings()[0].find("group"), std::string::npos) << scope.warnings()[0];
  }
  {
    KernelChoiceScope scope(dir.string());
    (void)ChooseByMeasuring("shape c", candidates());
    EXPECT_TRUE(scope.warnings().empty());
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

// A damaged entry, or another key's copied under this one's name, is rejected with a message
// naming it, timed again and rewritten.
TEST_F(MeasuredChoiceTest, DamagedOrForeignCacheEntryIsRejectedWithAMessage) {
  const std::string dir = testing::FreshScratchDir("damaged").string() + "/cache";
  int rule_runs = 0, other_runs = 0;
  auto candidates = [&] {
    return std::vector<KernelCandidate>{Spending("rule", [](int) { return 0.3; }, &rule_runs),
                                        Spending("other", [](int) { return 0.1; }, &other_runs)};
  };
  {
    KernelChoiceScope scope(dir);
    (void)ChooseByMeasuring("shape", candidates());
    (void)ChooseByMeasuring("other shape", candidates());
  }
  const std::string entry = KernelChoiceCachePath(dir, MachineForKernelChoices(), PersistentKernelChoiceKey("shape"));
  const std::string valid = ReadText(entry);
  const std::string foreign = ReadText(KernelChoiceCachePath(dir, MachineForKernelChoices(), PersistentKernelChoiceKey("other shape")));
  for (const auto& [what, text, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"truncated", valid.substr(0, valid.size() / 2), "not JSON"},
           {"garbage", std::string(100, '\x01'), "not JSON"},
           {"another key's entry", foreign, "another machine's or shape's choice"},
           {"a winner not among the candidates", std::string(valid).replace(valid.rfind("\"other\""), 7, "\"third\""),
            "is not one of its candidates"},
           {"oversized", std::string(kMaxCacheEntryBytes + 1, ' '), "limit"}}) {
    SCOPED_TRACE(what);
    { std::ofstream(entry, std::ios::trunc) << text; }
    ClearMeasuredChoices();
    rule_runs = other_runs = 0;
    KernelChoiceScope scope(dir);
    const MeasuredChoice choice = ChooseByMeasuring("shape", candidates());
    EXPECT_EQ(choice.origin, ChoiceOrigin::kTimed);
    EXPECT_GT(rule_runs, 0);
    ASSERT_EQ(scope.warnings().size(), 1u);
    EXPECT_NE(scope.warnings()[0].find("kernel choice cache entry"), std::string::npos) << scope.warnings()[0];
    EXPECT_NE(scope.warnings()[0].find("rejected"), std::string::npos) << scope.warnings()[0];
    EXPECT_NE(scope.warnings()[0].find(message), std::string::npos) << scope.warnings()[0];
    // Rewritten by the new trial.
    auto rewritten = ParseKernelChoices(ReadText(entry), "entry");
    ASSERT_TRUE(rewritten.ok()) << rewritten.status().message();
    ASSERT_EQ(rewritten->size(), 1u);
    EXPECT_EQ((*rewritten)[0].key, PersistentKernelChoiceKey("shape"));
    EXPECT_EQ((*rewritten)[0].winner, 1);
  }
}

// The whole trial fits the budget: the full plan where it does, one timed run a block (the settle
// runs kept) where only that does, and nothing beyond. A bound on one run alone timed a call of
// 9.6 ms with 12 runs; here its estimate times the runs times the candidates is what counts.
TEST_F(MeasuredChoiceTest, TheWholeTrialFitsTheBudget) {
  ASSERT_EQ(GetTrialBudgetMs(), kDefaultTrialBudgetMs);
  const size_t full = static_cast<size_t>(kPasses * (kSettleRuns + kRunsPerBlock));
  const size_t one_timed = static_cast<size_t>(kPasses * (kSettleRuns + 1));
  struct Case {
    const char* what;
    double budget_ms, estimated_run_ms;
    size_t candidates, runs_each;  // 0: not timed
  } cases[] = {
      {"not estimated: the full plan", 1, 0, 2, full},
      {"the full plan fits exactly", 2.0 * full * 1.5, 1.5, 2, full},
      {"just over the full plan: one timed run a block", 2.0 * full * 1.5 - 0.01, 1.5, 2, one_timed},
      {"three candidates cost more", 2.0 * full * 1.5, 1.5, 3, one_timed},
      {"one timed run a block fits exactly", 2.0 * one_timed * 1.5, 1.5, 2, one_timed},
      {"under any plan: not timed", 2.0 * one_timed * 1.5 - 0.01, 1.5, 2, 0},
      // A run of 9.6 ms under the default budget, which a bound of 10 ms on one run timed.
      {"9.6 ms a run", kDefaultTrialBudgetMs, 9.6, 2, 0},
      // The benchmark's depthwise row, 2.6 ms a run estimated: its trial whole.
      {"2.6 ms a run", kDefaultTrialBudgetMs, 2.6, 2, full},
      {"long runs: one timed run a block is the full plan", 2.0 * one_timed * (kLongRunMs + 1), kLongRunMs + 1, 2,
       one_timed},
      {"a budget of 0: no trial", 0, 0.001, 2, 0},
      {"long runs under a large budget: still one timed run a block", 1000, kLongRunMs + 1, 2, one_timed},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ClearMeasuredChoices();
    SetTrialBudgetMs(c.budget_ms);
    std::vector<size_t> order;
    std::vector<KernelCandidate> candidates;
    for (size_t i = 0; i < c.candidates; ++i) {
      candidates.push_back({"k" + std::to_string(i), [&order, i] { order.push_back(i); }});
    }
    const MeasuredChoice choice = ChooseByMeasuring("shape", candidates, c.estimated_run_ms);
    const std::optional<TrialPlan> plan = PlanTrial(c.estimated_run_ms, c.candidates);
    EXPECT_EQ(plan.has_value(), c.runs_each != 0);
    EXPECT_EQ(choice.timed(), c.runs_each != 0);
    ASSERT_EQ(order.size(), c.candidates * c.runs_each);
    if (c.runs_each == 0) {
      EXPECT_EQ(choice.winner, 0);
      continue;
    }
    EXPECT_EQ(static_cast<size_t>(plan->RunsPerCandidate()), c.runs_each);
    // Each candidate's runs still in one block per pass, the passes in opposite orders.
    const size_t block = c.runs_each / kPasses;
    for (size_t run = 0; run < order.size(); ++run) {
      const size_t pass = run / (block * c.candidates), i = run / block % c.candidates;
      EXPECT_EQ(order[run], pass % 2 == 0 ? i : c.candidates - 1 - i) << "run " << run;
    }
  }
}

// A choice the shorter plan made is cached under that plan: a process whose budget fits the full
// plan times it again (and caches its own); one whose budget fits only the shorter plan takes either.
TEST_F(MeasuredChoiceTest, APickTheShorterPlanMadeIsTimedAgainWhereTheFullPlanFits) {
  const std::string dir = testing::FreshScratchDir("plans").string() + "/cache";
  int rule_runs = 0, other_runs = 0;
  auto candidates = [&] {
    return std::vector<KernelCandidate>{Spending("rule", [](int) { return 0.6; }, &rule_runs),
                                        Spending("other", [](int) { return 0.2; }, &other_runs)};
  };
  const double estimate = 1.5;
  const double full = 2.0 * kPasses * (kSettleRuns + kRunsPerBlock) * estimate;
  auto run = [&](double budget_ms) {
    ClearMeasuredChoices();
    rule_runs = other_runs = 0;
    SetTrialBudgetMs(budget_ms);
    KernelChoiceScope scope(dir);
    return ChooseByMeasuring("shape", candidates(), estimate);
  };
  const TrialPlan shortest{kSettleRuns, 1};
  EXPECT_EQ(run(full - 0.01).origin, ChoiceOrigin::kTimed);
  EXPECT_EQ(rule_runs, shortest.RunsPerCandidate());
  EXPECT_TRUE(std::filesystem::exists(
      KernelChoiceCachePath(dir, MachineForKernelChoices(), PersistentKernelChoiceKey("shape", shortest))));
  EXPECT_EQ(run(full - 0.01).origin, ChoiceOrigin::kCached);
  EXPECT_EQ(rule_runs + other_runs, 0);
  EXPECT_EQ(run(full).origin, ChoiceOrigin::kTimed);
  EXPECT_EQ(rule_runs, TrialPlan{}.RunsPerCandidate());
  EXPECT_EQ(run(full).origin, ChoiceOrigin::kCached);
  EXPECT_EQ(rule_runs + other_runs, 0);
}

// Only trials write the persistent cache: an entry there saying "not timed" (made by hand) is
// not taken, even where the budget keeps this process from timing; the rule's pick stands.
TEST_F(MeasuredChoiceTest, AnUntimedEntryInThePersistentCacheIsNotTaken) {
  const std::string dir = testing::FreshScratchDir("untimed_entry").string() + "/cache";
  const double over = 9.6;
  KernelChoiceRecord forged{MachineForKernelChoices(), "", {"rule", "other"}, {}, 1, 1e300};
  for (const TrialPlan& plan : {FullTrialPlan(over), TrialPlan{kSettleRuns, 1}, TrialPlan{}}) {
    forged.key = PersistentKernelChoiceKey("shape", plan);
    std::string warning;
    StoreKernelChoice(dir, forged, &warning);
    ASSERT_EQ(warning, "");
  }
  KernelChoiceScope scope(dir);
  const std::optional<MeasuredChoice> found = FindKernelChoice("shape", {"rule", "other"}, over);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->winner, 0);
  EXPECT_EQ(found->origin, ChoiceOrigin::kTimed);
  EXPECT_EQ(found->estimated_run_ms, over);
}

// Where no plan fits the budget, nothing runs: the rule's pick (the first), recorded and dumped as
// not timed, and not kept in the persistent cache, so a process with a larger budget times it; a
// timed choice already cached is still taken over the budget.
TEST_F(MeasuredChoiceTest, OverTheBudgetTheRulesPickIsKeptUntimed) {
  const std::string dir = testing::FreshScratchDir("bound").string() + "/cache";
  int rule_runs = 0, other_runs = 0;
  auto candidates = [&] {
    return std::vector<KernelCandidate>{Spending("rule", [](int) { return 0.3; }, &rule_runs),
                                        Spending("other", [](int) { return 0.1; }, &other_runs)};
  };
  // One run at 9.6 ms: 2 candidates x 6 runs at the least, over the default budget of 60 ms.
  const double over = 9.6, within = 0.5;
  ASSERT_EQ(GetTrialBudgetMs(), kDefaultTrialBudgetMs);
  {
    KernelChoiceScope scope(dir);
    const MeasuredChoice untimed = ChooseByMeasuring("shape", candidates(), over);
    EXPECT_EQ(rule_runs + other_runs, 0);
    EXPECT_EQ(untimed.winner, 0);
    EXPECT_FALSE(untimed.timed());
    EXPECT_EQ(untimed.estimated_run_ms, over);
    EXPECT_EQ(untimed.Summary(), "not timed: one run estimated at 9.6 ms, a trial of 2 x 6 runs over the 60 ms budget");
    // As FindKernelChoice, which a caller with scratch to allocate asks first.
    const std::optional<MeasuredChoice> found = FindKernelChoice("shape b", {"rule", "other"}, over);
    ASSERT_TRUE(found.has_value());
    EXPECT_FALSE(found->timed());
    EXPECT_FALSE(FindKernelChoice("shape c", {"rule", "other"}, within).has_value());
    ASSERT_EQ(scope.choices().size(), 2u);
    EXPECT_FALSE(scope.choices()[0].timed());
    EXPECT_EQ(scope.choices()[0].estimated_run_ms, over);
  }
  EXPECT_FALSE(std::filesystem::exists(
      KernelChoiceCachePath(dir, MachineForKernelChoices(), PersistentKernelChoiceKey("shape"))));
  // The process's dump says it was not timed, and reads back so.
  const std::string dump = testing::FreshScratchDir("bound_dump").string() + "/dumped.json";
  SetKernelChoicesDumpPath(dump);
  ASSERT_EQ(WriteKernelChoicesDump(), "");
  auto dumped = ParseKernelChoices(ReadText(dump), "dumped.json");
  ASSERT_TRUE(dumped.ok()) << dumped.status().message();
  ASSERT_EQ(dumped->size(), 2u);
  EXPECT_FALSE((*dumped)[0].timed());
  EXPECT_EQ((*dumped)[0].estimated_run_ms, over);

  // A larger budget (the flag) times the same key, in the same process, and caches that.
  SetTrialBudgetMs(2 * 6 * over);
  {
    KernelChoiceScope scope(dir);
    const MeasuredChoice timed = ChooseByMeasuring("shape", candidates(), over);
    EXPECT_TRUE(timed.timed());
    EXPECT_EQ(timed.origin, ChoiceOrigin::kTimed);
    EXPECT_EQ(timed.winner, 1);
    EXPECT_EQ(rule_runs, 6);
  }
  SetTrialBudgetMs(kDefaultTrialBudgetMs);
  // The next process takes the cached timed choice though its trial is over the budget.
  ClearMeasuredChoices();
  rule_runs = other_runs = 0;
  KernelChoiceScope scope(dir);
  const MeasuredChoice cached = ChooseByMeasuring("shape", candidates(), over);
  EXPECT_EQ(rule_runs + other_runs, 0);
  EXPECT_EQ(cached.origin, ChoiceOrigin::kCached);
  EXPECT_TRUE(cached.timed());
  EXPECT_EQ(cached.winner, 1);
}

// A loaded choice that was not timed is forced as any other (a replay runs the recording's
// kernel), and says so.
TEST_F(MeasuredChoiceTest, LoadedUntimedChoiceIsForced) {
  const std::string file = testing::FreshScratchDir("loaded_untimed").string() + "/choices.json";
  KernelChoiceRecord record{"another machine", "shape", {"rule", "other"}, {}, 1, 41.1};
  { std::ofstream(file) << SerializeKernelChoices({record}); }
  ASSERT_TRUE(LoadKernelChoices(file).ok());
  int rule_runs = 0, other_runs = 0;
  const MeasuredChoice forced = ChooseByMeasuring(
      "shape", {Spending("rule", [](int) { return 0.1; }, &rule_runs), Spending("other", [](int) { return 0.3; }, &other_runs)});
  EXPECT_EQ(rule_runs + other_runs, 0);
  EXPECT_EQ(forced.origin, ChoiceOrigin::kLoaded);
  EXPECT_EQ(forced.winner, 1);
  EXPECT_EQ(forced.Summary(), "loaded: not timed: one run estimated at 41.1 ms");
}

// A file read from elsewhere may hold any finite time: the listing gives absurd ones in 4
// significant digits, where fixed point spelled 1e300 in 301 digits.
TEST_F(MeasuredChoiceTest, AbsurdTimesAreListedShort) {
  const std::string file = testing::FreshScratchDir("absurd").string() + "/choices.json";
  const std::vector<KernelChoiceRecord> records = {{"another machine", "untimed", {"rule", "other"}, {}, 0, 1e300},
                                                   {"another machine", "timed", {"rule", "other"}, {1e308, 0.9}, 1}};
  { std::ofstream(file) << SerializeKernelChoices(records); }
  ASSERT_TRUE(LoadKernelChoices(file).ok());
  int a = 0, b = 0;
  auto candidates = [&] {
    return std::vector<KernelCandidate>{Spending("rule", [](int) { return 0.0; }, &a),
                                        Spending("other", [](int) { return 0.0; }, &b)};
  };
  EXPECT_EQ(ChooseByMeasuring("untimed", candidates()).Summary(), "loaded: not timed: one run estimated at 1e+300 ms");
  EXPECT_EQ(ChooseByMeasuring("timed", candidates()).Summary(), "loaded: timed 0.900 ms against rule 1e+308 ms");
  EXPECT_EQ(a + b, 0);
  // Below a million ms, as before.
  MeasuredChoice made;
  made.names = {"rule", "other"};
  made.estimated_run_ms = 999999.94;
  EXPECT_EQ(made.Summary(), "not timed: one run estimated at 999999.9 ms, a trial of 2 x 6 runs over the 60 ms budget");
}

// A loaded file forces its choice, the slower candidate included, without running anything; the
// process's dump holds every choice in the same form; a malformed file is an error that says so.
TEST_F(MeasuredChoiceTest, LoadedChoicesAreForcedAndDumpsReadBack) {
  const std::string dir = testing::FreshScratchDir("loaded").string();
  KernelChoiceRecord record{"another machine", "shape", {"rule", "other"}, {0.9, 1.5}, 1};
  const std::string file = dir + "/choices.json";
  { std::ofstream(file) << SerializeKernelChoices({record}); }
  StatusOr<size_t> loaded = LoadKernelChoices(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(*loaded, 1u);
  int rule_runs = 0, other_runs = 0;
  const MeasuredChoice forced = ChooseByMeasuring(
      "shape", {Spending("rule", [](int) { return 0.1; }, &rule_runs), Spending("other", [](int) { return 0.3; }, &other_runs)});
  EXPECT_EQ(rule_runs + other_runs, 0);
  EXPECT_EQ(forced.origin, ChoiceOrigin::kLoaded);
  EXPECT_EQ(forced.winner, 1);
  EXPECT_EQ(forced.Summary(), "loaded: timed 1.500 ms against rule 0.900 ms");

  SetKernelChoicesDumpPath(dir + "/dumped.json");
  ASSERT_EQ(WriteKernelChoicesDump(), "");
  auto dumped = ParseKernelChoices(ReadText(dir + "/dumped.json"), "dumped.json");
  ASSERT_TRUE(dumped.ok()) << dumped.status().message();
  ASSERT_EQ(dumped->size(), 1u);
  EXPECT_EQ((*dumped)[0].key, "shape");
  EXPECT_EQ((*dumped)[0].winner, 1);
  EXPECT_EQ((*dumped)[0].best_ms, record.best_ms);

  { std::ofstream(file, std::ios::trunc) << "{\"format\": \"xlens kernel choices\", \"version\": 1, \"choices\": 3}"; }
  const Status bad = LoadKernelChoices(file).status();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("choices.json"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("\"choices\" is missing or not an array"), std::string::npos) << bad.message();
  EXPECT_FALSE(LoadKernelChoices(dir + "/missing.json").ok());
}

}  // namespace
}  // namespace xlens::runtime

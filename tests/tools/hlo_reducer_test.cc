#include "compiler/tools/hlo_reducer.h"

#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bench/generated_module.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/hlo/verifier.h"
#include "compiler/tools/reduction_tests.h"

namespace xlens::tools {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<HloModule> Generated(int n) {
  auto module = ParseHloModule(bench::MakeLargeModuleText(n));
  EXPECT_TRUE(module.ok()) << module.status().message();
  return std::move(*module);
}

bool Contains(const HloModule& m, HloOpcode opcode) {
  for (const HloComputation* c : m.computations()) {
    for (const HloInstruction* i : c->instructions()) {
      if (i->opcode() == opcode) return true;
    }
  }
  return false;
}

TEST(HloReducerTest, APlantedMiscompareIn500InstructionsShrinksToAFew) {
  auto module = Generated(500);
  ASSERT_GE(CountInstructions(*module), 500);
  ReductionTestSpec spec;
  spec.test = "miscompare";
  spec.compile.optimize.planted.miscompile_after_pass = "cse";
  auto test = MakeReductionTest(spec);
  ASSERT_TRUE(test.ok());
  int64_t unverified = 0;
  ReductionTest checked = [&](const HloModule& candidate) -> StatusOr<bool> {
    if (!VerifyModule(candidate).ok()) ++unverified;
    return (*test)(candidate);
  };
  const auto start = std::chrono::steady_clock::now();
  auto result = ReduceModule(*module, checked, ReduceOptions{.time_limit_seconds = 120});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_LE(result->final_instructions, 10) << PrintModule(*result->module);
  EXPECT_EQ(result->final_instructions, CountInstructions(*result->module));
  EXPECT_EQ(unverified, 0);
  EXPECT_LT(seconds, 60);
  // The reduced module still miscompares: the test is deterministic.
  EXPECT_TRUE(*(*test)(*result->module));
}

TEST(HloReducerTest, KeepsWhatTheBugNeedsAndCutsTheRest) {
  // A "bug" that needs a reduce fed by a maximum: everything else goes.
  auto module = Generated(500);
  ReductionTest test = [](const HloModule& m) -> StatusOr<bool> {
    const HloInstruction* root = m.entry_computation()->root_instruction();
    (void)root;
    for (const HloInstruction* i : m.entry_computation()->instructions()) {
      if (i->opcode() != HloOpcode::kReduce) continue;
      for (const HloInstruction* o : i->operands()) {
        if (o->opcode() == HloOpcode::kMaximum) return true;
      }
    }
    return false;
  };
  std::vector<std::string> progress;
  auto result = ReduceModule(*module, test, ReduceOptions{
      .time_limit_seconds = 60, .progress = [&](const std::string& l) { progress.push_back(l); }});
  ASSERT_TRUE(result.ok()) << result.status().message();
  const HloModule& reduced = *result->module;
  EXPECT_TRUE(Contains(reduced, HloOpcode::kReduce));
  EXPECT_TRUE(Contains(reduced, HloOpcode::kMaximum));
  // reduce(maximum(p, q), 0) and the reducer's 3 instructions.
  EXPECT_LE(result->final_instructions, 8) << PrintModule(reduced);
  // Dimensions shrank too.
  EXPECT_THAT(PrintModule(reduced), ::testing::Not(HasSubstr("[16,8]")));
  EXPECT_FALSE(progress.empty());
  // Deterministic: the same steps again.
  auto again = ReduceModule(*module, test, ReduceOptions{.time_limit_seconds = 60});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(PrintModule(*again->module), PrintModule(reduced));
}

TEST(HloReducerTest, ATestThatPassesOnTheModuleIsAnError) {
  auto module = Generated(20);
  auto result = ReduceModule(*module, [](const HloModule&) -> StatusOr<bool> { return false; },
                             ReduceOptions{});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("the test passes on the module as given"));
}

TEST(HloReducerTest, TheTimeLimitStopsWithTheBestSoFar) {
  auto module = Generated(200);
  auto result = ReduceModule(*module, [](const HloModule&) -> StatusOr<bool> { return true; },
                             ReduceOptions{.time_limit_seconds = 0});
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->timed_out);
  EXPECT_EQ(result->final_instructions, result->initial_instructions);
}

}  // namespace
}  // namespace xlens::tools

// Compiling HLO text for the CPU in tests, and checking the result against the evaluator.
#pragma once

#include <random>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/cpu_compiler.h"

namespace xlens::testing {

// A variadic reducer of (value, index) pairs: the larger value's, the first index on a tie, as
// the evaluator's sequential fold keeps it.
constexpr const char* kArgmax = R"(
argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GE
  v = f32[] select(gt, av, bv)
  i = s32[] select(gt, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
)";

// Compiles `text` with the CPU pipeline (a parse error is the status as a compile error is).
inline StatusOr<std::unique_ptr<runtime::Executable>> CompileText(std::string_view text,
                                                                  const runtime::CompileOptions& options = {}) {
  auto module = ParseHloModule(text);
  if (!module.ok()) return module.status();
  return runtime::CompileForCpu(std::move(*module), options);
}

// The thunk listing (XLA's thunk_sequence.txt) of `text` compiled for the CPU: which thunk runs
// each instruction and, for library calls, which kernel and how many parts.
inline StatusOr<std::string> ThunkListing(std::string_view text, const runtime::CompileOptions& options = {}) {
  auto executable = CompileText(text, options);
  if (!executable.ok()) return executable.status();
  return (*executable)->ThunkSequenceText();
}

// Compiles `text` with the CPU pipeline and runs it.
inline StatusOr<Literal> CompileAndRun(std::string_view text, const std::vector<Literal>& arguments,
                                       const runtime::CompileOptions& options = {}) {
  auto executable = CompileText(text, options);
  if (!executable.ok()) return executable.status();
  return (*executable)->Execute(arguments);
}

// Random arguments (seeded) for the entry parameters of `text`.
inline std::vector<Literal> RandomArguments(std::string_view text, uint64_t seed = 1) {
  auto module = ParseHloModule(text);
  std::vector<Literal> arguments;
  if (!module.ok()) return arguments;
  std::mt19937_64 rng(seed);
  for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
    arguments.push_back(MakeRandomLiteral(p->shape(), rng).value());
  }
  return arguments;
}

// The compiled result of `text`, which must equal (within `spec`) what the evaluator computes.
inline Literal ExpectMatchesEvaluator(std::string_view text, std::vector<Literal> arguments = {},
                                      ErrorSpec spec = {0, 0},
                                      const runtime::CompileOptions& options = {}) {
  if (arguments.empty()) arguments = RandomArguments(text);
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok()) return Literal();
  auto expected = EvaluateModule(**module, arguments);
  EXPECT_TRUE(expected.ok()) << expected.status().message();
  auto actual = CompileAndRun(text, arguments, options);
  EXPECT_TRUE(actual.ok()) << actual.status().message();
  if (!expected.ok() || !actual.ok()) return Literal();
  Status match = ExpectLiteralNear(*expected, *actual, spec);
  EXPECT_TRUE(match.ok()) << match.message();
  return std::move(*actual);
}

}  // namespace xlens::testing

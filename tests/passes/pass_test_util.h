// Helpers for pass tests: parse HLO text, run one pass with the verifier and the change check on,
// and check that the rewritten module computes what the original did (the evaluator is the oracle).
#pragma once

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/passes/instrumentation.h"
#include "compiler/passes/pass_pipeline.h"

namespace xlens::testing {

inline std::unique_ptr<HloModule> ParseModuleOrDie(std::string_view text) {
  auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = "test.hlo"});
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

// A copy of `module` (through its text, which round-trips exactly).
inline std::unique_ptr<HloModule> CloneModule(const HloModule& module) {
  return ParseModuleOrDie(PrintModule(module));
}

// Runs `pass` on `module` the way the pipeline does in tests: the verifier after it, and an error
// if it reports "no change" but changed the module.
inline StatusOr<bool> RunPassChecked(HloPass& pass, HloModule& module) {
  uint64_t before = ModuleFingerprint(module);
  ASSIGN_OR_RETURN(bool changed, pass.Run(module));
  if (!changed && ModuleFingerprint(module) != before) {
    return Error(std::string(pass.name()) + " reported no change but changed the module");
  }
  Status verified = VerifyModule(module);
  if (!verified.ok()) {
    return Error("after " + std::string(pass.name()) + ": " + verified.message());
  }
  return changed;
}

// Evaluates both modules on the same random inputs and compares the results.
inline ::testing::AssertionResult SameResults(const HloModule& before, const HloModule& after,
                                              uint64_t seed = 1, ErrorSpec spec = {1e-4, 1e-4}) {
  std::mt19937_64 rng(seed);
  std::vector<Literal> args;
  for (const HloInstruction* p : before.entry_computation()->parameter_instructions()) {
    auto lit = MakeRandomLiteral(p->shape(), rng);
    if (!lit.ok()) return ::testing::AssertionFailure() << lit.status().message();
    args.push_back(std::move(*lit));
  }
  auto expected = EvaluateModule(before, args);
  if (!expected.ok()) return ::testing::AssertionFailure() << "before: " << expected.status().message();
  auto actual = EvaluateModule(after, args);
  if (!actual.ok()) return ::testing::AssertionFailure() << "after: " << actual.status().message();
  Status near = ExpectLiteralNear(*expected, *actual, spec);
  if (!near.ok()) return ::testing::AssertionFailure() << near.message();
  return ::testing::AssertionSuccess();
}

// Parses `text`, runs `pass` on it with RunPassChecked, and checks what every pass test checks:
// the first run reports `expect_change`, the result computes what the original did (when
// `evaluable`), and a second run finds nothing left to do. Returns the rewritten module.
inline std::unique_ptr<HloModule> RunPassOnText(HloPass& pass, std::string_view text,
                                                bool expect_change = true, bool evaluable = true) {
  auto module = ParseModuleOrDie(text);
  if (module == nullptr) return nullptr;
  auto before = CloneModule(*module);
  auto changed = RunPassChecked(pass, *module);
  EXPECT_TRUE(changed.ok()) << changed.status().message();
  if (!changed.ok()) return nullptr;
  EXPECT_EQ(*changed, expect_change) << PrintModule(*module);
  if (evaluable) {
    EXPECT_TRUE(SameResults(*before, *module, 1, ErrorSpec{1e-4, 1e-4}));
  }
  auto again = RunPassChecked(pass, *module);
  EXPECT_TRUE(again.ok() && !*again) << PrintModule(*module);
  return module;
}

// Counts the instructions of the entry computation with `opcode`.
inline int64_t CountOpcode(const HloModule& module, HloOpcode opcode) {
  int64_t n = 0;
  for (const HloInstruction* i : module.entry_computation()->instructions()) n += i->opcode() == opcode;
  return n;
}

// The instruction of the entry computation named `name`, or null.
inline const HloInstruction* FindInstruction(const HloModule& module, std::string_view name) {
  return module.entry_computation()->GetInstructionWithName(name);
}

// The reduces of the entry computation that are still used (or are its root), in its order.
inline std::vector<const HloInstruction*> LiveReduces(const HloModule& module) {
  std::vector<const HloInstruction*> live;
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (i->opcode() == HloOpcode::kReduce && (i->user_count() > 0 || i->IsRoot())) live.push_back(i);
  }
  return live;
}

}  // namespace xlens::testing

// HloReducer: shrinks a module while a test keeps failing, as XLA's hlo_bisect and C-Reduce do.
//
// Each round tries, in a fixed order, candidates that are smaller than the current module:
//   - drop outputs: keep one element of a tuple root;
//   - promote: make an inner instruction the root (a binary search over program order first,
//     which jumps close to the bug in a few tests);
//   - replace an instruction by a parameter, by one of its operands, or by a constant zero,
//     cutting what only fed it
//     (dead instructions and computations are removed, unused parameters dropped);
//   - simplify constants: a constant becomes zeros of its shape;
//   - shrink dimensions: every dimension of one size becomes 1, or half (in the text; the
//     verifier refuses what does not fit).
// A candidate is kept when it verifies and the test still fails on it. Rounds repeat until none
// shrinks the module or the time is up. Deterministic: the same module and test give the same
// steps.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens::tools {

// True while the bug is still there (the test "fails" on `candidate`); an error stops the
// reduction (the test itself is broken).
using ReductionTest = std::function<StatusOr<bool>(const HloModule& candidate)>;

struct ReduceOptions {
  // Stop trying candidates after this many seconds (the best module so far is the result).
  double time_limit_seconds = 300;
  // Told each accepted step and the occasional heartbeat, one line at a time; may be empty.
  std::function<void(const std::string&)> progress;
};

struct ReduceResult {
  std::unique_ptr<HloModule> module;  // the smallest module on which the test still fails
  int64_t initial_instructions = 0;
  int64_t final_instructions = 0;
  int64_t tests = 0;     // candidates tested
  int64_t accepted = 0;  // candidates kept
  bool timed_out = false;
  double seconds = 0;
};

// Instructions in the module, all computations (what "smaller" means).
int64_t CountInstructions(const HloModule& module);

// Reduces `module` (verified). The test must fail on `module` itself: otherwise an error says so.
StatusOr<ReduceResult> ReduceModule(const HloModule& module, const ReductionTest& test,
                                    const ReduceOptions& options);

}  // namespace xlens::tools

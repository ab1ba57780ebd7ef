// HloBisect: finds where the compiler goes wrong on a module, the way a compiler engineer does it
// by hand with --xla_dump_hlo_pass_re and --xla_disable_hlo_passes, but as a search.
//
//  1. The reference: the module as written, on the evaluator.
//  2. The pipeline runs with an instrument that evaluates the module after every pass that
//     changed it, on the same arguments: the first pass after which the result departs from the
//     reference beyond the tolerance is the culprit (kind kPass), with the module before and
//     after it and where the results differ.
//  3. When every pass kept the result, the module is compiled and run. If its result departs:
//     - the kernel: the optimized module is compiled again (no passes) with every kernel's
//       result as an output, and the first kernel, in program order, whose result departs while
//       its operands agree is the wrong one;
//     - the smallest set of passes whose disabling makes the compiled result agree, found by
//       halving the passes that changed the module and then dropping passes one by one (a
//       handful of compilations, not one per subset);
//     - when fusion is in that set, the one fusion decision that matters: a binary search over
//       the fusion pass's fuel for the first N fusions after which the result departs.
//     A wrong kernel is a code generation fault (kCodegen); a compiled result that departs with
//     no kernel to blame, but agrees without some pass, is that pass doing something the
//     evaluator cannot see, such as layouts (kPassInvisible).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/tools/module_runner.h"

namespace xlens::tools {

struct BisectOptions {
  CompileSettings compile;
  ErrorSpec tolerance{1e-3, 1e-3};
  // Skip the compiled run (step 3): only the passes are checked.
  bool passes_only = false;
  // Told what bisect is doing, one line at a time (for stderr); may be empty.
  std::function<void(const std::string&)> progress;
  // Every evaluation's limits: its cancel flag (a watchdog's) and its largest instruction.
  EvaluatorOptions evaluator;
};

enum class CulpritKind {
  kNone,           // the compiled result agrees with the evaluator
  kPass,           // a pass changed what the module computes
  kCodegen,        // a kernel computes wrong values from right operands
  kPassInvisible,  // agrees once these passes are disabled, yet no pass changed the result
  kCompileError,   // the pipeline or the compilation failed
  kUnexplained,    // departs, but no pass set or kernel explains it
};
std::string_view CulpritKindName(CulpritKind kind);

struct BisectResult {
  CulpritKind kind = CulpritKind::kNone;
  // kPass: the culprit pass, its pipeline and step (as in dump file names).
  std::string pass;
  std::string pipeline;
  int64_t step = -1;
  // Where the results differ and by how much (the comparison's message), and the largest errors.
  std::string difference;
  LiteralDifference errors;
  // The module before and after the culprit (kPass), or optimized with and without the passes
  // in `disabled` (kCodegen, kPassInvisible).
  std::string before_text;
  std::string after_text;
  // kCodegen: the wrong kernel's instruction, its text, and where its result differs.
  std::string kernel;
  std::string kernel_text;
  std::string kernel_difference;
  // The lines of the user's program the wrong kernel was made from, innermost first (StackText
  // of its KernelStack); empty when its metadata does not say.
  std::string kernel_source;
  // The smallest set of passes found whose disabling makes the compiled result agree.
  std::vector<std::string> disabled;
  // When the fusion pass is in that set: the one fusion decision after which the result
  // departs, found by a binary search over the pass's fuel (at most N fusions), and that N.
  std::string fusion_decision;
  int64_t fusion_fuel = -1;
  // kCompileError: the error.
  std::string error;
  // Work done, for the report.
  int64_t evaluations = 0;
  int64_t compilations = 0;
  // One line that says what happened.
  std::string summary;
};

// Bisects `module` (verified) on `arguments`. An error only when the module cannot be evaluated
// at all (the reference is needed for everything else).
StatusOr<BisectResult> BisectModule(const HloModule& module, std::span<const Literal> arguments,
                                    const BisectOptions& options);

}  // namespace xlens::tools

// Runs an HLO module on the GPU simulator and on the reference evaluator, for the tests of what
// the GPU backend computes (complex arithmetic, sort, control flow).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_device.h"

namespace xlens::runtime::testing {

struct BothResults {
  Literal expected;  // the evaluator's
  Literal actual;    // the GPU simulator's
  // While, conditional and call instructions left in the compiled module (the optimizer may
  // have removed some), and the launches the run made.
  int64_t control_flow = 0;
  int64_t launches = 0;
};

// Both results of `text` on `arguments`, or the first error (parse, evaluation, compilation,
// execution) with where it came from.
inline StatusOr<BothResults> RunOnSimulatorAndEvaluator(const std::string& text,
                                                        const std::vector<Literal>& arguments,
                                                        GpuSimDevice& device,
                                                        const GpuCompileOptions& options = {}) {
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> module,
                   ParseHloModule(text, ParseOptions{.verify = true, .filename = "test"}));
  ASSIGN_OR_RETURN(Literal expected, EvaluateModule(*module, arguments));
  ASSIGN_OR_RETURN(std::unique_ptr<GpuExecutable> exe,
                   GpuExecutable::Create(std::move(module), options, device));
  ASSIGN_OR_RETURN(Literal actual, exe->Execute(arguments));
  BothResults both{std::move(expected), std::move(actual)};
  for (const HloComputation* c : exe->module().computations()) {
    for (const HloInstruction* hlo : c->instructions()) {
      const HloOpcode op = hlo->opcode();
      both.control_flow += op == HloOpcode::kWhile || op == HloOpcode::kConditional || op == HloOpcode::kCall;
    }
  }
  both.launches = static_cast<int64_t>(exe->last_run_launches().size());
  return both;
}

}  // namespace xlens::runtime::testing

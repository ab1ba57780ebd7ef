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
};

// Both results of `text` on `arguments`, or the first error (parse, evaluation, compilation,
// execution) with where it came from.
inline StatusOr<BothResults> RunOnSimulatorAndEvaluator(const std::string& text,
                                                        const std::vector<Literal>& arguments,
                                                        GpuSimDevice& device) {
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> module,
                   ParseHloModule(text, ParseOptions{.verify = true, .filename = "test"}));
  ASSIGN_OR_RETURN(Literal expected, EvaluateModule(*module, arguments));
  ASSIGN_OR_RETURN(std::unique_ptr<GpuExecutable> exe,
                   GpuExecutable::Create(std::move(module), {}, device));
  ASSIGN_OR_RETURN(Literal actual, exe->Execute(arguments));
  return BothResults{std::move(expected), std::move(actual)};
}

}  // namespace xlens::runtime::testing

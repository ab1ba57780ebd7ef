// The two HLO pipelines, named and ordered after XLA's CPU and GPU compilers:
//
//   optimization            call-inliner, dot-decomposer, conv-canonicalization (CPU),
//     simplification        (fixed point) algebraic-simplifier, reshape-mover,
//                           constant-folding, tuple-simplifier, dce
//                           cse, dce
//   layout-assignment       layout-assignment
//   post-layout-assignment  (fixed point) algebraic-simplifier, cse, dce;
//                           reduce-precision-insertion
//   fusion                  fusion, multi-output-fusion, horizontal-loop-fusion (GPU), dce
//   copy-insertion          copy-insertion
//
// Buffer assignment runs after the pipeline on the result (it is an analysis, not a pass).
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/passes/fusion_utils.h"
#include "compiler/passes/pass_pipeline.h"

namespace xlens {

enum class Backend { kCpu, kGpu };

// --xla_reduce_precision=E,M[:opcode,...]: what reduce-precision-insertion rounds, if anything.
struct ReducePrecisionConfig {
  int64_t exponent_bits = 0;
  int64_t mantissa_bits = 0;
  std::set<HloOpcode> opcodes;  // empty: every instruction with a floating-point result
};
// Parses the flag's value; an error says what was expected.
StatusOr<ReducePrecisionConfig> ParseReducePrecisionFlag(std::string_view value);
std::string_view BackendName(Backend backend);  // "cpu", "gpu"

// The pipeline of `backend`. The fusion passes it holds are reachable through `fusion_passes`
// (when not null) so that their decisions can be shown after a run.
std::unique_ptr<HloPassPipeline> MakeHloPipeline(
    Backend backend, std::vector<const HloPass*>* fusion_passes = nullptr,
    const std::optional<ReducePrecisionConfig>& reduce_precision = std::nullopt);

// Every pass name either pipeline knows, sorted (for --list-passes and flag checking).
std::vector<std::string> KnownPassNames();

// Checks names given to --xla_disable_hlo_passes / --xla_enable_hlo_passes_only / --passes: an
// unknown one is an error that names it, the closest known one, and lists them all.
Status CheckPassNames(const std::vector<std::string>& names, std::string_view flag);

// The decisions of the fusion passes among `passes`, in the order they ran.
std::vector<FusionDecision> FusionDecisionsOf(const std::vector<const HloPass*>& passes);

}  // namespace xlens

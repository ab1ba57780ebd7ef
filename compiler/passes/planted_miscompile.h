// planted-miscompile: a test-only pass that makes the module compute something else, so that the
// tools which hunt for a broken pass (`xlens bisect`, `xlens reduce`) can be tested against a bug
// whose place is known. It adds 1 to the first numeric array the entry returns (a `not` for a
// pred), once per compilation: inside a fixed-point pipeline it still fires once, so the fixed
// point converges. It reports a change only when it fired.
//
// It never runs unless a hidden flag asks for it (--xla_test_miscompile_after_pass=PASS inserts
// it right after PASS); PlantedBugs carries that flag and its code-generation twin
// (--xla_test_miscompile_kernel) from the command line to the compilers.
#pragma once

#include <memory>
#include <string>

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class HloPassPipeline;

// The test-only faults a compilation was asked to plant; empty strings plant nothing.
struct PlantedBugs {
  // Insert planted-miscompile right after the first pass of this name.
  std::string miscompile_after_pass;
  // The kernel of the HLO instruction of this name (or of this kernel function name) stores
  // wrong values: code generation adds 1 to everything it writes to memory.
  std::string miscompile_kernel;
  bool operator==(const PlantedBugs&) const = default;
};

class PlantedMiscompile : public HloPass {
 public:
  static constexpr std::string_view kName = "planted-miscompile";
  std::string_view name() const override { return kName; }
  StatusOr<bool> Run(HloModule& module) override;

 private:
  bool fired_ = false;
};

// Inserts a PlantedMiscompile right after the first leaf pass named `after` in `pipeline`
// (nested pipelines and fixed points searched in order). An error when no pass has that name.
Status PlantMiscompileAfter(HloPassPipeline& pipeline, std::string_view after);

}  // namespace xlens

// hlo-dce: removes instructions nothing uses (that are not roots, parameters or side-effecting),
// and computations nothing calls. Reports a change when it removed anything.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class HloDce : public HloPass {
 public:
  std::string_view name() const override { return "dce"; }
  StatusOr<bool> Run(HloModule& module) override;
};

// Whether removing `instruction` when it has no users could change what the module does.
bool HasSideEffect(const HloInstruction& instruction);

}  // namespace xlens

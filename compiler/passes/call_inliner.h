// call-inliner: replaces every `call` by a copy of the computation it calls: the callee's
// instructions are cloned into the caller (keeping their own metadata and control dependencies),
// its parameters become the call's operands, and the call's users use the cloned root. Calls the
// clones bring along are inlined too, so no call is left. Composite calls (is_composite=true) are
// inlined as well, as XLA's CallInliner does by default; construct with preserve_composites to
// keep them. The callees stay in the module, unused, for dce to remove.
// It leaves alone calls in fusion computations, calls with control dependencies of their own, and
// calls into another execution thread. Reports a change when it inlined anything.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class CallInliner : public HloPass {
 public:
  explicit CallInliner(bool preserve_composites = false)
      : preserve_composites_(preserve_composites) {}
  std::string_view name() const override { return "call-inliner"; }
  StatusOr<bool> Run(HloModule& module) override;

 private:
  bool Inlinable(const HloInstruction& call) const;

  bool preserve_composites_;
};

}  // namespace xlens

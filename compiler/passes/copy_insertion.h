// copy-insertion: adds the copies (and the control dependencies that order them) that make the
// buffer sharing buffer assignment relies on safe. The model it prepares for:
//  - the entry's outputs are buffers of their own: an output element that is an entry parameter
//    (or an element of one) or a constant is copied, unless the header's input_output_alias lets
//    that output alias that parameter; an array that appears twice in the output is copied the
//    second time;
//  - a while's init, its body's parameter and root, its condition's parameter and its result are
//    one buffer per element. An init element that is a parameter or a constant, that has another
//    user, or that appears twice in the init is copied, so the loop owns its state. In the body,
//    root element i is written into state element i: an element that passes state element i
//    through needs nothing; one that is another state element j is copied twice (into a scratch
//    value, then into slot i, so swaps work); a constant or a repeated value is copied once; a
//    computed value writes the slot in place only when every other reader of state element i runs
//    before it (an elementwise op may read the slot it writes), else it is copied. Every write into
//    slot i gets control dependencies from the readers of state element i, so no schedule can
//    overwrite a value that is still to be read. This is conservative where XLA's liveness-based
//    analysis would prove some of these copies unnecessary;
//  - a conditional's branches and a call's callee write their own result buffer, so a root element
//    that is a parameter (or an element of one), a constant or repeated is copied.
// Fused computations are never touched. Reports a change when it added a copy or a dependency.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class CopyInsertion : public HloPass {
 public:
  std::string_view name() const override { return "copy-insertion"; }
  StatusOr<bool> Run(HloModule& module) override;
};

// One entry of the header's input_output_alias={ {OUT}: (PARAM, {INDEX}, kind), ... }.
struct InputOutputAlias {
  std::vector<int64_t> output_index;
  int64_t parameter = 0;
  std::vector<int64_t> parameter_index;
};

// The aliases the module's header declares (none when it has no input_output_alias).
StatusOr<std::vector<InputOutputAlias>> ParseInputOutputAliases(const HloModule& module);

}  // namespace xlens

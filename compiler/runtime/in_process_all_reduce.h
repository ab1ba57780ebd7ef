// The CPU runtime's all-reduce between simulated devices of one process, on their buffers: each
// member brings the addresses of its operand and result buffers, and reduces one slice of the
// elements for every member, folding all members' operands in rank order (as the reference
// evaluator does, so each element has the same bits on every device and as evaluated) and writing
// the sum into every member's result. Nothing is copied into values for the meeting and nothing is
// allocated per run but the few addresses, where the evaluator's way copies each operand out and
// each result back into fresh memory (page-faulted anew for large arrays).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/hlo/collective_rendezvous.h"
#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens::runtime {

// Whether `all_reduce` (kAllReduce) runs here on `device`: arrays in the default layout (as many
// results as operands), a to_apply of one elementwise instruction of its parameters, and a
// rendezvous in this process. Otherwise the thunk evaluates it the evaluator's way.
bool CanAllReduceInPlace(const HloInstruction& all_reduce, const DeviceCollectives* device);

// Runs `all_reduce` on `device` (CanAllReduceInPlace): operands[k] and results[k] are the
// buffers of its k-th operand and result. Returns false, having done nothing, when the members'
// buffers overlap in a way a slice-wise reduction would corrupt (each member then falls back to
// the evaluator's way: all decide alike, from the same addresses).
StatusOr<bool> AllReduceInPlace(const HloInstruction& all_reduce, DeviceCollectives& device,
                                const std::vector<const char*>& operands,
                                const std::vector<char*>& results);

}  // namespace xlens::runtime

// The CPU runtime's all-reduce, reduce-scatter and all-gather between simulated devices of one
// process, on their buffers: each member brings the addresses of its operand and result
// buffers. An all-reduce's members each fold one slice of the elements for every member, in
// rank order (as the reference evaluator folds them, so each element has the same bits on every
// device and as evaluated), writing it into every member's result; a reduce-scatter's each fold
// their own piece the same way, an all-gather's each copy every member's operand into their own
// result. Nothing is copied into values for the meeting and nothing is allocated per run but
// the few addresses, where the evaluator's way copies each operand out and each result back
// into fresh memory (page-faulted anew for large arrays).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/hlo/collective_rendezvous.h"
#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens::runtime {

// Whether `collective` (all-reduce, reduce-scatter or all-gather) may run here on `device`:
// arrays in the default layout (as many results as operands), a to_apply of one elementwise
// instruction of its parameters, and members all in this process (under --distributed=mpi too,
// where its groups stay within one process). Otherwise the thunk evaluates it the evaluator's way.
bool CanRunInPlace(const HloInstruction& collective, const DeviceCollectives* device);

// Runs `collective` on `device` (CanRunInPlace): operands[k] and results[k] are the buffers of
// its k-th operand and result. Returns false, having met no one, when the pieces do not fit the
// group (the evaluator's way then says why), and false after a meeting, having written nothing,
// when the members' buffers overlap in a way that working on them would corrupt (each member
// then falls back to the evaluator's way: all decide alike, from the same addresses).
StatusOr<bool> RunInPlace(const HloInstruction& collective, DeviceCollectives& device,
                          const std::vector<const char*>& operands,
                          const std::vector<char*>& results);

}  // namespace xlens::runtime

// Collectives in the CPU runtime: replica-id, partition-id, all-reduce, all-gather,
// reduce-scatter, all-to-all, collective-permute, collective-broadcast and the async -start/-done
// pairs, between the executables of several simulated devices in one process. The thunk reads
// its operands out of the frame, meets the other devices at the rendezvous of its device
// (ExecuteContext::device, collective_rendezvous.h) and computes its result as the reference
// evaluator does, so the compiled program and the evaluator agree by construction on who meets
// and what each device gets; without a device it is the only one (every group is itself). An
// all-reduce, reduce-scatter or all-gather between devices of this process works on their
// buffers instead, with the same bits (in_process_all_reduce.h).
#pragma once

#include <string>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

class CollectiveThunk : public Thunk {
 public:
  // `operand_slots` holds the array leaves of each operand, depth-first; `output_slots` those of
  // the result. `hlo` must outlive the thunk (the executable's module owns it).
  CollectiveThunk(std::string hlo_name, const HloInstruction& hlo,
                  std::vector<std::vector<int64_t>> operand_slots, std::vector<int64_t> output_slots);
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;
  // While a trace is recorded, each execution is a span of category "collective" with the
  // thunk's own arguments and what this device brought to the meeting: device, group (the
  // members' ids, "0,1,2,3"), rank, bytes, arrived_ns (from the span's start to its arrival,
  // after reading its operands). profiler/collective_timeline.h joins the meetings from these.
  bool RecordsOwnSpan() const override { return true; }

 private:
  // The span of one execution that started at `start_ns` and arrived at `arrived_ns`.
  void RecordExecution(const ExecuteContext& context, int64_t start_ns, int64_t arrived_ns,
                       int64_t bytes) const;

  const HloInstruction* hlo_;
  std::vector<std::vector<int64_t>> operand_slots_;
  std::vector<int64_t> output_slots_;
};

}  // namespace xlens::runtime

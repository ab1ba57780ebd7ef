#include "compiler/runtime/collective_thunk.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/collective_rendezvous.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_leaves.h"
#include "compiler/runtime/executable.h"
#include "compiler/runtime/in_process_all_reduce.h"
#include "profiler/host_tracer.h"

namespace xlens::runtime {

CollectiveThunk::CollectiveThunk(std::string hlo_name, const HloInstruction& hlo,
                                 std::vector<std::vector<int64_t>> operand_slots,
                                 std::vector<int64_t> output_slots)
    : Thunk(std::move(hlo_name)),
      hlo_(&hlo),
      operand_slots_(std::move(operand_slots)),
      output_slots_(std::move(output_slots)) {}

Status CollectiveThunk::Execute(char** frame, ExecuteContext& context) const {
  const bool tracing = profiler::TracingEnabled();
  const int64_t start_ns = tracing ? profiler::NowNs() : 0;
  // Between processes, a collective the rendezvous moves itself meets on the buffers too
  // (typed MPI calls; distributed_rendezvous.h).
  CollectiveRendezvous* rendezvous = context.device != nullptr ? context.device->rendezvous() : nullptr;
  const bool in_place = CanRunInPlace(*hlo_, context.device);
  const bool on_buffers = !in_place && rendezvous != nullptr && rendezvous->CanMeetOnBuffers(*hlo_);
  if (in_place || on_buffers) {
    std::vector<const char*> inputs;
    std::vector<char*> outputs;
    int64_t bytes = 0;
    for (size_t i = 0; i < operand_slots_.size() && i < output_slots_.size(); ++i) {
      if (operand_slots_[i].size() != 1 || operand_slots_[i][0] < 0 || output_slots_[i] < 0) break;
      inputs.push_back(frame[operand_slots_[i][0]]);
      outputs.push_back(frame[output_slots_[i]]);
      bytes += shape_util::ByteSizeOf(hlo_->operand(static_cast<int64_t>(i))->shape());
    }
    if (inputs.size() == operand_slots_.size() && outputs.size() == output_slots_.size()) {
      const int64_t arrived_ns = tracing ? profiler::NowNs() : 0;
      if (on_buffers) {
        Status met = rendezvous->MeetOnBuffers(*hlo_, context.device->NextOccurrence(*hlo_),
                                               context.device->device_id(), inputs, outputs);
        if (tracing) RecordExecution(context, start_ns, arrived_ns, bytes);
        // Worded as the evaluator's way words its failures.
        return met.ok() ? met : met.WithContext("evaluating %" + hlo_->name());
      }
      StatusOr<bool> done = RunInPlace(*hlo_, *context.device, inputs, outputs);
      if (!done.ok() || *done) {
        if (tracing) RecordExecution(context, start_ns, arrived_ns, bytes);
        return done.status();
      }
      // Not run here (see RunInPlace): the evaluator's way below.
    }
  }
  std::vector<Literal> operands;
  for (size_t i = 0; i < operand_slots_.size(); ++i) {
    Literal operand(hlo_->operand(static_cast<int64_t>(i))->shape());
    size_t leaf = 0;
    Status read = OkStatus();
    ForEachArrayLeaf(operand, [&](Literal& array) {
      if (leaf >= operand_slots_[i].size() || operand_slots_[i][leaf] < 0) {
        read = Error(fmt::format("operand {} has no buffer for leaf {}", i, leaf));
        return;
      }
      CopyFromLayout(frame[operand_slots_[i][leaf++]], array.shape(), array.untyped_data());
    });
    RETURN_IF_ERROR(read);
    operands.push_back(std::move(operand));
  }
  std::vector<const Literal*> pointers;
  for (const Literal& operand : operands) pointers.push_back(&operand);
  EvaluatorOptions options;
  options.device = context.device;
  options.max_work = 0;  // the module was checked when it was compiled
  int64_t bytes = 0;
  for (const Literal& operand : operands) ForEachArrayLeaf(operand, [&](const Literal& array) {
    bytes += static_cast<int64_t>(array.size_bytes());
  });
  const int64_t arrived_ns = tracing ? profiler::NowNs() : 0;
  StatusOr<Literal> evaluated = EvaluateInstruction(*hlo_, pointers, options);
  if (!evaluated.ok()) {
    if (tracing) RecordExecution(context, start_ns, arrived_ns, bytes);
    return evaluated.status();
  }
  Literal result = std::move(*evaluated);
  // Written as the buffers lay out the instruction's leaves (the literal is row-major).
  std::vector<Shape> leaf_shapes;
  hlo_->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
    if (s.IsArray()) leaf_shapes.push_back(s);
  });
  size_t leaf = 0;
  Status written = OkStatus();
  ForEachArrayLeaf(result, [&](const Literal& array) {
    if (leaf >= output_slots_.size() || leaf >= leaf_shapes.size() || output_slots_[leaf] < 0) {
      written = Error(fmt::format("the result has no buffer for leaf {}", leaf));
      return;
    }
    CopyToLayout(array.untyped_data(), leaf_shapes[leaf], frame[output_slots_[leaf]]);
    ++leaf;
  });
  if (tracing) RecordExecution(context, start_ns, arrived_ns, bytes);
  return written;
}

void CollectiveThunk::RecordExecution(const ExecuteContext& context, int64_t start_ns, int64_t arrived_ns,
                                      int64_t bytes) const {
  std::vector<profiler::TraceArg> args;
  if (trace_info().span != nullptr) args = trace_info().span->args;
  // The ids only say which instruction ran: they meet no one.
  const HloOpcode opcode = hlo_->opcode();
  const bool meets = opcode != HloOpcode::kReplicaId && opcode != HloOpcode::kPartitionId &&
                     opcode != HloOpcode::kAllReduceDone && opcode != HloOpcode::kAllGatherDone &&
                     opcode != HloOpcode::kCollectivePermuteDone;
  if (!meets) {
    profiler::RecordSpan(hlo_name(), profiler::category::kThunk, start_ns, profiler::NowNs(), args);
    return;
  }
  const DeviceTopology single;
  const DeviceTopology& topology = context.device != nullptr ? context.device->topology() : single;
  const int64_t device = context.device != nullptr ? context.device->device_id() : 0;
  std::vector<int64_t> group{device};
  if (auto groups = ParticipatingDeviceGroups(*hlo_, topology); groups.ok()) {
    for (const std::vector<int64_t>& g : *groups) {
      if (std::find(g.begin(), g.end(), device) != g.end()) group = g;
    }
  }
  const int64_t rank = std::find(group.begin(), group.end(), device) - group.begin();
  args.push_back({"device", device});
  args.push_back({"group", fmt::format("{}", fmt::join(group, ","))});
  args.push_back({"rank", rank});
  args.push_back({"bytes", bytes});
  args.push_back({"arrived_ns", arrived_ns - start_ns});
  profiler::RecordSpan(hlo_name(), profiler::category::kCollective, start_ns, profiler::NowNs(), args);
}

std::string CollectiveThunk::ToString(int indent) const {
  return fmt::format("{:{}}collective {} ({})\n", "", indent, hlo_name(),
                     HloOpcodeString(hlo_->opcode()));
}

}  // namespace xlens::runtime

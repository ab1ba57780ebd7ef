#include "compiler/runtime/thunk.h"

#include <cstring>

#include <fmt/format.h>
#include <llvm/ADT/SmallVector.h>

namespace xlens::runtime {

Status Thunk::ExecuteTraced(char** frame, ExecuteContext& context) const {
  if (RecordsOwnSpan()) return Execute(frame, context);
  if (trace_info_.span == nullptr) {
    profiler::TraceSpan span(hlo_name_, profiler::category::kThunk);
    return Execute(frame, context);
  }
  const int64_t start = profiler::NowNs();
  Status status = Execute(frame, context);
  profiler::RecordSpan(trace_info_.span, start, profiler::NowNs());
  return status;
}

Status RunThunks(const ThunkSequence& thunks, char** frame, ExecuteContext& context) {
  for (const auto& thunk : thunks) {
    Status status = thunk->Run(frame, context);
    if (!status.ok()) return status.WithContext(thunk->hlo_name());
  }
  return OkStatus();
}

std::string ThunkSequenceToString(const ThunkSequence& thunks, int indent) {
  std::string out;
  for (const auto& thunk : thunks) out += thunk->ToString(indent);
  return out;
}

KernelThunk::KernelThunk(std::string hlo_name, codegen::KernelSpec spec,
                         std::vector<PhaseFn> phases, std::vector<int64_t> operand_slots,
                         std::vector<int64_t> output_slots)
    : Thunk(std::move(hlo_name)), spec_(std::move(spec)), phases_(std::move(phases)) {
  slots_ = std::move(operand_slots);
  slots_.insert(slots_.end(), output_slots.begin(), output_slots.end());
  table_.resize(slots_.size() + 1);
}

Status KernelThunk::Execute(char** frame, ExecuteContext& context) const {
  for (size_t i = 0; i < slots_.size(); ++i) table_[i] = frame[slots_[i]];
  table_[slots_.size()] = context.scratch;
  void** table = table_.data();
  for (size_t p = 0; p < phases_.size(); ++p) {
    const codegen::KernelPhase& phase = spec_.phases[p];
    PhaseFn fn = phases_[p];
    if (phase.sequential || context.pool == nullptr) {
      fn(table, 0, phase.tasks);
      continue;
    }
    // Chunks of at least ~64K elements' worth of work (or the phase's own least), so small
    // kernels run inline.
    const int64_t chunk = phase.chunk_work > 0 ? phase.chunk_work : int64_t{1} << 16;
    const int64_t grain = std::max<int64_t>(1, chunk / std::max<int64_t>(1, phase.work_per_task));
    context.pool->ParallelFor(phase.tasks, grain, [&](int64_t begin, int64_t end) {
      fn(table, begin, end);
    });
  }
  return OkStatus();
}

void KernelThunk::RunTasks(char** frame, char* scratch, int64_t begin, int64_t end) const {
  // A table of its own (parts on other threads run the same kernel at the same time), on the
  // stack: it is built once a part.
  llvm::SmallVector<void*, 16> table(slots_.size() + 1);
  for (size_t i = 0; i < slots_.size(); ++i) table[i] = frame[slots_[i]];
  table[slots_.size()] = scratch;
  phases_.front()(table.data(), begin, end);
}

std::string KernelThunk::ToString(int indent) const {
  std::string phases;
  for (const auto& p : spec_.phases) {
    if (!phases.empty()) phases += ", ";
    phases += fmt::format("{} x{}{}", p.function_name, p.tasks, p.sequential ? " sequential" : "");
  }
  return fmt::format("{:{}}kernel {} [{}] buffers {}+{}{}\n", "", indent, hlo_name(), phases,
                     spec_.operand_leaves, spec_.output_leaves,
                     spec_.scratch_bytes ? fmt::format(" scratch {}B", spec_.scratch_bytes) : "");
}

Status CopyThunk::Execute(char** frame, ExecuteContext&) const {
  if (frame[source_] != frame[destination_]) std::memmove(frame[destination_], frame[source_], bytes_);
  return OkStatus();
}

std::string CopyThunk::ToString(int indent) const {
  return fmt::format("{:{}}copy {} ({} bytes)\n", "", indent, hlo_name(), bytes_);
}

}  // namespace xlens::runtime

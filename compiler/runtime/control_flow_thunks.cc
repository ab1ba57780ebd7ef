#include "compiler/runtime/control_flow_thunks.h"

#include <cstring>

#include <fmt/format.h>

namespace xlens::runtime {

Status NestedComputation::Run(const std::vector<char*>& parameters, ExecuteContext& context) const {
  const auto& slots = plan.parameter_slots();
  for (size_t i = 0; i < slots.size() && i < parameters.size(); ++i) frame[slots[i]] = parameters[i];
  return RunThunks(thunks, frame.data(), context);
}

WhileThunk::WhileThunk(std::string hlo_name, NestedComputation condition, NestedComputation body,
                       std::vector<int64_t> init_slots, std::vector<int64_t> state_slots,
                       std::vector<int64_t> sizes)
    : Thunk(std::move(hlo_name)), condition_(std::move(condition)), body_(std::move(body)),
      init_slots_(std::move(init_slots)), state_slots_(std::move(state_slots)),
      sizes_(std::move(sizes)) {
  state_.resize(state_slots_.size());
  for (int64_t size : sizes_) staging_.emplace_back(static_cast<size_t>(size));
}

Status WhileThunk::Execute(char** frame, ExecuteContext& context) const {
  for (size_t i = 0; i < state_slots_.size(); ++i) {
    state_[i] = frame[state_slots_[i]];
    if (frame[init_slots_[i]] != state_[i]) std::memmove(state_[i], frame[init_slots_[i]], sizes_[i]);
  }
  while (true) {
    RETURN_IF_ERROR(condition_.Run(state_, context));
    if (*condition_.root(0) == 0) break;
    RETURN_IF_ERROR(body_.Run(state_, context));
    // The body's results become the next state. A result may be another leaf's state buffer
    // (a body that swaps two values), so results are staged before any state is overwritten.
    bool crossed = false;
    for (size_t i = 0; i < state_.size(); ++i) {
      for (size_t j = 0; j < state_.size(); ++j) crossed |= i != j && body_.root(i) == state_[j];
    }
    if (crossed) {
      for (size_t i = 0; i < state_.size(); ++i) std::memcpy(staging_[i].data(), body_.root(i), sizes_[i]);
      for (size_t i = 0; i < state_.size(); ++i) std::memcpy(state_[i], staging_[i].data(), sizes_[i]);
    } else {
      for (size_t i = 0; i < state_.size(); ++i) {
        if (body_.root(i) != state_[i]) std::memcpy(state_[i], body_.root(i), sizes_[i]);
      }
    }
  }
  return OkStatus();
}

std::string WhileThunk::ToString(int indent) const {
  return fmt::format("{:{}}while {}\n{:{}}condition {}:\n{}{:{}}body {}:\n{}", "", indent,
                     hlo_name(), "", indent + 2, condition_.plan.computation()->name(),
                     ThunkSequenceToString(condition_.thunks, indent + 4), "", indent + 2,
                     body_.plan.computation()->name(),
                     ThunkSequenceToString(body_.thunks, indent + 4));
}

ConditionalThunk::ConditionalThunk(std::string hlo_name, int64_t index_slot, bool index_is_pred,
                                   std::vector<NestedComputation> branches,
                                   std::vector<std::vector<int64_t>> branch_operand_slots,
                                   std::vector<int64_t> output_slots, std::vector<int64_t> sizes)
    : Thunk(std::move(hlo_name)), index_slot_(index_slot), index_is_pred_(index_is_pred),
      branches_(std::move(branches)), branch_operand_slots_(std::move(branch_operand_slots)),
      output_slots_(std::move(output_slots)), sizes_(std::move(sizes)) {
  size_t most = 0;
  for (const auto& slots : branch_operand_slots_) most = std::max(most, slots.size());
  parameters_.resize(most);
}

Status ConditionalThunk::Execute(char** frame, ExecuteContext& context) const {
  int64_t branch;
  if (index_is_pred_) {
    branch = *frame[index_slot_] != 0 ? 0 : 1;  // {true_computation, false_computation}
  } else {
    int32_t index;
    std::memcpy(&index, frame[index_slot_], 4);
    const int64_t n = static_cast<int64_t>(branches_.size());
    branch = index < 0 || index >= n ? n - 1 : index;  // out of range runs the last branch
  }
  const auto& operands = branch_operand_slots_[branch];
  parameters_.resize(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) parameters_[i] = frame[operands[i]];
  RETURN_IF_ERROR(branches_[branch].Run(parameters_, context));
  for (size_t i = 0; i < output_slots_.size(); ++i) {
    char* result = branches_[branch].root(i);
    if (result != frame[output_slots_[i]]) std::memmove(frame[output_slots_[i]], result, sizes_[i]);
  }
  return OkStatus();
}

std::string ConditionalThunk::ToString(int indent) const {
  std::string out = fmt::format("{:{}}conditional {}\n", "", indent, hlo_name());
  for (size_t i = 0; i < branches_.size(); ++i) {
    out += fmt::format("{:{}}branch {} {}:\n{}", "", indent + 2, i,
                       branches_[i].plan.computation()->name(),
                       ThunkSequenceToString(branches_[i].thunks, indent + 4));
  }
  return out;
}

CallThunk::CallThunk(std::string hlo_name, NestedComputation callee,
                     std::vector<int64_t> operand_slots, std::vector<int64_t> output_slots,
                     std::vector<int64_t> sizes)
    : Thunk(std::move(hlo_name)), callee_(std::move(callee)),
      operand_slots_(std::move(operand_slots)), output_slots_(std::move(output_slots)),
      sizes_(std::move(sizes)) {
  parameters_.resize(operand_slots_.size());
}

Status CallThunk::Execute(char** frame, ExecuteContext& context) const {
  for (size_t i = 0; i < operand_slots_.size(); ++i) parameters_[i] = frame[operand_slots_[i]];
  RETURN_IF_ERROR(callee_.Run(parameters_, context));
  for (size_t i = 0; i < output_slots_.size(); ++i) {
    char* result = callee_.root(i);
    if (result != frame[output_slots_[i]]) std::memmove(frame[output_slots_[i]], result, sizes_[i]);
  }
  return OkStatus();
}

std::string CallThunk::ToString(int indent) const {
  return fmt::format("{:{}}call {} {}:\n{}", "", indent, hlo_name(),
                     callee_.plan.computation()->name(),
                     ThunkSequenceToString(callee_.thunks, indent + 2));
}

}  // namespace xlens::runtime

// while, conditional and call run as control flow in the runtime: their computations are thunk
// sequences over frames of their own (see frame_plan.h), started with their parameter slots
// pointing at the caller's buffers.
#pragma once

#include <vector>

#include "compiler/runtime/frame_plan.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

struct NestedComputation {
  FramePlan plan;
  ThunkSequence thunks;
  // Slot pointers into the arena, filled when the executable is built; parameter slots are set
  // by each Run.
  mutable std::vector<char*> frame;

  Status Run(const std::vector<char*>& parameters, ExecuteContext& context) const;
  char* root(size_t leaf) const { return frame[plan.root_slots()[leaf]]; }
};

class WhileThunk : public Thunk {
 public:
  WhileThunk(std::string hlo_name, NestedComputation condition, NestedComputation body,
             std::vector<int64_t> init_slots, std::vector<int64_t> state_slots,
             std::vector<int64_t> sizes);
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

 private:
  NestedComputation condition_, body_;
  std::vector<int64_t> init_slots_, state_slots_, sizes_;
  mutable std::vector<char*> state_;
  mutable std::vector<std::vector<char>> staging_;
};

class ConditionalThunk : public Thunk {
 public:
  ConditionalThunk(std::string hlo_name, int64_t index_slot, bool index_is_pred,
                   std::vector<NestedComputation> branches,
                   std::vector<std::vector<int64_t>> branch_operand_slots,
                   std::vector<int64_t> output_slots, std::vector<int64_t> sizes);
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

 private:
  int64_t index_slot_;
  bool index_is_pred_;
  std::vector<NestedComputation> branches_;
  std::vector<std::vector<int64_t>> branch_operand_slots_;
  std::vector<int64_t> output_slots_, sizes_;
  mutable std::vector<char*> parameters_;
};

// call: one computation on the operands, its root copied into the call's buffers.
class CallThunk : public Thunk {
 public:
  CallThunk(std::string hlo_name, NestedComputation callee, std::vector<int64_t> operand_slots,
            std::vector<int64_t> output_slots, std::vector<int64_t> sizes);
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

 private:
  NestedComputation callee_;
  std::vector<int64_t> operand_slots_, output_slots_, sizes_;
  mutable std::vector<char*> parameters_;
};

}  // namespace xlens::runtime

// dynamic-update-slice as a copy of the update into its place, not a kernel over the whole
// result: a loop that writes one row of a buffer per step (a TensorList's SetItem, a scan's
// output) costs the row, not the buffer, when buffer assignment gives the result the buffer of
// operand 0 (the loop state updated in place); otherwise operand 0 is copied first. The start
// indices are clamped as XLA clamps them (so the update lies inside the operand). Row-major
// arrays only: other layouts keep the generated kernel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

class DynamicUpdateSliceThunk : public Thunk {
 public:
  // Null when the instruction is not one this thunk runs (a layout other than row-major, start
  // indices of another type than s32/s64).
  static std::unique_ptr<DynamicUpdateSliceThunk> TryCreate(std::string hlo_name,
                                                            const HloInstruction& dus,
                                                            std::vector<int64_t> operand_slots,
                                                            int64_t output_slot);
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;

 private:
  using Thunk::Thunk;
  std::vector<int64_t> dims_, update_dims_;
  int64_t element_bytes_ = 0;
  bool s64_indices_ = false;
  std::vector<int64_t> slots_;  // operand, update, start indices
  int64_t output_slot_ = -1;
};

}  // namespace xlens::runtime

#include "compiler/runtime/dynamic_update_slice_thunk.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace xlens::runtime {

namespace {

bool RowMajor(const Shape& shape) {
  return shape.IsArray() &&
         (!shape.has_layout() ||
          shape.layout().minor_to_major == shape_util::DefaultMinorToMajor(shape.rank()));
}

}  // namespace

std::unique_ptr<DynamicUpdateSliceThunk> DynamicUpdateSliceThunk::TryCreate(
    std::string hlo_name, const HloInstruction& dus, std::vector<int64_t> operand_slots,
    int64_t output_slot) {
  if (dus.opcode() != HloOpcode::kDynamicUpdateSlice || dus.operand_count() < 2) return nullptr;
  const Shape& shape = dus.shape();
  const Shape& update = dus.operand(1)->shape();
  if (!RowMajor(shape) || !RowMajor(dus.operand(0)->shape()) || !RowMajor(update) ||
      update.element_type() != shape.element_type() || update.rank() != shape.rank() ||
      dus.operand_count() != 2 + shape.rank() ||
      static_cast<int64_t>(operand_slots.size()) != dus.operand_count() || output_slot < 0) {
    return nullptr;
  }
  const PrimitiveType index_type =
      shape.rank() > 0 ? dus.operand(2)->shape().element_type() : PrimitiveType::S32;
  if (index_type != PrimitiveType::S32 && index_type != PrimitiveType::S64) return nullptr;
  for (int64_t i = 2; i < dus.operand_count(); ++i) {
    if (dus.operand(i)->shape().element_type() != index_type) return nullptr;
  }
  for (int64_t s : operand_slots) {
    if (s < 0) return nullptr;
  }
  std::unique_ptr<DynamicUpdateSliceThunk> thunk(new DynamicUpdateSliceThunk(std::move(hlo_name)));
  thunk->dims_ = shape.dimensions();
  thunk->update_dims_ = update.dimensions();
  thunk->element_bytes_ = shape_util::ByteSizeOf(Shape(shape.element_type(), {}));
  thunk->s64_indices_ = index_type == PrimitiveType::S64;
  thunk->slots_ = std::move(operand_slots);
  thunk->output_slot_ = output_slot;
  for (size_t d = 0; d < thunk->dims_.size(); ++d) {
    if (thunk->update_dims_[d] > thunk->dims_[d]) return nullptr;
  }
  return thunk;
}

Status DynamicUpdateSliceThunk::Execute(char** frame, ExecuteContext&) const {
  char* out = frame[output_slot_];
  const char* operand = frame[slots_[0]];
  const char* update = frame[slots_[1]];
  const int64_t rank = static_cast<int64_t>(dims_.size());
  int64_t total = element_bytes_;
  for (int64_t d : dims_) total *= d;
  if (out != operand) std::memcpy(out, operand, total);
  int64_t update_count = 1;
  for (int64_t d : update_dims_) update_count *= d;
  if (update_count == 0) return OkStatus();
  // XLA's clamp: every start in [0, dim - update_dim].
  std::vector<int64_t> start(rank);
  for (int64_t d = 0; d < rank; ++d) {
    const char* p = frame[slots_[2 + d]];
    int64_t s = 0;
    if (s64_indices_) {
      std::memcpy(&s, p, sizeof(int64_t));
    } else {
      int32_t v;
      std::memcpy(&v, p, sizeof(int32_t));
      s = v;
    }
    start[d] = std::clamp<int64_t>(s, 0, dims_[d] - update_dims_[d]);
  }
  // Row-major strides; the innermost dimension's run is contiguous in both arrays.
  std::vector<int64_t> stride(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * dims_[d + 1];
  const int64_t run = rank == 0 ? 1 : update_dims_[rank - 1];
  const int64_t runs = update_count / run;
  std::vector<int64_t> at(rank, 0);  // the update row being copied (all but the last dimension)
  for (int64_t r = 0; r < runs; ++r) {
    int64_t offset = 0;
    for (int64_t d = 0; d < rank; ++d) offset += (start[d] + at[d]) * stride[d];
    std::memcpy(out + offset * element_bytes_, update + r * run * element_bytes_,
                run * element_bytes_);
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++at[d] < update_dims_[d]) break;
      at[d] = 0;
    }
  }
  return OkStatus();
}

std::string DynamicUpdateSliceThunk::ToString(int indent) const {
  std::string update;
  for (size_t d = 0; d < update_dims_.size(); ++d) {
    update += (d ? "," : "") + std::to_string(update_dims_[d]);
  }
  return fmt::format("{:{}}dynamic-update-slice {} (copies the update [{}] into place)\n", "",
                     indent, hlo_name(), update);
}

}  // namespace xlens::runtime

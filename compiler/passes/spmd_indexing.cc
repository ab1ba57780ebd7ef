// The index arithmetic of a gather from, or a scatter into, an operand cut along a dim its indices
// pick (spmd_reshard.h: SpmdBuilder::ShiftIndices, SpmdBuilder::ZeroOutside).
#include <algorithm>

#include "compiler/passes/hlo_creation_utils.h"
#include "compiler/passes/spmd_reshard.h"

namespace xlens {

namespace {

std::unique_ptr<HloInstruction> SliceAlong(HloInstruction* x, int64_t dim, int64_t lo, int64_t hi) {
  const Shape& in = x->shape();
  Shape out = in;
  out.set_dimensions(dim, hi - lo);
  auto slice = std::make_unique<HloInstruction>(HloOpcode::kSlice, out);
  slice->AppendOperand(x);
  slice->slice_starts.assign(in.rank(), 0);
  slice->slice_limits = in.dimensions();
  slice->slice_strides.assign(in.rank(), 1);
  slice->slice_starts[dim] = lo;
  slice->slice_limits[dim] = hi;
  slice->has_slice = true;
  return slice;
}

}  // namespace

SpmdBuilder::ShiftedIndices SpmdBuilder::ShiftIndices(HloInstruction* indices, int64_t ivd, int64_t component,
                                                      std::optional<int64_t> clamp_rows,
                                                      const std::vector<int64_t>& starts) {
  const PrimitiveType type = indices->shape().element_type();
  Shape ids_shape = indices->shape();
  ids_shape.set_element_type(PrimitiveType::S32);
  HloInstruction* ids = indices;
  if (type != PrimitiveType::S32) ids = Add(HloInstruction::CreateUnary(HloOpcode::kConvert, ids_shape, ids));
  const bool explicit_vector = ivd < ids_shape.rank();
  std::vector<int64_t> batch_dims;
  for (int64_t d = 0; d < ids_shape.rank(); ++d) {
    if (d != ivd) batch_dims.push_back(ids_shape.dimensions(d));
  }
  const Shape batch(PrimitiveType::S32, batch_dims);
  HloInstruction* column = ids;
  if (explicit_vector) {
    column = Add(SliceAlong(ids, ivd, component, component + 1));
    column = Add(HloInstruction::CreateUnary(HloOpcode::kReshape, batch, column));
  }
  if (clamp_rows) {
    // A gather's own clamp, on the whole operand's rows: the row it takes is the one it would
    // have taken unpartitioned.
    auto clamp = std::make_unique<HloInstruction>(HloOpcode::kClamp, batch);
    clamp->AppendOperand(Broadcast(ScalarS32(0), batch));
    clamp->AppendOperand(column);
    clamp->AppendOperand(Broadcast(ScalarS32(*clamp_rows - 1), batch));
    column = Add(std::move(clamp));
  }
  ShiftedIndices out;
  out.local = Add(HloInstruction::CreateBinary(HloOpcode::kSubtract, batch, column,
                                               Broadcast(PerDevice(starts), batch)));
  HloInstruction* shifted = out.local;
  if (explicit_vector) {
    Shape one = ids_shape;
    one.set_dimensions(ivd, 1);
    shifted = Add(HloInstruction::CreateUnary(HloOpcode::kReshape, one, out.local));
    const int64_t components = ids_shape.dimensions(ivd);
    if (components > 1) {
      // The other components as they were, this one replaced.
      auto cat = std::make_unique<HloInstruction>(HloOpcode::kConcatenate, ids_shape);
      if (component > 0) cat->AppendOperand(Add(SliceAlong(ids, ivd, 0, component)));
      cat->AppendOperand(shifted);
      if (component + 1 < components) cat->AppendOperand(Add(SliceAlong(ids, ivd, component + 1, components)));
      cat->dimensions_attr = std::vector<int64_t>{ivd};
      shifted = Add(std::move(cat));
    }
  }
  if (type != PrimitiveType::S32) {
    Shape back = shifted->shape();
    back.set_element_type(type);
    shifted = Add(HloInstruction::CreateUnary(HloOpcode::kConvert, back, shifted));
  }
  out.indices = shifted;
  return out;
}

HloInstruction* SpmdBuilder::ZeroOutside(HloInstruction* x, HloInstruction* local, int64_t held,
                                         const std::vector<int64_t>& batch_dims) {
  const Shape& batch = local->shape();
  Shape ok_shape = batch;
  ok_shape.set_element_type(PrimitiveType::PRED);
  auto ge = HloInstruction::CreateBinary(HloOpcode::kCompare, ok_shape, local, Broadcast(ScalarS32(0), batch));
  ge->comparison_direction = ComparisonDirection::kGe;
  auto lt = HloInstruction::CreateBinary(HloOpcode::kCompare, ok_shape, local, Broadcast(ScalarS32(held), batch));
  lt->comparison_direction = ComparisonDirection::kLt;
  HloInstruction* ok =
      Add(HloInstruction::CreateBinary(HloOpcode::kAnd, ok_shape, Add(std::move(ge)), Add(std::move(lt))));
  Shape mask_shape = x->shape();
  mask_shape.set_element_type(PrimitiveType::PRED);
  auto mask = CreateBroadcast(mask_shape, ok, batch_dims);
  HloInstruction* in_range = Add(std::move(mask));
  HloInstruction* zeros = Broadcast(Zero(x->shape().element_type()), x->shape());
  return Add(CreateSelect(in_range, x, zeros));
}

}  // namespace xlens

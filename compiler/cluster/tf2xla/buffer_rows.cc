#include "compiler/cluster/tf2xla/buffer_rows.h"

#include <memory>

#include "compiler/hlo/computation.h"

namespace xlens::cluster {

std::vector<int64_t> BufferDims(int64_t size, const std::vector<int64_t>& element) {
  std::vector<int64_t> dims{size};
  dims.insert(dims.end(), element.begin(), element.end());
  return dims;
}

StatusOr<std::vector<HloInstruction*>> BufferRowStarts(XlaOpKernelContext& ctx,
                                                       HloInstruction* row, int64_t rank) {
  HloInstruction* start = row;
  if (start->shape().element_type() != PrimitiveType::S32) {
    LOWER_OR_RETURN(start, ctx, ctx.builder().Convert(start, PrimitiveType::S32));
  }
  if (start->shape().rank() != 0) {
    LOWER_OR_RETURN(start, ctx, ctx.builder().Reshape(start, {}));
  }
  std::vector<HloInstruction*> starts{start};
  HloInstruction* zero = nullptr;
  LOWER_OR_RETURN(zero, ctx, ctx.builder().ScalarConstant(PrimitiveType::S32, 0));
  for (int64_t d = 1; d < rank; ++d) starts.push_back(zero);
  return starts;
}

StatusOr<HloInstruction*> ReadBufferRow(XlaOpKernelContext& ctx, HloInstruction* buffer,
                                        HloInstruction* row) {
  std::vector<int64_t> sizes = buffer->shape().dimensions();
  ASSIGN_OR_RETURN(std::vector<HloInstruction*> starts,
                   BufferRowStarts(ctx, row, static_cast<int64_t>(sizes.size())));
  auto slice = std::make_unique<HloInstruction>(HloOpcode::kDynamicSlice, Shape());
  slice->AppendOperand(buffer);
  for (HloInstruction* s : starts) slice->AppendOperand(s);
  sizes[0] = 1;
  slice->dynamic_slice_sizes_attr = sizes;
  HloInstruction* sliced = nullptr;
  LOWER_OR_RETURN(sliced, ctx, ctx.builder().Add(std::move(slice)));
  HloInstruction* element = nullptr;
  LOWER_OR_RETURN(element, ctx,
                  ctx.builder().Reshape(sliced, std::vector<int64_t>(sizes.begin() + 1, sizes.end())));
  return element;
}

StatusOr<HloInstruction*> WriteBufferRow(XlaOpKernelContext& ctx, HloInstruction* buffer,
                                         HloInstruction* row, HloInstruction* element) {
  std::vector<int64_t> one = buffer->shape().dimensions();
  one[0] = 1;
  HloInstruction* update = nullptr;
  LOWER_OR_RETURN(update, ctx, ctx.builder().Reshape(element, one));
  ASSIGN_OR_RETURN(std::vector<HloInstruction*> starts,
                   BufferRowStarts(ctx, row, static_cast<int64_t>(one.size())));
  auto dus = std::make_unique<HloInstruction>(HloOpcode::kDynamicUpdateSlice, Shape());
  dus->AppendOperand(buffer);
  dus->AppendOperand(update);
  for (HloInstruction* s : starts) dus->AppendOperand(s);
  HloInstruction* out = nullptr;
  LOWER_OR_RETURN(out, ctx, ctx.builder().Add(std::move(dus)));
  return out;
}

}  // namespace xlens::cluster

#include "compiler/runtime/part_epilogue.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/computation.h"
#include "profiler/host_tracer.h"

namespace xlens::runtime {
namespace {

bool RowMajor(const Shape& shape) {
  return !shape.has_layout() || shape.layout().minor_to_major == shape_util::DefaultMinorToMajor(shape.rank());
}

// Whether each element of `fusion`'s result reads its operands at its own position only: every
// fused instruction reads its operands at its own index (codegen::ReadsOperandsAtItsIndex) over
// arrays of `elements` elements in row-major layout, or is a scalar.
bool ReadsInPlace(const HloInstruction& fusion, int64_t elements) {
  if (fusion.opcode() != HloOpcode::kFusion || fusion.fusion_kind != FusionKind::kLoop) return false;
  for (const HloInstruction* i : fusion.fused_computation()->instructions()) {
    if (i->opcode() == HloOpcode::kTuple) {
      if (i != fusion.fused_computation()->root_instruction()) return false;
      continue;
    }
    if (!i->shape().IsArray() || !codegen::ReadsOperandsAtItsIndex(*i)) return false;
    if (i->shape().rank() == 0) continue;
    if (i->shape().num_elements() != elements || !RowMajor(i->shape())) return false;
  }
  return true;
}

bool Overlap(const char* a, int64_t a_bytes, const char* b, int64_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

std::shared_ptr<const PartEpilogue> PartEpilogue::Make(const HloInstruction& call,
                                                       const std::vector<int64_t>& call_operand_slots,
                                                       int64_t call_output_slot, int64_t images,
                                                       int64_t image_elements, const HloInstruction& kernel_hlo,
                                                       std::unique_ptr<KernelThunk>& kernel) {
  const Shape& result = call.shape();
  if (kernel == nullptr || images < 2 || !result.IsArray() || result.rank() < 2 || !RowMajor(result) ||
      result.dimensions(0) != images || result.num_elements() != images * image_elements) {
    return nullptr;
  }
  const codegen::KernelSpec& spec = kernel->spec();
  if (spec.phases.size() != 1 || spec.scratch_bytes != 0 || !ReadsInPlace(kernel_hlo, result.num_elements())) {
    return nullptr;
  }
  // The phase's tasks fall on image boundaries: each writes its own run of elements, in order,
  // and an image is a whole number of runs (as the loop publishes its tasks, not as it is known
  // to cut them).
  const codegen::KernelPhase& phase = spec.phases[0];
  if (phase.sequential || phase.elements_per_task <= 0 || image_elements % phase.elements_per_task != 0 ||
      phase.tasks * phase.elements_per_task != result.num_elements()) {
    return nullptr;
  }
  std::vector<const Shape*> outputs;
  kernel_hlo.shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) { outputs.push_back(&s); });
  for (const Shape* s : outputs) {
    if (s->rank() == 0 || s->dimensions() != outputs.front()->dimensions()) return nullptr;
  }
  auto epilogue = std::make_shared<PartEpilogue>();
  const std::vector<int64_t>& slots = kernel->slots();
  if (static_cast<int64_t>(slots.size()) != kernel_hlo.operand_count() + static_cast<int64_t>(outputs.size())) {
    return nullptr;
  }
  bool reads_call = false;
  for (int64_t i = 0; i < kernel_hlo.operand_count(); ++i) {
    const HloInstruction* operand = kernel_hlo.operand(i);
    if (operand == &call) {
      reads_call = true;
      if (slots[i] != call_output_slot) return nullptr;
      continue;
    }
    epilogue->kernel_reads_.push_back({slots[i], shape_util::ByteSizeOf(operand->shape())});
  }
  if (!reads_call) return nullptr;
  for (size_t o = 0; o < outputs.size(); ++o) {
    epilogue->kernel_writes_.push_back({slots[kernel_hlo.operand_count() + o], shape_util::ByteSizeOf(*outputs[o])});
  }
  for (size_t i = 0; i < call_operand_slots.size(); ++i) {
    epilogue->call_reads_.push_back({call_operand_slots[i], shape_util::ByteSizeOf(call.operand(i)->shape())});
  }
  epilogue->call_result_ = {call_output_slot, shape_util::ByteSizeOf(result)};
  epilogue->tasks_per_image_ = image_elements / phase.elements_per_task;
  epilogue->kernel_ = std::move(kernel);
  return epilogue;
}

bool PartEpilogue::Applies(char** frame) const {
  const char* result = frame[call_result_.slot];
  for (const Extent& w : kernel_writes_) {
    const char* out = frame[w.slot];
    // In place of the call's result, element for element, or apart from it.
    if (!(out == result && w.bytes == call_result_.bytes) && Overlap(out, w.bytes, result, call_result_.bytes)) {
      return false;
    }
    for (const Extent& r : call_reads_) {
      if (Overlap(out, w.bytes, frame[r.slot], r.bytes)) return false;
    }
    for (const Extent& r : kernel_reads_) {
      if (!(frame[r.slot] == out && r.bytes == w.bytes) && Overlap(out, w.bytes, frame[r.slot], r.bytes)) return false;
    }
  }
  // What the kernel reads besides the call's result is not written by any part.
  for (const Extent& r : kernel_reads_) {
    if (Overlap(frame[r.slot], r.bytes, result, call_result_.bytes)) return false;
  }
  return true;
}

void PartEpilogue::RunImages(char** frame, char* scratch, int64_t first, int64_t count) const {
  // Traced, a span of its own inside the part's span on the same thread ("<kernel> on images
  // <first>..<last>"): the part's time less this one is the library's. The convolution step's
  // calls take 20-30% over oneDNN's standalone time for their shapes, and only this split tells
  // whether the library or the kept pre-activation's second pass takes it.
  std::optional<profiler::TraceSpan> span;
  if (profiler::TracingEnabled()) {
    span.emplace(fmt::format("{} on images {}..{}", kernel_->hlo_name(), first, first + count - 1),
                 profiler::category::kLibraryPart);
    span->AddArg("first_image", first);
    span->AddArg("images", count);
  }
  kernel_->RunTasks(frame, scratch, first * tasks_per_image_, (first + count) * tasks_per_image_);
}

std::string PartEpilogue::Description() const {
  return fmt::format("then {} on each part's images", kernel_->hlo_name());
}

}  // namespace xlens::runtime

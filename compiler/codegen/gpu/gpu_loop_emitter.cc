// The GPU element loop (KernelBuilder::EmitGpuLoop, kernel_builder.h).
#include <algorithm>

#include "compiler/codegen/gpu/gpu_primitives.h"
#include "compiler/codegen/kernel_builder.h"

namespace xlens::codegen {

using llvm::Value;

Status KernelBuilder::EmitGpuLoop(const Shape& shape, int64_t work_per_element, const Body& body) {
  const int64_t elements = shape.num_elements();
  const int64_t minor = MajorToMinor(shape).back();
  const int64_t n = shape.dimensions(minor);
  // Each thread takes `vector` consecutive elements of one row: 16 bytes of the loop's element
  // type, fewer when the row length does not divide by that. Its first element's byte offset
  // is then a multiple of the group's size and every buffer starts 64-byte aligned, so the
  // load-store vectorizer (run on the kernel right here) turns the group's loads and stores of
  // same-layout arrays into one 128-bit access; consecutive threads take consecutive groups, so
  // a warp touches one contiguous 512-byte span (coalesced).
  int64_t vector = std::clamp<int64_t>(16 / std::max(1, ByteWidth(shape.element_type())), 1, 8);
  while (vector > 1 && n % vector != 0) vector /= 2;
  const int64_t groups = elements / vector;
  const int64_t threads = std::min<int64_t>(256, (groups + 31) / 32 * 32);
  const int64_t blocks = (groups + threads - 1) / threads;
  NewGpuPhase(blocks, threads, work_per_element * vector);
  auto e = MakeEmitter();
  Value* group = b_.CreateAdd(b_.CreateMul(gpu::EmitBlockIdx(b_), b_.getInt64(threads), "", true, true),
                              gpu::EmitThreadIdx(b_), "group", true, true);
  RETURN_IF_ERROR(e->EmitIf(b_.CreateICmpULT(group, b_.getInt64(groups)), "in_bounds", [&]() -> Status {
    Shape groups_shape = shape;
    groups_shape.set_dimensions(minor, n / vector);
    IrIndex first = DelinearizePhysical(b_, group, groups_shape);
    first[minor] = b_.CreateMul(first[minor], b_.getInt64(vector), "", true, true);
    llvm::BasicBlock* block = b_.GetInsertBlock();
    llvm::Instruction* mark = block->empty() ? nullptr : &block->back();
    for (int64_t k = 0; k < vector; ++k) {
      IrIndex index = first;
      if (k > 0) index[minor] = b_.CreateAdd(first[minor], b_.getInt64(k), "", true, true);
      RETURN_IF_ERROR(body(*e, index));
    }
    // The stores go after every load of the group: the vectorizer merges accesses only when no
    // store that may alias them lies between, and an output may share its buffer with an
    // operand. Safe: such an operand is read only at the element the output writes (buffer
    // assignment shares buffers for elementwise reads only), and the group's elements differ.
    if (b_.GetInsertBlock() == block) {
      std::vector<llvm::StoreInst*> stores;
      auto it = mark == nullptr ? block->begin() : std::next(mark->getIterator());
      for (; it != block->end(); ++it) {
        if (auto* store = llvm::dyn_cast<llvm::StoreInst>(&*it)) stores.push_back(store);
      }
      for (llvm::StoreInst* store : stores) store->moveBefore(*block, block->end());
    }
    return OkStatus();
  }));
  b_.CreateRetVoid();
  if (vector > 1) gpu::VectorizeAccesses(*b_.GetInsertBlock()->getParent());
  return OkStatus();
}

}  // namespace xlens::codegen

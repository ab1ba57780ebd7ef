// The tiled GPU transpose (KernelBuilder::TryEmitGpuTranspose, kernel_builder.h).
#include <fmt/format.h>

#include "compiler/codegen/gpu/gpu_primitives.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/llvm_ir_util.h"

namespace xlens::codegen {

using llvm::Value;

StatusOr<bool> KernelBuilder::TryEmitGpuTranspose() {
  constexpr int64_t kTile = 32;
  constexpr int64_t kRowsPerPass = 8;  // block of 32x8 threads, 4 tile rows per thread
  if (outputs_.size() != 1 || !root_->shape().IsArray() || root_->shape().rank() < 2) return false;
  if (root_->opcode() != HloOpcode::kTranspose && root_->opcode() != HloOpcode::kCopy) return false;
  const HloInstruction* operand = root_->operand(0);
  const Shape& in = operand->shape();
  const Shape& out = output_shapes_[0];
  const int64_t rank = out.rank();
  // The operand dimension each output dimension reads.
  std::vector<int64_t> perm(rank);
  for (int64_t d = 0; d < rank; ++d) {
    perm[d] = root_->opcode() == HloOpcode::kTranspose ? root_->dimensions()[d] : d;
  }
  const int64_t m = MajorToMinor(in).back();          // the operand's minor dimension
  const int64_t p = perm[MajorToMinor(out).back()];  // the operand dimension the output's minor is
  if (p == m || in.dimensions(p) < 8 || in.dimensions(m) < 8) return false;
  std::vector<int64_t> batch_dims, batch_sizes;  // every other operand dimension, major first
  for (int64_t d : MajorToMinor(in)) {
    if (d != p && d != m) {
      batch_dims.push_back(d);
      batch_sizes.push_back(in.dimensions(d));
    }
  }
  const int64_t size_p = in.dimensions(p), size_m = in.dimensions(m);
  const int64_t tiles_p = (size_p + kTile - 1) / kTile, tiles_m = (size_m + kTile - 1) / kTile;
  const int64_t batch = in.num_elements() / (size_p * size_m);
  NewGpuPhase(batch * tiles_p * tiles_m, kTile * kRowsPerPass, kTile / kRowsPerPass);
  auto e = MakeEmitter();
  ASSIGN_OR_RETURN(llvm::Type * storage, StorageType(out.element_type(), b_.getContext()));
  // Padded to 33 columns: a column of the tile spans all 32 banks.
  llvm::GlobalVariable* tile = gpu::CreateSharedArray(
      module_, storage, kTile * (kTile + 1), fmt::format("{}_tile", spec_.phases.back().function_name));
  Value* tid = gpu::EmitThreadIdx(b_);
  Value* bid = gpu::EmitBlockIdx(b_);
  Value* tx = b_.CreateURem(tid, b_.getInt64(kTile), "tx");
  Value* ty = b_.CreateUDiv(tid, b_.getInt64(kTile), "ty");
  Value* p0 = b_.CreateMul(b_.CreateURem(b_.CreateUDiv(bid, b_.getInt64(tiles_m)), b_.getInt64(tiles_p)),
                           b_.getInt64(kTile), "p0");
  Value* m0 = b_.CreateMul(b_.CreateURem(bid, b_.getInt64(tiles_m)), b_.getInt64(kTile), "m0");
  IrIndex operand_index(rank, nullptr);
  if (!batch_dims.empty()) {
    IrIndex b_index = DelinearizeRowMajor(b_, b_.CreateUDiv(bid, b_.getInt64(tiles_m * tiles_p)), batch_sizes);
    for (size_t j = 0; j < batch_dims.size(); ++j) operand_index[batch_dims[j]] = b_index[j];
  }
  auto slot = [&](Value* row, Value* column) {
    return gpu::SharedElementPointer(
        b_, tile, b_.CreateAdd(b_.CreateMul(row, b_.getInt64(kTile + 1)), column));
  };
  // Read: warp ty reads tile rows ty, ty+8, ...: 32 consecutive elements of the operand's minor
  // dimension each.
  for (int64_t k = 0; k < kTile / kRowsPerPass; ++k) {
    Value* row = b_.CreateAdd(ty, b_.getInt64(k * kRowsPerPass));
    IrIndex index = operand_index;
    index[p] = b_.CreateAdd(p0, row);
    index[m] = b_.CreateAdd(m0, tx);
    Value* inside = b_.CreateAnd(b_.CreateICmpULT(index[p], b_.getInt64(size_p)),
                                 b_.CreateICmpULT(index[m], b_.getInt64(size_m)));
    RETURN_IF_ERROR(e->EmitIf(inside, "tile.read", [&]() -> Status {
      ASSIGN_OR_RETURN(Value * v, e->EmitElement(operand, index));
      b_.CreateStore(ValueToStorage(b_, out.element_type(), v), slot(row, tx));
      return OkStatus();
    }));
  }
  gpu::EmitBarrier(b_);
  // Write: warp ty writes the tile's columns ty, ty+8, ...: 32 consecutive elements of the
  // output's minor dimension each (the tile read down a column, conflict-free thanks to the pad).
  for (int64_t k = 0; k < kTile / kRowsPerPass; ++k) {
    Value* column = b_.CreateAdd(ty, b_.getInt64(k * kRowsPerPass));
    IrIndex index = operand_index;
    index[p] = b_.CreateAdd(p0, tx);
    index[m] = b_.CreateAdd(m0, column);
    Value* inside = b_.CreateAnd(b_.CreateICmpULT(index[p], b_.getInt64(size_p)),
                                 b_.CreateICmpULT(index[m], b_.getInt64(size_m)));
    RETURN_IF_ERROR(e->EmitIf(inside, "tile.write", [&]() -> Status {
      Value* v = StorageToValue(b_, out.element_type(), b_.CreateLoad(storage, slot(tx, column)));
      IrIndex out_index(rank);
      for (int64_t d = 0; d < rank; ++d) out_index[d] = index[perm[d]];
      return OutputArray(0).EmitWrite(b_, out_index, v);
    }));
  }
  b_.CreateRetVoid();
  return true;
}

}  // namespace xlens::codegen

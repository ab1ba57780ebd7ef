// The tiled GPU GEMM with its fused epilogue (KernelBuilder::TryEmitGpuGemm, kernel_builder.h).
#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "compiler/codegen/gpu/gpu_launch_plan.h"
#include "compiler/codegen/gpu/gpu_primitives.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/codegen/scalar_ops.h"

namespace xlens::codegen {

using llvm::Value;

namespace {

constexpr int64_t kBlockM = 64, kBlockN = 64, kBlockK = 16;
constexpr int64_t kThreads = 256;         // 16 x 16, each computing 4 x 4 outputs
constexpr int64_t kTileStride = 64 + 2;   // shared tile row: 2 words of padding (see below)

bool IsFloat(PrimitiveType t) {
  return t == PrimitiveType::F16 || t == PrimitiveType::BF16 || t == PrimitiveType::F32 ||
         t == PrimitiveType::F64;
}

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The dimensions of an operand that are neither batch nor contracting, in order.
std::vector<int64_t> FreeDims(int64_t rank, const std::vector<int64_t>& batch,
                              const std::vector<int64_t>& contracting) {
  std::vector<int64_t> free;
  for (int64_t d = 0; d < rank; ++d) {
    if (!Contains(batch, d) && !Contains(contracting, d)) free.push_back(d);
  }
  return free;
}

int64_t Product(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= shape.dimensions(d);
  return p;
}

std::vector<int64_t> Sizes(const Shape& shape, const std::vector<int64_t>& dims) {
  std::vector<int64_t> s;
  for (int64_t d : dims) s.push_back(shape.dimensions(d));
  return s;
}

bool IsGemmSupported(const HloInstruction* dot) {
  return IsFloat(dot->operand(0)->shape().element_type()) &&
         IsFloat(dot->operand(1)->shape().element_type()) && IsFloat(dot->shape().element_type()) &&
         dot->shape().num_elements() > 0;
}

}  // namespace

const HloInstruction* KernelBuilder::FindGemmWithEpilogue() const {
  if (outputs_.size() != 1 || !root_->shape().IsArray()) return nullptr;
  const HloInstruction* dot = nullptr;
  if (hlo_.opcode() == HloOpcode::kFusion) {
    for (const HloInstruction* x : hlo_.fused_computation()->MakeInstructionPostOrder()) {
      if (x->opcode() != HloOpcode::kDot) continue;
      if (dot != nullptr) return nullptr;  // one dot per GEMM kernel
      dot = x;
    }
  } else if (root_->opcode() == HloOpcode::kDot) {
    dot = root_;
  }
  if (dot == nullptr || !IsGemmSupported(dot) || dot->shape().dimensions() != root_->shape().dimensions()) {
    return nullptr;
  }
  // Every value between the dot and the root is elementwise over the dot's shape: the epilogue
  // reads the dot only at the index it writes.
  std::map<const HloInstruction*, bool> depends;
  std::function<bool(const HloInstruction*)> reads_dot = [&](const HloInstruction* x) -> bool {
    if (x == dot) return true;
    if (auto it = depends.find(x); it != depends.end()) return it->second;
    bool d = false;
    for (const HloInstruction* o : x->operands()) d |= reads_dot(o);
    return depends[x] = d;
  };
  std::function<bool(const HloInstruction*)> elementwise_path = [&](const HloInstruction* x) -> bool {
    if (x == dot || !reads_dot(x)) return true;
    if (!x->IsElementwise() || x->shape().dimensions() != dot->shape().dimensions()) return false;
    for (const HloInstruction* o : x->operands()) {
      if (!elementwise_path(o)) return false;
    }
    return true;
  };
  return elementwise_path(root_) ? dot : nullptr;
}

StatusOr<bool> KernelBuilder::TryEmitGpuGemm(const HloInstruction* dot, const HloInstruction* epilogue,
                                             const Destination& destination, bool may_split) {
  if (!IsGemmSupported(dot)) return false;
  const DotDimensionNumbers& dn = *dot->dot_dimension_numbers;
  const HloInstruction* lhs = dot->operand(0);
  const HloInstruction* rhs = dot->operand(1);
  const Shape& ls = lhs->shape();
  const Shape& rs = rhs->shape();
  const std::vector<int64_t> lhs_free = FreeDims(ls.rank(), dn.lhs_batch_dimensions, dn.lhs_contracting_dimensions);
  const std::vector<int64_t> rhs_free = FreeDims(rs.rank(), dn.rhs_batch_dimensions, dn.rhs_contracting_dimensions);
  const int64_t batch = Product(ls, dn.lhs_batch_dimensions);
  const int64_t m_size = Product(ls, lhs_free), n_size = Product(rs, rhs_free);
  const int64_t k_size = Product(ls, dn.lhs_contracting_dimensions);
  const int64_t tiles_m = (m_size + kBlockM - 1) / kBlockM, tiles_n = (n_size + kBlockN - 1) / kBlockN;
  const PrimitiveType out_type = dot->shape().element_type();
  const bool f64 = ls.element_type() == PrimitiveType::F64 || rs.element_type() == PrimitiveType::F64 ||
                   out_type == PrimitiveType::F64;
  const PrimitiveType acc_type = f64 ? PrimitiveType::F64 : PrimitiveType::F32;
  llvm::Type* acc_ir = f64 ? b_.getDoubleTy() : b_.getFloatTy();
  // Which way a tile is read coalesced: along K when the operand's minor dimension is its last
  // contracting one (x @ W with row-major x), along M (or N) otherwise.
  const bool lhs_k_minor = !dn.lhs_contracting_dimensions.empty() &&
                           MajorToMinor(ls).back() == dn.lhs_contracting_dimensions.back();
  const bool rhs_k_minor = !dn.rhs_contracting_dimensions.empty() &&
                           MajorToMinor(rs).back() == dn.rhs_contracting_dimensions.back();

  // Few tiles and a long K: each block walks one slice of K and writes its partial tile to
  // scratch; a second kernel sums the slices in order and applies the epilogue.
  const int64_t tiles = batch * tiles_m * tiles_n;
  const int64_t k_tiles = (k_size + kBlockK - 1) / kBlockK;
  // A step of K costs each block's 8 warps 16 x 8 shared loads and 8 shared stores, one
  // wavefront each (conflict-free), at the H100's 1.98 GHz.
  constexpr double kStepNs = (8.0 * 16 * 8 + 8 * 8) / 1.98;
  const double partial_bytes = static_cast<double>(dot->shape().num_elements()) * (f64 ? 8 : 4);
  const gpu::SplitPlan split = options_.gpu_split_launches && may_split
                                   ? gpu::PlanGemmSplit(tiles, k_tiles, kStepNs, partial_bytes)
                                   : gpu::SplitPlan{1, k_tiles};
  Binding partials{nullptr, {}, Shape(), spec_.operand_leaves + spec_.output_leaves, -1};
  if (split.slices > 1) {
    std::vector<int64_t> dims = {split.slices};
    for (int64_t d : dot->shape().dimensions()) dims.push_back(d);
    partials.shape = Shape(acc_type, dims);
    partials.shape.SetDefaultLayout();
    partials.scratch_offset = spec_.scratch_bytes;
    spec_.scratch_bytes += (shape_util::ByteSizeOf(partials.shape) + 63) / 64 * 64;
  }

  NewGpuPhase(tiles * split.slices, kThreads, 16 * std::min(k_size, split.steps_per_slice * kBlockK));
  auto e = MakeEmitter();
  Value* tid = gpu::EmitThreadIdx(b_);
  Value* block = gpu::EmitBlockIdx(b_);
  Value* bid = b_.CreateURem(block, b_.getInt64(tiles), "tile");
  Value* slice = b_.CreateUDiv(block, b_.getInt64(tiles), "slice");
  Value* tx = b_.CreateURem(tid, b_.getInt64(16), "tx");
  Value* ty = b_.CreateUDiv(tid, b_.getInt64(16), "ty");
  Value* m0 = b_.CreateMul(b_.CreateURem(b_.CreateUDiv(bid, b_.getInt64(tiles_n)), b_.getInt64(tiles_m)),
                           b_.getInt64(kBlockM), "m0");
  Value* n0 = b_.CreateMul(b_.CreateURem(bid, b_.getInt64(tiles_n)), b_.getInt64(kBlockN), "n0");
  IrIndex batch_index = DelinearizeRowMajor(b_, b_.CreateUDiv(bid, b_.getInt64(tiles_m * tiles_n)),
                                            Sizes(ls, dn.lhs_batch_dimensions));
  if (dn.lhs_batch_dimensions.empty()) batch_index.clear();
  // Operand indices from (batch, row or column, k).
  auto operand_index = [&](const Shape& s, const std::vector<int64_t>& batch_dims,
                           const std::vector<int64_t>& free, const std::vector<int64_t>& contracting,
                           Value* i, Value* k) {
    IrIndex index(s.rank(), nullptr);
    for (size_t j = 0; j < batch_dims.size(); ++j) index[batch_dims[j]] = batch_index[j];
    IrIndex fi = DelinearizeRowMajor(b_, i, Sizes(s, free));
    for (size_t j = 0; j < free.size(); ++j) index[free[j]] = fi[j];
    IrIndex ki = DelinearizeRowMajor(b_, k, Sizes(s, contracting));
    for (size_t j = 0; j < contracting.size(); ++j) index[contracting[j]] = ki[j];
    return index;
  };

  // Tiles [k][m] and [k][n] in shared memory, rows padded to 66 words: a warp that stores 16
  // values of k for two neighbouring m (the lhs read along K) hits 32 distinct banks.
  llvm::GlobalVariable* a_tile = gpu::CreateSharedArray(module_, acc_ir, kBlockK * kTileStride,
                                                        fmt::format("{}_a", spec_.phases.back().function_name));
  llvm::GlobalVariable* b_tile = gpu::CreateSharedArray(module_, acc_ir, kBlockK * kTileStride,
                                                        fmt::format("{}_b", spec_.phases.back().function_name));
  auto tile_slot = [&](llvm::GlobalVariable* t, Value* k, Value* i) {
    return gpu::SharedElementPointer(b_, t, b_.CreateAdd(b_.CreateMul(k, b_.getInt64(kTileStride)), i));
  };
  std::vector<llvm::AllocaInst*> acc(16);
  for (auto& a : acc) {
    a = EmitEntryAlloca(b_, acc_ir, "gemm.acc");
    b_.CreateStore(llvm::ConstantFP::get(acc_ir, 0.0), a);
  }
  llvm::AllocaInst* staged = EmitEntryAlloca(b_, acc_ir, "gemm.staged");
  // One tile load: 4 elements per thread, zero outside the matrix (zeros add nothing).
  auto load_tile = [&](const HloInstruction* operand, const std::vector<int64_t>& batch_dims,
                       const std::vector<int64_t>& free, const std::vector<int64_t>& contracting,
                       int64_t free_size, Value* free0, Value* k0, bool k_minor,
                       llvm::GlobalVariable* t) -> Status {
    for (int64_t r = 0; r < 4; ++r) {
      // Consecutive threads take consecutive elements of the operand's minor dimension.
      Value* kk = k_minor ? b_.CreateURem(tid, b_.getInt64(kBlockK))
                          : b_.CreateAdd(b_.CreateUDiv(tid, b_.getInt64(64)), b_.getInt64(4 * r));
      Value* ii = k_minor ? b_.CreateAdd(b_.CreateUDiv(tid, b_.getInt64(kBlockK)), b_.getInt64(16 * r))
                          : b_.CreateURem(tid, b_.getInt64(64));
      Value* i = b_.CreateAdd(free0, ii);
      Value* k = b_.CreateAdd(k0, kk);
      b_.CreateStore(llvm::ConstantFP::get(acc_ir, 0.0), staged);
      Value* inside = b_.CreateAnd(b_.CreateICmpULT(i, b_.getInt64(free_size)),
                                   b_.CreateICmpULT(k, b_.getInt64(k_size)));
      RETURN_IF_ERROR(e->EmitIf(inside, "gemm.load", [&]() -> Status {
        ASSIGN_OR_RETURN(Value * v, e->EmitElement(operand, operand_index(operand->shape(), batch_dims,
                                                                          free, contracting, i, k)));
        ASSIGN_OR_RETURN(v, EmitConvert(b_, operand->shape().element_type(), acc_type, v));
        b_.CreateStore(v, staged);
        return OkStatus();
      }));
      b_.CreateStore(b_.CreateLoad(acc_ir, staged), tile_slot(t, kk, ii));
    }
    return OkStatus();
  };
  Value* kt_begin = b_.CreateMul(slice, b_.getInt64(split.steps_per_slice));
  Value* kt_end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, b_.CreateAdd(kt_begin, b_.getInt64(split.steps_per_slice)),
                                           b_.getInt64(k_tiles));
  RETURN_IF_ERROR(e->EmitLoop(kt_begin, kt_end, "gemm.k", [&](Value* kt) -> Status {
    Value* k0 = b_.CreateMul(kt, b_.getInt64(kBlockK));
    RETURN_IF_ERROR(load_tile(lhs, dn.lhs_batch_dimensions, lhs_free, dn.lhs_contracting_dimensions,
                              m_size, m0, k0, lhs_k_minor, a_tile));
    RETURN_IF_ERROR(load_tile(rhs, dn.rhs_batch_dimensions, rhs_free, dn.rhs_contracting_dimensions,
                              n_size, n0, k0, rhs_k_minor, b_tile));
    gpu::EmitBarrier(b_);
    // Thread (ty, tx) owns rows ty + 16i and columns tx + 16j: a warp reads 2 distinct A values
    // (broadcast) and 16 consecutive B values per step, both conflict-free.
    for (int64_t kk = 0; kk < kBlockK; ++kk) {
      Value* a[4];
      Value* bv[4];
      for (int64_t i = 0; i < 4; ++i) {
        a[i] = b_.CreateLoad(acc_ir, tile_slot(a_tile, b_.getInt64(kk), b_.CreateAdd(ty, b_.getInt64(16 * i))));
        bv[i] = b_.CreateLoad(acc_ir, tile_slot(b_tile, b_.getInt64(kk), b_.CreateAdd(tx, b_.getInt64(16 * i))));
      }
      for (int64_t i = 0; i < 4; ++i) {
        for (int64_t j = 0; j < 4; ++j) {
          Value* sum = b_.CreateFAdd(b_.CreateLoad(acc_ir, acc[i * 4 + j]), b_.CreateFMul(a[i], bv[j]));
          b_.CreateStore(sum, acc[i * 4 + j]);
        }
      }
    }
    gpu::EmitBarrier(b_);
    return OkStatus();
  }));
  // Outputs: for each (i, j) a warp writes 2 rows x 16 consecutive columns, each epilogue value
  // computed from the accumulator at its own index.
  const std::vector<int64_t> m_sizes = Sizes(ls, lhs_free), n_sizes = Sizes(rs, rhs_free);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      Value* m = b_.CreateAdd(m0, b_.CreateAdd(ty, b_.getInt64(16 * i)));
      Value* n = b_.CreateAdd(n0, b_.CreateAdd(tx, b_.getInt64(16 * j)));
      Value* inside = b_.CreateAnd(b_.CreateICmpULT(m, b_.getInt64(m_size)), b_.CreateICmpULT(n, b_.getInt64(n_size)));
      RETURN_IF_ERROR(e->EmitIf(inside, "gemm.store", [&]() -> Status {
        IrIndex index = batch_index;
        for (Value* v : DelinearizeRowMajor(b_, m, m_sizes)) index.push_back(v);
        for (Value* v : DelinearizeRowMajor(b_, n, n_sizes)) index.push_back(v);
        if (split.slices > 1) {
          IrIndex partial_index = {slice};
          partial_index.insert(partial_index.end(), index.begin(), index.end());
          return ArrayOf(partials).EmitWrite(b_, partial_index, b_.CreateLoad(acc_ir, acc[i * 4 + j]));
        }
        ASSIGN_OR_RETURN(Value * value, EmitConvert(b_, acc_type, out_type, b_.CreateLoad(acc_ir, acc[i * 4 + j])));
        if (epilogue != nullptr && epilogue != dot) {
          auto scoped = MakeEmitter();
          scoped->BindValues(dot, {value});
          ASSIGN_OR_RETURN(value, scoped->EmitElement(epilogue, index));
        }
        return destination(0).EmitWrite(b_, index, value);
      }));
    }
  }
  b_.CreateRetVoid();
  if (split.slices == 1) return true;

  // The sum of the slices, in slice order (the same result on every run), then the epilogue.
  const IrArray out = destination(0);
  RETURN_IF_ERROR(EmitGpuLoop(out.shape(), split.slices, [&](ElementalIrEmitter& e2, const IrIndex& index) -> Status {
    const IrArray parts = ArrayOf(partials);
    Value* sum = nullptr;
    for (int64_t s = 0; s < split.slices; ++s) {
      IrIndex partial_index = {b_.getInt64(s)};
      partial_index.insert(partial_index.end(), index.begin(), index.end());
      ASSIGN_OR_RETURN(Value * part, parts.EmitRead(b_, partial_index));
      sum = sum == nullptr ? part : b_.CreateFAdd(sum, part);
    }
    ASSIGN_OR_RETURN(Value * value, EmitConvert(b_, acc_type, out_type, sum));
    if (epilogue != nullptr && epilogue != dot) {
      auto scoped = MakeEmitter();
      scoped->BindValues(dot, {value});
      ASSIGN_OR_RETURN(value, scoped->EmitElement(epilogue, index));
    }
    (void)e2;
    return destination(0).EmitWrite(b_, index, value);
  }));
  return true;
}

}  // namespace xlens::codegen

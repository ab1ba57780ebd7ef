#include "compiler/codegen/gpu/gpu_sort_emitter.h"

#include <functional>

#include <fmt/format.h>
#include <llvm/IR/IRBuilder.h>

#include "compiler/codegen/elemental_ir_emitter.h"
#include "compiler/codegen/gpu/gpu_primitives.h"
#include "compiler/codegen/ir_array.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/hlo/computation.h"

namespace xlens::codegen {
namespace {

using llvm::Value;

constexpr int64_t kMaxThreadsPerBlock = 256;

// One step of the network: pairs (i, partner) with bit `bit` of i clear; a mirror step pairs i
// with its reflection in the 2^(bit+1) block, the others with i ^ 2^bit.
struct Stage {
  bool mirror;
  int64_t bit;
};

class SortEmitter {
 public:
  SortEmitter(const HloInstruction& sort, const std::string& name, llvm::Module& module)
      : sort_(sort), name_(name), module_(module), b_(module.getContext()) {}

  StatusOr<KernelSpec> Emit() {
    const int64_t count = sort_.operand_count();
    const Shape& keys = sort_.operand(0)->shape();
    spec_.name = name_;
    spec_.operand_leaves = count;
    spec_.output_leaves = count;
    for (int64_t k = 0; k < count; ++k) {
      const Shape& out = sort_.shape().IsTuple() ? sort_.shape().tuple_shapes(k) : sort_.shape();
      if (!out.IsArray() || !IsCodegenSupportedType(out.element_type())) {
        return Error(fmt::format("{}: a sort of {} is not supported by code generation",
                                 sort_.name(), out.ToString()));
      }
      operand_shapes_.push_back(sort_.operand(k)->shape());
      output_shapes_.push_back(out);
    }
    dimension_ = keys.rank() == 0 ? -1 : sort_.dimensions(0);
    n_ = keys.rank() == 0 ? 1 : keys.dimensions(dimension_);
    elements_ = keys.num_elements();
    rows_ = n_ == 0 ? 0 : elements_ / n_;
    if (n_ > (int64_t{1} << 30)) {
      return Error(fmt::format("{}: a sort of {} elements per row cannot run on the GPU backend "
                               "(the positions it keeps are 32-bit)", sort_.name(), n_));
    }
    for (int64_t d = 0; d < keys.rank(); ++d) {
      if (d != dimension_) row_dims_.push_back(keys.dimensions(d));
    }
    spec_.scratch_bytes = elements_ * 4;
    ASSIGN_OR_RETURN(comparator_, EmitComparatorFunction());
    RETURN_IF_ERROR(EmitCopy());
    if (n_ <= 1 || rows_ == 0) return spec_;
    const int64_t padded = gpu::PowerOfTwoCeil(n_);
    const int64_t pairs = padded / 2;
    threads_ = std::min(pairs, kMaxThreadsPerBlock);
    int64_t tile_bits = 0;  // log2 of the elements one block's pairs cover
    while ((int64_t{1} << tile_bits) < 2 * threads_) ++tile_bits;
    std::vector<Stage> stages;
    for (int64_t k = 1; (int64_t{1} << k) <= padded; ++k) {
      stages.push_back({true, k - 1});
      for (int64_t j = k - 2; j >= 0; --j) stages.push_back({false, j});
    }
    std::vector<Stage> tile;
    for (const Stage& stage : stages) {
      if (stage.bit < tile_bits) {
        tile.push_back(stage);
        continue;
      }
      if (!tile.empty()) RETURN_IF_ERROR(EmitTileStages(tile));
      tile.clear();
      RETURN_IF_ERROR(EmitGlobalStage(stage));
    }
    if (!tile.empty()) RETURN_IF_ERROR(EmitTileStages(tile));
    return spec_;
  }

 private:
  llvm::Function* NewKernel(int64_t blocks, int64_t threads) {
    llvm::LLVMContext& c = module_.getContext();
    const std::string fn_name =
        spec_.phases.empty() ? name_ : fmt::format("{}_phase{}", name_, spec_.phases.size());
    std::vector<llvm::Type*> params(2 * operand_shapes_.size() + 1, llvm::PointerType::get(c, 0));
    auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(c), params, false);
    llvm::Function* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, fn_name, module_);
    for (size_t i = 0; i < params.size(); ++i) {
      f->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::getWithAlignment(c, llvm::Align(16)));
    }
    f->addFnAttr(llvm::Attribute::NoUnwind);
    module_.getOrInsertNamedMetadata("nvvm.annotations")
        ->addOperand(llvm::MDNode::get(
            c, {llvm::ValueAsMetadata::get(f), llvm::MDString::get(c, "kernel"),
                llvm::ValueAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(c), 1))}));
    KernelPhase phase{fn_name, blocks * threads, 1, false};
    phase.blocks = blocks;
    phase.threads_per_block = threads;
    spec_.phases.push_back(phase);
    b_.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", f));
    return f;
  }

  // i1 comparator(lhs0, rhs0, lhs1, rhs1, ...): the sort's computation on element values.
  StatusOr<llvm::Function*> EmitComparatorFunction() {
    llvm::LLVMContext& c = module_.getContext();
    std::vector<llvm::Type*> params;
    for (const Shape& s : operand_shapes_) {
      ASSIGN_OR_RETURN(llvm::Type * t, ValueType(s.element_type(), c));
      params.push_back(t);
      params.push_back(t);
    }
    auto* type = llvm::FunctionType::get(llvm::Type::getInt1Ty(c), params, false);
    llvm::Function* f = llvm::Function::Create(type, llvm::Function::InternalLinkage,
                                               name_ + "_comparator", module_);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    f->addFnAttr(llvm::Attribute::AlwaysInline);
    b_.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", f));
    std::vector<Value*> args;
    for (llvm::Argument& a : f->args()) args.push_back(&a);
    ElementalIrEmitter e(b_);
    ASSIGN_OR_RETURN(std::vector<Value*> result, e.EmitScalarComputation(*sort_.to_apply(), args));
    if (result.size() != 1 || !result[0]->getType()->isIntegerTy(1)) {
      return Error(fmt::format("{}: comparator {} does not return one pred", sort_.name(),
                               sort_.to_apply()->name()));
    }
    b_.CreateRet(result[0]);
    return f;
  }

  // The element index of position `position` of row `row`.
  IrIndex ElementIndex(Value* row, Value* position) {
    if (dimension_ < 0) return {};
    IrIndex outer = DelinearizeRowMajor(b_, row, row_dims_);
    IrIndex index;
    size_t next = 0;
    for (int64_t d = 0; d < operand_shapes_[0].rank(); ++d) {
      index.push_back(d == dimension_ ? position : outer[next++]);
    }
    return index;
  }

  Value* PositionPointer(llvm::Function* f, Value* row, Value* position) {
    Value* scratch = f->getArg(static_cast<unsigned>(2 * operand_shapes_.size()));
    Value* linear = b_.CreateAdd(b_.CreateMul(row, b_.getInt64(n_)), position);
    return b_.CreateInBoundsGEP(b_.getInt32Ty(), scratch, {linear});
  }

  IrArray Output(llvm::Function* f, size_t k) {
    return IrArray(f->getArg(static_cast<unsigned>(operand_shapes_.size() + k)), output_shapes_[k]);
  }

  // Every operand into its output (the network sorts in place there), and every element's
  // position into scratch: one thread per element.
  Status EmitCopy() {
    const int64_t threads = std::clamp<int64_t>(elements_, 1, kMaxThreadsPerBlock);
    const int64_t blocks = elements_ == 0 ? 0 : (elements_ + threads - 1) / threads;
    llvm::Function* f = NewKernel(blocks, threads);
    if (elements_ == 0) {
      b_.CreateRetVoid();
      return OkStatus();
    }
    Value* linear = b_.CreateAdd(b_.CreateMul(gpu::EmitBlockIdx(b_), b_.getInt64(threads)),
                                 gpu::EmitThreadIdx(b_));
    ElementalIrEmitter e(b_);
    RETURN_IF_ERROR(e.EmitIf(b_.CreateICmpULT(linear, b_.getInt64(elements_)), "in_bounds", [&]() -> Status {
      Value* row = b_.CreateUDiv(linear, b_.getInt64(n_));
      Value* position = b_.CreateURem(linear, b_.getInt64(n_));
      IrIndex index = ElementIndex(row, position);
      for (size_t k = 0; k < operand_shapes_.size(); ++k) {
        IrArray operand(f->getArg(static_cast<unsigned>(k)), operand_shapes_[k]);
        ASSIGN_OR_RETURN(Value * v, operand.EmitRead(b_, index));
        RETURN_IF_ERROR(Output(f, k).EmitWrite(b_, index, v));
      }
      b_.CreateStore(b_.CreateTrunc(position, b_.getInt32Ty()), PositionPointer(f, row, position));
      return OkStatus();
    }));
    b_.CreateRetVoid();
    return OkStatus();
  }

  // Where a stage reads and writes the elements of a row (global memory, or a block's tile in
  // shared memory): operand k's element and the original position at a row position.
  struct Access {
    std::function<StatusOr<Value*>(size_t k, Value* position)> read;
    std::function<Status(size_t k, Value* position, Value* value)> write;
    std::function<Value*(Value* position)> position;  // i32* of the original position
  };

  Access GlobalAccess(llvm::Function* f, Value* row) {
    return {[this, f, row](size_t k, Value* p) { return Output(f, k).EmitRead(b_, ElementIndex(row, p)); },
            [this, f, row](size_t k, Value* p, Value* v) {
              return Output(f, k).EmitWrite(b_, ElementIndex(row, p), v);
            },
            [this, f, row](Value* p) { return PositionPointer(f, row, p); }};
  }

  // One launch of a global stage: its pairs span more than a block's tile.
  Status EmitGlobalStage(const Stage& stage) {
    const int64_t pairs_per_row = gpu::PowerOfTwoCeil(n_) / 2;
    llvm::Function* f = NewKernel(rows_ * pairs_per_row / threads_, threads_);
    Value* pair_id = b_.CreateAdd(b_.CreateMul(gpu::EmitBlockIdx(b_), b_.getInt64(threads_)),
                                  gpu::EmitThreadIdx(b_));
    Value* row = b_.CreateUDiv(pair_id, b_.getInt64(pairs_per_row));
    Value* pair = b_.CreateURem(pair_id, b_.getInt64(pairs_per_row));
    RETURN_IF_ERROR(EmitCompareExchange(stage, pair, b_.getInt64(n_), GlobalAccess(f, row)));
    b_.CreateRetVoid();
    return OkStatus();
  }

  // One launch running `stages` (pairs within the block's tile of 2 x threads positions) on a
  // copy of the tile in shared memory: loaded coalesced, a barrier between stages, stored back.
  Status EmitTileStages(const std::vector<Stage>& stages) {
    const int64_t pairs_per_row = gpu::PowerOfTwoCeil(n_) / 2;
    const int64_t tile = 2 * threads_;
    llvm::Function* f = NewKernel(rows_ * pairs_per_row / threads_, threads_);
    // One set of tile arrays for all the sort's tile kernels: each launch has its own instance,
    // and the simulator, which lays out a module's shared variables side by side, gives each
    // kernel only the tile's bytes.
    if (shared_.empty()) {
      for (size_t k = 0; k < output_shapes_.size(); ++k) {
        ASSIGN_OR_RETURN(llvm::Type * t, StorageType(output_shapes_[k].element_type(), module_.getContext()));
        shared_.push_back(gpu::CreateSharedArray(module_, t, tile, fmt::format("{}_tile{}", name_, k)));
      }
      shared_.push_back(gpu::CreateSharedArray(module_, b_.getInt32Ty(), tile, name_ + "_positions"));
    }
    const std::vector<llvm::GlobalVariable*> shared(shared_.begin(), shared_.end() - 1);
    llvm::GlobalVariable* shared_positions = shared_.back();
    Value* thread = gpu::EmitThreadIdx(b_);
    Value* pair_id = b_.CreateAdd(b_.CreateMul(gpu::EmitBlockIdx(b_), b_.getInt64(threads_)), thread);
    Value* row = b_.CreateUDiv(pair_id, b_.getInt64(pairs_per_row));
    // The block's pairs are one tile of the row: positions [start, start + tile).
    Value* start = b_.CreateMul(b_.CreateUDiv(b_.CreateURem(pair_id, b_.getInt64(pairs_per_row)),
                                              b_.getInt64(threads_)),
                                b_.getInt64(tile));
    const Access global = GlobalAccess(f, row);
    ElementalIrEmitter e(b_);
    auto copy = [&](bool load) -> Status {
      for (int64_t h = 0; h < 2; ++h) {
        Value* local = b_.CreateAdd(thread, b_.getInt64(h * threads_));
        Value* position = b_.CreateAdd(start, local);
        RETURN_IF_ERROR(e.EmitIf(b_.CreateICmpULT(position, b_.getInt64(n_)), load ? "load" : "store",
                                 [&]() -> Status {
          for (size_t k = 0; k < shared.size(); ++k) {
            llvm::Type* t = shared[k]->getValueType()->getArrayElementType();
            Value* slot = gpu::SharedElementPointer(b_, shared[k], local);
            if (load) {
              ASSIGN_OR_RETURN(Value * v, global.read(k, position));
              b_.CreateStore(ValueToStorage(b_, output_shapes_[k].element_type(), v), slot);
            } else {
              Value* v = StorageToValue(b_, output_shapes_[k].element_type(), b_.CreateLoad(t, slot));
              RETURN_IF_ERROR(global.write(k, position, v));
            }
          }
          Value* slot = gpu::SharedElementPointer(b_, shared_positions, local);
          if (load) {
            b_.CreateStore(b_.CreateLoad(b_.getInt32Ty(), global.position(position)), slot);
          } else {
            b_.CreateStore(b_.CreateLoad(b_.getInt32Ty(), slot), global.position(position));
          }
          return OkStatus();
        }));
      }
      return OkStatus();
    };
    RETURN_IF_ERROR(copy(true));
    Access local{[&](size_t k, Value* p) -> StatusOr<Value*> {
                   llvm::Type* t = shared[k]->getValueType()->getArrayElementType();
                   return StorageToValue(b_, output_shapes_[k].element_type(),
                                         b_.CreateLoad(t, gpu::SharedElementPointer(b_, shared[k], p)));
                 },
                 [&](size_t k, Value* p, Value* v) -> Status {
                   b_.CreateStore(ValueToStorage(b_, output_shapes_[k].element_type(), v),
                                  gpu::SharedElementPointer(b_, shared[k], p));
                   return OkStatus();
                 },
                 [&](Value* p) { return gpu::SharedElementPointer(b_, shared_positions, p); }};
    // Positions of the tile that exist: the row's end, seen from the tile's start.
    Value* remaining = b_.CreateSub(b_.getInt64(n_), start);
    for (const Stage& stage : stages) {
      gpu::EmitBarrier(b_);
      RETURN_IF_ERROR(EmitCompareExchange(stage, thread, remaining, local));
    }
    gpu::EmitBarrier(b_);
    RETURN_IF_ERROR(copy(false));
    b_.CreateRetVoid();
    return OkStatus();
  }

  // Pair `pair` of the stage: i has bit `bit` clear, partner > i; when partner is below `end`
  // (a position of the row) and orders before i, every operand (and the positions) swap.
  Status EmitCompareExchange(const Stage& stage, Value* pair, Value* end, const Access& access) {
    const uint64_t low_mask = (uint64_t{1} << stage.bit) - 1;
    Value* low = b_.CreateAnd(pair, b_.getInt64(low_mask));
    Value* high = b_.CreateShl(b_.CreateLShr(pair, b_.getInt64(stage.bit)), b_.getInt64(stage.bit + 1));
    Value* i = b_.CreateOr(high, low);
    Value* partner = stage.mirror ? b_.CreateXor(i, b_.getInt64((uint64_t{2} << stage.bit) - 1))
                                  : b_.CreateOr(i, b_.getInt64(uint64_t{1} << stage.bit));
    ElementalIrEmitter e(b_);
    return e.EmitIf(b_.CreateICmpSLT(partner, end), "in_row", [&]() -> Status {
      std::vector<Value*> mine, theirs, partner_first, i_first;
      for (size_t k = 0; k < operand_shapes_.size(); ++k) {
        ASSIGN_OR_RETURN(Value * x, access.read(k, i));
        ASSIGN_OR_RETURN(Value * y, access.read(k, partner));
        mine.push_back(x);
        theirs.push_back(y);
        partner_first.push_back(y);
        partner_first.push_back(x);
        i_first.push_back(x);
        i_first.push_back(y);
      }
      Value* i_pos_ptr = access.position(i);
      Value* partner_pos_ptr = access.position(partner);
      Value* i_pos = b_.CreateLoad(b_.getInt32Ty(), i_pos_ptr);
      Value* partner_pos = b_.CreateLoad(b_.getInt32Ty(), partner_pos_ptr);
      // partner before i: comparator(partner, i), or a tie with the earlier original position.
      Value* partner_less = b_.CreateCall(comparator_, partner_first);
      Value* i_less = b_.CreateCall(comparator_, i_first);
      Value* tie_first = b_.CreateAnd(b_.CreateNot(i_less), b_.CreateICmpULT(partner_pos, i_pos));
      Value* swap = b_.CreateOr(partner_less, tie_first);
      return e.EmitIf(swap, "swap", [&]() -> Status {
        for (size_t k = 0; k < operand_shapes_.size(); ++k) {
          RETURN_IF_ERROR(access.write(k, i, theirs[k]));
          RETURN_IF_ERROR(access.write(k, partner, mine[k]));
        }
        b_.CreateStore(partner_pos, i_pos_ptr);
        b_.CreateStore(i_pos, partner_pos_ptr);
        return OkStatus();
      });
    });
  }

  const HloInstruction& sort_;
  std::string name_;
  llvm::Module& module_;
  llvm::IRBuilder<> b_;
  KernelSpec spec_;
  std::vector<Shape> operand_shapes_, output_shapes_;
  std::vector<int64_t> row_dims_;
  int64_t dimension_ = 0, n_ = 1, elements_ = 0, rows_ = 0, threads_ = 1;
  llvm::Function* comparator_ = nullptr;
  std::vector<llvm::GlobalVariable*> shared_;  // the tile of each operand, then the positions
};

}  // namespace

StatusOr<KernelSpec> EmitGpuSort(const HloInstruction& sort, const std::string& name,
                                 llvm::Module& module) {
  if (sort.opcode() != HloOpcode::kSort || sort.operand_count() == 0 || sort.dimensions().size() != 1) {
    return Error(fmt::format("{}: not a sort of one dimension", sort.name()));
  }
  SortEmitter emitter(sort, name, module);
  return emitter.Emit();
}

}  // namespace xlens::codegen

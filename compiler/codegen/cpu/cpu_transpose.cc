// The CPU kernel of a lone transpose or layout-changing copy (KernelBuilder::TryEmitCpuTranspose).
//
// Where the result holds the operand's bytes in the operand's own order (a transpose whose result
// layout makes it a bitcast, as JAX lowers `jnp.transpose(x)` with the result layout {0,1}; a
// copy to the same physical order), the kernel is a flat copy: each task a stretch of bytes,
// written with streaming stores straight from the operand where the output streams, memcpy
// otherwise, instead of the element loop walking the result through the transpose's index
// arithmetic into a stack buffer. Streamed, the operand comes from memory, and each line copied
// prefetches the line cpu::kStreamPrefetchBytes ahead (f32[2048,4096] on this 2-CPU Xeon VM,
// xlens run, 20 alternating rounds of 20 runs at load 7-8: median of the medians 2.83 -> 2.40
// ms, best 1.158 -> 1.139; the kernel's IR in a two-thread C driver, 25 rounds: best 1.31 ->
// 1.18, first quartile 3.21 -> 2.93).
//
// Otherwise the elements move: the operand's minor dimension m becomes an outer one of the
// result, and the result's minor dimension p an outer one of the operand. Walked element by
// element, every read strides over a whole row of the operand, and on rows of a power-of-two
// size all of them fall in the same few sets of the 8-way L1 and L2, so a line is evicted before
// the next output row reads its neighbour (f32[2048,4096] -> [4096,2048]: 48-75 ms a run). The
// kernel reads tiles instead: L rows of p, each L consecutive elements of m (one 64-byte line of
// the operand), transposed in registers and stored as L rows of m, each L consecutive elements of
// p (one line of the result, with a non-temporal store where the output streams and its rows are
// whole lines). A task takes a band of kBandBytes of p over all of m, so that each result row
// gets four lines from it, and the threads split the bands (the same transpose: 2.2-2.6 ms a
// run, 2 threads beside other work).
#include <algorithm>
#include <vector>

#include "compiler/codegen/cpu/cpu_streaming_store.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/hlo/computation.h"

namespace xlens::codegen {

using llvm::Value;

namespace {

// The band of the result's minor dimension a task covers in one sweep of the operand's: four
// lines of each result row (a C++ loop of the same 16 x 16 blocks, f32[2048,4096] transposed on
// 2 threads beside other work, best of 40 runs: bands of one line 1.36 ms, of two 1.23-1.28, of
// four 1.04-1.05, of eight 1.01-1.20).
constexpr int64_t kBandBytes = 4 * kCpuLineBytes;
// Elements a flat copy's task moves: 64 KiB.
constexpr int64_t kFlatTaskBytes = 64 << 10;

// The dimensions of `shape` larger than 1, major first in its layout.
std::vector<int64_t> NonTrivialDimensions(const Shape& shape) {
  std::vector<int64_t> order;
  for (int64_t d : MajorToMinor(shape)) {
    if (shape.dimensions(d) > 1) order.push_back(d);
  }
  return order;
}

}  // namespace

StatusOr<bool> KernelBuilder::TryEmitCpuTranspose() {
  if (target_ != KernelTarget::kCpu || outputs_.size() != 1 || !root_->shape().IsArray()) return false;
  if (root_->opcode() != HloOpcode::kTranspose && root_->opcode() != HloOpcode::kCopy) return false;
  // The operand straight from its buffer (a fusion's parameter, an unfused op's operand).
  const HloInstruction* operand = root_->operand(0);
  const Binding* source = nullptr;
  for (const Binding& binding : bindings_) {
    if (binding.hlo == operand && binding.shape_index.empty() && binding.scratch_offset < 0) {
      source = &binding;
    }
  }
  const Shape& out = output_shapes_[0];
  if (source == nullptr || !source->shape.IsArray() || out.num_elements() == 0 ||
      source->shape.element_type() != out.element_type() ||
      source->shape.dimensions().size() != out.dimensions().size()) {
    return false;
  }
  const Shape& in = source->shape;
  const PrimitiveType type = out.element_type();
  if (type == PrimitiveType::PRED || BitWidth(type) % 8 != 0) return false;
  // Bits moved unchanged: each element as an integer of its width.
  const int64_t width = ByteWidth(type);
  llvm::Type* storage = b_.getIntNTy(static_cast<unsigned>(width * 8));
  const int64_t rank = out.rank();
  // The operand dimension each result dimension reads.
  std::vector<int64_t> perm(rank);
  for (int64_t d = 0; d < rank; ++d) {
    perm[d] = root_->opcode() == HloOpcode::kTranspose ? root_->dimensions()[d] : d;
  }
  const int64_t threshold = StreamingStoreThreshold();
  const int64_t bytes = out.num_elements() * width;
  const bool streamed = threshold > 0 && bytes >= threshold;

  if (KeepsPhysicalOrder(in, out, perm)) {
    // The same bytes in the same order.
    const int64_t task_elements = std::max<int64_t>(1, kFlatTaskBytes / width);
    const int64_t elements = out.num_elements();
    const int64_t tasks = (elements + task_elements - 1) / task_elements;
    llvm::Function* f = NewPhase(false, tasks, task_elements);
    Value* from = ArrayOf(*source).base();
    Value* to = OutputArray(0).base();
    RETURN_IF_ERROR(EmitForLoop(b_, f->getArg(1), f->getArg(2), "task", [&](Value* task) -> Status {
      Value* start = b_.CreateMul(task, b_.getInt64(task_elements));
      Value* stop = b_.CreateAdd(start, b_.getInt64(task_elements));
      Value* end = b_.CreateSelect(b_.CreateICmpSLT(stop, b_.getInt64(elements)), stop, b_.getInt64(elements));
      Value* count = b_.CreateSub(end, start);
      Value* destination = b_.CreateInBoundsGEP(storage, to, {start});
      Value* origin = b_.CreateInBoundsGEP(storage, from, {start});
      if (streamed && (width == 1 || width == 2 || width == 4 || width == 8 || width == 16)) {
        cpu::EmitStreamingCopy(b_, destination, origin, count, width, cpu::kStreamPrefetchBytes);
      } else {
        b_.CreateMemCpy(destination, llvm::MaybeAlign(width), origin, llvm::MaybeAlign(width),
                        b_.CreateMul(count, b_.getInt64(width)));
      }
      return OkStatus();
    }));
    if (streamed) cpu::EmitStreamingFence(b_);
    b_.CreateRetVoid();
    return true;
  }

  // A tiled transpose: whole lines of 2-, 4- and 8-byte elements.
  if (width != 2 && width != 4 && width != 8) return false;
  const int64_t lanes = kCpuLineBytes / width;
  const std::vector<int64_t> in_order = NonTrivialDimensions(in);
  const std::vector<int64_t> out_order = NonTrivialDimensions(out);
  const int64_t m = in_order.back();         // the operand's minor dimension
  const int64_t p = perm[out_order.back()];  // the operand dimension the result's minor one reads
  const int64_t size_p = in.dimensions(p), size_m = in.dimensions(m);
  if (p == m || size_p < lanes || size_m < lanes) return false;
  // Strides in elements, by operand dimension, of the operand and of the result.
  const std::vector<int64_t> in_stride = LayoutStrides(in);
  std::vector<int64_t> out_stride(rank);
  {
    const std::vector<int64_t> s = LayoutStrides(out);
    for (int64_t d = 0; d < rank; ++d) out_stride[perm[d]] = s[d];
  }
  std::vector<int64_t> batch_dims, batch_sizes;  // every other dimension, major first
  int64_t batch = 1;
  for (int64_t d : in_order) {
    if (d != p && d != m) {
      batch_dims.push_back(d);
      batch_sizes.push_back(in.dimensions(d));
      batch *= in.dimensions(d);
    }
  }
  // Non-temporal stores need every result row of the tile to start on a line.
  bool lines = streamed;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != p && in.dimensions(d) > 1 && out_stride[d] * width % kCpuLineBytes != 0) lines = false;
  }
  const int64_t band = std::min(size_p, kBandBytes / width);
  const int64_t bands = (size_p + band - 1) / band;
  llvm::Function* f = NewPhase(false, batch * bands, band * size_m);
  Value* from = ArrayOf(*source).base();
  Value* to = OutputArray(0).base();
  // Non-temporal stores only where the output's buffer starts on a line (buffer assignment
  // aligns to 64 bytes by default, a caller's buffer may not be).
  Value* aligned = b_.getFalse();
  if (lines) {
    aligned = b_.CreateICmpEQ(b_.CreateAnd(b_.CreatePtrToInt(to, b_.getInt64Ty()), b_.getInt64(kCpuLineBytes - 1)),
                              b_.getInt64(0));
  }
  auto* vector = llvm::FixedVectorType::get(storage, static_cast<unsigned>(lanes));
  const llvm::Align element_align(static_cast<uint64_t>(width));
  RETURN_IF_ERROR(EmitForLoop(b_, f->getArg(1), f->getArg(2), "task", [&](Value* task) -> Status {
    Value* in_base = b_.getInt64(0);
    Value* out_base = b_.getInt64(0);
    Value* band_index = task;
    if (batch > 1) {
      band_index = b_.CreateURem(task, b_.getInt64(bands));
      IrIndex index = DelinearizeRowMajor(b_, b_.CreateUDiv(task, b_.getInt64(bands)), batch_sizes);
      for (size_t j = 0; j < batch_dims.size(); ++j) {
        in_base = b_.CreateAdd(in_base, b_.CreateMul(index[j], b_.getInt64(in_stride[batch_dims[j]])));
        out_base = b_.CreateAdd(out_base, b_.CreateMul(index[j], b_.getInt64(out_stride[batch_dims[j]])));
      }
    }
    Value* p0 = b_.CreateMul(band_index, b_.getInt64(band));
    Value* p_stop = b_.CreateAdd(p0, b_.getInt64(band));
    Value* p1 = b_.CreateSelect(b_.CreateICmpSLT(p_stop, b_.getInt64(size_p)), p_stop, b_.getInt64(size_p));
    // The band's whole blocks of `lanes` rows of p, and of `lanes` columns of m.
    Value* blocks_p = b_.CreateUDiv(b_.CreateSub(p1, p0), b_.getInt64(lanes));
    const int64_t blocks_m = size_m / lanes;
    auto in_at = [&](Value* r, Value* c) {  // element (p = r, m = c) of the operand
      Value* offset = b_.CreateAdd(in_base, b_.CreateAdd(b_.CreateMul(r, b_.getInt64(in_stride[p])), c));
      return b_.CreateInBoundsGEP(storage, from, {offset});
    };
    auto out_at = [&](Value* r, Value* c) {  // the same element in the result
      Value* offset = b_.CreateAdd(out_base, b_.CreateAdd(r, b_.CreateMul(c, b_.getInt64(out_stride[m]))));
      return b_.CreateInBoundsGEP(storage, to, {offset});
    };
    RETURN_IF_ERROR(EmitForLoop(b_, b_.getInt64(0), b_.getInt64(blocks_m), "column", [&](Value* column) -> Status {
      Value* c0 = b_.CreateMul(column, b_.getInt64(lanes));
      return EmitForLoop(b_, b_.getInt64(0), blocks_p, "block", [&](Value* block) -> Status {
        Value* r0 = b_.CreateAdd(p0, b_.CreateMul(block, b_.getInt64(lanes)));
        std::vector<Value*> rows;
        for (int64_t i = 0; i < lanes; ++i) {
          rows.push_back(b_.CreateAlignedLoad(vector, in_at(b_.CreateAdd(r0, b_.getInt64(i)), c0), element_align));
        }
        rows = EmitTransposeInRegisters(b_, std::move(rows));
        auto store_rows = [&](bool whole_lines) {
          for (int64_t j = 0; j < lanes; ++j) {
            llvm::StoreInst* store = b_.CreateAlignedStore(
                rows[j], out_at(r0, b_.CreateAdd(c0, b_.getInt64(j))),
                whole_lines ? llvm::Align(kCpuLineBytes) : element_align);
            if (whole_lines) cpu::MarkNonTemporal(store);
          }
        };
        if (!lines) {
          store_rows(false);
          return OkStatus();
        }
        llvm::Function* fn = b_.GetInsertBlock()->getParent();
        auto* streamed_block = llvm::BasicBlock::Create(b_.getContext(), "block.stream", fn);
        auto* plain_block = llvm::BasicBlock::Create(b_.getContext(), "block.plain", fn);
        auto* done = llvm::BasicBlock::Create(b_.getContext(), "block.stored", fn);
        b_.CreateCondBr(aligned, streamed_block, plain_block);
        b_.SetInsertPoint(streamed_block);
        store_rows(true);
        b_.CreateBr(done);
        b_.SetInsertPoint(plain_block);
        store_rows(false);
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
        return OkStatus();
      });
    }));
    // What the blocks leave: the columns of m past the last whole block (all of the band's
    // rows), then the band's rows past its last whole block (the columns before those).
    auto copy_rectangle = [&](Value* r_begin, Value* r_end, Value* c_begin, Value* c_end) {
      return EmitForLoop(b_, c_begin, c_end, "rest.column", [&](Value* c) -> Status {
        return EmitForLoop(b_, r_begin, r_end, "rest.row", [&](Value* r) -> Status {
          b_.CreateAlignedStore(b_.CreateAlignedLoad(storage, in_at(r, c), element_align), out_at(r, c),
                                element_align);
          return OkStatus();
        });
      });
    };
    Value* whole_m = b_.getInt64(blocks_m * lanes);
    if (size_m % lanes != 0) RETURN_IF_ERROR(copy_rectangle(p0, p1, whole_m, b_.getInt64(size_m)));
    Value* whole_p = b_.CreateAdd(p0, b_.CreateMul(blocks_p, b_.getInt64(lanes)));
    return copy_rectangle(whole_p, p1, b_.getInt64(0), whole_m);
  }));
  if (lines) cpu::EmitStreamingFence(b_);
  b_.CreateRetVoid();
  return true;
}

}  // namespace xlens::codegen

// Streaming stores (cpu_streaming_store.h) and the CPU element loop that writes its outputs with
// them (KernelBuilder::EmitCpuStreamedLoop).
#include "compiler/codegen/cpu/cpu_streaming_store.h"

#include <algorithm>
#include <bit>
#include <set>
#include <string>

#include <fmt/format.h>
#include <llvm/IR/IntrinsicsX86.h>

#include "compiler/codegen/cpu/cpu_row_loops.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/hlo/computation.h"
#include "compiler/hlo/module.h"
#include "profiler/machine_limits.h"

namespace xlens::codegen {

using llvm::Value;

namespace cpu {
namespace {

constexpr int64_t kLine = 64;

}  // namespace

bool HasStreamingStores() {
#if defined(__x86_64__)
  return true;
#else
  return false;
#endif
}

int64_t DefaultStreamingStoreBytes() {
  static const int64_t bytes = [] {
    if (!HasStreamingStores()) return int64_t{0};
    // At most kMaxCacheBytesPerCpu for each CPU sharing it: a virtual machine's view of its
    // host's whole cache streamed nothing under 240 MiB (batch norm's 25.7 MB of y and dx
    // written with plain stores, each line read before it was written).
    const int64_t llc = profiler::LastLevelCacheBytes();
    // An unknown cache: as large as today's larger server parts', so that only loops that
    // surely miss it stream.
    return std::max<int64_t>(int64_t{1} << 20, (llc > 0 ? llc : int64_t{64} << 20) / 2);
  }();
  return bytes;
}

int64_t StreamingStoreBytesFor(const HloInstruction& hlo, const BufferAssignment* assignment) {
  const int64_t threshold = DefaultStreamingStoreBytes();
  const HloComputation* computation = hlo.parent();
  const HloModule* module = computation == nullptr ? nullptr : computation->parent();
  if (threshold == 0 || assignment == nullptr || module == nullptr ||
      computation != module->entry_computation()) {
    return 0;
  }
  const HloComputation* entry = computation;
  std::vector<BufferSlice> outputs;
  bool known = true;
  hlo.shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
    if (!s.IsArray()) return;
    auto slice = assignment->GetSlice(hlo, index);
    if (slice.ok()) {
      outputs.push_back(*slice);
    } else {
      known = false;
    }
  });
  if (!known) return 0;
  for (const HloInstruction* operand : hlo.operands()) {
    bool shared = false;
    operand->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
      if (!s.IsArray() || shared) return;
      auto slice = assignment->GetSlice(*operand, index);
      if (!slice.ok()) return;
      for (const BufferSlice& out : outputs) {
        shared |= out.allocation == slice->allocation && out.offset < slice->offset + slice->size &&
                  slice->offset < out.offset + out.size;
      }
    });
    if (shared) return 0;
  }
  // Operands and results that fit in the cache together can stay there from one run to the next.
  // At the cache's size streaming already wins where other work shares the cache: a layer norm
  // over 16 MiB (32 MiB moved, as large as the cache) took 0.47 ms a run streamed and 0.43 with
  // plain stores on an idle machine, but 1.0 and 1.5 ms beside other work; at load 5-7 streaming
  // gave the lower median in 16 of 16 alternating pairs of 200 runs (0.76-1.03 against 1.38-3.47
  // ms) and the better best run in 14 (0.31-0.62 against 0.40-0.76). A copy of the same 16 MiB
  // with plain stores keeps more of its bytes in the cache than a layer norm does: in a C model of
  // both on two threads (18 groups of 100 runs, medians of the groups' best runs) the plain copy
  // took 0.27 ms and the streamed one 0.31, but the plain layer norm 0.44 and the streamed 0.37.
  int64_t working_set = 0;
  for (const HloInstruction* x : hlo.operands()) {
    x->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
      if (s.IsArray()) working_set += shape_util::ByteSizeOf(s);
    });
  }
  for (const BufferSlice& out : outputs) working_set += out.size;
  if (working_set < 2 * threshold) return 0;
  const HloInstruction* root = entry->root_instruction();
  bool returned = &hlo == root;
  if (!returned && root->opcode() == HloOpcode::kTuple && !hlo.users().empty()) {
    // A multi-output fusion's results reach the root through get-tuple-elements (batch norm's
    // y and dx): read as values a later kernel takes, their 25.7 MB stayed under twice the
    // threshold and were written with plain stores, each line read first and x and dy evicted.
    // A small result that a later kernel reads does not count: it is in the cache however the
    // large ones are written. Batch norm's kernel also yields its per-channel sums (512 bytes)
    // to small kernels that finish the gradients of gamma and beta; counted, they kept y and dx
    // on plain stores after the sums joined the kernel.
    auto only_returned = [&](const HloInstruction* user) { return user == root; };
    returned = std::all_of(hlo.users().begin(), hlo.users().end(), [&](const HloInstruction* user) {
      if (user == root) return true;
      if (user->opcode() != HloOpcode::kGetTupleElement || user->users().empty()) return false;
      if (user->shape().IsArray() && shape_util::ByteSizeOf(user->shape()) * 16 <= threshold) {
        return true;
      }
      return std::all_of(user->users().begin(), user->users().end(), only_returned);
    });
  }
  return returned ? threshold : 2 * threshold;
}

void EmitL2Prefetch(llvm::IRBuilder<>& b, Value* address) {
  b.CreateIntrinsic(llvm::Intrinsic::prefetch, {b.getPtrTy()},
                    {address, /*write=*/b.getInt32(0), /*locality=*/b.getInt32(1), /*data=*/b.getInt32(1)});
}

void EmitStreamingCopy(llvm::IRBuilder<>& b, Value* destination, Value* source, Value* elements,
                       int64_t element_bytes, int64_t prefetch_bytes) {
  llvm::Type* element = b.getIntNTy(static_cast<unsigned>(element_bytes * 8));
  const llvm::Align element_align(static_cast<uint64_t>(element_bytes));
  auto copy_elements = [&](Value* begin, Value* end, std::string_view name) {
    (void)EmitForLoop(b, begin, end, name, [&](Value* i) -> Status {
      Value* v = b.CreateAlignedLoad(element, b.CreateInBoundsGEP(element, source, {i}), element_align);
      b.CreateAlignedStore(v, b.CreateInBoundsGEP(element, destination, {i}), element_align);
      return OkStatus();
    });
  };
  const int shift = std::countr_zero(static_cast<uint64_t>(element_bytes));
  Value* bytes = b.CreateShl(elements, b.getInt64(shift));
  // Elements before the destination's first 64-byte boundary (none past the end).
  Value* address = b.CreatePtrToInt(destination, b.getInt64Ty());
  Value* to_boundary = b.CreateAnd(b.CreateNeg(address), b.getInt64(kLine - 1));
  Value* head_bytes = b.CreateSelect(b.CreateICmpULT(to_boundary, bytes), to_boundary, bytes);
  Value* head = b.CreateLShr(head_bytes, b.getInt64(shift));
  copy_elements(b.getInt64(0), head, "stream.head");
  // Whole lines, each one aligned vector store that writes the line without reading it.
  Value* lines = b.CreateLShr(b.CreateSub(bytes, head_bytes), b.getInt64(6));
  auto* line_type = llvm::FixedVectorType::get(b.getInt32Ty(), kLine / 4);
  (void)EmitForLoop(b, b.getInt64(0), lines, "stream.line", [&](Value* line) -> Status {
    Value* offset = b.CreateAdd(head_bytes, b.CreateShl(line, b.getInt64(6)));
    if (prefetch_bytes > 0) {
      EmitL2Prefetch(b, b.CreateGEP(b.getInt8Ty(), source, {b.CreateAdd(offset, b.getInt64(prefetch_bytes))}));
    }
    Value* v = b.CreateAlignedLoad(line_type, b.CreateInBoundsGEP(b.getInt8Ty(), source, {offset}),
                                   element_align);
    llvm::StoreInst* store = b.CreateAlignedStore(
        v, b.CreateInBoundsGEP(b.getInt8Ty(), destination, {offset}), llvm::Align(kLine));
    MarkNonTemporal(store);
    return OkStatus();
  });
  Value* tail = b.CreateAdd(head, b.CreateShl(lines, b.getInt64(6 - shift)));
  copy_elements(tail, elements, "stream.tail");
}

void MarkNonTemporal(llvm::StoreInst* store) {
  llvm::LLVMContext& c = store->getContext();
  store->setMetadata(llvm::LLVMContext::MD_nontemporal,
                     llvm::MDNode::get(c, {llvm::ConstantAsMetadata::get(
                                              llvm::ConstantInt::get(llvm::Type::getInt32Ty(c), 1))}));
}

void EmitStreamingFence(llvm::IRBuilder<>& b) {
#if defined(__x86_64__)
  b.CreateIntrinsic(llvm::Intrinsic::x86_sse_sfence, {}, {});
#else
  (void)b;
#endif
}

}  // namespace cpu

namespace {

// Whether `hlo` reads an operand across its layout (a transpose, or a copy that changes the
// layout, that moves elements): its loads are strided, and a longer inner loop keeps more of
// them in flight. A transpose that is a bitcast in bytes reads in memory order.
bool ReadsAcrossLayout(const HloInstruction& hlo) {
  auto across = [](const HloInstruction& x) {
    if (x.opcode() != HloOpcode::kTranspose && x.opcode() != HloOpcode::kCopy) return false;
    const Shape& in = x.operand(0)->shape();
    if (!in.IsArray() || !x.shape().IsArray()) return false;
    std::vector<int64_t> perm(x.shape().rank());
    for (int64_t d = 0; d < x.shape().rank(); ++d) {
      perm[d] = x.opcode() == HloOpcode::kTranspose ? x.dimensions()[d] : d;
    }
    return !KeepsPhysicalOrder(in, x.shape(), perm);
  };
  if (hlo.opcode() != HloOpcode::kFusion) return across(hlo);
  for (const HloInstruction* x : hlo.fused_computation()->MakeInstructionPostOrder()) {
    if (across(*x)) return true;
  }
  return false;
}

// Types whose element loop the loop vectorizer makes one vector of a line (cpu_row_loops.h's
// RequestOneVector): f32, f64 and the 32- and 64-bit integers.
bool LineVectorType(PrimitiveType type) {
  return type == PrimitiveType::F32 || type == PrimitiveType::F64 || type == PrimitiveType::S32 ||
         type == PrimitiveType::U32 || type == PrimitiveType::S64 || type == PrimitiveType::U64;
}

// Whether `hlo` reduces an array of `shape`'s dimensions before its element loop over `shape`
// (batch norm's outputs after its statistics, in the same kernel): the loop then reads back from
// the cache what the sweep just read, rather than from memory.
bool RereadsWhatItReduced(const HloInstruction& hlo, const Shape& shape) {
  if (hlo.opcode() != HloOpcode::kFusion) return false;
  for (const HloInstruction* x : hlo.fused_computation()->instructions()) {
    if (x->opcode() == HloOpcode::kReduce && x->operand(0)->shape().IsArray() &&
        x->operand(0)->shape().dimensions() == shape.dimensions()) {
      return true;
    }
  }
  return false;
}

// Whether the loop writing `root`'s elements reads fused parameter (or unfused operand)
// `operand` at the element it writes, in memory order where their layouts agree: every path from
// it to the root goes through elementwise operations of its dimensions only (no broadcast, slice,
// transpose or reduction re-indexes it), and one at least reaches it.
bool ReadInPlace(const HloInstruction& operand, const HloInstruction& root) {
  if (root.opcode() != HloOpcode::kFusion) return root.IsElementwise();
  const HloInstruction* fused_root = root.fused_computation()->root_instruction();
  std::set<const HloInstruction*> seen;
  std::vector<const HloInstruction*> pending = {&operand};
  while (!pending.empty()) {
    const HloInstruction* x = pending.back();
    pending.pop_back();
    if (!seen.insert(x).second) continue;
    // A value no output uses (a parameter the fusion does not read) is not read at all.
    if (x->users().empty() && x != fused_root) return false;
    for (const HloInstruction* user : x->users()) {
      if (user->opcode() == HloOpcode::kTuple && user == fused_root) continue;
      if (!user->IsElementwise() || !user->shape().IsArray() ||
          user->shape().dimensions() != operand.shape().dimensions()) {
        return false;
      }
      pending.push_back(user);
    }
  }
  return true;
}

// Elements per output leaf computed before they are written out.
int64_t StageElements(int64_t element_bytes, bool strided) {
  return (strided ? cpu::kStridedStreamingStretchBytes : cpu::kStreamingStretchBytes) / element_bytes;
}

}  // namespace

int64_t KernelBuilder::StreamingStoreThreshold() const {
  if (target_ != KernelTarget::kCpu || !cpu::HasStreamingStores()) return 0;
  return options_.cpu_streaming_store_bytes < 0 ? cpu::DefaultStreamingStoreBytes()
                                                : options_.cpu_streaming_store_bytes;
}

bool KernelBuilder::StreamsOutputs(const OutputGroup& group) const {
  const int64_t threshold = StreamingStoreThreshold();
  if (threshold == 0) return false;
  int64_t bytes = 0;
  for (const auto& [hlo, first_leaf] : group) {
    // Array outputs only (one leaf each), of types stored in whole bytes.
    const Shape& s = output_shapes_[first_leaf];
    if (hlo->shape().IsTuple() || !s.IsArray() || s.rank() == 0 ||
        !IsCodegenSupportedType(s.element_type())) {
      return false;
    }
    const int64_t width = ByteWidth(s.element_type());
    if (width != 1 && width != 2 && width != 4 && width != 8 && width != 16) return false;
    bytes += s.num_elements() * width;
  }
  return bytes >= threshold;
}

Status KernelBuilder::EmitCpuStreamedLoop(const Shape& shape, int64_t work_per_element,
                                          const OutputGroup& group) {
  const std::vector<int64_t> order = MajorToMinor(shape);
  const int64_t minor = order.back();
  const int64_t n = shape.dimensions(minor);
  const int64_t elements = shape.num_elements();
  // Tasks as EmitParallelLoop makes them.
  const int64_t block = std::min(n, TaskElements(work_per_element));
  const int64_t blocks = (n + block - 1) / block;
  const int64_t rows = elements / n;
  llvm::Function* f = NewPhase(false, rows * blocks, block * work_per_element);
  if (n % block == 0) spec_.phases.back().elements_per_task = block;
  auto e = MakeEmitter();
  // The leaves the group writes: their output slot, storage type and stack buffer.
  struct Leaf {
    int64_t output;  // leaf of the kernel's result
    PrimitiveType type;
    llvm::Type* storage;
    int64_t width;
    llvm::AllocaInst* stage;
  };
  std::vector<Leaf> leaves;
  for (const auto& [hlo, first_leaf] : group) {
    (void)hlo;
    const PrimitiveType type = output_shapes_[first_leaf].element_type();
    ASSIGN_OR_RETURN(llvm::Type * storage, StorageType(type, module_.getContext()));
    leaves.push_back({first_leaf, type, storage, ByteWidth(type), nullptr});
  }
  int64_t stage = n;
  const bool strided = ReadsAcrossLayout(hlo_);
  for (const Leaf& leaf : leaves) stage = std::min(stage, StageElements(leaf.width, strided));
  for (Leaf& leaf : leaves) {
    leaf.stage = EmitEntryAlloca(b_, llvm::ArrayType::get(leaf.storage, stage), "stage");
    leaf.stage->setAlignment(llvm::Align(64));
  }
  // Elements of a line where the loop re-reads what the kernel reduced, and rows and tasks are
  // whole lines of every output, all of one width and of a type the loop vectorizer widens; 0
  // otherwise (see the line loop below).
  int64_t line_elements = 0;
  if (!strided && RereadsWhatItReduced(hlo_, shape) && cpu::kLine % leaves[0].width == 0 &&
      n * leaves[0].width % cpu::kLine == 0 && block * leaves[0].width % cpu::kLine == 0) {
    line_elements = cpu::kLine / leaves[0].width;
    for (const Leaf& leaf : leaves) {
      if (leaf.width != leaves[0].width || !LineVectorType(leaf.type)) line_elements = 0;
    }
  }
  std::vector<llvm::AllocaInst*> line_stages;
  if (line_elements > 0) {
    for (const Leaf& leaf : leaves) {
      line_stages.push_back(EmitEntryAlloca(b_, llvm::ArrayType::get(leaf.storage, line_elements), "line.stage"));
      line_stages.back()->setAlignment(llvm::Align(64));
    }
  }
  std::vector<llvm::AllocaInst*> stretch_stages;
  for (const Leaf& leaf : leaves) stretch_stages.push_back(leaf.stage);
  // The operands read in place, in the outputs' layout, from memory (not re-read after the
  // kernel's own reduction swept them), which the stretches prefetch ahead (cpu::kStreamPrefetchBytes).
  struct Prefetched {
    IrArray array;
    int64_t width;
  };
  std::vector<Prefetched> prefetched;
  if (!RereadsWhatItReduced(hlo_, shape)) {
    for (const Binding& binding : bindings_) {
      if (binding.scratch_offset < 0 && binding.shape_index.empty() && binding.shape.IsArray() &&
          binding.shape.dimensions() == shape.dimensions() && MajorToMinor(binding.shape) == order &&
          ReadInPlace(*binding.hlo, hlo_)) {
        prefetched.push_back({ArrayOf(binding), ByteWidth(binding.shape.element_type())});
      }
    }
  }
  if (static_cast<int64_t>(prefetched.size()) > cpu::kMaxPrefetchedStreams) prefetched.clear();
  // Tasks in address order, also where the loop re-reads what a column sweep of the same kernel
  // just read (batch norm's outputs read x and dy again after their statistics). Walking back from
  // the last rows swept, the likeliest to be cached, is no faster on a 2-core Zen 4 (batch norm's
  // kernel over f32[32,28,28,128]: 0.78 against 0.80 ms where the cache holds x and dy, the same
  // at 1.5 and 2 times their size); rows backward but each row forward slows the output loop
  // (0.47 -> 0.52 ms), and a column sweep taking its slices last first is no faster either (1.77
  // against 1.75 ms). What matters is that a thread re-reads the part it swept, which the
  // runtime's pool keeps: a CPU reads again the 16 MB it just read at 73-77 GB/s, the other CPU
  // at 34-40, memory's rate.
  RETURN_IF_ERROR(e->EmitLoop(f->getArg(1), f->getArg(2), "task", [&](Value* task) -> Status {
    const std::vector<int64_t> outer(order.begin(), order.end() - 1);
    auto [index, begin, end] = EmitTaskRange(task, shape, outer, minor, block, blocks);
    // The physical position of the row's first element: the loop walks the shape in physical
    // order, so element i of the task's row is at row * n + i in every output.
    Value* row = blocks == 1 ? task : b_.CreateUDiv(task, b_.getInt64(blocks));
    Value* row_start = b_.CreateMul(row, b_.getInt64(n));
    // Element `i` of every output, each computed before any is stored (as EmitOutputs does), at
    // `at` of its stack buffer in `stages` (the stretch's or the line's).
    auto emit_element_to_stages = [&](Value* i, Value* at, const std::vector<llvm::AllocaInst*>& stages) -> Status {
      index[minor] = i;
      std::vector<Value*> values;
      for (const auto& [hlo, first_leaf] : group) {
        (void)first_leaf;
        ASSIGN_OR_RETURN(std::vector<Value*> out, e->EmitLeaves(hlo, index));
        if (out.size() != 1) return Error(fmt::format("{}: one leaf expected", hlo->name()));
        values.push_back(out[0]);
      }
      for (size_t j = 0; j < leaves.size(); ++j) {
        llvm::StoreInst* store = b_.CreateStore(ValueToStorage(b_, leaves[j].type, values[j]),
                                                b_.CreateInBoundsGEP(leaves[j].storage, stages[j], {at}));
        if (access_group_ != nullptr) store->setMetadata(llvm::LLVMContext::MD_access_group, access_group_);
      }
      return OkStatus();
    };
    auto stretch_loop = [&]() -> Status {
      // Where rows or tasks are not whole lines (rows of 1000 floats), stretches after the first
      // start on a line of the first output: the copy's vector loads then match the element loop's
      // vector stores to the buffer one for one, instead of each waiting on two of them
      // (b + 3c over f32[16384,1000]: 5.4 -> 4.3 ms a run beside other work, as over f32[16000,1024]).
      Value* shift = b_.getInt64(0);
      if (stage < block && (n * leaves[0].width % cpu::kLine != 0 || block * leaves[0].width % cpu::kLine != 0)) {
        Value* first = b_.CreateInBoundsGEP(leaves[0].storage, OutputArray(leaves[0].output).base(),
                                            {b_.CreateAdd(row_start, begin)});
        Value* head = b_.CreateUDiv(b_.CreateAnd(b_.CreateNeg(b_.CreatePtrToInt(first, b_.getInt64Ty())),
                                                 b_.getInt64(cpu::kLine - 1)),
                                    b_.getInt64(leaves[0].width));
        shift = b_.CreateURem(b_.CreateSub(b_.getInt64(stage), head), b_.getInt64(stage));
      }
      Value* stretches = b_.CreateUDiv(
          b_.CreateAdd(b_.CreateAdd(b_.CreateSub(end, begin), shift), b_.getInt64(stage - 1)),
          b_.getInt64(stage));
      return e->EmitLoop(b_.getInt64(0), stretches, "stretch", [&](Value* k) -> Status {
        Value* start = b_.CreateSub(b_.CreateAdd(begin, b_.CreateMul(k, b_.getInt64(stage))), shift);
        Value* from = b_.CreateSelect(b_.CreateICmpSLT(start, begin), begin, start);
        Value* stop = b_.CreateAdd(start, b_.getInt64(stage));
        Value* to = b_.CreateSelect(b_.CreateICmpSLT(stop, end), stop, end);
        // The lines of this stretch kStreamPrefetchBytes ahead in each operand read in place
        // (prefetches never fault: past the array's end they are dropped).
        for (const Prefetched& p : prefetched) {
          Value* first_byte = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(row_start, from), b_.getInt64(p.width)),
                                           b_.getInt64(cpu::kStreamPrefetchBytes));
          for (int64_t line = 0; line < (stage * p.width + cpu::kLine - 1) / cpu::kLine; ++line) {
            cpu::EmitL2Prefetch(b_, b_.CreateGEP(b_.getInt8Ty(), p.array.base(),
                                                 {b_.CreateAdd(first_byte, b_.getInt64(line * cpu::kLine))}));
          }
        }
        // Every output's element is computed before any is stored (as EmitOutputs does); the
        // stores go to the stack, the outputs are written after the stretch.
        RETURN_IF_ERROR(e->EmitLoop(from, to, "element", [&](Value* i) -> Status {
          return emit_element_to_stages(i, b_.CreateSub(i, from), stretch_stages);
        }, access_group_));
        Value* count = b_.CreateSub(to, from);
        for (const Leaf& leaf : leaves) {
          Value* base = OutputArray(leaf.output).base();
          Value* destination =
              b_.CreateInBoundsGEP(leaf.storage, base, {b_.CreateAdd(row_start, from)});
          cpu::EmitStreamingCopy(b_, destination, leaf.stage, count, leaf.width);
        }
        return OkStatus();
      });
    };
    if (line_elements == 0) return stretch_loop();
    // A loop that re-reads what its kernel reduced, over rows and tasks of whole lines whose
    // outputs start on a line (checked per task), writes a line at a time straight from the
    // registers that compute it, as the row kernels write theirs (cpu_row_emitter.cc): the line's
    // element loop is one vector, and its store to a line-sized stack buffer and the reload
    // become one value, stored with one aligned non-temporal store per output. Through the
    // stretch buffers every output vector was stored and loaded again besides, and the copy's
    // head and tail ran for each stretch; with its operands in the cache the loop's own
    // instructions count. Batch norm's kernel over f32[32,28,28,128] (y and dx after the
    // statistics) on one core, best of 50 runs, 8 alternating pairs on a 2-core Zen 4 beside
    // other work: 1.68-2.06 -> 1.58-1.72 ms, lower in every pair (median of the bests 1.72 ->
    // 1.61). Reading from memory the stretches stay: b + 3c over 64 MiB lost 2% a line at a
    // time on both cores (best 2.63 -> 2.73 ms, higher in 12 of 14 pairs), no change on one.
    std::vector<Value*> starts;
    Value* aligned = b_.getTrue();
    for (const Leaf& leaf : leaves) {
      Value* start = b_.CreateInBoundsGEP(leaf.storage, OutputArray(leaf.output).base(),
                                          {b_.CreateAdd(row_start, begin)});
      starts.push_back(start);
      aligned = b_.CreateAnd(aligned, b_.CreateICmpEQ(b_.CreateAnd(b_.CreatePtrToInt(start, b_.getInt64Ty()),
                                                                   b_.getInt64(63)),
                                                      b_.getInt64(0)));
    }
    RETURN_IF_ERROR(e->EmitIf(aligned, "lines", [&]() -> Status {
      Value* lines = b_.CreateUDiv(b_.CreateSub(end, begin), b_.getInt64(line_elements));
      return e->EmitLoop(b_.getInt64(0), lines, "line", [&](Value* line) -> Status {
        Value* first = b_.CreateAdd(begin, b_.CreateMul(line, b_.getInt64(line_elements)));
        llvm::BasicBlock* header = nullptr;
        RETURN_IF_ERROR(e->EmitLoop(first, b_.CreateAdd(first, b_.getInt64(line_elements)), "line.element",
                                    [&](Value* i) -> Status {
          header = b_.GetInsertBlock()->getSinglePredecessor();
          return emit_element_to_stages(i, b_.CreateSub(i, first), line_stages);
        }, access_group_));
        RequestOneVector(header, static_cast<unsigned>(line_elements));
        for (size_t j = 0; j < leaves.size(); ++j) {
          auto* vector = llvm::FixedVectorType::get(leaves[j].storage, static_cast<unsigned>(line_elements));
          Value* v = b_.CreateAlignedLoad(vector, line_stages[j], llvm::Align(64));
          cpu::MarkNonTemporal(b_.CreateAlignedStore(
              v, b_.CreateInBoundsGEP(leaves[j].storage, starts[j], {b_.CreateSub(first, begin)}),
              llvm::Align(64)));
        }
        return OkStatus();
      });
    }));
    return e->EmitIf(b_.CreateNot(aligned), "stretches", stretch_loop);
  }));
  cpu::EmitStreamingFence(b_);
  b_.CreateRetVoid();
  return OkStatus();
}

}  // namespace xlens::codegen

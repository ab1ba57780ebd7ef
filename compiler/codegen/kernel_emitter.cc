#include "compiler/codegen/kernel_emitter.h"

#include "compiler/codegen/kernel_builder.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "compiler/codegen/cpu/cpu_column_reduction.h"
#include "compiler/codegen/elemental_ir_emitter.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/codegen/scalar_ops.h"
#include "compiler/hlo/computation.h"
#include "compiler/passes/fusion_utils.h"

namespace xlens::codegen {

using llvm::Value;

std::string SanitizeName(std::string_view name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "k_" + out;
  return out;
}

std::string UniqueKernelName(std::string_view hlo_name, std::set<std::string>& taken) {
  const std::string base = SanitizeName(hlo_name);
  std::string name = base;
  for (int i = 1; taken.count(name); ++i) name = fmt::format("{}_{}", base, i);
  taken.insert(name);
  return name;
}

bool IsKernelInstruction(const HloInstruction& hlo) {
  switch (hlo.opcode()) {
    case HloOpcode::kParameter: case HloOpcode::kConstant: case HloOpcode::kTuple:
    case HloOpcode::kGetTupleElement: case HloOpcode::kBitcast: case HloOpcode::kAddDependency:
    case HloOpcode::kOptimizationBarrier: case HloOpcode::kDomain: case HloOpcode::kAfterAll:
    case HloOpcode::kWhile: case HloOpcode::kConditional: case HloOpcode::kCall:
    case HloOpcode::kSort: case HloOpcode::kCustomCall:
      return false;
    default:
      return true;
  }
}

namespace {

bool IsExpensivePerElement(HloOpcode op) {
  return op == HloOpcode::kReduce || op == HloOpcode::kReduceWindow || op == HloOpcode::kDot ||
         op == HloOpcode::kConvolution;
}

// Work per element of an instruction's result: the length of its inner loops, roughly.
int64_t WorkPerElement(const HloInstruction& hlo) {
  switch (hlo.opcode()) {
    case HloOpcode::kReduce: {
      // Input elements per output element (a variadic reduce's outputs share one shape).
      const Shape& out = hlo.shape().IsTuple() ? hlo.shape().tuple_shapes(0) : hlo.shape();
      return std::max<int64_t>(1, hlo.operand(0)->shape().num_elements() /
                                      std::max<int64_t>(1, out.num_elements()));
    }
    case HloOpcode::kDot: {
      int64_t k = 1;
      for (int64_t d : hlo.dot_dimension_numbers->lhs_contracting_dimensions) {
        k *= hlo.operand(0)->shape().dimensions(d);
      }
      return k;
    }
    case HloOpcode::kReduceWindow: case HloOpcode::kConvolution: {
      int64_t k = 1;
      for (const WindowDimension& w : hlo.window->dimensions) k *= w.size;
      if (hlo.opcode() == HloOpcode::kConvolution) {
        k *= hlo.operand(1)->shape().dimensions(
            hlo.convolution_dimension_numbers->kernel_input_feature_dimension);
      }
      return k;
    }
    default:
      return 1;
  }
}

// Work a transcendental function adds to an element of a loop (EmitOutputs).
constexpr int64_t kTranscendentalWork = 2;

}  // namespace

llvm::Function* KernelBuilder::NewPhase(bool sequential, int64_t tasks, int64_t work_per_task) {
  llvm::LLVMContext& c = module_.getContext();
  const std::string fn_name = spec_.phases.empty()
                                  ? spec_.name
                                  : fmt::format("{}_phase{}", spec_.name, spec_.phases.size());
  KernelPhase phase{fn_name, tasks, work_per_task, sequential};
  llvm::Function* f;
  if (target_ == KernelTarget::kGpu) {
    // One pointer per buffer (operands, outputs, scratch), a kernel entry point.
    std::vector<llvm::Type*> params(spec_.operand_leaves + spec_.output_leaves + 1,
                                    llvm::PointerType::get(c, 0));
    auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(c), params, false);
    f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, fn_name, module_);
    // Every buffer starts on a 64-byte boundary (buffer assignment and the runtime's arena), so
    // 16-byte vector accesses at multiples of 16 bytes from it are aligned.
    for (size_t i = 0; i < params.size(); ++i) {
      f->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::getWithAlignment(c, llvm::Align(16)));
    }
    llvm::NamedMDNode* annotations = module_.getOrInsertNamedMetadata("nvvm.annotations");
    annotations->addOperand(llvm::MDNode::get(
        c, {llvm::ValueAsMetadata::get(f), llvm::MDString::get(c, "kernel"),
            llvm::ValueAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(c), 1))}));
    phase.threads_per_block = sequential ? 1 : std::min<int64_t>(std::max<int64_t>(tasks, 1), 256);
    phase.blocks = sequential ? 1 : (tasks + phase.threads_per_block - 1) / phase.threads_per_block;
  } else {
    auto* type = llvm::FunctionType::get(
        llvm::Type::getVoidTy(c),
        {llvm::PointerType::get(c, 0), llvm::Type::getInt64Ty(c), llvm::Type::getInt64Ty(c)}, false);
    f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, fn_name, module_);
    f->getArg(0)->setName("buffers");
    f->getArg(1)->setName("task_begin");
    f->getArg(2)->setName("task_end");
    f->addParamAttr(0, llvm::Attribute::NoAlias);
  }
  f->addFnAttr(llvm::Attribute::NoUnwind);
  auto* entry = llvm::BasicBlock::Create(c, "entry", f);
  b_.SetInsertPoint(entry);
  buffers_ = target_ == KernelTarget::kGpu ? nullptr : f->getArg(0);
  access_group_ = sequential || target_ == KernelTarget::kGpu ? nullptr : llvm::MDNode::getDistinct(c, {});
  spec_.phases.push_back(phase);
  return f;
}

llvm::Function* KernelBuilder::NewGpuPhase(int64_t blocks, int64_t threads, int64_t work_per_thread) {
  llvm::Function* f = NewPhase(false, blocks * threads, work_per_thread);
  spec_.phases.back().blocks = blocks;
  spec_.phases.back().threads_per_block = threads;
  return f;
}

IrArray KernelBuilder::ArrayOf(const Binding& binding) const {
  auto& b = const_cast<llvm::IRBuilder<>&>(b_);
  Value* base;
  if (target_ == KernelTarget::kGpu) {
    base = b.GetInsertBlock()->getParent()->getArg(binding.slot);
  } else {
    Value* slot = b.CreateInBoundsGEP(b.getPtrTy(), buffers_, {b.getInt64(binding.slot)});
    base = b.CreateLoad(b.getPtrTy(), slot);
  }
  if (binding.scratch_offset > 0) {
    base = b.CreateInBoundsGEP(b.getInt8Ty(), base, {b.getInt64(binding.scratch_offset)});
  }
  IrArray array(base, binding.shape);
  array.set_access_group(access_group_);
  return array;
}

IrArray KernelBuilder::OutputArray(int64_t leaf) const {
  return ArrayOf({nullptr, {}, output_shapes_[leaf], spec_.operand_leaves + leaf});
}

std::unique_ptr<ElementalIrEmitter> KernelBuilder::MakeEmitter() {
  auto e = std::make_unique<ElementalIrEmitter>(b_);
  for (const Binding& binding : bindings_) {
    e->BindArray(binding.hlo, binding.shape_index, ArrayOf(binding));
  }
  return e;
}

Status KernelBuilder::EmitParallelLoop(const Shape& shape, int64_t work_per_element,
                                       const Body& body, unsigned interleave) {
  const int64_t elements = shape.num_elements();
  std::vector<int64_t> order = MajorToMinor(shape);
  if (shape.rank() == 0 || elements == 0) {
    NewPhase(false, elements == 0 ? 0 : 1, work_per_element);
    auto e = MakeEmitter();
    if (elements != 0) {
      RETURN_IF_ERROR(body(*e, {}));
    }
    b_.CreateRetVoid();
    return OkStatus();
  }
  if (GpuTuned()) return EmitGpuLoop(shape, work_per_element, body);
  if (target_ == KernelTarget::kGpu) {
    // One thread per element: its physical position from the block and thread index.
    NewPhase(false, elements, work_per_element);
    auto e = MakeEmitter();
    Value* block = b_.CreateZExt(b_.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x, {}, {}), b_.getInt64Ty());
    Value* width = b_.CreateZExt(b_.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x, {}, {}), b_.getInt64Ty());
    Value* thread = b_.CreateZExt(b_.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {}), b_.getInt64Ty());
    Value* linear = b_.CreateAdd(b_.CreateMul(block, width), thread);
    RETURN_IF_ERROR(e->EmitIf(b_.CreateICmpULT(linear, b_.getInt64(elements)), "in_bounds", [&]() {
      return body(*e, DelinearizePhysical(b_, linear, shape));
    }));
    b_.CreateRetVoid();
    return OkStatus();
  }
  const int64_t minor = order.back();
  const int64_t n = shape.dimensions(minor);
  const int64_t task_elements = TaskElements(work_per_element);
  const size_t combined = CombinedMinorDimensions(shape, task_elements);
  if (combined > 1) return EmitCombinedLoop(shape, work_per_element, combined, body);
  const int64_t block = std::min(n, task_elements);
  const int64_t blocks = (n + block - 1) / block;
  const int64_t rows = elements / n;
  llvm::Function* f = NewPhase(false, rows * blocks, block * work_per_element);
  // Task t is block t % blocks of row t / blocks: the t-th run of `block` elements where blocks
  // divide the row.
  if (n % block == 0) spec_.phases.back().elements_per_task = block;
  auto e = MakeEmitter();
  llvm::BasicBlock* element_header = nullptr;
  RETURN_IF_ERROR(e->EmitLoop(f->getArg(1), f->getArg(2), "task", [&](Value* task) -> Status {
    const std::vector<int64_t> outer(order.begin(), order.end() - 1);
    auto [index, begin, end] = EmitTaskRange(task, shape, outer, minor, block, blocks);
    // Iterations write distinct elements and read operands either elsewhere or (in place) at
    // the element they write: independent, as the access group tells the vectorizer.
    return e->EmitLoop(begin, end, "element", [&](Value* i) -> Status {
      element_header = b_.GetInsertBlock()->getSinglePredecessor();
      index[minor] = i;
      return body(*e, index);
    }, access_group_);
  }));
  if (interleave > 1 && element_header != nullptr) {
    llvm::LLVMContext& c = element_header->getContext();
    AddLoopHints(element_header, {LoopHint(c, "llvm.loop.interleave.count",
                                           llvm::ConstantInt::get(llvm::Type::getInt32Ty(c), interleave))});
  }
  b_.CreateRetVoid();
  return OkStatus();
}

bool ReadsOperandsAtItsIndex(const HloInstruction& instruction) {
  const HloOpcode op = instruction.opcode();
  return instruction.IsElementwise() || op == HloOpcode::kParameter || op == HloOpcode::kConstant ||
         op == HloOpcode::kReshape || op == HloOpcode::kBitcast ||
         (op == HloOpcode::kBroadcast && instruction.operand(0)->shape().rank() == 0);
}

size_t KernelBuilder::CombinedMinorDimensions(const Shape& shape, int64_t task_elements) const {
  // A short minor dimension (NHWC's 8 channels) as a loop of its own leaves the vectorizer the
  // loop over rows, whose stride-8 accesses it shuffles apart and back together: slower than
  // scalar code. Only where every operand holds as many elements as the loop writes (read in
  // place or through a reshape, not broadcast), so the combined index folds back to one offset.
  const std::vector<int64_t> order = MajorToMinor(shape);
  constexpr int64_t kShortMinor = 64;
  if (target_ != KernelTarget::kCpu || order.size() < 2 ||
      shape.dimensions(order.back()) >= kShortMinor) {
    return 1;
  }
  for (const Binding& binding : bindings_) {
    if (binding.shape.num_elements() != shape.num_elements()) return 1;
  }
  // Nor through a transpose, slice or the like, whose offsets would stay a division per element.
  const std::vector<HloInstruction*> fused = hlo_.opcode() == HloOpcode::kFusion
                                                 ? hlo_.fused_computation()->instructions()
                                                 : std::vector<HloInstruction*>{};
  for (const HloInstruction* i : fused) {
    if (i->opcode() != HloOpcode::kTuple && !ReadsOperandsAtItsIndex(*i)) return 1;
  }
  if (hlo_.opcode() != HloOpcode::kFusion && !hlo_.IsElementwise()) return 1;
  size_t combined = 1;
  int64_t span = shape.dimensions(order.back());
  while (combined < order.size() &&
         span * shape.dimensions(order[order.size() - 1 - combined]) <= task_elements) {
    span *= shape.dimensions(order[order.size() - 1 - combined]);
    ++combined;
  }
  return combined;
}

Status KernelBuilder::EmitCombinedLoop(const Shape& shape, int64_t work_per_element,
                                       size_t combined, const Body& body) {
  const std::vector<int64_t> order = MajorToMinor(shape);
  const size_t first = order.size() - combined;
  int64_t span = 1;
  for (size_t k = first; k < order.size(); ++k) span *= shape.dimensions(order[k]);
  llvm::Function* f = NewPhase(false, shape.num_elements() / span, span * work_per_element);
  spec_.phases.back().elements_per_task = span;
  auto e = MakeEmitter();
  RETURN_IF_ERROR(e->EmitLoop(f->getArg(1), f->getArg(2), "task", [&](Value* task) -> Status {
    const std::vector<int64_t> outer(order.begin(), order.begin() + first);
    IrIndex index = EmitTaskRange(task, shape, outer, order.back(), 1, 1).index;
    return e->EmitLoop(b_.getInt64(0), b_.getInt64(span), "element", [&](Value* i) -> Status {
      // Remainders and quotients nested minor first: with the array offsets summed minor first
      // (IrArray), the optimizer folds them back into i, a unit-stride loop.
      Value* rest = i;
      for (size_t k = order.size() - 1; k > first; --k) {
        const int64_t size = shape.dimensions(order[k]);
        index[order[k]] = b_.CreateURem(rest, b_.getInt64(size));
        rest = b_.CreateUDiv(rest, b_.getInt64(size));
      }
      index[order[first]] = rest;
      return body(*e, index);
    }, access_group_);
  }));
  b_.CreateRetVoid();
  return OkStatus();
}

bool KernelBuilder::IsColumnReduction(const HloInstruction* hlo) const {
  if ((target_ != KernelTarget::kCpu && !GpuTuned()) || hlo->opcode() != HloOpcode::kReduce) {
    return false;
  }
  const Shape& in = hlo->operand(0)->shape();
  if (in.rank() < 2) return false;
  // On the CPU, strided row reductions take the column reduction's sweep too (lanes).
  if (target_ == KernelTarget::kCpu && cpu::IsStridedRowReduction(*hlo)) return true;
  const int64_t minor = MajorToMinor(in).back();
  const auto& reduced = hlo->dimensions();
  return std::find(reduced.begin(), reduced.end(), minor) == reduced.end();
}

Status KernelBuilder::EmitColumnReduction(const HloInstruction* reduce,
                                          const Destination& destination, bool may_split) {
  if (GpuTuned()) return EmitGpuColumnReduction(reduce, destination, may_split);
  return EmitCpuColumnReductions({{reduce, destination}}, may_split);
}

KernelBuilder::TaskRange KernelBuilder::EmitTaskRange(Value* task, const Shape& shape,
                                                      const std::vector<int64_t>& outer,
                                                      int64_t minor, int64_t block,
                                                      int64_t blocks) {
  const int64_t n = shape.dimensions(minor);
  Value* row = blocks == 1 ? task : b_.CreateUDiv(task, b_.getInt64(blocks));
  TaskRange range{IrIndex(shape.rank(), nullptr), b_.getInt64(0), b_.getInt64(n)};
  if (blocks != 1) {
    range.begin = b_.CreateMul(b_.CreateURem(task, b_.getInt64(blocks)), b_.getInt64(block));
    Value* stop = b_.CreateAdd(range.begin, b_.getInt64(block));
    range.end = b_.CreateSelect(b_.CreateICmpSLT(stop, b_.getInt64(n)), stop, b_.getInt64(n));
  }
  for (auto it = outer.rbegin(); it != outer.rend(); ++it) {
    if (it + 1 == outer.rend()) {
      range.index[*it] = row;
    } else {
      range.index[*it] = b_.CreateURem(row, b_.getInt64(shape.dimensions(*it)));
      row = b_.CreateUDiv(row, b_.getInt64(shape.dimensions(*it)));
    }
  }
  return range;
}

Status KernelBuilder::EmitOutputs() {
  // Outputs of the same dimensions share one loop.
  std::vector<std::vector<std::pair<const HloInstruction*, int64_t>>> groups;
  // A reduction already computed into scratch (values of the kernel read it) is copied out with
  // the outputs of its dimensions, not computed again: swept again, batch norm's sum(dy) and
  // sum(dy * (x - mean)) cost a second pass over x and dy.
  auto materialized = [&](const HloInstruction* x) {
    return std::any_of(bindings_.begin(), bindings_.end(),
                       [&](const Binding& binding) { return binding.hlo == x; });
  };
  for (const auto& out : outputs_) {
    if (written_[out.first]) continue;
    const bool reduction = out.first->opcode() == HloOpcode::kReduce && !materialized(out.first);
    if (GpuTuned() && reduction && !IsColumnReduction(out.first)) {
      const int64_t first = out.second;
      ASSIGN_OR_RETURN(bool done, TryEmitGpuRowKernel(
                                      {{out.first, [&](int64_t k) { return OutputArray(first + k); }}}));
      if (done) {
        written_[out.first] = true;
        continue;
      }
    }
    if (reduction && IsColumnReduction(out.first) && GpuTuned()) {
      const int64_t first = out.second;
      RETURN_IF_ERROR(EmitColumnReduction(out.first, [&](int64_t k) { return OutputArray(first + k); }));
      written_[out.first] = true;
      continue;
    }
    if (reduction && IsColumnReduction(out.first)) {
      // With its siblings (the same operand shape and reduced dimensions: one sweep reads their
      // operands once).
      std::vector<ColumnOutput> siblings;
      for (const auto& other : outputs_) {
        if (written_[other.first] || !IsColumnReduction(other.first) || materialized(other.first) ||
            other.first->dimensions() != out.first->dimensions() ||
            !(other.first->operand(0)->shape() == out.first->operand(0)->shape())) {
          continue;
        }
        const int64_t first = other.second;
        siblings.push_back({other.first, [this, first](int64_t k) { return OutputArray(first + k); }});
      }
      // With the outputs of the operand's dimensions that read nothing it computes (sum(x * m)
      // beside x * m: one pass over x and m).
      std::vector<const HloInstruction*> later;
      for (const auto& other : outputs_) {
        if (!written_[other.first] &&
            std::none_of(siblings.begin(), siblings.end(),
                         [&](const ColumnOutput& s) { return s.reduce == other.first; })) {
          later.push_back(other.first);
        }
      }
      std::vector<const HloInstruction*> reductions;
      for (const ColumnOutput& sibling : siblings) reductions.push_back(sibling.reduce);
      const OutputGroup elementwise = ColumnSweepElementwiseOutputs(reductions, later);
      RETURN_IF_ERROR(EmitCpuColumnReductions(siblings, /*may_split=*/true, elementwise));
      for (const ColumnOutput& sibling : siblings) written_[sibling.reduce] = true;
      for (const auto& [swept, leaf] : elementwise) {
        written_[swept] = true;
        for (auto& g : groups) {
          g.erase(std::remove_if(g.begin(), g.end(), [&](const auto& o) { return o.first == swept; }),
                  g.end());
        }
      }
      groups.erase(std::remove_if(groups.begin(), groups.end(), [](const auto& g) { return g.empty(); }),
                   groups.end());
      continue;
    }
    const Shape& s = output_shapes_[out.second];
    bool placed = false;
    for (auto& g : groups) {
      if (output_shapes_[g[0].second].dimensions() == s.dimensions()) {
        g.push_back(out);
        placed = true;
        break;
      }
    }
    if (!placed) groups.push_back({out});
  }
  for (const auto& group : groups) {
    int64_t work = 1;
    std::vector<const HloInstruction*> computed;
    for (const auto& out : group) {
      work = std::max(work, materialized(out.first) ? 1 : WorkPerElement(*out.first));
      computed.push_back(out.first);
    }
    // Each transcendental function the loop computes an element costs it about two elements of
    // a plain loop more (f32[64,2048] on one core: negate 11 us, exponential 29, tanh 34,
    // logistic 36, log 68), so that a small loop heavy with them still goes to the threads: the
    // LSTM cell's gates (three logistics as exponentials, two tanhs, per element of
    // f32[64,512]) ran on one core as 32K elements, under the 64K a thread's share must reach.
    const int64_t transcendentals = TranscendentalsPerElement(computed, materialized);
    work += kTranscendentalWork * transcendentals;
    // Tiles of a transposed read before streaming stores: streamed element by element, a wide
    // transposed operand is read a gather at a time.
    if (auto transposes = TransposedReads(output_shapes_[group[0].second], group); !transposes.empty()) {
      RETURN_IF_ERROR(EmitCpuTransposedLoop(output_shapes_[group[0].second], work, group, transposes));
      for (const auto& out : group) written_[out.first] = true;
      continue;
    }
    if (StreamsOutputs(group)) {
      RETURN_IF_ERROR(EmitCpuStreamedLoop(output_shapes_[group[0].second], work, group));
      for (const auto& out : group) written_[out.first] = true;
      continue;
    }
    // Two vectors an iteration where the loop computes two transcendentals or more: LLVM's cost
    // model takes one for so long a body, whose polynomials then wait on each other's latency
    // (on one core: the LSTM gates' loop 51 -> 46 us, eight transcendentals of four f32[64,2048]
    // 271 -> 262 us, exp(x) tanh(x) over f32[256,2048] 259 -> 250 us; four vectors gained no more).
    const unsigned interleave = transcendentals >= 2 ? 2 : 1;
    RETURN_IF_ERROR(EmitParallelLoop(
        output_shapes_[group[0].second], work,
        [&](ElementalIrEmitter& e, const IrIndex& index) -> Status {
          // Every output's element is computed before any is stored: an output written in place
          // over an operand must not clobber what another output still reads at this index.
          std::vector<std::pair<int64_t, std::vector<Value*>>> values;
          for (const auto& out : group) {
            ASSIGN_OR_RETURN(std::vector<Value*> leaves, e.EmitLeaves(out.first, index));
            values.push_back({out.second, std::move(leaves)});
          }
          for (const auto& [first_leaf, leaves] : values) {
            for (size_t j = 0; j < leaves.size(); ++j) {
              RETURN_IF_ERROR(OutputArray(first_leaf + j).EmitWrite(b_, index, leaves[j]));
            }
          }
          return OkStatus();
        },
        interleave));
    for (const auto& out : group) written_[out.first] = true;
  }
  return OkStatus();
}

Status KernelBuilder::EmitScatter(const HloInstruction* scatter) {
  const int64_t n = (scatter->operand_count() - 1) / 2;
  const ScatterDimensionNumbers& dn = *scatter->scatter_dimension_numbers;
  const Shape& operand_shape = scatter->operand(0)->shape();
  const HloInstruction* indices = scatter->operand(n);
  const Shape& indices_shape = indices->shape();
  const Shape& update_shape = scatter->operand(n + 1)->shape();
  // The operands are copied into the outputs in parallel, ...
  RETURN_IF_ERROR(EmitParallelLoop(operand_shape, 1, [&](ElementalIrEmitter& e, const IrIndex& index) -> Status {
    for (int64_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(Value * v, e.EmitElement(scatter->operand(i), index));
      RETURN_IF_ERROR(OutputArray(i).EmitWrite(b_, index, v));
    }
    return OkStatus();
  }));
  if (update_shape.num_elements() == 0) return OkStatus();
  // ... then the updates are applied one after another.
  NewPhase(true, 1, update_shape.num_elements());
  auto e = MakeEmitter();
  auto contains = [](const std::vector<int64_t>& v, int64_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  std::vector<int64_t> window_dims;  // operand dimensions the update window spans
  for (int64_t d = 0; d < operand_shape.rank(); ++d) {
    if (!contains(dn.inserted_window_dims, d) && !contains(dn.input_batching_dims, d)) {
      window_dims.push_back(d);
    }
  }
  std::vector<int64_t> window_sizes(operand_shape.rank(), 1);
  for (size_t j = 0; j < window_dims.size(); ++j) {
    window_sizes[window_dims[j]] = update_shape.dimensions(dn.update_window_dims[j]);
  }
  std::vector<int64_t> scatter_dims;  // update dimensions that index the scatter positions
  for (int64_t d = 0; d < update_shape.rank(); ++d) {
    if (!contains(dn.update_window_dims, d)) scatter_dims.push_back(d);
  }
  const bool explicit_vector = dn.index_vector_dim < indices_shape.rank();
  std::vector<int64_t> sizes(update_shape.dimensions().begin(), update_shape.dimensions().end());
  std::function<Status(size_t, IrIndex&)> nest = [&](size_t d, IrIndex& u) -> Status {
    if (d < sizes.size()) {
      return e->EmitLoop(b_.getInt64(0), b_.getInt64(sizes[d]), "update", [&](Value* iv) {
        u.push_back(iv);
        Status s = nest(d + 1, u);
        u.pop_back();
        return s;
      });
    }
    // The indices position of this update: its scatter dimensions, with the index vector
    // dimension inserted.
    IrIndex indices_index;
    std::vector<int64_t> indices_dim_of_scatter;
    size_t next = 0;
    for (int64_t k = 0; k < indices_shape.rank(); ++k) {
      if (explicit_vector && k == dn.index_vector_dim) {
        indices_index.push_back(b_.getInt64(0));
      } else {
        indices_dim_of_scatter.push_back(k);
        indices_index.push_back(u[scatter_dims[next++]]);
      }
    }
    IrIndex start(operand_shape.rank(), b_.getInt64(0));
    for (size_t k = 0; k < dn.scatter_dims_to_operand_dims.size(); ++k) {
      if (explicit_vector) indices_index[dn.index_vector_dim] = b_.getInt64(k);
      ASSIGN_OR_RETURN(Value * s, e->EmitElement(indices, indices_index));
      ASSIGN_OR_RETURN(start[dn.scatter_dims_to_operand_dims[k]],
                       EmitIndexToInt64(b_, indices_shape.element_type(), s));
    }
    for (size_t i = 0; i < dn.input_batching_dims.size(); ++i) {
      for (size_t j = 0; j < indices_dim_of_scatter.size(); ++j) {
        if (indices_dim_of_scatter[j] == dn.scatter_indices_batching_dims[i]) {
          start[dn.input_batching_dims[i]] = u[scatter_dims[j]];
        }
      }
    }
    // A window that does not fit whole is skipped.
    Value* inside = b_.getTrue();
    for (int64_t d = 0; d < operand_shape.rank(); ++d) {
      inside = b_.CreateAnd(inside, b_.CreateICmpSGE(start[d], b_.getInt64(0)));
      inside = b_.CreateAnd(inside, b_.CreateICmpSLE(start[d], b_.getInt64(operand_shape.dimensions(d) - window_sizes[d])));
    }
    return e->EmitIf(inside, "scatter.inside", [&]() -> Status {
      IrIndex target = start;
      for (size_t j = 0; j < window_dims.size(); ++j) {
        target[window_dims[j]] = b_.CreateAdd(start[window_dims[j]], u[dn.update_window_dims[j]]);
      }
      std::vector<Value*> args;
      for (int64_t i = 0; i < n; ++i) {
        ASSIGN_OR_RETURN(Value * current, OutputArray(i).EmitRead(b_, target));
        args.push_back(current);
      }
      for (int64_t i = 0; i < n; ++i) {
        ASSIGN_OR_RETURN(Value * update, e->EmitElement(scatter->operand(n + 1 + i), u));
        args.push_back(update);
      }
      ASSIGN_OR_RETURN(std::vector<Value*> results,
                       e->EmitScalarComputation(*scatter->to_apply(), args));
      for (int64_t i = 0; i < n; ++i) {
        RETURN_IF_ERROR(OutputArray(i).EmitWrite(b_, target, results[i]));
      }
      return OkStatus();
    });
  };
  IrIndex u;
  RETURN_IF_ERROR(nest(0, u));
  b_.CreateRetVoid();
  return OkStatus();
}

Status KernelBuilder::EmitSelectAndScatter(const HloInstruction* sas) {
  const HloInstruction* operand = sas->operand(0);
  const HloInstruction* source = sas->operand(1);
  const Shape& shape = operand->shape();
  const Window& window = *sas->window;
  RETURN_IF_ERROR(EmitParallelLoop(shape, 1, [&](ElementalIrEmitter& e, const IrIndex& index) -> Status {
    ASSIGN_OR_RETURN(Value * init, e.EmitElement(sas->operand(2), {}));
    return OutputArray(0).EmitWrite(b_, index, init);
  }));
  if (source->shape().num_elements() == 0) return OkStatus();
  NewPhase(true, 1, source->shape().num_elements());
  auto e = MakeEmitter();
  const int64_t rank = shape.rank();
  std::vector<llvm::AllocaInst*> selected;
  for (int64_t d = 0; d < rank; ++d) selected.push_back(EmitEntryAlloca(b_, b_.getInt64Ty(), "selected"));
  llvm::AllocaInst* found = EmitEntryAlloca(b_, b_.getInt1Ty(), "found");
  std::vector<int64_t> source_sizes = source->shape().dimensions();
  std::vector<int64_t> window_sizes;
  for (const WindowDimension& w : window.dimensions) window_sizes.push_back(w.size);
  std::function<Status(size_t, IrIndex&, const std::vector<int64_t>&,
                       const std::function<Status(const IrIndex&)>&)>
      nest = [&](size_t d, IrIndex& ivs, const std::vector<int64_t>& sizes,
                 const std::function<Status(const IrIndex&)>& body) -> Status {
    if (d == sizes.size()) return body(ivs);
    return e->EmitLoop(b_.getInt64(0), b_.getInt64(sizes[d]), "sas", [&](Value* iv) {
      ivs.push_back(iv);
      Status s = nest(d + 1, ivs, sizes, body);
      ivs.pop_back();
      return s;
    });
  };
  IrIndex s_index;
  RETURN_IF_ERROR(nest(0, s_index, source_sizes, [&](const IrIndex& s) -> Status {
    b_.CreateStore(b_.getFalse(), found);
    IrIndex w_index;
    RETURN_IF_ERROR(nest(0, w_index, window_sizes, [&](const IrIndex& w) -> Status {
      Value* inside = b_.getTrue();
      IrIndex candidate(rank);
      for (int64_t d = 0; d < rank; ++d) {
        const WindowDimension& wd = window.dimensions[d];
        candidate[d] = b_.CreateSub(b_.CreateAdd(b_.CreateMul(s[d], b_.getInt64(wd.stride)), w[d]),
                                    b_.getInt64(wd.padding_low));
        inside = b_.CreateAnd(inside, b_.CreateICmpSGE(candidate[d], b_.getInt64(0)));
        inside = b_.CreateAnd(inside, b_.CreateICmpSLT(candidate[d], b_.getInt64(shape.dimensions(d))));
      }
      return e->EmitIf(inside, "sas.inside", [&]() -> Status {
        // The first candidate is selected; each later one replaces it unless select() keeps it.
        IrIndex current(rank);
        for (int64_t d = 0; d < rank; ++d) current[d] = b_.CreateLoad(b_.getInt64Ty(), selected[d]);
        Value* have = b_.CreateLoad(b_.getInt1Ty(), found);
        for (int64_t d = 0; d < rank; ++d) current[d] = b_.CreateSelect(have, current[d], candidate[d]);
        ASSIGN_OR_RETURN(Value * a, e->EmitElement(operand, current));
        ASSIGN_OR_RETURN(Value * c, e->EmitElement(operand, candidate));
        ASSIGN_OR_RETURN(std::vector<Value*> keep, e->EmitScalarComputation(*sas->select(), {a, c}));
        Value* take = b_.CreateOr(b_.CreateNot(have), b_.CreateNot(keep[0]));
        for (int64_t d = 0; d < rank; ++d) {
          b_.CreateStore(b_.CreateSelect(take, candidate[d], current[d]), selected[d]);
        }
        b_.CreateStore(b_.getTrue(), found);
        return OkStatus();
      });
    }));
    return e->EmitIf(b_.CreateLoad(b_.getInt1Ty(), found), "sas.found", [&]() -> Status {
      IrIndex target(rank);
      for (int64_t d = 0; d < rank; ++d) target[d] = b_.CreateLoad(b_.getInt64Ty(), selected[d]);
      ASSIGN_OR_RETURN(Value * current, OutputArray(0).EmitRead(b_, target));
      ASSIGN_OR_RETURN(Value * update, e->EmitElement(source, s));
      ASSIGN_OR_RETURN(std::vector<Value*> r, e->EmitScalarComputation(*sas->scatter(), {current, update}));
      return OutputArray(0).EmitWrite(b_, target, r[0]);
    });
  }));
  b_.CreateRetVoid();
  return OkStatus();
}

StatusOr<KernelSpec> KernelBuilder::Build() {
  for (const HloInstruction* operand : hlo_.operands()) {
    spec_.operand_leaves += LeafCount(operand->shape());
  }
  hlo_.shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
    output_shapes_.push_back(s);
  });
  for (const Shape& s : output_shapes_) {
    if (!s.IsArray() || !IsCodegenSupportedType(s.element_type())) {
      return Error(fmt::format("{}: result type {} is not supported by code generation",
                               hlo_.name(), s.ToString()));
    }
  }
  spec_.output_leaves = static_cast<int64_t>(output_shapes_.size());

  // Operands: fused parameters (or the unfused op's operands) read from the buffer table.
  const HloComputation* fused = hlo_.opcode() == HloOpcode::kFusion ? hlo_.fused_computation() : nullptr;
  int64_t slot = 0;
  for (int64_t i = 0; i < hlo_.operand_count(); ++i) {
    const HloInstruction* bound = fused ? fused->parameter_instruction(i) : hlo_.operand(i);
    hlo_.operand(i)->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
      bindings_.push_back({bound, index, s, slot++});
    });
  }
  root_ = fused ? fused->root_instruction() : &hlo_;

  if (root_->opcode() == HloOpcode::kTuple && fused) {
    int64_t leaf = 0;
    for (const HloInstruction* out : root_->operands()) {
      outputs_.push_back({out, leaf});
      leaf += LeafCount(out->shape());
    }
  } else {
    outputs_.push_back({root_, 0});
  }

  const bool special_root =
      root_->opcode() == HloOpcode::kScatter || root_->opcode() == HloOpcode::kSelectAndScatter;
  const HloInstruction* gemm = nullptr;
  if (target_ == KernelTarget::kCpu && !special_root) {
    std::vector<RowOutput> row_outputs;
    for (const auto& [out, first] : outputs_) {
      row_outputs.push_back({out, [this, first = first](int64_t k) { return OutputArray(first + k); }});
    }
    ASSIGN_OR_RETURN(bool done, TryEmitCpuRowKernel(row_outputs));
    if (done) {
      spec_.reduces_before_writing = true;
      return spec_;
    }
  }
  if (GpuTuned() && !special_root) {
    // The whole kernel as one row kernel when it is a row fusion (a reduction, softmax, layer
    // norm, sibling reductions and their elementwise outputs).
    std::vector<RowOutput> row_outputs;
    for (const auto& [out, first] : outputs_) {
      row_outputs.push_back({out, [this, first = first](int64_t k) { return OutputArray(first + k); }});
    }
    ASSIGN_OR_RETURN(bool done, TryEmitGpuRowKernel(row_outputs));
    if (done) return spec_;
    gemm = FindGemmWithEpilogue();
  }

  // Materialise expensive fused values that other fused instructions read.
  if (fused) {
    // On the CPU a column reduction that only an elementwise root reads is materialised too (a
    // batch mean, `sum(x * x, axis=(0, 1, 2)) / n`): computed per output it would be a scalar
    // strided walk of the operand on one thread, not the vectorized, sliced sweep.
    // On the CPU, so is an expensive elementwise value far smaller than the kernel that a
    // broadcast spreads over it (batch norm's per-channel (sum / n) * rsqrt(var) factors): inside
    // the loops it would be computed again for every element, a vector divide per 16 outputs
    // where a load from a table of one value per channel suffices.
    int64_t loop_elements = 0;
    for (const HloInstruction* p : fused->parameter_instructions()) {
      if (p->shape().IsArray()) loop_elements = std::max(loop_elements, p->shape().num_elements());
    }
    auto broadcast_reads = [&](const HloInstruction* x) {
      std::vector<const HloInstruction*> stack = {x};
      while (!stack.empty()) {
        const HloInstruction* y = stack.back();
        stack.pop_back();
        for (const HloInstruction* user : y->users()) {
          if (user->opcode() == HloOpcode::kBroadcast &&
              user->shape().num_elements() > x->shape().num_elements()) {
            return true;
          }
          if (user->IsElementwise() && user->shape().IsArray() &&
              user->shape().num_elements() == x->shape().num_elements()) {
            stack.push_back(user);
          }
        }
      }
      return false;
    };
    auto small_expensive = [&](const HloInstruction* x) {
      return target_ == KernelTarget::kCpu && x != root_ && x->IsElementwise() &&
             x->shape().IsArray() && IsExpensive(*x) &&
             x->shape().num_elements() * 16 <= loop_elements && broadcast_reads(x);
    };
    auto needs_scratch = [&](const HloInstruction* x) {
      if (small_expensive(x)) return true;
      if (!IsExpensivePerElement(x->opcode()) || x == root_ || x == gemm) return false;
      const bool root_reads_per_output = target_ == KernelTarget::kCpu &&
                                         root_->opcode() != HloOpcode::kTuple &&
                                         IsColumnReduction(x);
      for (const HloInstruction* user : x->users()) {
        if (user != root_ || root_reads_per_output) return true;
      }
      return false;
    };
    std::vector<const HloInstruction*> pending;
    for (const HloInstruction* x : fused->MakeInstructionPostOrder()) {
      if (needs_scratch(x)) pending.push_back(x);
    }
    // Small values that read no pending reduction go first, so that none sits between two
    // reductions that could share a sweep and keeps the later one out of it (see below).
    std::stable_partition(pending.begin(), pending.end(), [&](const HloInstruction* x) {
      if (!small_expensive(x)) return false;
      std::vector<const HloInstruction*> stack(x->operands().begin(), x->operands().end());
      std::set<const HloInstruction*> seen;
      while (!stack.empty()) {
        const HloInstruction* y = stack.back();
        stack.pop_back();
        if (!seen.insert(y).second) continue;
        if (IsExpensivePerElement(y->opcode())) return false;
        stack.insert(stack.end(), y->operands().begin(), y->operands().end());
      }
      return true;
    });
    // Whether `x` reads (through any chain of fused values) `also` or one of `pending`.
    auto reads_pending = [&](const HloInstruction* x, const HloInstruction* also) {
      std::set<const HloInstruction*> seen;
      std::vector<const HloInstruction*> stack(x->operands().begin(), x->operands().end());
      while (!stack.empty()) {
        const HloInstruction* y = stack.back();
        stack.pop_back();
        if (!seen.insert(y).second) continue;
        if (y == also || std::find(pending.begin(), pending.end(), y) != pending.end()) return true;
        stack.insert(stack.end(), y->operands().begin(), y->operands().end());
      }
      return false;
    };
    // The sweep each column reduction joins (cpu_column_reduction.h): a reduction that needs no
    // statistic may wait for a later sweep that reads its arrays anyway.
    std::unordered_map<const HloInstruction*, int> sweep_levels;
    if (target_ == KernelTarget::kCpu) {
      std::vector<const HloInstruction*> column;
      for (const HloInstruction* x : pending) {
        if (IsColumnReduction(x)) column.push_back(x);
      }
      sweep_levels = cpu::PlanColumnSweepLevels(column);
    }
    // The next value to materialise: one that reads nothing pending and is no column reduction of
    // a later level than the earliest pending one, nor reads one. Values other than column
    // reductions go first, so that the reductions of a level find the values they read (the
    // batch's mean over its channels) computed and all share one sweep. (`pending` keeps a
    // topological order within the small values and within the rest, so some value that does
    // not wait for a later level reads nothing pending: there is one.)
    auto next_pending = [&]() {
      int level = std::numeric_limits<int>::max();
      for (const HloInstruction* x : pending) {
        if (auto it = sweep_levels.find(x); it != sweep_levels.end()) level = std::min(level, it->second);
      }
      std::set<const HloInstruction*> waiting;
      auto first = pending.end();
      for (auto at = pending.begin(); at != pending.end(); ++at) {
        auto it = sweep_levels.find(*at);
        bool wait = it != sweep_levels.end() && it->second > level;
        bool ready = true;
        std::set<const HloInstruction*> seen;
        std::vector<const HloInstruction*> stack((*at)->operands().begin(), (*at)->operands().end());
        while (!wait && !stack.empty()) {
          const HloInstruction* y = stack.back();
          stack.pop_back();
          if (!seen.insert(y).second) continue;
          wait = waiting.count(y) > 0;
          ready = ready && std::find(pending.begin(), pending.end(), y) == pending.end();
          stack.insert(stack.end(), y->operands().begin(), y->operands().end());
        }
        if (wait) {
          waiting.insert(*at);
        } else if (ready) {
          if (it == sweep_levels.end()) return at;
          if (first == pending.end()) first = at;
        }
      }
      return first == pending.end() ? pending.begin() : first;
    };
    int64_t scratch = 0;
    while (!pending.empty()) {
      auto at = next_pending();
      const HloInstruction* x = *at;
      pending.erase(at);
      // Into scratch even when `x` is also an output: an output may share its buffer with an
      // operand (in place), which later phases still read. The output phase copies it out.
      std::vector<Binding> materialized;
      x->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
        Shape dense = s;
        dense.SetDefaultLayout();
        materialized.push_back({x, index, dense, spec_.operand_leaves + spec_.output_leaves, scratch});
        scratch += (shape_util::ByteSizeOf(dense) + 63) / 64 * 64;
      });
      const Shape& loop_shape = materialized[0].shape;
      auto to_scratch = [&](int64_t k) { return ArrayOf(materialized[k]); };
      bool done = false;
      if (GpuTuned() && x->opcode() == HloOpcode::kReduce && !IsColumnReduction(x)) {
        ASSIGN_OR_RETURN(done, TryEmitGpuRowKernel({{x, to_scratch}}));
      } else if (GpuTuned() && x->opcode() == HloOpcode::kDot) {
        // Not split: this loop is still laying out scratch.
        ASSIGN_OR_RETURN(done, TryEmitGpuGemm(x, nullptr, to_scratch, /*may_split=*/false));
      }
      if (done) {
      } else if (IsColumnReduction(x) && target_ == KernelTarget::kCpu) {
        // With the later column reductions of the same operand shape and dimensions that read
        // none still pending (batch norm's gradient: four sums over N, H and W in one sweep that
        // reads x and dy once, not four); their slices' partials go to scratch past what this
        // loop has laid out so far (batch statistics: one output row, which only slicing spreads
        // over threads).
        // The outputs that read the sums over the same operand (batch norm's y and dx) are a
        // later phase over every row, not each task's block of columns after its sums: a block
        // saves no second read through the L2. Its lines lie a row apart (512 bytes for 128 f32
        // channels), so they agree in address bits 6-8, which the L2's set index includes: they
        // fill an eighth of its sets (256 KB of 2 MiB for 16 channels, against 3.2 MB of x and dy
        // over [25088, 128]); and every eighth line comes from the last-level cache at a third
        // of the rate of lines in address order.
        // Written by hand on the thread pool (tests/bench/batch_norm_schedules), blocks of 16, 32
        // and 64 channels took 2.35-2.63, 1.56-1.84 and 1.14-1.43 ms, the two phases 0.93-1.02
        // and a copy of the bytes (the one-pass floor) 0.56-0.61 (six runs at load 9-13, 2 cores
        // with 2 MiB of L2 each).
        std::vector<std::vector<Binding>> sibling_bindings;
        std::vector<const HloInstruction*> siblings;
        for (const HloInstruction* y : pending) {
          if (IsColumnReduction(y) && cpu::SharesColumnSweep(*y, *x) &&
              sweep_levels.at(y) == sweep_levels.at(x) && !reads_pending(y, x)) {
            siblings.push_back(y);
          }
        }
        for (const HloInstruction* y : siblings) {
          pending.erase(std::find(pending.begin(), pending.end(), y));
          std::vector<Binding> leaves;
          y->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
            Shape dense = s;
            dense.SetDefaultLayout();
            leaves.push_back({y, index, dense, spec_.operand_leaves + spec_.output_leaves, scratch});
            scratch += (shape_util::ByteSizeOf(dense) + 63) / 64 * 64;
          });
          sibling_bindings.push_back(std::move(leaves));
        }
        std::vector<ColumnOutput> sweep = {{x, [&](int64_t k) { return ArrayOf(materialized[k]); }}};
        for (size_t i = 0; i < siblings.size(); ++i) {
          sweep.push_back({siblings[i], [&, i](int64_t k) { return ArrayOf(sibling_bindings[i][k]); }});
        }
        // Outputs of the operand's dimensions that read nothing the sweep computes are written by
        // it (the MLP's bias gradient and the masked gradient the next product reads: one pass
        // over the gradient and the pre-activation, not a second loop of its own).
        std::vector<const HloInstruction*> later = pending;
        for (const auto& [out, leaf] : outputs_) {
          if (!written_[out] && out != x && std::find(siblings.begin(), siblings.end(), out) == siblings.end()) {
            later.push_back(out);
          }
        }
        std::vector<const HloInstruction*> reductions = siblings;
        reductions.push_back(x);
        const OutputGroup elementwise = ColumnSweepElementwiseOutputs(reductions, later);
        spec_.scratch_bytes = scratch;
        RETURN_IF_ERROR(EmitCpuColumnReductions(sweep, /*may_split=*/true, elementwise));
        for (const auto& [out, leaf] : elementwise) written_[out] = true;
        scratch = spec_.scratch_bytes;
        for (auto& leaves : sibling_bindings) {
          bindings_.insert(bindings_.end(), leaves.begin(), leaves.end());
        }
      } else if (IsColumnReduction(x)) {
        RETURN_IF_ERROR(EmitColumnReduction(x, [&](int64_t k) { return ArrayOf(materialized[k]); },
                                            /*may_split=*/false));
      } else RETURN_IF_ERROR(EmitParallelLoop(loop_shape, WorkPerElement(*x),
                                       [&](ElementalIrEmitter& e, const IrIndex& index) -> Status {
        ASSIGN_OR_RETURN(std::vector<Value*> leaves, e.EmitLeaves(x, index));
        for (size_t j = 0; j < leaves.size(); ++j) {
          RETURN_IF_ERROR(ArrayOf(materialized[j]).EmitWrite(b_, index, leaves[j]));
        }
        return OkStatus();
      }));
      bindings_.insert(bindings_.end(), materialized.begin(), materialized.end());
    }
    spec_.scratch_bytes = scratch;
    // The output phase reads the materialized reductions; one left unmaterialized (read only by
    // the root) is computed again for each output element it covers.
    spec_.reduces_before_writing = target_ == KernelTarget::kCpu;
    for (const HloInstruction* x : fused->instructions()) {
      if (x->opcode() != HloOpcode::kReduce || x == root_) continue;
      if (std::none_of(bindings_.begin(), bindings_.end(), [&](const Binding& b) { return b.hlo == x; })) {
        spec_.reduces_before_writing = false;
      }
    }
  }

  if (root_->opcode() == HloOpcode::kScatter) {
    RETURN_IF_ERROR(EmitScatter(root_));
  } else if (root_->opcode() == HloOpcode::kSelectAndScatter) {
    RETURN_IF_ERROR(EmitSelectAndScatter(root_));
  } else {
    bool done = false;
    if (gemm != nullptr) {
      ASSIGN_OR_RETURN(done, TryEmitGpuGemm(gemm, root_, [this](int64_t k) { return OutputArray(k); }));
    } else if (GpuTuned()) {
      ASSIGN_OR_RETURN(done, TryEmitGpuTranspose());
    } else if (target_ == KernelTarget::kCpu) {
      ASSIGN_OR_RETURN(done, TryEmitCpuTranspose());
    }
    if (!done) RETURN_IF_ERROR(EmitOutputs());
  }
  return spec_;
}

StatusOr<KernelSpec> EmitKernel(const HloInstruction& hlo, const std::string& name,
                                llvm::Module& module, KernelTarget target,
                                const KernelOptions& options) {
  KernelBuilder builder(hlo, name, module, target, options);
  return builder.Build();
}

}  // namespace xlens::codegen

namespace xlens::codegen {

Status EmitComparator(const HloComputation& computation,
                      const std::vector<PrimitiveType>& operand_types, const std::string& name,
                      llvm::Module& module) {
  llvm::LLVMContext& c = module.getContext();
  auto* type = llvm::FunctionType::get(
      llvm::Type::getInt8Ty(c), {llvm::PointerType::get(c, 0), llvm::PointerType::get(c, 0)}, false);
  llvm::Function* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", f));
  std::vector<Value*> args;
  for (size_t i = 0; i < operand_types.size(); ++i) {
    ASSIGN_OR_RETURN(llvm::Type * storage, StorageType(operand_types[i], c));
    for (int side = 0; side < 2; ++side) {
      Value* table = f->getArg(side);
      Value* ptr = b.CreateLoad(b.getPtrTy(), b.CreateInBoundsGEP(b.getPtrTy(), table, {b.getInt64(i)}));
      args.push_back(StorageToValue(b, operand_types[i], b.CreateLoad(storage, ptr)));
    }
  }
  ElementalIrEmitter e(b);
  ASSIGN_OR_RETURN(std::vector<Value*> result, e.EmitScalarComputation(computation, args));
  if (result.size() != 1 || !result[0]->getType()->isIntegerTy(1)) {
    return Error(fmt::format("comparator {} does not return one pred", computation.name()));
  }
  b.CreateRet(b.CreateZExt(result[0], b.getInt8Ty()));
  return OkStatus();
}

}  // namespace xlens::codegen

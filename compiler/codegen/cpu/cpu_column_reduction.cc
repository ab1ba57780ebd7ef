// The CPU column reduction (kernel_builder.h; the plan: cpu_column_reduction.h). One phase sweeps
// the reduced rows over tiles of outputs, sibling reductions of the same operand shape sharing the
// sweep (and the loads of a common operand: sum(x) and sum(x * x) read x once); a second phase
// combines the slices' partial tiles when the plan slices the rows.
#include "compiler/codegen/cpu/cpu_column_reduction.h"

#include <algorithm>
#include <set>

#include <llvm/IR/CFG.h>

#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/hlo/computation.h"
#include "profiler/machine_limits.h"

namespace xlens::codegen {

namespace cpu {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

}  // namespace

ColumnReductionPlan PlanColumnReduction(int64_t out_rows, int64_t n, int64_t reduce_length,
                                        bool may_split, int64_t min_task_elements) {
  ColumnReductionPlan p;
  p.slice_length = reduce_length;
  if (n <= 0 || out_rows <= 0) {  // no outputs: no tasks
    p.block = std::max<int64_t>(n, 1);
    p.groups = 0;
    return p;
  }
  const int64_t work = out_rows * n * std::max<int64_t>(reduce_length, 1);
  // Tasks the work affords at the runtime's grain.
  const int64_t affordable = std::max<int64_t>(1, work / min_task_elements);
  if (n <= kColumnTileElements) {
    // Whole output rows; several of them per task when they are short, as long as that leaves
    // as many tasks as the work affords (up to the target).
    p.block = n;
    p.group = std::clamp<int64_t>(
        kColumnTileElements / n, 1,
        std::max<int64_t>(1, out_rows / std::min(kColumnTargetTasks, affordable)));
  } else {
    p.blocks = CeilDiv(n, kColumnTileElements);
    p.block = RoundUp(CeilDiv(n, p.blocks), 16);
    p.blocks = CeilDiv(n, p.block);
  }
  p.groups = CeilDiv(out_rows, p.group);
  const int64_t column_tasks = p.groups * p.blocks;
  if (column_tasks >= kColumnTargetTasks) return p;
  if (may_split && reduce_length >= 2) {
    const int64_t slices = std::min({CeilDiv(kColumnTargetTasks, column_tasks),
                                     affordable / column_tasks, reduce_length});
    if (slices >= 2) {
      p.slice_length = CeilDiv(reduce_length, slices);
      p.slices = CeilDiv(reduce_length, p.slice_length);
      return p;
    }
  }
  // Not sliced: narrower blocks for more tasks, down to kColumnMinBlock.
  if (p.group == 1) {
    const int64_t want = std::min({CeilDiv(kColumnTargetTasks, p.groups), affordable / p.groups,
                                   n / kColumnMinBlock});
    if (want > p.blocks) {
      p.block = RoundUp(CeilDiv(n, want), 16);
      p.blocks = CeilDiv(n, p.block);
    }
  }
  return p;
}

int64_t ColumnRowsPerVisit(const std::vector<const HloInstruction*>& reduces, int64_t row_bytes,
                           bool from_memory) {
  if (from_memory && row_bytes >= 256 && row_bytes < 4096) return 1;
  for (const HloInstruction* reduce : reduces) {
    const HloInstruction* root = reduce->to_apply()->root_instruction();
    switch (root->opcode()) {
      case HloOpcode::kAdd: case HloOpcode::kMultiply: case HloOpcode::kAnd: case HloOpcode::kOr:
      case HloOpcode::kXor:
        break;
      case HloOpcode::kMaximum: case HloOpcode::kMinimum:
        if (!IsIntegralType(root->shape().element_type())) return 1;
        break;
      default:
        return 1;
    }
  }
  return 4;
}

bool ColumnVisitsWalkRuns(int64_t row_bytes) { return row_bytes >= kColumnRunRowBytes; }

}  // namespace cpu

using llvm::Value;

namespace {

// Asks the loop vectorizer to widen the loop whose induction variable is `iv`, however short its
// trip count, and keeps the full unroller (which runs first) from turning a 16-wide tile into
// straight-line scalar code that the vectorizer then never sees (f32[65536,16] over rows: 0.15 ms
// scalar, 0.055 ms vectorized, on a 2-core Zen 4).
//
// With `unroll_vectorized`, the vectorized loop (of a constant trip count) is then unrolled whole,
// so that a tile held in a stack buffer is addressed at constant offsets, which SROA (run again
// after the unrolling) turns into registers.
void ForceVectorize(llvm::PHINode* iv, bool unroll_vectorized = false) {
  llvm::LLVMContext& c = iv->getContext();
  std::vector<llvm::Metadata*> hints = {LoopHint(c, "llvm.loop.vectorize.enable", llvm::ConstantInt::getTrue(c)),
                                        LoopHint(c, "llvm.loop.unroll.disable")};
  if (unroll_vectorized) {
    hints.push_back(llvm::MDNode::get(
        c, {llvm::MDString::get(c, "llvm.loop.vectorize.followup_vectorized"),
            llvm::MDNode::get(c, {llvm::MDString::get(c, "llvm.loop.unroll.full")})}));
  }
  AddLoopHints(iv->getParent(), hints);
}

// Whether the arrays a sweep reads (the fused computation's parameters, or the reduce's operands
// when it is not fused) take at least half the last-level cache: they stream from memory rather
// than from the cache (ColumnRowsPerVisit).
bool SweepReadsFromMemory(const HloInstruction& reduce) {
  static const int64_t threshold = [] {
    const int64_t llc = profiler::LastLevelCacheBytes();
    return std::max<int64_t>(int64_t{1} << 20, (llc > 0 ? llc : int64_t{64} << 20) / 2);
  }();
  const HloComputation* computation = reduce.parent();
  int64_t bytes = 0;
  if (computation != nullptr && computation->IsFusionComputation()) {
    for (const HloInstruction* p : computation->parameter_instructions()) bytes += shape_util::ByteSizeOf(p->shape());
  } else {
    for (const HloInstruction* operand : reduce.operands()) bytes += shape_util::ByteSizeOf(operand->shape());
  }
  return bytes >= threshold;
}

// Whether `reduce`'s operand reads an array a library call wrote (a kCustom fusion, a dot, a
// convolution, a custom call): `kernel` is the kernel's instruction (the fusion, or the reduce).
bool SweepReadsLibraryOutput(const HloInstruction& kernel, const HloInstruction& reduce) {
  auto library = [](const HloInstruction* x) {
    while (x->opcode() == HloOpcode::kGetTupleElement || x->opcode() == HloOpcode::kBitcast) x = x->operand(0);
    return (x->opcode() == HloOpcode::kFusion && x->fusion_kind == FusionKind::kCustom) ||
           x->opcode() == HloOpcode::kDot || x->opcode() == HloOpcode::kConvolution ||
           x->opcode() == HloOpcode::kCustomCall;
  };
  if (&kernel == &reduce) return library(reduce.operand(0));
  std::vector<const HloInstruction*> stack = {reduce.operand(0)};
  std::set<const HloInstruction*> seen;
  while (!stack.empty()) {
    const HloInstruction* x = stack.back();
    stack.pop_back();
    if (!seen.insert(x).second) continue;
    if (x->opcode() == HloOpcode::kParameter) {
      if (x->parameter_number() < kernel.operand_count() && library(kernel.operand(x->parameter_number()))) {
        return true;
      }
      continue;
    }
    stack.insert(stack.end(), x->operands().begin(), x->operands().end());
  }
  return false;
}

}  // namespace

Status KernelBuilder::EmitCpuColumnReductions(const std::vector<ColumnOutput>& outputs,
                                              bool may_split, const OutputGroup& elementwise) {
  const HloInstruction* first = outputs[0].reduce;
  const Shape& in = first->operand(0)->shape();
  const Shape& out = first->shape().IsTuple() ? first->shape().tuple_shapes(0) : first->shape();
  const std::vector<int64_t>& reduced = first->dimensions();
  auto is_reduced = [&](int64_t d) {
    return std::find(reduced.begin(), reduced.end(), d) != reduced.end();
  };
  const int64_t in_minor = MajorToMinor(in).back();
  // A strided row reduction (cpu::IsStridedRowReduction) reduces the operand's minor dimension
  // too: the sweep keeps it as lanes, a column reduction whose tiles are [outputs, lanes], and
  // the combine phase folds the lanes with the slices.
  const bool lanes = is_reduced(in_minor);
  // Kept operand dimensions in order are the output's dimensions (then the lanes, past the
  // output's rank); the minor-most of them is the operand's minor-most dimension.
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (!is_reduced(d)) kept.push_back(d);
  }
  if (lanes) kept.push_back(in_minor);
  const int64_t rank = static_cast<int64_t>(kept.size());  // of the swept tiles
  const int64_t minor = std::find(kept.begin(), kept.end(), in_minor) - kept.begin();
  std::vector<int64_t> outer, outer_sizes;  // the tiles' other dimensions, major first
  for (int64_t d : MajorToMinor(out)) {
    if (d != minor) {
      outer.push_back(d);
      outer_sizes.push_back(out.dimensions(d));
    }
  }
  std::vector<int64_t> loop_dims, loop_sizes;  // reduced dimensions (but lanes), major first
  int64_t reduce_length = 1;
  for (int64_t d : MajorToMinor(in)) {
    if (is_reduced(d) && !(lanes && d == in_minor)) {
      loop_dims.push_back(d);
      loop_sizes.push_back(in.dimensions(d));
      reduce_length *= in.dimensions(d);
    }
  }
  const int64_t n = in.dimensions(in_minor);
  // Bytes between consecutive reduced rows of the operand: the stride of the minor-most reduced
  // dimension the rows loop walks.
  int64_t row_bytes = std::max(1, BitWidth(in.element_type()) / 8);
  const std::vector<int64_t> in_order = MajorToMinor(in);
  for (auto it = in_order.rbegin(); it != in_order.rend(); ++it) {
    if (!loop_dims.empty() && *it == loop_dims.back()) break;
    row_bytes *= in.dimensions(*it);
  }
  const int64_t out_rows = out.num_elements() / (lanes ? 1 : std::max<int64_t>(n, 1));
  // Sliced finer where a library call wrote what the sweep reads: its parts left the rows in both
  // cores' caches (cpu::kColumnSpreadMinTaskElements).
  const bool spread = may_split && !lanes && target_ == KernelTarget::kCpu && SweepReadsLibraryOutput(hlo_, *first);
  const cpu::ColumnReductionPlan plan = cpu::PlanColumnReduction(
      out_rows, n, reduce_length, may_split,
      spread ? cpu::kColumnSpreadMinTaskElements : cpu::kColumnMinTaskElements);
  const bool sliced = plan.slices > 1;
  // Partial tiles in scratch (rather than accumulating in the destination) when there is
  // something left to fold into it: slices, or lanes.
  const bool partial = sliced || lanes;

  // Each slice's partial tiles: [slices, output dims (, lanes)], laid out as the output with the
  // lanes minor and the slice dimension major, so that the sweep's accumulators are as contiguous
  // as the output's.
  std::vector<std::vector<Binding>> partials(outputs.size());
  if (partial) {
    std::vector<int64_t> dims = {plan.slices};
    dims.insert(dims.end(), out.dimensions().begin(), out.dimensions().end());
    Layout layout;
    if (lanes) {
      dims.push_back(n);
      layout.minor_to_major.push_back(rank);
    }
    for (int64_t d : out.has_layout() ? out.layout().minor_to_major : shape_util::DefaultMinorToMajor(out.rank())) {
      layout.minor_to_major.push_back(d + 1);
    }
    layout.minor_to_major.push_back(0);
    for (size_t i = 0; i < outputs.size(); ++i) {
      outputs[i].reduce->shape().ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) {
        Shape shape(leaf.element_type(), dims);
        shape.set_layout(layout);
        partials[i].push_back({nullptr, {}, shape, spec_.operand_leaves + spec_.output_leaves,
                               spec_.scratch_bytes});
        spec_.scratch_bytes += (shape_util::ByteSizeOf(shape) + 63) / 64 * 64;
      });
    }
  }

  // A tile's outputs: whole output rows [group_begin, group_end) times columns
  // [column_begin, column_end) of the kept minor dimension.
  struct Tile {
    Value* group_begin;
    Value* group_end;
    Value* column_begin;
    Value* column_end;
  };
  auto clamp_to = [&](Value* begin, int64_t step, int64_t limit) {
    Value* stop = b_.CreateAdd(begin, b_.getInt64(step));
    return b_.CreateSelect(b_.CreateICmpSLT(stop, b_.getInt64(limit)), stop, b_.getInt64(limit));
  };
  auto tile_of = [&](Value* tile) {
    Value* group_begin = b_.CreateMul(b_.CreateUDiv(tile, b_.getInt64(plan.blocks)), b_.getInt64(plan.group));
    Value* column_begin = b_.CreateMul(b_.CreateURem(tile, b_.getInt64(plan.blocks)), b_.getInt64(plan.block));
    return Tile{group_begin, clamp_to(group_begin, plan.group, out_rows), column_begin,
                clamp_to(column_begin, plan.block, n)};
  };
  // `body` at every output index of `tile`: output rows outer, columns inner and vectorized.
  auto over_tile = [&](ElementalIrEmitter& em, const Tile& tile,
                       const std::function<Status(const IrIndex&)>& body,
                       bool unroll_vectorized = false) -> Status {
    return em.EmitLoop(tile.group_begin, tile.group_end, "out_row", [&](Value* o) -> Status {
      IrIndex index(rank, nullptr);
      IrIndex outer_index = DelinearizeRowMajor(b_, o, outer_sizes);
      for (size_t j = 0; j < outer.size(); ++j) index[outer[j]] = outer_index[j];
      llvm::PHINode* column_iv = nullptr;
      RETURN_IF_ERROR(em.EmitLoop(tile.column_begin, tile.column_end, "column", [&](Value* c) -> Status {
        column_iv = llvm::cast<llvm::PHINode>(c);
        index[minor] = c;
        return body(index);
      }, access_group_));
      if (column_iv != nullptr) ForceVectorize(column_iv, unroll_vectorized);
      return OkStatus();
    });
  };

  llvm::Function* f = NewPhase(false, plan.tasks(), plan.block * plan.group * plan.slice_length);
  if (spread) spec_.phases.back().chunk_work = cpu::kColumnSpreadMinTaskElements;
  auto e = MakeEmitter();
  // Where each output's leaves accumulate (the destination, or this slice's partial tile).
  std::vector<std::vector<IrArray>> acc(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int64_t count = outputs[i].reduce->operand_count() / 2;
    for (int64_t k = 0; k < count; ++k) {
      acc[i].push_back(partial ? ArrayOf(partials[i][k]) : outputs[i].destination(k));
    }
  }
  // The elementwise outputs the sweep writes: every operand element is read by exactly one task,
  // once, so each output element is written once, at the visit that reads its inputs.
  std::vector<IrArray> swept;
  for (const auto& [value, leaf] : elementwise) swept.push_back(OutputArray(leaf));
  const int64_t tiles = plan.groups * plan.blocks;
  // A task whose tile is one whole output row of at most kRegisterTileBytes of accumulators (all
  // outputs together) accumulates in registers: the tile is a stack buffer the column loops
  // address at constant offsets once unrolled, and goes to its destination once, after the
  // task's rows. Accumulated in place, each row loaded and stored every accumulator: batch
  // norm's four sums of 128 channels, 32 vector loads and 32 stores a row beside the operands'
  // 16 loads. On a 2-core Zen 4 beside other work, alternating with the binary before: its four
  // sums over f32[32,28,28,128] alone, both cores, best of 100 runs, 0.255-0.319 -> 0.204-0.248
  // ms (4 pairs); the whole training step's kernel on one core, best of 50, 1.49-1.63 -> 1.37-1.54
  // ms, lower in 6 of 6 pairs, and on both, medians of the bests of 20 pairs 1.29 -> 1.23 ms,
  // lower in 17. (A C model holding its sums in registers sweeps in 0.16-0.18 ms on both cores.)
  // The MLP step's bias gradient, 128 rows of 256, is no faster (7.0-8.4 against 7.3-8.6 us a
  // run, best of 1500, 3 rounds; the step 0.505 ms either way).
  std::vector<llvm::AllocaInst*> registers;
  const bool register_tile = [&] {
    if (lanes || plan.blocks != 1 || plan.group != 1 || n <= 0) return false;
    int64_t bytes = 0;
    for (const ColumnOutput& output : outputs) {
      const PrimitiveType type = output.reduce->shape().IsArray() ? output.reduce->shape().element_type()
                                                                  : PrimitiveType::PRIMITIVE_TYPE_INVALID;
      if (output.reduce->operand_count() != 2 ||
          (type != PrimitiveType::F32 && type != PrimitiveType::F64)) {
        return false;
      }
      bytes += n * ByteWidth(type);
      if (n * ByteWidth(type) % 64 != 0) return false;
    }
    return bytes <= cpu::kRegisterTileBytes;
  }();
  if (register_tile) {
    for (const ColumnOutput& output : outputs) {
      ASSIGN_OR_RETURN(llvm::Type * type, StorageType(output.reduce->shape().element_type(), b_.getContext()));
      registers.push_back(EmitEntryAlloca(b_, llvm::ArrayType::get(type, n), "tile"));
      registers.back()->setAlignment(llvm::Align(64));
    }
  }
  auto read_acc = [&](size_t i, int64_t k, const IrIndex& index, const IrIndex& acc_index) -> StatusOr<Value*> {
    if (!register_tile) return acc[i][k].EmitRead(b_, acc_index);
    llvm::Type* type = registers[i]->getAllocatedType()->getArrayElementType();
    auto* load = b_.CreateLoad(type, b_.CreateInBoundsGEP(type, registers[i], {index[minor]}));
    if (access_group_ != nullptr) load->setMetadata(llvm::LLVMContext::MD_access_group, access_group_);
    return load;
  };
  auto write_acc = [&](size_t i, int64_t k, const IrIndex& index, const IrIndex& acc_index, Value* v) -> Status {
    if (!register_tile) return acc[i][k].EmitWrite(b_, acc_index, v);
    llvm::Type* type = registers[i]->getAllocatedType()->getArrayElementType();
    auto* store = b_.CreateStore(v, b_.CreateInBoundsGEP(type, registers[i], {index[minor]}));
    if (access_group_ != nullptr) store->setMetadata(llvm::LLVMContext::MD_access_group, access_group_);
    return OkStatus();
  };
  RETURN_IF_ERROR(e->EmitLoop(f->getArg(1), f->getArg(2), "task", [&](Value* task) -> Status {
    Value* slice = sliced ? b_.CreateUDiv(task, b_.getInt64(tiles), "slice") : b_.getInt64(0);
    const Tile tile = tile_of(sliced ? b_.CreateURem(task, b_.getInt64(tiles), "tile") : task);
    Value* row_begin = b_.CreateMul(slice, b_.getInt64(plan.slice_length), "row_begin");
    Value* row_end = clamp_to(row_begin, plan.slice_length, reduce_length);

    // Reduced rows `rows` folded into the tile, in order. `start`: the accumulators are set
    // first (to the init value when `rows` is empty, to the first row's elements otherwise);
    // else they are read. Several rows per visit keep the accumulators in registers across them
    // (one load and store of the tile per ColumnRowsPerVisit rows, not per row) without changing
    // the order of the fold.
    auto sweep_rows = [&](const std::vector<Value*>& rows, bool start) -> Status {
      std::vector<IrIndex> row_index;
      for (Value* row : rows) row_index.push_back(DelinearizeRowMajor(b_, row, loop_sizes));
      return over_tile(*e, tile, [&](const IrIndex& index) -> Status {
        IrIndex acc_index = index;
        if (partial) acc_index.insert(acc_index.begin(), slice);
        std::vector<IrIndex> operand_index(rows.size(), IrIndex(in.rank(), nullptr));
        for (size_t u = 0; u < rows.size(); ++u) {
          for (size_t j = 0; j < loop_dims.size(); ++j) operand_index[u][loop_dims[j]] = row_index[u][j];
          for (size_t j = 0; j < kept.size(); ++j) operand_index[u][kept[j]] = index[j];
        }
        // Every output's new accumulators are computed before any is stored (as an elementwise
        // output group does), though each reads only its own.
        std::vector<std::vector<Value*>> results(outputs.size());
        for (size_t i = 0; i < outputs.size(); ++i) {
          const HloInstruction* reduce = outputs[i].reduce;
          const int64_t count = reduce->operand_count() / 2;
          std::vector<Value*>& value = results[i];
          for (int64_t k = 0; k < count; ++k) {
            if (!start) {
              ASSIGN_OR_RETURN(Value * a, read_acc(i, k, index, acc_index));
              value.push_back(a);
            } else if (rows.empty()) {
              ASSIGN_OR_RETURN(Value * init, e->EmitElement(reduce->operand(count + k), {}));
              value.push_back(init);
            } else {
              ASSIGN_OR_RETURN(Value * x, e->EmitElement(reduce->operand(k), operand_index[0]));
              value.push_back(x);
            }
          }
          for (size_t u = start && !rows.empty() ? 1 : 0; u < rows.size(); ++u) {
            std::vector<Value*> args = value;
            for (int64_t k = 0; k < count; ++k) {
              ASSIGN_OR_RETURN(Value * x, e->EmitElement(reduce->operand(k), operand_index[u]));
              args.push_back(x);
            }
            ASSIGN_OR_RETURN(value, e->EmitScalarComputation(*reduce->to_apply(), args));
          }
        }
        // The elementwise outputs at the rows just read, computed before anything is stored (an
        // output written in place over an operand must not clobber what is still to be read);
        // their values are the reductions' operands' or share their loads.
        std::vector<std::vector<Value*>> values(rows.size());
        for (size_t u = 0; u < rows.size(); ++u) {
          for (const auto& [value, leaf] : elementwise) {
            ASSIGN_OR_RETURN(Value * v, e->EmitElement(value, operand_index[u]));
            values[u].push_back(v);
          }
        }
        for (size_t i = 0; i < outputs.size(); ++i) {
          for (size_t k = 0; k < results[i].size(); ++k) {
            RETURN_IF_ERROR(write_acc(i, k, index, acc_index, results[i][k]));
          }
        }
        for (size_t u = 0; u < rows.size(); ++u) {
          for (size_t j = 0; j < swept.size(); ++j) {
            RETURN_IF_ERROR(swept[j].EmitWrite(b_, operand_index[u], values[u][j]));
          }
        }
        return OkStatus();
      }, register_tile);
    };
    // The register tile to its destination, after the task's rows.
    auto store_tile = [&]() -> Status {
      if (!register_tile) return OkStatus();
      return over_tile(*e, tile, [&](const IrIndex& index) -> Status {
        IrIndex acc_index = index;
        if (partial) acc_index.insert(acc_index.begin(), slice);
        for (size_t i = 0; i < outputs.size(); ++i) {
          ASSIGN_OR_RETURN(Value * v, read_acc(i, 0, index, acc_index));
          RETURN_IF_ERROR(acc[i][0].EmitWrite(b_, acc_index, v));
        }
        return OkStatus();
      }, /*unroll_vectorized=*/true);
    };
    // A slice starts from its first row, so that the init value enters once, in the combine phase
    // (it need not be the reducer's identity); a tile accumulated in the destination starts from
    // the init value.
    Value* sweep_begin = row_begin;
    if (partial) {
      RETURN_IF_ERROR(sweep_rows({row_begin}, /*start=*/true));
      sweep_begin = b_.CreateAdd(row_begin, b_.getInt64(1));
    } else {
      RETURN_IF_ERROR(sweep_rows({}, /*start=*/true));
    }
    // ColumnRowsPerVisit rows at a time while they last, then one at a time.
    std::vector<const HloInstruction*> reduces;
    for (const ColumnOutput& output : outputs) reduces.push_back(output.reduce);
    const int64_t unroll = cpu::ColumnRowsPerVisit(reduces, row_bytes, SweepReadsFromMemory(*first));
    if (unroll == 1) {
      RETURN_IF_ERROR(e->EmitLoop(sweep_begin, row_end, "rows", [&](Value* row) {
        return sweep_rows({row}, /*start=*/false);
      }));
      return store_tile();
    }
    Value* visits = b_.CreateUDiv(b_.CreateSub(row_end, sweep_begin), b_.getInt64(unroll));
    const bool runs = cpu::ColumnVisitsWalkRuns(row_bytes);
    RETURN_IF_ERROR(e->EmitLoop(b_.getInt64(0), visits, "rows", [&](Value* visit) {
      std::vector<Value*> rows;
      if (runs) {
        // Row `visit` of each of `unroll` runs of `visits` consecutive rows.
        for (int64_t u = 0; u < unroll; ++u) {
          rows.push_back(b_.CreateAdd(b_.CreateAdd(sweep_begin, visit),
                                      b_.CreateMul(visits, b_.getInt64(u))));
        }
      } else {
        Value* row = b_.CreateAdd(sweep_begin, b_.CreateMul(visit, b_.getInt64(unroll)));
        for (int64_t u = 0; u < unroll; ++u) rows.push_back(b_.CreateAdd(row, b_.getInt64(u)));
      }
      return sweep_rows(rows, /*start=*/false);
    }));
    Value* rest = b_.CreateAdd(sweep_begin, b_.CreateMul(visits, b_.getInt64(unroll)));
    RETURN_IF_ERROR(e->EmitLoop(rest, row_end, "rest", [&](Value* row) {
      return sweep_rows({row}, /*start=*/false);
    }));
    return store_tile();
  }));
  b_.CreateRetVoid();
  if (!partial) return OkStatus();
  if (lanes) return EmitCpuLaneCombine(outputs, partials, plan.slices);

  // The combine phase, one task per tile: the init value, then each slice's partial tile in slice
  // order (the same order on every run, whichever thread computed which slice), swept as the rows
  // are: slices outer, the tile's columns inner and vectorized over contiguous partials.
  llvm::Function* g = NewPhase(false, tiles, plan.block * plan.group * plan.slices);
  auto ce = MakeEmitter();
  std::vector<std::vector<IrArray>> dest(outputs.size()), part(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t k = 0; k < partials[i].size(); ++k) {
      dest[i].push_back(outputs[i].destination(k));
      part[i].push_back(ArrayOf(partials[i][k]));
    }
  }
  RETURN_IF_ERROR(ce->EmitLoop(g->getArg(1), g->getArg(2), "task", [&](Value* task) -> Status {
    const Tile tile = tile_of(task);
    RETURN_IF_ERROR(over_tile(*ce, tile, [&](const IrIndex& index) -> Status {
      for (size_t i = 0; i < outputs.size(); ++i) {
        const int64_t count = outputs[i].reduce->operand_count() / 2;
        for (int64_t k = 0; k < count; ++k) {
          ASSIGN_OR_RETURN(Value * init, ce->EmitElement(outputs[i].reduce->operand(count + k), {}));
          RETURN_IF_ERROR(dest[i][k].EmitWrite(b_, index, init));
        }
      }
      return OkStatus();
    }));
    return ce->EmitLoop(b_.getInt64(0), b_.getInt64(plan.slices), "slice", [&](Value* s) -> Status {
      return over_tile(*ce, tile, [&](const IrIndex& index) -> Status {
        IrIndex partial_index = index;
        partial_index.insert(partial_index.begin(), s);
        for (size_t i = 0; i < outputs.size(); ++i) {
          const int64_t count = outputs[i].reduce->operand_count() / 2;
          std::vector<Value*> args;
          for (int64_t k = 0; k < count; ++k) {
            ASSIGN_OR_RETURN(Value * a, dest[i][k].EmitRead(b_, index));
            args.push_back(a);
          }
          for (int64_t k = 0; k < count; ++k) {
            ASSIGN_OR_RETURN(Value * p, part[i][k].EmitRead(b_, partial_index));
            args.push_back(p);
          }
          ASSIGN_OR_RETURN(std::vector<Value*> r,
                           ce->EmitScalarComputation(*outputs[i].reduce->to_apply(), args));
          for (int64_t k = 0; k < count; ++k) RETURN_IF_ERROR(dest[i][k].EmitWrite(b_, index, r[k]));
        }
        return OkStatus();
      });
    });
  }));
  b_.CreateRetVoid();
  return OkStatus();
}

KernelBuilder::OutputGroup KernelBuilder::ColumnSweepElementwiseOutputs(
    const std::vector<const HloInstruction*>& reductions,
    const std::vector<const HloInstruction*>& later) const {
  OutputGroup candidates;
  if (target_ != KernelTarget::kCpu || root_ == nullptr || root_->opcode() != HloOpcode::kTuple ||
      hlo_.opcode() != HloOpcode::kFusion || reductions.empty()) {
    return candidates;
  }
  const Shape& in = reductions[0]->operand(0)->shape();
  auto materialised = [&](const HloInstruction* x) {
    return std::any_of(bindings_.begin(), bindings_.end(),
                       [&](const Binding& b) { return b.hlo == x && b.scratch_offset >= 0; });
  };
  auto swept = [&](const HloInstruction* x) {
    return std::find(reductions.begin(), reductions.end(), x) != reductions.end();
  };
  // The parameters `x` reads, stopping at materialised values; false where it reads anything the
  // sweep cannot compute at an element (a reduction, a value computed later, a gather, ...).
  auto reads = [&](const HloInstruction* x, std::set<const HloInstruction*>& parameters,
                   bool elementwise_only) {
    std::vector<const HloInstruction*> stack = {x};
    std::set<const HloInstruction*> seen;
    while (!stack.empty()) {
      const HloInstruction* y = stack.back();
      stack.pop_back();
      if (!seen.insert(y).second || materialised(y)) continue;
      // What runs after the sweep reads its reductions from scratch; the sweep cannot.
      if (swept(y)) {
        if (elementwise_only) return false;
        continue;
      }
      if (y->opcode() == HloOpcode::kParameter) {
        parameters.insert(y);
        continue;
      }
      if (elementwise_only) {
        const bool computable = y->IsElementwise() || y->opcode() == HloOpcode::kBroadcast ||
                                y->opcode() == HloOpcode::kConstant || y->opcode() == HloOpcode::kIota;
        const bool output = std::any_of(outputs_.begin(), outputs_.end(),
                                        [&](const auto& out) { return out.first == y; });
        const bool pending = !output && std::find(later.begin(), later.end(), y) != later.end();
        if (!computable || pending) return false;
      }
      stack.insert(stack.end(), y->operands().begin(), y->operands().end());
    }
    return true;
  };
  std::vector<std::set<const HloInstruction*>> parameters;
  for (const auto& [value, leaf] : outputs_) {
    std::set<const HloInstruction*> read;
    if (written_.count(value) && written_.at(value)) continue;
    if (!value->shape().IsArray() || !shape_util::SameDimensions(value->shape(), in) || materialised(value) ||
        value->opcode() == HloOpcode::kReduce || !reads(value, read, /*elementwise_only=*/true)) {
      continue;
    }
    candidates.push_back({value, leaf});
    parameters.push_back(std::move(read));
  }
  // Drop the candidates that share a parameter with what is computed after the sweep, until none
  // does (a dropped candidate is computed after it too).
  for (bool dropped = true; dropped;) {
    dropped = false;
    std::set<const HloInstruction*> read_later;
    for (const HloInstruction* x : later) {
      const bool candidate = std::any_of(candidates.begin(), candidates.end(),
                                         [&](const auto& c) { return c.first == x; });
      if (!candidate) reads(x, read_later, /*elementwise_only=*/false);
    }
    for (size_t i = 0; i < candidates.size(); ++i) {
      const bool shared = std::any_of(parameters[i].begin(), parameters[i].end(),
                                      [&](const HloInstruction* p) { return read_later.count(p) > 0; });
      if (shared) {
        candidates.erase(candidates.begin() + i);
        parameters.erase(parameters.begin() + i);
        dropped = true;
        break;
      }
    }
  }
  return candidates;
}

Status KernelBuilder::EmitCpuLaneCombine(const std::vector<ColumnOutput>& outputs,
                                         const std::vector<std::vector<Binding>>& partials,
                                         int64_t slices) {
  // Per output: the init value, then its lanes of every slice folded in. The fold may reassociate
  // (as a row reduction's does: reduce leaves its order open), so that the loop over the lanes
  // vectorizes; cpu::IsStridedRowReduction admits only reducers for which that is exact or, for
  // floating-point sums and products, the usual rounding.
  const HloInstruction* first = outputs[0].reduce;
  const Shape& out = first->shape();
  const int64_t n = partials[0][0].shape.dimensions().back();
  return EmitParallelLoop(out, slices * n, [&](ElementalIrEmitter& ce, const IrIndex& index) -> Status {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const HloInstruction* reduce = outputs[i].reduce;
      ASSIGN_OR_RETURN(Value * init, ce.EmitElement(reduce->operand(1), {}));
      llvm::AllocaInst* slot = EmitEntryAlloca(b_, init->getType(), "combined");
      b_.CreateStore(init, slot);
      IrArray part = ArrayOf(partials[i][0]);
      RETURN_IF_ERROR(ce.EmitLoop(b_.getInt64(0), b_.getInt64(slices), "slice", [&](Value* s) -> Status {
        return ce.EmitLoop(b_.getInt64(0), b_.getInt64(n), "lane", [&](Value* lane) -> Status {
          IrIndex partial_index = {s};
          partial_index.insert(partial_index.end(), index.begin(), index.end());
          partial_index.push_back(lane);
          ASSIGN_OR_RETURN(Value * p, part.EmitRead(b_, partial_index));
          llvm::IRBuilder<>::FastMathFlagGuard guard(b_);
          llvm::FastMathFlags flags;
          flags.setAllowReassoc();
          b_.setFastMathFlags(flags);
          ASSIGN_OR_RETURN(std::vector<Value*> r,
                           ce.EmitScalarComputation(*reduce->to_apply(),
                                                    {b_.CreateLoad(slot->getAllocatedType(), slot), p}));
          b_.CreateStore(r[0], slot);
          return OkStatus();
        });
      }));
      RETURN_IF_ERROR(outputs[i].destination(0).EmitWrite(
          b_, index, b_.CreateLoad(slot->getAllocatedType(), slot)));
    }
    return OkStatus();
  });
}

namespace cpu {

bool IsStridedRowReduction(const HloInstruction& reduce) {
  if (reduce.opcode() != HloOpcode::kReduce || reduce.operand_count() != 2 ||
      !reduce.shape().IsArray()) {
    return false;
  }
  const Shape& in = reduce.operand(0)->shape();
  const std::vector<int64_t>& reduced = reduce.dimensions();
  auto is_reduced = [&](int64_t d) {
    return std::find(reduced.begin(), reduced.end(), d) != reduced.end();
  };
  const std::vector<int64_t> order = MajorToMinor(in);
  if (in.rank() < 2 || !is_reduced(order.back())) return false;
  // Only short minor dimensions: a row reduction's vectorized loop over a longer one reduces to a
  // scalar rarely enough, keeps its accumulators in registers and writes no partials
  // (f32[64,64,1024] over {0, 2}: 0.37 ms as rows, 0.63 ms as lanes).
  if (in.dimensions(order.back()) > kMaxLanes) return false;
  // Some reduced dimension major to a kept one (else it is a row reduction), and the rows other
  // than the lanes at least 8, so that the partial tiles are at most an eighth of the operand.
  bool reduced_seen = false, kept_seen = false, strided = false;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < order.size(); ++i) {
    if (is_reduced(order[i])) {
      reduced_seen = true;
      rows *= in.dimensions(order[i]);
    } else {
      kept_seen = true;
      strided |= reduced_seen;
    }
  }
  if (!kept_seen || !strided || rows < 8) return false;
  // The reducer: one associative and commutative operation of its two parameters, so that
  // folding lanes and slices in another order than the evaluator's changes nothing (integers,
  // max, min, bitwise) or only the rounding (float sums and products, as in any row reduction).
  const HloComputation& f = *reduce.to_apply();
  const HloInstruction* root = f.root_instruction();
  if (f.num_parameters() != 2 || root->operand_count() != 2 ||
      root->operand(0)->opcode() != HloOpcode::kParameter ||
      root->operand(1)->opcode() != HloOpcode::kParameter || root->operand(0) == root->operand(1)) {
    return false;
  }
  switch (root->opcode()) {
    case HloOpcode::kAdd: case HloOpcode::kMultiply: case HloOpcode::kMaximum:
    case HloOpcode::kMinimum: case HloOpcode::kAnd: case HloOpcode::kOr: case HloOpcode::kXor:
      break;
    default:
      return false;
  }
  return true;
}

namespace {

// What `reduction` reads through the fused values it is computed from: the reduces it waits for
// (the walk stops at them: their results are read, not their operands) and the large parameters.
struct SweepReads {
  std::set<const HloInstruction*> reduces;
  std::set<const HloInstruction*> arrays;
};

SweepReads ReadsOf(const HloInstruction& reduction) {
  SweepReads reads;
  const int64_t elements = reduction.operand(0)->shape().num_elements();
  std::set<const HloInstruction*> seen;
  std::vector<const HloInstruction*> stack(reduction.operands().begin(), reduction.operands().end());
  while (!stack.empty()) {
    const HloInstruction* x = stack.back();
    stack.pop_back();
    if (!seen.insert(x).second) continue;
    if (x->opcode() == HloOpcode::kReduce) {
      reads.reduces.insert(x);
    } else if (x->opcode() == HloOpcode::kParameter) {
      if (x->shape().IsArray() && x->shape().num_elements() * 16 > elements) reads.arrays.insert(x);
    } else {
      stack.insert(stack.end(), x->operands().begin(), x->operands().end());
    }
  }
  return reads;
}

}  // namespace

bool SharesColumnSweep(const HloInstruction& a, const HloInstruction& b) {
  return a.dimensions() == b.dimensions() && a.operand(0)->shape() == b.operand(0)->shape() &&
         a.shape() == b.shape();
}

std::unordered_map<const HloInstruction*, int> PlanColumnSweepLevels(
    const std::vector<const HloInstruction*>& reductions) {
  const size_t n = reductions.size();
  std::vector<SweepReads> reads;
  for (const HloInstruction* r : reductions) reads.push_back(ReadsOf(*r));
  // Whether reductions[i] reads reductions[j], directly or through reductions outside the list.
  std::vector<std::vector<bool>> waits(n, std::vector<bool>(n, false));
  for (size_t i = 0; i < n; ++i) {
    std::set<const HloInstruction*> seen;
    std::vector<const HloInstruction*> stack(reads[i].reduces.begin(), reads[i].reduces.end());
    while (!stack.empty()) {
      const HloInstruction* x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second) continue;
      auto at = std::find(reductions.begin(), reductions.end(), x);
      if (at != reductions.end()) {
        waits[i][at - reductions.begin()] = true;
        continue;
      }
      const SweepReads further = ReadsOf(*x);
      stack.insert(stack.end(), further.reduces.begin(), further.reduces.end());
    }
  }
  // Earliest levels (post-order: what a reduction reads comes before it), then the latest each
  // may take below its readers.
  std::vector<int> earliest(n, 0);
  int last = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (waits[i][j]) earliest[i] = std::max(earliest[i], earliest[j] + 1);
    }
    last = std::max(last, earliest[i]);
  }
  std::vector<int> latest(n, last);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (waits[j][i]) latest[i] = std::min(latest[i], earliest[j] - 1);
    }
  }
  // The large arrays that the reductions held to one level read there, sharing `i`'s sweep.
  auto arrays_at = [&](size_t i, int level) {
    std::set<const HloInstruction*> arrays;
    for (size_t j = 0; j < n; ++j) {
      if (j == i || earliest[j] != latest[j] || earliest[j] != level ||
          !SharesColumnSweep(*reductions[i], *reductions[j])) {
        continue;
      }
      arrays.insert(reads[j].arrays.begin(), reads[j].arrays.end());
    }
    return arrays;
  };
  auto covers = [&](const std::set<const HloInstruction*>& arrays, size_t i) {
    return std::includes(arrays.begin(), arrays.end(), reads[i].arrays.begin(),
                         reads[i].arrays.end());
  };
  std::unordered_map<const HloInstruction*, int> levels;
  for (size_t i = 0; i < n; ++i) {
    int level = earliest[i];
    if (latest[i] > earliest[i] && !covers(arrays_at(i, earliest[i]), i)) {
      for (int later = earliest[i] + 1; later <= latest[i]; ++later) {
        if (covers(arrays_at(i, later), i)) {
          level = later;
          break;
        }
      }
    }
    levels[reductions[i]] = level;
  }
  return levels;
}

}  // namespace cpu

}  // namespace xlens::codegen

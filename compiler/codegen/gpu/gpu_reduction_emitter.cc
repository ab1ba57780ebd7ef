// GPU reductions (kernel_builder.h): row kernels (a reduction over the minor-most dimensions,
// with what is computed from its result in the same fusion: softmax, layer norm, sibling and
// variadic reductions) and column reductions.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "compiler/codegen/gpu/gpu_launch_plan.h"
#include "compiler/codegen/gpu/gpu_primitives.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/codegen/row_analysis.h"

namespace xlens::codegen {

using llvm::Value;

namespace {

// The element type of each array leaf of `shape`.
std::vector<PrimitiveType> LeafTypes(const Shape& shape) {
  std::vector<PrimitiveType> types;
  shape.ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) { types.push_back(s.element_type()); });
  return types;
}

}  // namespace

StatusOr<bool> KernelBuilder::TryEmitGpuRowKernel(const std::vector<RowOutput>& outputs) {
  std::set<const HloInstruction*> bound;
  for (const Binding& binding : bindings_) bound.insert(binding.hlo);
  RowAnalysis analysis([&](const HloInstruction* x) { return bound.count(x) > 0; });
  std::vector<const RowOutput*> row_outputs, reduced_outputs;
  for (const RowOutput& out : outputs) {
    const Space s = analysis.Classify(out.hlo);
    if (s == Space::kUnsupported) return false;
    row_outputs.push_back(&out);  // placed below, once the row shape is known
  }
  if (analysis.reductions().empty()) return false;
  const Shape& row_shape = analysis.row_shape();
  const std::vector<int64_t>& kept = analysis.kept();
  std::vector<int64_t> kept_dims;
  for (int64_t d : kept) kept_dims.push_back(row_shape.dimensions(d));
  {
    std::vector<const RowOutput*> all;
    all.swap(row_outputs);
    for (const RowOutput* out : all) {
      const Space s = analysis.Classify(out->hlo);
      bool per_row = true;
      out->hlo->shape().ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) {
        per_row &= leaf.dimensions() == kept_dims;
      });
      const bool per_element = out->hlo->shape().IsArray() &&
                               out->hlo->shape().dimensions() == row_shape.dimensions();
      if (s != Space::kReduced && per_element) {
        row_outputs.push_back(out);
      } else if (s != Space::kRow && per_row) {
        reduced_outputs.push_back(out);
      } else {
        return false;
      }
    }
  }
  for (const HloInstruction* r : analysis.reductions()) {
    for (PrimitiveType t : LeafTypes(r->shape())) {
      if (!IsCodegenSupportedType(t) || t == PrimitiveType::C64 || t == PrimitiveType::C128) return false;
    }
  }

  // Launch shape: a row of at most 32 elements takes the next power of two of lanes (several
  // rows per warp), a longer one a warp, a long one (or few long rows) a block of 256 threads.
  const int64_t length = shape_util::ByteSizeOf(row_shape) == 0 ? 0 : [&] {
    int64_t l = 1;
    for (int64_t d = 0; d < row_shape.rank(); ++d) {
      if (!std::binary_search(kept.begin(), kept.end(), d)) l *= row_shape.dimensions(d);
    }
    return l;
  }();
  const int64_t rows = row_shape.num_elements() / length;
  int64_t lanes = length <= 32 ? gpu::PowerOfTwoCeil(length) : 32;
  if (length > 4096 || (length > 512 && rows < 264)) lanes = 256;
  const int64_t threads = lanes >= 256 ? 256 : std::min<int64_t>(256, (rows * lanes + 31) / 32 * 32);
  const int64_t rows_per_block = threads / lanes;
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  NewGpuPhase(blocks, threads, lanes * length / std::max<int64_t>(1, lanes));
  auto e = MakeEmitter();
  Value* tid = gpu::EmitThreadIdx(b_);
  Value* lane = b_.CreateURem(tid, b_.getInt64(lanes), "lane");
  Value* row = b_.CreateAdd(b_.CreateMul(gpu::EmitBlockIdx(b_), b_.getInt64(rows_per_block)),
                            b_.CreateUDiv(tid, b_.getInt64(lanes)), "row");
  Value* valid = b_.CreateICmpULT(row, b_.getInt64(rows), "valid_row");
  Value* row_start = b_.CreateMul(row, b_.getInt64(length), "row_start", true, true);
  // This lane's elements of the row: lane, lane + lanes, ... (consecutive lanes read consecutive
  // elements: coalesced).
  Value* trips = b_.CreateUDiv(b_.CreateSub(b_.getInt64(length + lanes - 1), lane), b_.getInt64(lanes));
  auto for_each_element = [&](const std::function<Status(const IrIndex&)>& body,
                              int64_t first_trip = 0) -> Status {
    return e->EmitIf(valid, "row.valid", [&]() -> Status {
      return e->EmitLoop(b_.getInt64(first_trip), trips, "row.element", [&](Value* i) -> Status {
        Value* j = b_.CreateAdd(lane, b_.CreateMul(i, b_.getInt64(lanes), "", true, true), "", true, true);
        return body(DelinearizePhysical(b_, b_.CreateAdd(row_start, j, "", true, true), row_shape));
      });
    });
  };
  // Lanes past the row's end (tiny rows only) hold no element.
  Value* lane_has_elements = lanes <= length ? b_.getTrue() : b_.CreateICmpULT(lane, b_.getInt64(length));

  int max_level = 0;
  for (const HloInstruction* r : analysis.reductions()) max_level = std::max(max_level, analysis.Level(r));
  int shared_arrays = 0;
  for (int level = 1; level <= max_level; ++level) {
    std::vector<const HloInstruction*> group;
    for (const HloInstruction* r : analysis.reductions()) {
      if (analysis.Level(r) == level) group.push_back(r);
    }
    // Each lane folds its elements, starting from its first one: the init value is applied once
    // per row, at the end, as the evaluator applies it (it need not be the reducer's identity).
    std::vector<std::vector<llvm::AllocaInst*>> accumulators;
    std::vector<std::vector<Value*>> inits;
    for (const HloInstruction* r : group) {
      const int64_t n = r->operand_count() / 2;
      std::vector<llvm::AllocaInst*> accs;
      std::vector<Value*> init;
      for (int64_t k = 0; k < n; ++k) {
        ASSIGN_OR_RETURN(Value * v, e->EmitElement(r->operand(n + k), {}));
        llvm::AllocaInst* acc = EmitEntryAlloca(b_, v->getType(), "row.acc");
        b_.CreateStore(v, acc);  // a defined value for lanes without elements
        accs.push_back(acc);
        init.push_back(v);
      }
      accumulators.push_back(std::move(accs));
      inits.push_back(std::move(init));
    }
    RETURN_IF_ERROR(e->EmitIf(b_.CreateAnd(valid, lane_has_elements), "row.first", [&]() -> Status {
      IrIndex index = DelinearizePhysical(b_, b_.CreateAdd(row_start, lane, "", true, true), row_shape);
      for (size_t g = 0; g < group.size(); ++g) {
        const int64_t n = group[g]->operand_count() / 2;
        for (int64_t k = 0; k < n; ++k) {
          ASSIGN_OR_RETURN(Value * x, e->EmitElement(group[g]->operand(k), index));
          b_.CreateStore(x, accumulators[g][k]);
        }
      }
      return OkStatus();
    }));
    RETURN_IF_ERROR(for_each_element([&](const IrIndex& index) -> Status {
      for (size_t g = 0; g < group.size(); ++g) {
        const HloInstruction* r = group[g];
        const int64_t n = r->operand_count() / 2;
        std::vector<Value*> args;
        for (llvm::AllocaInst* acc : accumulators[g]) args.push_back(b_.CreateLoad(acc->getAllocatedType(), acc));
        for (int64_t k = 0; k < n; ++k) {
          ASSIGN_OR_RETURN(Value * x, e->EmitElement(r->operand(k), index));
          args.push_back(x);
        }
        ASSIGN_OR_RETURN(std::vector<Value*> results, e->EmitScalarComputation(*r->to_apply(), args));
        for (int64_t k = 0; k < n; ++k) b_.CreateStore(results[k], accumulators[g][k]);
      }
      return OkStatus();
    }, /*first_trip=*/1));
    // Lanes of a row combine by shuffles; the warps of a block through shared memory.
    for (size_t g = 0; g < group.size(); ++g) {
      const HloInstruction* r = group[g];
      std::vector<Value*> values;
      for (llvm::AllocaInst* acc : accumulators[g]) values.push_back(b_.CreateLoad(acc->getAllocatedType(), acc));
      ASSIGN_OR_RETURN(values, gpu::EmitWarpReduce(*e, *r->to_apply(), values,
                                                   std::min<int64_t>(lanes, gpu::kWarpSize), lane, length));
      if (lanes > gpu::kWarpSize) {
        const int64_t warps = lanes / gpu::kWarpSize;
        const std::vector<PrimitiveType> types = LeafTypes(r->shape());
        std::vector<llvm::GlobalVariable*> shared;
        Value* warp = b_.CreateUDiv(tid, b_.getInt64(gpu::kWarpSize));
        for (size_t k = 0; k < values.size(); ++k) {
          ASSIGN_OR_RETURN(llvm::Type * storage, StorageType(types[k], b_.getContext()));
          shared.push_back(gpu::CreateSharedArray(module_, storage, warps,
                                                  fmt::format("{}_partial{}", spec_.phases.back().function_name,
                                                              shared_arrays++)));
        }
        Value* first_lane = b_.CreateICmpEQ(b_.CreateURem(tid, b_.getInt64(gpu::kWarpSize)), b_.getInt64(0));
        RETURN_IF_ERROR(e->EmitIf(first_lane, "warp.leader", [&]() -> Status {
          for (size_t k = 0; k < values.size(); ++k) {
            b_.CreateStore(ValueToStorage(b_, types[k], values[k]), gpu::SharedElementPointer(b_, shared[k], warp));
          }
          return OkStatus();
        }));
        gpu::EmitBarrier(b_);
        // Every thread combines the warps' partial results in the same order: all hold the
        // row's result, no second broadcast needed.
        auto load_partial = [&](int64_t w) {
          std::vector<Value*> partial;
          for (size_t k = 0; k < values.size(); ++k) {
            llvm::Type* storage = shared[k]->getValueType()->getArrayElementType();
            partial.push_back(StorageToValue(
                b_, types[k], b_.CreateLoad(storage, gpu::SharedElementPointer(b_, shared[k], b_.getInt64(w)))));
          }
          return partial;
        };
        values = load_partial(0);
        for (int64_t w = 1; w < warps; ++w) {
          std::vector<Value*> args = values;
          for (Value* v : load_partial(w)) args.push_back(v);
          ASSIGN_OR_RETURN(values, e->EmitScalarComputation(*r->to_apply(), args));
        }
      }
      {
        std::vector<Value*> args = inits[g];
        args.insert(args.end(), values.begin(), values.end());
        ASSIGN_OR_RETURN(values, e->EmitScalarComputation(*r->to_apply(), args));
      }
      e->BindValues(r, values);
    }
  }

  // Per-row outputs: by the row's first lane, at the row's index in the kept dimensions.
  if (!reduced_outputs.empty()) {
    Value* leader = b_.CreateAnd(valid, b_.CreateICmpEQ(lane, b_.getInt64(0)));
    RETURN_IF_ERROR(e->EmitIf(leader, "row.leader", [&]() -> Status {
      const IrIndex first = DelinearizePhysical(b_, row_start, row_shape);
      IrIndex index;
      for (int64_t d : kept) index.push_back(first[d]);
      std::vector<std::vector<Value*>> values;
      for (const RowOutput* out : reduced_outputs) {
        ASSIGN_OR_RETURN(std::vector<Value*> leaves, e->EmitLeaves(out->hlo, index));
        values.push_back(std::move(leaves));
      }
      for (size_t o = 0; o < reduced_outputs.size(); ++o) {
        for (size_t k = 0; k < values[o].size(); ++k) {
          RETURN_IF_ERROR(reduced_outputs[o]->destination(k).EmitWrite(b_, index, values[o][k]));
        }
      }
      return OkStatus();
    }));
  }
  // Per-element outputs: the row again, every value of an element computed before any is stored.
  if (!row_outputs.empty()) {
    RETURN_IF_ERROR(for_each_element([&](const IrIndex& index) -> Status {
      std::vector<std::vector<Value*>> values;
      for (const RowOutput* out : row_outputs) {
        ASSIGN_OR_RETURN(std::vector<Value*> leaves, e->EmitLeaves(out->hlo, index));
        values.push_back(std::move(leaves));
      }
      for (size_t o = 0; o < row_outputs.size(); ++o) {
        for (size_t k = 0; k < values[o].size(); ++k) {
          RETURN_IF_ERROR(row_outputs[o]->destination(k).EmitWrite(b_, index, values[o][k]));
        }
      }
      return OkStatus();
    }));
  }
  b_.CreateRetVoid();
  return true;
}

Status KernelBuilder::EmitGpuColumnReduction(const HloInstruction* reduce, const Destination& destination,
                                              bool may_split) {
  constexpr int64_t kTile = gpu::kWarpSize;  // output columns per block
  constexpr int64_t kRowsInFlight = 16;      // warps per block, each sweeping every 16th row
  const int64_t count = reduce->operand_count() / 2;
  const Shape& in = reduce->operand(0)->shape();
  const Shape& out = reduce->shape().IsTuple() ? reduce->shape().tuple_shapes(0) : reduce->shape();
  const std::vector<int64_t>& reduced = reduce->dimensions();
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (std::find(reduced.begin(), reduced.end(), d) == reduced.end()) kept.push_back(d);
  }
  const int64_t in_minor = MajorToMinor(in).back();
  const int64_t minor = std::find(kept.begin(), kept.end(), in_minor) - kept.begin();
  std::vector<int64_t> outer;  // the other output dimensions, major first
  for (int64_t d : MajorToMinor(out)) {
    if (d != minor) outer.push_back(d);
  }
  std::vector<int64_t> loop_dims, loop_sizes;  // reduced dimensions, major first
  int64_t reduce_length = 1;
  for (int64_t d : MajorToMinor(in)) {
    if (std::find(reduced.begin(), reduced.end(), d) != reduced.end()) {
      loop_dims.push_back(d);
      loop_sizes.push_back(in.dimensions(d));
      reduce_length *= in.dimensions(d);
    }
  }
  const int64_t columns = out.dimensions(minor);
  const int64_t outer_rows = out.num_elements() / std::max<int64_t>(columns, 1);
  const int64_t tiles = (columns + kTile - 1) / kTile;
  const std::vector<PrimitiveType> types = LeafTypes(reduce->shape());
  double bytes_read = 0;
  for (int64_t k = 0; k < count; ++k) {
    bytes_read += static_cast<double>(in.num_elements()) * ByteWidth(reduce->operand(k)->shape().element_type());
  }
  // Few column tiles and many rows: the rows are cut into slices, one block per slice and tile,
  // each slice's result (its warps combined, without the init value) goes to scratch, and a
  // second kernel combines the slices in order with the init value: the same result on every run.
  const gpu::SplitPlan split = options_.gpu_split_launches && may_split
                                   ? gpu::PlanStreamingSplit(outer_rows * tiles, kRowsInFlight, reduce_length,
                                                             /*min_steps=*/16 * kRowsInFlight, bytes_read)
                                   : gpu::SplitPlan{1, reduce_length};
  std::vector<Binding> partials;
  if (split.slices > 1) {
    std::vector<int64_t> dims = {split.slices};
    for (int64_t d : out.dimensions()) dims.push_back(d);
    for (int64_t k = 0; k < count; ++k) {
      Shape shape(types[k], dims);
      shape.SetDefaultLayout();
      partials.push_back({nullptr, {}, shape, spec_.operand_leaves + spec_.output_leaves, spec_.scratch_bytes});
      spec_.scratch_bytes += (shape_util::ByteSizeOf(shape) + 63) / 64 * 64;
    }
  }
  const int64_t slice_length = split.steps_per_slice;
  NewGpuPhase(outer_rows * tiles * split.slices, kTile * kRowsInFlight,
              (slice_length + kRowsInFlight - 1) / kRowsInFlight);
  auto e = MakeEmitter();
  Value* tid = gpu::EmitThreadIdx(b_);
  Value* block = gpu::EmitBlockIdx(b_);
  Value* bid = b_.CreateURem(block, b_.getInt64(outer_rows * tiles), "tile");
  Value* slice = b_.CreateUDiv(block, b_.getInt64(outer_rows * tiles), "slice");
  // This block's rows: [row_begin, row_begin + rows); every slice has at least 16 rows.
  Value* row_begin = b_.CreateMul(slice, b_.getInt64(slice_length), "row_begin");
  Value* rows = b_.CreateSub(b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin,
                                                      b_.CreateAdd(row_begin, b_.getInt64(slice_length)),
                                                      b_.getInt64(reduce_length)),
                             row_begin, "rows");
  Value* tx = b_.CreateURem(tid, b_.getInt64(kTile), "tx");
  Value* ty = b_.CreateUDiv(tid, b_.getInt64(kTile), "ty");
  Value* column = b_.CreateAdd(b_.CreateMul(b_.CreateURem(bid, b_.getInt64(tiles)), b_.getInt64(kTile)), tx, "column");
  Value* outer_row = b_.CreateUDiv(bid, b_.getInt64(tiles));
  IrIndex index(out.rank(), nullptr);
  index[minor] = column;
  for (auto it = outer.rbegin(); it != outer.rend(); ++it) {
    if (it + 1 == outer.rend()) {
      index[*it] = outer_row;
    } else {
      index[*it] = b_.CreateURem(outer_row, b_.getInt64(out.dimensions(*it)));
      outer_row = b_.CreateUDiv(outer_row, b_.getInt64(out.dimensions(*it)));
    }
  }
  std::vector<llvm::AllocaInst*> accs;
  std::vector<Value*> inits;
  for (int64_t k = 0; k < count; ++k) {
    ASSIGN_OR_RETURN(Value * init, e->EmitElement(reduce->operand(count + k), {}));
    accs.push_back(EmitEntryAlloca(b_, init->getType(), "column.acc"));
    b_.CreateStore(init, accs.back());  // a defined value for warps without rows
    inits.push_back(init);
  }
  Value* in_bounds = b_.CreateICmpULT(column, b_.getInt64(columns));
  auto operand_index_of_row = [&](Value* r) {
    IrIndex reduced_index = DelinearizeRowMajor(b_, r, loop_sizes);
    IrIndex operand_index(in.rank(), nullptr);
    for (size_t j = 0; j < loop_dims.size(); ++j) operand_index[loop_dims[j]] = reduced_index[j];
    for (size_t j = 0; j < kept.size(); ++j) operand_index[kept[j]] = index[j];
    return operand_index;
  };
  // Each warp starts from its first row: the init value is applied once, at the end.
  Value* has_rows = b_.CreateAnd(in_bounds, b_.CreateICmpULT(ty, rows));
  RETURN_IF_ERROR(e->EmitIf(has_rows, "column.first", [&]() -> Status {
    IrIndex operand_index = operand_index_of_row(b_.CreateAdd(row_begin, ty));
    for (int64_t k = 0; k < count; ++k) {
      ASSIGN_OR_RETURN(Value * x, e->EmitElement(reduce->operand(k), operand_index));
      b_.CreateStore(x, accs[k]);
    }
    return OkStatus();
  }));
  // Warp ty reads rows ty, ty + 16, ...: 32 consecutive elements of a row per access.
  Value* trips = b_.CreateUDiv(b_.CreateSub(b_.CreateAdd(rows, b_.getInt64(kRowsInFlight - 1)), ty),
                               b_.getInt64(kRowsInFlight));
  RETURN_IF_ERROR(e->EmitIf(in_bounds, "column.valid", [&]() -> Status {
    return e->EmitLoop(b_.getInt64(1), trips, "column.row", [&](Value* i) -> Status {
      Value* r = b_.CreateAdd(b_.CreateAdd(row_begin, ty), b_.CreateMul(i, b_.getInt64(kRowsInFlight), "", true, true),
                              "", true, true);
      IrIndex operand_index = operand_index_of_row(r);
      std::vector<Value*> args;
      for (llvm::AllocaInst* acc : accs) args.push_back(b_.CreateLoad(acc->getAllocatedType(), acc));
      for (int64_t k = 0; k < count; ++k) {
        ASSIGN_OR_RETURN(Value * x, e->EmitElement(reduce->operand(k), operand_index));
        args.push_back(x);
      }
      ASSIGN_OR_RETURN(std::vector<Value*> results, e->EmitScalarComputation(*reduce->to_apply(), args));
      for (int64_t k = 0; k < count; ++k) b_.CreateStore(results[k], accs[k]);
      return OkStatus();
    });
  }));
  // Partial results through shared memory: [warp][column]; warp 0 combines a column's 16.
  std::vector<llvm::GlobalVariable*> shared;
  for (int64_t k = 0; k < count; ++k) {
    ASSIGN_OR_RETURN(llvm::Type * storage, StorageType(types[k], b_.getContext()));
    shared.push_back(gpu::CreateSharedArray(module_, storage, kTile * kRowsInFlight,
                                            fmt::format("{}_columns{}", spec_.phases.back().function_name, k)));
    Value* v = b_.CreateLoad(accs[k]->getAllocatedType(), accs[k]);
    b_.CreateStore(ValueToStorage(b_, types[k], v), gpu::SharedElementPointer(b_, shared[k], tid));
  }
  gpu::EmitBarrier(b_);
  Value* writer = b_.CreateAnd(in_bounds, b_.CreateICmpEQ(ty, b_.getInt64(0)));
  RETURN_IF_ERROR(e->EmitIf(writer, "column.write", [&]() -> Status {
    auto load = [&](int64_t w) {
      std::vector<Value*> v;
      for (int64_t k = 0; k < count; ++k) {
        llvm::Type* storage = shared[k]->getValueType()->getArrayElementType();
        Value* slot = b_.CreateAdd(tx, b_.getInt64(w * kTile));
        v.push_back(StorageToValue(b_, types[k], b_.CreateLoad(storage, gpu::SharedElementPointer(b_, shared[k], slot))));
      }
      return v;
    };
    std::vector<Value*> values = split.slices > 1 ? load(0) : inits;
    for (int64_t w = split.slices > 1 ? 1 : 0; w < std::min(kRowsInFlight, reduce_length); ++w) {
      std::vector<Value*> args = values;
      for (Value* v : load(w)) args.push_back(v);
      ASSIGN_OR_RETURN(values, e->EmitScalarComputation(*reduce->to_apply(), args));
    }
    for (int64_t k = 0; k < count; ++k) {
      if (split.slices > 1) {
        IrIndex partial_index = {slice};
        partial_index.insert(partial_index.end(), index.begin(), index.end());
        RETURN_IF_ERROR(ArrayOf(partials[k]).EmitWrite(b_, partial_index, values[k]));
      } else {
        RETURN_IF_ERROR(destination(k).EmitWrite(b_, index, values[k]));
      }
    }
    return OkStatus();
  }));
  b_.CreateRetVoid();
  if (split.slices == 1) return OkStatus();

  // The slices combined in order, starting from the init value.
  return EmitGpuLoop(out, split.slices, [&](ElementalIrEmitter& e2, const IrIndex& out_index) -> Status {
    std::vector<Value*> values;
    for (int64_t k = 0; k < count; ++k) {
      ASSIGN_OR_RETURN(Value * init, e2.EmitElement(reduce->operand(count + k), {}));
      values.push_back(init);
    }
    for (int64_t s = 0; s < split.slices; ++s) {
      IrIndex partial_index = {b_.getInt64(s)};
      partial_index.insert(partial_index.end(), out_index.begin(), out_index.end());
      std::vector<Value*> args = values;
      for (int64_t k = 0; k < count; ++k) {
        ASSIGN_OR_RETURN(Value * part, ArrayOf(partials[k]).EmitRead(b_, partial_index));
        args.push_back(part);
      }
      ASSIGN_OR_RETURN(values, e2.EmitScalarComputation(*reduce->to_apply(), args));
    }
    for (int64_t k = 0; k < count; ++k) RETURN_IF_ERROR(destination(k).EmitWrite(b_, out_index, values[k]));
    return OkStatus();
  });
}

}  // namespace xlens::codegen

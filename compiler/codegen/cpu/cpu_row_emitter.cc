// The CPU row kernel (kernel_builder.h): a row fusion (row_analysis.h: softmax, log-softmax,
// layer norm, RMS norm, a row reduction with its elementwise epilogue) as one phase of one task
// per row. A task computes its row's reductions in order (each a vectorised loop over the row,
// the later ones reading the earlier results as scalars), then every per-row value once, then the
// row's outputs. A row of a few KiB stays in L1 across these passes, where the phase-per-
// reduction form streams the whole operand through memory once per pass and waits for every
// thread at each phase's end.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/codegen/row_analysis.h"

namespace xlens::codegen {

using llvm::Value;

namespace {

bool IsTranscendental(HloOpcode op) {
  switch (op) {
    case HloOpcode::kExp: case HloOpcode::kExpm1: case HloOpcode::kLog: case HloOpcode::kLog1p:
    case HloOpcode::kTanh: case HloOpcode::kLogistic: case HloOpcode::kErf: case HloOpcode::kPower:
    case HloOpcode::kSin: case HloOpcode::kCos: case HloOpcode::kTan: case HloOpcode::kAtan2:
    case HloOpcode::kCbrt:
      return true;
    default:
      return false;
  }
}

// Row caches of all transcendental values together stay within L1.
constexpr int64_t kRowCacheBytes = 32 * 1024;

}  // namespace

StatusOr<bool> KernelBuilder::TryEmitCpuRowKernel(const std::vector<RowOutput>& outputs) {
  std::set<const HloInstruction*> bound;
  for (const Binding& binding : bindings_) bound.insert(binding.hlo);
  RowAnalysis analysis([&](const HloInstruction* x) { return bound.count(x) > 0; });
  for (const RowOutput& out : outputs) {
    if (analysis.Classify(out.hlo) == Space::kUnsupported) return false;
  }
  if (analysis.reductions().empty()) return false;
  const Shape& row_shape = analysis.row_shape();
  const std::vector<int64_t>& kept = analysis.kept();
  std::vector<int64_t> kept_dims;
  for (int64_t d : kept) kept_dims.push_back(row_shape.dimensions(d));
  // Outputs per element of the rows, and outputs per row (a reduction's result, or values of it).
  std::vector<const RowOutput*> element_outputs, row_outputs;
  for (const RowOutput& out : outputs) {
    const Space s = analysis.Classify(out.hlo);
    bool per_row = true;
    out.hlo->shape().ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) {
      per_row &= leaf.IsArray() && leaf.dimensions() == kept_dims;
    });
    const bool per_element =
        out.hlo->shape().IsArray() && out.hlo->shape().dimensions() == row_shape.dimensions();
    if (s != Space::kReduced && per_element) {
      element_outputs.push_back(&out);
    } else if (s != Space::kRow && per_row) {
      row_outputs.push_back(&out);
    } else {
      return false;
    }
  }
  for (const HloInstruction* r : analysis.reductions()) {
    bool supported = true;
    r->shape().ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) {
      supported &= IsCodegenSupportedType(leaf.element_type());
    });
    if (!supported) return false;
  }
  // Kept and reduced dimensions in physical order; the layout puts the reduced ones minor-most.
  std::vector<int64_t> kept_physical, reduced_physical;
  int64_t length = 1;
  for (int64_t d : MajorToMinor(row_shape)) {
    if (std::binary_search(kept.begin(), kept.end(), d)) {
      kept_physical.push_back(d);
    } else {
      reduced_physical.push_back(d);
      length *= row_shape.dimensions(d);
    }
  }
  const int64_t rows = length == 0 ? 0 : row_shape.num_elements() / length;
  if (rows == 0) return false;
  int levels = 0;
  for (const HloInstruction* r : analysis.reductions()) levels = std::max(levels, analysis.Level(r));
  const int64_t passes = levels + (element_outputs.empty() ? 0 : 1);

  llvm::Function* f = NewPhase(false, rows, length * passes);
  auto e = MakeEmitter();
  // The per-row values that per-element ones read (through a broadcast along the rows).
  std::vector<const HloInstruction*> row_values;
  if (hlo_.opcode() == HloOpcode::kFusion) {
    for (const HloInstruction* x : hlo_.fused_computation()->MakeInstructionPostOrder()) {
      if (x->opcode() == HloOpcode::kBroadcast && analysis.Classify(x) == Space::kRow) {
        row_values.push_back(x->operand(0));
      }
    }
  }
  // A loop nest over the elements of the row at `kept_index` (the reduced dimensions in physical
  // order, the innermost parallel so that it vectorizes).
  auto for_each_element = [&](ElementalIrEmitter& e, const IrIndex& kept_index,
                               const std::function<Status(const IrIndex&)>& body) -> Status {
    IrIndex index(row_shape.rank(), nullptr);
    for (size_t k = 0; k < kept.size(); ++k) index[kept[k]] = kept_index[k];
    std::function<Status(size_t)> nest = [&](size_t level) -> Status {
      const int64_t d = reduced_physical[level];
      const bool innermost = level + 1 == reduced_physical.size();
      return e.EmitLoop(b_.getInt64(0), b_.getInt64(row_shape.dimensions(d)), "row.element",
                        [&](Value* iv) -> Status {
        index[d] = iv;
        return innermost ? body(index) : nest(level + 1);
      }, innermost ? access_group_ : nullptr);
    };
    return nest(0);
  };
  // Transcendental per-element values that more than one pass reads (softmax's exp(x - max): the
  // sum's pass and the output's) are computed once into a row-sized buffer on the stack and read
  // back from L1 by the later passes.
  std::vector<const HloInstruction*> readers;  // one per pass: each reduction, then the outputs
  for (const HloInstruction* r : analysis.reductions()) readers.push_back(r);
  for (const RowOutput* out : element_outputs) readers.push_back(out->hlo);
  std::map<const HloInstruction*, int> passes_reading;
  for (const HloInstruction* reader : readers) {
    std::set<const HloInstruction*> seen;
    std::function<void(const HloInstruction*)> walk = [&](const HloInstruction* x) {
      if (!seen.insert(x).second || bound.count(x)) return;
      if (x != reader && x->opcode() == HloOpcode::kReduce) return;
      if (x != reader) ++passes_reading[x];
      for (const HloInstruction* operand : x->operands()) walk(operand);
    };
    walk(reader);
  }
  std::vector<const HloInstruction*> cached;
  int64_t cache_bytes = 0;
  if (hlo_.opcode() == HloOpcode::kFusion) {
    for (const HloInstruction* x : hlo_.fused_computation()->MakeInstructionPostOrder()) {
      if (!IsTranscendental(x->opcode()) || passes_reading[x] < 2 || !x->shape().IsArray() ||
          analysis.Classify(x) != Space::kRow || x->shape().dimensions() != row_shape.dimensions()) {
        continue;
      }
      const int64_t bytes = length * shape_util::ByteSizeOf(Shape(x->shape().element_type(), {}));
      if (cache_bytes + bytes > kRowCacheBytes) continue;
      cache_bytes += bytes;
      cached.push_back(x);
    }
  }
  std::vector<IrArray> caches;
  for (const HloInstruction* x : cached) {
    ASSIGN_OR_RETURN(llvm::Type * storage, StorageType(x->shape().element_type(), b_.getContext()));
    llvm::AllocaInst* buffer = EmitEntryAlloca(b_, llvm::ArrayType::get(storage, length), "row.cache");
    buffer->setAlignment(llvm::Align(64));
    // The row's shape with every kept dimension 1: an index into the rows addresses the row.
    Shape window = x->shape();
    for (int64_t d : kept) window.set_dimensions(d, 1);
    caches.emplace_back(buffer, window);
    caches.back().set_access_group(access_group_);
  }
  auto fill_caches = [&](ElementalIrEmitter& e, const IrIndex& kept_index, int level) -> Status {
    for (size_t c = 0; c < cached.size(); ++c) {
      if (analysis.Level(cached[c]) != level) continue;
      RETURN_IF_ERROR(for_each_element(e, kept_index, [&](const IrIndex& index) -> Status {
        ASSIGN_OR_RETURN(Value * v, e.EmitElement(cached[c], index));
        return caches[c].EmitWrite(b_, index, v);
      }));
      e.BindArray(cached[c], {}, caches[c]);
    }
    return OkStatus();
  };
  std::vector<const HloInstruction*> by_level = analysis.reductions();
  std::stable_sort(by_level.begin(), by_level.end(), [&](const HloInstruction* a, const HloInstruction* b) {
    return analysis.Level(a) < analysis.Level(b);
  });
  RETURN_IF_ERROR(e->EmitLoop(f->getArg(1), f->getArg(2), "row", [&](Value* row) -> Status {
    // The row's position in the kept dimensions (the reductions' results are indexed by them,
    // in increasing dimension order).
    IrIndex kept_index(kept.size(), nullptr);
    Value* rest = row;
    for (auto it = kept_physical.rbegin(); it != kept_physical.rend(); ++it) {
      const int64_t k = std::find(kept.begin(), kept.end(), *it) - kept.begin();
      if (it + 1 == kept_physical.rend()) {
        kept_index[k] = rest;
      } else {
        kept_index[k] = b_.CreateURem(rest, b_.getInt64(row_shape.dimensions(*it)));
        rest = b_.CreateUDiv(rest, b_.getInt64(row_shape.dimensions(*it)));
      }
    }
    // Reductions in dependency order, then the per-row values: each computed once per row and
    // reused (the emitter's cache) wherever the element loops below read it.
    RETURN_IF_ERROR(fill_caches(*e, kept_index, 0));
    for (size_t i = 0; i < by_level.size(); ++i) {
      RETURN_IF_ERROR(e->EmitLeaves(by_level[i], kept_index).status());
      const int level = analysis.Level(by_level[i]);
      if (i + 1 == by_level.size() || analysis.Level(by_level[i + 1]) != level) {
        RETURN_IF_ERROR(fill_caches(*e, kept_index, level));
      }
    }
    for (const HloInstruction* x : row_values) RETURN_IF_ERROR(e->EmitLeaves(x, kept_index).status());
    // Per-row outputs are computed now and stored after the element loop: an output may share
    // its buffer with a per-row operand that loop still reads.
    std::vector<std::vector<Value*>> row_results;
    for (const RowOutput* out : row_outputs) {
      ASSIGN_OR_RETURN(std::vector<Value*> leaves, e->EmitLeaves(out->hlo, kept_index));
      row_results.push_back(std::move(leaves));
    }
    if (!element_outputs.empty()) {
      RETURN_IF_ERROR(for_each_element(*e, kept_index, [&](const IrIndex& index) -> Status {
        // Every output's element is computed before any is stored (in-place outputs).
        std::vector<std::vector<Value*>> values;
        for (const RowOutput* out : element_outputs) {
          ASSIGN_OR_RETURN(std::vector<Value*> leaves, e->EmitLeaves(out->hlo, index));
          values.push_back(std::move(leaves));
        }
        for (size_t o = 0; o < element_outputs.size(); ++o) {
          for (size_t k = 0; k < values[o].size(); ++k) {
            RETURN_IF_ERROR(element_outputs[o]->destination(k).EmitWrite(b_, index, values[o][k]));
          }
        }
        return OkStatus();
      }));
    }
    for (size_t o = 0; o < row_outputs.size(); ++o) {
      for (size_t k = 0; k < row_results[o].size(); ++k) {
        RETURN_IF_ERROR(row_outputs[o]->destination(k).EmitWrite(b_, kept_index, row_results[o][k]));
      }
    }
    return OkStatus();
  }));
  b_.CreateRetVoid();
  return true;
}

}  // namespace xlens::codegen

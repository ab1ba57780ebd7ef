// The CPU row kernel (kernel_builder.h): a row fusion (row_analysis.h: softmax, log-softmax,
// layer norm, RMS norm, a row reduction with its elementwise epilogue) as one phase of one task
// per row. A task computes its row's reductions level by level (the independent ones of a level
// in one vectorised loop over the row, cpu_row_loops.h; the later levels reading the earlier
// results as scalars), then every per-row value once, then the row's outputs. A row of a few
// KiB stays in L1 across these passes (a longer one in L2), where the phase-per-reduction form
// streams the whole operand through memory once per pass and waits for every thread at each
// phase's end.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <llvm/IR/Intrinsics.h>

#include "compiler/codegen/cpu/cpu_row_loops.h"
#include "compiler/codegen/cpu/cpu_streaming_store.h"
#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/codegen/row_analysis.h"
#include "compiler/codegen/scalar_ops.h"
#include "compiler/passes/sum_pattern.h"

namespace xlens::codegen {

using llvm::Value;

namespace {

// Row caches of all transcendental values together: a row up to 8K floats stays in L1; a longer
// one (a softmax over a vocabulary of 50K) is still read back from L2 far faster than its exp is
// computed again. The bound keeps the stack buffer well within a thread's stack.
constexpr int64_t kRowCacheBytes = 256 * 1024;
// The stack buffers of a row's streamed outputs together, where a row spans several dimensions
// and is streamed out whole after it is computed: within L1 beside the row itself. A row along
// one dimension is streamed a stretch at a time from buffers of one stretch each
// (cpu::kStreamingStretchBytes), at any length.
constexpr int64_t kRowStageBytes = 16 * 1024;
// A streamed row kernel prefetches the operands it reads along the rows ahead of the line it
// writes, a stretch at a time as it writes it: the reads go out beside the streaming stores, as
// an elementwise loop's do, instead of all at once in a row's first pass, from memory or from the
// last-level cache. Layer norm over f32[4096,1024] took 1.06 ms a run beside other work, 0.89
// prefetched two rows ahead (medians of 14 alternating runs; 1.39 and 1.03 over 10 others). One
// row ahead is too late there: layer norm lost 5-10%; the whole next row prefetched at the start
// of a row lost 15% on the RMS norm.
//
// The distance is this many bytes of all the prefetched operands together, each operand's share
// ahead of the line written, so that what is in flight stays within L1 (32 KiB) beside the row
// being read again: two rows ahead of each operand put the RMS norm's x and residual 16 KiB
// ahead, 24 KiB of rows in L1 with the current one, and its prefetched lines were evicted before
// its reduction read them. RMS norm with its residual over f32[4096,1024] on one core, best of
// 100 runs in 4-5 alternating rounds beside other work: 1.97-2.08 ms two rows ahead, 1.59-1.91
// at 8 KiB (6 KiB 1.65-1.71, 12 KiB 1.53-1.98, 4 KiB 1.91-2.04); layer norm, one operand, is
// still two rows ahead.
constexpr int64_t kRowPrefetchBytes = 8 * 1024;

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
  // `split` (or null): where the innermost loop stops computing mask->predicate and runs on with
  // it false (ColumnPrefixMask); `head` (or null, at most `split`): up to where it runs with the
  // predicate true, before computing it. `tail` (or null): called once for the columns from
  // `split` on in place of their loop, where every value computed there is the same along them.
  std::optional<ColumnPrefixMask> mask;
  if (hlo_.opcode() == HloOpcode::kFusion && reduced_physical.size() == 1) {
    mask = FindColumnPrefixMask(*hlo_.fused_computation(), row_shape, reduced_physical[0], kept);
  }
  // Whether the rows are computed across (decided below, before any loop is emitted).
  bool across_rows = false;
  auto for_each_element = [&](ElementalIrEmitter& e, const IrIndex& kept_index,
                              const std::function<Status(const IrIndex&)>& body, Value* split = nullptr,
                              Value* head = nullptr, const RowUniformTail* tail = nullptr) -> Status {
    IrIndex index(row_shape.rank(), nullptr);
    for (size_t k = 0; k < kept.size(); ++k) index[kept[k]] = kept_index[k];
    std::function<Status(size_t)> nest = [&](size_t level) -> Status {
      const int64_t d = reduced_physical[level];
      const bool innermost = level + 1 == reduced_physical.size();
      auto loop = [&](Value* begin, Value* end) -> Status {
        if (across_rows) {
          // Unrolled as it is emitted: the loop vectorizer takes the row loop around it, and
          // EarlyCSE, early in the pipeline, then finds the levels' loads of the same element
          // (the maximum's, the exponentials' and the outputs' reads of x) one; unrolled later,
          // they stayed apart, one interleaved group each, the rest as gathers.
          for (int64_t j = 0; j < row_shape.dimensions(d); ++j) {
            index[d] = b_.getInt64(j);
            RETURN_IF_ERROR(innermost ? body(index) : nest(level + 1));
          }
          return OkStatus();
        }
        return e.EmitLoop(begin, end, "row.element", [&](Value* iv) -> Status {
          index[d] = iv;
          return innermost ? body(index) : nest(level + 1);
        }, innermost ? access_group_ : nullptr);
      };
      Value* size = b_.getInt64(row_shape.dimensions(d));
      if (!innermost || split == nullptr) return loop(b_.getInt64(0), size);
      if (head != nullptr) {
        e.BindValues(mask->predicate, {b_.getTrue()});
        Status status = loop(b_.getInt64(0), head);
        e.UnbindValues(mask->predicate);
        RETURN_IF_ERROR(status);
      }
      RETURN_IF_ERROR(loop(head != nullptr ? head : b_.getInt64(0), split));
      e.BindValues(mask->predicate, {b_.getFalse()});
      Status status;
      if (tail != nullptr) {
        // The last column: any of them would do, and this one is within the row.
        IrIndex at = index;
        at[d] = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, split, b_.getInt64(row_shape.dimensions(d) - 1));
        status = (*tail)(at, b_.CreateSub(size, split));
      } else {
        status = loop(split, size);
      }
      e.UnbindValues(mask->predicate);
      return status;
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
  // Reductions by level: the level-L ones share one loop over the row, which also fills the
  // row caches of level L-1 (softmax: the sum's loop computes exp(x - max) once, stores it and
  // adds it up), so each level reads the row once.
  std::map<int, std::vector<const HloInstruction*>> by_level;
  for (const HloInstruction* r : analysis.reductions()) by_level[analysis.Level(r)].push_back(r);
  std::vector<const HloInstruction*> cached;
  int64_t cache_bytes = 0;
  if (hlo_.opcode() == HloOpcode::kFusion) {
    for (const HloInstruction* x : hlo_.fused_computation()->MakeInstructionPostOrder()) {
      if (!IsPolynomialTranscendental(x->opcode()) || passes_reading[x] < 2 || !x->shape().IsArray() ||
          analysis.Classify(x) != Space::kRow || x->shape().dimensions() != row_shape.dimensions() ||
          by_level.count(analysis.Level(x) + 1) == 0) {
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
  // Divisions of elements by a per-row value become multiplications by its reciprocal.
  std::vector<const HloInstruction*> row_divisors;
  if (hlo_.opcode() == HloOpcode::kFusion) {
    row_divisors = PerRowDivisors(*hlo_.fused_computation(), [&](const HloInstruction* x) {
      return analysis.Classify(x) == Space::kRow;
    });
  }
  // Per-element outputs at least the streaming threshold are written a row at a time from stack
  // buffers with streaming stores (cpu_streaming_store.h), where the row is contiguous in each,
  // and where the kernel is bound by memory: not where it computes a transcendental function per
  // element (softmax's and log-softmax's exponentials, an activation after a norm). Such a row's
  // time goes to its exponentials; plain stores leave the output lines to be written back while
  // the next row's exponentials run, where the output pass's streaming stores, a row's lines in a
  // burst with no reads beside them, wait for memory. Streamed against plain, median of 3-4
  // alternating pairs of 60-100 runs beside other work: softmax over f32[8192,1000] 3.65 against
  // 2.38 ms a run on one core (3.56 / 2.39 on both), over f32[4200,1000] 1.61 / 1.17,
  // f32[32768,1000] 15.4 / 9.9, f32[8192,1024] 3.27 / 2.49; log-softmax over f32[8192,1000] 3.51
  // / 2.44. Layer norm and the RMS norm, light loops, keep streaming: 2.02 / 3.02 and 3.66 / 5.23
  // over f32[8192,1024] on one core; layer norm with a tanh after it is as heavy: 3.90 / 3.81
  // (best 3.76 / 3.61), medians of 5 pairs.
  // Per-row values (layer norm's rsqrt, log-softmax's log of the sum) are computed once a row.
  std::vector<const HloInstruction*> per_element;
  for (const HloInstruction* r : analysis.reductions()) {
    for (int64_t i = 0; i < r->operand_count() / 2; ++i) per_element.push_back(r->operand(i));
  }
  for (const RowOutput* out : element_outputs) per_element.push_back(out->hlo);
  const bool bound_by_compute = ReachesTranscendental(per_element, [&](const HloInstruction* x) {
    return bound.count(x) > 0 || analysis.Classify(x) != Space::kRow;
  });
  // A row along one dimension is computed and streamed out a stretch at a time, each output's
  // stretch in a buffer of its own that every stretch reuses: a buffer of the whole row each kept
  // an RMS norm over rows of 4096 floats (its two outputs' rows 32 KiB) off streaming stores
  // altogether, 2.8-3.4 ms a run on one core over f32[1024,4096] against 1.6 with rows of 1024.
  const bool by_stretches = reduced_physical.size() == 1;
  int64_t stretch = length;
  for (const RowOutput* out : element_outputs) {
    stretch = std::min(stretch, cpu::kStreamingStretchBytes / ByteWidth(out->hlo->shape().element_type()));
  }
  const int64_t stage_length = by_stretches ? stretch : length;
  std::vector<IrArray> stages;
  int64_t stream_bytes = 0, stage_bytes = 0;
  for (const RowOutput* out : element_outputs) {
    const Shape& s = out->hlo->shape();
    const int64_t width = ByteWidth(s.element_type());
    const bool contiguous = MajorToMinor(s) == MajorToMinor(row_shape);
    if (!contiguous || (width != 1 && width != 2 && width != 4 && width != 8 && width != 16)) {
      stream_bytes = -1;
      break;
    }
    stream_bytes += s.num_elements() * width;
    stage_bytes += stage_length * width;
  }
  const int64_t threshold = StreamingStoreThreshold();
  if (threshold > 0 && stream_bytes >= threshold && stage_bytes <= kRowStageBytes && !bound_by_compute) {
    for (const RowOutput* out : element_outputs) {
      ASSIGN_OR_RETURN(llvm::Type * storage, StorageType(out->hlo->shape().element_type(), b_.getContext()));
      llvm::AllocaInst* buffer = EmitEntryAlloca(b_, llvm::ArrayType::get(storage, stage_length), "row.stage");
      buffer->setAlignment(llvm::Align(64));
      Shape window = out->hlo->shape();
      for (int64_t d : kept) window.set_dimensions(d, 1);
      if (by_stretches) window.set_dimensions(reduced_physical[0], stage_length);
      stages.emplace_back(buffer, window);
      stages.back().set_access_group(access_group_);
    }
  }
  // Streamed outputs of rows of whole lines, all of one element width: a line's stack buffer
  // each, for the line loop below.
  std::vector<IrArray> line_stages;
  int64_t line_elements = 0;
  if (!stages.empty() && reduced_physical.size() == 1) {
    const int64_t width = ByteWidth(element_outputs[0]->hlo->shape().element_type());
    bool whole_lines = 64 % width == 0 && length * width % 64 == 0;
    for (const RowOutput* out : element_outputs) {
      ASSIGN_OR_RETURN(llvm::Type * storage, StorageType(out->hlo->shape().element_type(), b_.getContext()));
      whole_lines &= ByteWidth(out->hlo->shape().element_type()) == width &&
                     llvm::VectorType::isValidElementType(storage);
    }
    if (whole_lines) {
      line_elements = 64 / width;
      for (const RowOutput* out : element_outputs) {
        ASSIGN_OR_RETURN(llvm::Type * storage, StorageType(out->hlo->shape().element_type(), b_.getContext()));
        llvm::AllocaInst* buffer = EmitEntryAlloca(b_, llvm::ArrayType::get(storage, line_elements), "row.line.stage");
        buffer->setAlignment(llvm::Align(64));
        Shape window = out->hlo->shape();
        for (int64_t d : kept) window.set_dimensions(d, 1);
        window.set_dimensions(reduced_physical[0], line_elements);
        line_stages.emplace_back(buffer, window);
        line_stages.back().set_access_group(access_group_);
      }
    }
  }
  // The operands read along the rows in place (x and the residual of an RMS norm), which a
  // streamed row kernel prefetches kRowPrefetchBytes ahead, together, while it writes a row.
  std::vector<std::pair<IrArray, int64_t>> prefetched;  // array, element bytes
  const std::vector<int64_t> physical = MajorToMinor(row_shape);
  const bool rows_contiguous =
      std::equal(reduced_physical.begin(), reduced_physical.end(),
                 physical.end() - static_cast<std::ptrdiff_t>(reduced_physical.size()));
  if (!stages.empty() && rows_contiguous && reduced_physical.size() == 1) {
    for (const Binding& binding : bindings_) {
      if (binding.scratch_offset < 0 && binding.shape.IsArray() &&
          binding.shape.dimensions() == row_shape.dimensions() &&
          MajorToMinor(binding.shape) == physical) {
        prefetched.push_back({ArrayOf(binding), ByteWidth(binding.shape.element_type())});
      }
    }
  }
  // Rows narrower than a vector (a classifier's 10 logits) are computed kAcrossRowsWidth at a time
  // (cpu_row_loops.h): the loop over the rows is the vector loop, each row's loops unrolled whole
  // as they are emitted. Where the reductions and outputs vectorize (ShortRowVectorizes) in
  // elements of 32 bits or fewer, along one contiguous dimension, kAcrossRowsMinRows or more, with
  // no prefix mask and no streamed outputs. Each step's rows are one iteration of the vector
  // loop: a row cache, one row's buffer that the next row reuses, is no parallel access across
  // rows and is not marked one (unrolled whole, it becomes registers; were it left in memory,
  // the loop would stay scalar, not wrong). Divisions by a per-row value stay divisions (one
  // vector division for 16 rows), and a maximum keeps its NaN semantics in its one pass.
  std::vector<PrimitiveType> written_types;
  for (const RowOutput* out : element_outputs) written_types.push_back(out->hlo->shape().element_type());
  for (const RowOutput* out : row_outputs) {
    out->hlo->shape().ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) {
      written_types.push_back(leaf.element_type());
    });
  }
  bool narrow_types = true;
  for (PrimitiveType type : written_types) narrow_types &= ByteWidth(type) <= 4;
  for (const HloInstruction* r : analysis.reductions()) {
    r->shape().ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) {
      narrow_types &= ByteWidth(leaf.element_type()) <= 4;
    });
  }
  across_rows = stages.empty() && !mask.has_value() && reduced_physical.size() == 1 && rows_contiguous &&
                length <= (bound_by_compute ? kAcrossRowsMaxLength : kAcrossRowsLightMaxLength) &&
                rows >= kAcrossRowsMinRows && narrow_types && ShortRowVectorizes(analysis.reductions(), written_types);
  if (across_rows) {
    for (IrArray& cache : caches) cache.set_access_group(nullptr);
    row_divisors.clear();
  }
  // Past a prefix mask, where every value the row's loops compute is the same on every column
  // the mask drops (UniformPastPrefix: softmax's exp(-1e9 - max) and its quotient by the sum),
  // the reductions take those columns in closed form (ReducesInClosedForm) and the outputs store
  // their one value there, so that only the kept columns are looped over; the row caches are not
  // written past the mask, so the outputs must be the only readers of a cache beyond the level
  // that fills it (its loop runs at least as far into the row as theirs: it also takes the next
  // row along). Causal attention's softmax over f32[8,512,512] looped over all 512 columns of
  // every row in each pass, as slow as an unmasked one, where its rows keep 256 on average.
  // Not for streamed outputs (their stretches and lines), nor short rows of one vector.
  bool uniform_tail = mask.has_value() && stages.empty() && ShortRowVectorWidth(length) == 0;
  if (uniform_tail) {
    const int64_t column = reduced_physical[0];
    for (const HloInstruction* r : analysis.reductions()) {
      uniform_tail &= ReducesInClosedForm(r) && UniformPastPrefix(r->operand(0), *mask, column);
    }
    for (const HloInstruction* x : cached) {
      const PrimitiveType type = x->shape().element_type();
      uniform_tail &= (type == PrimitiveType::F32 || type == PrimitiveType::F64) &&
                      analysis.Level(x) + 1 == by_level.rbegin()->first && UniformPastPrefix(x, *mask, column);
    }
    for (const RowOutput* out : element_outputs) uniform_tail &= UniformPastPrefix(out->hlo, *mask, column);
  }
  // Per row cache, its value on the columns past the mask (set by the level that fills it).
  std::vector<llvm::AllocaInst*> uniform_tails(cached.size(), nullptr);
  // The row's position in the kept dimensions (the reductions' results are indexed by them, in
  // increasing dimension order).
  auto kept_index_of = [&](Value* row) {
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
    return kept_index;
  };
  // The split and head of the row at `kept_index` (null without a prefix mask), taking along the
  // next row where `ahead`.
  auto prefix_bounds = [&](const IrIndex& kept_index, const RowReductionsAhead* ahead) {
    // The split of a prefix mask: past the kept prefix of this row and of the next one where
    // that row's reductions are taken along, rounded up to whole vector steps, within the row.
    // And the head, where the mask keeps every column of both rows: the last multiple of
    // kColumnPrefixSplitAlignment at most the shorter kept prefix, so that the loop computes the
    // mask over one or two vector steps a row instead of over the whole prefix. Computing it per
    // element took the loop's 64-bit column indices, their compares (four a vector of 16 floats
    // for two rows) and masked moves, and spilled its constants' registers: 75 instructions a step
    // of 32 elements in causal attention's softmax over f32[8,512,512], 50 without. The kernel
    // alone on one core (best of 1500 runs a process, 8 alternating process pairs beside other
    // work, load 6-8): 0.558-0.633 ms (median 0.574) -> 0.539-0.622 (0.551); on both cores the
    // gain is inside the noise (medians of 10 pairs' bests 0.303 and 0.302): its reads and writes
    // bound it there more than its arithmetic.
    Value* split = nullptr;
    Value* head = nullptr;
    if (mask.has_value()) {
      const size_t k = std::find(kept.begin(), kept.end(), mask->kept_dimension) - kept.begin();
      auto prefix_end = [&](const IrIndex& index) {
        return b_.CreateAdd(index[mask->kept_dimension], b_.getInt64(mask->offset + 1));
      };
      IrIndex index(row_shape.rank(), nullptr);
      index[mask->kept_dimension] = kept_index[k];
      Value* end = prefix_end(index);
      Value* shorter = end;
      if (ahead != nullptr) {
        Value* next_end = prefix_end(ahead->next_row(index));
        end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, end, next_end);
        shorter = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, shorter, next_end);
      }
      constexpr int64_t a = kColumnPrefixSplitAlignment;
      Value* columns = b_.getInt64(row_shape.dimensions(reduced_physical.back()));
      auto within_row = [&](Value* v) {
        v = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, v, b_.getInt64(0));
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, v, columns);
      };
      split = within_row(b_.CreateAnd(b_.CreateAdd(end, b_.getInt64(a - 1)), b_.getInt64(-a)));
      head = within_row(b_.CreateAnd(shorter, b_.getInt64(-a)));
    }
    return std::make_pair(split, head);
  };
  auto emit_level = [&](int level, const std::vector<const HloInstruction*>& reductions,
                        const IrIndex& kept_index, const RowReductionsAhead* ahead) -> Status {
    std::vector<size_t> filled;
    for (size_t c = 0; c < cached.size(); ++c) {
      if (analysis.Level(cached[c]) == level - 1) filled.push_back(c);
    }
    const std::pair<Value*, Value*> bounds = prefix_bounds(kept_index, ahead);
    Value* split = bounds.first;
    Value* head = bounds.second;
    return EmitRowReductions(*e, reductions, cached, caches, filled,
                             row_shape.dimensions(reduced_physical.back()),
                             [&](const std::function<Status(const IrIndex&)>& body, const RowUniformTail* tail) {
                               return for_each_element(*e, kept_index, body, split, head, tail);
                             },
                             ahead, uniform_tail ? &uniform_tails : nullptr, across_rows);
  };
  // With more than one level, the first level's reductions (which read no per-row value) run a
  // row ahead, in the last level's loop (cpu_row_loops.h), and a task's first row takes them
  // before its row loop. Not where the first level's loop fills a row cache (that buffer holds
  // one row), nor in a streamed kernel (its loops are light, see above): its reads from memory
  // are timed by the prefetches that its output pass issues, and a row read a pass earlier
  // outran them (layer norm over f32[4096,1024] on one core 0.64-0.87 -> 0.77-1.08 ms a run,
  // where rows in cache gained 0.009 -> 0.008).
  const bool first_level_ahead =
      by_level.size() >= 2 && stages.empty() && !across_rows &&
      std::none_of(cached.begin(), cached.end(), [&](const HloInstruction* x) {
        return analysis.Level(x) == by_level.begin()->first - 1;
      });
  // A streamed kernel whose reductions are all sums of one level (the RMS norm's sum of squares)
  // takes them a row ahead in its output loop instead: the next row's reads from memory go out
  // beside this row's streaming stores, as an elementwise loop's do, where the row's own sum was
  // a pass of reads with no stores beside it, which waited at its end for the last lines the
  // output pass had prefetched. The operands are then prefetched a row further on. Sums only: the
  // loop folds each line into the sum as one vector (a reducer of one pipelined instruction, whose
  // order the sum's semantics leaves free), and a maximum's NaN test would weigh on a light loop.
  // Sums of 32- and 64-bit elements only: f16 and bf16 are stored as 16-bit values that the loop
  // widens, which a line of partial sums in the storage type would not be.
  // RMS norm with its residual over f32[4096,1024], its kernel's IR and the same schedule written
  // in C++ (intrinsics) timed alternately in one process on both threads, the runs during which
  // both threads kept their CPUs: 1.18-1.24 -> 1.11-1.14 ms a run (a copy of the same bytes with
  // streaming stores: 1.08-1.13); without the prefetches a row further on it gained only 1-3%.
  const bool sums_in_output_loop =
      !first_level_ahead && !stages.empty() && by_level.size() == 1 && by_stretches && rows_contiguous &&
      cached.empty() && !mask.has_value() &&
      std::all_of(by_level.begin()->second.begin(), by_level.begin()->second.end(), [](const HloInstruction* r) {
        const PrimitiveType type = r->shape().element_type();
        return r->operand_count() == 2 && IsAddReducer(r->to_apply()) &&
               (type == PrimitiveType::F32 || type == PrimitiveType::F64 || type == PrimitiveType::S32 ||
                type == PrimitiveType::S64 || type == PrimitiveType::U32 || type == PrimitiveType::U64);
      });
  const bool level_ahead = first_level_ahead || sums_in_output_loop;
  RowReductionsAhead ahead;
  if (level_ahead) {
    ahead.reductions = by_level.begin()->second;
    Value* begin = f->getArg(1);
    RETURN_IF_ERROR(e->EmitIf(b_.CreateICmpSLT(begin, f->getArg(2)), "row.first", [&]() -> Status {
      const IrIndex kept_index = kept_index_of(begin);
      RETURN_IF_ERROR(emit_level(by_level.begin()->first, ahead.reductions, kept_index, nullptr));
      for (const HloInstruction* r : ahead.reductions) {
        ASSIGN_OR_RETURN(std::vector<Value*> leaves, e->EmitLeaves(r, kept_index));
        std::vector<llvm::AllocaInst*> results;
        for (Value* leaf : leaves) {
          results.push_back(EmitEntryAlloca(b_, leaf->getType(), "row.ahead"));
          b_.CreateStore(leaf, results.back());
        }
        ahead.results.push_back(std::move(results));
      }
      return OkStatus();
    }));
  }
  // Short rows of one masked vector narrower than the vector are visited even rows first within
  // each block of kShortRowVisitBlock (cpu_row_loops.h), so that no row's masked loads overlap
  // the masked stores of the row just before it when the kernel writes over its operand. Rows
  // are independent, so the order changes no result. Not in a streamed kernel (its prefetches
  // run ahead along the rows in order).
  const bool short_row_blocks = !across_rows && stages.empty() && reduced_physical.size() == 1 && rows_contiguous &&
                                ShortRowVectorWidth(length) > length &&
                                ShortRowVectorizes(analysis.reductions(), written_types);
  // The row visited at `position` of the task's rows [begin, end).
  auto visited_row = [&](Value* position) -> Value* {
    if (!short_row_blocks) return position;
    Value* begin = f->getArg(1);
    Value* offset = b_.CreateSub(position, begin);
    Value* block_start = b_.CreateAdd(begin, b_.CreateAnd(offset, b_.getInt64(-kShortRowVisitBlock)));
    Value* within = b_.CreateAnd(offset, b_.getInt64(kShortRowVisitBlock - 1));
    Value* rows = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(f->getArg(2), block_start),
                                           b_.getInt64(kShortRowVisitBlock));
    Value* evens = b_.CreateLShr(b_.CreateAdd(rows, b_.getInt64(1)), b_.getInt64(1));
    Value* odd = b_.CreateAdd(b_.CreateShl(b_.CreateSub(within, evens), b_.getInt64(1)), b_.getInt64(1));
    return b_.CreateAdd(block_start, b_.CreateSelect(b_.CreateICmpULT(within, evens),
                                                     b_.CreateShl(within, b_.getInt64(1)), odd),
                        "row.visited");
  };
  // Sums of bf16 rows are folded in order, rounded to bf16 at every add (as the evaluator folds
  // them, bit for bit): the add is an f32 add and an integer rounding, so a row's running value is
  // an integer, no reduction the loop vectorizer finds, and the row's loop ran scalar, one
  // dependent add and rounding an element (bf16[4096,1024]: 8.5 ms against 0.24 for f32). Such
  // rows are summed in blocks of rows instead (cpu_row_loops.h, RowsInOrderAcross): the loop over
  // a block's columns runs in order, and inside it a loop over the block's rows that the loop
  // vectorizer makes vectors of kAcrossRowsWidth, each lane one row's running sum, each row still
  // added in order; the rows of the block then take their per-row values and outputs as before,
  // the sums bound to the block's. Where every reduction is such a sum (one level, nothing
  // cached), along one contiguous dimension, kAcrossRowsMinRows rows or more, no prefix mask.
  // bf16[4096,1024] row sums, both cores (xlens run, 6 alternating process pairs, load 6.2-7.5):
  // best 10.8-19.7 -> 0.56-0.62 ms a run, medians 18.5-28.2 -> 1.20-1.29 (f32's, minutes before:
  // best 0.23-0.25, medians 0.50-0.53).
  const bool in_order_blocks =
      !across_rows && !level_ahead && by_level.size() == 1 && cached.empty() && !mask.has_value() &&
      reduced_physical.size() == 1 && rows_contiguous && rows >= kAcrossRowsMinRows &&
      RowsInOrderAcross(analysis.reductions(), length);
  // Per reduction, the running sums of a block's rows (in_order_blocks; an array of its type, a
  // lane a row), and the block's first row.
  std::vector<llvm::AllocaInst*> block_sums;
  Value* block_first = nullptr;
  llvm::BasicBlock* row_header = nullptr;
  // The loop over the rows [rows_begin, rows_end): each row's reductions (or, in a block of
  // in_order_blocks, its lane of the block's sums), per-row values and outputs.
  auto emit_rows = [&](Value* rows_begin, Value* rows_end) -> Status {
  return e->EmitLoop(rows_begin, rows_end, "row", [&](Value* position) -> Status {
    row_header = b_.GetInsertBlock()->getSinglePredecessor();
    Value* row = visited_row(position);
    const IrIndex kept_index = kept_index_of(row);
    // Reductions in dependency order, then the per-row values: each computed once per row and
    // reused (bound as values) wherever the element loops below read it.
    if (level_ahead) {
      for (size_t k = 0; k < ahead.reductions.size(); ++k) {
        std::vector<Value*> leaves;
        for (llvm::AllocaInst* result : ahead.results[k]) {
          leaves.push_back(b_.CreateLoad(result->getAllocatedType(), result));
        }
        e->BindValues(ahead.reductions[k], std::move(leaves));
      }
      // The next row's elements; the task's last row reads itself again (already in L1) rather
      // than a row past the task's, or past the array.
      Value* next = b_.CreateAdd(position, b_.getInt64(1));
      next = b_.CreateSelect(b_.CreateICmpSLT(next, f->getArg(2)), visited_row(next), row);
      const IrIndex next_kept = kept_index_of(next);
      ahead.next_row = [&, next_kept](const IrIndex& index) {
        IrIndex moved = index;
        for (size_t k = 0; k < kept.size(); ++k) moved[kept[k]] = next_kept[k];
        return moved;
      };
    }
    for (size_t k = 0; k < block_sums.size(); ++k) {
      llvm::Type* type = llvm::cast<llvm::ArrayType>(block_sums[k]->getAllocatedType())->getElementType();
      Value* lane = b_.CreateSub(row, block_first);
      e->BindValues(analysis.reductions()[k],
                    {b_.CreateLoad(type, b_.CreateInBoundsGEP(type, block_sums[k], {lane}))});
    }
    for (const auto& [level, reductions] : by_level) {
      if (in_order_blocks) break;
      if (level_ahead && level == by_level.begin()->first) continue;
      const bool last = level == by_level.rbegin()->first;
      RETURN_IF_ERROR(emit_level(level, reductions, kept_index, first_level_ahead && last ? &ahead : nullptr));
    }
    for (const HloInstruction* x : row_values) RETURN_IF_ERROR(e->EmitLeaves(x, kept_index).status());
    // Per-row outputs are computed now and stored after the element loop: an output may share
    // its buffer with a per-row operand that loop still reads.
    std::vector<std::vector<Value*>> row_results;
    for (const RowOutput* out : row_outputs) {
      ASSIGN_OR_RETURN(std::vector<Value*> leaves, e->EmitLeaves(out->hlo, kept_index));
      row_results.push_back(std::move(leaves));
    }
    std::vector<Value*> divisors;
    for (const HloInstruction* d : row_divisors) {
      ASSIGN_OR_RETURN(Value * v, e->EmitElement(d, kept_index));
      divisors.push_back(v);
    }
    // The outputs are written after the row's last loop, not in the next row's last loop beside
    // its exponentials (row caches of two rows, the previous row's reductions kept in variables).
    // On one core, best of 200-10000 runs, 3 alternating pairs, that gained only on rows held in
    // L1 and L2 (log-softmax over f32[64,1000] 0.017 -> 0.015 ms a run) and lost wherever the
    // output lines miss, their stores then inside the loop bound by its multiply-adds: over
    // f32[256,1000] (2 MB) softmax 0.065 -> 0.079-0.084 ms and log-softmax 0.069 -> 0.074, over
    // f32[4096,1000] 1.13-1.15 -> 1.44-1.47 ms and 1.15-1.18 -> 1.43-1.59. (Softmax's loop also
    // lost its constants' registers, being emitted three times: for the task's first row, and in
    // the previous row's multiplying and dividing versions.) Prefetching a row's output lines as
    // the row starts lost too, for writing or reading: softmax over f32[4096,1000] 1.14 ->
    // 1.22-1.27 ms.
    if (!element_outputs.empty()) {
      // `stage_index`: where the element goes in the stage buffers (its index in the row, or in
      // the stretch being computed).
      auto write_element = [&](const IrIndex& index, const IrIndex& stage_index) -> Status {
        // Every output's element is computed before any is stored (in-place outputs).
        std::vector<std::vector<Value*>> values;
        for (const RowOutput* out : element_outputs) {
          ASSIGN_OR_RETURN(std::vector<Value*> leaves, e->EmitLeaves(out->hlo, index));
          values.push_back(std::move(leaves));
        }
        for (size_t o = 0; o < element_outputs.size(); ++o) {
          for (size_t k = 0; k < values[o].size(); ++k) {
            if (stages.empty()) {
              RETURN_IF_ERROR(element_outputs[o]->destination(k).EmitWrite(b_, index, values[o][k]));
            } else {
              RETURN_IF_ERROR(stages[o].EmitWrite(b_, stage_index, values[o][k]));
            }
          }
        }
        return OkStatus();
      };
      // The next row's sums taken along in the output loop (sums_in_output_loop): a variable
      // each, started from its initial value with each row, that the stretch loop adds to, and
      // where rows are whole lines a line of partial sums each, started from zero, that the line
      // loop adds a line of the row to as one vector (a variable there would be a horizontal
      // add a line, on the chain from one line to the next), folded into the variable after it.
      // A float line starts from -0, the zero that adding leaves as it is (+0 would turn a sum
      // of -0s from -0 into +0), and its adds keep the sign of zero.
      std::vector<llvm::AllocaInst*> next_sums, next_results;
      std::vector<IrArray> next_lanes;
      std::vector<llvm::Constant*> lane_zeros;
      if (sums_in_output_loop) {
        for (size_t k = 0; k < ahead.reductions.size(); ++k) {
          const HloInstruction* r = ahead.reductions[k];
          ASSIGN_OR_RETURN(Value * init, e->EmitElement(r->operand(1), {}));
          next_sums.push_back(EmitEntryAlloca(b_, init->getType(), "row.next_sum"));
          b_.CreateStore(init, next_sums.back());
          next_results.push_back(ahead.results[k][0]);
          if (line_stages.empty()) continue;
          auto* lanes = llvm::FixedVectorType::get(init->getType(), static_cast<unsigned>(line_elements));
          llvm::AllocaInst* buffer = EmitEntryAlloca(b_, llvm::ArrayType::get(init->getType(), line_elements),
                                                     "row.next_lanes");
          buffer->setAlignment(llvm::Align(64));
          llvm::Constant* zero = init->getType()->isFloatingPointTy() ? llvm::ConstantFP::getNegativeZero(lanes)
                                                                       : llvm::Constant::getNullValue(lanes);
          lane_zeros.push_back(zero);
          b_.CreateAlignedStore(zero, buffer, llvm::Align(64));
          Shape window(r->shape().element_type(), std::vector<int64_t>(row_shape.rank(), 1));
          window.set_dimensions(reduced_physical[0], line_elements);
          next_lanes.emplace_back(buffer, window);
          next_lanes.back().set_access_group(access_group_);
        }
      }
      // Adds the element of the next row at the position of `index` of this one to each sum, or
      // with `lane` to its partial sum at that lane.
      auto add_next_row = [&](const IrIndex& index, const IrIndex* lane) -> Status {
        if (!sums_in_output_loop) return OkStatus();
        const IrIndex next = ahead.next_row(index);
        llvm::IRBuilder<>::FastMathFlagGuard guard(b_);
        llvm::FastMathFlags flags;
        flags.setAllowReassoc();
        b_.setFastMathFlags(flags);
        for (size_t k = 0; k < next_sums.size(); ++k) {
          const HloInstruction* r = ahead.reductions[k];
          ASSIGN_OR_RETURN(Value * x, e->EmitElement(r->operand(0), next));
          Value* sum = nullptr;
          if (lane != nullptr) {
            ASSIGN_OR_RETURN(sum, next_lanes[k].EmitRead(b_, *lane));
          } else {
            sum = b_.CreateLoad(next_sums[k]->getAllocatedType(), next_sums[k]);
          }
          ASSIGN_OR_RETURN(std::vector<Value*> result, e->EmitScalarComputation(*r->to_apply(), {sum, x}));
          if (lane != nullptr) {
            RETURN_IF_ERROR(next_lanes[k].EmitWrite(b_, *lane, result[0]));
          } else {
            b_.CreateStore(result[0], next_sums[k]);
          }
        }
        return OkStatus();
      };
      // Streamed outputs are written out from their row buffers as each stretch of the row is
      // computed (cpu_streaming_store.h: short stretches stream faster), or after the row where
      // it spans several dimensions.
      IrIndex first(row_shape.rank(), b_.getInt64(0));
      for (size_t k = 0; k < kept.size(); ++k) first[kept[k]] = kept_index[k];
      // Streams `count` elements of each output from its stage buffer to the row's elements
      // from `from` on (the buffer holds the whole row, or just that stretch).
      auto stream_out = [&](Value* from, Value* count) {
        for (size_t o = 0; o < element_outputs.size(); ++o) {
          llvm::Type* storage =
              StorageType(element_outputs[o]->hlo->shape().element_type(), b_.getContext()).value();
          Value* row_start = element_outputs[o]->destination(0).EmitElementPointer(b_, first);
          Value* staged = by_stretches ? stages[o].base() : b_.CreateInBoundsGEP(storage, stages[o].base(), {from});
          cpu::EmitStreamingCopy(b_, b_.CreateInBoundsGEP(storage, row_start, {from}), staged, count,
                                 ByteWidth(element_outputs[o]->hlo->shape().element_type()));
        }
      };
      // Prefetches the line `byte` bytes past element `element` of this row in `array`, plus
      // `ahead` bytes, each operand's share of kRowPrefetchBytes in whole lines (prefetches never
      // fault: past the last row they are dropped).
      const int64_t operands = std::max<int64_t>(1, static_cast<int64_t>(prefetched.size()));
      const int64_t ahead = std::max<int64_t>(64, kRowPrefetchBytes / operands / 64 * 64);
      auto prefetch_line = [&](const IrArray& array, int64_t width, Value* element, Value* byte) {
        // Ahead of the next row where the loop reads it (sums_in_output_loop).
        const int64_t distance = ahead + (sums_in_output_loop ? length * width : 0);
        Value* first_byte = b_.CreateAdd(
            b_.CreateMul(b_.CreateAdd(b_.CreateMul(row, b_.getInt64(length)), element), b_.getInt64(width)),
            b_.getInt64(distance));
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                           {b_.CreateGEP(b_.getInt8Ty(), array.base(), {b_.CreateAdd(first_byte, byte)}),
                            /*write=*/b_.getInt32(0), /*locality=*/b_.getInt32(3), /*data=*/b_.getInt32(1)});
      };
      // Rows of whole lines whose outputs start on a line (checked per row) are written a line
      // at a time straight from the registers that compute it: the line's element loop is one
      // vector (its stores to a line-sized stack buffer and the reload become one value), stored
      // with one aligned non-temporal store per output. The row's buffer cost a vector store and
      // a reload per line besides: layer norm over f32[4096,1024] 1.10 -> 0.96 ms a run, the RMS
      // norm with its residual 2.28 -> 2.06 (medians of 10-12 alternating runs beside other work).
      auto line_loop = [&](const std::vector<Value*>& row_starts) -> Status {
        IrIndex index(row_shape.rank(), nullptr);
        for (size_t k = 0; k < kept.size(); ++k) index[kept[k]] = kept_index[k];
        return e->EmitLoop(b_.getInt64(0), b_.getInt64(length / line_elements), "row.line",
                           [&](Value* line) -> Status {
          Value* begin = b_.CreateMul(line, b_.getInt64(line_elements));
          llvm::BasicBlock* header = nullptr;
          RETURN_IF_ERROR(e->EmitLoop(begin, b_.CreateAdd(begin, b_.getInt64(line_elements)),
                                      "row.line.element", [&](Value* iv) -> Status {
            header = b_.GetInsertBlock()->getSinglePredecessor();
            index[reduced_physical[0]] = iv;
            std::vector<std::vector<Value*>> values;
            for (const RowOutput* out : element_outputs) {
              ASSIGN_OR_RETURN(std::vector<Value*> leaves, e->EmitLeaves(out->hlo, index));
              values.push_back(std::move(leaves));
            }
            IrIndex at(row_shape.rank(), b_.getInt64(0));
            at[reduced_physical[0]] = b_.CreateSub(iv, begin);
            for (size_t o = 0; o < element_outputs.size(); ++o) {
              RETURN_IF_ERROR(line_stages[o].EmitWrite(b_, at, values[o][0]));
            }
            return add_next_row(index, &at);
          }, access_group_));
          RequestOneVector(header, static_cast<unsigned>(line_elements));
          for (size_t o = 0; o < element_outputs.size(); ++o) {
            llvm::Type* storage =
                StorageType(element_outputs[o]->hlo->shape().element_type(), b_.getContext()).value();
            auto* vector = llvm::FixedVectorType::get(storage, static_cast<unsigned>(line_elements));
            Value* v = b_.CreateAlignedLoad(vector, line_stages[o].base(), llvm::Align(64));
            cpu::MarkNonTemporal(b_.CreateAlignedStore(
                v, b_.CreateInBoundsGEP(storage, row_starts[o], {begin}), llvm::Align(64)));
          }
          // The operands' elements of this line of the outputs, kRowPrefetchBytes ahead.
          for (const auto& [array, width] : prefetched) {
            for (int64_t byte = 0; byte < line_elements * width; byte += 64) {
              prefetch_line(array, width, begin, b_.getInt64(byte));
            }
          }
          return OkStatus();
        });
      };
      auto stretch_loop = [&]() -> Status {
        IrIndex index(row_shape.rank(), nullptr);
        for (size_t k = 0; k < kept.size(); ++k) index[kept[k]] = kept_index[k];
        // Where rows are not whole lines (rows of 1000 floats), stretches after the first start
        // on a line of the (first) output: the copy's vector loads then match the element
        // loop's vector stores to the buffer one for one. Loads that straddle two stores each
        // wait for both to reach the cache: layer norm over f32[8192,1000] took 4.7 ms a run
        // beside other work, 2.7 with its stretches on lines (softmax over it 5.6 and 3.7).
        Value* shift = b_.getInt64(0);
        const int64_t width = ByteWidth(element_outputs[0]->hlo->shape().element_type());
        if (stretch < length && length * width % 64 != 0) {
          Value* start = b_.CreatePtrToInt(element_outputs[0]->destination(0).EmitElementPointer(b_, first),
                                           b_.getInt64Ty());
          Value* head = b_.CreateUDiv(b_.CreateAnd(b_.CreateNeg(start), b_.getInt64(63)), b_.getInt64(width));
          shift = b_.CreateURem(b_.CreateSub(b_.getInt64(stretch), head), b_.getInt64(stretch));
        }
        Value* stretches = b_.CreateUDiv(b_.CreateAdd(shift, b_.getInt64(length + stretch - 1)),
                                         b_.getInt64(stretch));
        return e->EmitLoop(b_.getInt64(0), stretches, "row.stretch", [&](Value* s) -> Status {
          Value* start = b_.CreateSub(b_.CreateMul(s, b_.getInt64(stretch)), shift);
          Value* from = b_.CreateSelect(b_.CreateICmpSLT(start, b_.getInt64(0)), b_.getInt64(0), start);
          Value* stop = b_.CreateAdd(start, b_.getInt64(stretch));
          Value* to = b_.CreateSelect(b_.CreateICmpSLT(stop, b_.getInt64(length)), stop, b_.getInt64(length));
          RETURN_IF_ERROR(e->EmitLoop(from, to, "row.element", [&](Value* iv) -> Status {
            index[reduced_physical[0]] = iv;
            IrIndex in_stretch = index;
            in_stretch[reduced_physical[0]] = b_.CreateSub(iv, from);
            RETURN_IF_ERROR(add_next_row(index, nullptr));
            return write_element(index, in_stretch);
          }, access_group_));
          stream_out(from, b_.CreateSub(to, from));
          // The same stretch kRowPrefetchBytes ahead in the operands read in place,
          // a line at a time: the reads of the next row's reduction pass go out beside this
          // row's streaming stores, as an elementwise loop's do, instead of all at once after
          // them (prefetches never fault: past the last row they are dropped).
          for (const auto& [array, width] : prefetched) {
            Value* lines = b_.CreateLShr(
                b_.CreateAdd(b_.CreateMul(b_.CreateSub(to, from), b_.getInt64(width)), b_.getInt64(63)),
                b_.getInt64(6));
            RETURN_IF_ERROR(EmitForLoop(b_, b_.getInt64(0), lines, "row.prefetch", [&](Value* line) -> Status {
              prefetch_line(array, width, from, b_.CreateShl(line, b_.getInt64(6)));
              return OkStatus();
            }));
          }
          return OkStatus();
        });
      };
      auto output_loop = [&]() -> Status {
        if (stages.empty() || reduced_physical.size() != 1) {
          // A short row's outputs are one masked vector, as its reductions are, where the loop
          // vectorizer can make one (ShortRowVectorizes, cpu_row_loops.h).
          llvm::BasicBlock* header = nullptr;
          // Past a prefix mask (uniform_tail), each output's one value there, stored on.
          Value* split = nullptr;
          Value* head = nullptr;
          if (uniform_tail) std::tie(split, head) = prefix_bounds(kept_index, nullptr);
          RowUniformTail store_tail = [&](const IrIndex& at, Value* count) -> Status {
            for (size_t c = 0; c < cached.size(); ++c) {
              if (uniform_tails[c] == nullptr) return Error("a row cache has no value past the mask");
              e->BindValues(cached[c], {b_.CreateLoad(uniform_tails[c]->getAllocatedType(), uniform_tails[c])});
            }
            std::vector<std::vector<Value*>> values;
            Status status = OkStatus();
            for (const RowOutput* out : element_outputs) {
              StatusOr<std::vector<Value*>> leaves = e->EmitLeaves(out->hlo, at);
              if (!leaves.ok()) {
                status = leaves.status();
                break;
              }
              values.push_back(*std::move(leaves));
            }
            for (const HloInstruction* x : cached) e->UnbindValues(x);
            RETURN_IF_ERROR(status);
            const int64_t column = reduced_physical[0];
            Value* columns = b_.getInt64(row_shape.dimensions(column));
            IrIndex index = at;
            return e->EmitLoop(b_.CreateSub(columns, count), columns, "row.uniform", [&](Value* iv) -> Status {
              index[column] = iv;
              for (size_t o = 0; o < element_outputs.size(); ++o) {
                for (size_t k = 0; k < values[o].size(); ++k) {
                  RETURN_IF_ERROR(element_outputs[o]->destination(k).EmitWrite(b_, index, values[o][k]));
                }
              }
              return OkStatus();
            }, access_group_);
          };
          RETURN_IF_ERROR(for_each_element(*e, kept_index, [&](const IrIndex& index) {
            header = b_.GetInsertBlock()->getSinglePredecessor();
            return write_element(index, index);
          }, split, head, uniform_tail ? &store_tail : nullptr));
          std::vector<PrimitiveType> written;
          for (const RowOutput* out : element_outputs) written.push_back(out->hlo->shape().element_type());
          const unsigned width = ShortRowVectorWidth(row_shape.dimensions(reduced_physical.back()));
          if (!across_rows && width != 0 && ShortRowVectorizes(analysis.reductions(), written)) {
            RequestOneMaskedVector(header, width);
          }
          if (!stages.empty()) stream_out(b_.getInt64(0), b_.getInt64(length));
          return OkStatus();
        }
        if (!line_stages.empty()) {
          std::vector<Value*> row_starts;
          Value* aligned = b_.getTrue();
          for (const RowOutput* out : element_outputs) {
            Value* start = out->destination(0).EmitElementPointer(b_, first);
            row_starts.push_back(start);
            aligned = b_.CreateAnd(aligned, b_.CreateICmpEQ(b_.CreateAnd(b_.CreatePtrToInt(start, b_.getInt64Ty()),
                                                                         b_.getInt64(63)),
                                                            b_.getInt64(0)));
          }
          RETURN_IF_ERROR(e->EmitIf(aligned, "row.lines", [&]() { return line_loop(row_starts); }));
          return e->EmitIf(b_.CreateNot(aligned), "row.stretches", stretch_loop);
        }
        return stretch_loop();
      };
      RETURN_IF_ERROR(EmitWithRowReciprocals(*e, divisors, output_loop));
      for (size_t k = 0; k < next_sums.size(); ++k) {
        Value* sum = b_.CreateLoad(next_sums[k]->getAllocatedType(), next_sums[k]);
        if (!next_lanes.empty()) {
          llvm::IRBuilder<>::FastMathFlagGuard guard(b_);
          llvm::FastMathFlags flags;
          flags.setAllowReassoc();
          b_.setFastMathFlags(flags);
          Value* lanes = b_.CreateAlignedLoad(lane_zeros[k]->getType(), next_lanes[k].base(), llvm::Align(64));
          sum = sum->getType()->isFloatingPointTy() ? b_.CreateFAdd(sum, b_.CreateFAddReduce(
                                                                              llvm::ConstantFP::getNegativeZero(sum->getType()), lanes))
                                                    : b_.CreateAdd(sum, b_.CreateAddReduce(lanes));
        }
        b_.CreateStore(sum, next_results[k]);
      }
    }
    for (size_t o = 0; o < row_outputs.size(); ++o) {
      for (size_t k = 0; k < row_results[o].size(); ++k) {
        RETURN_IF_ERROR(row_outputs[o]->destination(k).EmitWrite(b_, kept_index, row_results[o][k]));
      }
    }
    return OkStatus();
  }, across_rows ? access_group_ : nullptr);
  };
  if (in_order_blocks) {
    // A block is kRowsInOrderVectors vectors of kAcrossRowsWidth rows: each column's adds of the
    // vectors are independent chains, where the next column's wait on the last (an add and a
    // rounding, about 11 cycles a column). bf16[4096,1024] row sums, 5 alternating process pairs
    // each, load 6.6-8.3: one vector best 0.71-0.82 ms, median 1.51-2.16; two 0.56-0.75, 1.23-1.75;
    // four 0.50, 1.05-1.07, but its kernel took 270-570 ms to compile against 75-325 (the
    // transpose's shuffles, unrolled over 64 rows).
    constexpr int64_t width = kAcrossRowsWidth, vectors = kRowsInOrderVectors, block_size = width * vectors;
    const std::vector<const HloInstruction*>& sums = analysis.reductions();
    std::vector<Value*> inits;
    // Per reduction, a chunk of the block's operands, transposed: per vector of rows,
    // kRowsInOrderChunk columns of kAcrossRowsWidth rows.
    std::vector<llvm::Type*> operand_types;
    std::vector<llvm::AllocaInst*> block_operands;
    for (const HloInstruction* r : sums) {
      ASSIGN_OR_RETURN(Value * init, e->EmitElement(r->operand(1), {}));
      inits.push_back(init);
      llvm::AllocaInst* lanes = EmitEntryAlloca(b_, llvm::ArrayType::get(init->getType(), block_size), "row.block.sums");
      lanes->setAlignment(llvm::Align(64));
      block_sums.push_back(lanes);
      ASSIGN_OR_RETURN(llvm::Type * operand_type,
                       StorageType(r->operand(0)->shape().element_type(), b_.getContext()));
      operand_types.push_back(operand_type);
      llvm::AllocaInst* operands = EmitEntryAlloca(
          b_, llvm::ArrayType::get(operand_type, kRowsInOrderChunk * block_size), "row.block.operands");
      operands->setAlignment(llvm::Align(64));
      block_operands.push_back(operands);
    }
    Value* begin = f->getArg(1);
    Value* end = f->getArg(2);
    Value* blocks = b_.CreateUDiv(b_.CreateAdd(b_.CreateSub(end, begin), b_.getInt64(block_size - 1)),
                                  b_.getInt64(block_size));
    RETURN_IF_ERROR(e->EmitLoop(b_.getInt64(0), blocks, "row.block", [&](Value* block) -> Status {
      block_first = b_.CreateAdd(begin, b_.CreateMul(block, b_.getInt64(block_size)));
      Value* block_rows = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(end, block_first),
                                                   b_.getInt64(block_size));
      for (size_t k = 0; k < sums.size(); ++k) {
        b_.CreateAlignedStore(b_.CreateVectorSplat(block_size, inits[k]), block_sums[k], llvm::Align(64));
      }
      // The block's columns a chunk at a time: the reductions' operands of the block's rows
      // computed along the rows, a vector of columns a row, and stored transposed, a column's 16
      // rows together (the loop vectorizer's interleaved groups of 16: a transpose in registers);
      // then each column in order, all the block's rows at once, a vector of 16 rows each.
      // Reading the rows' elements of one column directly, a lane a row, was a gather of 16-bit
      // elements, which x86 has not: 16 scalar loads and inserts a column (bf16[4096,1024] best
      // 1.04-1.05 ms a run on both cores, 3 runs at load 9.6). Rows past the task's last (a block
      // of fewer) read the last row again; their sums are not used.
      const int64_t column = reduced_physical[0];
      Value* last_row = b_.CreateSub(end, b_.getInt64(1));
      const int64_t chunks = (length + kRowsInOrderChunk - 1) / kRowsInOrderChunk;
      RETURN_IF_ERROR(e->EmitLoop(b_.getInt64(0), b_.getInt64(chunks), "row.block.chunk", [&](Value* chunk) -> Status {
        Value* first_column = b_.CreateMul(chunk, b_.getInt64(kRowsInOrderChunk));
        Value* columns = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(b_.getInt64(length), first_column),
                                                  b_.getInt64(kRowsInOrderChunk));
        llvm::BasicBlock* transpose_header = nullptr;
        RETURN_IF_ERROR(e->EmitLoop(b_.getInt64(0), columns, "row.block.transpose", [&](Value* c) -> Status {
          transpose_header = b_.GetInsertBlock()->getSinglePredecessor();
          for (int64_t lane = 0; lane < block_size; ++lane) {
            Value* row = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(block_first, b_.getInt64(lane)),
                                                  last_row);
            const IrIndex kept_index = kept_index_of(row);
            IrIndex index(row_shape.rank(), nullptr);
            for (size_t k = 0; k < kept.size(); ++k) index[kept[k]] = kept_index[k];
            index[column] = b_.CreateAdd(first_column, c);
            // Vector v's rows: kRowsInOrderChunk columns of 16 from v * kRowsInOrderChunk * 16.
            Value* at = b_.CreateAdd(b_.CreateMul(c, b_.getInt64(width)),
                                     b_.getInt64(lane / width * kRowsInOrderChunk * width + lane % width));
            for (size_t k = 0; k < sums.size(); ++k) {
              ASSIGN_OR_RETURN(Value * x, e->EmitElement(sums[k]->operand(0), index));
              b_.CreateStore(x, b_.CreateInBoundsGEP(x->getType(), block_operands[k], {at}));
            }
          }
          return OkStatus();
        }, access_group_));
        RequestOneVector(transpose_header, kAcrossRowsWidth);
        return e->EmitLoop(b_.getInt64(0), columns, "row.block.column", [&](Value* c) -> Status {
          llvm::BasicBlock* lanes_header = nullptr;
          RETURN_IF_ERROR(e->EmitLoop(b_.getInt64(0), b_.getInt64(width), "row.block.lane", [&](Value* lane) -> Status {
            lanes_header = b_.GetInsertBlock()->getSinglePredecessor();
            for (int64_t v = 0; v < vectors; ++v) {
              Value* from = b_.CreateAdd(b_.CreateMul(c, b_.getInt64(width)),
                                         b_.CreateAdd(lane, b_.getInt64(v * kRowsInOrderChunk * width)));
              Value* sum_lane = b_.CreateAdd(lane, b_.getInt64(v * width));
              for (size_t k = 0; k < sums.size(); ++k) {
                llvm::Type* type = inits[k]->getType();
                llvm::Type* operand_type = operand_types[k];
                Value* x = b_.CreateLoad(operand_type, b_.CreateInBoundsGEP(operand_type, block_operands[k], {from}));
                Value* at = b_.CreateInBoundsGEP(type, block_sums[k], {sum_lane});
                ASSIGN_OR_RETURN(std::vector<Value*> sum,
                                 e->EmitScalarComputation(*sums[k]->to_apply(), {b_.CreateLoad(type, at), x}));
                b_.CreateStore(sum[0], at);
              }
            }
            return OkStatus();
          }, access_group_));
          RequestOneVector(lanes_header, kAcrossRowsWidth);
          return OkStatus();
        });
      }));
      return emit_rows(block_first, b_.CreateAdd(block_first, block_rows));
    }));
  } else {
    RETURN_IF_ERROR(emit_rows(f->getArg(1), f->getArg(2)));
  }
  // Rows are independent (each reads and writes its own elements and per-row values; the row
  // caches, shared by the rows, are gone), so the loop's accesses are parallel across rows.
  if (across_rows) RequestOneVector(row_header, kAcrossRowsWidth);
  if (!stages.empty()) cpu::EmitStreamingFence(b_);
  b_.CreateRetVoid();
  return true;
}

}  // namespace xlens::codegen

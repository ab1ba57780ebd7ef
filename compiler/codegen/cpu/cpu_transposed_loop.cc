// The CPU element loop of a fusion that reads an operand transposed (KernelBuilder::
// EmitCpuTransposedLoop): an SGD update `w - c * transpose(g)` whose gradient a product wrote in
// the other order. Walked element by element, the transposed reads stride over a whole row of
// the operand each: the vectorizer gathers them, about 3 cycles an element. Here each task walks
// tiles of output rows in strips of a cache line's elements: the strip's part of every transposed
// operand (one line of each of its rows) is loaded whole, transposed in registers kLanes columns
// at a time, and stored to a stack buffer laid out as the output is; the elementwise body then
// reads that buffer, the other operands and the outputs with unit stride, one loop over the
// tile's rows x columns.
// What is transposed may be computed: the algebraic simplifier turns `c * transpose(g)` into
// `transpose(c * g)`, so JAX's `w - 0.1 * g.T` reaches the backend as a transpose of a product.
// Elementwise work commutes with a transpose, so the parameters under it are what is transposed
// into tiles, and the work is done on the tiles.
#include <algorithm>
#include <set>
#include <vector>

#include "compiler/codegen/kernel_builder.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/hlo/computation.h"

namespace xlens::codegen {

using llvm::Value;

namespace {

// The width of the register transpose (a power of two), and the fewest rows a strip has.
constexpr int64_t kLanes = 8;
// The largest tile buffer (per transposed operand), to stay in L1.
constexpr int64_t kMaxTileBytes = 16 << 10;
// Columns of a tile where a strip of all of them exceeds kMaxTileBytes: the tile then covers
// 64 rows x 64 columns of f32, each of its 64 rows of the transposed operand 256 contiguous bytes.
constexpr int64_t kBlockColumns = 64;

bool RowMajor2d(const Shape& s) {
  return s.IsArray() && s.rank() == 2 && MajorToMinor(s) == std::vector<int64_t>{0, 1};
}

// Scalars, and broadcasts of them: read at any index, the same value.
bool IndexFree(const HloInstruction* i) {
  return (i->opcode() == HloOpcode::kConstant && i->shape().rank() == 0) ||
         (i->opcode() == HloOpcode::kBroadcast && i->operand(0)->shape().rank() == 0);
}

// What the transposes read: every instruction their operands are computed from, the scalars
// and their broadcasts left out (they are read at any index alike).
std::set<const HloInstruction*> UnderTransposes(const std::vector<const HloInstruction*>& transposes) {
  std::set<const HloInstruction*> under;
  std::vector<const HloInstruction*> stack;
  for (const HloInstruction* t : transposes) stack.push_back(t->operand(0));
  while (!stack.empty()) {
    const HloInstruction* i = stack.back();
    stack.pop_back();
    if (IndexFree(i) || !under.insert(i).second) continue;
    for (const HloInstruction* operand : i->operands()) stack.push_back(operand);
  }
  return under;
}

}  // namespace

std::vector<const HloInstruction*> KernelBuilder::TransposedReads(const Shape& shape,
                                                                  const OutputGroup& group) const {
  if (target_ != KernelTarget::kCpu || hlo_.opcode() != HloOpcode::kFusion || !RowMajor2d(shape)) {
    return {};
  }
  const int64_t rows = shape.dimensions(0);
  const int64_t columns = shape.dimensions(1);
  if (rows < kLanes) return {};
  for (const auto& [out, leaf] : group) {
    if (!out->shape().IsArray() || !RowMajor2d(output_shapes_[leaf]) ||
        output_shapes_[leaf].dimensions() != shape.dimensions()) {
      return {};
    }
  }
  // Transposes of 2-D values [columns, rows] computed elementwise from parameters; what they
  // read is read by nothing else, so that each parameter under them is read transposed only.
  std::vector<const HloInstruction*> transposes;
  for (const HloInstruction* i : hlo_.fused_computation()->instructions()) {
    if (i->opcode() != HloOpcode::kTranspose) continue;
    if (i->dimensions() != std::vector<int64_t>{1, 0}) return {};
    transposes.push_back(i);
  }
  if (transposes.empty()) return {};
  const std::set<const HloInstruction*> under = UnderTransposes(transposes);
  for (const HloInstruction* i : under) {
    const bool elementwise = i->opcode() == HloOpcode::kParameter ||
                             (i->IsElementwise() && i->opcode() != HloOpcode::kConstant);
    if (!elementwise || i->shape().rank() != 2 || i->shape().dimensions(0) != columns ||
        i->shape().dimensions(1) != rows) {
      return {};
    }
    // (No users: the fusion's root, read at the output's index, not transposed.)
    if (i->users().empty()) return {};
    for (const HloInstruction* user : i->users()) {
      if (!under.contains(user) && user->opcode() != HloOpcode::kTranspose) return {};
    }
  }
  for (const HloInstruction* i : hlo_.fused_computation()->instructions()) {
    const HloOpcode op = i->opcode();
    if (op == HloOpcode::kTranspose || under.contains(i) || IndexFree(i)) continue;
    // Everything else is read at the output's own index, within the tile: no constant arrays
    // (read at a tile's index they would need its rows' offset), no other data movement.
    const bool in_place = i->IsElementwise() || op == HloOpcode::kParameter || op == HloOpcode::kTuple;
    if (!in_place) return {};
    // (Parameters are checked by their bindings below.)
    if (op != HloOpcode::kParameter && op != HloOpcode::kTuple && i->shape().rank() != 0 &&
        i->shape().dimensions() != shape.dimensions()) {
      return {};
    }
  }
  // A kernel that touches under 64 KiB is compiled without the loop vectorizer (the CPU
  // compiler's small kernels, at O1): its element loop is scalar, strided loads cost it no more
  // than contiguous ones, and a tile's transposition would only add to it (f32[256,10]: 0.8 ->
  // 1.0 us).
  int64_t bytes = 0;
  for (const Binding& binding : bindings_) bytes += shape_util::ByteSizeOf(binding.shape);
  for (const auto& [out, leaf] : group) bytes += shape_util::ByteSizeOf(output_shapes_[leaf]);
  if (bytes < kCpuSmallKernelBytes) return {};
  for (const Binding& binding : bindings_) {
    const Shape& s = binding.shape;
    if (!s.IsArray()) return {};
    if (under.contains(binding.hlo)) {
      // Whole vectors of 2, 4 or 8 bytes an element (not pred's bits).
      auto type = StorageType(s.element_type(), module_.getContext());
      if (!type.ok()) return {};
      const uint64_t bits = (*type)->getPrimitiveSizeInBits();
      if (!binding.shape_index.empty() || !RowMajor2d(s) || (bits != 16 && bits != 32 && bits != 64)) {
        return {};
      }
      continue;
    }
    if (s.rank() != 0 && !(RowMajor2d(s) && s.dimensions() == shape.dimensions())) return {};
  }
  return transposes;
}

Status KernelBuilder::EmitCpuTransposedLoop(const Shape& shape, int64_t work_per_element,
                                            const OutputGroup& group,
                                            const std::vector<const HloInstruction*>& transposes) {
  const int64_t rows = shape.dimensions(0);
  const int64_t columns = shape.dimensions(1);
  // Tiles of up to 64 rows (the buffer within kMaxTileBytes), transposed a strip at a time:
  // read back right after their stores, tiles of one strip stalled on store forwarding and lost
  // to the gathers on a short loop (f32[256,10]).
  const std::set<const HloInstruction*> under = UnderTransposes(transposes);
  int64_t widest = 1;
  for (const Binding& binding : bindings_) {
    if (under.contains(binding.hlo)) {
      widest = std::max<int64_t>(widest, BitWidth(binding.shape.element_type()) / 8);
    }
  }
  // A strip's rows are a line of the widest transposed operand's elements (f32: 16), where the
  // output has as many rows and two register blocks of columns; else kLanes. A whole line, so
  // that every line is read once: the strip's rows lie a whole operand row apart, often a
  // multiple of 4 KiB, and so fall in the same L1 sets, and a strip that read half a line left
  // the other half for the next strip, by when the other rows' lines had evicted it. (With one
  // block, the columns past it, extracted element by element, cost the line's strip more than
  // its reads save: f32[65536,10] took 1.07-1.09x the half-line strips' time, where [16384,64]
  // took 0.70x.)
  const int64_t strip =
      rows >= kCpuLineBytes / widest && columns >= 2 * kLanes ? kCpuLineBytes / widest : kLanes;
  // All the columns where a strip of them fits the buffer, else blocks of kBlockColumns (a
  // wide update, f32[4096,2048] - c * transpose(g): every transposed read a gather, 50-67 ms).
  const int64_t tile_columns = strip * columns * widest <= kMaxTileBytes ? columns : kBlockColumns;
  const int64_t tile_rows =
      std::clamp<int64_t>(kMaxTileBytes / (tile_columns * widest) / strip * strip, strip, 64);
  // Tasks of whole tiles, about TaskElements' worth each; the last takes the rows past its last
  // whole tile in tiles of one strip, then of kLanes rows, then those past the last of these as
  // the loop always was.
  const int64_t task_rows =
      std::max<int64_t>(tile_rows, (TaskElements(work_per_element) / columns + tile_rows / 2) / tile_rows * tile_rows);
  const int64_t tasks = (rows + task_rows - 1) / task_rows;
  llvm::Function* f = NewPhase(false, tasks, task_rows * columns * work_per_element);

  // One tile buffer per transposed parameter, in the entry block.
  struct Transposed {
    const HloInstruction* parameter;
    IrArray source;
    llvm::Type* type;
    Value* buffer;
  };
  std::vector<Transposed> transposed;
  for (const Binding& binding : bindings_) {
    if (!under.contains(binding.hlo)) continue;
    ASSIGN_OR_RETURN(llvm::Type * type, StorageType(binding.shape.element_type(), module_.getContext()));
    llvm::AllocaInst* buffer = b_.CreateAlloca(type, b_.getInt64(tile_rows * tile_columns), "tile");
    buffer->setAlignment(llvm::Align(64));
    transposed.push_back({binding.hlo, ArrayOf(binding), type, buffer});
  }

  auto plain = MakeEmitter();
  // The tile of `n` rows from r0 and `w` columns from c0, in strips of `m` rows (n a multiple of
  // m, m of kLanes).
  auto emit_tile = [&](Value* r0, int64_t n, int64_t m, Value* c0, int64_t w) -> Status {
    RETURN_IF_ERROR(plain->EmitLoop(b_.getInt64(0), b_.getInt64(n / m), "strip", [&](Value* index) -> Status {
      Value* strip_row = b_.CreateMul(index, b_.getInt64(m));
      Value* rs = b_.CreateAdd(r0, strip_row);
      Value* strip_offset = b_.CreateMul(strip_row, b_.getInt64(w));
      for (const Transposed& t : transposed) {
        auto* vector = llvm::FixedVectorType::get(t.type, m);
        // Row c0 + c of the operand, its m elements from rs: column c0 + c of the strip's rows.
        auto load_row = [&](Value* c) -> Value* {
          Value* at = t.source.EmitElementPointer(b_, {b_.CreateAdd(c0, c), rs});
          return b_.CreateAlignedLoad(vector, at, llvm::Align(1));
        };
        auto tile_at = [&](int64_t i, Value* c) {
          return b_.CreateInBoundsGEP(
              t.type, t.buffer, {b_.CreateAdd(strip_offset, b_.CreateAdd(b_.getInt64(i * w), c))});
        };
        const int64_t blocks = w / kLanes;
        if (blocks > 0) {
          RETURN_IF_ERROR(plain->EmitLoop(b_.getInt64(0), b_.getInt64(blocks), "block", [&](Value* block) {
            Value* cb = b_.CreateMul(block, b_.getInt64(kLanes));
            std::vector<Value*> lines;
            for (int64_t j = 0; j < kLanes; ++j) lines.push_back(load_row(b_.CreateAdd(cb, b_.getInt64(j))));
            // Each kLanes-element part of the lines is a kLanes x kLanes block of the tile. (Loading
            // the parts apart, where the shuffles split the lines, measured slower: 0.76 against
            // 0.70 of the half-line strips' time on f32[16384,64], 0.80 against 0.50 on f16.)
            for (int64_t part = 0; part < m / kLanes; ++part) {
              std::vector<int> lanes(kLanes);
              for (int64_t i = 0; i < kLanes; ++i) lanes[i] = static_cast<int>(part * kLanes + i);
              std::vector<Value*> v;
              for (Value* line : lines) v.push_back(m == kLanes ? line : b_.CreateShuffleVector(line, lanes));
              v = EmitTransposeInRegisters(b_, std::move(v));
              for (int64_t i = 0; i < kLanes; ++i) {
                b_.CreateAlignedStore(v[i], tile_at(part * kLanes + i, cb), llvm::Align(1));
              }
            }
            return OkStatus();
          }));
        }
        if (w % kLanes != 0) {
          RETURN_IF_ERROR(plain->EmitLoop(b_.getInt64(blocks * kLanes), b_.getInt64(w), "rest", [&](Value* c) {
            Value* v = load_row(c);
            for (int64_t i = 0; i < m; ++i) {
              b_.CreateStore(b_.CreateExtractElement(v, b_.getInt64(i)), tile_at(i, c));
            }
            return OkStatus();
          }));
        }
      }
      return OkStatus();
    }));
    // The body over the tile's n x w elements, every array seen from (r0, c0).
    auto at_tile = [&](const IrArray& array) -> StatusOr<IrArray> {
      ASSIGN_OR_RETURN(llvm::Type * type, StorageType(array.shape().element_type(), module_.getContext()));
      Value* base = b_.CreateInBoundsGEP(type, array.base(),
                                         {b_.CreateAdd(b_.CreateMul(r0, b_.getInt64(columns)), c0)});
      IrArray moved(base, Shape(array.shape().element_type(), {n, columns}));
      moved.set_access_group(access_group_);
      return moved;
    };
    ElementalIrEmitter e(b_);
    for (const Binding& binding : bindings_) {
      IrArray array = ArrayOf(binding);
      if (binding.shape.rank() == 0) {
        e.BindArray(binding.hlo, binding.shape_index, array);
        continue;
      }
      if (under.contains(binding.hlo)) continue;
      ASSIGN_OR_RETURN(IrArray moved, at_tile(array));
      e.BindArray(binding.hlo, binding.shape_index, moved);
    }
    // A transposed parameter is its tile, seen in the parameter's own order: [w, n] with
    // dimension 0 minor, so that what the transpose reads at (j, i) for output element (i, j) is
    // the tile's element i * w + j, and the work under the transpose is done on the tile.
    for (const Transposed& p : transposed) {
      Shape view(p.parameter->shape().element_type(), {w, n});
      Layout column_major;
      column_major.minor_to_major = {0, 1};
      view.set_layout(std::move(column_major));
      IrArray tile(p.buffer, std::move(view));
      tile.set_access_group(access_group_);
      e.BindArray(p.parameter, {}, tile);
    }
    std::vector<IrArray> outputs;
    for (const auto& [out, leaf] : group) {
      ASSIGN_OR_RETURN(IrArray moved, at_tile(OutputArray(leaf)));
      outputs.push_back(moved);
    }
    auto element = [&](const IrIndex& index) -> Status {
      std::vector<std::vector<Value*>> values;
      for (const auto& [out, leaf] : group) {
        ASSIGN_OR_RETURN(std::vector<Value*> leaves, e.EmitLeaves(out, index));
        values.push_back(std::move(leaves));
      }
      for (size_t j = 0; j < values.size(); ++j) {
        RETURN_IF_ERROR(outputs[j].EmitWrite(b_, index, values[j][0]));
      }
      return OkStatus();
    };
    if (w == columns) {
      // One loop over the tile, its index split minor first so that the offsets fold back into
      // the counter (IrArray::EmitLinearIndex): unit stride, vectorized.
      return e.EmitLoop(b_.getInt64(0), b_.getInt64(n * columns), "element", [&](Value* k) -> Status {
        return element({b_.CreateUDiv(k, b_.getInt64(columns)), b_.CreateURem(k, b_.getInt64(columns))});
      }, access_group_);
    }
    // A block of the columns: its rows, each unit stride.
    return e.EmitLoop(b_.getInt64(0), b_.getInt64(n), "tile.row", [&](Value* i) -> Status {
      return e.EmitLoop(b_.getInt64(0), b_.getInt64(w), "element", [&](Value* j) -> Status {
        return element({i, j});
      }, access_group_);
    });
  };
  // `count` tiles of `n` rows from row `first`, in strips of `m` rows, each over all the columns
  // in blocks of tile_columns (and one of the columns past the last whole block).
  auto emit_tiles = [&](Value* first, Value* count, int64_t n, int64_t m) -> Status {
    return plain->EmitLoop(b_.getInt64(0), count, "tile", [&](Value* tile) -> Status {
      Value* r0 = b_.CreateAdd(first, b_.CreateMul(tile, b_.getInt64(n)));
      if (tile_columns == columns) return emit_tile(r0, n, m, b_.getInt64(0), columns);
      const int64_t blocks = columns / tile_columns;
      RETURN_IF_ERROR(plain->EmitLoop(b_.getInt64(0), b_.getInt64(blocks), "column.block", [&](Value* block) -> Status {
        return emit_tile(r0, n, m, b_.CreateMul(block, b_.getInt64(tile_columns)), tile_columns);
      }));
      if (columns % tile_columns == 0) return OkStatus();
      return emit_tile(r0, n, m, b_.getInt64(blocks * tile_columns), columns % tile_columns);
    });
  };

  RETURN_IF_ERROR(plain->EmitLoop(f->getArg(1), f->getArg(2), "task", [&](Value* task) -> Status {
    Value* start = b_.CreateMul(task, b_.getInt64(task_rows));
    Value* stop = b_.CreateAdd(start, b_.getInt64(task_rows));
    Value* end = b_.CreateSelect(b_.CreateICmpSLT(stop, b_.getInt64(rows)), stop, b_.getInt64(rows));
    Value* tiles = b_.CreateUDiv(b_.CreateSub(end, start), b_.getInt64(tile_rows));
    RETURN_IF_ERROR(emit_tiles(start, tiles, tile_rows, strip));
    Value* rest = b_.CreateAdd(start, b_.CreateMul(tiles, b_.getInt64(tile_rows)));
    std::vector<int64_t> tails;
    if (tile_rows > strip) tails.push_back(strip);
    if (strip > kLanes) tails.push_back(kLanes);
    for (int64_t m : tails) {
      Value* strips = b_.CreateUDiv(b_.CreateSub(end, rest), b_.getInt64(m));
      RETURN_IF_ERROR(emit_tiles(rest, strips, m, m));
      rest = b_.CreateAdd(rest, b_.CreateMul(strips, b_.getInt64(m)));
    }
    // The rows past the last strip (the last task's), element by element.
    return plain->EmitLoop(rest, end, "row", [&](Value* r) -> Status {
      return plain->EmitLoop(b_.getInt64(0), b_.getInt64(columns), "column", [&](Value* c) -> Status {
        const IrIndex index = {r, c};
        std::vector<std::vector<Value*>> values;
        for (const auto& [out, leaf] : group) {
          ASSIGN_OR_RETURN(std::vector<Value*> leaves, plain->EmitLeaves(out, index));
          values.push_back(std::move(leaves));
        }
        for (size_t j = 0; j < values.size(); ++j) {
          RETURN_IF_ERROR(OutputArray(group[j].second).EmitWrite(b_, index, values[j][0]));
        }
        return OkStatus();
      });
    });
  }));
  b_.CreateRetVoid();
  return OkStatus();
}

}  // namespace xlens::codegen

#include "compiler/passes/spmd_partitioner.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/hlo/annotation_custom_calls.h"
#include "compiler/hlo/collective_attributes.h"
#include "compiler/passes/call_inliner.h"
#include "compiler/passes/dce.h"
#include "compiler/passes/hlo_creation_utils.h"
#include "compiler/passes/sharding_propagation.h"
#include "compiler/passes/spmd_reshard.h"
#include "compiler/passes/spmd_tiling.h"

namespace xlens {

namespace {

// A value of the partitioned program: the instruction holding this device's piece, and how the
// pieces tile the original value. Tuples carry one tiling per element (flat tuples only).
struct Piece {
  HloInstruction* hlo = nullptr;
  Tiling tiling;
  bool manual = false;
  std::vector<Tiling> elements;
};



// Whether each device holds a value of its own: {manual}, or a tiling with a manual subgroup
// (shard_map manual over some mesh axes only: last_tile_dims={manual}).
bool IsManualLike(const HloSharding& s) {
  if (s.IsManual()) return true;
  if (!s.IsTiled()) return false;
  const auto& groups = s.subgroups();
  return std::find(groups.begin(), groups.end(), HloSharding::Subgroup::kManual) != groups.end();
}

void DropSharding(HloInstruction* instr) {
  auto& raw = instr->raw_attributes;
  raw.erase(std::remove_if(raw.begin(), raw.end(),
                           [](const RawAttribute& a) { return a.key == "sharding"; }),
            raw.end());
}


class Partitioner {
 public:
  Partitioner(HloModule& module, int64_t n, std::vector<std::string>& decisions)
      : module_(module), n_(n), decisions_(decisions) {}

  // The per-device program of `old` (the entry, or a loop's body or condition), added to the
  // module before `before` (its caller's new computation; the end when null).
  StatusOr<HloComputation*> Build(HloComputation* old, const HloComputation* before) {
    auto fresh = std::make_unique<HloComputation>(old->name() + "_spmd");
    comp_ = before == nullptr ? module_.AddComputation(std::move(fresh), /*is_entry=*/false)
                              : module_.AddComputationBefore(std::move(fresh), before);
    b_ = std::make_unique<SpmdBuilder>(module_, comp_, n_, decisions_);
    if (next_channel_ > 0) b_->set_next_channel(std::max(b_->next_channel(), next_channel_));
    for (HloInstruction* instr : old->MakeInstructionPostOrder()) {
      const size_t mark = decisions_.size();
      RETURN_IF_ERROR(Rewrite(*instr).WithContext(instr->name()));
      HeadlineFirst(*instr, mark);
    }
    HloInstruction* root = pieces_.at(old->root_instruction()).hlo;
    if (const std::string* s = old->root_instruction()->raw_attribute("sharding")) {
      if (root->raw_attribute("sharding") == nullptr) root->SetRawAttribute("sharding", *s);
    }
    comp_->set_root_instruction(root);
    return comp_;
  }

  Status Run() {
    HloComputation* old = module_.entry_computation();
    RETURN_IF_ERROR(Build(old, nullptr).status());
    HloInstruction* root = comp_->root_instruction();
    module_.set_entry_computation(comp_);
    module_.RemoveComputation(old);
    ComputationLayout layout;
    for (const HloInstruction* p : comp_->parameter_instructions()) layout.parameters.push_back(p->shape());
    layout.result = root->shape();
    module_.set_entry_computation_layout(layout);
    return OkStatus();
  }

 private:
  // The lines `instr` added since `mark`: its own line first, the reshards of its operands and
  // result under it (a line naming the op when it had none).
  void HeadlineFirst(const HloInstruction& instr, size_t mark) {
    if (decisions_.size() == mark) return;
    const std::string head = "%" + instr.name() + ":";
    auto it = std::find_if(decisions_.begin() + mark, decisions_.end(),
                           [&](const std::string& d) { return d.rfind(head, 0) == 0; });
    if (it == decisions_.end()) {
      decisions_.insert(decisions_.begin() + mark,
                        fmt::format("{} {} on its pieces", head, HloOpcodeString(instr.opcode())));
    } else {
      std::rotate(decisions_.begin() + mark, it, it + 1);
    }
  }

  HloInstruction* Add(std::unique_ptr<HloInstruction> instr) { return b_->Add(std::move(instr)); }

  StatusOr<HloSharding> ShardingOf(const HloInstruction& instr) {
    const std::string* text = instr.raw_attribute("sharding");
    if (text == nullptr) return HloSharding::Replicated();
    return HloSharding::Parse(*text, instr.name());
  }

  HloInstruction* Reshard(const Piece& v, const Tiling& to, const std::vector<int64_t>& global,
                          const std::string& what) {
    if (v.manual) return v.hlo;
    return b_->Reshard(v.hlo, v.tiling, to, global, what);
  }

  HloInstruction* ReshardOperand(const HloInstruction& op, const Tiling& to) {
    return Reshard(pieces_.at(&op), to, op.shape().dimensions(), "%" + op.name());
  }

  StatusOr<Tiling> TilingOf(const HloInstruction& instr) {
    ASSIGN_OR_RETURN(HloSharding s, ShardingOf(instr));
    return Tiling::FromSharding(s, instr.shape().rank(), n_);
  }

  // --- per instruction ---
  Status Rewrite(const HloInstruction& instr) {
    ASSIGN_OR_RETURN(HloSharding sharding, ShardingOf(instr));
    const bool is_custom = instr.opcode() == HloOpcode::kCustomCall;
    const std::string target = is_custom ? instr.custom_call_target.value_or("") : "";
    if (instr.opcode() == HloOpcode::kParameter) {
      Piece p;
      if (IsManualLike(sharding)) {
        p.manual = true;
        p.hlo = Add(instr.CloneWithNewOperands(instr.shape(), {}));
      } else if (instr.shape().IsTuple()) {
        // A flat tuple: each element is cut by its own sharding.
        std::vector<Shape> pieces;
        for (int64_t k = 0; k < instr.shape().tuple_shapes_size(); ++k) {
          const Shape& element = instr.shape().tuple_shapes(k);
          if (!element.IsArray()) {
            return Error("nested tuple-shaped entry parameters are not partitioned yet");
          }
          const HloSharding& leaf = sharding.IsTuple() ? sharding.tuple_elements()[k] : sharding;
          ASSIGN_OR_RETURN(Tiling t, Tiling::FromSharding(leaf, element.rank(), n_));
          pieces.push_back(WithDims(element, t.TileDims(element.dimensions())));
          p.elements.push_back(std::move(t));
        }
        p.hlo = Add(instr.CloneWithNewOperands(Shape::Tuple(pieces), {}));
      } else {
        ASSIGN_OR_RETURN(p.tiling, Tiling::FromSharding(sharding, instr.shape().rank(), n_));
        p.hlo = Add(instr.CloneWithNewOperands(
            WithDims(instr.shape(), p.tiling.TileDims(instr.shape().dimensions())), {}));
      }
      p.hlo->set_name(instr.name());
      pieces_[&instr] = p;
      return OkStatus();
    }
    if (target == "xla.sdy.GlobalToLocalShape") {
      // Shardy's entry into a shard_map body: the operand laid out as in_shardings says.
      ASSIGN_OR_RETURN(ShardyMeshes meshes, ModuleShardyMeshes(module_));
      ASSIGN_OR_RETURN(std::vector<HloSharding> in,
                       ShardyValueShardings(instr, meshes, "xla.sdy.in_shardings"));
      if (in.size() != 1 || instr.operand_count() != 1) {
        return Error("a shard_map of several values (xla.sdy.GlobalToLocalShape) is not partitioned yet");
      }
      const HloInstruction* op = instr.operand(0);
      ASSIGN_OR_RETURN(Tiling t, Tiling::FromSharding(in[0], op->shape().rank(), n_));
      pieces_[op] = Piece{ReshardOperand(*op, t), t, false, {}};
    }
    if (target == "SPMDFullToShardShape" && IsManualLike(sharding) && !sharding.IsManual()) {
      // Manual over some axes only: each device takes its manual piece whole.
      const HloInstruction* op = instr.operand(0);
      ASSIGN_OR_RETURN(Tiling t, ManualPieces(sharding, op->shape().dimensions(), instr.shape().dimensions(), n_));
      pieces_[op] = Piece{ReshardOperand(*op, t), t, false, {}};
    }
    if (target == "SPMDFullToShardShape" || target == "xla.sdy.GlobalToLocalShape") {
      const Piece& in = pieces_.at(instr.operand(0));
      if (in.hlo->shape().dimensions() != instr.shape().dimensions()) {
        return Error(fmt::format("{}'s pieces are {}, its result {}", target,
                                 in.hlo->shape().ToString(), instr.shape().ToString()));
      }
      HloInstruction* copy =
          Add(HloInstruction::CreateUnary(HloOpcode::kCopy, in.hlo->shape(), in.hlo));
      pieces_[&instr] = Piece{copy, {}, true, {}};
      decisions_.push_back(fmt::format("%{}: enters manual code with the pieces of {}", instr.name(),
                                       in.tiling.ToString()));
      return OkStatus();
    }
    if (target == "SPMDShardToFullShape" && instr.operand_count() == 1) {
      const HloInstruction* op = instr.operand(0);
      ASSIGN_OR_RETURN(HloSharding inner, ShardingOf(*op));
      if (IsManualLike(inner) && !inner.IsManual()) {
        ASSIGN_OR_RETURN(Tiling t, ManualPieces(inner, instr.shape().dimensions(), op->shape().dimensions(), n_));
        ASSIGN_OR_RETURN(Tiling want, Tiling::FromSharding(sharding, instr.shape().rank(), n_));
        HloInstruction* in = pieces_.at(op).hlo;
        Piece p{Add(HloInstruction::CreateUnary(HloOpcode::kCopy, in->shape(), in)), t, false, {}};
        p.hlo = Reshard(p, want, instr.shape().dimensions(), "%" + instr.name());
        p.tiling = want;
        pieces_[&instr] = p;
        decisions_.push_back(fmt::format("%{}: leaves partially manual code as the pieces of {}", instr.name(),
                                         t.ToString()));
        return OkStatus();
      }
    }
    if (target == "SPMDShardToFullShape" || target == "xla.sdy.LocalToGlobalShape") {
      ASSIGN_OR_RETURN(Tiling t, Tiling::FromSharding(sharding, instr.shape().rank(), n_));
      HloInstruction* in = pieces_.at(instr.operand(0)).hlo;
      if (in->shape().dimensions() != t.TileDims(instr.shape().dimensions())) {
        return Error(fmt::format("{}'s operand {} is not a piece of {} under {}", target,
                                 in->shape().ToString(), instr.shape().ToString(), t.ToString()));
      }
      HloInstruction* copy = Add(HloInstruction::CreateUnary(HloOpcode::kCopy, in->shape(), in));
      pieces_[&instr] = Piece{copy, t, false, {}};
      decisions_.push_back(
          fmt::format("%{}: leaves manual code as the pieces of {}", instr.name(), t.ToString()));
      return OkStatus();
    }
    if (IsManualLike(sharding)) {
      std::vector<HloInstruction*> ops;
      for (const HloInstruction* op : instr.operands()) ops.push_back(pieces_.at(op).hlo);
      HloInstruction* c = Add(instr.CloneWithNewOperands(instr.shape(), ops));
      pieces_[&instr] = Piece{c, {}, true, {}};
      return OkStatus();
    }
    if (instr.opcode() == HloOpcode::kTuple && sharding.IsTuple()) return RewriteTuple(instr, sharding);
    if (instr.opcode() == HloOpcode::kWhile && sharding.IsTuple()) {
      ASSIGN_OR_RETURN(bool done, RewriteWhile(instr, sharding));
      if (done) return OkStatus();
    }
    if (instr.opcode() == HloOpcode::kGetTupleElement) {
      const Piece& in = pieces_.at(instr.operand(0));
      if (!in.elements.empty() && instr.shape().IsArray()) {
        auto g = instr.CloneWithNewOperands(in.hlo->shape().tuple_shapes(instr.tuple_index()), {in.hlo});
        DropSharding(g.get());
        Piece p{Add(std::move(g)), in.elements[instr.tuple_index()], false, {}};
        ASSIGN_OR_RETURN(Tiling t, Tiling::FromSharding(sharding, instr.shape().rank(), n_));
        p.hlo = Reshard(p, t, instr.shape().dimensions(), "%" + instr.name());
        p.tiling = t;
        pieces_[&instr] = p;
        return OkStatus();
      }
    }
    if (!instr.shape().IsArray() || sharding.IsTuple()) return RewriteWhole(instr, sharding);
    ASSIGN_OR_RETURN(Tiling want, Tiling::FromSharding(sharding, instr.shape().rank(), n_));
    if (instr.opcode() == HloOpcode::kDot) return RewriteDot(instr, want);
    if (instr.opcode() == HloOpcode::kSlice && SliceStaysInPieces(instr, want)) {
      // Dropping the end of a tiled dim that still has as many rows per piece: every piece is the
      // operand's, the dropped rows now the last piece's padding.
      pieces_[&instr] = Piece{ReshardOperand(*instr.operand(0), want), want, false, {}};
      decisions_.push_back(fmt::format("%{}: slice keeps the pieces of {}; what it drops is padding",
                                       instr.name(), want.ToString()));
      return OkStatus();
    }
    if (instr.opcode() == HloOpcode::kSlice || instr.opcode() == HloOpcode::kPad ||
        instr.opcode() == HloOpcode::kConcatenate) {
      ASSIGN_OR_RETURN(bool done, RewriteWindowed(instr, want));
      if (done) return OkStatus();
    }
    if (instr.opcode() == HloOpcode::kReduce && instr.operand_count() == 2) return RewriteReduce(instr, want);
    if (instr.opcode() == HloOpcode::kGather || instr.opcode() == HloOpcode::kScatter) {
      ASSIGN_OR_RETURN(bool done, RewriteIndexed(instr, want));
      if (done) return OkStatus();
    }
    if (instr.opcode() != HloOpcode::kConstant && instr.opcode() != HloOpcode::kIota &&
        instr.operand_count() > 0) {
      bool mapped = true;
      for (int64_t k = 0; k < instr.operand_count() && mapped; ++k) {
        mapped = instr.operand(k)->shape().IsArray() && OpDimMap(instr, k).has_value();
      }
      if (mapped) return RewriteMapped(instr, want);
    }
    return RewriteWhole(instr, sharding);
  }

  static bool SliceStaysInPieces(const HloInstruction& instr, const Tiling& want) {
    const Shape& in = instr.operand(0)->shape();
    bool cut = false;
    for (int64_t d = 0; d < in.rank(); ++d) {
      if (instr.slice_starts[d] != 0 || instr.slice_strides[d] != 1) return false;
      int64_t out = instr.shape().dimensions(d);
      if (out == in.dimensions(d)) continue;
      if (want.tiles[d] == 1 || CeilDiv(out, want.tiles[d]) != CeilDiv(in.dimensions(d), want.tiles[d])) {
        return false;
      }
      cut = true;
    }
    return cut;
  }

  Status RewriteTuple(const HloInstruction& instr, const HloSharding& sharding) {
    Piece p;
    std::vector<HloInstruction*> ops;
    std::vector<Shape> shapes;
    for (int64_t k = 0; k < instr.operand_count(); ++k) {
      const HloInstruction* op = instr.operand(k);
      if (!op->shape().IsArray()) return RewriteWhole(instr, sharding);
      ASSIGN_OR_RETURN(Tiling t, Tiling::FromSharding(sharding.tuple_elements()[k], op->shape().rank(), n_));
      ops.push_back(ReshardOperand(*op, t));
      shapes.push_back(ops.back()->shape());
      p.elements.push_back(t);
    }
    auto t = instr.CloneWithNewOperands(Shape::Tuple(shapes), ops);
    if (!instr.IsRoot()) DropSharding(t.get());
    p.hlo = Add(std::move(t));
    pieces_[&instr] = p;
    return OkStatus();
  }

  // A loop whose state is a flat tuple of arrays runs on its pieces: the state keeps the layout
  // propagation gave it (the body's parameter and root share it), and the body and condition are
  // partitioned as programs of their own. False when the loop is not of that form.
  StatusOr<bool> RewriteWhile(const HloInstruction& instr, const HloSharding& sharding) {
    const Shape& shape = instr.shape();
    HloComputation* body = instr.while_body();
    HloComputation* cond = instr.while_condition();
    if (body == nullptr || cond == nullptr ||
        static_cast<int64_t>(sharding.tuple_elements().size()) != shape.tuple_shapes_size()) {
      return false;
    }
    for (HloComputation* c : {body, cond}) {
      const std::string* s = c->parameter_instruction(0)->raw_attribute("sharding");
      if (s == nullptr) return false;
      ASSIGN_OR_RETURN(HloSharding param, HloSharding::Parse(*s, c->parameter_instruction(0)->name()));
      if (!(param == sharding)) return false;
    }
    std::vector<Tiling> state;
    for (int64_t k = 0; k < shape.tuple_shapes_size(); ++k) {
      const Shape& element = shape.tuple_shapes(k);
      if (!element.IsArray() || sharding.tuple_elements()[k].IsManual()) return false;
      ASSIGN_OR_RETURN(Tiling t, Tiling::FromSharding(sharding.tuple_elements()[k], element.rank(), n_));
      state.push_back(std::move(t));
    }
    const Piece& in = pieces_.at(instr.operand(0));
    if (in.manual || in.elements.size() != state.size()) return false;
    HloInstruction* init = in.hlo;
    if (in.elements != state) {
      std::vector<HloInstruction*> elements;
      std::vector<Shape> shapes;
      for (int64_t k = 0; k < static_cast<int64_t>(state.size()); ++k) {
        auto g = std::make_unique<HloInstruction>(HloOpcode::kGetTupleElement, in.hlo->shape().tuple_shapes(k));
        g->AppendOperand(in.hlo);
        g->tuple_index_attr = k;
        Piece element{Add(std::move(g)), in.elements[k], false, {}};
        elements.push_back(Reshard(element, state[k], shape.tuple_shapes(k).dimensions(),
                                   fmt::format("%{}[{}]", instr.operand(0)->name(), k)));
        shapes.push_back(elements.back()->shape());
      }
      auto t = std::make_unique<HloInstruction>(HloOpcode::kTuple, Shape::Tuple(shapes));
      for (HloInstruction* e : elements) t->AppendOperand(e);
      init = Add(std::move(t));
    }
    decisions_.push_back(fmt::format("%{}: while runs on its pieces: the state stays {}, body %{} and "
                                     "condition %{} partitioned",
                                     instr.name(), sharding.ToString(), body->name(), cond->name()));
    Partitioner body_partitioner(module_, n_, decisions_);
    body_partitioner.next_channel_ = b_->next_channel();
    ASSIGN_OR_RETURN(HloComputation* new_body, body_partitioner.Build(body, comp_));
    Partitioner cond_partitioner(module_, n_, decisions_);
    cond_partitioner.next_channel_ = body_partitioner.b_->next_channel();
    ASSIGN_OR_RETURN(HloComputation* new_cond, cond_partitioner.Build(cond, comp_));
    b_->set_next_channel(cond_partitioner.b_->next_channel());
    if (!SameShape(new_body->root_instruction()->shape(), init->shape()) ||
        !SameShape(new_body->parameter_instruction(0)->shape(), init->shape())) {
      return Error(fmt::format("the partitioned body of %{} takes {} and gives {}, its state is {}",
                               instr.name(), new_body->parameter_instruction(0)->shape().ToString(),
                               new_body->root_instruction()->shape().ToString(), init->shape().ToString()));
    }
    auto w = instr.CloneWithNewOperands(init->shape(), {init});
    w->ReplaceCalledComputation(body, new_body);
    w->ReplaceCalledComputation(cond, new_cond);
    DropSharding(w.get());
    Piece p{Add(std::move(w)), {}, false, state};
    pieces_[&instr] = p;
    return true;
  }

  // A gather from, or a scatter into, an operand cut along one dim its indices pick, one row at a
  // time there (an embedding table cut by its vocabulary): each device works on its own rows with
  // the indices shifted by where its rows start, as XLA's partitioner does. A gather clamps the
  // indices as a gather would (so the row it takes is the whole table's), takes them from its
  // rows, zeroes the ids another device holds and all-reduces; a scatter needs nothing more, since
  // it skips updates whose shifted index falls outside its rows. The indices (and updates) are
  // whole on every device; the operand's other dims are made whole. False when not of that form.
  StatusOr<bool> RewriteIndexed(const HloInstruction& instr, const Tiling& want) {
    const bool gather = instr.opcode() == HloOpcode::kGather;
    if (gather ? !instr.gather_dimension_numbers || !instr.slice_sizes_attr
               : !instr.scatter_dimension_numbers || instr.operand_count() != 3) {
      return false;
    }
    const HloInstruction* operand = instr.operand(0);
    const HloInstruction* indices = instr.operand(1);
    const Piece& in = pieces_.at(operand);
    if (in.manual || !indices->shape().IsArray() || !IsIntegralType(indices->shape().element_type()) ||
        operand->shape().element_type() == PrimitiveType::PRED) {
      return false;
    }
    const auto& map = gather ? instr.gather_dimension_numbers->start_index_map
                             : instr.scatter_dimension_numbers->scatter_dims_to_operand_dims;
    const int64_t ivd = gather ? instr.gather_dimension_numbers->index_vector_dim
                               : instr.scatter_dimension_numbers->index_vector_dim;
    if (gather ? !instr.gather_dimension_numbers->operand_batching_dims.empty()
               : !instr.scatter_dimension_numbers->input_batching_dims.empty()) {
      return false;
    }
    // The one tiled dim of the operand an index picks, with windows of one row there.
    int64_t dim = -1, component = -1;
    for (int64_t d = 0; d < operand->shape().rank(); ++d) {
      if (in.tiling.tiles[d] <= 1) continue;
      auto at = std::find(map.begin(), map.end(), d);
      if (at == map.end() || dim >= 0) return false;
      dim = d;
      component = at - map.begin();
    }
    if (dim < 0) return false;
    if (gather && (*instr.slice_sizes_attr)[dim] != 1) return false;
    if (!gather) {
      const auto& inserted = instr.scatter_dimension_numbers->inserted_window_dims;
      if (std::find(inserted.begin(), inserted.end(), dim) == inserted.end()) return false;
    }
    const std::vector<int64_t>& global = operand->shape().dimensions();
    std::vector<int64_t> others;
    for (int64_t d = 0; d < operand->shape().rank(); ++d) {
      if (d != dim) others.push_back(d);
    }
    const Tiling rows = in.tiling.ReplicateDims(others);
    HloInstruction* table = ReshardOperand(*operand, rows);
    HloInstruction* ids = ReshardOperand(*indices, Tiling::Replicated(indices->shape().rank(), n_));
    std::vector<int64_t> starts;
    for (int64_t dev = 0; dev < n_; ++dev) starts.push_back(rows.Offset(global, dim, dev));
    SpmdBuilder::ShiftedIndices ix = b_->ShiftIndices(
        ids, ivd, component, gather ? std::optional<int64_t>(global[dim]) : std::nullopt, starts);
    HloInstruction* shifted = ix.indices;
    const std::string note_rows = fmt::format("rows of {} along dim {}", rows.ToString(), dim);
    if (!gather) {
      HloInstruction* updates =
          ReshardOperand(*instr.operand(2), Tiling::Replicated(instr.operand(2)->shape().rank(), n_));
      auto c = instr.CloneWithNewOperands(table->shape(), {table, shifted, updates});
      DropSharding(c.get());
      Piece p{Add(std::move(c)), rows, false, {}};
      decisions_.push_back(fmt::format("%{}: scatter into its {}, the indices shifted by where its rows "
                                       "start (updates for other rows are skipped)", instr.name(), note_rows));
      p.hlo = Reshard(p, want, instr.shape().dimensions(), "%" + instr.name());
      p.tiling = want;
      pieces_[&instr] = p;
      return true;
    }
    auto c = instr.CloneWithNewOperands(instr.shape(), {table, shifted});
    DropSharding(c.get());
    const auto& offset_dims = instr.gather_dimension_numbers->offset_dims;
    std::vector<int64_t> batch_dims;
    for (int64_t o = 0; o < instr.shape().rank(); ++o) {
      if (std::find(offset_dims.begin(), offset_dims.end(), o) == offset_dims.end()) batch_dims.push_back(o);
    }
    HloInstruction* r = b_->ZeroOutside(Add(std::move(c)), ix.local, rows.TileDims(global)[dim], batch_dims);
    auto groups = rows.GroupsAlong({dim});
    r = b_->AllReduce(r, groups, nullptr);
    decisions_.push_back(fmt::format("%{}: gather from its {}, the indices shifted by where its rows start "
                                     "and the rows another device holds zeroed, then all-reduce over {}",
                                     instr.name(), note_rows, ReplicaGroupsText(groups)));
    Piece p{r, Tiling::Replicated(instr.shape().rank(), n_), false, {}};
    p.hlo = Reshard(p, want, instr.shape().dimensions(), "%" + instr.name());
    p.tiling = want;
    pieces_[&instr] = p;
    return true;
  }

  // A slice, pad or concatenation whose result is cut along a dim it changes: each device's piece
  // is a window of the operands' rows (SpmdBuilder::Window), then the op runs on the other dims.
  // False when no such dim is cut (the op runs on its pieces as mapped).
  StatusOr<bool> RewriteWindowed(const HloInstruction& instr, const Tiling& want) {
    const Shape& out = instr.shape();
    const std::vector<bool> windowed = WindowedDims(instr);
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < out.rank(); ++d) {
      const bool changes = instr.opcode() == HloOpcode::kConcatenate
                               ? d == instr.dimensions()[0]
                               : out.dimensions(d) != instr.operand(0)->shape().dimensions(d) ||
                                     (instr.opcode() == HloOpcode::kSlice && instr.slice_starts[d] != 0);
      if (want.tiles[d] > 1 && changes) {
        if (!windowed[d]) return false;
        dims.push_back(d);
      }
    }
    if (dims.empty()) return false;
    for (int64_t k = 0; k < instr.operand_count(); ++k) {
      if (pieces_.at(instr.operand(k)).manual) return false;
    }
    const std::vector<int64_t> local = want.TileDims(out.dimensions());
    const Shape shape = WithDims(out, local);
    HloInstruction* result = nullptr;
    if (instr.opcode() == HloOpcode::kConcatenate) {
      const int64_t d = dims[0];
      HloInstruction* zero = b_->Zero(out.element_type());
      std::vector<HloInstruction*> windows;
      std::vector<int64_t> offsets;
      int64_t offset = 0;
      for (int64_t k = 0; k < instr.operand_count(); ++k) {
        const HloInstruction* op = instr.operand(k);
        HloInstruction* x = ReshardOperand(*op, want);
        windows.push_back(b_->Window(x, want, op->shape().dimensions(), d, -offset, local[d], local[d], zero,
                                     "%" + op->name()));
        offsets.push_back(offset);
        offset += op->shape().dimensions(d);
      }
      // Each row from the operand it falls in.
      Shape is = windows[0]->shape();
      is.set_element_type(PrimitiveType::S32);
      auto iota = std::make_unique<HloInstruction>(HloOpcode::kIota, is);
      iota->iota_dimension_attr = d;
      std::vector<int64_t> first;
      for (int64_t dev = 0; dev < n_; ++dev) first.push_back(want.Offset(out.dimensions(), d, dev));
      HloInstruction* row = Add(HloInstruction::CreateBinary(HloOpcode::kAdd, is, Add(std::move(iota)),
                                                             b_->Broadcast(b_->PerDevice(first), is)));
      result = windows[0];
      for (size_t k = 1; k < windows.size(); ++k) {
        Shape ps = is;
        ps.set_element_type(PrimitiveType::PRED);
        auto ge = HloInstruction::CreateBinary(HloOpcode::kCompare, ps, row,
                                               b_->Broadcast(b_->ScalarS32(offsets[k]), is));
        ge->comparison_direction = ComparisonDirection::kGe;
        result = Add(CreateSelect(Add(std::move(ge)), windows[k], result));
      }
      decisions_.push_back(fmt::format("%{}: concatenate of windows of its operands' rows along dim {} ({})",
                                       instr.name(), d, want.ToString()));
    } else {
      const bool pad = instr.opcode() == HloOpcode::kPad;
      const HloInstruction* op = instr.operand(0);
      HloInstruction* x = ReshardOperand(*op, want);
      HloInstruction* fill = pad ? ReshardOperand(*instr.operand(1), Tiling::Replicated(0, n_))
                                 : b_->Zero(out.element_type());
      std::vector<int64_t> global = op->shape().dimensions();
      for (int64_t d : dims) {
        const int64_t start = pad ? -instr.padding_config->dimensions[d].edge_padding_low : instr.slice_starts[d];
        x = b_->Window(x, want, global, d, start, local[d], local[d], fill, "%" + op->name());
        global[d] = out.dimensions(d);
      }
      auto c = instr.CloneWithNewOperands(shape, pad ? std::vector<HloInstruction*>{x, fill}
                                                     : std::vector<HloInstruction*>{x});
      DropSharding(c.get());
      for (int64_t d = 0; d < out.rank(); ++d) {
        if (want.tiles[d] <= 1) continue;
        if (pad) {
          c->padding_config->dimensions[d] = PaddingDimension{};
        } else {
          c->slice_starts[d] = 0;
          c->slice_limits[d] = x->shape().dimensions(d);
        }
      }
      result = Add(std::move(c));
      decisions_.push_back(fmt::format("%{}: {} of windows of the operand's rows along dim {} ({})", instr.name(),
                                       HloOpcodeString(instr.opcode()), fmt::join(dims, ", "), want.ToString()));
    }
    pieces_[&instr] = Piece{result, want, false, {}};
    return true;
  }

  // Dims, element types and layouts alike.
  static bool SameShape(const Shape& a, const Shape& b) { return a.ToString() == b.ToString(); }

  // A flat tuple of whole values from `in`'s pieces (each element gathered as needed).
  HloInstruction* WholeTuple(const Piece& in, const Shape& global, const std::string& what) {
    bool whole = true;
    for (const Tiling& e : in.elements) whole &= e.IsReplicated();
    if (whole) return in.hlo;
    std::vector<HloInstruction*> elements;
    for (int64_t k = 0; k < static_cast<int64_t>(in.elements.size()); ++k) {
      auto g = std::make_unique<HloInstruction>(HloOpcode::kGetTupleElement, in.hlo->shape().tuple_shapes(k));
      g->AppendOperand(in.hlo);
      g->tuple_index_attr = k;
      Piece element{Add(std::move(g)), in.elements[k], false, {}};
      const Shape& shape = global.tuple_shapes(k);
      elements.push_back(Reshard(element, Tiling::Replicated(shape.rank(), n_), shape.dimensions(),
                                 fmt::format("{}[{}]", what, k)));
    }
    std::vector<Shape> shapes;
    for (HloInstruction* e : elements) shapes.push_back(e->shape());
    auto t = std::make_unique<HloInstruction>(HloOpcode::kTuple, Shape::Tuple(shapes));
    for (HloInstruction* e : elements) t->AppendOperand(e);
    return Add(std::move(t));
  }

  // Runs `instr` on whole values on every device, then cuts its result to its sharding.
  Status RewriteWhole(const HloInstruction& instr, const HloSharding& sharding) {
    std::vector<HloInstruction*> ops;
    bool moved = false;
    for (const HloInstruction* op : instr.operands()) {
      const Piece& in = pieces_.at(op);
      if (op->shape().IsArray()) {
        Tiling whole = Tiling::Replicated(op->shape().rank(), n_);
        moved |= !(in.tiling == whole) && !in.manual;
        ops.push_back(ReshardOperand(*op, whole));
      } else {
        ops.push_back(WholeTuple(in, op->shape(), "%" + op->name()));
        moved |= ops.back() != in.hlo;
      }
    }
    auto c = instr.CloneWithNewOperands(instr.shape(), ops);
    if (!instr.IsRoot()) DropSharding(c.get());
    Piece p{Add(std::move(c)), {}, false, {}};
    if (instr.shape().IsArray()) {
      p.tiling = Tiling::Replicated(instr.shape().rank(), n_);
      ASSIGN_OR_RETURN(Tiling want, Tiling::FromSharding(sharding, instr.shape().rank(), n_));
      p.hlo = Reshard(p, want, instr.shape().dimensions(), "%" + instr.name());
      p.tiling = want;
    } else if (instr.shape().IsTuple()) {
      for (const Shape& s : instr.shape().tuple_shapes()) {
        if (!s.IsArray()) {
          p.elements.clear();
          break;
        }
        p.elements.push_back(Tiling::Replicated(s.rank(), n_));
      }
    }
    if (moved) {
      decisions_.push_back(fmt::format("%{}: {} runs on whole values on every device", instr.name(),
                                       HloOpcodeString(instr.opcode())));
    }
    pieces_[&instr] = p;
    return OkStatus();
  }

  // Ops whose operands' dims map to the result's (OpDimMap): each runs on its pieces.
  Status RewriteMapped(const HloInstruction& instr, const Tiling& want) {
    auto map0 = *OpDimMap(instr, 0);
    Tiling op0 = BackwardThroughMap(instr, 0, want, map0);
    // A broadcast makes its new dims itself, so its pieces can be cut any way the result is.
    Tiling result = instr.opcode() == HloOpcode::kBroadcast ? want : ForwardThroughMap(instr, 0, op0, map0);
    if (instr.opcode() == HloOpcode::kConvolution || instr.opcode() == HloOpcode::kGather) {
      // Each operand brings its own dim (the images' batch, the kernels' output feature; the
      // indices' batch for a gather): the result keeps the ones either gives, the rest whole.
      std::vector<int64_t> map1 = *OpDimMap(instr, 1), whole;
      for (int64_t o = 0; o < want.rank(); ++o) {
        if (map0[o] < 0 && map1[o] < 0) whole.push_back(o);
      }
      result = want.ReplicateDims(whole);
      op0 = BackwardThroughMap(instr, 0, result, map0);
    }
    if (IsAnnotationCustomCall(instr)) {
      // The annotation has done its work (propagation read it); the piece is the operand's.
      Piece p{ReshardOperand(*instr.operand(0), want), want, false, {}};
      pieces_[&instr] = p;
      return OkStatus();
    }
    std::vector<HloInstruction*> ops;
    for (int64_t k = 0; k < instr.operand_count(); ++k) {
      const HloInstruction* op = instr.operand(k);
      Tiling t = k == 0 ? op0 : BackwardThroughMap(instr, k, result, *OpDimMap(instr, k));
      ops.push_back(ReshardOperand(*op, t));
    }
    std::vector<int64_t> local = result.TileDims(instr.shape().dimensions());
    Shape shape = WithDims(instr.shape(), local);
    if (instr.opcode() == HloOpcode::kReshape && shape.num_elements() != ops[0]->shape().num_elements()) {
      return RewriteWhole(instr, want.ToSharding());
    }
    auto c = instr.CloneWithNewOperands(shape, ops);
    DropSharding(c.get());
    if (instr.opcode() == HloOpcode::kSlice) {
      for (size_t d = 0; d < local.size(); ++d) {
        if (result.tiles[d] > 1) c->slice_limits[d] = ops[0]->shape().dimensions(d);
      }
    }
    if (instr.opcode() == HloOpcode::kDynamicSlice) c->dynamic_slice_sizes_attr = local;
    if (instr.opcode() == HloOpcode::kGather && c->slice_sizes_attr) {
      // A slice that took a table dim whole takes the piece of it whole.
      const Shape& table = instr.operand(0)->shape();
      for (int64_t d = 0; d < table.rank(); ++d) {
        if ((*c->slice_sizes_attr)[d] == table.dimensions(d)) {
          (*c->slice_sizes_attr)[d] = ops[0]->shape().dimensions(d);
        }
      }
    }
    Piece p{Add(std::move(c)), result, false, {}};
    p.hlo = Reshard(p, want, instr.shape().dimensions(), "%" + instr.name());
    p.tiling = want;
    pieces_[&instr] = p;
    return OkStatus();
  }

  Status RewriteReduce(const HloInstruction& instr, const Tiling& want) {
    const HloInstruction* operand = instr.operand(0);
    Piece in = pieces_.at(operand);
    if (in.manual) return RewriteWhole(instr, want.ToSharding());
    std::vector<int64_t> global = operand->shape().dimensions();
    std::vector<int64_t> cut;
    for (int64_t d : instr.dimensions()) {
      if (in.tiling.tiles[d] > 1) cut.push_back(d);
    }
    HloInstruction* init = ReshardOperand(*instr.operand(1), Tiling::Replicated(0, n_));
    HloInstruction* x = b_->Mask(in.hlo, in.tiling, global, cut, init);
    Tiling result = ForwardThroughMap(instr, 0, in.tiling, *OpDimMap(instr, 0));
    auto c = instr.CloneWithNewOperands(
        WithDims(instr.shape(), result.TileDims(instr.shape().dimensions())), {x, init});
    DropSharding(c.get());
    HloInstruction* r = Add(std::move(c));
    if (!cut.empty()) {
      auto groups = in.tiling.GroupsAlong(cut);
      r = b_->AllReduce(r, groups, instr.to_apply());
      decisions_.push_back(fmt::format("%{}: reduce of pieces of {} over tiled dims, then all-reduce over {}",
                                       instr.name(), in.tiling.ToString(), ReplicaGroupsText(groups)));
    }
    Piece p{r, result, false, {}};
    p.hlo = Reshard(p, want, instr.shape().dimensions(), "%" + instr.name());
    p.tiling = want;
    pieces_[&instr] = p;
    return OkStatus();
  }

  // Bytes a reshard moves between devices, roughly: none for a local slice, the whole value for a
  // gather.
  int64_t Cost(const Tiling& from, const Tiling& to, const Shape& shape) {
    if (from == to || SliceSuffices(from, to, shape.dimensions())) return 0;
    return shape_util::ByteSizeOf(shape);
  }

  Status RewriteDot(const HloInstruction& instr, const Tiling& want) {
    const HloInstruction* lhs = instr.operand(0);
    const HloInstruction* rhs = instr.operand(1);
    const Piece& l = pieces_.at(lhs);
    const Piece& r = pieces_.at(rhs);
    if (l.manual || r.manual) return RewriteWhole(instr, want.ToSharding());
    DotSpace space = DotSpace::Of(instr);
    std::vector<std::pair<std::string, Tiling>> candidates;
    if (auto m = MergeTilings(space.FromLhs(l.tiling), space.FromRhs(r.tiling))) {
      candidates.push_back({"both operands' tilings merged", *m});
    }
    candidates.push_back({"the result's tiling", space.FromResult(want)});
    candidates.push_back({"the lhs's tiling", space.FromLhs(l.tiling)});
    candidates.push_back({"the rhs's tiling", space.FromRhs(r.tiling)});
    size_t best = 0;
    int64_t best_cost = -1;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const Tiling& s = candidates[i].second;
      Tiling res = space.Result(s);
      int64_t cost = Cost(l.tiling, space.Lhs(s), lhs->shape()) + Cost(r.tiling, space.Rhs(s), rhs->shape()) +
                     Cost(res, want, instr.shape());
      for (int64_t a : space.contracting_axes) {
        if (s.tiles[a] > 1) {
          cost += shape_util::ByteSizeOf(WithDims(instr.shape(), res.TileDims(instr.shape().dimensions())));
          break;
        }
      }
      if (best_cost < 0 || cost < best_cost) {
        best = i;
        best_cost = cost;
      }
    }
    const Tiling& s = candidates[best].second;
    HloInstruction* lp = ReshardOperand(*lhs, space.Lhs(s));
    HloInstruction* rp = ReshardOperand(*rhs, space.Rhs(s));
    std::vector<int64_t> cut_axes, lhs_cut, rhs_cut;
    for (int64_t a : space.contracting_axes) {
      if (s.tiles[a] <= 1) continue;
      cut_axes.push_back(a);
      for (size_t d = 0; d < space.lhs_axis.size(); ++d) {
        if (space.lhs_axis[d] == a) lhs_cut.push_back(d);
      }
      for (size_t d = 0; d < space.rhs_axis.size(); ++d) {
        if (space.rhs_axis[d] == a) rhs_cut.push_back(d);
      }
    }
    if (!cut_axes.empty()) {
      lp = b_->Mask(lp, space.Lhs(s), lhs->shape().dimensions(), lhs_cut,
                    b_->Zero(lhs->shape().element_type()));
      rp = b_->Mask(rp, space.Rhs(s), rhs->shape().dimensions(), rhs_cut,
                    b_->Zero(rhs->shape().element_type()));
    }
    Tiling result = space.Result(s);
    auto c = instr.CloneWithNewOperands(
        WithDims(instr.shape(), result.TileDims(instr.shape().dimensions())), {lp, rp});
    DropSharding(c.get());
    HloInstruction* d = Add(std::move(c));
    std::string note = fmt::format("%{}: dot laid out by {} (space {}), pieces {} x {}", instr.name(),
                                   candidates[best].first, s.ToString(), lp->shape().ToString(),
                                   rp->shape().ToString());
    if (!cut_axes.empty()) {
      auto groups = s.GroupsAlong(cut_axes);
      if (auto dim = b_->ScatterDim(result, want, groups, instr.shape().dimensions())) {
        // The result is wanted cut along a dim across the same devices that sum: each takes its
        // part of the sum (XLA's reduce-scatter), not the whole sum to cut after.
        d = b_->ReduceScatter(d, *dim, groups);
        result = want;
        note += fmt::format(", contracting dims tiled: reduce-scatter of partial sums along dim {} over {}",
                            *dim, ReplicaGroupsText(groups));
      } else {
        d = b_->AllReduce(d, groups, nullptr);
        note += fmt::format(", contracting dims tiled: all-reduce of partial sums over {}",
                            ReplicaGroupsText(groups));
      }
    }
    decisions_.push_back(note);
    Piece p{d, result, false, {}};
    p.hlo = Reshard(p, want, instr.shape().dimensions(), "%" + instr.name());
    p.tiling = want;
    pieces_[&instr] = p;
    return OkStatus();
  }

  HloModule& module_;
  int64_t n_;
  std::vector<std::string>& decisions_;
  HloComputation* comp_ = nullptr;
  std::unique_ptr<SpmdBuilder> b_;
  std::map<const HloInstruction*, Piece> pieces_;
  int64_t next_channel_ = 0;  // the first channel id this computation's collectives may take
};

}  // namespace

StatusOr<bool> SpmdPartitioner::Run(HloModule& module) {
  decisions_.clear();
  const int64_t n = ModuleNumPartitions(module);
  if (n <= 1 || module.entry_computation() == nullptr) return false;
  CallInliner inliner;
  RETURN_IF_ERROR(inliner.Run(module).status());
  ShardingPropagation propagation;
  RETURN_IF_ERROR(propagation.Run(module).status());
  Partitioner partitioner(module, n, decisions_);
  RETURN_IF_ERROR(partitioner.Run());
  // The inlined callees (shard_map's bodies among them, whose collectives keep their channels)
  // and what the rewrite left unused.
  HloDce dce;
  RETURN_IF_ERROR(dce.Run(module).status());
  return true;
}

}  // namespace xlens

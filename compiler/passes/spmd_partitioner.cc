#include "compiler/passes/spmd_partitioner.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "compiler/hlo/annotation_custom_calls.h"
#include "compiler/hlo/collective_attributes.h"
#include "compiler/passes/call_inliner.h"
#include "compiler/passes/dce.h"
#include "compiler/passes/sharding_propagation.h"
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

std::string Groups(const std::vector<std::vector<int64_t>>& groups) {
  return ReplicaGroupsToString(groups);
}

Shape WithDims(const Shape& shape, const std::vector<int64_t>& dims) {
  Shape s = shape;
  for (size_t i = 0; i < dims.size(); ++i) s.set_dimensions(static_cast<int64_t>(i), dims[i]);
  return s;
}

void DropSharding(HloInstruction* instr) {
  auto& raw = instr->raw_attributes;
  raw.erase(std::remove_if(raw.begin(), raw.end(),
                           [](const RawAttribute& a) { return a.key == "sharding"; }),
            raw.end());
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

class Partitioner {
 public:
  Partitioner(HloModule& module, int64_t n, std::vector<std::string>& decisions)
      : module_(module), n_(n), decisions_(decisions) {}

  Status Run() {
    HloComputation* old = module_.entry_computation();
    auto fresh = std::make_unique<HloComputation>(old->name() + "_spmd");
    comp_ = module_.AddComputation(std::move(fresh), /*is_entry=*/false);
    for (const HloComputation* c : module_.computations()) {
      for (const HloInstruction* i : c->instructions()) {
        if (const std::string* ch = i->raw_attribute("channel_id")) {
          next_channel_ = std::max<int64_t>(next_channel_, std::atoll(ch->c_str()) + 1);
        }
      }
    }
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

  HloInstruction* Add(std::unique_ptr<HloInstruction> instr) {
    return comp_->AddInstruction(std::move(instr));
  }

  StatusOr<HloSharding> ShardingOf(const HloInstruction& instr) {
    const std::string* text = instr.raw_attribute("sharding");
    if (text == nullptr) return HloSharding::Replicated();
    return HloSharding::Parse(*text, instr.name());
  }

  // --- small builders ---
  HloInstruction* ScalarS32(int64_t v) {
    return Add(HloInstruction::CreateConstant(
        Literal::CreateR0<int32_t>(PrimitiveType::S32, static_cast<int32_t>(v))));
  }
  HloInstruction* PartitionId() {
    if (partition_id_ == nullptr) {
      auto pid = std::make_unique<HloInstruction>(HloOpcode::kPartitionId, Shape::Scalar(PrimitiveType::U32));
      HloInstruction* p = Add(std::move(pid));
      partition_id_ = Add(HloInstruction::CreateUnary(HloOpcode::kConvert, Shape::Scalar(PrimitiveType::S32), p));
    }
    return partition_id_;
  }
  // values[partition-id] as an s32 scalar (a constant when every device has the same).
  HloInstruction* PerDevice(const std::vector<int64_t>& values) {
    if (std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == values[0]; })) {
      return ScalarS32(values[0]);
    }
    std::vector<int32_t> v32(values.begin(), values.end());
    HloInstruction* table = Add(HloInstruction::CreateConstant(Literal::CreateR1<int32_t>(PrimitiveType::S32, v32)));
    auto ds = std::make_unique<HloInstruction>(HloOpcode::kDynamicSlice, Shape(PrimitiveType::S32, {1}));
    ds->AppendOperand(table);
    ds->AppendOperand(PartitionId());
    ds->dynamic_slice_sizes_attr = std::vector<int64_t>{1};
    HloInstruction* one = Add(std::move(ds));
    auto r = std::make_unique<HloInstruction>(HloOpcode::kReshape, Shape::Scalar(PrimitiveType::S32));
    r->AppendOperand(one);
    return Add(std::move(r));
  }
  HloInstruction* Zero(PrimitiveType type) {
    Literal lit{Shape::Scalar(type)};
    return Add(HloInstruction::CreateConstant(std::move(lit)));
  }
  HloInstruction* Broadcast(HloInstruction* scalar, const Shape& like) {
    Shape s = like;
    s.set_element_type(scalar->shape().element_type());
    auto b = std::make_unique<HloInstruction>(HloOpcode::kBroadcast, s);
    b->AppendOperand(scalar);
    b->dimensions_attr = std::vector<int64_t>{};
    return Add(std::move(b));
  }
  void SetCollective(HloInstruction* instr, const std::vector<std::vector<int64_t>>& groups) {
    instr->SetRawAttribute("channel_id", std::to_string(next_channel_++));
    instr->SetRawAttribute("replica_groups", Groups(groups));
    instr->SetRawAttribute("use_global_device_ids", "true");
  }
  HloComputation* Reducer(HloComputation* given, PrimitiveType type) {
    if (given != nullptr) return given;
    auto it = adders_.find(type);
    if (it != adders_.end()) return it->second;
    auto c = std::make_unique<HloComputation>(fmt::format("sum.{}", PrimitiveTypeName(type)));
    HloComputation* comp = c.get();
    Shape s = Shape::Scalar(type);
    HloInstruction* a = comp->AddInstruction(HloInstruction::CreateParameter(0, s, "x"));
    HloInstruction* b = comp->AddInstruction(HloInstruction::CreateParameter(1, s, "y"));
    comp->set_root_instruction(comp->AddInstruction(HloInstruction::CreateBinary(HloOpcode::kAdd, s, a, b)));
    HloComputation* added = module_.AddComputationBefore(std::move(c), module_.entry_computation());
    adders_[type] = added;
    return added;
  }
  HloInstruction* AllReduce(HloInstruction* x, const std::vector<std::vector<int64_t>>& groups,
                            HloComputation* reducer) {
    auto ar = std::make_unique<HloInstruction>(HloOpcode::kAllReduce, x->shape());
    ar->AppendOperand(x);
    SetCollective(ar.get(), groups);
    ar->SetCalledComputation("to_apply", Reducer(reducer, x->shape().element_type()));
    return Add(std::move(ar));
  }

  // x with dim `dim` past `global` (padding) replaced by `fill`, for the devices whose piece
  // passes the end.
  HloInstruction* Mask(HloInstruction* x, const Tiling& t, const std::vector<int64_t>& global,
                       const std::vector<int64_t>& dims, HloInstruction* fill) {
    HloInstruction* pred = nullptr;
    for (int64_t d : dims) {
      if (t.tiles[d] == 1 || CeilDiv(global[d], t.tiles[d]) * t.tiles[d] == global[d]) continue;
      Shape is = x->shape();
      is.set_element_type(PrimitiveType::S32);
      auto iota = std::make_unique<HloInstruction>(HloOpcode::kIota, is);
      iota->iota_dimension_attr = d;
      HloInstruction* i = Add(std::move(iota));
      std::vector<int64_t> offsets;
      for (int64_t dev = 0; dev < n_; ++dev) offsets.push_back(t.Offset(global, d, dev));
      HloInstruction* at = Add(HloInstruction::CreateBinary(HloOpcode::kAdd, is, i, Broadcast(PerDevice(offsets), is)));
      Shape ps = x->shape();
      ps.set_element_type(PrimitiveType::PRED);
      auto lt = HloInstruction::CreateBinary(HloOpcode::kCompare, ps, at, Broadcast(ScalarS32(global[d]), is));
      lt->comparison_direction = ComparisonDirection::kLt;
      HloInstruction* p = Add(std::move(lt));
      pred = pred == nullptr ? p : Add(HloInstruction::CreateBinary(HloOpcode::kAnd, ps, pred, p));
    }
    if (pred == nullptr) return x;
    auto sel = std::make_unique<HloInstruction>(HloOpcode::kSelect, x->shape());
    sel->AppendOperand(pred);
    sel->AppendOperand(x);
    sel->AppendOperand(Broadcast(fill, x->shape()));
    return Add(std::move(sel));
  }

  // --- resharding ---
  HloInstruction* Gather(HloInstruction* x, Tiling& cur, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& global, std::string& how) {
    for (int64_t d : dims) {
      if (cur.tiles[d] == 1) continue;
      auto groups = cur.GroupsAlong({d});
      std::vector<int64_t> local = x->shape().dimensions();
      local[d] *= cur.tiles[d];
      auto ag = std::make_unique<HloInstruction>(HloOpcode::kAllGather, WithDims(x->shape(), local));
      ag->AppendOperand(x);
      ag->dimensions_attr = std::vector<int64_t>{d};
      SetCollective(ag.get(), groups);
      x = Add(std::move(ag));
      how += fmt::format("{}all-gather dim {} over {}", how.empty() ? "" : ", ", d, Groups(groups));
      cur = cur.ReplicateDims({d});
      if (local[d] > global[d]) {
        auto sl = std::make_unique<HloInstruction>(HloOpcode::kSlice, WithDims(x->shape(), [&] {
          auto l = local;
          l[d] = global[d];
          return l;
        }()));
        sl->AppendOperand(x);
        sl->has_slice = true;
        sl->slice_starts.assign(local.size(), 0);
        sl->slice_limits = local;
        sl->slice_limits[d] = global[d];
        sl->slice_strides.assign(local.size(), 1);
        x = Add(std::move(sl));
      }
    }
    return x;
  }

  // The dims (from, to) when `to` is `from` with the tiles of one dim moved to another that
  // `from` keeps whole, every device keeping its place (its piece of one dim becomes its piece of
  // the other), both dims divisible: one all-to-all moves it.
  static std::optional<std::pair<int64_t, int64_t>> AllToAllMove(const Tiling& from, const Tiling& to,
                                                                 const std::vector<int64_t>& global) {
    if (from.rep != to.rep) return std::nullopt;
    int64_t i = -1, j = -1;
    for (int64_t d = 0; d < from.rank(); ++d) {
      if (from.tiles[d] == to.tiles[d]) continue;
      if (from.tiles[d] > 1 && to.tiles[d] == 1 && i < 0) {
        i = d;
      } else if (from.tiles[d] == 1 && to.tiles[d] > 1 && j < 0) {
        j = d;
      } else {
        return std::nullopt;
      }
    }
    if (i < 0 || j < 0 || from.tiles[i] != to.tiles[j]) return std::nullopt;
    const int64_t k = from.tiles[i];
    if (global[i] % k != 0 || global[j] % k != 0) return std::nullopt;
    for (int64_t dev : from.devices) {
      std::vector<int64_t> a = from.Coordinates(dev), b = to.Coordinates(dev);
      for (int64_t d = 0; d < from.rank(); ++d) {
        int64_t want = d == j ? a[i] : d == i ? 0 : a[d];
        if (b[d] != want) return std::nullopt;
      }
    }
    return std::make_pair(i, j);
  }

  // Splits dim j into (k, rest), exchanges the k parts among the devices along dim i, and merges
  // the received parts, in their senders' order, in front of dim i.
  HloInstruction* AllToAll(HloInstruction* x, const Tiling& cur, int64_t i, int64_t j, std::string& how) {
    const int64_t k = cur.tiles[i];
    std::vector<int64_t> dims = x->shape().dimensions();
    std::vector<int64_t> split = dims;
    split[j] = dims[j] / k;
    split.insert(split.begin() + j, k);
    auto reshape = [&](HloInstruction* in, const std::vector<int64_t>& to) {
      Shape s(x->shape().element_type(), to);
      auto r = std::make_unique<HloInstruction>(HloOpcode::kReshape, s);
      r->AppendOperand(in);
      return Add(std::move(r));
    };
    HloInstruction* r1 = reshape(x, split);
    auto groups = cur.GroupsAlong({i});
    auto a2a = std::make_unique<HloInstruction>(HloOpcode::kAllToAll, r1->shape());
    a2a->AppendOperand(r1);
    a2a->dimensions_attr = std::vector<int64_t>{j};
    SetCollective(a2a.get(), groups);
    HloInstruction* moved = Add(std::move(a2a));
    // Axis j of `moved` now counts the senders, whose pieces of dim i follow one another.
    const int64_t ii = i < j ? i : i + 1;
    std::vector<int64_t> perm;
    for (int64_t a = 0; a < static_cast<int64_t>(split.size()); ++a) {
      if (a == j) continue;
      if (a == ii) perm.push_back(j);
      perm.push_back(a);
    }
    std::vector<int64_t> tdims;
    for (int64_t a : perm) tdims.push_back(split[a]);
    auto t = std::make_unique<HloInstruction>(HloOpcode::kTranspose, Shape(x->shape().element_type(), tdims));
    t->AppendOperand(moved);
    t->dimensions_attr = perm;
    HloInstruction* transposed = Add(std::move(t));
    std::vector<int64_t> merged = dims;
    merged[i] = dims[i] * k;
    merged[j] = dims[j] / k;
    how += fmt::format("{}all-to-all moving the tiles of dim {} to dim {} over {}", how.empty() ? "" : ", ",
                       i, j, Groups(groups));
    return reshape(transposed, merged);
  }

  HloInstruction* SliceTo(HloInstruction* x, const Tiling& cur, const Tiling& to,
                          const std::vector<int64_t>& global, std::string& how) {
    const size_t rank = global.size();
    std::vector<int64_t> target = to.TileDims(global);
    std::vector<HloInstruction*> starts(rank, nullptr);
    bool any = false;
    PaddingConfig pad;
    bool padded = false;
    for (size_t d = 0; d < rank; ++d) {
      PaddingDimension p;
      if (cur.tiles[d] == 1 && target[d] * to.tiles[d] > x->shape().dimensions(d)) {
        p.edge_padding_high = target[d] * to.tiles[d] - x->shape().dimensions(d);
        padded = true;
      }
      pad.dimensions.push_back(p);
      std::vector<int64_t> offsets;
      for (int64_t dev = 0; dev < n_; ++dev) {
        int64_t off = to.Offset(global, d, dev);
        if (cur.tiles[d] > 1) off -= cur.Offset(global, d, dev);
        offsets.push_back(off);
      }
      bool moves = target[d] != x->shape().dimensions(d) + p.edge_padding_high ||
                   std::any_of(offsets.begin(), offsets.end(), [](int64_t o) { return o != 0; });
      any |= moves;
      starts[d] = moves ? PerDevice(offsets) : nullptr;
    }
    if (!any) return x;
    if (padded) {
      std::vector<int64_t> dims = x->shape().dimensions();
      for (size_t d = 0; d < rank; ++d) dims[d] += pad.dimensions[d].edge_padding_high;
      auto p = std::make_unique<HloInstruction>(HloOpcode::kPad, WithDims(x->shape(), dims));
      p->AppendOperand(x);
      p->AppendOperand(Zero(x->shape().element_type()));
      p->padding_config = pad;
      x = Add(std::move(p));
    }
    auto ds = std::make_unique<HloInstruction>(HloOpcode::kDynamicSlice, WithDims(x->shape(), target));
    ds->AppendOperand(x);
    for (size_t d = 0; d < rank; ++d) ds->AppendOperand(starts[d] ? starts[d] : ScalarS32(0));
    ds->dynamic_slice_sizes_attr = target;
    how += fmt::format("{}dynamic-slice by partition-id", how.empty() ? "" : ", ");
    return Add(std::move(ds));
  }

  HloInstruction* Reshard(const Piece& v, const Tiling& to, const std::vector<int64_t>& global,
                          const std::string& what) {
    if (v.manual || v.tiling == to || global.empty()) return v.hlo;
    Tiling cur = v.tiling;
    HloInstruction* x = v.hlo;
    std::string how;
    if (auto move = AllToAllMove(cur, to, global)) {
      x = AllToAll(x, cur, move->first, move->second, how);
      cur = to;
    }
    if (!SliceSuffices(cur, to, global)) {
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < cur.rank(); ++d) {
        if (cur.tiles[d] > 1 && cur.tiles[d] != to.tiles[d]) dims.push_back(d);
      }
      x = Gather(x, cur, dims, global, how);
      if (!SliceSuffices(cur, to, global)) {
        dims.clear();
        for (int64_t d = 0; d < cur.rank(); ++d) dims.push_back(d);
        x = Gather(x, cur, dims, global, how);
      }
    }
    x = SliceTo(x, cur, to, global, how);
    if (!how.empty()) {
      decisions_.push_back(fmt::format("  reshard {} from {} to {}: {}", what, v.tiling.ToString(),
                                       to.ToString(), how));
    }
    return x;
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
      if (sharding.IsManual()) {
        p.manual = true;
        p.hlo = Add(instr.CloneWithNewOperands(instr.shape(), {}));
      } else {
        if (!instr.shape().IsArray()) return Error("tuple-shaped entry parameters are not partitioned yet");
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
      ASSIGN_OR_RETURN(std::vector<HloSharding> in, ShardyValueShardings(instr, meshes, "xla.sdy.in_shardings"));
      if (in.size() != 1 || instr.operand_count() != 1) {
        return Error("a shard_map of several values (xla.sdy.GlobalToLocalShape) is not partitioned yet");
      }
      const HloInstruction* op = instr.operand(0);
      ASSIGN_OR_RETURN(Tiling t, Tiling::FromSharding(in[0], op->shape().rank(), n_));
      pieces_[op] = Piece{ReshardOperand(*op, t), t, false, {}};
    }
    if (target == "SPMDFullToShardShape" || target == "xla.sdy.GlobalToLocalShape") {
      const Piece& in = pieces_.at(instr.operand(0));
      if (in.hlo->shape().dimensions() != instr.shape().dimensions()) {
        return Error(fmt::format("{}'s pieces are {}, its result {}", target,
                                 in.hlo->shape().ToString(), instr.shape().ToString()));
      }
      pieces_[&instr] = Piece{Add(HloInstruction::CreateUnary(HloOpcode::kCopy, in.hlo->shape(), in.hlo)), {}, true, {}};
      decisions_.push_back(fmt::format("%{}: enters manual code with the pieces of {}", instr.name(),
                                       in.tiling.ToString()));
      return OkStatus();
    }
    if (target == "SPMDShardToFullShape" || target == "xla.sdy.LocalToGlobalShape") {
      ASSIGN_OR_RETURN(Tiling t, Tiling::FromSharding(sharding, instr.shape().rank(), n_));
      HloInstruction* in = pieces_.at(instr.operand(0)).hlo;
      if (in->shape().dimensions() != t.TileDims(instr.shape().dimensions())) {
        return Error(fmt::format("{}'s operand {} is not a piece of {} under {}", target,
                                 in->shape().ToString(), instr.shape().ToString(), t.ToString()));
      }
      pieces_[&instr] = Piece{Add(HloInstruction::CreateUnary(HloOpcode::kCopy, in->shape(), in)), t, false, {}};
      decisions_.push_back(fmt::format("%{}: leaves manual code as the pieces of {}", instr.name(), t.ToString()));
      return OkStatus();
    }
    if (sharding.IsManual()) {
      std::vector<HloInstruction*> ops;
      for (const HloInstruction* op : instr.operands()) ops.push_back(pieces_.at(op).hlo);
      HloInstruction* c = Add(instr.CloneWithNewOperands(instr.shape(), ops));
      pieces_[&instr] = Piece{c, {}, true, {}};
      return OkStatus();
    }
    if (instr.opcode() == HloOpcode::kTuple && sharding.IsTuple()) return RewriteTuple(instr, sharding);
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
    if (instr.opcode() == HloOpcode::kReduce && instr.operand_count() == 2) return RewriteReduce(instr, want);
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
    HloInstruction* x = Mask(in.hlo, in.tiling, global, cut, init);
    Tiling result = ForwardThroughMap(instr, 0, in.tiling, *OpDimMap(instr, 0));
    auto c = instr.CloneWithNewOperands(WithDims(instr.shape(), result.TileDims(instr.shape().dimensions())), {x, init});
    DropSharding(c.get());
    HloInstruction* r = Add(std::move(c));
    if (!cut.empty()) {
      auto groups = in.tiling.GroupsAlong(cut);
      r = AllReduce(r, groups, instr.to_apply());
      decisions_.push_back(fmt::format("%{}: reduce of pieces of {} over tiled dims, then all-reduce over {}",
                                       instr.name(), in.tiling.ToString(), Groups(groups)));
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
      lp = Mask(lp, space.Lhs(s), lhs->shape().dimensions(), lhs_cut, Zero(lhs->shape().element_type()));
      rp = Mask(rp, space.Rhs(s), rhs->shape().dimensions(), rhs_cut, Zero(rhs->shape().element_type()));
    }
    Tiling result = space.Result(s);
    auto c = instr.CloneWithNewOperands(WithDims(instr.shape(), result.TileDims(instr.shape().dimensions())), {lp, rp});
    DropSharding(c.get());
    HloInstruction* d = Add(std::move(c));
    std::string note = fmt::format("%{}: dot laid out by {} (space {}), pieces {} x {}", instr.name(),
                                   candidates[best].first, s.ToString(), lp->shape().ToString(),
                                   rp->shape().ToString());
    if (!cut_axes.empty()) {
      auto groups = s.GroupsAlong(cut_axes);
      d = AllReduce(d, groups, nullptr);
      note += fmt::format(", contracting dims tiled: all-reduce of partial sums over {}", Groups(groups));
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
  HloInstruction* partition_id_ = nullptr;
  int64_t next_channel_ = 1;
  std::map<const HloInstruction*, Piece> pieces_;
  std::map<PrimitiveType, HloComputation*> adders_;
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

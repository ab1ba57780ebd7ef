#include "compiler/passes/spmd_reshard.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/passes/hlo_creation_utils.h"

namespace xlens {

namespace {



// The dims (from, to) when `to` is `from` with the tiles of one dim moved to another that
// `from` keeps whole, every device keeping its place (its piece of one dim becomes its piece of
// the other), both dims divisible: one all-to-all moves it.
std::optional<std::pair<int64_t, int64_t>> AllToAllMove(const Tiling& from, const Tiling& to,
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

}  // namespace

// Replica groups as XLA prints them now: the iota form (`[2,2]<=[4]`, each row a group) where one
// gives them, the list otherwise.
std::string ReplicaGroupsText(const std::vector<std::vector<int64_t>>& groups) {
  std::vector<int64_t> flat;
  for (const auto& g : groups) {
    if (g.size() != groups[0].size()) return ReplicaGroupsToString(groups);
    flat.insert(flat.end(), g.begin(), g.end());
  }
  const std::vector<int64_t> dims = {static_cast<int64_t>(groups.size()),
                                     static_cast<int64_t>(groups[0].size())};
  if (auto iota = IotaTileAssignment(dims, flat)) return iota->ToString();
  return ReplicaGroupsToString(groups);
}

Shape WithDims(const Shape& shape, const std::vector<int64_t>& dims) {
  Shape s = shape;
  for (size_t i = 0; i < dims.size(); ++i) s.set_dimensions(static_cast<int64_t>(i), dims[i]);
  return s;
}

SpmdBuilder::SpmdBuilder(HloModule& module, HloComputation* computation, int64_t n,
                         std::vector<std::string>& decisions)
    : module_(module), comp_(computation), n_(n), decisions_(decisions) {
  for (const RawAttribute& a : module_.header_attributes()) {
    if (a.key == "replica_count") num_replicas_ = std::max<int64_t>(1, std::atoll(a.value.c_str()));
  }
  for (const HloComputation* c : module_.computations()) {
    for (const HloInstruction* i : c->instructions()) {
      if (const std::string* ch = i->raw_attribute("channel_id")) {
        next_channel_ = std::max<int64_t>(next_channel_, std::atoll(ch->c_str()) + 1);
      }
    }
  }
}

HloInstruction* SpmdBuilder::Add(std::unique_ptr<HloInstruction> instruction) {
  return comp_->AddInstruction(std::move(instruction));
}

HloInstruction* SpmdBuilder::ScalarS32(int64_t v) {
  return Add(HloInstruction::CreateConstant(
      Literal::CreateR0<int32_t>(PrimitiveType::S32, static_cast<int32_t>(v))));
}
HloInstruction* SpmdBuilder::PartitionId() {
  if (partition_id_ == nullptr) {
    auto pid = std::make_unique<HloInstruction>(HloOpcode::kPartitionId, Shape::Scalar(PrimitiveType::U32));
    HloInstruction* p = Add(std::move(pid));
    partition_id_ = Add(
        HloInstruction::CreateUnary(HloOpcode::kConvert, Shape::Scalar(PrimitiveType::S32), p));
  }
  return partition_id_;
}
// values[partition-id] as an s32 scalar (a constant when every device has the same).
HloInstruction* SpmdBuilder::PerDevice(const std::vector<int64_t>& values) {
  if (std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == values[0]; })) {
    return ScalarS32(values[0]);
  }
  std::vector<int32_t> v32(values.begin(), values.end());
  HloInstruction* table =
      Add(HloInstruction::CreateConstant(Literal::CreateR1<int32_t>(PrimitiveType::S32, v32)));
  auto ds = std::make_unique<HloInstruction>(HloOpcode::kDynamicSlice, Shape(PrimitiveType::S32, {1}));
  ds->AppendOperand(table);
  ds->AppendOperand(PartitionId());
  ds->dynamic_slice_sizes_attr = std::vector<int64_t>{1};
  HloInstruction* one = Add(std::move(ds));
  auto r = std::make_unique<HloInstruction>(HloOpcode::kReshape, Shape::Scalar(PrimitiveType::S32));
  r->AppendOperand(one);
  return Add(std::move(r));
}
HloInstruction* SpmdBuilder::Zero(PrimitiveType type) {
  Literal lit{Shape::Scalar(type)};
  return Add(HloInstruction::CreateConstant(std::move(lit)));
}
HloInstruction* SpmdBuilder::Broadcast(HloInstruction* scalar, const Shape& like) {
  Shape s = like;
  s.set_element_type(scalar->shape().element_type());
  return Add(CreateBroadcast(std::move(s), scalar, {}));
}
void SpmdBuilder::SetCollective(HloInstruction* instr,
                                const std::vector<std::vector<int64_t>>& groups) {
  instr->SetRawAttribute("channel_id", std::to_string(next_channel_++));
  if (instr->opcode() == HloOpcode::kAllToAll) {
    // With a channel and no use_global_device_ids an all-to-all meets across partitions only, in
    // every replica: the groups are partition ids.
    instr->SetRawAttribute("replica_groups", ReplicaGroupsText(groups));
    return;
  }
  // all-reduce, all-gather and reduce-scatter without use_global_device_ids would meet across
  // replicas too; XLA's partitioner gives them global device ids, each group once per replica.
  std::vector<std::vector<int64_t>> global;
  for (int64_t r = 0; r < num_replicas_; ++r) {
    for (const auto& group : groups) {
      std::vector<int64_t> ids;
      for (int64_t p : group) ids.push_back(r * n_ + p);
      global.push_back(std::move(ids));
    }
  }
  instr->SetRawAttribute("replica_groups", ReplicaGroupsText(global));
  instr->SetRawAttribute("use_global_device_ids", "true");
}
HloComputation* SpmdBuilder::Reducer(HloComputation* given, PrimitiveType type) {
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
HloInstruction* SpmdBuilder::AllReduce(HloInstruction* x, const std::vector<std::vector<int64_t>>& groups,
                          HloComputation* reducer) {
  auto ar = std::make_unique<HloInstruction>(HloOpcode::kAllReduce, x->shape());
  ar->AppendOperand(x);
  SetCollective(ar.get(), groups);
  ar->SetCalledComputation("to_apply", Reducer(reducer, x->shape().element_type()));
  return Add(std::move(ar));
}

// x with dim `dim` past `global` (padding) replaced by `fill`, for the devices whose piece
// passes the end.
std::optional<int64_t> SpmdBuilder::ScatterDim(const Tiling& from, const Tiling& to,
                                               const std::vector<std::vector<int64_t>>& groups,
                                               const std::vector<int64_t>& global) const {
  if (groups.empty() || groups[0].size() < 2) return std::nullopt;
  const int64_t k = static_cast<int64_t>(groups[0].size());
  std::optional<int64_t> dim;
  for (int64_t d = 0; d < from.rank(); ++d) {
    if (from.tiles[d] == to.tiles[d]) continue;
    if (dim || from.tiles[d] != 1 || to.tiles[d] != k || global[d] % k != 0) return std::nullopt;
    dim = d;
  }
  if (!dim) return std::nullopt;
  for (const auto& group : groups) {
    for (int64_t r = 0; r < static_cast<int64_t>(group.size()); ++r) {
      std::vector<int64_t> a = from.Coordinates(group[r]), b = to.Coordinates(group[r]);
      for (int64_t d = 0; d < from.rank(); ++d) {
        if (b[d] != (d == *dim ? r : a[d])) return std::nullopt;
      }
    }
  }
  return dim;
}

HloInstruction* SpmdBuilder::ReduceScatter(HloInstruction* x, int64_t dim,
                                           const std::vector<std::vector<int64_t>>& groups) {
  std::vector<int64_t> dims = x->shape().dimensions();
  dims[dim] /= static_cast<int64_t>(groups[0].size());
  auto rs = std::make_unique<HloInstruction>(HloOpcode::kReduceScatter, WithDims(x->shape(), dims));
  rs->AppendOperand(x);
  rs->dimensions_attr = std::vector<int64_t>{dim};
  SetCollective(rs.get(), groups);
  rs->SetCalledComputation("to_apply", Reducer(nullptr, x->shape().element_type()));
  return Add(std::move(rs));
}

HloInstruction* SpmdBuilder::Mask(HloInstruction* x, const Tiling& t, const std::vector<int64_t>& global,
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
    HloInstruction* at = Add(
        HloInstruction::CreateBinary(HloOpcode::kAdd, is, i, Broadcast(PerDevice(offsets), is)));
    Shape ps = x->shape();
    ps.set_element_type(PrimitiveType::PRED);
    auto lt = HloInstruction::CreateBinary(HloOpcode::kCompare, ps, at, Broadcast(ScalarS32(global[d]), is));
    lt->comparison_direction = ComparisonDirection::kLt;
    HloInstruction* p = Add(std::move(lt));
    pred = pred == nullptr ? p : Add(HloInstruction::CreateBinary(HloOpcode::kAnd, ps, pred, p));
  }
  if (pred == nullptr) return x;
  return Add(CreateSelect(pred, x, Broadcast(fill, x->shape())));
}

// --- resharding ---
HloInstruction* SpmdBuilder::Gather(HloInstruction* x, Tiling& cur, const std::vector<int64_t>& dims,
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
    how += fmt::format("{}all-gather dim {} over {}", how.empty() ? "" : ", ", d,
                       ReplicaGroupsText(groups));
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


// Splits dim j into (k, rest), exchanges the k parts among the devices along dim i, and merges
// the received parts, in their senders' order, in front of dim i.
HloInstruction* SpmdBuilder::AllToAll(HloInstruction* x, const Tiling& cur, int64_t i, int64_t j,
                                      std::string& how) {
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
                     i, j, ReplicaGroupsText(groups));
  return reshape(transposed, merged);
}

HloInstruction* SpmdBuilder::SliceTo(HloInstruction* x, const Tiling& cur, const Tiling& to,
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


HloInstruction* SpmdBuilder::Reshard(HloInstruction* x, const Tiling& from, const Tiling& to,
                                   const std::vector<int64_t>& global, const std::string& what) {
  if (from == to || global.empty()) return x;
  Tiling cur = from;
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
    decisions_.push_back(fmt::format("  reshard {} from {} to {}: {}", what, from.ToString(),
                                     to.ToString(), how));
  }
  return x;
}

}  // namespace xlens

namespace xlens {

HloInstruction* SpmdBuilder::Slice(HloInstruction* x, int64_t dim, int64_t lo, int64_t hi) {
  std::vector<int64_t> dims = x->shape().dimensions();
  dims[dim] = hi - lo;
  auto slice = std::make_unique<HloInstruction>(HloOpcode::kSlice, WithDims(x->shape(), dims));
  slice->AppendOperand(x);
  slice->slice_starts.assign(dims.size(), 0);
  slice->slice_limits = x->shape().dimensions();
  slice->slice_strides.assign(dims.size(), 1);
  slice->has_slice = true;
  slice->slice_starts[dim] = lo;
  slice->slice_limits[dim] = hi;
  return Add(std::move(slice));
}

// Every device receives `x` from the device whose tile index along `dim` is `shift` more (the
// same elsewhere); the ends receive zeros.
HloInstruction* SpmdBuilder::Permute(HloInstruction* x, const Tiling& t, int64_t dim, int64_t shift) {
  std::string pairs;
  for (int64_t dev = 0; dev < n_; ++dev) {
    std::vector<int64_t> at = t.Coordinates(dev);
    at[dim] += shift;
    if (at[dim] < 0 || at[dim] >= t.tiles[dim]) continue;
    int64_t flat = 0;
    for (int64_t d = 0; d < t.rank(); ++d) flat = flat * t.tiles[d] + at[d];
    flat = flat * t.rep + at[t.rank()];
    pairs += fmt::format("{}{{{},{}}}", pairs.empty() ? "" : ",", t.devices[flat], dev);
  }
  auto cp = std::make_unique<HloInstruction>(HloOpcode::kCollectivePermute, x->shape());
  cp->AppendOperand(x);
  cp->SetRawAttribute("channel_id", std::to_string(next_channel_++));
  cp->SetRawAttribute("source_target_pairs", "{" + pairs + "}");
  return Add(std::move(cp));
}

HloInstruction* SpmdBuilder::Window(HloInstruction* x, const Tiling& t, const std::vector<int64_t>& global,
                                    int64_t dim, int64_t start, int64_t step, int64_t size,
                                    HloInstruction* fill, const std::string& what) {
  const int64_t k = t.tiles[dim];
  const int64_t piece = x->shape().dimensions(dim);
  // Where each device's window starts, from the start of its own piece.
  std::vector<int64_t> tile_of(n_), rel(n_);
  int64_t lo = 0, hi = 0;
  for (int64_t dev = 0; dev < n_; ++dev) {
    tile_of[dev] = t.Coordinates(dev)[dim];
    rel[dev] = start + tile_of[dev] * (step - piece);
    lo = std::min(lo, rel[dev]);
    hi = std::max(hi, rel[dev] + size);
  }
  const int64_t left = -lo, right = std::max<int64_t>(0, hi - piece);
  std::string how;
  std::vector<int64_t> first(n_);  // the global row of each device's first row of `ext`
  HloInstruction* ext = nullptr;
  int64_t ext_left = 0;
  if (k > 1 && left <= piece && right <= piece) {
    std::vector<HloInstruction*> parts;
    if (left > 0) {
      parts.push_back(Permute(Slice(x, dim, piece - left, piece), t, dim, -1));
      how += fmt::format("collective-permute of {} row{} from the left", left, left == 1 ? "" : "s");
    }
    parts.push_back(x);
    if (right > 0) {
      parts.push_back(Permute(Slice(x, dim, 0, right), t, dim, 1));
      how += fmt::format("{}collective-permute of {} row{} from the right", how.empty() ? "" : ", ", right,
                         right == 1 ? "" : "s");
    }
    ext = x;
    if (parts.size() > 1) {
      std::vector<int64_t> dims = x->shape().dimensions();
      dims[dim] = left + piece + right;
      auto cat = std::make_unique<HloInstruction>(HloOpcode::kConcatenate, WithDims(x->shape(), dims));
      for (HloInstruction* part : parts) cat->AppendOperand(part);
      cat->dimensions_attr = std::vector<int64_t>{dim};
      ext = Add(std::move(cat));
    }
    ext_left = left;
    for (int64_t dev = 0; dev < n_; ++dev) first[dev] = tile_of[dev] * piece - left;
  } else {
    // Too far for the neighbours: the whole dim on every device.
    Tiling whole = t.ReplicateDims({dim});
    ext = Reshard(x, t, whole, global, what);
    how = k > 1 ? "the dim gathered" : "";
    for (int64_t dev = 0; dev < n_; ++dev) {
      rel[dev] = start + tile_of[dev] * step;
      first[dev] = 0;
    }
    // Room for windows that start before the first row or end past the last.
    int64_t before = 0, after = 0;
    for (int64_t dev = 0; dev < n_; ++dev) {
      before = std::max(before, -rel[dev]);
      after = std::max(after, rel[dev] + size - ext->shape().dimensions(dim));
    }
    if (before > 0 || after > 0) {
      PaddingConfig pad;
      pad.dimensions.resize(x->shape().rank());
      pad.dimensions[dim].edge_padding_low = before;
      pad.dimensions[dim].edge_padding_high = after;
      std::vector<int64_t> dims = ext->shape().dimensions();
      dims[dim] += before + after;
      auto p = std::make_unique<HloInstruction>(HloOpcode::kPad, WithDims(x->shape(), dims));
      p->AppendOperand(ext);
      p->AppendOperand(fill);
      p->padding_config = pad;
      ext = Add(std::move(p));
      for (int64_t dev = 0; dev < n_; ++dev) first[dev] = -before;
    }
    ext_left = -first[0];
  }
  // Rows outside the value (before it, past its end, a short last piece's padding) read `fill`.
  Shape is = ext->shape();
  is.set_element_type(PrimitiveType::S32);
  auto iota = std::make_unique<HloInstruction>(HloOpcode::kIota, is);
  iota->iota_dimension_attr = dim;
  HloInstruction* row = Add(HloInstruction::CreateBinary(HloOpcode::kAdd, is, Add(std::move(iota)),
                                                         Broadcast(PerDevice(first), is)));
  Shape ps = ext->shape();
  ps.set_element_type(PrimitiveType::PRED);
  auto ge = HloInstruction::CreateBinary(HloOpcode::kCompare, ps, row, Broadcast(ScalarS32(0), is));
  ge->comparison_direction = ComparisonDirection::kGe;
  auto lt = HloInstruction::CreateBinary(HloOpcode::kCompare, ps, row, Broadcast(ScalarS32(global[dim]), is));
  lt->comparison_direction = ComparisonDirection::kLt;
  HloInstruction* inside = Add(HloInstruction::CreateBinary(HloOpcode::kAnd, ps, Add(std::move(ge)), Add(std::move(lt))));
  ext = Add(CreateSelect(inside, ext, Broadcast(fill, ext->shape())));
  // Each device's window.
  std::vector<int64_t> at(n_);
  for (int64_t dev = 0; dev < n_; ++dev) at[dev] = rel[dev] + ext_left;
  std::vector<int64_t> dims = ext->shape().dimensions();
  dims[dim] = size;
  auto ds = std::make_unique<HloInstruction>(HloOpcode::kDynamicSlice, WithDims(ext->shape(), dims));
  ds->AppendOperand(ext);
  for (int64_t d = 0; d < ext->shape().rank(); ++d) ds->AppendOperand(d == dim ? PerDevice(at) : ScalarS32(0));
  ds->dynamic_slice_sizes_attr = dims;
  decisions_.push_back(fmt::format("  window of {} row{} of {} along dim {}: {}", size, size == 1 ? "" : "s", what, dim,
                                   how.empty() ? "its own rows" : how));
  return Add(std::move(ds));
}

}  // namespace xlens

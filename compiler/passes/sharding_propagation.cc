#include "compiler/passes/sharding_propagation.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "compiler/hlo/annotation_custom_calls.h"
#include "compiler/hlo/shardy_shardings.h"

namespace xlens {

namespace {

// A reshape's map, and per result dim the size a tile count must divide for the map to hold
// (0: the dim is kept whole). Dims are grouped into the smallest runs of equal element counts;
// in each run the major result dim follows the major operand dim.
struct ReshapeMap {
  std::vector<int64_t> map;
  std::vector<int64_t> divide;
};

ReshapeMap ReshapeDims(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  ReshapeMap r{std::vector<int64_t>(out.size(), -1), std::vector<int64_t>(out.size(), 0)};
  size_t i = 0, o = 0;
  while (i < in.size() && o < out.size()) {
    size_t i1 = i + 1, o1 = o + 1;
    int64_t pi = in[i], po = out[o];
    while (pi != po) {
      if (pi < po) {
        if (i1 >= in.size()) return r;
        pi *= in[i1++];
      } else {
        if (o1 >= out.size()) return r;
        po *= out[o1++];
      }
    }
    // Dims of size 1 in a run (a squeeze's or an expand's) carry nothing: the run's major dims
    // are its first ones of more than one element.
    size_t im = i, om = o;
    while (im + 1 < i1 && in[im] == 1) ++im;
    while (om + 1 < o1 && out[om] == 1) ++om;
    const auto sized = [](const std::vector<int64_t>& dims, size_t a, size_t b) {
      return std::count_if(dims.begin() + a, dims.begin() + b, [](int64_t d) { return d > 1; });
    };
    if (sized(in, i, i1) <= 1 && sized(out, o, o1) <= 1) {
      r.map[om] = static_cast<int64_t>(im);
    } else if (pi > 1) {
      r.map[om] = static_cast<int64_t>(im);
      // A split cuts the major result dim; a merge cuts the major operand dim.
      r.divide[om] = std::min(in[im], out[om]);
    }
    i = i1;
    o = o1;
  }
  return r;
}

}  // namespace

std::vector<bool> WindowedDims(const HloInstruction& instr) {
  const Shape& out = instr.shape();
  std::vector<bool> windowed(out.IsArray() ? out.rank() : 0, false);
  if (!out.IsArray()) return windowed;
  switch (instr.opcode()) {
    case HloOpcode::kSlice:
      for (int64_t d = 0; d < out.rank(); ++d) windowed[d] = instr.slice_strides[d] == 1;
      break;
    case HloOpcode::kPad:
      if (!instr.padding_config) break;
      for (int64_t d = 0; d < out.rank(); ++d) {
        windowed[d] = instr.padding_config->dimensions[d].interior_padding == 0;
      }
      break;
    case HloOpcode::kConcatenate:
      for (int64_t d : instr.dimensions()) windowed[d] = true;
      break;
    default:
      break;
  }
  return windowed;
}

namespace {

bool CutsDims(HloOpcode op) {
  switch (op) {
    case HloOpcode::kSlice: case HloOpcode::kPad: case HloOpcode::kConcatenate:
    case HloOpcode::kReverse: case HloOpcode::kDynamicSlice: case HloOpcode::kDynamicUpdateSlice:
      return true;
    default:
      return false;
  }
}

// The dims a slice-like op changes and needs whole. A slice of stride 1, an edge pad and a
// concatenation keep their dims cut: each device's piece is a window of the operand's rows, which
// the partitioner brings from the neighbours (WindowedDims).
std::vector<bool> CutDims(const HloInstruction& instr) {
  const Shape& out = instr.shape();
  std::vector<bool> cut(out.rank(), false);
  const Shape& in = instr.operand(0)->shape();
  const std::vector<bool> windowed = WindowedDims(instr);
  for (int64_t d = 0; d < out.rank(); ++d) {
    if (in.dimensions(d) != out.dimensions(d) && !windowed[d]) cut[d] = true;
  }
  if (instr.opcode() == HloOpcode::kReverse) {
    for (int64_t d : instr.dimensions()) cut[d] = true;
  }
  if (instr.opcode() == HloOpcode::kSlice) {
    for (int64_t d = 0; d < out.rank(); ++d) {
      if (!windowed[d] && (instr.slice_starts[d] != 0 || instr.slice_strides[d] != 1)) cut[d] = true;
    }
  }
  if (instr.opcode() == HloOpcode::kPad && instr.padding_config) {
    for (int64_t d = 0; d < out.rank(); ++d) {
      const auto& p = instr.padding_config->dimensions[d];
      if (!windowed[d] && (p.edge_padding_low != 0 || p.edge_padding_high != 0 || p.interior_padding != 0)) {
        cut[d] = true;
      }
    }
  }
  if (instr.opcode() == HloOpcode::kDynamicUpdateSlice) {
    const Shape& update = instr.operand(1)->shape();
    for (int64_t d = 0; d < out.rank(); ++d) {
      if (update.dimensions(d) != out.dimensions(d)) cut[d] = true;
    }
  }
  return cut;
}

bool IsIdentityLike(const HloInstruction& instr) {
  return instr.opcode() == HloOpcode::kCopy || IsAnnotationCustomCall(instr) ||
         instr.opcode() == HloOpcode::kOptimizationBarrier;
}

// Dims of a reshape whose tiles break the map are dropped from it.
std::vector<int64_t> FitReshape(const HloInstruction& instr, const std::vector<int64_t>& map,
                                const std::vector<int64_t>& operand_tiles,
                                const std::vector<int64_t>& result_tiles) {
  if (instr.opcode() != HloOpcode::kReshape) return map;
  ReshapeMap r = ReshapeDims(instr.operand(0)->shape().dimensions(), instr.shape().dimensions());
  std::vector<int64_t> out = map;
  for (size_t o = 0; o < out.size(); ++o) {
    if (out[o] < 0 || r.divide[o] == 0) continue;
    int64_t t = operand_tiles.empty() ? result_tiles[o] : operand_tiles[out[o]];
    if (r.divide[o] % t != 0) out[o] = -1;
  }
  return out;
}

}  // namespace

StatusOr<std::vector<HloSharding>> ShardyValueShardings(const HloInstruction& instruction,
                                                        const ShardyMeshes& meshes,
                                                        std::string_view key) {
  const std::string* attributes = instruction.raw_attribute("frontend_attributes");
  if (attributes == nullptr) return std::vector<HloSharding>{};
  ASSIGN_OR_RETURN(std::optional<std::string> text, FrontendAttribute(*attributes, key));
  if (!text) return std::vector<HloSharding>{};
  return ShardingsFromShardyPerValue(*text, meshes, instruction.name());
}

int64_t ModuleNumPartitions(const HloModule& module) {
  for (const RawAttribute& a : module.header_attributes()) {
    if (a.key == "num_partitions") return std::max<int64_t>(1, std::atoll(a.value.c_str()));
  }
  return 1;
}

StatusOr<std::optional<HloSharding>> StatedSharding(const HloInstruction& instruction,
                                                    const HloModule& module) {
  if (const std::string* text = instruction.raw_attribute("sharding")) {
    ASSIGN_OR_RETURN(HloSharding s, HloSharding::Parse(*text, instruction.name()));
    return std::optional<HloSharding>(std::move(s));
  }
  ASSIGN_OR_RETURN(ShardyMeshes meshes, ModuleShardyMeshes(module));
  if (meshes.empty()) return std::optional<HloSharding>();
  // Shardy's shard_map: the value enters manual code, and leaves it sharded as out_shardings say.
  const std::string target = instruction.custom_call_target.value_or("");
  if (target == "xla.sdy.GlobalToLocalShape") return std::optional<HloSharding>(HloSharding::Manual());
  if (target == "xla.sdy.LocalToGlobalShape") {
    ASSIGN_OR_RETURN(std::vector<HloSharding> out,
                     ShardyValueShardings(instruction, meshes, "xla.sdy.out_shardings"));
    if (out.size() == 1) return std::optional<HloSharding>(out[0]);
  }
  ASSIGN_OR_RETURN(std::vector<HloSharding> shardy, InstructionShardySharding(instruction, meshes));
  if (shardy.empty()) return std::optional<HloSharding>();
  if (shardy.size() == 1) return std::optional<HloSharding>(shardy[0]);
  return std::optional<HloSharding>(HloSharding::Tuple(std::move(shardy)));
}

std::optional<std::vector<int64_t>> OpDimMap(const HloInstruction& instr, int64_t operand) {
  const Shape& out = instr.shape();
  if (!out.IsArray()) return std::nullopt;
  const Shape& in = instr.operand(operand)->shape();
  if (!in.IsArray()) return std::nullopt;
  std::vector<int64_t> identity(out.rank());
  for (int64_t d = 0; d < out.rank(); ++d) identity[d] = d;
  if (instr.IsElementwise() || IsIdentityLike(instr)) {
    if (in.rank() != out.rank()) return std::vector<int64_t>(out.rank(), -1);
    return identity;
  }
  switch (instr.opcode()) {
    case HloOpcode::kBroadcast: {
      std::vector<int64_t> map(out.rank(), -1);
      for (size_t j = 0; j < instr.dimensions().size(); ++j) map[instr.dimensions()[j]] = j;
      return map;
    }
    case HloOpcode::kTranspose:
      return instr.dimensions();
    case HloOpcode::kReduceWindow: {
      // Dims the window does not span (size 1, stride 1, no padding or dilation) pass through:
      // a pooling over the image keeps its batch and channels cut. Variadic forms are whole.
      if (instr.operand_count() != 2 || !instr.window || operand != 0) {
        return operand == 1 ? std::optional<std::vector<int64_t>>(std::vector<int64_t>(out.rank(), -1))
                            : std::nullopt;
      }
      std::vector<int64_t> map(out.rank(), -1);
      for (int64_t d = 0; d < out.rank(); ++d) {
        const WindowDimension& w = instr.window->dimensions[d];
        if (w.size == 1 && w.stride == 1 && w.padding_low == 0 && w.padding_high == 0 &&
            w.window_dilation == 1 && w.base_dilation == 1) {
          map[d] = d;
        }
      }
      return map;
    }
    case HloOpcode::kGather: {
      // Indices split along their batch dims give the rows of the result they gather (XLA's
      // index-parallel gather). Batching dims of the table are not split.
      if (!instr.gather_dimension_numbers || operand > 1) return std::nullopt;
      const GatherDimensionNumbers& dn = *instr.gather_dimension_numbers;
      if (!dn.operand_batching_dims.empty()) return std::nullopt;
      std::vector<int64_t> map(out.rank(), -1);
      if (operand == 0) {
        // The table's dims a slice takes whole and no index moves in pass through to the offset
        // dims (an embedding table cut by its hidden dim gathers its own columns).
        auto has = [](const std::vector<int64_t>& v, int64_t d) {
          return std::find(v.begin(), v.end(), d) != v.end();
        };
        const auto& sizes = instr.slice_sizes_attr;
        size_t k = 0;
        for (int64_t d = 0; d < in.rank() && sizes; ++d) {
          if (has(dn.collapsed_slice_dims, d)) continue;
          if (k >= dn.offset_dims.size()) break;
          if (!has(dn.start_index_map, d) && (*sizes)[d] == in.dimensions(d)) {
            map[dn.offset_dims[k]] = d;
          }
          ++k;
        }
        return map;
      }
      int64_t index_dim = 0;
      for (int64_t o = 0; o < out.rank(); ++o) {
        if (std::find(dn.offset_dims.begin(), dn.offset_dims.end(), o) != dn.offset_dims.end()) continue;
        if (index_dim == dn.index_vector_dim) ++index_dim;
        map[o] = index_dim++;
      }
      return map;
    }
    case HloOpcode::kConvolution: {
      // Images split by batch, kernels by output feature; the windowed and the summed dims
      // stay whole. Grouped convolutions are replicated.
      if (instr.feature_group_count() != 1 || instr.batch_group_count() != 1 ||
          !instr.convolution_dimension_numbers || operand > 1) {
        return std::nullopt;
      }
      const ConvolutionDimensionNumbers& dn = *instr.convolution_dimension_numbers;
      std::vector<int64_t> map(out.rank(), -1);
      if (operand == 0) {
        map[dn.output_batch_dimension] = dn.input_batch_dimension;
        // A spatial dim the window does not span (a 1x1 convolution's) passes through too.
        for (size_t i = 0; i < dn.input_spatial_dimensions.size() && instr.window; ++i) {
          const WindowDimension& w = instr.window->dimensions[i];
          if (w.size == 1 && w.stride == 1 && w.padding_low == 0 && w.padding_high == 0 &&
              w.window_dilation == 1 && w.base_dilation == 1) {
            map[dn.output_spatial_dimensions[i]] = dn.input_spatial_dimensions[i];
          }
        }
      } else {
        map[dn.output_feature_dimension] = dn.kernel_output_feature_dimension;
      }
      return map;
    }
    case HloOpcode::kScatter:
      // The result is the operand updated: it keeps the operand's layout (the indices and
      // updates are made whole where the operand is cut).
      if (operand != 0 || instr.operand_count() != 3) return std::nullopt;
      return identity;
    case HloOpcode::kReshape:
      return ReshapeDims(in.dimensions(), out.dimensions()).map;
    case HloOpcode::kReduce: {
      if (out.IsTuple() || operand != 0) return std::nullopt;
      std::vector<int64_t> map;
      const auto& reduced = instr.dimensions();
      for (int64_t d = 0; d < in.rank(); ++d) {
        if (std::find(reduced.begin(), reduced.end(), d) == reduced.end()) map.push_back(d);
      }
      return map;
    }
    default:
      break;
  }
  if (CutsDims(instr.opcode())) {
    if (in.rank() != out.rank()) return std::vector<int64_t>(out.rank(), -1);
    std::vector<bool> cut = CutDims(instr);
    for (int64_t d = 0; d < out.rank(); ++d) {
      if (cut[d]) identity[d] = -1;
    }
    return identity;
  }
  return std::nullopt;
}

Tiling ForwardThroughMap(const HloInstruction& instruction, int64_t operand, const Tiling& tiling,
                         const std::vector<int64_t>& map_in) {
  std::vector<int64_t> map = FitReshape(instruction, map_in, tiling.tiles, {});
  std::vector<int64_t> dropped;
  for (int64_t d = 0; d < tiling.rank(); ++d) {
    if (std::find(map.begin(), map.end(), d) == map.end() && tiling.tiles[d] > 1) dropped.push_back(d);
  }
  (void)operand;
  return *tiling.ReplicateDims(dropped).Embed(map);
}

Tiling BackwardThroughMap(const HloInstruction& instruction, int64_t operand, const Tiling& result,
                          const std::vector<int64_t>& map_in) {
  std::vector<int64_t> map = FitReshape(instruction, map_in, {}, result.tiles);
  const int64_t rank = instruction.operand(operand)->shape().rank();
  std::vector<int64_t> keep;
  std::vector<int64_t> source(rank, -1);
  for (int64_t d = 0; d < rank; ++d) {
    for (size_t o = 0; o < map.size(); ++o) {
      if (map[o] == d) {
        source[d] = static_cast<int64_t>(keep.size());
        keep.push_back(static_cast<int64_t>(o));
        break;
      }
    }
  }
  return *result.Project(keep).Embed(source);
}

DotSpace DotSpace::Of(const HloInstruction& dot) {
  const DotDimensionNumbers& dn = *dot.dot_dimension_numbers;
  const int64_t lr = dot.operand(0)->shape().rank(), rr = dot.operand(1)->shape().rank();
  DotSpace s;
  s.lhs_axis.assign(lr, -1);
  s.rhs_axis.assign(rr, -1);
  int64_t axis = 0;
  for (size_t i = 0; i < dn.lhs_batch_dimensions.size(); ++i, ++axis) {
    s.lhs_axis[dn.lhs_batch_dimensions[i]] = axis;
    s.rhs_axis[dn.rhs_batch_dimensions[i]] = axis;
  }
  auto is = [](const std::vector<int64_t>& v, int64_t d) {
    return std::find(v.begin(), v.end(), d) != v.end();
  };
  for (int64_t d = 0; d < lr; ++d) {
    if (!is(dn.lhs_batch_dimensions, d) && !is(dn.lhs_contracting_dimensions, d)) s.lhs_axis[d] = axis++;
  }
  for (int64_t d = 0; d < rr; ++d) {
    if (!is(dn.rhs_batch_dimensions, d) && !is(dn.rhs_contracting_dimensions, d)) s.rhs_axis[d] = axis++;
  }
  s.result_rank = axis;
  for (size_t i = 0; i < dn.lhs_contracting_dimensions.size(); ++i, ++axis) {
    s.lhs_axis[dn.lhs_contracting_dimensions[i]] = axis;
    s.rhs_axis[dn.rhs_contracting_dimensions[i]] = axis;
    s.contracting_axes.push_back(axis);
  }
  s.rank = axis;
  return s;
}

namespace {
// The source list that embeds an operand with per-dim `axis` into a space of `rank` axes.
std::vector<int64_t> SourceOf(const std::vector<int64_t>& axis, int64_t rank) {
  std::vector<int64_t> source(rank, -1);
  for (size_t d = 0; d < axis.size(); ++d) source[axis[d]] = static_cast<int64_t>(d);
  return source;
}
}  // namespace

Tiling DotSpace::FromLhs(const Tiling& lhs) const { return *lhs.Embed(SourceOf(lhs_axis, rank)); }
Tiling DotSpace::FromRhs(const Tiling& rhs) const { return *rhs.Embed(SourceOf(rhs_axis, rank)); }
Tiling DotSpace::FromResult(const Tiling& result) const {
  std::vector<int64_t> source(rank, -1);
  for (int64_t a = 0; a < result_rank; ++a) source[a] = a;
  return *result.Embed(source);
}
Tiling DotSpace::Lhs(const Tiling& space) const { return space.Project(lhs_axis); }
Tiling DotSpace::Rhs(const Tiling& space) const { return space.Project(rhs_axis); }
Tiling DotSpace::Result(const Tiling& space) const {
  std::vector<int64_t> keep;
  for (int64_t a = 0; a < result_rank; ++a) keep.push_back(a);
  return space.Project(keep);
}

Tiling PreferTiling(const Tiling& a, const Tiling& b) {
  if (auto merged = MergeTilings(a, b)) return *merged;
  return b.num_tiles() > a.num_tiles() ? b : a;
}

namespace {

// Whether `s` can be a loop's state: a tuple of array shardings, none manual.
bool IsFlatStateSharding(const HloSharding& s, const Shape& shape) {
  if (!s.IsTuple() || !shape.IsTuple() ||
      static_cast<int64_t>(s.tuple_elements().size()) != shape.tuple_shapes_size()) {
    return false;
  }
  for (int64_t k = 0; k < shape.tuple_shapes_size(); ++k) {
    if (!shape.tuple_shapes(k).IsArray() || s.tuple_elements()[k].IsManual() ||
        s.tuple_elements()[k].IsTuple()) {
      return false;
    }
  }
  return true;
}

class Propagator {
 public:
  Propagator(HloModule& module, HloComputation* computation, int64_t n)
      : module_(module), computation_(computation), n_(n) {}

  // `seeds`: shardings the caller fixes (a loop body's parameter and root: the loop's state).
  Status Init(const std::map<const HloInstruction*, HloSharding>& seeds = {}) {
    for (HloInstruction* instr : computation_->MakeInstructionPostOrder()) {
      ASSIGN_OR_RETURN(std::optional<HloSharding> s, StatedSharding(*instr, module_));
      if (s) known_[instr] = *s;
    }
    for (const auto& [instr, s] : seeds) known_.emplace(instr, s);
    return OkStatus();
  }

  // The loops of this computation whose state has a sharding the body can take: each body is
  // propagated with its parameter and root fixed to the state's sharding, so the state keeps one
  // layout from step to step, and the condition with its parameter fixed.
  Status Loops() {
    for (HloInstruction* instr : computation_->MakeInstructionPostOrder()) {
      if (instr->opcode() != HloOpcode::kWhile) continue;
      auto it = known_.find(instr);
      if (it == known_.end() || !IsFlatStateSharding(it->second, instr->shape())) continue;
      HloComputation* body = instr->while_body();
      HloComputation* cond = instr->while_condition();
      if (body == nullptr || cond == nullptr || body->num_parameters() != 1 ||
          cond->num_parameters() != 1) {
        continue;
      }
      // A computation called from elsewhere too keeps its own shardings.
      if (CallCount(body) != 1 || CallCount(cond) != 1) continue;
      for (HloComputation* c : {body, cond}) {
        std::map<const HloInstruction*, HloSharding> seeds{{c->parameter_instruction(0), it->second}};
        if (c == body) seeds.emplace(c->root_instruction(), it->second);
        RETURN_IF_ERROR(Propagate(module_, c, n_, seeds).status());
      }
    }
    return OkStatus();
  }

  static StatusOr<bool> Propagate(HloModule& module, HloComputation* computation, int64_t n,
                                  const std::map<const HloInstruction*, HloSharding>& seeds) {
    Propagator p(module, computation, n);
    RETURN_IF_ERROR(p.Init(seeds));
    for (int round = 0; round < 8 && p.Sweep(false); ++round) {
    }
    for (int round = 0; round < 8 && p.Sweep(true); ++round) {
    }
    RETURN_IF_ERROR(p.Loops());
    return p.Finish();
  }

  // One sweep each way; true when anything was added.
  bool Sweep(bool allow_replicated) {
    bool changed = false;
    auto order = computation_->MakeInstructionPostOrder();
    for (HloInstruction* instr : order) {
      if (known_.count(instr)) continue;
      if (auto s = Forward(*instr); s && (allow_replicated || IsTiledOrManual(*s))) {
        known_[instr] = *s;
        changed = true;
      }
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      HloInstruction* instr = *it;
      if (known_.count(instr)) continue;
      std::optional<HloSharding> best;
      for (HloInstruction* user : instr->users()) {
        auto s = Backward(*user, *instr);
        if (!s) continue;
        if (!best) {
          best = s;
        } else if (best->IsTiled() && s->IsTiled()) {
          auto a = Tiling::FromSharding(*best, instr->shape().rank(), n_);
          auto b = Tiling::FromSharding(*s, instr->shape().rank(), n_);
          if (a.ok() && b.ok()) best = PreferTiling(*a, *b).ToSharding();
        } else if (s->IsTiled()) {
          best = s;
        }
      }
      if (best && (allow_replicated || IsTiledOrManual(*best))) {
        known_[instr] = *best;
        changed = true;
      }
    }
    return changed;
  }

  bool Finish() {
    bool changed = false;
    for (HloInstruction* instr : computation_->MakeInstructionPostOrder()) {
      auto it = known_.find(instr);
      HloSharding s;
      if (it != known_.end()) {
        s = it->second;
      } else if (instr->shape().IsTuple()) {
        s = HloSharding::Tuple(std::vector<HloSharding>(LeafCount(instr->shape()),
                                                        HloSharding::Replicated()));
      }
      if (instr->raw_attribute("sharding") == nullptr) {
        instr->SetRawAttribute("sharding", s.ToString());
        changed = true;
      }
    }
    return changed;
  }

 private:
  static bool IsTiledOrManual(const HloSharding& s) {
    if (s.IsTuple()) {
      for (const HloSharding& e : s.tuple_elements()) {
        if (IsTiledOrManual(e)) return true;
      }
      return false;
    }
    return s.IsTiled() || s.IsManual();
  }
  int64_t CallCount(const HloComputation* callee) const {
    int64_t count = 0;
    for (const HloComputation* c : module_.computations()) {
      for (const HloInstruction* i : c->instructions()) {
        for (const HloComputation* called : i->called_computations()) count += called == callee;
      }
    }
    return count;
  }
  static int64_t LeafCount(const Shape& shape) {
    if (!shape.IsTuple()) return 1;
    int64_t n = 0;
    for (const Shape& s : shape.tuple_shapes()) n += LeafCount(s);
    return n;
  }

  std::optional<Tiling> TilingOf(const HloInstruction* instr) const {
    auto it = known_.find(instr);
    if (it == known_.end() || !instr->shape().IsArray()) return std::nullopt;
    auto t = Tiling::FromSharding(it->second, instr->shape().rank(), n_);
    if (!t.ok()) return std::nullopt;
    return *t;
  }
  bool IsManual(const HloInstruction* instr) const {
    auto it = known_.find(instr);
    return it != known_.end() && it->second.IsManual();
  }

  std::optional<HloSharding> Forward(const HloInstruction& instr) const {
    // Constants and iotas are whole wherever their users do not cut them.
    if (instr.operand_count() == 0 && instr.shape().IsArray()) return HloSharding::Replicated();
    for (const HloInstruction* op : instr.operands()) {
      if (IsManual(op)) return HloSharding::Manual();
    }
    if (instr.opcode() == HloOpcode::kTuple) {
      std::vector<HloSharding> leaves;
      for (const HloInstruction* op : instr.operands()) {
        auto it = known_.find(op);
        if (it == known_.end() || op->shape().IsTuple()) return std::nullopt;
        leaves.push_back(it->second);
      }
      return HloSharding::Tuple(std::move(leaves));
    }
    if (instr.opcode() == HloOpcode::kWhile) {
      // The state keeps the layout it enters with.
      auto it = known_.find(instr.operand(0));
      if (it == known_.end() || !IsFlatStateSharding(it->second, instr.shape())) return std::nullopt;
      return it->second;
    }
    if (instr.opcode() == HloOpcode::kGetTupleElement) {
      auto it = known_.find(instr.operand(0));
      if (it == known_.end() || !instr.shape().IsArray()) return std::nullopt;
      if (!it->second.IsTuple()) return it->second;
      for (const Shape& s : instr.operand(0)->shape().tuple_shapes()) {
        if (s.IsTuple()) return std::nullopt;
      }
      return it->second.tuple_elements()[instr.tuple_index()];
    }
    if (instr.opcode() == HloOpcode::kDot) {
      DotSpace space = DotSpace::Of(instr);
      auto l = TilingOf(instr.operand(0));
      auto r = TilingOf(instr.operand(1));
      if (!l && !r) return std::nullopt;
      Tiling s = l && r ? PreferTiling(space.FromLhs(*l), space.FromRhs(*r))
                        : l ? space.FromLhs(*l) : space.FromRhs(*r);
      return space.Result(s).ToSharding();
    }
    std::optional<Tiling> best;
    for (int64_t k = 0; k < instr.operand_count(); ++k) {
      auto t = TilingOf(instr.operand(k));
      if (!t) continue;
      auto map = OpDimMap(instr, k);
      if (!map) continue;
      Tiling r = ForwardThroughMap(instr, k, *t, *map);
      best = best ? PreferTiling(*best, r) : r;
    }
    if (best) return best->ToSharding();
    return std::nullopt;
  }

  // The sharding `user` would have its operand `operand` take.
  std::optional<HloSharding> Backward(const HloInstruction& user, const HloInstruction& operand) const {
    if (user.opcode() == HloOpcode::kWhile) {
      auto it = known_.find(&user);
      if (it == known_.end() || !IsFlatStateSharding(it->second, operand.shape())) return std::nullopt;
      return it->second;
    }
    if (!operand.shape().IsArray()) return std::nullopt;
    if (IsManual(&user) && user.opcode() != HloOpcode::kCustomCall) return HloSharding::Manual();
    if (user.opcode() == HloOpcode::kTuple) {
      auto it = known_.find(&user);
      if (it == known_.end() || !it->second.IsTuple()) return std::nullopt;
      for (const HloInstruction* op : user.operands()) {
        if (op->shape().IsTuple()) return std::nullopt;
      }
      for (int64_t k = 0; k < user.operand_count(); ++k) {
        if (user.operand(k) == &operand) return it->second.tuple_elements()[k];
      }
    }
    auto t = TilingOf(&user);
    if (!t) return std::nullopt;
    int64_t k = 0;
    while (user.operand(k) != &operand) ++k;
    if (user.opcode() == HloOpcode::kDot) {
      DotSpace space = DotSpace::Of(user);
      Tiling s = space.FromResult(*t);
      return (k == 0 ? space.Lhs(s) : space.Rhs(s)).ToSharding();
    }
    auto map = OpDimMap(user, k);
    if (!map) return std::nullopt;
    return BackwardThroughMap(user, k, *t, *map).ToSharding();
  }

  HloModule& module_;
  HloComputation* computation_;
  int64_t n_;
  std::map<const HloInstruction*, HloSharding> known_;
};

}  // namespace

StatusOr<bool> ShardingPropagation::Run(HloModule& module) {
  const int64_t n = ModuleNumPartitions(module);
  if (n <= 1 || module.entry_computation() == nullptr) return false;
  return Propagator::Propagate(module, module.entry_computation(), n, {});
}

}  // namespace xlens

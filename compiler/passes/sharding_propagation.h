// sharding-propagation: gives every instruction of the entry computation (and of the bodies and
// conditions of its while loops, whose parameter and body root take the loop state's sharding, so
// the state keeps one layout from step to step) a `sharding=`, starting
// from the ones the module states: entry parameters, the root, with_sharding_constraint's
// `Sharding` custom calls, any instruction XLA's own propagation already annotated, and Shardy's
// `xla.sdy.sharding` frontend attributes (converted, shardy_shardings.h). A stated sharding is
// never changed.
//
// How a sharding travels through an op is a map between its operands' dims and its result's
// (OpDimMap): elementwise ops and copies keep every dim; broadcast, transpose, reduce and reshape
// move dims; slice, pad and concatenate keep every dim (a piece is a window of the operand's rows,
// see WindowedDims), reverse and dynamic-(update-)slice keep the dims they do not cut and
// replicate the ones they do; a dot maps its batch and non-contracting dims (a tiled
// contracting dim becomes copies of partial sums, which the partitioner all-reduces); a
// convolution its images' batch (and spatial dims its window does not span) and its kernels'
// output feature; a gather its indices' batch dims and the table's dims its slices take whole; a
// reduce-window the dims its window does not span. Other ops are replicated.
//
// The choices, XLA's in spirit, kept simple:
//  - Tiled before replicated: rounds that give only tiled shardings run first, forward (from
//    operands, in post order) then backward (from users), until nothing changes; only then may a
//    value become replicated from its neighbours, and what is still open at the end is replicated.
//    So a broadcast constant added to a sharded value takes the value's sharding instead of
//    replicating it.
//  - Operands that disagree: their shardings merge when they fit together (a dot of a [data,-]
//    activation and a [-,model] weight gives [data,model], XLA's MergeSharding); otherwise the
//    operand cut into more tiles wins, the first on a tie (XLA's IsShardingMoreSpecific).
//  - Manual shardings (shard_map's body) are carried through unchanged.
// Reports a change when it added any sharding.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/hlo/sharding.h"
#include "compiler/hlo/shardy_shardings.h"
#include "compiler/passes/hlo_pass.h"
#include "compiler/passes/spmd_tiling.h"

namespace xlens {

class ShardingPropagation : public HloPass {
 public:
  std::string_view name() const override { return "sharding-propagation"; }
  StatusOr<bool> Run(HloModule& module) override;
};

// The module's device count: num_partitions in its header (1 when absent).
int64_t ModuleNumPartitions(const HloModule& module);

// The sharding `instruction` states (its `sharding=`, or Shardy's attribute converted), if any.
StatusOr<std::optional<HloSharding>> StatedSharding(const HloInstruction& instruction,
                                                    const HloModule& module);

// Shardy's per-value shardings in frontend attribute `key` of `instruction` (in_shardings,
// out_shardings of a shard_map's custom calls); empty when absent.
StatusOr<std::vector<HloSharding>> ShardyValueShardings(const HloInstruction& instruction,
                                                        const ShardyMeshes& meshes,
                                                        std::string_view key);

// How operand `operand` of `instruction` maps to its result: result_from_operand[o] is the
// operand dim that result dim o follows, or -1. nullopt for ops that do not pass shardings
// (replicated), dots and tuples.
std::optional<std::vector<int64_t>> OpDimMap(const HloInstruction& instruction, int64_t operand);

// The dims of a slice (stride 1), pad (no interior padding) or concatenate (its dim) whose
// pieces are windows of the operands' rows: they keep their tiling, and the partitioner brings
// each device the rows it needs. All false for other ops.
std::vector<bool> WindowedDims(const HloInstruction& instruction);

// A result tiling from an operand's through `map`: dims the map drops become copies; a reshape's
// dims whose tiles do not fit are replicated first.
Tiling ForwardThroughMap(const HloInstruction& instruction, int64_t operand, const Tiling& tiling,
                         const std::vector<int64_t>& map);
// An operand tiling that gives the result tiling `result` through `map` (dims the result cuts
// but the operand lacks become copies).
Tiling BackwardThroughMap(const HloInstruction& instruction, int64_t operand, const Tiling& result,
                          const std::vector<int64_t>& map);

// A dot's iteration space: axes [batch..., lhs non-contracting..., rhs non-contracting...,
// contracting...]; the result's dims are the first axes, in order.
struct DotSpace {
  std::vector<int64_t> lhs_axis;  // per lhs dim: its space axis
  std::vector<int64_t> rhs_axis;  // per rhs dim
  int64_t result_rank = 0;
  int64_t rank = 0;
  std::vector<int64_t> contracting_axes;
  static DotSpace Of(const HloInstruction& dot);
  // The space tilings an operand's or the result's tiling implies.
  Tiling FromLhs(const Tiling& lhs) const;
  Tiling FromRhs(const Tiling& rhs) const;
  Tiling FromResult(const Tiling& result) const;
  Tiling Lhs(const Tiling& space) const;
  Tiling Rhs(const Tiling& space) const;
  Tiling Result(const Tiling& space) const;
};

// The tiling of more tiles of `a` and `b` (merged when they fit; `a` on a tie).
Tiling PreferTiling(const Tiling& a, const Tiling& b);

}  // namespace xlens

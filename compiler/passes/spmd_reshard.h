// What spmd-partitioning builds into the per-device program besides the ops themselves: moving a
// value from one tiling to another (all-gather, all-to-all, dynamic-slice by partition-id), the
// all-reduce that sums partial results, and the masks that keep a padded tile's padding out of a
// reduction. Every collective gets a fresh channel_id; an all-to-all's groups are partition ids
// (cross-partition), the others' global device ids (use_global_device_ids=true) repeated for each
// of the header's replica_count replicas, as XLA's partitioner writes them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/hlo/module.h"
#include "compiler/passes/spmd_tiling.h"

namespace xlens {

// Replica groups as XLA prints them now: the iota form (`[2,2]<=[4]`, each row a group) where one
// gives them, the list otherwise.
std::string ReplicaGroupsText(const std::vector<std::vector<int64_t>>& groups);

// `shape` with its first dims.size() dims replaced (layout and element type kept).
Shape WithDims(const Shape& shape, const std::vector<int64_t>& dims);

class SpmdBuilder {
 public:
  // Builds into `computation` of `module` for `n` partitions; reshards are explained in
  // `decisions` (one indented line each).
  SpmdBuilder(HloModule& module, HloComputation* computation, int64_t n,
              std::vector<std::string>& decisions);

  HloInstruction* Add(std::unique_ptr<HloInstruction> instruction);
  // The channel id the next collective takes; a loop's body and condition, built by builders of
  // their own, continue the numbering so that no two collectives share a channel.
  int64_t next_channel() const { return next_channel_; }
  void set_next_channel(int64_t next) { next_channel_ = next; }
  // An s32 scalar: a constant, or values[partition-id] when the devices differ.
  HloInstruction* ScalarS32(int64_t value);
  HloInstruction* PerDevice(const std::vector<int64_t>& values);
  HloInstruction* Zero(PrimitiveType type);
  // `scalar` broadcast to `like`'s dims.
  HloInstruction* Broadcast(HloInstruction* scalar, const Shape& like);
  // Combines `x` over each group with `reducer` (a sum when null).
  HloInstruction* AllReduce(HloInstruction* x, const std::vector<std::vector<int64_t>>& groups,
                            HloComputation* reducer);
  // The dim along which `to` cuts what `from` holds whole, across each of `groups` in rank order
  // (every other dim as `from` has it, the dim divisible): a reduce-scatter over `groups` then
  // gives `to`'s pieces of the sum. nullopt otherwise.
  std::optional<int64_t> ScatterDim(const Tiling& from, const Tiling& to,
                                    const std::vector<std::vector<int64_t>>& groups,
                                    const std::vector<int64_t>& global) const;
  // Sums `x` over each group and leaves rank r its r-th part along `dim`.
  HloInstruction* ReduceScatter(HloInstruction* x, int64_t dim,
                                const std::vector<std::vector<int64_t>>& groups);
  // `x`, a piece under `tiling` of a value of `global` dims, with the elements past the end of
  // the tiled dims among `dims` (a short last tile's padding) replaced by `fill`.
  HloInstruction* Mask(HloInstruction* x, const Tiling& tiling, const std::vector<int64_t>& global,
                       const std::vector<int64_t>& dims, HloInstruction* fill);
  // For a gather from, or a scatter into, an operand cut along the dim index component
  // `component` of `indices` picks (the index vector along `ivd`; none when ivd is the rank): that
  // component, clamped to [0, clamp_rows) when given (a gather's clamp), minus each device's start
  // `starts` (`local`, shaped as the indices without the index vector, s32), and the indices with
  // it replaced (`indices`, their own type). spmd_indexing.cc.
  struct ShiftedIndices {
    HloInstruction* local = nullptr;
    HloInstruction* indices = nullptr;
  };
  ShiftedIndices ShiftIndices(HloInstruction* indices, int64_t ivd, int64_t component,
                              std::optional<int64_t> clamp_rows, const std::vector<int64_t>& starts);
  // `x` (a gather's result) with zeros where `local` (its batch dims `batch_dims` of x) falls
  // outside [0, held): the rows another device holds.
  HloInstruction* ZeroOutside(HloInstruction* x, HloInstruction* local, int64_t held,
                              const std::vector<int64_t>& batch_dims);
  // Rows [a, a + size) of dim `dim` of the value whose piece under `t` is `x` (of `global` dims),
  // where a = start + i * step for the device's tile index i along `dim`: the window a slice, pad
  // or concatenation cut by `dim` needs. Rows the neighbours hold come by collective-permute (XLA's
  // halo exchange); when they reach past the neighbours' pieces the dim is all-gathered instead.
  // Rows outside [0, global[dim]) read `fill`. `what` names the value in the explanation.
  HloInstruction* Window(HloInstruction* x, const Tiling& t, const std::vector<int64_t>& global,
                         int64_t dim, int64_t start, int64_t step, int64_t size,
                         HloInstruction* fill, const std::string& what);
  // The piece under `to` of the value whose piece under `from` is `x`: an all-to-all when the
  // tiles move between dims in place, all-gathers of the dims `to` cuts otherwise (or of all),
  // then a dynamic-slice by partition-id. `what` names the value in the explanation.
  HloInstruction* Reshard(HloInstruction* x, const Tiling& from, const Tiling& to,
                          const std::vector<int64_t>& global, const std::string& what);

 private:
  HloInstruction* PartitionId();
  HloInstruction* Slice(HloInstruction* x, int64_t dim, int64_t lo, int64_t hi);
  HloInstruction* Permute(HloInstruction* x, const Tiling& t, int64_t dim, int64_t shift);
  void SetCollective(HloInstruction* instr, const std::vector<std::vector<int64_t>>& groups);
  HloComputation* Reducer(HloComputation* given, PrimitiveType type);
  HloInstruction* Gather(HloInstruction* x, Tiling& cur, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& global, std::string& how);
  HloInstruction* AllToAll(HloInstruction* x, const Tiling& cur, int64_t i, int64_t j, std::string& how);
  HloInstruction* SliceTo(HloInstruction* x, const Tiling& cur, const Tiling& to,
                          const std::vector<int64_t>& global, std::string& how);

  HloModule& module_;
  HloComputation* comp_;
  int64_t n_;
  int64_t num_replicas_ = 1;
  std::vector<std::string>& decisions_;
  HloInstruction* partition_id_ = nullptr;
  int64_t next_channel_ = 1;
  std::map<PrimitiveType, HloComputation*> adders_;
};

}  // namespace xlens

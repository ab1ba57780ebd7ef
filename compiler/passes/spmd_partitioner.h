// spmd-partitioning: turns a module whose values carry shardings (num_partitions=P in its header)
// into the one program every device runs, with per-device shapes and collectives, as XLA's SPMD
// partitioner does. It inlines calls and runs sharding-propagation first, so the
// before_optimizations module of a sharded jax.jit (or XLA's before_spmd-partitioning module) is
// enough.
//
// Each entry instruction is rewritten to its piece of the value (the tile its sharding gives the
// device; tiles the count does not divide are padded, and reductions over them mask the padding).
// Where an op needs its operands laid out otherwise than they are, the operand is resharded:
//   all-gather        over the devices that hold the other tiles of a dim, to make it whole
//   dynamic-slice     by offsets indexed by partition-id, to cut a dim the device holds whole
//   all-to-all        to move the tiles of one dim to another, each device keeping its place
// An elementwise op, broadcast, transpose, reshape (dims kept, split or merged along tiles) and
// reverse run on their pieces with the dims they cut made whole; a slice that only drops the end of
// a tiled dim keeps the pieces; a slice, pad or concatenate cut along a dim it changes runs on
// windows of the operands' rows, the rows the neighbours hold brought by collective-permute (XLA's
// halo exchange; an all-gather when they lie further); a convolution runs on images cut by batch
// and kernels cut by output feature, a gather on the pieces of its indices, a gather from or a
// scatter into a table cut along the dim its indices pick on each device's rows (ids shifted,
// the gather's other rows zeroed and all-reduced), a reduce-window along the dims its window does
// not span; a while loop whose state is a flat tuple runs its partitioned body and condition on
// the pieces of its state. A reduce
// over a tiled dim reduces its piece and all-reduces with its own reducer. A dot picks the layout
// of its iteration space (batch, non-contracting and contracting dims) that moves the fewest bytes
// among: the result's sharding, each operand's, and both merged; a tiled contracting dim ends in an
// all-reduce of partial sums (a reduce-scatter when the result is wanted cut across the devices
// that sum). Anything else runs whole on every device (its operands all-gathered)
// and is cut to its sharding after. Manual values (shard_map's body, between SPMDFullToShardShape
// and SPMDShardToFullShape, or Shardy's xla.sdy.GlobalToLocalShape and LocalToGlobalShape) are
// already per device and pass through unchanged; so do values manual over some mesh axes only
// (last_tile_dims={manual}), which take their manual piece with the other axes whole.
//
// The entry parameters take per-device shapes and keep their shardings, so `xlens run OUT
// --num_partitions P` splits global inputs for them. Every decision is recorded (decisions()),
// which `xlens opt --explain-spmd` prints. Reports a change when the
// module has more than one partition; a module of one is left alone.
#pragma once

#include <string>
#include <vector>

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class SpmdPartitioner : public HloPass {
 public:
  std::string_view name() const override { return "spmd-partitioning"; }
  StatusOr<bool> Run(HloModule& module) override;
  // One line per instruction that needed more than its own piece: what ran and why.
  const std::vector<std::string>& decisions() const { return decisions_; }

 private:
  std::vector<std::string> decisions_;
};

}  // namespace xlens

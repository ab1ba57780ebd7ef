// Custom calls that only annotate a value: XLA's `Sharding` (with_sharding_constraint) and
// Shardy's `xla.sdy.FuncResultSharding`, which jaxlib writes into the before_optimizations module
// of a sharded program. Each passes its one operand through unchanged; the sharding it carries
// matters to the SPMD partitioner only. On one device they are identities, as XLA's own
// ShardingRemover treats them.
//
// Memory-space annotations of host offloading are values too: jax.device_put(x, memory_kind=...)
// writes `annotate_device_placement` (with `_xla_buffer_placement="pinned_host"` or "device" in
// its frontend attributes), which XLA turns into `MoveToHost` / `MoveToDevice` before its host
// offloader moves the buffer. They say where a value lives, never what it is; on a CPU, host and
// device memory are the same, so each is its operand. (The custom call is marked as having a side
// effect only so that XLA does not remove it before its offloader runs.)
//
// Not annotations, and not treated as such: SPMDFullToShardShape / SPMDShardToFullShape and
// xla.sdy.GlobalToLocalShape / xla.sdy.LocalToGlobalShape change the shape between the global
// and the per-device view; xla.sdy.ShardingGroup has no result.
#pragma once

#include <cstdint>

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

// An annotation custom call with one operand whose shape it keeps.
bool IsAnnotationCustomCall(const HloInstruction& instruction);

// Replaces every annotation custom call (outside fusion computations) by its operand; returns how
// many were removed.
StatusOr<int64_t> RemoveAnnotationCustomCalls(HloModule& module);

}  // namespace xlens

// Global values and the pieces each device holds of them, by an HloSharding: splitting a global
// Literal into one Literal per device, and assembling per-device Literals back into the global
// one. Device d is the d-th device of the sharding's tile assignment numbering (the partition id
// of an SPMD program).
//
//   replicated   every device holds a copy; assembling checks that the copies agree
//   maximal      every device is given a copy (the others' is never read); assembling takes
//                the owner's
//   tiled        device d holds its tile (XLA's ceiling rule, see sharding.h); devices of the
//                same tile under partial replication hold copies, which must agree
//   tuple        each leaf by its own sharding
//   manual       each device's value is its own: there is no global value to split or assemble
//
// Tiles short of the tile shape (dims the tile count does not divide) are padded with zeros to
// it when `pad` is kPadToTileShape, the shape the partitioned program's parameters have; kExact
// gives each device exactly its part, as jax.Array's addressable shards do.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/hlo/literal.h"
#include "compiler/hlo/module.h"
#include "compiler/hlo/sharding.h"
#include "compiler/support/status.h"

namespace xlens {

enum class TilePadding { kPadToTileShape, kExact };

// One Literal per device 0..num_devices-1. The sharding must suit the value's shape and place
// every device (HloSharding::Validate); an elided or text-only literal cannot be split.
StatusOr<std::vector<Literal>> SplitLiteral(const Literal& global, const HloSharding& sharding,
                                            int64_t num_devices,
                                            TilePadding pad = TilePadding::kPadToTileShape);

// The global value of `shape` from one Literal per device (padded or exact tiles are both
// accepted). Replicas must agree bit for bit; the first disagreement is named.
StatusOr<Literal> AssembleLiteral(const std::vector<Literal>& per_device,
                                  const HloSharding& sharding, const Shape& shape);

// The sharding of each entry parameter, and of the entry root, as the module's `sharding=`
// attributes give them ({replicated} where none is given). Errors name the instruction.
StatusOr<std::vector<HloSharding>> EntryParameterShardings(const HloModule& module);
StatusOr<HloSharding> EntryRootSharding(const HloModule& module);

}  // namespace xlens

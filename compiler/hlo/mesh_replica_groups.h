// Replica groups in the mesh-axes form today's XLA prints after SPMD partitioning:
//
//   replica_groups=mesh['data'=2,'model'=4] {'model'}
//   replica_groups=mesh['x'=8] {'x':(2)2}
//   replica_groups=mesh['a'=2,'b'=2], device_ids=([2,2]<=[2,2]T(1,0)) {'a'}
//
// The mesh lays the devices out over named axes (row-major iota unless device_ids says
// otherwise); the devices that differ only along the listed axes form one group. A sub-axis
// `name:(pre)size` is the part of axis `name` of `size` ids inside it, with `pre` ids of the axis
// more major than it: the axis reads as [pre, size, rest], major to minor. Groups are listed with
// the unlisted axes' coordinates in row-major order; within a group, ids run over the listed axes
// in the order listed, the first most major.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {

// True when `text` (a replica_groups value) is in the mesh-axes form.
bool IsMeshAxesReplicaGroups(std::string_view text);

// The groups of a mesh-axes replica_groups value; an error says what is malformed.
StatusOr<std::vector<std::vector<int64_t>>> ExpandMeshAxesReplicaGroups(std::string_view text);

}  // namespace xlens

// The attributes of collective instructions, read from the raw text XLA prints, and which devices
// meet in each collective on a given number of replicas and partitions.
//
// XLA's meaning of a group's ids depends on the collective's group mode, decided by whether it has
// a channel_id and by use_global_device_ids:
//   no channel_id                                 cross-replica: ids are replica ids, each
//                                                 partition meets on its own
//   channel_id, no use_global_device_ids attribute cross-partition: ids are partition ids (the
//                                                 op kinds without the attribute: all-to-all,
//                                                 collective-permute, collective-broadcast)
//   channel_id, use_global_device_ids=false       cross-replica-and-partition: ids are replica
//                                                 ids, every partition of them meets together
//   channel_id, use_global_device_ids=true        flattened ids: replica * P + partition
// A device's id is replica * num_partitions + partition, XLA's default device assignment.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens {

// The devices a module runs on: XLA's --num_replicas and --num_partitions.
struct DeviceTopology {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  int64_t num_devices() const { return num_replicas * num_partitions; }
  int64_t DeviceId(int64_t replica, int64_t partition) const {
    return replica * num_partitions + partition;
  }
};

enum class CollectiveOpGroupMode {
  kCrossReplica,
  kCrossPartition,
  kCrossReplicaAndPartition,
  kFlattenedId,
};
std::string_view CollectiveOpGroupModeName(CollectiveOpGroupMode mode);

// XLA's group mode of a collective with or without a channel_id and with use_global_device_ids
// absent (nullopt), false or true; an error for use_global_device_ids=true without a channel.
StatusOr<CollectiveOpGroupMode> GetCollectiveOpGroupMode(bool has_channel_id,
                                                         std::optional<bool> use_global_device_ids);

// The collectives the multi-device evaluator runs (their -start/-done forms included), and the
// ids replica-id and partition-id.
bool IsCollectiveOpcode(HloOpcode opcode);

// replica_groups in any form XLA prints: the list `{{0,1},{2,3}}` (`{}`: one group of all), the
// iota form `[2,2]<=[4]`, `[2,2]<=[2,2]T(1,0)` (the rows of an iota of the product of the
// reshape dimensions, reshaped, transposed and reshaped to [groups, group size]), or the
// mesh-axes form `mesh['x'=2,'y'=2] {'y'}` (mesh_replica_groups.h).
StatusOr<std::vector<std::vector<int64_t>>> ParseReplicaGroups(std::string_view text);
// The list form of `groups`: "{{0,1},{2,3}}".
std::string ReplicaGroupsToString(const std::vector<std::vector<int64_t>>& groups);
// source_target_pairs={{0,1},{1,2}}.
StatusOr<std::vector<std::pair<int64_t, int64_t>>> ParseSourceTargetPairs(std::string_view text);

// The collective attributes of one instruction, typed.
struct CollectiveAttributes {
  std::vector<std::vector<int64_t>> replica_groups;  // empty: every id in one group
  std::optional<int64_t> channel_id;
  std::optional<bool> use_global_device_ids;
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;  // collective-permute
  CollectiveOpGroupMode mode = CollectiveOpGroupMode::kCrossReplica;
};
// Reads them from the instruction's raw attributes; an error names the instruction and the
// attribute. use_global_device_ids counts as false when absent on all-reduce, all-gather and
// reduce-scatter (the ops that carry it), as XLA's instructions do.
StatusOr<CollectiveAttributes> ReadCollectiveAttributes(const HloInstruction& instruction);

// The groups of devices that meet in `instruction` on `topology`, each in XLA's rank order (a
// device's rank is its position in its group): every device is in exactly one group. Errors (one
// line naming the instruction) for an id out of range, an id in two groups, groups that do not
// cover the devices, groups of unequal size where the op splits or concatenates by group size.
// For collective-permute: the devices whose pairs are applied together (a partition's replicas,
// or a replica's partitions).
StatusOr<std::vector<std::vector<int64_t>>> ParticipatingDeviceGroups(
    const HloInstruction& instruction, const DeviceTopology& topology);

// For collective-permute on `topology`: the source device of every device (-1: none, it receives
// zeros). Errors for an id out of range and for a source or a target used twice.
StatusOr<std::vector<int64_t>> PermuteSources(const HloInstruction& instruction,
                                              const DeviceTopology& topology);

// Checks every collective of `module`'s computations against `topology` (the groups and pairs
// above), and that no channel_id is shared by two collectives (a -start and its -done are one).
// When the module's header gives other counts (replica_count=, num_partitions=), the error says so.
Status CheckModuleCollectives(const class HloModule& module, const DeviceTopology& topology);

// "; the module's header says num_partitions=4" when the header of the module holding
// `instruction` gives device counts other than `topology`'s; empty otherwise.
std::string HeaderTopologyHint(const HloInstruction& instruction, const DeviceTopology& topology);

}  // namespace xlens

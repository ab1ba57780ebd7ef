#include "compiler/hlo/collective_attributes.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "compiler/hlo/mesh_replica_groups.h"
#include "compiler/hlo/module.h"
#include "compiler/hlo/text_cursor.h"
#include "compiler/hlo/tile_assignment.h"
#include "compiler/hlo/value_reader.h"
#include "compiler/support/terminal_text.h"

namespace xlens {
namespace {

// The iota form [G,S]<=[dims]T(perm), read as a tile assignment: its rows are the groups.
StatusOr<std::vector<std::vector<int64_t>>> ExpandIotaGroups(std::string_view text) {
  ASSIGN_OR_RETURN(TileAssignment assignment, TileAssignment::Parse(text, "replica_groups"));
  if (assignment.num_dimensions() != 2) {
    return Error(fmt::format("the iota form needs [groups,group_size], found {} dimensions",
                             assignment.num_dimensions()));
  }
  return assignment.Rows();
}

bool CarriesUseGlobalDeviceIds(HloOpcode opcode) {
  switch (opcode) {
    case HloOpcode::kAllReduce: case HloOpcode::kAllReduceStart:
    case HloOpcode::kAllGather: case HloOpcode::kAllGatherStart:
    case HloOpcode::kReduceScatter:
      return true;
    default:
      return false;
  }
}

// Ops whose result splits or concatenates by the group size: their groups must be of one size.
bool NeedsEqualGroups(HloOpcode opcode) {
  switch (opcode) {
    case HloOpcode::kAllGather: case HloOpcode::kAllGatherStart:
    case HloOpcode::kReduceScatter: case HloOpcode::kAllToAll:
      return true;
    default:
      return false;
  }
}

bool IsPermute(HloOpcode opcode) {
  return opcode == HloOpcode::kCollectivePermute || opcode == HloOpcode::kCollectivePermuteStart;
}

// Ops that meet with others (not ids, not -done).
bool Meets(HloOpcode opcode) {
  return IsCollectiveOpcode(opcode) && opcode != HloOpcode::kReplicaId &&
         opcode != HloOpcode::kPartitionId && opcode != HloOpcode::kAllReduceDone &&
         opcode != HloOpcode::kAllGatherDone && opcode != HloOpcode::kCollectivePermuteDone;
}

std::string DeviceList(const std::vector<int64_t>& ids) { return fmt::format("{}", fmt::join(ids, ", ")); }

}  // namespace

std::string_view CollectiveOpGroupModeName(CollectiveOpGroupMode mode) {
  switch (mode) {
    case CollectiveOpGroupMode::kCrossReplica: return "cross-replica";
    case CollectiveOpGroupMode::kCrossPartition: return "cross-partition";
    case CollectiveOpGroupMode::kCrossReplicaAndPartition: return "cross-replica-and-partition";
    case CollectiveOpGroupMode::kFlattenedId: return "flattened-id";
  }
  return "?";
}

StatusOr<CollectiveOpGroupMode> GetCollectiveOpGroupMode(bool has_channel_id,
                                                         std::optional<bool> use_global_device_ids) {
  if (!has_channel_id) {
    if (use_global_device_ids.value_or(false)) {
      return Error("use_global_device_ids=true needs a channel_id");
    }
    return CollectiveOpGroupMode::kCrossReplica;
  }
  if (!use_global_device_ids) return CollectiveOpGroupMode::kCrossPartition;
  return *use_global_device_ids ? CollectiveOpGroupMode::kFlattenedId
                                : CollectiveOpGroupMode::kCrossReplicaAndPartition;
}

bool IsCollectiveOpcode(HloOpcode opcode) {
  switch (opcode) {
    case HloOpcode::kAllReduce: case HloOpcode::kAllReduceStart: case HloOpcode::kAllReduceDone:
    case HloOpcode::kAllGather: case HloOpcode::kAllGatherStart: case HloOpcode::kAllGatherDone:
    case HloOpcode::kReduceScatter: case HloOpcode::kAllToAll:
    case HloOpcode::kCollectivePermute: case HloOpcode::kCollectivePermuteStart:
    case HloOpcode::kCollectivePermuteDone: case HloOpcode::kCollectiveBroadcast:
    case HloOpcode::kReplicaId: case HloOpcode::kPartitionId:
      return true;
    default:
      return false;
  }
}

StatusOr<std::vector<std::vector<int64_t>>> ParseReplicaGroups(std::string_view text) {
  TextCursor reader(text, "replica_groups");
  StatusOr<std::vector<std::vector<int64_t>>> groups = [&]() -> StatusOr<std::vector<std::vector<int64_t>>> {
    if (IsMeshAxesReplicaGroups(text)) return ExpandMeshAxesReplicaGroups(text);
    if (text.find("<=") != std::string_view::npos) return ExpandIotaGroups(text);
    ASSIGN_OR_RETURN(auto lists, value::ReadNestedList(reader));
    if (!value::AtEnd(reader)) return Error("unexpected text after the groups");
    return lists;
  }();
  if (!groups.ok()) {
    return Error(fmt::format("replica_groups={}: {}", DisplayText(text), groups.status().message()));
  }
  return groups;
}

std::string ReplicaGroupsToString(const std::vector<std::vector<int64_t>>& groups) {
  std::vector<std::string> parts;
  for (const auto& group : groups) parts.push_back(fmt::format("{{{}}}", fmt::join(group, ",")));
  return fmt::format("{{{}}}", fmt::join(parts, ","));
}

StatusOr<std::vector<std::pair<int64_t, int64_t>>> ParseSourceTargetPairs(std::string_view text) {
  TextCursor reader(text, "source_target_pairs");
  auto lists = value::ReadNestedList(reader);
  if (lists.ok() && !value::AtEnd(reader)) lists = Error("unexpected text after the pairs");
  if (!lists.ok()) {
    return Error(fmt::format("source_target_pairs={}: {}", DisplayText(text), lists.status().message()));
  }
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (const auto& list : *lists) {
    if (list.size() != 2) {
      return Error(fmt::format("source_target_pairs={}: each pair is {{source,target}}", DisplayText(text)));
    }
    pairs.emplace_back(list[0], list[1]);
  }
  return pairs;
}

StatusOr<CollectiveAttributes> ReadCollectiveAttributes(const HloInstruction& instruction) {
  const std::string name = "%" + instruction.name();
  CollectiveAttributes attributes;
  if (const std::string* groups = instruction.raw_attribute("replica_groups")) {
    auto parsed = ParseReplicaGroups(*groups);
    if (!parsed.ok()) return parsed.status().WithContext(name);
    attributes.replica_groups = std::move(*parsed);
  }
  if (const std::string* channel = instruction.raw_attribute("channel_id")) {
    TextCursor reader(*channel, "channel_id");
    auto id = value::ReadInt(reader, /*allow_minus=*/true);
    if (!id.ok() || !value::AtEnd(reader) || *id < 0) {
      return Error(fmt::format("{}: channel_id={}: expected a non-negative integer", name,
                               DisplayText(*channel)));
    }
    attributes.channel_id = *id;
  }
  if (const std::string* global = instruction.raw_attribute("use_global_device_ids")) {
    if (*global != "true" && *global != "false") {
      return Error(fmt::format("{}: use_global_device_ids={}: expected true or false", name,
                               DisplayText(*global)));
    }
    attributes.use_global_device_ids = *global == "true";
  } else if (CarriesUseGlobalDeviceIds(instruction.opcode())) {
    attributes.use_global_device_ids = false;
  }
  if (const std::string* pairs = instruction.raw_attribute("source_target_pairs")) {
    auto parsed = ParseSourceTargetPairs(*pairs);
    if (!parsed.ok()) return parsed.status().WithContext(name);
    attributes.source_target_pairs = std::move(*parsed);
  }
  auto mode = GetCollectiveOpGroupMode(attributes.channel_id.has_value(),
                                       attributes.use_global_device_ids);
  if (!mode.ok()) return mode.status().WithContext(name);
  attributes.mode = *mode;
  return attributes;
}

StatusOr<std::vector<std::vector<int64_t>>> ParticipatingDeviceGroups(
    const HloInstruction& instruction, const DeviceTopology& topology) {
  const std::string name = "%" + instruction.name();
  ASSIGN_OR_RETURN(CollectiveAttributes attributes, ReadCollectiveAttributes(instruction));
  const int64_t replicas = topology.num_replicas;
  const int64_t partitions = topology.num_partitions;
  if (IsPermute(instruction.opcode())) {
    // The pairs apply among a partition's replicas (no channel) or a replica's partitions.
    std::vector<std::vector<int64_t>> groups;
    if (attributes.mode == CollectiveOpGroupMode::kCrossReplica) {
      for (int64_t p = 0; p < partitions; ++p) {
        groups.emplace_back();
        for (int64_t r = 0; r < replicas; ++r) groups.back().push_back(topology.DeviceId(r, p));
      }
    } else {
      for (int64_t r = 0; r < replicas; ++r) {
        groups.emplace_back();
        for (int64_t p = 0; p < partitions; ++p) groups.back().push_back(topology.DeviceId(r, p));
      }
    }
    return groups;
  }
  // What the ids of a group count: replicas, partitions, or every device.
  int64_t id_count = replicas;
  std::string_view id_kind = "replica";
  if (attributes.mode == CollectiveOpGroupMode::kCrossPartition) {
    id_count = partitions;
    id_kind = "partition";
  } else if (attributes.mode == CollectiveOpGroupMode::kFlattenedId) {
    id_count = topology.num_devices();
    id_kind = "device";
  }
  std::vector<std::vector<int64_t>> id_groups = attributes.replica_groups;
  if (id_groups.empty()) {
    if (attributes.mode == CollectiveOpGroupMode::kFlattenedId) {
      return Error(fmt::format("{}: use_global_device_ids=true needs replica_groups", name));
    }
    id_groups.emplace_back(id_count);
    std::iota(id_groups[0].begin(), id_groups[0].end(), 0);
  }
  std::vector<int64_t> group_of(id_count, -1);
  for (size_t g = 0; g < id_groups.size(); ++g) {
    if (id_groups[g].empty()) {
      return Error(fmt::format("{}: replica_groups={} has an empty group", name,
                               DisplayText(ReplicaGroupsToString(id_groups), 200)));
    }
    if (NeedsEqualGroups(instruction.opcode()) && id_groups[g].size() != id_groups[0].size()) {
      return Error(fmt::format("{}: replica_groups={} has groups of {} and {} {}s; {} needs groups "
                               "of one size", name, DisplayText(ReplicaGroupsToString(id_groups), 200),
                               id_groups[0].size(), id_groups[g].size(), id_kind,
                               HloOpcodeString(instruction.opcode())));
    }
    for (int64_t id : id_groups[g]) {
      if (id < 0 || id >= id_count) {
        return Error(fmt::format("{}: replica_groups={} names {} {}, but there are {} {}s ({} "
                                 "replicas x {} partitions, {} mode)", name,
                                 DisplayText(ReplicaGroupsToString(id_groups), 200), id_kind, id, id_count, id_kind,
                                 replicas, partitions,
                                 CollectiveOpGroupModeName(attributes.mode)));
      }
      if (group_of[id] != -1) {
        return Error(fmt::format("{}: replica_groups={} puts {} {} in two groups", name,
                                 DisplayText(ReplicaGroupsToString(id_groups), 200), id_kind, id));
      }
      group_of[id] = static_cast<int64_t>(g);
    }
  }
  std::vector<int64_t> missing;
  for (int64_t id = 0; id < id_count; ++id) {
    if (group_of[id] == -1) missing.push_back(id);
  }
  if (!missing.empty()) {
    return Error(fmt::format("{}: replica_groups={} leaves out {} {} of the {} ({} replicas x {} "
                             "partitions, {} mode)", name, DisplayText(ReplicaGroupsToString(id_groups), 200),
                             std::string(id_kind) + (missing.size() > 1 ? "s" : ""),
                             DeviceList(missing), id_count, replicas, partitions,
                             CollectiveOpGroupModeName(attributes.mode)));
  }
  // Device groups, in XLA's order within each.
  std::vector<std::vector<int64_t>> groups;
  switch (attributes.mode) {
    case CollectiveOpGroupMode::kCrossReplica:
      for (int64_t p = 0; p < partitions; ++p) {
        for (const auto& ids : id_groups) {
          groups.emplace_back();
          for (int64_t r : ids) groups.back().push_back(topology.DeviceId(r, p));
        }
      }
      break;
    case CollectiveOpGroupMode::kCrossPartition:
      for (int64_t r = 0; r < replicas; ++r) {
        for (const auto& ids : id_groups) {
          groups.emplace_back();
          for (int64_t p : ids) groups.back().push_back(topology.DeviceId(r, p));
        }
      }
      break;
    case CollectiveOpGroupMode::kCrossReplicaAndPartition:
      for (const auto& ids : id_groups) {
        groups.emplace_back();
        for (int64_t r : ids) {
          for (int64_t p = 0; p < partitions; ++p) groups.back().push_back(topology.DeviceId(r, p));
        }
      }
      break;
    case CollectiveOpGroupMode::kFlattenedId:
      groups = id_groups;
      break;
  }
  return groups;
}

StatusOr<std::vector<int64_t>> PermuteSources(const HloInstruction& instruction,
                                              const DeviceTopology& topology) {
  const std::string name = "%" + instruction.name();
  ASSIGN_OR_RETURN(CollectiveAttributes attributes, ReadCollectiveAttributes(instruction));
  const bool cross_replica = attributes.mode == CollectiveOpGroupMode::kCrossReplica;
  const int64_t id_count = cross_replica ? topology.num_replicas : topology.num_partitions;
  std::vector<int64_t> source_of(id_count, -1);
  std::vector<bool> is_source(id_count, false);
  for (const auto& [source, target] : attributes.source_target_pairs) {
    for (int64_t id : {source, target}) {
      if (id < 0 || id >= id_count) {
        return Error(fmt::format("{}: source_target_pairs names {} {}, but there are {}", name,
                                 cross_replica ? "replica" : "partition", id, id_count));
      }
    }
    if (is_source[source]) {
      return Error(fmt::format("{}: source_target_pairs uses {} {} as a source twice", name,
                               cross_replica ? "replica" : "partition", source));
    }
    if (source_of[target] != -1) {
      return Error(fmt::format("{}: source_target_pairs sends to {} {} twice (from {} and {})",
                               name, cross_replica ? "replica" : "partition", target,
                               source_of[target], source));
    }
    is_source[source] = true;
    source_of[target] = source;
  }
  std::vector<int64_t> sources(topology.num_devices(), -1);
  for (int64_t r = 0; r < topology.num_replicas; ++r) {
    for (int64_t p = 0; p < topology.num_partitions; ++p) {
      const int64_t id = cross_replica ? r : p;
      if (source_of[id] == -1) continue;
      sources[topology.DeviceId(r, p)] = cross_replica ? topology.DeviceId(source_of[id], p)
                                                       : topology.DeviceId(r, source_of[id]);
    }
  }
  return sources;
}

std::string HeaderTopologyHint(const HloInstruction& instruction, const DeviceTopology& topology) {
  const HloComputation* computation = instruction.parent();
  const HloModule* module = computation == nullptr ? nullptr : computation->parent();
  if (module == nullptr) return "";
  std::vector<std::string> differ;
  for (const RawAttribute& attribute : module->header_attributes()) {
    const int64_t given = attribute.key == "replica_count"    ? topology.num_replicas
                          : attribute.key == "num_partitions" ? topology.num_partitions
                                                              : -1;
    if (given >= 0 && attribute.value != std::to_string(given)) {
      differ.push_back(attribute.key + "=" + attribute.value);
    }
  }
  if (differ.empty()) return "";
  return fmt::format("; the module's header says {}", fmt::join(differ, ", "));
}

Status CheckModuleCollectives(const HloModule& module, const DeviceTopology& topology) {
  std::map<int64_t, const HloInstruction*> channels;
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* instruction : computation->instructions()) {
      if (!Meets(instruction->opcode())) continue;
      ASSIGN_OR_RETURN(CollectiveAttributes attributes, ReadCollectiveAttributes(*instruction));
      if (attributes.channel_id) {
        auto [it, inserted] = channels.emplace(*attributes.channel_id, instruction);
        if (!inserted) {
          return Error(fmt::format("channel_id={} is used by both %{} and %{}: each collective "
                                   "needs its own channel", *attributes.channel_id,
                                   it->second->name(), instruction->name()));
        }
      }
      Status fits = ParticipatingDeviceGroups(*instruction, topology).status();
      if (fits.ok() && IsPermute(instruction->opcode())) {
        fits = PermuteSources(*instruction, topology).status();
      }
      if (!fits.ok()) return Error(fits.message() + HeaderTopologyHint(*instruction, topology));
    }
  }
  return OkStatus();
}

}  // namespace xlens

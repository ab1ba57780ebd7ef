// libFuzzer target for the small readers of sharded modules' attribute values: `sharding=`
// (HloSharding and its tile assignment), Shardy's meshes and shardings, `replica_groups` (list,
// iota and mesh-axes forms), `source_target_pairs`, frontend attributes, and the collective
// attributes of an instruction read through them. The first byte, a digit in the seeds, picks the reader; the rest is
// the text (for Shardy's shardings, the meshes, a newline, then the sharding; for an instruction's
// collective attributes, replica_groups, a newline, then channel_id). Any text must give a value
// or one clean line: no crash, no sanitizer report, no hang, no allocation the text does not
// justify; a sharding or groups that read must print and read back the same.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/instruction.h"
#include "compiler/hlo/sharding.h"
#include "compiler/hlo/shardy_shardings.h"
#include "compiler/hlo/tile_assignment.h"
#include "compiler/support/terminal_text.h"

namespace {

[[noreturn]] void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, xlens::EscapeForTerminal(detail).c_str());
  std::abort();
}

// A refusal is a message of bounded length, the input's bytes escaped: one line, or for the
// readers on a TextCursor `source:line:col: message` with the text's line and a caret under it.
void CheckMessage(const xlens::Status& status) {
  const std::string& message = status.message();
  if (message.empty()) Die("empty message", "");
  if (message.size() > 2000) Die("message longer than 2000 bytes", message.substr(0, 200));
  size_t lines = 0, start = 0;
  while (start <= message.size()) {
    size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    const std::string line = message.substr(start, end - start);
    if (xlens::EscapeForTerminal(line) != line) Die("raw bytes in the message", message);
    ++lines;
    start = end + 1;
  }
  if (lines != 1 && lines != 3) Die("message of neither one line nor a line with its caret", message);
}

template <typename T>
bool Check(const xlens::StatusOr<T>& result) {
  if (!result.ok()) CheckMessage(result.status());
  return result.ok();
}

// A sharding must not name more devices than a module could run on, and must print and read
// back to itself.
void RoundTrip(const xlens::HloSharding& sharding) {
  const std::string printed = sharding.ToString();
  auto again = xlens::HloSharding::Parse(printed, "printed");
  if (!again.ok()) Die("a printed sharding does not read back", printed + ": " + again.status().message());
  if (!(*again == sharding)) Die("read(print(x)) != x", printed);
}

xlens::ShardyMeshes DefaultMeshes() {
  xlens::ShardyMeshes meshes;
  meshes["mesh"].axes = {{"x", 2}, {"y", 2}};
  return meshes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int which = static_cast<uint8_t>(data[0] - '0') % 7;  // '0' to '6' in the seeds
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t newline = text.find('\n');
  const std::string_view first = text.substr(0, newline);
  const std::string_view second = newline == std::string_view::npos ? "" : text.substr(newline + 1);
  switch (which) {
    case 0: {
      auto sharding = xlens::HloSharding::Parse(text, "fuzz");
      if (Check(sharding)) RoundTrip(*sharding);
      break;
    }
    case 1: {
      auto tiles = xlens::TileAssignment::Parse(text, "fuzz");
      if (Check(tiles) && tiles->num_elements() > static_cast<int64_t>(1) << 24) {
        Die("a tile assignment of more devices than any module runs on", std::string(text.substr(0, 200)));
      }
      break;
    }
    case 2: {
      auto meshes = xlens::ParseShardyMeshes(text, "fuzz");
      Check(meshes);
      break;
    }
    case 3: {
      auto meshes = xlens::ParseShardyMeshes(first, "fuzz");
      const xlens::ShardyMeshes use = meshes.ok() ? *meshes : DefaultMeshes();
      auto sharding = xlens::ShardingFromShardy(second, use, "fuzz");
      if (Check(sharding)) RoundTrip(*sharding);
      auto per_value = xlens::ShardingsFromShardyPerValue(second, use, "fuzz");
      if (Check(per_value)) {
        for (const auto& s : *per_value) RoundTrip(s);
      }
      break;
    }
    case 4: {
      auto groups = xlens::ParseReplicaGroups(text);
      if (Check(groups)) {
        const std::string printed = xlens::ReplicaGroupsToString(*groups);
        auto again = xlens::ParseReplicaGroups(printed);
        if (!again.ok()) Die("printed replica groups do not read back", printed);
        // `{}` and `{{}}`-like forms may read as no groups; otherwise the groups are the same.
        if (!groups->empty() && *again != *groups) Die("read(print(groups)) != groups", printed);
      }
      Check(xlens::ParseSourceTargetPairs(text));
      break;
    }
    case 5: {
      Check(xlens::FrontendAttribute(text, "xla.sdy.sharding"));
      break;
    }
    case 6: {
      // An all-reduce on 2 replicas x 4 partitions whose attributes are the text.
      xlens::HloInstruction instr(xlens::HloOpcode::kAllReduce,
                                  xlens::Shape(xlens::PrimitiveType::F32, {4}));
      instr.SetRawAttribute("replica_groups", std::string(first));
      if (!second.empty()) instr.SetRawAttribute("channel_id", std::string(second));
      instr.SetRawAttribute("use_global_device_ids", "true");
      if (Check(xlens::ReadCollectiveAttributes(instr))) {
        xlens::DeviceTopology topology{2, 4};
        Check(xlens::ParticipatingDeviceGroups(instr, topology));
      }
      break;
    }
  }
  return 0;
}

// Shardy's annotations as jax writes them into HLO text, read as HloShardings.
//
// A module sharded through Shardy carries its meshes in the header's frontend attributes
//   frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["data"=2, "model"=4]>}}
// and each annotated value a sharding over named mesh axes, one list of axes per dimension:
//   frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\"data\"}, {}]>"}
//   (xla.sdy.FuncResultSharding:) "#sdy.sharding_per_value<[<@mesh, [{\"data\"}, {}]>]>"
//
// The conversion is XLA's: the mesh is iota over the axis sizes (or the mesh's device_ids),
// transposed so that each dimension's axes come first, in order, followed by the axes no
// dimension uses, which become a replicated last tile dim. Sub-axes ("x":(2)4) split their axis;
// open dims ({?}, {"x", ?}) and priorities (p0) do not change where data lives and are ignored.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/module.h"
#include "compiler/hlo/sharding.h"
#include "compiler/support/status.h"

namespace xlens {

struct ShardyMesh {
  std::vector<std::pair<std::string, int64_t>> axes;  // name, size; major to minor
  std::vector<int64_t> device_ids;                    // empty: iota over the axes
};
using ShardyMeshes = std::map<std::string, ShardyMesh, std::less<>>;

// `{mesh = #sdy.mesh<["a"=2, "b"=4]>, other = #sdy.mesh<[...], device_ids=[...]>}`.
StatusOr<ShardyMeshes> ParseShardyMeshes(std::string_view text, std::string source = "xla.sdy.meshes");
// `#sdy.sharding<@mesh, [{"a"}, {}]>` (or an inline `mesh<[...]>` for `@mesh`).
StatusOr<HloSharding> ShardingFromShardy(std::string_view text, const ShardyMeshes& meshes,
                                         std::string source = "xla.sdy.sharding");
// `#sdy.sharding_per_value<[<@mesh, [...]>, ...]>`: one sharding per value.
StatusOr<std::vector<HloSharding>> ShardingsFromShardyPerValue(
    std::string_view text, const ShardyMeshes& meshes, std::string source = "xla.sdy.sharding");

// The value of `key` in a frontend_attributes text `{k="v", k2={...}}` (strings unescaped, other
// values verbatim); nullopt when absent.
StatusOr<std::optional<std::string>> FrontendAttribute(std::string_view attributes,
                                                       std::string_view key);
// The module's meshes (empty when its header names none).
StatusOr<ShardyMeshes> ModuleShardyMeshes(const HloModule& module);
// The Shardy sharding `instr` carries in xla.sdy.sharding, converted: one sharding per value
// (one for a sharding, several for sharding_per_value); empty when it carries none.
StatusOr<std::vector<HloSharding>> InstructionShardySharding(const HloInstruction& instr,
                                                             const ShardyMeshes& meshes);

}  // namespace xlens

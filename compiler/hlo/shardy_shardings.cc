#include "compiler/hlo/shardy_shardings.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/instruction.h"
#include "compiler/hlo/text_cursor.h"
#include "compiler/support/terminal_text.h"

namespace xlens {
namespace {

// A mesh axis name: a quoted string (as Shardy writes them) or a bare name.
StatusOr<std::string> ReadAxisName(TextCursor& cursor) {
  if (cursor.Peek() == '"') return cursor.ReadString();
  std::string_view name = cursor.ReadName();
  if (name.empty()) {
    return cursor.Error(fmt::format("expected a mesh axis name, found {}", cursor.Describe()));
  }
  return std::string(name);
}

// A mesh's name: a quoted string or a bare name (empty when there is neither).
StatusOr<std::string> ReadMeshName(TextCursor& cursor) {
  if (cursor.Peek() == '"') return cursor.ReadString();
  return std::string(cursor.ReadName());
}

// `[...]` of ints.
StatusOr<std::vector<int64_t>> ReadIntBrackets(TextCursor& cursor, std::string_view what) {
  RETURN_IF_ERROR(cursor.Expect('[', fmt::format("to open the {}", what)));
  std::vector<int64_t> out;
  if (cursor.TryConsume(']')) return out;
  do {
    ASSIGN_OR_RETURN(int64_t v, cursor.ReadInt64(what));
    out.push_back(v);
  } while (cursor.TryConsume(','));
  RETURN_IF_ERROR(cursor.Expect(']', fmt::format("to close the {}", what)));
  return out;
}

// After `mesh<` or `#sdy.mesh<`: `["a"=2, "b"=4](, device_ids=[...])?>`.
StatusOr<ShardyMesh> ReadMeshBody(TextCursor& cursor) {
  const size_t start = cursor.Here();
  ShardyMesh mesh;
  RETURN_IF_ERROR(cursor.Expect('[', "to open the mesh axes"));
  if (!cursor.TryConsume(']')) {
    do {
      ASSIGN_OR_RETURN(std::string name, ReadAxisName(cursor));
      RETURN_IF_ERROR(cursor.Expect('=', "after a mesh axis name"));
      const size_t size_pos = cursor.Here();
      ASSIGN_OR_RETURN(int64_t size, cursor.ReadInt64("a mesh axis size"));
      if (size < 1 || size > TileAssignment::kMaxDevices) {
        return cursor.ErrorAt(size_pos, fmt::format("mesh axis \"{}\" has size {}: expected 1 to "
                                                    "{}", DisplayText(name), size, TileAssignment::kMaxDevices));
      }
      for (const auto& [other, _] : mesh.axes) {
        if (other == name) return cursor.ErrorAt(start, fmt::format("mesh axis \"{}\" is named twice",
                                                                    DisplayText(name)));
      }
      mesh.axes.emplace_back(std::move(name), size);
    } while (cursor.TryConsume(','));
    RETURN_IF_ERROR(cursor.Expect(']', "to close the mesh axes"));
  }
  if (cursor.TryConsume(',')) {
    if (!cursor.TryConsumeWord("device_ids")) {
      return cursor.Error(fmt::format("expected device_ids= in the mesh, found {}", cursor.Describe()));
    }
    RETURN_IF_ERROR(cursor.Expect('=', "after device_ids"));
    ASSIGN_OR_RETURN(mesh.device_ids, ReadIntBrackets(cursor, "mesh device ids"));
  }
  RETURN_IF_ERROR(cursor.Expect('>', "to close the mesh"));
  int64_t total = 1;
  for (const auto& [name, size] : mesh.axes) {
    if (total > TileAssignment::kMaxDevices / size) {
      return cursor.ErrorAt(start, fmt::format("mesh has more than {} devices",
                                               TileAssignment::kMaxDevices));
    }
    total *= size;
  }
  if (!mesh.device_ids.empty() && static_cast<int64_t>(mesh.device_ids.size()) != total) {
    return cursor.ErrorAt(start, fmt::format("mesh has {} devices but device_ids lists {}", total,
                                             mesh.device_ids.size()));
  }
  return mesh;
}

// One axis a dimension is sharded on: a whole mesh axis, or the sub-axis of `size` after
// `pre_size` of it ("x":(pre_size)size).
struct AxisRef {
  std::string name;
  std::optional<std::pair<int64_t, int64_t>> sub;  // pre_size, size
  size_t pos = 0;
};

StatusOr<HloSharding> Convert(TextCursor& cursor, size_t pos, const ShardyMesh& mesh,
                              const std::vector<std::vector<AxisRef>>& dims) {
  if (mesh.axes.empty()) {
    if (mesh.device_ids.size() == 1) return HloSharding::Maximal(mesh.device_ids[0]);
    return HloSharding::Replicated();
  }
  // Split every axis at the boundaries its sub-axes need: pieces major to minor.
  std::vector<std::set<int64_t>> cuts(mesh.axes.size());
  auto axis_index = [&](const AxisRef& ref) -> StatusOr<size_t> {
    for (size_t i = 0; i < mesh.axes.size(); ++i) {
      if (mesh.axes[i].first == ref.name) return i;
    }
    return cursor.ErrorAt(ref.pos, fmt::format("the mesh has no axis \"{}\"", DisplayText(ref.name)));
  };
  for (size_t a = 0; a < mesh.axes.size(); ++a) cuts[a] = {1, mesh.axes[a].second};
  for (const auto& refs : dims) {
    for (const AxisRef& ref : refs) {
      ASSIGN_OR_RETURN(size_t a, axis_index(ref));
      if (!ref.sub) continue;
      const auto [pre, size] = *ref.sub;
      const int64_t n = mesh.axes[a].second;
      if (pre < 1 || size < 1 || pre > n / size || n % (pre * size) != 0) {
        return cursor.ErrorAt(ref.pos, fmt::format("sub-axis \"{}\":({}){} does not divide the "
                                                   "axis of size {}", DisplayText(ref.name), pre, size, n));
      }
      cuts[a].insert(pre);
      cuts[a].insert(pre * size);
    }
  }
  std::vector<int64_t> reshape_dims;
  std::vector<std::vector<int64_t>> boundaries(mesh.axes.size());  // per axis, its cut points
  std::vector<size_t> first_piece(mesh.axes.size());
  for (size_t a = 0; a < mesh.axes.size(); ++a) {
    first_piece[a] = reshape_dims.size();
    boundaries[a].assign(cuts[a].begin(), cuts[a].end());
    for (size_t j = 1; j < boundaries[a].size(); ++j) {
      if (boundaries[a][j] % boundaries[a][j - 1] != 0) {
        return cursor.ErrorAt(pos, fmt::format("the sub-axes of \"{}\" do not nest",
                                               DisplayText(mesh.axes[a].first)));
      }
      reshape_dims.push_back(boundaries[a][j] / boundaries[a][j - 1]);
    }
  }
  std::vector<bool> used(reshape_dims.size(), false);
  std::vector<int> perm;
  std::vector<int64_t> tile_dims;
  for (const auto& refs : dims) {
    int64_t tiles = 1;
    for (const AxisRef& ref : refs) {
      ASSIGN_OR_RETURN(size_t a, axis_index(ref));
      const int64_t lo = ref.sub ? ref.sub->first : 1;
      const int64_t hi = ref.sub ? ref.sub->first * ref.sub->second : mesh.axes[a].second;
      for (size_t j = 1; j < boundaries[a].size(); ++j) {
        if (boundaries[a][j - 1] < lo || boundaries[a][j] > hi) continue;
        const size_t piece = first_piece[a] + j - 1;
        if (used[piece]) {
          return cursor.ErrorAt(ref.pos, fmt::format("mesh axis \"{}\" shards two dimensions",
                                                     DisplayText(ref.name)));
        }
        used[piece] = true;
        perm.push_back(static_cast<int>(piece));
        tiles *= reshape_dims[piece];
      }
    }
    tile_dims.push_back(tiles);
  }
  int64_t replicated = 1;
  for (size_t piece = 0; piece < reshape_dims.size(); ++piece) {
    if (used[piece]) continue;
    perm.push_back(static_cast<int>(piece));
    replicated *= reshape_dims[piece];
  }
  if (std::all_of(tile_dims.begin(), tile_dims.end(), [](int64_t t) { return t == 1; })) {
    return HloSharding::Replicated();
  }
  const bool replicate_last = replicated > 1;
  if (replicate_last) tile_dims.push_back(replicated);
  ASSIGN_OR_RETURN(TileAssignment tiles, TileAssignment::Iota(tile_dims, reshape_dims, perm));
  if (!mesh.device_ids.empty()) {
    std::vector<int64_t> devices;
    for (int64_t d : tiles.devices()) devices.push_back(mesh.device_ids[static_cast<size_t>(d)]);
    auto listed = TileAssignment::FromDevices(tile_dims, std::move(devices));
    if (!listed.ok()) return cursor.ErrorAt(pos, listed.status().message());
    tiles = std::move(*listed);
  }
  return HloSharding::Tiled(std::move(tiles), replicate_last);
}

// After the `<` of a sharding: `@mesh, [{"a"}, {}](, replicated={...})*>`.
StatusOr<HloSharding> ReadShardingBody(TextCursor& cursor, const ShardyMeshes& meshes) {
  const size_t start = cursor.Here();
  ShardyMesh inline_mesh;
  const ShardyMesh* mesh = nullptr;
  if (cursor.TryConsume('@')) {
    const size_t name_pos = cursor.Here();
    ASSIGN_OR_RETURN(std::string name, ReadMeshName(cursor));
    auto it = meshes.find(name);
    if (it == meshes.end()) {
      return cursor.ErrorAt(name_pos, fmt::format("no mesh named @{} in the module's "
                                                  "xla.sdy.meshes", DisplayText(name)));
    }
    mesh = &it->second;
  } else if (cursor.TryConsume("mesh<")) {
    ASSIGN_OR_RETURN(inline_mesh, ReadMeshBody(cursor));
    mesh = &inline_mesh;
  } else {
    return cursor.Error(fmt::format("expected @mesh or mesh<...> in a Shardy sharding, found {}",
                                    cursor.Describe()));
  }
  RETURN_IF_ERROR(cursor.Expect(',', "after the sharding's mesh"));
  RETURN_IF_ERROR(cursor.Expect('[', "to open the dimension shardings"));
  std::vector<std::vector<AxisRef>> dims;
  if (!cursor.TryConsume(']')) {
    do {
      RETURN_IF_ERROR(cursor.Expect('{', "to open a dimension's axes"));
      std::vector<AxisRef> refs;
      if (!cursor.TryConsume('}')) {
        do {
          if (cursor.TryConsume('?')) continue;  // an open dimension: propagation may add axes
          AxisRef ref;
          ref.pos = cursor.Here();
          ASSIGN_OR_RETURN(ref.name, ReadAxisName(cursor));
          if (cursor.TryConsume(':')) {
            RETURN_IF_ERROR(cursor.Expect('(', "to open a sub-axis pre-size"));
            ASSIGN_OR_RETURN(int64_t pre, cursor.ReadInt64("a sub-axis pre-size"));
            RETURN_IF_ERROR(cursor.Expect(')', "to close a sub-axis pre-size"));
            ASSIGN_OR_RETURN(int64_t size, cursor.ReadInt64("a sub-axis size"));
            ref.sub = std::make_pair(pre, size);
          }
          refs.push_back(std::move(ref));
        } while (cursor.TryConsume(','));
        RETURN_IF_ERROR(cursor.Expect('}', "to close a dimension's axes"));
      }
      // A priority (p0, p1, ...) after the braces says when propagation may change the dim.
      const size_t here = cursor.pos();
      if (cursor.Peek() == 'p') {
        cursor.set_pos(cursor.Here() + 1);
        if (!cursor.ReadInt64("a dimension priority").ok()) cursor.set_pos(here);
      }
      dims.push_back(std::move(refs));
    } while (cursor.TryConsume(','));
    RETURN_IF_ERROR(cursor.Expect(']', "to close the dimension shardings"));
  }
  // replicated={...} and unreduced={...} name axes no dimension uses: they change nothing here.
  while (cursor.TryConsume(',')) {
    std::string_view key = cursor.ReadKey();
    if (key != "replicated" && key != "unreduced" && key != "reduced") {
      return cursor.Error(fmt::format("expected replicated=, unreduced= or '>' in a Shardy "
                                      "sharding, found {}", cursor.Describe()));
    }
    RETURN_IF_ERROR(cursor.Expect('=', fmt::format("after {}", key)));
    RETURN_IF_ERROR(cursor.Expect('{', fmt::format("to open the {} axes", key)));
    if (!cursor.TryConsume('}')) {
      do {
        ASSIGN_OR_RETURN(std::string axis, ReadAxisName(cursor));
        if (cursor.TryConsume(':')) {
          RETURN_IF_ERROR(cursor.Expect('(', "to open a sub-axis pre-size"));
          RETURN_IF_ERROR(cursor.ReadInt64("a sub-axis pre-size").status());
          RETURN_IF_ERROR(cursor.Expect(')', "to close a sub-axis pre-size"));
          RETURN_IF_ERROR(cursor.ReadInt64("a sub-axis size").status());
        }
      } while (cursor.TryConsume(','));
      RETURN_IF_ERROR(cursor.Expect('}', fmt::format("to close the {} axes", key)));
    }
  }
  RETURN_IF_ERROR(cursor.Expect('>', "to close the Shardy sharding"));
  return Convert(cursor, start, *mesh, dims);
}

Status ExpectEnd(TextCursor& cursor, std::string_view what) {
  cursor.SkipWhitespace();
  if (cursor.AtEnd()) return OkStatus();
  return cursor.Error(fmt::format("expected the end of the {}, found {}", what, cursor.Describe()));
}

}  // namespace

StatusOr<ShardyMeshes> ParseShardyMeshes(std::string_view text, std::string source) {
  TextCursor cursor(text, std::move(source));
  ShardyMeshes meshes;
  RETURN_IF_ERROR(cursor.Expect('{', "to open the meshes"));
  if (!cursor.TryConsume('}')) {
    do {
      const size_t name_pos = cursor.Here();
      ASSIGN_OR_RETURN(std::string name, ReadMeshName(cursor));
      if (name.empty()) {
        return cursor.Error(fmt::format("expected a mesh name, found {}", cursor.Describe()));
      }
      RETURN_IF_ERROR(cursor.Expect('=', "after a mesh name"));
      if (!cursor.TryConsume("#sdy.mesh<")) {
        return cursor.Error(fmt::format("expected #sdy.mesh<...>, found {}", cursor.Describe()));
      }
      ASSIGN_OR_RETURN(ShardyMesh mesh, ReadMeshBody(cursor));
      if (!meshes.emplace(name, std::move(mesh)).second) {
        return cursor.ErrorAt(name_pos, fmt::format("mesh {} is defined twice", name));
      }
    } while (cursor.TryConsume(','));
    RETURN_IF_ERROR(cursor.Expect('}', "to close the meshes"));
  }
  RETURN_IF_ERROR(ExpectEnd(cursor, "meshes"));
  return meshes;
}

StatusOr<HloSharding> ShardingFromShardy(std::string_view text, const ShardyMeshes& meshes,
                                         std::string source) {
  TextCursor cursor(text, std::move(source));
  if (!cursor.TryConsume("#sdy.sharding<")) {
    return cursor.Error(fmt::format("expected #sdy.sharding<...>, found {}", cursor.Describe()));
  }
  ASSIGN_OR_RETURN(HloSharding out, ReadShardingBody(cursor, meshes));
  RETURN_IF_ERROR(ExpectEnd(cursor, "Shardy sharding"));
  return out;
}

StatusOr<std::vector<HloSharding>> ShardingsFromShardyPerValue(std::string_view text,
                                                               const ShardyMeshes& meshes,
                                                               std::string source) {
  TextCursor cursor(text, std::move(source));
  if (!cursor.TryConsume("#sdy.sharding_per_value<")) {
    return cursor.Error(fmt::format("expected #sdy.sharding_per_value<...>, found {}",
                                    cursor.Describe()));
  }
  RETURN_IF_ERROR(cursor.Expect('[', "to open the per-value shardings"));
  std::vector<HloSharding> out;
  if (!cursor.TryConsume(']')) {
    do {
      RETURN_IF_ERROR(cursor.Expect('<', "to open a value's sharding"));
      ASSIGN_OR_RETURN(HloSharding s, ReadShardingBody(cursor, meshes));
      out.push_back(std::move(s));
    } while (cursor.TryConsume(','));
    RETURN_IF_ERROR(cursor.Expect(']', "to close the per-value shardings"));
  }
  RETURN_IF_ERROR(cursor.Expect('>', "to close the per-value shardings"));
  RETURN_IF_ERROR(ExpectEnd(cursor, "per-value Shardy shardings"));
  return out;
}

StatusOr<std::optional<std::string>> FrontendAttribute(std::string_view attributes,
                                                       std::string_view key) {
  TextCursor cursor(attributes, "frontend_attributes");
  RETURN_IF_ERROR(cursor.Expect('{', "to open the frontend attributes"));
  if (cursor.TryConsume('}')) return std::optional<std::string>();
  do {
    std::string_view name = cursor.ReadName();
    if (name.empty()) {
      return cursor.Error(fmt::format("expected a frontend attribute name, found {}",
                                      cursor.Describe()));
    }
    RETURN_IF_ERROR(cursor.Expect('=', "after a frontend attribute name"));
    std::string value;
    if (cursor.Peek() == '"') {
      ASSIGN_OR_RETURN(value, cursor.ReadString());
    } else {
      ASSIGN_OR_RETURN(std::string_view raw, cursor.ReadRawValue());
      value = std::string(raw);
    }
    if (name == key) return std::optional<std::string>(std::move(value));
  } while (cursor.TryConsume(','));
  RETURN_IF_ERROR(cursor.Expect('}', "to close the frontend attributes"));
  return std::optional<std::string>();
}

StatusOr<ShardyMeshes> ModuleShardyMeshes(const HloModule& module) {
  for (const RawAttribute& attr : module.header_attributes()) {
    if (attr.key != "frontend_attributes") continue;
    ASSIGN_OR_RETURN(std::optional<std::string> meshes,
                     FrontendAttribute(attr.value, "xla.sdy.meshes"));
    if (meshes) return ParseShardyMeshes(*meshes);
  }
  return ShardyMeshes();
}

StatusOr<std::vector<HloSharding>> InstructionShardySharding(const HloInstruction& instr,
                                                             const ShardyMeshes& meshes) {
  const std::string* attributes = instr.raw_attribute("frontend_attributes");
  if (attributes == nullptr) return std::vector<HloSharding>();
  ASSIGN_OR_RETURN(std::optional<std::string> text,
                   FrontendAttribute(*attributes, "xla.sdy.sharding"));
  if (!text) return std::vector<HloSharding>();
  const std::string source = "xla.sdy.sharding of %" + instr.name();
  if (text->starts_with("#sdy.sharding_per_value<")) {
    return ShardingsFromShardyPerValue(*text, meshes, source);
  }
  ASSIGN_OR_RETURN(HloSharding one, ShardingFromShardy(*text, meshes, source));
  return std::vector<HloSharding>{std::move(one)};
}

}  // namespace xlens

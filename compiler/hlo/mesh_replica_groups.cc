#include "compiler/hlo/mesh_replica_groups.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "compiler/hlo/text_cursor.h"
#include "compiler/hlo/tile_assignment.h"
#include "compiler/hlo/value_reader.h"
#include "compiler/support/terminal_text.h"

namespace xlens {
namespace {

// 'name' (or a bare name).
StatusOr<std::string> ReadAxisName(TextCursor& reader) {
  const std::string_view text = reader.text();
  size_t pos = reader.Here();
  if (reader.TryConsume("'")) {
    pos = reader.pos();
    const size_t end = text.find('\'', pos);
    if (end == std::string_view::npos) return Error("an axis name without its closing quote");
    reader.set_pos(end + 1);
    return std::string(text.substr(pos, end - pos));
  }
  const size_t start = pos;
  while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '_')) {
    ++pos;
  }
  reader.set_pos(pos);
  if (pos == start) return Error(fmt::format("expected an axis name at offset {}", start));
  return std::string(text.substr(start, pos - start));
}

// The text up to the parenthesis that closes the one just read.
StatusOr<std::string_view> ReadParenthesized(TextCursor& reader) {
  const std::string_view text = reader.text();
  int depth = 1;
  const size_t start = reader.pos();
  for (size_t pos = start; pos < text.size(); ++pos) {
    if (text[pos] == '(') ++depth;
    if (text[pos] == ')' && --depth == 0) {
      reader.set_pos(pos + 1);
      return text.substr(start, pos - start);
    }
  }
  reader.set_pos(text.size());
  return Error("device_ids=( without its closing parenthesis");
}

struct MeshAxisRef {
  int64_t axis = 0;
  std::optional<std::pair<int64_t, int64_t>> sub;  // pre, size
};

// How one mesh axis is cut for the listed references to it: the sizes it reads as, major to
// minor, and which of them each reference (in the order listed) is.
struct AxisCut {
  std::vector<int64_t> sizes;
  std::vector<int64_t> referenced;  // per reference to this axis, in the order listed
};

StatusOr<AxisCut> CutAxis(int64_t full, const std::vector<MeshAxisRef>& refs) {
  AxisCut cut;
  if (refs.size() == 1 && !refs[0].sub) {
    cut.sizes = {full};
    cut.referenced = {0};
    return cut;
  }
  std::vector<size_t> order(refs.size());
  std::iota(order.begin(), order.end(), 0);
  for (const MeshAxisRef& ref : refs) {
    if (!ref.sub) return Error("an axis listed whole and in parts");
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return refs[a].sub->first < refs[b].sub->first; });
  cut.referenced.assign(refs.size(), 0);
  int64_t covered = 1;  // the product of the parts so far, major first
  for (size_t k : order) {
    const auto [pre, size] = *refs[k].sub;
    if (pre < covered || pre % covered != 0 || size < 1) {
      return Error(fmt::format("sub-axis :({}){} overlaps another or does not divide the axis",
                               pre, size));
    }
    if (pre != covered) cut.sizes.push_back(pre / covered);
    cut.referenced[k] = static_cast<int64_t>(cut.sizes.size());
    cut.sizes.push_back(size);
    covered = pre * size;
  }
  if (full % covered != 0) {
    return Error(fmt::format("sub-axes of {} ids do not divide the axis of {}", covered, full));
  }
  if (covered != full) cut.sizes.push_back(full / covered);
  return cut;
}

StatusOr<std::vector<std::vector<int64_t>>> Expand(std::string_view text) {
  TextCursor reader(text, "replica_groups");
  RETURN_IF_ERROR(value::Expect(reader, "mesh["));
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  int64_t total = 1;
  while (true) {
    ASSIGN_OR_RETURN(std::string name, ReadAxisName(reader));
    RETURN_IF_ERROR(value::Expect(reader, "="));
    ASSIGN_OR_RETURN(int64_t size, value::ReadInt(reader, /*allow_minus=*/false));
    if (size < 1 || size > TileAssignment::kMaxDevices) {
      return Error(fmt::format("axis '{}' has size {}", DisplayText(name), size));
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return Error(fmt::format("axis '{}' is named twice", DisplayText(name)));
    }
    total *= size;
    if (total > TileAssignment::kMaxDevices) return Error("more devices than any mesh holds");
    names.push_back(std::move(name));
    sizes.push_back(size);
    if (reader.TryConsume("]")) break;
    RETURN_IF_ERROR(value::Expect(reader, ","));
  }
  std::vector<int64_t> devices(total);
  std::iota(devices.begin(), devices.end(), 0);
  if (reader.TryConsume(",")) {
    RETURN_IF_ERROR(value::Expect(reader, "device_ids=("));
    ASSIGN_OR_RETURN(std::string_view ids, ReadParenthesized(reader));
    ASSIGN_OR_RETURN(TileAssignment assignment, TileAssignment::Parse(ids, "device_ids"));
    if (assignment.num_elements() != total) {
      return Error(fmt::format("device_ids holds {} devices, the mesh {}",
                               assignment.num_elements(), total));
    }
    devices = assignment.devices();
  }
  RETURN_IF_ERROR(value::Expect(reader, "{"));
  std::vector<MeshAxisRef> refs;
  if (!reader.TryConsume("}")) {
    while (true) {
      ASSIGN_OR_RETURN(std::string name, ReadAxisName(reader));
      auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end()) return Error(fmt::format("axis '{}' is not in the mesh", DisplayText(name)));
      MeshAxisRef ref{static_cast<int64_t>(it - names.begin()), std::nullopt};
      if (reader.TryConsume(":")) {
        RETURN_IF_ERROR(value::Expect(reader, "("));
        ASSIGN_OR_RETURN(int64_t pre, value::ReadInt(reader, /*allow_minus=*/false));
        RETURN_IF_ERROR(value::Expect(reader, ")"));
        ASSIGN_OR_RETURN(int64_t size, value::ReadInt(reader, /*allow_minus=*/false));
        if (pre < 1 || size < 1) return Error("a sub-axis of size 0");
        ref.sub = {pre, size};
      }
      refs.push_back(ref);
      if (reader.TryConsume("}")) break;
      RETURN_IF_ERROR(value::Expect(reader, ","));
    }
  }
  if (!value::AtEnd(reader)) return Error("unexpected text after the axes");

  // Each mesh axis cut into the parts its references name; the listed parts go last, in order.
  std::vector<int64_t> part_sizes;
  std::vector<int64_t> grouped;  // indices into part_sizes, in the order listed
  std::vector<int64_t> part_of_ref(refs.size());
  for (int64_t axis = 0; axis < static_cast<int64_t>(sizes.size()); ++axis) {
    std::vector<MeshAxisRef> mine;
    std::vector<size_t> which;
    for (size_t k = 0; k < refs.size(); ++k) {
      if (refs[k].axis == axis) {
        mine.push_back(refs[k]);
        which.push_back(k);
      }
    }
    const int64_t offset = static_cast<int64_t>(part_sizes.size());
    if (mine.empty()) {
      part_sizes.push_back(sizes[axis]);
      continue;
    }
    auto cut = CutAxis(sizes[axis], mine);
    if (!cut.ok()) return Error(fmt::format("axis '{}': {}", DisplayText(names[axis]), cut.status().message()));
    for (size_t j = 0; j < which.size(); ++j) part_of_ref[which[j]] = offset + cut->referenced[j];
    part_sizes.insert(part_sizes.end(), cut->sizes.begin(), cut->sizes.end());
  }
  std::vector<bool> is_grouped(part_sizes.size(), false);
  for (int64_t part : part_of_ref) {
    if (is_grouped[part]) return Error("an axis is listed twice");
    is_grouped[part] = true;
  }
  std::vector<int64_t> order;  // the transposed parts: the others, then the listed
  for (size_t p = 0; p < part_sizes.size(); ++p) {
    if (!is_grouped[p]) order.push_back(static_cast<int64_t>(p));
  }
  order.insert(order.end(), part_of_ref.begin(), part_of_ref.end());
  int64_t group_size = 1;
  for (int64_t part : part_of_ref) group_size *= part_sizes[part];

  const int64_t rank = static_cast<int64_t>(part_sizes.size());
  std::vector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * part_sizes[d + 1];
  std::vector<int64_t> index(rank, 0);
  std::vector<std::vector<int64_t>> groups;
  for (int64_t n = 0; n < total; ++n) {
    if (n % group_size == 0) groups.emplace_back();
    int64_t offset = 0;
    for (int64_t d = 0; d < rank; ++d) offset += index[d] * strides[order[d]];
    groups.back().push_back(devices[offset]);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < part_sizes[order[d]]) break;
      index[d] = 0;
    }
  }
  return groups;
}

}  // namespace

bool IsMeshAxesReplicaGroups(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  return text.substr(0, 5) == "mesh[";
}

StatusOr<std::vector<std::vector<int64_t>>> ExpandMeshAxesReplicaGroups(std::string_view text) {
  return Expand(text);
}

}  // namespace xlens

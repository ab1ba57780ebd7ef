#include "compiler/hlo/sharding.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace xlens {
namespace {

std::string_view SubgroupName(HloSharding::Subgroup s) {
  return s == HloSharding::Subgroup::kManual ? "manual" : "replicated";
}

// The leaves of a shape in order, as a tuple sharding lists them.
std::vector<Shape> Leaves(const Shape& shape) {
  std::vector<Shape> leaves;
  shape.ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) { leaves.push_back(leaf); });
  return leaves;
}

}  // namespace

HloSharding HloSharding::Manual() {
  HloSharding s;
  s.kind_ = Kind::kManual;
  return s;
}

HloSharding HloSharding::Maximal(int64_t device) {
  HloSharding s;
  s.kind_ = Kind::kMaximal;
  s.device_ = device;
  return s;
}

HloSharding HloSharding::Tuple(std::vector<HloSharding> elements) {
  HloSharding s;
  s.kind_ = Kind::kTuple;
  s.elements_ = std::move(elements);
  return s;
}

HloSharding HloSharding::Tiled(TileAssignment tiles, bool replicate_last,
                               std::vector<Subgroup> subgroups) {
  // Subgroup dims of size 1 say nothing; a lone replicated subgroup is last_tile_dim_replicate.
  if (!subgroups.empty()) {
    std::vector<int64_t> dims = tiles.dims();
    const size_t first = dims.size() - subgroups.size();
    std::vector<int64_t> kept_dims(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(first));
    std::vector<Subgroup> kept;
    for (size_t i = 0; i < subgroups.size(); ++i) {
      if (dims[first + i] == 1) continue;
      kept_dims.push_back(dims[first + i]);
      kept.push_back(subgroups[i]);
    }
    if (kept_dims.empty()) kept_dims.push_back(1);
    if (kept_dims.size() != dims.size()) tiles = tiles.Reshaped(kept_dims);
    subgroups = std::move(kept);
    if (subgroups.size() == 1 && subgroups[0] == Subgroup::kReplicated) {
      subgroups.clear();
      replicate_last = true;
    }
  }
  HloSharding s;
  if (replicate_last) {
    if (tiles.dims().back() == tiles.num_elements()) return s;  // every device holds everything
    if (tiles.dims().back() == 1 && tiles.num_dimensions() > 1) {
      std::vector<int64_t> dims = tiles.dims();
      dims.pop_back();
      tiles = tiles.Reshaped(dims);
      replicate_last = false;
    }
  }
  const int64_t subgroup_dims = static_cast<int64_t>(subgroups.size());
  if (subgroup_dims > 0 && subgroups == std::vector<Subgroup>{Subgroup::kManual} &&
      tiles.dims().back() == tiles.num_elements()) {
    return Manual();  // no data dim is cut: each device has its own whole value
  }
  s.kind_ = Kind::kTiled;
  s.tiles_ = std::move(tiles);
  s.replicate_last_ = replicate_last;
  s.subgroups_ = std::move(subgroups);
  return s;
}

int64_t HloSharding::TiledDataRank() const {
  if (kind_ != Kind::kTiled) return 0;
  return tiles_.num_dimensions() - (replicate_last_ ? 1 : 0) -
         static_cast<int64_t>(subgroups_.size());
}

StatusOr<HloSharding> HloSharding::Read(TextCursor& cursor) {
  const size_t start = cursor.Here();
  RETURN_IF_ERROR(cursor.Expect('{', "to open a sharding"));
  const char next = cursor.Peek();
  if (next == '{' || next == '}') {
    std::vector<HloSharding> elements;
    if (!cursor.TryConsume('}')) {
      do {
        const size_t element_pos = cursor.Here();
        if (cursor.Peek() != '{') {
          return cursor.Error(fmt::format("expected a '{{' to open the sharding of a tuple "
                                          "element, found {}", cursor.Describe()));
        }
        // Checked before reading, so hostile nesting never recurses.
        cursor.set_pos(element_pos + 1);
        const char inner = cursor.Peek();
        cursor.set_pos(element_pos);
        if (inner == '{' || inner == '}') {
          return cursor.ErrorAt(element_pos, "a tuple sharding lists one sharding per leaf: it "
                                             "holds no tuples");
        }
        ASSIGN_OR_RETURN(HloSharding element, Read(cursor));
        elements.push_back(std::move(element));
      } while (cursor.TryConsume(','));
      RETURN_IF_ERROR(cursor.Expect('}', "to close the tuple sharding"));
    }
    return Tuple(std::move(elements));
  }

  std::optional<Kind> kind;
  size_t kind_pos = 0;
  std::optional<int64_t> device;
  std::optional<TileAssignment> tiles;
  bool replicate_last = false;
  std::optional<std::vector<Subgroup>> subgroups;
  size_t last_tile_pos = 0;
  std::string metadata;
  std::string shard_group;
  auto set_kind = [&](Kind k, size_t pos, std::string_view word) -> Status {
    if (kind.has_value()) {
      return cursor.ErrorAt(pos, fmt::format("sharding names two kinds: '{}' after another", word));
    }
    kind = k;
    kind_pos = pos;
    return OkStatus();
  };
  while (!cursor.TryConsume('}')) {
    const size_t pos = cursor.Here();
    if (cursor.AtEnd()) return cursor.ErrorAt(start, "sharding is not closed: expected '}'");
    std::string_view word = cursor.ReadKey();
    if (word.empty()) {
      return cursor.Error(fmt::format("expected a sharding attribute (replicated, maximal, manual, "
                                      "devices=, ...) or '}}', found {}", cursor.Describe()));
    }
    auto seen_twice = [&](bool twice) -> Status {
      if (!twice) return OkStatus();
      return cursor.ErrorAt(pos, fmt::format("sharding gives '{}' twice", word));
    };
    if (word == "replicated") {
      RETURN_IF_ERROR(set_kind(Kind::kReplicated, pos, word));
    } else if (word == "maximal") {
      RETURN_IF_ERROR(set_kind(Kind::kMaximal, pos, word));
    } else if (word == "manual") {
      RETURN_IF_ERROR(set_kind(Kind::kManual, pos, word));
    } else if (word == "unknown") {
      RETURN_IF_ERROR(set_kind(Kind::kUnknown, pos, word));
    } else if (word == "device") {
      RETURN_IF_ERROR(seen_twice(device.has_value()));
      RETURN_IF_ERROR(cursor.Expect('=', "after 'device'"));
      const size_t id_pos = cursor.Here();
      ASSIGN_OR_RETURN(int64_t id, cursor.ReadInt64("a device id"));
      if (id < 0) return cursor.ErrorAt(id_pos, fmt::format("device id {} is negative", id));
      device = id;
    } else if (word == "devices") {
      RETURN_IF_ERROR(seen_twice(tiles.has_value()));
      RETURN_IF_ERROR(set_kind(Kind::kTiled, pos, word));
      RETURN_IF_ERROR(cursor.Expect('=', "after 'devices'"));
      ASSIGN_OR_RETURN(tiles, TileAssignment::Read(cursor));
    } else if (word == "last_tile_dim_replicate") {
      RETURN_IF_ERROR(seen_twice(replicate_last));
      replicate_last = true;
      last_tile_pos = pos;
    } else if (word == "last_tile_dims") {
      RETURN_IF_ERROR(seen_twice(subgroups.has_value()));
      last_tile_pos = pos;
      RETURN_IF_ERROR(cursor.Expect('=', "after 'last_tile_dims'"));
      RETURN_IF_ERROR(cursor.Expect('{', "to open the last_tile_dims list"));
      subgroups.emplace();
      do {
        const size_t type_pos = cursor.Here();
        std::string_view type = cursor.ReadKey();
        if (type == "manual") {
          subgroups->push_back(Subgroup::kManual);
        } else if (type == "replicated") {
          subgroups->push_back(Subgroup::kReplicated);
        } else {
          return cursor.ErrorAt(type_pos, fmt::format("expected a subgroup kind (manual or "
                                                      "replicated) in last_tile_dims, found {}",
                                                      cursor.DescribeAt(type_pos)));
        }
      } while (cursor.TryConsume(','));
      RETURN_IF_ERROR(cursor.Expect('}', "to close the last_tile_dims list"));
    } else if (word == "metadata") {
      RETURN_IF_ERROR(seen_twice(!metadata.empty()));
      RETURN_IF_ERROR(cursor.Expect('=', "after 'metadata'"));
      if (cursor.Peek() != '{') {
        return cursor.Error(fmt::format("expected '{{' to open the sharding's metadata, found {}",
                                        cursor.Describe()));
      }
      ASSIGN_OR_RETURN(std::string_view raw, cursor.ReadRawValue());
      metadata = std::string(raw);
    } else if (word == "shard_as" || word == "shard_like") {
      RETURN_IF_ERROR(seen_twice(!shard_group.empty()));
      ASSIGN_OR_RETURN(int64_t group, cursor.ReadInt64(fmt::format("the {} group id", word)));
      shard_group = fmt::format("{} {}", word, group);
    } else {
      return cursor.ErrorAt(pos, fmt::format("unknown sharding attribute '{}': expected replicated, "
                                             "maximal, manual, unknown, device=, devices=, "
                                             "last_tile_dim_replicate, last_tile_dims=, metadata=, "
                                             "shard_as or shard_like", word));
    }
  }

  if (!kind.has_value()) {
    return cursor.ErrorAt(start, "sharding names no kind: expected replicated, maximal, manual, "
                                 "unknown or devices=");
  }
  if (device.has_value() && *kind != Kind::kMaximal) {
    return cursor.ErrorAt(start, "'device=' belongs to a maximal sharding ({maximal device=N})");
  }
  if ((replicate_last || subgroups.has_value()) && *kind != Kind::kTiled) {
    return cursor.ErrorAt(last_tile_pos, "last_tile_dim_replicate and last_tile_dims belong to a "
                                         "tiled sharding (devices=...)");
  }
  HloSharding out;
  switch (*kind) {
    case Kind::kReplicated: break;
    case Kind::kManual: out = Manual(); break;
    case Kind::kUnknown: out.kind_ = Kind::kUnknown; break;
    case Kind::kMaximal:
      if (!device.has_value()) {
        return cursor.ErrorAt(kind_pos, "a maximal sharding names its device: {maximal device=N}");
      }
      out = Maximal(*device);
      break;
    case Kind::kTiled: {
      if (replicate_last && subgroups.has_value()) {
        return cursor.ErrorAt(last_tile_pos, "sharding gives both last_tile_dim_replicate and "
                                             "last_tile_dims");
      }
      const size_t trailing = replicate_last ? 1 : (subgroups ? subgroups->size() : 0);
      if (trailing > static_cast<size_t>(tiles->num_dimensions())) {
        return cursor.ErrorAt(last_tile_pos, fmt::format(
            "sharding has {} subgroup dims but its tile assignment only {} dims", trailing,
            tiles->num_dimensions()));
      }
      out = Tiled(std::move(*tiles), replicate_last, subgroups.value_or(std::vector<Subgroup>{}));
      break;
    }
    case Kind::kTuple: break;  // not reached: tuples are read above
  }
  out.metadata_ = std::move(metadata);
  out.shard_group_ = std::move(shard_group);
  return out;
}

StatusOr<HloSharding> HloSharding::Parse(std::string_view text, std::string source) {
  TextCursor cursor(text, std::move(source));
  ASSIGN_OR_RETURN(HloSharding out, Read(cursor));
  cursor.SkipWhitespace();
  if (!cursor.AtEnd()) {
    return cursor.Error(fmt::format("expected the end of the sharding, found {}",
                                    cursor.Describe()));
  }
  return out;
}

std::string HloSharding::ToString() const {
  if (kind_ == Kind::kTuple) {
    std::vector<std::string> parts;
    for (const HloSharding& e : elements_) parts.push_back(e.ToString());
    return fmt::format("{{{}}}", fmt::join(parts, ", "));
  }
  std::string body;
  switch (kind_) {
    case Kind::kReplicated: body = "replicated"; break;
    case Kind::kManual: body = "manual"; break;
    case Kind::kUnknown: body = "unknown"; break;
    case Kind::kMaximal: body = fmt::format("maximal device={}", device_); break;
    case Kind::kTiled: {
      body = "devices=" + tiles_.ToString();
      if (replicate_last_) body += " last_tile_dim_replicate";
      if (!subgroups_.empty()) {
        std::vector<std::string_view> names;
        for (Subgroup s : subgroups_) names.push_back(SubgroupName(s));
        body += fmt::format(" last_tile_dims={{{}}}", fmt::join(names, ", "));
      }
      break;
    }
    case Kind::kTuple: break;
  }
  if (!metadata_.empty()) body += " metadata=" + metadata_;
  if (!shard_group_.empty()) body += " " + shard_group_;
  return "{" + body + "}";
}

bool HloSharding::operator==(const HloSharding& other) const {
  if (kind_ != other.kind_ || metadata_ != other.metadata_ || shard_group_ != other.shard_group_) {
    return false;
  }
  switch (kind_) {
    case Kind::kMaximal: return device_ == other.device_;
    case Kind::kTiled:
      return tiles_ == other.tiles_ && replicate_last_ == other.replicate_last_ &&
             subgroups_ == other.subgroups_;
    case Kind::kTuple: return elements_ == other.elements_;
    default: return true;
  }
}

int64_t HloSharding::MaxDevicePlusOne() const {
  switch (kind_) {
    case Kind::kMaximal: return device_ + 1;
    case Kind::kTiled: return tiles_.MaxDevicePlusOne();
    case Kind::kTuple: {
      int64_t most = 0;
      for (const HloSharding& e : elements_) most = std::max(most, e.MaxDevicePlusOne());
      return most;
    }
    default: return 0;
  }
}

const HloSharding& HloSharding::LeafSharding(int64_t leaf) const {
  return kind_ == Kind::kTuple ? elements_[static_cast<size_t>(leaf)] : *this;
}

Status HloSharding::Validate(const Shape& shape, std::optional<int64_t> num_devices) const {
  if (kind_ == Kind::kTuple) {
    if (!shape.IsTuple()) {
      return Error(fmt::format("tuple sharding {} is on a value of shape {}, which is not a tuple",
                               ToString(), shape.ToString(false)));
    }
    std::vector<Shape> leaves = Leaves(shape);
    // XLA gives the empty tuple one sharding (its RequiredLeaves); none is accepted too.
    if (leaves.empty() && elements_.size() <= 1) return OkStatus();
    if (leaves.size() != elements_.size()) {
      return Error(fmt::format("tuple sharding {} has {} elements but the shape {} has {} leaves",
                               ToString(), elements_.size(), shape.ToString(false), leaves.size()));
    }
    for (size_t i = 0; i < leaves.size(); ++i) {
      RETURN_IF_ERROR(elements_[i].Validate(leaves[i], num_devices));
    }
    return OkStatus();
  }
  if (shape.IsTuple()) {
    for (const Shape& leaf : Leaves(shape)) RETURN_IF_ERROR(Validate(leaf, num_devices));
    return OkStatus();
  }
  if (kind_ == Kind::kMaximal && num_devices && device_ >= *num_devices) {
    return Error(fmt::format("sharding {} names device {} but the module has {} devices",
                             ToString(), device_, *num_devices));
  }
  if (kind_ != Kind::kTiled || !shape.IsArray()) return OkStatus();
  if (TiledDataRank() != shape.rank()) {
    return Error(fmt::format("sharding {} tiles {} dims but the shape {} has rank {}", ToString(),
                             TiledDataRank(), shape.ToString(false), shape.rank()));
  }
  if (num_devices) {
    const int64_t needed = tiles_.MaxDevicePlusOne();
    if (needed > *num_devices) {
      return Error(fmt::format("sharding {} names device {} but the module has {} devices",
                               ToString(), needed - 1, *num_devices));
    }
    if (tiles_.num_elements() != *num_devices) {
      return Error(fmt::format("sharding {} uses {} devices but the module has {}: a tiling "
                               "places every device", ToString(), tiles_.num_elements(),
                               *num_devices));
    }
  }
  return OkStatus();
}

std::vector<int64_t> HloSharding::TileDims(const std::vector<int64_t>& dims) const {
  if (kind_ != Kind::kTiled) return dims;
  std::vector<int64_t> out = dims;
  const int64_t rank = std::min<int64_t>(TiledDataRank(), static_cast<int64_t>(dims.size()));
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t tiles = tiles_.dim(i);
    out[static_cast<size_t>(i)] = (dims[static_cast<size_t>(i)] + tiles - 1) / tiles;
  }
  return out;
}

std::optional<HloSharding::Extent> HloSharding::DeviceExtent(const std::vector<int64_t>& dims,
                                                             int64_t device) const {
  Extent extent{std::vector<int64_t>(dims.size(), 0), dims};
  if (kind_ != Kind::kTiled) return extent;
  std::optional<std::vector<int64_t>> index = tiles_.IndexOf(device);
  if (!index) return std::nullopt;
  const std::vector<int64_t> tile = TileDims(dims);
  const int64_t rank = std::min<int64_t>(TiledDataRank(), static_cast<int64_t>(dims.size()));
  for (size_t i = 0; i < static_cast<size_t>(rank); ++i) {
    extent.offsets[i] = std::min(dims[i], (*index)[i] * tile[i]);
    extent.limits[i] = std::min(dims[i], extent.offsets[i] + tile[i]);
  }
  return extent;
}

}  // namespace xlens

// XLA's HloSharding: how one value is laid out over the devices of a module. Read from and
// printed to the text of the `sharding=` attribute, as XLA writes it:
//
//   {replicated}                       every device holds the whole value
//   {maximal device=1}                 one device holds it
//   {manual}                           each device holds its own value (shard_map's body)
//   {unknown}                          not decided yet (propagation fills it in)
//   {devices=[2,1]0,1}                 tiled: the value is cut into a grid of tiles, one per
//   {devices=[4,1]<=[4]}                 device of the tile assignment (see tile_assignment.h)
//   {devices=[2,1,2]<=[4] last_tile_dim_replicate}
//                                      tiled, each tile held by the devices of the last dim
//   {devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}
//                                      tiled, the trailing dims are subgroups of those kinds
//   {{replicated}, {devices=[2]0,1}}   a tuple: one sharding per leaf of the tuple shape
//
// `metadata=...` and `shard_as N` / `shard_like N` are kept and printed back. As XLA's parser
// does, a tiling whose last (replicated) dim holds every device reads as {replicated}, and a
// replicated last dim or subgroup of size 1 is dropped.
//
// Tiles follow XLA's rule for dims the tile count does not divide: every tile is
// ceil(dim / tiles) long and starts at index * that; the last tiles are short or empty, and the
// partitioned program sees them padded to the full tile shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/shape.h"
#include "compiler/hlo/text_cursor.h"
#include "compiler/hlo/tile_assignment.h"
#include "compiler/support/status.h"

namespace xlens {

class HloSharding {
 public:
  enum class Kind { kReplicated, kMaximal, kManual, kUnknown, kTiled, kTuple };
  // The kinds of trailing subgroup dims in `last_tile_dims={...}`.
  enum class Subgroup { kReplicated, kManual };

  HloSharding() = default;  // {replicated}
  static HloSharding Replicated() { return HloSharding(); }
  static HloSharding Manual();
  static HloSharding Maximal(int64_t device);
  // A tiling: tile dims of the data, then one dim per subgroup (a trailing replicated dim when
  // `replicate_last` is set). Canonicalised as the text reader does.
  static HloSharding Tiled(TileAssignment tiles, bool replicate_last = false,
                           std::vector<Subgroup> subgroups = {});
  static HloSharding Tuple(std::vector<HloSharding> elements);

  // Reads one sharding at the cursor, starting at its '{'.
  static StatusOr<HloSharding> Read(TextCursor& cursor);
  // Reads a whole text; `source` names it in errors (`source:1:COL: message`).
  static StatusOr<HloSharding> Parse(std::string_view text, std::string source = "<sharding>");

  Kind kind() const { return kind_; }
  bool IsReplicated() const { return kind_ == Kind::kReplicated; }
  bool IsManual() const { return kind_ == Kind::kManual; }
  bool IsMaximal() const { return kind_ == Kind::kMaximal; }
  bool IsTiled() const { return kind_ == Kind::kTiled; }
  bool IsTuple() const { return kind_ == Kind::kTuple; }

  // The device of a maximal sharding.
  int64_t device() const { return device_; }
  // A tiled sharding's devices: data dims then subgroup dims.
  const TileAssignment& tile_assignment() const { return tiles_; }
  bool replicate_on_last_tile_dim() const { return replicate_last_; }
  const std::vector<Subgroup>& subgroups() const { return subgroups_; }
  // The number of leading tile dims that cut the data (the value's rank, when valid).
  int64_t TiledDataRank() const;
  // The tuple's leaf shardings, in the order of the tuple shape's leaves.
  const std::vector<HloSharding>& tuple_elements() const { return elements_; }
  // `metadata=` exactly as written ("" when absent).
  const std::string& metadata() const { return metadata_; }

  // XLA's text: `{devices=[2,1]0,1 last_tile_dim_replicate metadata={...}}`.
  std::string ToString() const;
  bool operator==(const HloSharding& other) const;

  // Checks the sharding against the value's shape and, when known, the module's device count:
  // a tiling's data rank is the shape's rank; a tuple has one sharding per leaf; every device
  // is below the count, and a tiling uses all of them (XLA's HloSharding::Validate).
  Status Validate(const Shape& shape, std::optional<int64_t> num_devices) const;
  // The largest device id any part of the sharding names, plus one (0 when it names none).
  int64_t MaxDevicePlusOne() const;
  // The sharding of leaf `leaf` of a tuple shape (itself when not a tuple).
  const HloSharding& LeafSharding(int64_t leaf) const;

  // The tile shape every device's piece has in the partitioned program: each tiled dim is
  // ceil(dim / tiles); a non-tiled sharding keeps the dims.
  std::vector<int64_t> TileDims(const std::vector<int64_t>& dims) const;
  // The part of the value device `device` holds: [offset, limit) per dim; limit == offset for an
  // empty tile past the end. nullopt when the device holds no tile of a tiled sharding.
  struct Extent {
    std::vector<int64_t> offsets;
    std::vector<int64_t> limits;
  };
  std::optional<Extent> DeviceExtent(const std::vector<int64_t>& dims, int64_t device) const;

 private:
  Kind kind_ = Kind::kReplicated;
  int64_t device_ = 0;
  TileAssignment tiles_;
  bool replicate_last_ = false;
  std::vector<Subgroup> subgroups_;
  std::vector<HloSharding> elements_;
  std::string metadata_;
  std::string shard_group_;  // "shard_as 1" / "shard_like 1", or empty
};

}  // namespace xlens

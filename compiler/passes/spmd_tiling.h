// The one view of an array sharding the SPMD passes compute with: a tile count per data dim and
// a replicated dim, over a row-major array of device ids (axes [tiles..., replicated]). It is
// HloSharding's tiled form with every case folded in: {replicated} is all tiles 1 with every
// device in the replicated dim; a plain tiling has a replicated dim of 1.
//
// Everything the passes do with shardings is two moves on the device array:
//   Project(keep)   a sharding for a value whose dim i is this one's dim keep[i]; the dims not
//                   kept become copies (their devices join the replicated dim)
//   Embed(source)   the reverse: a sharding over new dims, dim j being this one's dim source[j]
//                   (or untiled for -1)
// which is how a dot's operands, a broadcast's operand, a transpose or a reduce's result get
// their shardings from one another without changing which device holds which data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/hlo/sharding.h"
#include "compiler/support/status.h"

namespace xlens {

// The size of each of `b` tiles of `a` elements (XLA's tiles: the last ones may be short).
inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Tiling {
  std::vector<int64_t> tiles;    // per data dim
  int64_t rep = 1;               // copies of each tile
  std::vector<int64_t> devices;  // row-major over [tiles..., rep]

  // Every device holds the whole value.
  static Tiling Replicated(int64_t rank, int64_t num_devices);
  // The tiling of an array sharding (replicated, maximal as replicated, tiled, partially
  // replicated); an error for manual shardings, manual subgroups and tuples.
  static StatusOr<Tiling> FromSharding(const HloSharding& sharding, int64_t rank,
                                       int64_t num_devices);
  HloSharding ToSharding() const;
  std::string ToString() const { return ToSharding().ToString(); }

  int64_t rank() const { return static_cast<int64_t>(tiles.size()); }
  int64_t num_devices() const { return static_cast<int64_t>(devices.size()); }
  int64_t num_tiles() const;
  bool IsReplicated() const { return num_tiles() == 1; }
  bool operator==(const Tiling& other) const {
    return tiles == other.tiles && rep == other.rep && devices == other.devices;
  }

  // Device `device`'s coordinates over [tiles..., rep]. The first call indexes the devices, so
  // that loops over every device stay linear: set `devices` before asking.
  std::vector<int64_t> Coordinates(int64_t device) const;
  // Each device's piece: ceil(dim / tiles) per dim.
  std::vector<int64_t> TileDims(const std::vector<int64_t>& dims) const;
  // Where device `device`'s piece starts in dim `dim` of a value of `dims`.
  int64_t Offset(const std::vector<int64_t>& dims, int64_t dim, int64_t device) const;

  // See the file comment. Every dim of this tiling that is tiled must appear in `source` for
  // Embed (error otherwise).
  Tiling Project(const std::vector<int64_t>& keep) const;
  StatusOr<Tiling> Embed(const std::vector<int64_t>& source) const;
  // The same tiling with `dims` no longer cut: their devices hold copies.
  Tiling ReplicateDims(const std::vector<int64_t>& dims) const;
  // The groups of devices whose coordinates differ only in `dims`, each ordered row-major by
  // those coordinates: who meets in an all-gather or all-reduce over those dims.
  std::vector<std::vector<int64_t>> GroupsAlong(const std::vector<int64_t>& dims) const;

 private:
  mutable std::vector<int64_t> position_;  // position_[device]: its index in `devices`
};

// One tiling that holds both `a`'s and `b`'s cuts (XLA's MergeSharding): a dim either tiles is
// tiled as it does; both tiling the same dim must agree. nullopt when the devices cannot be
// arranged so that every device's piece lies inside its piece under both.
std::optional<Tiling> MergeTilings(const Tiling& a, const Tiling& b);

// `devices` (row-major over `dims`) in XLA's iota form (`[4]<=[4]`, `[2,2]<=[2,2]T(1,0)`, ...),
// tried over the factorizations of their count into at most three factors; nullopt when none
// gives them.
std::optional<TileAssignment> IotaTileAssignment(const std::vector<int64_t>& dims,
                                                 const std::vector<int64_t>& devices);

// The tiling of a global value of `global` dims under which each device holds, whole, the piece
// that a partially manual sharding `s` (a tiling with a manual subgroup: shard_map manual over
// some mesh axes only) gives it as a local value of `local` dims: the manual subgroup's index cuts
// the dims `global` is larger in (row-major), the subgroup's other devices hold copies.
StatusOr<Tiling> ManualPieces(const HloSharding& s, const std::vector<int64_t>& global,
                              const std::vector<int64_t>& local, int64_t num_devices);

// Whether every device's piece under `to` lies inside its piece under `from` (padding past the
// end of a dim `from` does not cut counts as inside): resharding is then a local slice.
bool SliceSuffices(const Tiling& from, const Tiling& to, const std::vector<int64_t>& dims);

}  // namespace xlens

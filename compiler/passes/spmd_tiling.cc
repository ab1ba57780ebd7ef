#include "compiler/passes/spmd_tiling.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

namespace xlens {

namespace {

// The device array transposed so that its axis i is old axis order[i] (order a permutation of
// all axes), row-major.
std::vector<int64_t> TransposeDevices(const std::vector<int64_t>& devices,
                                      const std::vector<int64_t>& axis_sizes,
                                      const std::vector<int64_t>& order) {
  const size_t n = axis_sizes.size();
  std::vector<int64_t> strides(n, 1);
  for (size_t i = n; i-- > 1;) strides[i - 1] = strides[i] * axis_sizes[i];
  std::vector<int64_t> new_sizes(n);
  for (size_t i = 0; i < n; ++i) new_sizes[i] = axis_sizes[order[i]];
  std::vector<int64_t> out;
  out.reserve(devices.size());
  std::vector<int64_t> index(n, 0);
  for (size_t k = 0; k < devices.size(); ++k) {
    int64_t at = 0;
    for (size_t i = 0; i < n; ++i) at += index[i] * strides[order[i]];
    out.push_back(devices[at]);
    for (size_t i = n; i-- > 0;) {
      if (++index[i] < new_sizes[i]) break;
      index[i] = 0;
    }
  }
  return out;
}


}  // namespace

Tiling Tiling::Replicated(int64_t rank, int64_t num_devices) {
  Tiling t;
  t.tiles.assign(rank, 1);
  t.rep = num_devices;
  t.devices.resize(num_devices);
  std::iota(t.devices.begin(), t.devices.end(), 0);
  return t;
}

StatusOr<Tiling> Tiling::FromSharding(const HloSharding& sharding, int64_t rank,
                                      int64_t num_devices) {
  if (sharding.IsReplicated() || sharding.IsMaximal() ||
      sharding.kind() == HloSharding::Kind::kUnknown) {
    return Replicated(rank, num_devices);
  }
  if (sharding.IsManual()) {
    return Error("sharding {manual} has no tiles: each device's value is its own");
  }
  if (!sharding.subgroups().empty()) {
    return Error(fmt::format("sharding {} is manual along some of the mesh's axes: partially "
                             "manual values (shard_map over some axes) are not partitioned yet",
                             sharding.ToString()));
  }
  if (!sharding.IsTiled()) {
    return Error(fmt::format("sharding {} is not an array tiling", sharding.ToString()));
  }
  const TileAssignment& ta = sharding.tile_assignment();
  Tiling t;
  const int64_t data_rank = sharding.TiledDataRank();
  if (data_rank != rank) {
    return Error(fmt::format("sharding {} cuts {} dims of a rank-{} value", sharding.ToString(),
                             data_rank, rank));
  }
  for (int64_t i = 0; i < data_rank; ++i) t.tiles.push_back(ta.dim(i));
  t.rep = sharding.replicate_on_last_tile_dim() ? ta.dim(ta.num_dimensions() - 1) : 1;
  t.devices = ta.devices();
  for (int64_t d : t.devices) {
    if (d >= num_devices) {
      return Error(fmt::format("sharding {} names device {}, the module has {}", sharding.ToString(),
                               d, num_devices));
    }
  }
  if (t.num_devices() != num_devices) {
    return Error(fmt::format("sharding {} places {} devices, the module has {}",
                             sharding.ToString(), t.num_devices(), num_devices));
  }
  return t;
}

std::optional<TileAssignment> IotaTileAssignment(const std::vector<int64_t>& dims,
                                                 const std::vector<int64_t>& devices) {
  const int64_t n = static_cast<int64_t>(devices.size());
  std::vector<std::vector<int64_t>> shapes = {{n}};
  for (int64_t a = 2; a < n; ++a) {
    if (n % a != 0) continue;
    shapes.push_back({a, n / a});
    for (int64_t b = 2; b < n / a; ++b) {
      if ((n / a) % b == 0) shapes.push_back({a, b, n / a / b});
    }
  }
  for (const auto& reshape : shapes) {
    std::vector<int> perm(reshape.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      auto t = TileAssignment::Iota(dims, reshape, perm);
      if (t.ok() && t->devices() == devices) return *t;
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  return std::nullopt;
}


HloSharding Tiling::ToSharding() const {
  if (IsReplicated()) return HloSharding::Replicated();
  std::vector<int64_t> dims = tiles;
  if (rep > 1) dims.push_back(rep);
  if (auto iota = IotaTileAssignment(dims, devices)) return HloSharding::Tiled(*iota, rep > 1);
  auto ta = TileAssignment::FromDevices(dims, devices);
  // The device list is a permutation by construction.
  return HloSharding::Tiled(*ta, rep > 1);
}

int64_t Tiling::num_tiles() const {
  int64_t n = 1;
  for (int64_t t : tiles) n *= t;
  return n;
}

std::vector<int64_t> Tiling::Coordinates(int64_t device) const {
  if (position_.size() != devices.size()) {
    position_.assign(devices.size(), 0);
    for (size_t i = 0; i < devices.size(); ++i) position_[devices[i]] = static_cast<int64_t>(i);
  }
  int64_t at = position_[device];
  std::vector<int64_t> coords(tiles.size() + 1);
  coords.back() = at % rep;
  at /= rep;
  for (size_t i = tiles.size(); i-- > 0;) {
    coords[i] = at % tiles[i];
    at /= tiles[i];
  }
  return coords;
}

std::vector<int64_t> Tiling::TileDims(const std::vector<int64_t>& dims) const {
  std::vector<int64_t> out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) out[i] = CeilDiv(dims[i], tiles[i]);
  return out;
}

int64_t Tiling::Offset(const std::vector<int64_t>& dims, int64_t dim, int64_t device) const {
  return Coordinates(device)[dim] * CeilDiv(dims[dim], tiles[dim]);
}

Tiling Tiling::Project(const std::vector<int64_t>& keep) const {
  std::vector<int64_t> sizes = tiles;
  sizes.push_back(rep);
  std::vector<int64_t> order(keep.begin(), keep.end());
  std::vector<bool> kept(tiles.size(), false);
  for (int64_t k : keep) kept[k] = true;
  int64_t new_rep = rep;
  for (size_t i = 0; i < tiles.size(); ++i) {
    if (!kept[i]) {
      order.push_back(static_cast<int64_t>(i));
      new_rep *= tiles[i];
    }
  }
  order.push_back(static_cast<int64_t>(tiles.size()));
  Tiling out;
  for (int64_t k : keep) out.tiles.push_back(tiles[k]);
  out.rep = new_rep;
  out.devices = TransposeDevices(devices, sizes, order);
  return out;
}

StatusOr<Tiling> Tiling::Embed(const std::vector<int64_t>& source) const {
  std::vector<bool> used(tiles.size(), false);
  std::vector<int64_t> order;
  Tiling out;
  for (int64_t s : source) {
    if (s < 0) {
      out.tiles.push_back(1);
      continue;
    }
    used[s] = true;
    order.push_back(s);
    out.tiles.push_back(tiles[s]);
  }
  for (size_t i = 0; i < tiles.size(); ++i) {
    if (used[i]) continue;
    if (tiles[i] != 1) return Error(fmt::format("tiled dim {} has no place", i));
    order.push_back(static_cast<int64_t>(i));
  }
  order.push_back(static_cast<int64_t>(tiles.size()));
  std::vector<int64_t> sizes = tiles;
  sizes.push_back(rep);
  out.rep = rep;
  out.devices = TransposeDevices(devices, sizes, order);
  return out;
}

Tiling Tiling::ReplicateDims(const std::vector<int64_t>& dims) const {
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < rank(); ++i) {
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) keep.push_back(i);
  }
  // Project drops the dims; put them back, untiled, in their places.
  Tiling projected = Project(keep);
  std::vector<int64_t> source(tiles.size(), -1);
  for (size_t j = 0; j < keep.size(); ++j) source[keep[j]] = static_cast<int64_t>(j);
  return *projected.Embed(source);
}

std::vector<std::vector<int64_t>> Tiling::GroupsAlong(const std::vector<int64_t>& dims) const {
  std::map<std::vector<int64_t>, std::vector<std::pair<std::vector<int64_t>, int64_t>>> groups;
  for (int64_t d : devices) {
    std::vector<int64_t> c = Coordinates(d);
    std::vector<int64_t> key = c, along;
    for (int64_t dim : dims) {
      key[dim] = -1;
      along.push_back(c[dim]);
    }
    groups[key].push_back({along, d});
  }
  std::vector<std::vector<int64_t>> out;
  for (auto& [key, members] : groups) {
    std::sort(members.begin(), members.end());
    std::vector<int64_t> g;
    for (auto& m : members) g.push_back(m.second);
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<Tiling> MergeTilings(const Tiling& a, const Tiling& b) {
  if (a.rank() != b.rank() || a.num_devices() != b.num_devices()) return std::nullopt;
  Tiling out;
  std::vector<bool> from_a(a.rank());
  for (int64_t i = 0; i < a.rank(); ++i) {
    if (a.tiles[i] > 1 && b.tiles[i] > 1 && a.tiles[i] != b.tiles[i]) return std::nullopt;
    from_a[i] = a.tiles[i] > 1;
    out.tiles.push_back(std::max(a.tiles[i], b.tiles[i]));
  }
  // Each device's tile index under the merge; devices of one index are its copies.
  std::map<std::vector<int64_t>, std::vector<int64_t>> by_index;
  for (int64_t d : a.devices) {
    std::vector<int64_t> ca = a.Coordinates(d), cb = b.Coordinates(d), index;
    for (int64_t i = 0; i < a.rank(); ++i) {
      if (a.tiles[i] > 1 && b.tiles[i] > 1 && ca[i] != cb[i]) return std::nullopt;
      index.push_back(from_a[i] ? ca[i] : cb[i]);
    }
    by_index[index].push_back(d);
  }
  const int64_t copies = a.num_devices() / out.num_tiles();
  if (static_cast<int64_t>(by_index.size()) != out.num_tiles()) return std::nullopt;
  for (auto& [index, group] : by_index) {
    if (static_cast<int64_t>(group.size()) != copies) return std::nullopt;
    std::sort(group.begin(), group.end());
    out.devices.insert(out.devices.end(), group.begin(), group.end());
  }
  out.rep = copies;
  return out;
}

bool SliceSuffices(const Tiling& from, const Tiling& to, const std::vector<int64_t>& dims) {
  for (int64_t d : from.devices) {
    std::vector<int64_t> cf = from.Coordinates(d), ct = to.Coordinates(d);
    for (size_t i = 0; i < dims.size(); ++i) {
      if (from.tiles[i] == 1) continue;  // the whole dim is here, padded as needed
      int64_t tf = CeilDiv(dims[i], from.tiles[i]), tt = CeilDiv(dims[i], to.tiles[i]);
      int64_t of = cf[i] * tf, ot = ct[i] * tt;
      if (ot < of || ot + tt > of + tf) return false;
    }
  }
  return true;
}

StatusOr<Tiling> ManualPieces(const HloSharding& s, const std::vector<int64_t>& global,
                              const std::vector<int64_t>& local, int64_t n) {
  const int64_t rank = static_cast<int64_t>(global.size());
  const TileAssignment& ta = s.tile_assignment();
  int64_t manual_dim = -1;
  for (size_t g = 0; g < s.subgroups().size(); ++g) {
    if (s.subgroups()[g] == HloSharding::Subgroup::kManual) manual_dim = rank + static_cast<int64_t>(g);
  }
  if (!s.IsTiled() || manual_dim < 0 || manual_dim >= ta.num_dimensions() ||
      static_cast<int64_t>(local.size()) != rank) {
    return Error(fmt::format("sharding {} is not partially manual over a value of rank {}", s.ToString(), rank));
  }
  Tiling t;
  int64_t groups = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (local[d] <= 0 || global[d] % local[d] != 0) {
      return Error(fmt::format("a manual piece of dims [{}] does not divide [{}]", fmt::join(local, ","),
                               fmt::join(global, ",")));
    }
    t.tiles.push_back(global[d] / local[d]);
    groups *= t.tiles.back();
  }
  if (groups != ta.dim(manual_dim) || n % groups != 0) {
    return Error(fmt::format("sharding {}: {} manual groups, but the value is cut into {}", s.ToString(),
                             ta.dim(manual_dim), groups));
  }
  t.rep = n / groups;
  for (int64_t m = 0; m < groups; ++m) {
    for (int64_t device : ta.devices()) {
      auto index = ta.IndexOf(device);
      if (index && (*index)[manual_dim] == m) t.devices.push_back(device);
    }
  }
  if (t.num_devices() != n) return Error(fmt::format("sharding {} does not name {} devices", s.ToString(), n));
  return t;
}

}  // namespace xlens

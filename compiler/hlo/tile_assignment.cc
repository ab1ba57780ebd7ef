#include "compiler/hlo/tile_assignment.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace xlens {
namespace {

// The product of `dims`, or an error when a dim is not positive or the product passes
// TileAssignment::kMaxDevices. `what` names the list ("tile dims").
Status CheckDims(const std::vector<int64_t>& dims, std::string_view what, int64_t& product) {
  if (dims.empty()) return Error(fmt::format("{} are empty: expected at least one dimension", what));
  if (dims.size() > TileAssignment::kMaxDims) {
    return Error(fmt::format("{} have {} dimensions: at most {} are supported", what, dims.size(),
                             TileAssignment::kMaxDims));
  }
  product = 1;
  for (int64_t d : dims) {
    if (d < 1) return Error(fmt::format("{} [{}] hold {}: every dimension must be at least 1", what,
                                        fmt::join(dims, ","), d));
    if (product > TileAssignment::kMaxDevices / d) {
      return Error(fmt::format("{} [{}] name more than {} devices", what, fmt::join(dims, ","),
                               TileAssignment::kMaxDevices));
    }
    product *= d;
  }
  return OkStatus();
}

// Brings an iota form to XLA's canonical one: reshape dims of size 1 are dropped, and two reshape
// dims that the permutation keeps next to each other and in order are one dim. Repeats until
// nothing changes; an empty result is the single dim [1].
void CanonicalizeIota(std::vector<int64_t>& reshape_dims, std::vector<int>& perm) {
  while (true) {
    // Drop size-1 dims, renumbering the permutation.
    std::vector<int> new_index(reshape_dims.size(), -1);
    std::vector<int64_t> kept;
    for (size_t i = 0; i < reshape_dims.size(); ++i) {
      if (reshape_dims[i] != 1) {
        new_index[i] = static_cast<int>(kept.size());
        kept.push_back(reshape_dims[i]);
      }
    }
    std::vector<int> new_perm;
    for (int p : perm) {
      if (new_index[static_cast<size_t>(p)] >= 0) new_perm.push_back(new_index[static_cast<size_t>(p)]);
    }
    reshape_dims = std::move(kept);
    perm = std::move(new_perm);
    // Merge the first pair of adjacent, in-order dims; the merged-away dim becomes size 1 and
    // is dropped on the next round.
    bool merged = false;
    for (size_t i = 1; i < perm.size(); ++i) {
      if (perm[i] == perm[i - 1] + 1) {
        reshape_dims[static_cast<size_t>(perm[i - 1])] *= reshape_dims[static_cast<size_t>(perm[i])];
        reshape_dims[static_cast<size_t>(perm[i])] = 1;
        merged = true;
        break;
      }
    }
    if (!merged) break;
  }
  if (reshape_dims.empty()) {
    reshape_dims = {1};
    perm = {0};
  }
}

// The devices of iota(product) reshaped to `reshape_dims` and transposed by `perm`, row-major.
std::vector<int64_t> MaterializeIota(const std::vector<int64_t>& reshape_dims,
                                     const std::vector<int>& perm, int64_t count) {
  const size_t rank = reshape_dims.size();
  std::vector<int64_t> strides(rank, 1);
  for (size_t i = rank; i-- > 1;) strides[i - 1] = strides[i] * reshape_dims[i];
  // Walk the transposed array row-major: coordinate i runs over reshape dim perm[i].
  std::vector<int64_t> index(rank, 0);
  std::vector<int64_t> devices;
  devices.reserve(static_cast<size_t>(count));
  for (int64_t n = 0; n < count; ++n) {
    int64_t value = 0;
    for (size_t i = 0; i < rank; ++i) value += index[i] * strides[static_cast<size_t>(perm[i])];
    devices.push_back(value);
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < reshape_dims[static_cast<size_t>(perm[i])]) break;
      index[i] = 0;
    }
  }
  return devices;
}

// `[a,b,...]` at the cursor.
StatusOr<std::vector<int64_t>> ReadBracketedInts(TextCursor& cursor, std::string_view what) {
  RETURN_IF_ERROR(cursor.Expect('[', fmt::format("to open the {}", what)));
  std::vector<int64_t> values;
  if (cursor.TryConsume(']')) return values;
  do {
    ASSIGN_OR_RETURN(int64_t v, cursor.ReadInt64(fmt::format("a value of the {}", what)));
    values.push_back(v);
  } while (cursor.TryConsume(','));
  RETURN_IF_ERROR(cursor.Expect(']', fmt::format("to close the {}", what)));
  return values;
}

}  // namespace

StatusOr<TileAssignment> TileAssignment::FromDevices(std::vector<int64_t> dims,
                                                     std::vector<int64_t> devices) {
  int64_t product = 0;
  RETURN_IF_ERROR(CheckDims(dims, "tile dims", product));
  if (static_cast<int64_t>(devices.size()) != product) {
    return Error(fmt::format("tile dims [{}] hold {} devices but {} device ids are listed",
                             fmt::join(dims, ","), product, devices.size()));
  }
  std::unordered_set<int64_t> seen;
  for (int64_t d : devices) {
    if (d < 0) return Error(fmt::format("device id {} is negative", d));
    if (!seen.insert(d).second) {
      return Error(fmt::format("device {} appears twice in the tile assignment", d));
    }
  }
  TileAssignment out;
  out.dims_ = std::move(dims);
  out.devices_ = std::move(devices);
  return out;
}

StatusOr<TileAssignment> TileAssignment::Iota(std::vector<int64_t> dims,
                                              std::vector<int64_t> reshape_dims,
                                              std::vector<int> perm) {
  int64_t product = 0;
  int64_t reshape_product = 0;
  RETURN_IF_ERROR(CheckDims(dims, "tile dims", product));
  RETURN_IF_ERROR(CheckDims(reshape_dims, "iota reshape dims", reshape_product));
  if (product != reshape_product) {
    return Error(fmt::format("iota reshape dims [{}] hold {} devices but tile dims [{}] hold {}",
                             fmt::join(reshape_dims, ","), reshape_product, fmt::join(dims, ","),
                             product));
  }
  if (perm.size() != reshape_dims.size()) {
    return Error(fmt::format("iota transpose T({}) has {} entries for {} reshape dims",
                             fmt::join(perm, ","), perm.size(), reshape_dims.size()));
  }
  std::vector<bool> used(perm.size(), false);
  for (int p : perm) {
    if (p < 0 || static_cast<size_t>(p) >= perm.size() || used[static_cast<size_t>(p)]) {
      return Error(fmt::format("iota transpose T({}) is not a permutation of 0..{}",
                               fmt::join(perm, ","), perm.size() - 1));
    }
    used[static_cast<size_t>(p)] = true;
  }
  CanonicalizeIota(reshape_dims, perm);
  TileAssignment out;
  out.devices_ = MaterializeIota(reshape_dims, perm, product);
  out.dims_ = std::move(dims);
  out.iota_ = IotaForm{std::move(reshape_dims), std::move(perm)};
  return out;
}

StatusOr<TileAssignment> TileAssignment::Iota(std::vector<int64_t> dims) {
  int64_t product = 0;
  RETURN_IF_ERROR(CheckDims(dims, "tile dims", product));
  return Iota(std::move(dims), {product}, {0});
}

StatusOr<TileAssignment> TileAssignment::Read(TextCursor& cursor) {
  size_t start = cursor.Here();
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadBracketedInts(cursor, "tile dims"));
  int64_t product = 0;
  if (Status st = CheckDims(dims, "tile dims", product); !st.ok()) {
    return cursor.ErrorAt(start, st.message());
  }
  if (cursor.TryConsume("<=")) {
    size_t reshape_start = cursor.Here();
    ASSIGN_OR_RETURN(std::vector<int64_t> reshape_dims,
                     ReadBracketedInts(cursor, "iota reshape dims"));
    std::vector<int> perm;
    size_t perm_start = cursor.Here();
    if (cursor.TryConsume('T')) {
      RETURN_IF_ERROR(cursor.Expect('(', "to open the iota transpose"));
      do {
        ASSIGN_OR_RETURN(int64_t p, cursor.ReadInt64("a dimension of the iota transpose"));
        if (p < 0 || p >= static_cast<int64_t>(kMaxDims)) return cursor.ErrorAt(perm_start, fmt::format(
            "iota transpose names dimension {}: expected one of the reshape dims", p));
        perm.push_back(static_cast<int>(p));
      } while (cursor.TryConsume(','));
      RETURN_IF_ERROR(cursor.Expect(')', "to close the iota transpose"));
    } else {
      for (size_t i = 0; i < reshape_dims.size(); ++i) perm.push_back(static_cast<int>(i));
    }
    auto iota = Iota(std::move(dims), std::move(reshape_dims), std::move(perm));
    if (!iota.ok()) return cursor.ErrorAt(reshape_start, iota.status().message());
    return iota;
  }
  std::vector<int64_t> devices;
  devices.reserve(static_cast<size_t>(product));
  std::unordered_set<int64_t> seen;
  for (int64_t i = 0; i < product; ++i) {
    if (i > 0 && !cursor.TryConsume(',')) {
      return cursor.Error(fmt::format("tile dims [{}] need {} device ids, found {} then {}",
                                      fmt::join(dims, ","), product, i, cursor.Describe()));
    }
    size_t id_start = cursor.Here();
    ASSIGN_OR_RETURN(int64_t d, cursor.ReadInt64("a device id"));
    if (d < 0) return cursor.ErrorAt(id_start, fmt::format("device id {} is negative", d));
    if (!seen.insert(d).second) {
      return cursor.ErrorAt(id_start, fmt::format("device {} appears twice in the tile "
                                                  "assignment", d));
    }
    devices.push_back(d);
  }
  // One id too many: a comma followed by a number (a comma before a key belongs to the caller).
  size_t after = cursor.Here();
  if (cursor.TryConsume(',')) {
    char next = cursor.Peek();
    if ((next >= '0' && next <= '9') || next == '-') {
      return cursor.Error(fmt::format("tile dims [{}] hold {} devices but more device ids are listed",
                                      fmt::join(dims, ","), product));
    }
    cursor.set_pos(after);
  }
  auto out = FromDevices(std::move(dims), std::move(devices));
  if (!out.ok()) return cursor.ErrorAt(start, out.status().message());
  return out;
}

StatusOr<TileAssignment> TileAssignment::Parse(std::string_view text, std::string source) {
  TextCursor cursor(text, std::move(source));
  ASSIGN_OR_RETURN(TileAssignment out, Read(cursor));
  cursor.SkipWhitespace();
  if (!cursor.AtEnd()) {
    return cursor.Error(fmt::format("expected the end of the tile assignment, found {}",
                                    cursor.Describe()));
  }
  return out;
}

int64_t TileAssignment::DeviceAt(std::span<const int64_t> index) const {
  int64_t flat = 0;
  for (size_t i = 0; i < dims_.size(); ++i) flat = flat * dims_[i] + index[i];
  return devices_[static_cast<size_t>(flat)];
}

std::optional<std::vector<int64_t>> TileAssignment::IndexOf(int64_t device) const {
  auto it = std::find(devices_.begin(), devices_.end(), device);
  if (it == devices_.end()) return std::nullopt;
  int64_t flat = it - devices_.begin();
  std::vector<int64_t> index(dims_.size(), 0);
  for (size_t i = dims_.size(); i-- > 0;) {
    index[i] = flat % dims_[i];
    flat /= dims_[i];
  }
  return index;
}

int64_t TileAssignment::MaxDevicePlusOne() const {
  int64_t most = -1;
  for (int64_t d : devices_) most = std::max(most, d);
  return most + 1;
}

std::vector<std::vector<int64_t>> TileAssignment::Rows() const {
  const int64_t row = dims_.back();
  std::vector<std::vector<int64_t>> rows;
  for (size_t start = 0; start < devices_.size(); start += static_cast<size_t>(row)) {
    rows.emplace_back(devices_.begin() + static_cast<std::ptrdiff_t>(start),
                      devices_.begin() + static_cast<std::ptrdiff_t>(start) + row);
  }
  return rows;
}

TileAssignment TileAssignment::Reshaped(std::vector<int64_t> dims) const {
  TileAssignment out = *this;
  out.dims_ = std::move(dims);
  return out;
}

const std::vector<int64_t>& TileAssignment::iota_reshape_dims() const {
  static const std::vector<int64_t> kNone;
  return iota_ ? iota_->reshape_dims : kNone;
}

const std::vector<int>& TileAssignment::iota_perm() const {
  static const std::vector<int> kNone;
  return iota_ ? iota_->perm : kNone;
}

std::string TileAssignment::ToString() const {
  if (!iota_) return fmt::format("[{}]{}", fmt::join(dims_, ","), fmt::join(devices_, ","));
  std::string out = fmt::format("[{}]<=[{}]", fmt::join(dims_, ","),
                                fmt::join(iota_->reshape_dims, ","));
  if (iota_->reshape_dims.size() > 1) out += fmt::format("T({})", fmt::join(iota_->perm, ","));
  return out;
}

}  // namespace xlens

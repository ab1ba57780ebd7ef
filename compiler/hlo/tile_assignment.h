// XLA's tile assignment: an N-d array of device ids. Shardings use it to say which device holds
// which tile (`devices=[2,2]0,1,2,3`), and collectives use it for replica groups in the iota form
// (`replica_groups=[2,2]<=[4]`: each row of the 2-d array is one group).
//
// Two textual forms, as XLA writes them:
//   explicit  `[2,2]0,2,1,3`       the dims, then every device id in row-major order;
//   iota      `[4,2]<=[8]`         iota(8) reshaped to the dims;
//             `[2,2]<=[2,2]T(1,0)` iota over the reshape dims [2,2], transposed by the
//                                  permutation (result dim i is reshape dim perm[i]), then
//                                  reshaped to the dims.
// An iota form is canonicalised as XLA's parser does (size-1 reshape dims dropped, runs of
// reshape dims that stay in order merged), so `[2,2]<=[2,2]` prints back as `[2,2]<=[4]`; a form
// read as explicit stays explicit. The devices are materialised: assignments past kMaxDevices are
// refused rather than allocated.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/text_cursor.h"
#include "compiler/support/status.h"

namespace xlens {

class TileAssignment {
 public:
  // No real mesh comes close; the bound keeps hostile text from allocating gigabytes.
  static constexpr int64_t kMaxDevices = int64_t{1} << 20;
  // Dims of the array and of an iota's reshape: real meshes have a handful.
  static constexpr size_t kMaxDims = 64;

  // One device, device 0: `[1]0`.
  TileAssignment() : dims_{1}, devices_{0} {}

  // The explicit form. `devices` lists dims' product ids in row-major order; ids must be
  // non-negative and distinct.
  static StatusOr<TileAssignment> FromDevices(std::vector<int64_t> dims,
                                              std::vector<int64_t> devices);
  // The iota form; `perm` is a permutation of the reshape dims' indices, and the products of
  // `dims` and `reshape_dims` agree.
  static StatusOr<TileAssignment> Iota(std::vector<int64_t> dims, std::vector<int64_t> reshape_dims,
                                       std::vector<int> perm);
  // iota(product(dims)) reshaped to `dims`.
  static StatusOr<TileAssignment> Iota(std::vector<int64_t> dims);

  // Reads either form at the cursor (no `devices=` prefix): `[2,2]0,1,2,3`, `[4,2]<=[8]`,
  // `[2,2]<=[2,2]T(1,0)`. Errors point at the offending position.
  static StatusOr<TileAssignment> Read(TextCursor& cursor);
  // Reads one whole text in either form; `source` names it in errors.
  static StatusOr<TileAssignment> Parse(std::string_view text,
                                        std::string source = "<tile assignment>");

  // The array's dimensions.
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t num_dimensions() const { return static_cast<int64_t>(dims_.size()); }
  int64_t dim(int64_t i) const { return dims_[static_cast<size_t>(i)]; }
  // The number of devices (the product of the dims).
  int64_t num_elements() const { return static_cast<int64_t>(devices_.size()); }
  // Every device id, row-major over dims().
  const std::vector<int64_t>& devices() const { return devices_; }
  // The device at a full index (one coordinate per dimension, each in range).
  int64_t DeviceAt(std::span<const int64_t> index) const;
  // The index of `device`, or nullopt when the assignment does not hold it.
  std::optional<std::vector<int64_t>> IndexOf(int64_t device) const;
  // The largest device id plus one (0 for none): the devices an assignment needs to exist.
  int64_t MaxDevicePlusOne() const;
  // The rows of the array seen as 2-d [product of all dims but the last, last dim]: the groups of
  // an iota replica group list.
  std::vector<std::vector<int64_t>> Rows() const;

  // The same devices in row-major order over `dims` (whose product is num_elements()); an iota
  // assignment stays iota.
  TileAssignment Reshaped(std::vector<int64_t> dims) const;

  // True when read or built in the iota form (and so printed in it).
  bool is_iota() const { return iota_.has_value(); }
  // The canonical iota reshape dims and permutation; empty for an explicit assignment.
  const std::vector<int64_t>& iota_reshape_dims() const;
  const std::vector<int>& iota_perm() const;

  // XLA's text without the `devices=` prefix: `[2,2]0,1,2,3` or `[4,2]<=[8]` or
  // `[2,2]<=[2,2]T(1,0)` (the permutation printed only when there are several reshape dims).
  std::string ToString() const;

  // Equal when the dims and every device agree, whichever form either was read in.
  bool operator==(const TileAssignment& other) const {
    return dims_ == other.dims_ && devices_ == other.devices_;
  }

 private:
  struct IotaForm {
    std::vector<int64_t> reshape_dims;
    std::vector<int> perm;
  };
  std::vector<int64_t> dims_;
  std::vector<int64_t> devices_;
  std::optional<IotaForm> iota_;
};

}  // namespace xlens

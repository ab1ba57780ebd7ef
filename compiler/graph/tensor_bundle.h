// TensorFlow's checkpoint format, TensorBundle (tensorflow/core/util/tensor_bundle): what
// `tf.train.Checkpoint` and SavedModel's `variables/` hold. `PREFIX.index` is a table
// (table_reader.h) whose empty key holds a BundleHeaderProto and whose other keys, checkpoint keys
// ("w/.ATTRIBUTES/VARIABLE_VALUE"), hold BundleEntryProtos: the dtype, shape, shard, offset, size
// and masked CRC-32C of a tensor's bytes in `PREFIX.data-0000S-of-0000N`. Numeric tensors are
// their little-endian elements; string tensors varint lengths, a checksum of them, then the bytes.
// A tensor saved in slices (a large variable under a shard-size policy) has an entry listing its
// slices, each stored under TensorFlow's encoded "name + slice" key; reading it assembles them.
//
// Input is untrusted. Every entry is checked when the index is read (a known dtype, a shape with
// no negative or overflowing dimension, a shard that exists in the header's count, offsets and
// sizes that agree with the dtype and shape); every read checks that the bytes lie inside the
// shard file and match their checksum, and allocates only what the shard files hold. Errors are
// one line: `FILE: position: what was expected`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/graph/tensor.h"
#include "compiler/graph/types.h"
#include "compiler/support/status.h"

namespace xlens::graph {

// One slice of a tensor saved in slices: per dimension [start, start + length).
struct BundleSlice {
  std::vector<int64_t> start;
  std::vector<int64_t> length;
};

struct BundleEntry {
  DataType dtype = DT_INVALID;
  std::vector<int64_t> shape;
  int shard_id = 0;
  int64_t offset = 0;
  int64_t size = 0;
  uint32_t masked_crc32c = 0;
  std::vector<BundleSlice> slices;  // empty unless saved in slices
  int64_t index_offset = 0;         // where the entry is in the index, for messages
};

// Where a bundle's shard bytes come from: the files (TensorBundle::Open) or memory (tests, the
// fuzz target).
class BundleShards {
 public:
  virtual ~BundleShards() = default;
  // The shard's size in bytes (opening it); the error names the file.
  virtual StatusOr<int64_t> Size(int shard) = 0;
  // Exactly `size` bytes at `offset`, already checked to lie within Size(shard).
  virtual Status Read(int shard, int64_t offset, char* data, size_t size) = 0;
  // The shard's name in messages.
  virtual std::string Name(int shard) const = 0;
};

// TensorFlow's DataFilename: "PREFIX.data-00001-of-00003".
std::string BundleShardPath(const std::string& prefix, int shard, int num_shards);

class TensorBundle {
 public:
  // Reads `PREFIX.index` (through file_io and the input limit); shards are opened when read.
  static StatusOr<TensorBundle> Open(const std::string& prefix);
  // The index from bytes in memory, reading shards from `shards`. `index_name` starts messages.
  static StatusOr<TensorBundle> FromIndex(std::string_view index, const std::string& index_name,
                                          std::unique_ptr<BundleShards> shards);

  TensorBundle(TensorBundle&&) noexcept;
  TensorBundle& operator=(TensorBundle&&) noexcept;
  ~TensorBundle();

  int num_shards() const { return num_shards_; }
  // The checkpoint keys, sorted; the encoded keys of slices are left out.
  std::vector<std::string> keys() const;
  // nullptr when the checkpoint has no such key.
  const BundleEntry* Find(const std::string& key) const;
  // The tensor saved under `key`, its bytes read from the shard and their checksum verified.
  StatusOr<Tensor> Read(const std::string& key);
  const std::string& index_name() const { return index_name_; }

 private:
  TensorBundle() = default;
  StatusOr<Tensor> ReadEntry(const std::string& key, const BundleEntry& entry);
  StatusOr<Tensor> ReadSliced(const std::string& key, const BundleEntry& entry);
  // Checks that the entry's bytes lie within its shard.
  Status CheckInShard(const std::string& key, const BundleEntry& entry);

  std::string index_name_;
  int num_shards_ = 0;
  std::map<std::string, BundleEntry> entries_;  // slice entries under their encoded keys too
  std::unique_ptr<BundleShards> shards_;
};

// TensorFlow's checkpoint::EncodeTensorNameSlice: the key a slice of `name` is stored under
// (OrderedCode: 0, the name, the rank, then per dimension start and length).
std::string EncodeTensorNameSlice(const std::string& name, const BundleSlice& slice);

}  // namespace xlens::graph

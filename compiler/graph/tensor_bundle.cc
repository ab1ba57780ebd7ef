#include "compiler/graph/tensor_bundle.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>

#include "compiler/graph/proto/tensor_bundle.pb.h"
#include "compiler/graph/table_reader.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

namespace xlens::graph {
namespace {

namespace tfp = ::xlens::tfproto;

// TensorFlow's TensorShape holds at most 254 dimensions.
constexpr int kMaxRank = 254;
// More slices than this for one tensor is not a shard-size policy's work.
constexpr size_t kMaxSlices = 4096;
// TensorFlow's kTensorBundleVersion: what a reader of this format must be at least.
constexpr int kBundleVersion = 1;

// Keys come from the file: shown quoted, escaped and bounded, as every name from outside is.
std::string KeyText(std::string_view key) {
  return "'" + EscapeForTerminal(TruncateUtf8(key, 200)) + "'";
}

std::string DimsText(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

// Elements of `dims`, or -1 past INT64_MAX.
int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

class FileShards : public BundleShards {
 public:
  FileShards(std::string prefix, int num_shards)
      : prefix_(std::move(prefix)), files_(static_cast<size_t>(num_shards)) {}
  StatusOr<int64_t> Size(int shard) override {
    ASSIGN_OR_RETURN(InputFile * file, Get(shard));
    return file->size();
  }
  Status Read(int shard, int64_t offset, char* data, size_t size) override {
    ASSIGN_OR_RETURN(InputFile * file, Get(shard));
    return file->ReadAt(data, size, offset);
  }
  std::string Name(int shard) const override {
    return DisplayPath(BundleShardPath(prefix_, shard, static_cast<int>(files_.size())));
  }

 private:
  StatusOr<InputFile*> Get(int shard) {
    auto& slot = files_[static_cast<size_t>(shard)];
    if (slot == nullptr) {
      const std::string path = BundleShardPath(prefix_, shard, static_cast<int>(files_.size()));
      if (GetPathKind(path) == PathKind::kMissing) {
        return Error(fmt::format("{}: no such file: expected shard {} of the {} the checkpoint's "
                                 "index declares",
                                 DisplayPath(path), shard, files_.size()));
      }
      ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
      slot = std::make_unique<InputFile>(std::move(file));
    }
    return slot.get();
  }
  std::string prefix_;
  std::vector<std::unique_ptr<InputFile>> files_;
};

template <typename Message>
bool ParseBinary(std::string_view bytes, Message* message) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return false;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetRecursionLimit(16);
  return message->ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

// OrderedCode (tensorflow/core/lib/strings/ordered_code.cc), the parts slice keys use.
void WriteNumIncreasing(std::string* dest, uint64_t value) {
  unsigned char buf[9];
  int len = 0;
  while (value > 0) {
    ++len;
    buf[9 - len] = static_cast<unsigned char>(value & 0xff);
    value >>= 8;
  }
  dest->push_back(static_cast<char>(len));
  dest->append(reinterpret_cast<const char*>(buf + 9 - len), static_cast<size_t>(len));
}

void WriteOrderedString(std::string* dest, std::string_view s) {
  for (char c : s) {
    if (c == '\0') {
      dest->append("\x00\xff", 2);
    } else if (c == '\xff') {
      dest->append("\xff\x00", 2);
    } else {
      dest->push_back(c);
    }
  }
  dest->append("\x00\x01", 2);
}

void WriteSignedNumIncreasing(std::string* dest, int64_t value) {
  static const unsigned char kHeader[11][2] = {{0, 0},       {0x80, 0},    {0xc0, 0}, {0xe0, 0},
                                               {0xf0, 0},    {0xf8, 0},    {0xfc, 0}, {0xfe, 0},
                                               {0xff, 0},    {0xff, 0x80}, {0xff, 0xc0}};
  const uint64_t x = value < 0 ? ~static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  if (x < 64) {
    dest->push_back(static_cast<char>(kHeader[1][0] ^ static_cast<unsigned char>(value)));
    return;
  }
  int bits = 0;
  for (uint64_t v = x; v != 0; v >>= 1) ++bits;
  const int len = bits / 7 + 1;  // each byte of the encoding holds 7 bits, less the sign
  unsigned char buf[10];
  const unsigned char sign = value < 0 ? 0xff : 0x00;
  buf[0] = buf[1] = sign;
  for (int i = 0; i < 8; ++i) buf[2 + i] = static_cast<unsigned char>(static_cast<uint64_t>(value) >> (56 - 8 * i));
  unsigned char* begin = buf + 10 - len;
  begin[0] ^= kHeader[len][0];
  begin[1] ^= kHeader[len][1];
  dest->append(reinterpret_cast<const char*>(begin), static_cast<size_t>(len));
}

Status ParseShape(const tfp::TensorShapeProto& proto, const std::string& where,
                  std::vector<int64_t>* dims) {
  if (proto.unknown_rank()) return Error(where + ": expected a known shape, the entry's has an unknown rank");
  if (proto.dim_size() > kMaxRank) {
    return Error(fmt::format("{}: a shape of {} dimensions, expected at most {}", where,
                             proto.dim_size(), kMaxRank));
  }
  for (const auto& d : proto.dim()) {
    if (d.size() < 0) {
      return Error(fmt::format("{}: dimension {} of the shape is {}, expected a size of 0 or more",
                               where, dims->size(), d.size()));
    }
    dims->push_back(d.size());
  }
  if (NumElements(*dims) < 0) {
    return Error(fmt::format("{}: shape {} has more elements than fit in 64 bits", where,
                             DimsText(*dims)));
  }
  return OkStatus();
}

}  // namespace

std::string BundleShardPath(const std::string& prefix, int shard, int num_shards) {
  return fmt::format("{}.data-{:05d}-of-{:05d}", prefix, shard, num_shards);
}

std::string EncodeTensorNameSlice(const std::string& name, const BundleSlice& slice) {
  std::string out;
  WriteNumIncreasing(&out, 0);
  WriteOrderedString(&out, name);
  WriteNumIncreasing(&out, slice.start.size());
  for (size_t d = 0; d < slice.start.size(); ++d) {
    WriteSignedNumIncreasing(&out, slice.start[d]);
    WriteSignedNumIncreasing(&out, slice.length[d]);
  }
  return out;
}

TensorBundle::TensorBundle(TensorBundle&&) noexcept = default;
TensorBundle& TensorBundle::operator=(TensorBundle&&) noexcept = default;
TensorBundle::~TensorBundle() = default;

StatusOr<TensorBundle> TensorBundle::Open(const std::string& prefix) {
  const std::string index_path = prefix + ".index";
  if (GetPathKind(index_path) == PathKind::kMissing) {
    return Error(fmt::format("{}: no such file: expected the checkpoint's index (a SavedModel "
                             "keeps it as variables/variables.index)",
                             DisplayPath(index_path)));
  }
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(index_path));
  auto bundle = FromIndex(bytes, DisplayPath(index_path), nullptr);
  if (!bundle.ok()) return bundle.status();
  bundle->shards_ = std::make_unique<FileShards>(prefix, bundle->num_shards_);
  return bundle;
}

StatusOr<TensorBundle> TensorBundle::FromIndex(std::string_view index, const std::string& name,
                                               std::unique_ptr<BundleShards> shards) {
  ASSIGN_OR_RETURN(std::vector<TableEntry> table, ReadTable(index, name));
  TensorBundle bundle;
  bundle.index_name_ = name;
  bundle.shards_ = std::move(shards);
  if (table.empty() || !table.front().key.empty()) {
    return Error(fmt::format("{}: byte {}: expected the header entry (the empty key) first", name,
                             table.empty() ? 0 : table.front().offset));
  }
  tfp::BundleHeaderProto header;
  const TableEntry& first = table.front();
  if (!ParseBinary(first.value, &header)) {
    return Error(fmt::format("{}: byte {}: the header entry is not a BundleHeaderProto", name,
                             first.offset));
  }
  if (header.num_shards() < 1 || header.num_shards() > 99999) {
    return Error(fmt::format("{}: byte {}: the header declares {} shards, expected 1 to 99999",
                             name, first.offset, header.num_shards()));
  }
  if (header.endianness() != tfp::BundleHeaderProto::LITTLE) {
    return Error(fmt::format("{}: byte {}: the checkpoint was written big-endian; xlens reads "
                             "little-endian checkpoints",
                             name, first.offset));
  }
  if (header.version().min_consumer() > kBundleVersion) {
    return Error(fmt::format("{}: byte {}: the checkpoint needs a reader of version {}, expected "
                             "at most {}",
                             name, first.offset, header.version().min_consumer(), kBundleVersion));
  }
  bundle.num_shards_ = header.num_shards();
  for (size_t i = 1; i < table.size(); ++i) {
    const TableEntry& t = table[i];
    const std::string where = fmt::format("{}: byte {}: entry {}", name, t.offset, KeyText(t.key));
    tfp::BundleEntryProto proto;
    if (!ParseBinary(t.value, &proto)) return Error(where + ": expected a BundleEntryProto");
    BundleEntry e;
    e.index_offset = t.offset;
    const int dtype = static_cast<int>(proto.dtype());
    if (!IsValidDataType(dtype) || IsRefType(static_cast<DataType>(dtype))) {
      return Error(fmt::format("{}: dtype {}, expected a TensorFlow data type", where, dtype));
    }
    e.dtype = static_cast<DataType>(dtype);
    if (e.dtype != DT_STRING && ToPrimitiveType(e.dtype) == PrimitiveType::PRIMITIVE_TYPE_INVALID) {
      return Error(fmt::format("{}: a {} tensor; xlens reads numeric and string tensors from "
                               "checkpoints",
                               where, DataTypeName(e.dtype)));
    }
    RETURN_IF_ERROR(ParseShape(proto.shape(), where, &e.shape));
    if (proto.shard_id() < 0 || proto.shard_id() >= bundle.num_shards_) {
      return Error(fmt::format("{}: shard {}, expected 0 to {} (the header declares {})", where,
                               proto.shard_id(), bundle.num_shards_ - 1, bundle.num_shards_));
    }
    e.shard_id = proto.shard_id();
    if (proto.offset() < 0 || proto.size() < 0 || proto.offset() > INT64_MAX - proto.size()) {
      return Error(fmt::format("{}: offset {} and size {}, expected a place in a shard", where,
                               proto.offset(), proto.size()));
    }
    e.offset = proto.offset();
    e.size = proto.size();
    e.masked_crc32c = proto.crc32c();
    const int64_t n = NumElements(e.shape);
    if (proto.slices_size() == 0 && e.dtype != DT_STRING) {
      const int64_t element = DataTypeSize(e.dtype);
      if (n > e.size / element || n * element != e.size) {
        return Error(fmt::format("{}: {} bytes for a {}{} tensor, expected {}", where, e.size,
                                 DataTypeName(e.dtype), DimsText(e.shape),
                                 n > INT64_MAX / element ? std::string("more than fit in 64 bits")
                                                         : std::to_string(n * element)));
      }
    }
    if (proto.slices_size() > 0) {
      if (static_cast<size_t>(proto.slices_size()) > kMaxSlices) {
        return Error(fmt::format("{}: {} slices, expected at most {}", where, proto.slices_size(),
                                 kMaxSlices));
      }
      if (e.dtype == DT_STRING || e.shape.empty()) {
        return Error(where + ": a sliced entry must be a numeric tensor of rank 1 or more");
      }
      for (const auto& s : proto.slices()) {
        if (static_cast<size_t>(s.extent_size()) != e.shape.size()) {
          return Error(fmt::format("{}: a slice of {} extents, expected one per dimension ({})",
                                   where, s.extent_size(), e.shape.size()));
        }
        BundleSlice slice;
        for (int d = 0; d < s.extent_size(); ++d) {
          const auto& x = s.extent(d);
          const int64_t length = x.has_length_case() == tfp::TensorSliceProto::Extent::kLength
                                     ? x.length()
                                     : -1;  // the whole dimension (TensorSlice's kFullExtent)
          const int64_t covers = length < 0 ? e.shape[d] : length;
          const bool whole = length < 0 && x.start() == 0;
          if (!whole && (length < 0 || x.start() < 0 || x.start() > e.shape[d] ||
                         covers > e.shape[d] - x.start())) {
            return Error(fmt::format("{}: slice extent {} starts at {} with length {}, expected "
                                     "within dimension {} of size {}",
                                     where, d, x.start(), length, d, e.shape[d]));
          }
          slice.start.push_back(x.start());
          slice.length.push_back(length);
        }
        e.slices.push_back(std::move(slice));
      }
    }
    bundle.entries_.emplace(t.key, std::move(e));
  }
  return bundle;
}

std::vector<std::string> TensorBundle::keys() const {
  std::vector<std::string> out;
  for (const auto& [key, entry] : entries_) {
    if (!key.empty() && key[0] != '\0') out.push_back(key);
  }
  return out;
}

const BundleEntry* TensorBundle::Find(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

StatusOr<Tensor> TensorBundle::Read(const std::string& key) {
  const BundleEntry* entry = Find(key);
  if (entry == nullptr) {
    return Error(fmt::format("{}: the checkpoint has no key {}", index_name_, KeyText(key)));
  }
  if (!entry->slices.empty()) return ReadSliced(key, *entry);
  return ReadEntry(key, *entry);
}

Status TensorBundle::CheckInShard(const std::string& key, const BundleEntry& e) {
  if (shards_ == nullptr) return Error(index_name_ + ": no shards to read from");
  ASSIGN_OR_RETURN(int64_t size, shards_->Size(e.shard_id));
  if (e.offset > size || e.size > size - e.offset) {
    return Error(fmt::format("{}: byte {}: entry {} lies at bytes {} to {} of shard {}, expected "
                             "within its {} bytes ({})",
                             index_name_, e.index_offset, KeyText(key), e.offset, e.offset + e.size,
                             e.shard_id, size, shards_->Name(e.shard_id)));
  }
  return OkStatus();
}

StatusOr<Tensor> TensorBundle::ReadEntry(const std::string& key, const BundleEntry& e) {
  RETURN_IF_ERROR(CheckInShard(key, e));
  const std::string shard = shards_->Name(e.shard_id);
  const int64_t n = NumElements(e.shape);
  if (e.dtype != DT_STRING) {
    // Allocates only what the shard holds: the size was checked against the file.
    ASSIGN_OR_RETURN(Tensor t, Tensor::Create(e.dtype, e.shape, INT64_MAX));
    if (e.size > 0) {
      RETURN_IF_ERROR(shards_->Read(e.shard_id, e.offset, static_cast<char*>(t.raw_data()),
                                    static_cast<size_t>(e.size)));
    }
    const uint32_t crc = Crc32c(std::string_view(static_cast<const char*>(t.raw_data()),
                                                 static_cast<size_t>(e.size)));
    if (MaskCrc32c(crc) != e.masked_crc32c) {
      return Error(fmt::format("{}: byte {}: the {} bytes of {} have CRC-32C {:08x}, expected "
                               "{:08x} (the index's, byte {} of {})",
                               shard, e.offset, e.size, KeyText(key), crc,
                               UnmaskCrc32c(e.masked_crc32c), e.index_offset, index_name_));
    }
    return t;
  }
  // A string tensor: varint64 lengths, the masked CRC-32C of the lengths, then the bytes.
  if (n > e.size) {
    return Error(fmt::format("{}: byte {}: {} strings in {} bytes, expected at least one byte per "
                             "length",
                             shard, e.offset, n, e.size));
  }
  std::string bytes(static_cast<size_t>(e.size), '\0');
  if (e.size > 0) RETURN_IF_ERROR(shards_->Read(e.shard_id, e.offset, bytes.data(), bytes.size()));
  ASSIGN_OR_RETURN(Tensor t, Tensor::Create(DT_STRING, e.shape, INT64_MAX));
  if (n == 0) return t;
  size_t pos = 0;
  uint32_t crc = 0;
  std::vector<uint64_t> lengths;
  uint64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t length = 0;
    int shift = 0;
    for (;;) {
      if (pos >= bytes.size() || shift > 63) {
        return Error(fmt::format("{}: byte {}: expected the length of string {} of {} (a varint)",
                                 shard, e.offset + static_cast<int64_t>(pos), i, KeyText(key)));
      }
      const uint8_t b = static_cast<uint8_t>(bytes[pos++]);
      length |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
      if ((b & 0x80) == 0) break;
    }
    if (length <= UINT32_MAX) {
      const uint32_t l32 = static_cast<uint32_t>(length);
      crc = Crc32c(std::string_view(reinterpret_cast<const char*>(&l32), 4), crc);
    } else {
      crc = Crc32c(std::string_view(reinterpret_cast<const char*>(&length), 8), crc);
    }
    if (length > bytes.size() || total > bytes.size() - length) {
      return Error(fmt::format("{}: byte {}: string {} of {} is {} bytes long, expected at most "
                               "the entry's {}",
                               shard, e.offset + static_cast<int64_t>(pos), i, KeyText(key), length,
                               e.size));
    }
    total += length;
    lengths.push_back(length);
  }
  if (bytes.size() - pos < 4 || bytes.size() - pos - 4 != total) {
    return Error(fmt::format("{}: byte {}: {} bytes follow the lengths of {}, expected 4 for "
                             "their checksum and {} of strings",
                             shard, e.offset + static_cast<int64_t>(pos), bytes.size() - pos,
                             KeyText(key), total));
  }
  uint32_t stored_lengths_crc;
  std::memcpy(&stored_lengths_crc, bytes.data() + pos, 4);
  if (UnmaskCrc32c(stored_lengths_crc) != crc) {
    return Error(fmt::format("{}: byte {}: the lengths of {} have CRC-32C {:08x}, expected the "
                             "stored {:08x}",
                             shard, e.offset + static_cast<int64_t>(pos), KeyText(key), crc,
                             UnmaskCrc32c(stored_lengths_crc)));
  }
  crc = Crc32c(std::string_view(bytes.data() + pos, 4), crc);
  pos += 4;
  for (int64_t i = 0; i < n; ++i) {
    std::string_view s(bytes.data() + pos, static_cast<size_t>(lengths[i]));
    crc = Crc32c(s, crc);
    t.strings()[static_cast<size_t>(i)] = std::string(s);
    pos += static_cast<size_t>(lengths[i]);
  }
  if (MaskCrc32c(crc) != e.masked_crc32c) {
    return Error(fmt::format("{}: byte {}: the {} bytes of {} have CRC-32C {:08x}, expected "
                             "{:08x} (the index's, byte {} of {})",
                             shard, e.offset, e.size, KeyText(key), crc,
                             UnmaskCrc32c(e.masked_crc32c), e.index_offset, index_name_));
  }
  return t;
}

StatusOr<Tensor> TensorBundle::ReadSliced(const std::string& key, const BundleEntry& e) {
  const std::string where = fmt::format("{}: byte {}: entry {}", index_name_, e.index_offset, KeyText(key));
  const size_t rank = e.shape.size();
  const int64_t element = DataTypeSize(e.dtype);
  // Every slice first: its stored entry, its place in its shard, no overlap; together they must
  // cover the tensor exactly, so the tensor allocated below is no larger than the bytes on disk.
  struct Part {
    std::vector<int64_t> start, length;
    const BundleEntry* entry;
    std::string key;
  };
  std::vector<Part> parts;
  int64_t covered = 0;
  for (const BundleSlice& s : e.slices) {
    Part p;
    for (size_t d = 0; d < rank; ++d) {
      p.start.push_back(s.length[d] < 0 ? 0 : s.start[d]);
      p.length.push_back(s.length[d] < 0 ? e.shape[d] : s.length[d]);
    }
    p.key = EncodeTensorNameSlice(key, s);
    p.entry = Find(p.key);
    if (p.entry == nullptr) {
      return Error(fmt::format("{}: slice {} of length {}: expected its entry in the index",
                               where, DimsText(p.start), DimsText(p.length)));
    }
    if (p.entry->dtype != e.dtype || p.entry->shape != p.length || !p.entry->slices.empty()) {
      return Error(fmt::format("{}: slice {} holds a {}{} tensor, expected {}{}", where,
                               DimsText(p.start), DataTypeName(p.entry->dtype),
                               DimsText(p.entry->shape), DataTypeName(e.dtype), DimsText(p.length)));
    }
    RETURN_IF_ERROR(CheckInShard(p.key, *p.entry));
    for (const Part& q : parts) {
      bool overlap = true;
      for (size_t d = 0; d < rank && overlap; ++d) {
        overlap = p.start[d] < q.start[d] + q.length[d] && q.start[d] < p.start[d] + p.length[d];
      }
      if (overlap) {
        return Error(fmt::format("{}: slices {} and {} overlap, expected disjoint slices", where,
                                 DimsText(q.start), DimsText(p.start)));
      }
    }
    covered += p.entry->size / element;
    parts.push_back(std::move(p));
  }
  const int64_t n = NumElements(e.shape);
  if (covered != n) {
    return Error(fmt::format("{}: the slices hold {} of the {} elements of {}, expected all", where,
                             covered, n, DimsText(e.shape)));
  }
  // Slices could all point at the same bytes: the tensor may not be larger than the shards are.
  int64_t on_disk = 0;
  for (int shard = 0; shard < num_shards_; ++shard) {
    ASSIGN_OR_RETURN(int64_t size, shards_->Size(shard));
    on_disk += std::min<int64_t>(size, INT64_MAX - on_disk);
  }
  if (n > on_disk / element) {
    return Error(fmt::format("{}: its slices make a tensor of {} bytes, expected at most the {} "
                             "bytes its {} shard{} hold",
                             where, n > INT64_MAX / element ? std::string("more than 2^63")
                                                            : std::to_string(n * element),
                             on_disk, num_shards_, num_shards_ == 1 ? "" : "s"));
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::Create(e.dtype, e.shape, INT64_MAX));
  // Row-major strides of the whole tensor, in bytes.
  std::vector<int64_t> stride(rank, element);
  for (size_t d = rank - 1; d > 0; --d) stride[d - 1] = stride[d] * e.shape[d];
  char* out = static_cast<char*>(t.raw_data());
  for (const Part& p : parts) {
    ASSIGN_OR_RETURN(Tensor piece, ReadEntry(p.key, *p.entry));
    if (piece.num_elements() == 0) continue;
    const char* in = static_cast<const char*>(piece.raw_data());
    const int64_t run = p.length[rank - 1] * element;  // contiguous bytes per innermost row
    std::vector<int64_t> index(rank, 0);               // over all dimensions but the last
    for (;;) {
      int64_t at = (p.start[rank - 1]) * element;
      for (size_t d = 0; d + 1 < rank; ++d) at += (p.start[d] + index[d]) * stride[d];
      std::memcpy(out + at, in, static_cast<size_t>(run));
      in += run;
      // The next row: an odometer over every dimension but the last.
      int d = static_cast<int>(rank) - 2;
      while (d >= 0 && ++index[static_cast<size_t>(d)] == p.length[static_cast<size_t>(d)]) {
        index[static_cast<size_t>(d)] = 0;
        --d;
      }
      if (d < 0) break;
    }
  }
  return t;
}

}  // namespace xlens::graph

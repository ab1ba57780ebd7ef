#include "compiler/graph/table_reader.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "compiler/support/file_io.h"

namespace xlens::graph {
namespace {

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr size_t kFooterSize = 48;     // two handles padded to 40 bytes, then the magic
constexpr size_t kBlockTrailerSize = 5;  // type byte + masked crc32c

std::array<uint32_t, 256> MakeCrc32cTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82f63b78u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

uint32_t Crc32cSoftware(const unsigned char* p, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = MakeCrc32cTable();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// SSE4.2's crc32 instruction computes CRC-32C: checkpoint shards are hundreds of megabytes.
__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const unsigned char* p, size_t n,
                                                          uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = __builtin_ia32_crc32qi(c32, *p++);
    --n;
  }
  return c32;
}
#endif

// A cursor over bytes that knows where it is in the file, for messages.
class Cursor {
 public:
  Cursor(std::string_view bytes, int64_t base, const std::string& name)
      : bytes_(bytes), base_(base), name_(name) {}
  bool done() const { return pos_ >= bytes_.size(); }
  int64_t offset() const { return base_ + static_cast<int64_t>(pos_); }

  StatusOr<uint64_t> Varint(const char* what) {
    uint64_t result = 0;
    const int64_t start = offset();
    for (int shift = 0; shift <= 63; shift += 7) {
      if (pos_ >= bytes_.size()) {
        return Error(fmt::format("{}: byte {}: expected {} (a varint), the block ends there", name_,
                                 start, what));
      }
      const uint8_t b = static_cast<uint8_t>(bytes_[pos_++]);
      if (shift == 63 && b > 1) break;
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return result;
    }
    return Error(fmt::format("{}: byte {}: expected {} (a varint of at most 64 bits)", name_, start,
                             what));
  }

  StatusOr<std::string_view> Bytes(uint64_t n, const char* what) {
    if (n > bytes_.size() - pos_) {
      return Error(fmt::format("{}: byte {}: expected {} of {} bytes, only {} are left in the block",
                               name_, offset(), what, n, bytes_.size() - pos_));
    }
    std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
  int64_t base_;
  const std::string& name_;
};

struct BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;
};

StatusOr<BlockHandle> ReadHandle(Cursor& in, const char* what) {
  BlockHandle h;
  ASSIGN_OR_RETURN(h.offset, in.Varint(what));
  ASSIGN_OR_RETURN(h.size, in.Varint(what));
  return h;
}

// The contents of the block at `h`, its place and checksum checked. `end` is where blocks must
// end (the footer's start).
StatusOr<std::string_view> BlockContents(std::string_view file, const BlockHandle& h, uint64_t end,
                                         const char* what, const std::string& name) {
  if (h.offset > end || h.size > end - h.offset || kBlockTrailerSize > end - h.offset - h.size) {
    return Error(fmt::format("{}: the {} block at byte {} of {} bytes: expected it within the "
                             "file's {} bytes before the footer",
                             name, what, h.offset, h.size, end));
  }
  std::string_view contents = file.substr(h.offset, h.size);
  const uint8_t type = static_cast<uint8_t>(file[h.offset + h.size]);
  uint32_t stored;
  std::memcpy(&stored, file.data() + h.offset + h.size + 1, 4);
  const uint32_t actual = Crc32c(file.substr(h.offset, h.size + 1));
  if (UnmaskCrc32c(stored) != actual) {
    return Error(fmt::format("{}: byte {}: the {} block's checksum is {:08x}, expected the CRC-32C "
                             "of its {} bytes, {:08x}",
                             name, h.offset + h.size + 1, what, UnmaskCrc32c(stored), h.size + 1,
                             actual));
  }
  if (type == 1) {
    return Error(fmt::format("{}: byte {}: the {} block is Snappy-compressed; TensorFlow writes "
                             "checkpoint indexes uncompressed and xlens reads only those",
                             name, h.offset + h.size, what));
  }
  if (type != 0) {
    return Error(fmt::format("{}: byte {}: the {} block's compression type is {}, expected 0 "
                             "(none)",
                             name, h.offset + h.size, what, type));
  }
  return contents;
}

// Appends the entries of one block (keys rebuilt from their shared prefixes).
Status ReadBlock(std::string_view contents, int64_t base, const std::string& name,
                 const TableLimits& limits, int64_t* decoded, std::vector<TableEntry>* out) {
  if (contents.size() < 4) {
    return Error(fmt::format("{}: byte {}: a block of {} bytes, expected at least the 4 of its "
                             "restart count",
                             name, base, contents.size()));
  }
  uint32_t restarts;
  std::memcpy(&restarts, contents.data() + contents.size() - 4, 4);
  if (restarts == 0 || restarts > (contents.size() - 4) / 4) {
    return Error(fmt::format("{}: byte {}: the block declares {} restart points, expected 1 to {} "
                             "in its {} bytes",
                             name, base + static_cast<int64_t>(contents.size()) - 4, restarts,
                             (contents.size() - 4) / 4, contents.size()));
  }
  const size_t entries_end = contents.size() - 4 - 4 * static_cast<size_t>(restarts);
  Cursor in(contents.substr(0, entries_end), base, name);
  std::string key;
  while (!in.done()) {
    const int64_t at = in.offset();
    ASSIGN_OR_RETURN(uint64_t shared, in.Varint("a shared key length"));
    ASSIGN_OR_RETURN(uint64_t unshared, in.Varint("an unshared key length"));
    ASSIGN_OR_RETURN(uint64_t value_size, in.Varint("a value length"));
    if (shared > key.size()) {
      return Error(fmt::format("{}: byte {}: an entry shares {} bytes with the key before it, "
                               "expected at most {}",
                               name, at, shared, key.size()));
    }
    ASSIGN_OR_RETURN(std::string_view suffix, in.Bytes(unshared, "a key"));
    ASSIGN_OR_RETURN(std::string_view value, in.Bytes(value_size, "a value"));
    *decoded += static_cast<int64_t>(shared + unshared + value_size);
    if (*decoded > limits.max_decoded_bytes ||
        static_cast<int64_t>(out->size()) >= limits.max_entries) {
      return Error(fmt::format("{}: byte {}: the table's entries add up to more than {} entries "
                               "or {} of keys and values",
                               name, at, limits.max_entries, FormatBytes(limits.max_decoded_bytes)));
    }
    key.resize(shared);
    key.append(suffix);
    if (!out->empty() && out->back().key >= key) {
      return Error(fmt::format("{}: byte {}: keys out of order: expected a key after the one "
                               "before it",
                               name, at));
    }
    out->push_back(TableEntry{key, std::string(value), at});
  }
  return OkStatus();
}

}  // namespace

uint32_t Crc32c(std::string_view bytes, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  crc = ~crc;
#if defined(__x86_64__)
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  crc = hardware ? Crc32cHardware(p, bytes.size(), crc) : Crc32cSoftware(p, bytes.size(), crc);
#else
  crc = Crc32cSoftware(p, bytes.size(), crc);
#endif
  return ~crc;
}

StatusOr<std::vector<TableEntry>> ReadTable(std::string_view file, const std::string& name,
                                            const TableLimits& limits) {
  if (file.size() < kFooterSize) {
    return Error(fmt::format("{}: byte 0: a table of {} bytes, expected at least its {}-byte footer",
                             name, file.size(), kFooterSize));
  }
  const uint64_t footer_at = file.size() - kFooterSize;
  uint64_t magic;
  std::memcpy(&magic, file.data() + file.size() - 8, 8);
  if (magic != kTableMagic) {
    return Error(fmt::format("{}: byte {}: expected the table magic number {:016x}, found {:016x} "
                             "(not a checkpoint index)",
                             name, file.size() - 8, kTableMagic, magic));
  }
  Cursor footer(file.substr(footer_at, kFooterSize - 8), static_cast<int64_t>(footer_at), name);
  ASSIGN_OR_RETURN(BlockHandle meta, ReadHandle(footer, "the metaindex block's place"));
  (void)meta;  // TensorFlow's checkpoints have no meta blocks (filters); nothing to read there
  ASSIGN_OR_RETURN(BlockHandle index, ReadHandle(footer, "the index block's place"));
  ASSIGN_OR_RETURN(std::string_view index_contents,
                   BlockContents(file, index, footer_at, "index", name));
  TableLimits bounded = limits;
  bounded.max_decoded_bytes = std::min<int64_t>(
      limits.max_decoded_bytes, (int64_t{64} << 20) + 32 * static_cast<int64_t>(file.size()));
  std::vector<TableEntry> handles;
  int64_t decoded = 0;
  RETURN_IF_ERROR(ReadBlock(index_contents, static_cast<int64_t>(index.offset), name, bounded,
                            &decoded, &handles));
  std::vector<TableEntry> entries;
  uint64_t next_free = 0;  // blocks come one after another: each is read once
  for (const TableEntry& h : handles) {
    Cursor in(h.value, h.offset, name);
    ASSIGN_OR_RETURN(BlockHandle data, ReadHandle(in, "a data block's place"));
    if (data.offset < next_free) {
      return Error(fmt::format("{}: byte {}: a data block at byte {}, expected one after byte {} "
                               "(blocks in file order, none read twice)",
                               name, h.offset, data.offset, next_free));
    }
    ASSIGN_OR_RETURN(std::string_view contents, BlockContents(file, data, footer_at, "data", name));
    next_free = data.offset + data.size + kBlockTrailerSize;
    RETURN_IF_ERROR(ReadBlock(contents, static_cast<int64_t>(data.offset), name, bounded, &decoded,
                              &entries));
  }
  return entries;
}

}  // namespace xlens::graph

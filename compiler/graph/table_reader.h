// TensorFlow's table format (tensorflow/core/lib/io/table*, LevelDB's SSTable byte for byte): the
// format of a checkpoint's `.index` file. A table is data blocks of sorted, prefix-compressed
// key/value entries, each block followed by a type byte and a masked CRC-32C, an index block that
// points at them, and a 48-byte footer with the index's place and the magic number.
//
// Written here rather than linked from LevelDB: the reader is small, reads bytes already in memory
// (the file came through file_io and the input limit), bounds every size and offset, and is fuzzed
// with the rest of the readers. TensorFlow writes checkpoint indexes uncompressed
// (BundleWriter sets kNoCompression); a Snappy-compressed block is refused by name.
//
// Input is untrusted: every error is one line, `NAME: byte N: what was expected`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::graph {

// CRC-32C (Castagnoli), as TensorFlow's crc32c::Value/Extend compute it.
uint32_t Crc32c(std::string_view bytes, uint32_t crc = 0);
// TensorFlow's crc32c::Mask/Unmask: what tables and checkpoints store.
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

// Bounds on what a table may make the reader hold, beyond its own bytes.
struct TableLimits {
  // Keys are rebuilt from shared prefixes, so n entries of a block can name n long keys: the
  // entries of a table may not add up to more than this many bytes of keys and values, nor to
  // more than 64 MiB plus 32 times the table's own size (TensorFlow restarts the sharing every 16
  // keys, so a real index rebuilds to a few times its size).
  int64_t max_decoded_bytes = int64_t{1} << 30;
  int64_t max_entries = int64_t{1} << 24;
};

struct TableEntry {
  std::string key;
  std::string value;
  int64_t offset = 0;  // where the entry starts in the file, for messages
};

// Every entry of the table, in key order (checked: each key greater than the one before, by
// bytes), every block's checksum verified.
StatusOr<std::vector<TableEntry>> ReadTable(std::string_view bytes, const std::string& name,
                                            const TableLimits& limits = {});

}  // namespace xlens::graph

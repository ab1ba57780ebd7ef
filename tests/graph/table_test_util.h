// Writes tables in TensorFlow's (LevelDB's) format for the reader's tests: sorted entries in
// data blocks of `per_block` entries, prefix-compressed with a restart every 16, an index block,
// and the footer. What TensorFlow's TableBuilder writes with compression off.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/table_reader.h"

namespace xlens::graph::testing {

inline void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

inline void PutFixed32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}

inline std::string BlockOf(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string block;
  std::vector<uint32_t> restarts;
  std::string last;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [key, value] = entries[i];
    size_t shared = 0;
    if (i % 16 == 0) {
      restarts.push_back(static_cast<uint32_t>(block.size()));
    } else {
      while (shared < last.size() && shared < key.size() && last[shared] == key[shared]) ++shared;
    }
    PutVarint(&block, shared);
    PutVarint(&block, key.size() - shared);
    PutVarint(&block, value.size());
    block += key.substr(shared);
    block += value;
    last = key;
  }
  if (restarts.empty()) restarts.push_back(0);
  for (uint32_t r : restarts) PutFixed32(&block, r);
  PutFixed32(&block, static_cast<uint32_t>(restarts.size()));
  return block;
}

// Appends `contents` with its trailer (type byte, masked CRC-32C) and returns its handle.
inline std::string AppendBlock(std::string* file, const std::string& contents, char type = 0) {
  std::string handle;
  PutVarint(&handle, file->size());
  PutVarint(&handle, contents.size());
  *file += contents;
  file->push_back(type);
  PutFixed32(file, MaskCrc32c(Crc32c(contents + std::string(1, type))));
  return handle;
}

inline std::string BuildTable(const std::vector<std::pair<std::string, std::string>>& entries,
                              size_t per_block = 1000) {
  std::string file;
  std::vector<std::pair<std::string, std::string>> index;
  for (size_t i = 0; i < entries.size(); i += per_block) {
    std::vector<std::pair<std::string, std::string>> part(
        entries.begin() + static_cast<long>(i),
        entries.begin() + static_cast<long>(std::min(entries.size(), i + per_block)));
    std::string handle = AppendBlock(&file, BlockOf(part));
    index.push_back({part.back().first, handle});
  }
  const std::string meta = AppendBlock(&file, BlockOf({}));
  const std::string index_handle = AppendBlock(&file, BlockOf(index));
  std::string footer = meta + index_handle;
  footer.resize(40, '\0');
  PutFixed32(&footer, 0x8b80fb57u);
  PutFixed32(&footer, 0xdb477524u);
  return file + footer;
}

}  // namespace xlens::graph::testing

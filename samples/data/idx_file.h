// The IDX format of the MNIST family (LeCun's MNIST, Zalando's Fashion-MNIST): a 4-byte magic
// (two zero bytes, the element type, the number of dimensions), each dimension as a big-endian
// uint32, then the elements in row-major order. Debian ships the files gzip-compressed
// (`*-idx3-ubyte.gz`), so a gzip stream is inflated first. Only unsigned bytes (type 0x08) are
// read, as every file of the data sets is. The files come from outside: every error names the
// file, the byte offset and what was expected there, and nothing is allocated beyond what the
// header promises and the input size limit allows.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::samples {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, product(dims) elements
};

// Reads `path` (an IDX file, or a gzip of one).
StatusOr<IdxArray> ReadIdxFile(const std::string& path);
// Parses IDX bytes (already inflated); `name` is used in messages.
StatusOr<IdxArray> ParseIdx(std::string_view bytes, const std::string& name);
// Inflates a gzip stream, refusing to produce more than `max_bytes`; `name` for messages.
StatusOr<std::string> Gunzip(std::string_view bytes, const std::string& name, int64_t max_bytes);
// Writes an uncompressed IDX file of unsigned bytes (the tiny data set, the tests' inputs).
Status WriteIdxFile(const std::string& path, const IdxArray& array);

}  // namespace xlens::samples

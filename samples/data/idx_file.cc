#include "samples/data/idx_file.h"

#include <zlib.h>

#include <limits>

#include "compiler/support/file_io.h"

namespace xlens::samples {
namespace {

constexpr uint8_t kTypeUnsignedByte = 0x08;
constexpr int kMaxDims = 4;

std::string Hex(uint32_t v, int digits) {
  static const char* kDigits = "0123456789abcdef";
  std::string s(digits, '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) s[i] = kDigits[v & 15];
  return "0x" + s;
}

std::string TypeName(uint8_t type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    default: return "unknown";
  }
}

bool IsGzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
         static_cast<uint8_t>(bytes[1]) == 0x8b;
}

}  // namespace

StatusOr<std::string> Gunzip(std::string_view bytes, const std::string& name, int64_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return Error(name + ": cannot start zlib");
  std::string out;
  char buffer[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(std::min<size_t>(bytes.size(), std::numeric_limits<uInt>::max()));
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      std::string why = rc == Z_BUF_ERROR ? "the gzip stream ends early (truncated file)"
                                          : std::string("corrupt gzip stream (") +
                                                (z.msg ? z.msg : "zlib error " + std::to_string(rc)) + ")";
      const uint64_t at = z.total_in;
      inflateEnd(&z);
      return Error(name + ": at byte " + std::to_string(at) + ": " + why);
    }
    out.append(buffer, sizeof(buffer) - z.avail_out);
    if (static_cast<int64_t>(out.size()) > max_bytes) {
      inflateEnd(&z);
      return Error(name + ": inflates to more than " + FormatBytes(max_bytes) +
                   " (the input size limit; raise it with XLENS_MAX_INPUT_SIZE)");
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      const uint64_t at = z.total_in;
      inflateEnd(&z);
      return Error(name + ": at byte " + std::to_string(at) +
                   ": the gzip stream ends early (truncated file)");
    }
  }
  inflateEnd(&z);
  return out;
}

StatusOr<IdxArray> ParseIdx(std::string_view bytes, const std::string& name) {
  auto u8 = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  if (bytes.size() < 4) {
    return Error(name + ": " + std::to_string(bytes.size()) +
                 " bytes: too short for an IDX file (expected a 4-byte magic number)");
  }
  const uint32_t magic = (uint32_t{u8(0)} << 24) | (uint32_t{u8(1)} << 16) |
                         (uint32_t{u8(2)} << 8) | u8(3);
  if (u8(0) != 0 || u8(1) != 0) {
    return Error(name + ": at byte 0: magic " + Hex(magic, 8) +
                 " is not an IDX file's (expected 0x000008NN: two zero bytes, the type, the rank)");
  }
  if (u8(2) != kTypeUnsignedByte) {
    return Error(name + ": at byte 2: element type " + Hex(u8(2), 2) + " (" + TypeName(u8(2)) +
                 ") is not supported (expected 0x08, unsigned byte, as in the MNIST files)");
  }
  const int rank = u8(3);
  if (rank < 1 || rank > kMaxDims) {
    return Error(name + ": at byte 3: rank " + std::to_string(rank) + " (expected 1 to " +
                 std::to_string(kMaxDims) + ")");
  }
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (bytes.size() < header) {
    return Error(name + ": " + std::to_string(bytes.size()) + " bytes: the header of a rank-" +
                 std::to_string(rank) + " IDX file needs " + std::to_string(header) + " bytes");
  }
  IdxArray array;
  int64_t elements = 1;
  for (int d = 0; d < rank; ++d) {
    const size_t at = 4 + 4 * d;
    const int64_t dim = (int64_t{u8(at)} << 24) | (int64_t{u8(at + 1)} << 16) |
                        (int64_t{u8(at + 2)} << 8) | u8(at + 3);
    array.dims.push_back(dim);
    // Checked by division so the product cannot overflow: a dim of 0 is valid (an empty set),
    // a product above the bytes present is refused before anything is allocated.
    const int64_t size = static_cast<int64_t>(bytes.size());
    if (dim != 0 && elements > size / dim) {
      return Error(name + ": at byte " + std::to_string(at) + ": dimension " + std::to_string(d) +
                   " is " + std::to_string(dim) + ", which needs more data than the " +
                   std::to_string(bytes.size()) + "-byte file holds");
    }
    elements *= dim;
  }
  const size_t have = bytes.size() - header;
  if (have != static_cast<size_t>(elements)) {
    return Error(name + ": at byte " + std::to_string(header) + ": the header promises " +
                 std::to_string(elements) + " bytes of data, the file has " + std::to_string(have) +
                 (have < static_cast<size_t>(elements) ? " (truncated)" : " (trailing bytes)"));
  }
  array.data.assign(bytes.begin() + header, bytes.end());
  return array;
}

StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  if (IsGzip(bytes)) {
    ASSIGN_OR_RETURN(std::string inflated, Gunzip(bytes, path, MaxInputBytes()));
    return ParseIdx(inflated, path + " (inflated)");
  }
  return ParseIdx(bytes, path);
}

Status WriteIdxFile(const std::string& path, const IdxArray& array) {
  std::string out = {0, 0, static_cast<char>(kTypeUnsignedByte), static_cast<char>(array.dims.size())};
  for (int64_t d : array.dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((d >> shift) & 255));
  }
  out.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  return WriteFile(path, out);
}

}  // namespace xlens::samples

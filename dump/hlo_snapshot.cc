#include "dump/hlo_snapshot.h"

#include <fmt/format.h>

#include <array>

#include "compiler/hlo/npy.h"

namespace xlens {
namespace {

void CollectLeaves(const Literal& literal, std::vector<const Literal*>& leaves) {
  if (!literal.shape().IsTuple()) {
    leaves.push_back(&literal);
    return;
  }
  for (const Literal& element : literal.tuple_elements()) CollectLeaves(element, leaves);
}

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  return table;
}

}  // namespace

std::string SnapshotChecksum(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return fmt::format("crc32:{:08x}", crc ^ 0xFFFFFFFFu);
}

StatusOr<std::vector<SnapshotTensor>> SerializeExecution(int64_t execution,
                                                         const std::vector<Literal>& arguments,
                                                         const Literal& result) {
  std::vector<SnapshotTensor> out;
  const std::string prefix = fmt::format("execution_{:04d}", execution);
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].shape().IsTuple()) {
      return Error(fmt::format("argument {} is a tuple, which .npy cannot hold", i));
    }
    StatusOr<std::string> npy = SerializeNpy(arguments[i]);
    if (!npy.ok()) return npy.status().WithContext(fmt::format("argument {}", i));
    out.push_back({fmt::format("{}.arg{}.npy", prefix, i), arguments[i].shape().ToString(false),
                   *std::move(npy)});
  }
  std::vector<const Literal*> leaves;
  CollectLeaves(result, leaves);
  for (size_t i = 0; i < leaves.size(); ++i) {
    StatusOr<std::string> npy = SerializeNpy(*leaves[i]);
    if (!npy.ok()) return npy.status().WithContext(fmt::format("result {}", i));
    out.push_back({fmt::format("{}.out{}.npy", prefix, i), leaves[i]->shape().ToString(false),
                   *std::move(npy)});
  }
  return out;
}

}  // namespace xlens

// libFuzzer target for the checkpoint readers: TensorFlow's table format (the `.index` file's
// blocks, restarts, prefix-shared keys, checksums and footer), the BundleHeaderProto and
// BundleEntryProtos it holds, and reading every entry from a data shard (numeric tensors, string
// tensors, tensors saved in slices). The first two bytes are the index's length (little-endian);
// the index follows, and the rest is the bytes of every shard. Any bytes must give tensors or one
// clean line that names the file: no crash, no sanitizer report, no hang, no allocation beyond
// what the shard holds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "compiler/graph/tensor_bundle.h"
#include "compiler/support/terminal_text.h"

namespace {

[[noreturn]] void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, xlens::EscapeForTerminal(detail).c_str());
  std::abort();
}

void CheckRefusal(const xlens::Status& status) {
  const std::string& message = status.message();
  if (message.rfind("fuzz.index: ", 0) != 0 && message.rfind("shard", 0) != 0) {
    Die("message does not name the file", message);
  }
  if (message.find('\n') != std::string::npos) Die("message is more than one line", message);
}

class MemoryShards : public xlens::graph::BundleShards {
 public:
  explicit MemoryShards(std::string_view bytes) : bytes_(bytes) {}
  xlens::StatusOr<int64_t> Size(int) override { return static_cast<int64_t>(bytes_.size()); }
  xlens::Status Read(int, int64_t offset, char* data, size_t size) override {
    if (offset < 0 || static_cast<uint64_t>(offset) + size > bytes_.size()) Die("read outside the shard", "");
    std::memcpy(data, bytes_.data() + offset, size);
    return xlens::OkStatus();
  }
  std::string Name(int shard) const override { return "shard" + std::to_string(shard); }

 private:
  std::string_view bytes_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t index_size = std::min<size_t>(size - 2, data[0] | (size_t{data[1]} << 8));
  std::string_view index(reinterpret_cast<const char*>(data) + 2, index_size);
  std::string_view shard(reinterpret_cast<const char*>(data) + 2 + index_size, size - 2 - index_size);
  auto bundle = xlens::graph::TensorBundle::FromIndex(index, "fuzz.index",
                                                       std::make_unique<MemoryShards>(shard));
  if (!bundle.ok()) {
    CheckRefusal(bundle.status());
    return 0;
  }
  for (const std::string& key : bundle->keys()) {
    auto tensor = bundle->Read(key);
    if (!tensor.ok()) CheckRefusal(tensor.status());
  }
  return 0;
}

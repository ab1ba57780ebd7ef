// libFuzzer target for the bug bundle reader. A bundle comes from someone else: any bytes must
// unpack or give one clean error line, with no crash, no sanitizer report, no hang, and nothing
// left outside the private directory (which is gone afterwards, whatever happened). The bytes are
// written to a file because the reader takes a path, as `xlens replay` does.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "compiler/support/file_io.h"
#include "dump/bundle_reader.h"

namespace {

// A scratch directory per process: the input file and the parent of the private directories.
const std::filesystem::path& Scratch() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("xlens_bundle_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d / "unpack");
    // Expansion is bounded well below the fuzzer's memory limit.
    xlens::SetMaxInputBytes(int64_t{64} << 20);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& scratch = Scratch();
  const std::string input = (scratch / "input.tar.gz").string();
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  {
    xlens::StatusOr<xlens::UnpackedBundle> bundle =
        xlens::UnpackBundle(input, (scratch / "unpack").string());
    if (!bundle.ok() && bundle.status().message().find('\n') != std::string::npos) {
      std::fprintf(stderr, "an error of more than one line: %s\n",
                   bundle.status().message().c_str());
      std::abort();
    }
  }
  // Whatever the input, the private directory went with the bundle, and nothing else appeared.
  for (const auto& entry : std::filesystem::directory_iterator(scratch)) {
    const std::string name = entry.path().filename().string();
    if (name != "input.tar.gz" && name != "unpack") {
      std::fprintf(stderr, "the reader wrote %s outside its directory\n", name.c_str());
      std::abort();
    }
  }
  if (!std::filesystem::is_empty(scratch / "unpack")) {
    std::fprintf(stderr, "the private directory was left behind\n");
    std::abort();
  }
  return 0;
}

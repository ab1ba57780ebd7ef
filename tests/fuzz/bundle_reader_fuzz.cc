// libFuzzer target for the bug bundle reader. A bundle comes from someone else: any bytes must
// unpack or give one clean error line, with no crash, no sanitizer report, no hang, and nothing
// left outside the private directory (which is gone afterwards, whatever happened). The bytes are
// written to a file because the reader takes a path, as `xlens replay` does.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "compiler/support/file_io.h"
#include "dump/bundle_reader.h"
#include "tests/scratch_directory.h"

namespace {

// A scratch directory per process, removed when the process ends: the input file and the parent
// of the private directories.
const std::filesystem::path& Scratch() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = xlens::testing::ScratchDirectory("bundle-fuzz");
    std::filesystem::create_directories(d / "unpack");
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Expansion is bounded well below the fuzzer's memory limit.
  xlens::SetMaxInputBytes(int64_t{64} << 20);
  // Made before libFuzzer sets its signal handlers, so that its own removal on SIGINT and SIGTERM
  // is the one kept.
  Scratch();
  return 0;
}

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

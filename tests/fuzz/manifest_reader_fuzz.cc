// libFuzzer target for the manifest reader. A dump directory's manifest.json is read while a
// user's compilation runs (to merge with what other processes wrote), so any bytes must give a
// manifest or one clean error line: no crash, no exception, no sanitizer report, no hang. A
// manifest that reads must also write back to the same manifest.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dump/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  xlens::StatusOr<xlens::Manifest> manifest = xlens::ParseManifest(bytes);
  if (!manifest.ok()) {
    if (manifest.status().message().find('\n') != std::string::npos) {
      std::fprintf(stderr, "an error of more than one line: %s\n", manifest.status().message().c_str());
      std::abort();
    }
    return 0;
  }
  xlens::StatusOr<xlens::Manifest> again = xlens::ParseManifest(xlens::ManifestToJson(*manifest));
  if (!again.ok()) {
    std::fprintf(stderr, "written manifest does not read back: %s\n", again.status().message().c_str());
    std::abort();
  }
  return 0;
}

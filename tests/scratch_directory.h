// Where a test writes its files: one private folder per test process, made on first use under
// $TMPDIR (else /tmp) with a name no other run can take, and removed with everything in it when
// the process ends or is signalled (compiler/support/temporary_directory.h). A fixed name under
// /tmp would be left behind by every run and shared by two runs at once.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include "compiler/support/temporary_directory.h"

namespace xlens::testing {

// The folder itself (made once; `purpose` names it, xlens-PURPOSE-XXXXXX, on the first call).
inline const std::string& ScratchDirectory(const char* purpose = "test") {
  static const TemporaryDirectory dir = [purpose] {
    StatusOr<TemporaryDirectory> made = TemporaryDirectory::Create(purpose);
    if (!made.ok()) {
      // Nothing a test could check holds without it.
      std::fprintf(stderr, "%s\n", made.status().message().c_str());
      std::abort();
    }
    return std::move(*made);
  }();
  return dir.path();
}

// An empty folder `name` inside the scratch directory (emptied when a test of the same process
// asked for it before).
inline std::filesystem::path FreshScratchDir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(ScratchDirectory()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace xlens::testing

// A private temporary directory: made with mkdtemp (mode 0700, a name nobody can predict) under
// $TMPDIR (else /tmp), and removed with everything in it when its owner goes, or when SIGINT,
// SIGTERM, SIGHUP or the watchdog ends the process (removed_on_signal.h). Every temporary file
// xlens makes lives in one of these, so TMPDIR is honoured everywhere and nothing is left behind.
#pragma once

#include <string>
#include <string_view>

#include "compiler/support/removed_on_signal.h"
#include "compiler/support/status.h"

namespace xlens {

// The directory temporary files go under: $TMPDIR when set and not empty, else /tmp.
std::string TemporaryDirectoryBase();

class TemporaryDirectory {
 public:
  // Makes `parent`/xlens-`purpose`-XXXXXX (`parent` empty: TemporaryDirectoryBase()). The error
  // names the parent and the reason.
  static StatusOr<TemporaryDirectory> Create(std::string_view purpose, const std::string& parent = "");
  TemporaryDirectory(TemporaryDirectory&& other) noexcept;
  TemporaryDirectory& operator=(TemporaryDirectory&& other) noexcept;
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  // Removes the directory and what is in it (symbolic links are removed, not followed).
  ~TemporaryDirectory();
  const std::string& path() const { return path_; }

 private:
  TemporaryDirectory(std::string path, RemovedOnSignal registration)
      : path_(std::move(path)), registration_(std::move(registration)) {}
  void Remove();
  std::string path_;
  RemovedOnSignal registration_;  // let go after the directory is removed
};

}  // namespace xlens

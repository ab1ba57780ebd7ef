#include "compiler/support/temporary_directory.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "compiler/support/terminal_text.h"

namespace xlens {

std::string TemporaryDirectoryBase() {
  // std::filesystem::temp_directory_path reads TMPDIR too, but also TMP and TEMP, and fails on a
  // TMPDIR that does not exist; mkdtemp's error says that better.
  const char* tmpdir = std::getenv("TMPDIR");
  if (tmpdir != nullptr && *tmpdir != '\0') return tmpdir;
  return "/tmp";
}

StatusOr<TemporaryDirectory> TemporaryDirectory::Create(std::string_view purpose, const std::string& parent) {
  const std::string base = parent.empty() ? TemporaryDirectoryBase() : parent;
  std::string pattern = fmt::format("{}/xlens-{}-XXXXXX", base, purpose);
  // Made and registered in one step: a signal in between cannot leave it behind.
  auto registration = RemovedOnSignal::Create([&]() -> StatusOr<std::string> {
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Error(fmt::format("cannot make a private directory in {}: {}", DisplayPath(base),
                               std::strerror(errno)));
    }
    return pattern;
  });
  if (!registration.ok()) return registration.status();
  return TemporaryDirectory(std::move(pattern), std::move(registration).value());
}

TemporaryDirectory::TemporaryDirectory(TemporaryDirectory&& other) noexcept
    : path_(std::move(other.path_)), registration_(std::move(other.registration_)) {
  other.path_.clear();
}

TemporaryDirectory& TemporaryDirectory::operator=(TemporaryDirectory&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::move(other.path_);
    registration_ = std::move(other.registration_);
    other.path_.clear();
  }
  return *this;
}

TemporaryDirectory::~TemporaryDirectory() { Remove(); }

void TemporaryDirectory::Remove() {
  if (path_.empty()) return;
  std::error_code ec;
  // remove_all does not follow symbolic links: a link planted inside removes only the link.
  std::filesystem::remove_all(path_, ec);
  path_.clear();
  registration_ = RemovedOnSignal();
}

}  // namespace xlens

#include "compiler/support/private_directory.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

namespace xlens {

std::string ParentDirectory(const std::string& path) {
  size_t slash = path.find_last_not_of('/');
  slash = slash == std::string::npos ? std::string::npos : path.rfind('/', slash);
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string PrivateDirectoryProblem(const std::string& directory, bool create, bool* missing) {
  *missing = false;
  struct stat st;
  if (::stat(directory.c_str(), &st) != 0) {
    if (errno != ENOENT) return fmt::format("cannot be used: {}", std::strerror(errno));
    if (!create) {
      *missing = true;
      return "";
    }
    if (::mkdir(directory.c_str(), 0700) != 0 && errno == ENOENT) {
      if (Status made = CreateDirectories(ParentDirectory(directory)); !made.ok()) {
        return fmt::format("cannot be created: {}", made.message());
      }
      ::mkdir(directory.c_str(), 0700);
    }
    if (::stat(directory.c_str(), &st) != 0) {
      return fmt::format("cannot be created: {}", std::strerror(errno));
    }
  }
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (st.st_uid != ::geteuid()) {
    return fmt::format("belongs to user id {}, not to this user (id {})", st.st_uid, ::geteuid());
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fmt::format("can be written by {} (mode {:04o}); make it private with chmod go-w",
                       (st.st_mode & S_IWOTH) != 0 ? "every user" : "its group",
                       st.st_mode & 07777);
  }
  return "";
}

namespace {

std::mutex reported_mutex;
std::set<std::string>& Reported() {
  static auto* reported = new std::set<std::string>;
  return *reported;
}

}  // namespace

bool UsableCacheDirectory(const std::string& directory, bool create, std::string* warning) {
  bool missing = false;
  const std::string problem = PrivateDirectoryProblem(directory, create, &missing);
  if (problem.empty()) return !missing;
  std::lock_guard<std::mutex> lock(reported_mutex);
  if (Reported().insert(directory).second) {
    *warning = fmt::format(
        "persistent cache directory {} {}; compiling without the cache (and timing kernel choices in every process)",
        DisplayPath(directory), problem);
  }
  return false;
}

void ForgetReportedCacheDirectories() {
  std::lock_guard<std::mutex> lock(reported_mutex);
  Reported().clear();
}

}  // namespace xlens

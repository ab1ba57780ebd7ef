#include "compiler/support/standard_output.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

namespace xlens {
namespace {

// Why writes to `fd` fail, asked again after the fact: the error of the write that failed is
// gone by the time the stream's flag is read. A write of nothing still fails on /dev/full; a
// full file system shows in its free blocks. 0 when the system does not say.
int WhyWritesFail(int fd) {
  errno = 0;
  if (::write(fd, "", 0) < 0 && errno != 0) return errno;
  struct statvfs fs;
  if (::fstatvfs(fd, &fs) == 0 && fs.f_blocks > 0 && fs.f_bavail == 0) return ENOSPC;
  return 0;
}

}  // namespace

Status FlushStandardOutput(std::FILE* stream) {
  // stdout first, keeping the error of its own flush; std::cout (synchronised with stdio, or
  // buffered itself) after.
  errno = 0;
  int error = std::fflush(stream) != 0 ? errno : 0;
  const bool stream_failed = std::ferror(stream) != 0;
  bool cout_failed = false;
  if (stream == stdout) {
    std::cout.flush();
    cout_failed = !std::cout;
    if (error == 0 && std::fflush(stdout) != 0) error = errno;
  }
  if (error == 0 && !stream_failed && !cout_failed) return OkStatus();
  if (error == 0) error = WhyWritesFail(::fileno(stream));
  if (error == 0) return Error("cannot write to standard output: a write failed, the output is incomplete");
  return Error(fmt::format("cannot write to standard output: {}", std::strerror(error)));
}

}  // namespace xlens

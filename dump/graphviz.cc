#include "dump/graphviz.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "compiler/support/file_io.h"

extern char** environ;

namespace xlens {
namespace {

// A private temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "xlens_dot_XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string StripProlog(std::string svg) {
  size_t start = svg.find("<svg");
  if (start != std::string::npos) svg.erase(0, start);
  return svg;
}

}  // namespace

StatusOr<std::string> RenderDotToSvg(std::string_view dot, const std::string& dot_program,
                                     int timeout_ms) {
  TempDir dir;
  if (dir.path().empty()) return Error("cannot create a temporary directory for Graphviz");
  const std::string in = dir.path() + "/graph.dot";
  const std::string out = dir.path() + "/graph.svg";
  const std::string err = dir.path() + "/stderr.txt";
  RETURN_IF_ERROR(WriteFileAtomic(in, dot));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string output_flag = "-o" + out;
  std::vector<char*> argv = {const_cast<char*>(dot_program.c_str()), const_cast<char*>("-Tsvg"),
                             output_flag.data(), const_cast<char*>(in.c_str()), nullptr};
  pid_t pid = 0;
  int spawn_error =
      ::posix_spawnp(&pid, dot_program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) {
    return Error(
        fmt::format("cannot run Graphviz '{}': {}", dot_program, std::strerror(spawn_error)));
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int wait_status = 0;
  while (true) {
    pid_t done = ::waitpid(pid, &wait_status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return Error("lost track of the Graphviz process");
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wait_status, 0);
      return Error(fmt::format("Graphviz '{}' ran longer than {} ms", dot_program, timeout_ms));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    StatusOr<std::string> stderr_text = ReadFile(err);
    std::string why = stderr_text.ok() ? *stderr_text : "";
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
    // posix_spawnp reports a missing program as exit 127 from the child on some libcs.
    if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 127 && why.empty()) {
      return Error(fmt::format("cannot run Graphviz '{}': not found", dot_program));
    }
    return Error(
        fmt::format("Graphviz '{}' failed{}{}", dot_program, why.empty() ? "" : ": ", why));
  }
  ASSIGN_OR_RETURN(std::string svg, ReadFile(out));
  return StripProlog(std::move(svg));
}

}  // namespace xlens

#include "dump/graphviz.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

extern char** environ;

namespace xlens {
namespace {

// The most SVG read back: a graph that draws past this is not worth embedding in a page.
constexpr size_t kMaxSvgBytes = size_t{256} << 20;
// The most of dot's stderr kept for the message.
constexpr size_t kMaxStderrBytes = 4096;

// A descriptor closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Close(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd) {
    Close();
    fd_ = fd;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// A pipe (or, with `socket`, a socket pair) between us and the child: `parent` gets our end,
// non-blocking, `child` the end the child inherits.
Status MakeChannel(bool socket, Fd& parent, Fd& child, bool parent_writes) {
  int fds[2];
  int rc = socket ? ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds)
                  : ::pipe2(fds, O_CLOEXEC);
  if (rc != 0) return Error(fmt::format("cannot talk to Graphviz: {}", std::strerror(errno)));
  // A pipe reads at fds[0] and writes at fds[1]; a socket pair goes both ways.
  int parent_end = parent_writes ? fds[1] : fds[0];
  int child_end = parent_writes ? fds[0] : fds[1];
  ::fcntl(parent_end, F_SETFL, ::fcntl(parent_end, F_GETFL) | O_NONBLOCK);
  parent.Reset(parent_end);
  child.Reset(child_end);
  return OkStatus();
}

std::string StripProlog(std::string svg) {
  size_t start = svg.find("<svg");
  if (start != std::string::npos) svg.erase(0, start);
  return svg;
}

}  // namespace

StatusOr<std::string> RenderDotToSvg(std::string_view dot, const std::string& dot_program,
                                     int timeout_ms) {
  // DOT goes in on stdin and SVG comes back on stdout: no temporary file, so neither TMPDIR nor a
  // writable directory is needed. Stdin is a socket so that writing to a dot that has already
  // exited fails with EPIPE (MSG_NOSIGNAL) instead of raising SIGPIPE in the compiler.
  Fd to_dot, dot_in, from_dot, dot_out, errors, dot_err;
  RETURN_IF_ERROR(MakeChannel(/*socket=*/true, to_dot, dot_in, /*parent_writes=*/true));
  RETURN_IF_ERROR(MakeChannel(false, from_dot, dot_out, false));
  RETURN_IF_ERROR(MakeChannel(false, errors, dot_err, false));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, dot_in.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, dot_out.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, dot_err.get(), STDERR_FILENO);
  std::vector<char*> argv = {const_cast<char*>(dot_program.c_str()), const_cast<char*>("-Tsvg"),
                             nullptr};
  pid_t pid = 0;
  int spawn_error =
      ::posix_spawnp(&pid, dot_program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  dot_in.Close();
  dot_out.Close();
  dot_err.Close();
  if (spawn_error != 0) {
    return Error(fmt::format("cannot run Graphviz '{}': {}", DisplayPath(dot_program),
                             std::strerror(spawn_error)));
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string svg, why;
  size_t sent = 0;
  bool too_large = false;
  bool timed_out = false;
  char buffer[65536];
  while (from_dot.get() >= 0 || errors.get() >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    std::vector<pollfd> fds;
    if (to_dot.get() >= 0) fds.push_back({to_dot.get(), POLLOUT, 0});
    if (from_dot.get() >= 0) fds.push_back({from_dot.get(), POLLIN, 0});
    if (errors.get() >= 0) fds.push_back({errors.get(), POLLIN, 0});
    int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == to_dot.get()) {
        ssize_t n = ::send(p.fd, dot.data() + sent, dot.size() - sent, MSG_NOSIGNAL);
        if (n > 0) sent += static_cast<size_t>(n);
        // Done, or dot stopped reading (it failed; its stderr says why).
        if (sent == dot.size() || (n < 0 && errno != EAGAIN && errno != EINTR)) to_dot.Close();
        continue;
      }
      Fd& source = p.fd == from_dot.get() ? from_dot : errors;
      ssize_t n = ::read(p.fd, buffer, sizeof buffer);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        source.Close();
        continue;
      }
      if (&source == &from_dot) {
        if (svg.size() + static_cast<size_t>(n) > kMaxSvgBytes) {
          too_large = true;
          from_dot.Close();
          errors.Close();
          break;
        }
        svg.append(buffer, static_cast<size_t>(n));
      } else if (why.size() < kMaxStderrBytes) {
        why.append(buffer, std::min(static_cast<size_t>(n), kMaxStderrBytes - why.size()));
      }
    }
  }
  to_dot.Close();
  int wait_status = 0;
  if (timed_out || too_large) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &wait_status, 0);
    if (too_large) {
      return Error(fmt::format("Graphviz '{}' drew more than {} of SVG", DisplayPath(dot_program),
                               FormatBytes(kMaxSvgBytes)));
    }
    return Error(fmt::format("Graphviz '{}' ran longer than {} ms", DisplayPath(dot_program),
                             timeout_ms));
  }
  // Both outputs are closed; dot is exiting. Wait for it within what is left of the deadline.
  while (true) {
    pid_t done = ::waitpid(pid, &wait_status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return Error("lost track of the Graphviz process");
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wait_status, 0);
      return Error(fmt::format("Graphviz '{}' ran longer than {} ms", DisplayPath(dot_program),
                               timeout_ms));
    }
    ::usleep(2000);
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
    // posix_spawnp reports a missing program as exit 127 from the child on some libcs.
    if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 127 && why.empty()) {
      return Error(fmt::format("cannot run Graphviz '{}': not found", DisplayPath(dot_program)));
    }
    return Error(fmt::format("Graphviz '{}' failed{}{}", DisplayPath(dot_program),
                             why.empty() ? "" : ": ", EscapeForTerminal(why)));
  }
  return StripProlog(std::move(svg));
}

}  // namespace xlens

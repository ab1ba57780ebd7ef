#include "viewer/layout_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QDataStream>
#include <QFileInfo>
#include <QIODevice>
#include <QPainterPath>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "compiler/support/terminal_text.h"

namespace xlens::viewer {
namespace {

constexpr char kMagic[] = "xlens-layout-1";

std::mutex& ProgramMutex() {
  static std::mutex mutex;
  return mutex;
}

std::string& ProgramOverride() {
  static std::string program;
  return program;
}

struct ChildRun {
  bool timed_out = false;
  bool cancelled = false;
  bool too_large = false;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  QByteArray out;
  std::string err;
};

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Runs `argv` with `input` on its stdin (a socket, so that writing to a child that has exited is
// EPIPE, never SIGPIPE), under an address-space limit, in a process group of its own that dies
// with the thread that started it. Killed (with its group) at the deadline or when `cancelled`
// says so; never waited on before that.
StatusOr<ChildRun> RunChild(const std::vector<std::string>& argv, const std::string& input, double seconds,
                            uint64_t memory_bytes, uint64_t max_output, const std::function<bool()>& cancelled) {
  int to_child[2], from_child[2], errors[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, to_child) != 0) {
    return Error(std::string("cannot start the layout process: ") + std::strerror(errno));
  }
  if (::pipe2(from_child, O_CLOEXEC) != 0 || ::pipe2(errors, O_CLOEXEC) != 0) {
    ::close(to_child[0]);
    ::close(to_child[1]);
    return Error(std::string("cannot start the layout process: ") + std::strerror(errno));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  struct rlimit address_space {};
  ::getrlimit(RLIMIT_AS, &address_space);
  rlim_t want = static_cast<rlim_t>(memory_bytes);
  if (address_space.rlim_max != RLIM_INFINITY && want > address_space.rlim_max) want = address_space.rlim_max;
  address_space.rlim_cur = want;
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: the parent has other threads.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(to_child[1], 0);
    ::dup2(from_child[1], 1);
    ::dup2(errors[1], 2);
    ::setrlimit(RLIMIT_AS, &address_space);
    struct rlimit no_core {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::close(to_child[1]);
  ::close(from_child[1]);
  ::close(errors[1]);
  int in = to_child[0], out = from_child[0], err = errors[0];
  if (pid < 0) {
    int saved = errno;
    CloseFd(in);
    CloseFd(out);
    CloseFd(err);
    return Error(std::string("cannot start the layout process: ") + std::strerror(saved));
  }
  ::setpgid(pid, pid);
  SetNonBlocking(in);
  SetNonBlocking(out);
  SetNonBlocking(err);

  ChildRun run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  size_t sent = 0;
  char buffer[65536];
  bool exited = false;
  int status = 0;
  while (true) {
    if (cancelled && cancelled()) {
      run.cancelled = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      run.timed_out = true;
      break;
    }
    if (out < 0 && err < 0) {
      // Both outputs closed: it is exiting (or has closed them and runs on; the deadline holds).
      pid_t done = ::waitpid(pid, &status, WNOHANG);
      if (done == pid) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    std::vector<pollfd> fds;
    if (in >= 0) fds.push_back({in, POLLOUT, 0});
    if (out >= 0) fds.push_back({out, POLLIN, 0});
    if (err >= 0) fds.push_back({err, POLLIN, 0});
    int ready = ::poll(fds.data(), fds.size(), 50);
    if (ready <= 0) continue;
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == in) {
        ssize_t n = ::send(in, input.data() + sent, input.size() - sent, MSG_NOSIGNAL);
        if (n > 0) sent += static_cast<size_t>(n);
        if (sent == input.size() || (n < 0 && errno != EAGAIN && errno != EINTR)) CloseFd(in);
        continue;
      }
      ssize_t n = ::read(p.fd, buffer, sizeof buffer);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        CloseFd(p.fd == out ? out : err);
        continue;
      }
      if (p.fd == out) {
        if (static_cast<uint64_t>(run.out.size()) + static_cast<uint64_t>(n) > max_output) {
          run.too_large = true;
          break;
        }
        run.out.append(buffer, n);
      } else if (run.err.size() < 4096) {
        run.err.append(buffer, std::min<size_t>(static_cast<size_t>(n), 4096 - run.err.size()));
      }
    }
    if (run.too_large) break;
  }
  CloseFd(in);
  CloseFd(out);
  CloseFd(err);
  // Whatever it started goes with it; a child stopped here is killed, not waited on to finish.
  ::kill(-pid, SIGKILL);
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  } else {
    if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  }
  return run;
}

std::string OneLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  size_t newline = text.rfind('\n');
  if (newline != std::string::npos) text = text.substr(newline + 1);  // the last line says why
  return text;
}

bool SaysOutOfMemory(const std::string& err) {
  for (const char* needle : {"out of memory", "bad_alloc", "Cannot allocate memory"}) {
    if (err.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::string LayoutProgram() {
  std::lock_guard<std::mutex> lock(ProgramMutex());
  if (!ProgramOverride().empty()) return ProgramOverride();
  if (QCoreApplication::instance() != nullptr) {
    QFileInfo self(QCoreApplication::applicationFilePath());
    if (self.fileName() == "xlens-viewer") return self.absoluteFilePath().toStdString();
  }
#ifdef XLENS_VIEWER_BUILD_BINARY
  if (::access(XLENS_VIEWER_BUILD_BINARY, X_OK) == 0) return XLENS_VIEWER_BUILD_BINARY;
#endif
  return "";
}

void SetLayoutProgram(std::string program) {
  std::lock_guard<std::mutex> lock(ProgramMutex());
  ProgramOverride() = std::move(program);
}

StatusOr<GraphLayout> LayOutInChild(const std::string& dot, const LayoutLimits& limits,
                                    const std::function<bool()>& cancelled) {
  const std::string program = LayoutProgram();
  if (program.empty()) {
    return LayoutDot(dot, LayoutEngine::kLayered,
                     "Drawn with a simple layered layout: Graphviz runs in a separate xlens-viewer process, and "
                     "no xlens-viewer was found to run it.");
  }
  auto failure = [&](const ChildRun& run, double seconds) -> std::string {
    if (run.timed_out) return "did not finish in " + std::to_string(static_cast<int>(seconds)) + " s";
    if (run.too_large) return "drew more than the layout limit";
    if (SaysOutOfMemory(run.err)) {
      return "ran out of its " + std::to_string(limits.memory_bytes >> 20) + " MiB of memory";
    }
    if (run.signal != 0) return "crashed (" + std::string(strsignal(run.signal)) + ")";
    std::string why = OneLine(run.err);
    return "failed" + (why.empty() ? " (exit " + std::to_string(run.exit_code) + ")" : ": " + EscapeForTerminal(why));
  };
  StatusOr<ChildRun> first = RunChild({program, kLayoutChildFlag, "auto"}, dot, limits.graphviz_seconds,
                                      limits.memory_bytes, limits.max_result_bytes, cancelled);
  if (!first.ok()) return first.status();
  if (first->cancelled) return Error("cancelled");
  if (first->exit_code == 0) return DeserializeLayout(first->out);
  if (first->exit_code == 1 && !SaysOutOfMemory(first->err)) {
    std::string why = OneLine(first->err);
    return Error(why.empty() ? std::string("DOT: the layout process failed") : EscapeForTerminal(why));
  }
  const std::string note = "Drawn with a simple layered layout: Graphviz " + failure(*first, limits.graphviz_seconds) + ".";
  StatusOr<ChildRun> second = RunChild({program, kLayoutChildFlag, "layered", note}, dot, limits.layered_seconds,
                                       limits.memory_bytes, limits.max_result_bytes, cancelled);
  if (!second.ok()) return second.status();
  if (second->cancelled) return Error("cancelled");
  if (second->exit_code == 0) return DeserializeLayout(second->out);
  return Error("the graph could not be laid out: Graphviz " + failure(*first, limits.graphviz_seconds) +
               ", and the layered layout " + failure(*second, limits.layered_seconds));
}

int RunLayoutChild(int argc, char** argv) {
  std::string engine_name = argc > 2 ? argv[2] : "auto";
  std::string note = argc > 3 ? argv[3] : "";
  LayoutEngine engine = engine_name == "layered" ? LayoutEngine::kLayered
                        : engine_name == "dot"   ? LayoutEngine::kGraphviz
                                                 : LayoutEngine::kAuto;
  std::string dot;
  char buffer[65536];
  while (true) {
    ssize_t n = ::read(0, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    dot.append(buffer, static_cast<size_t>(n));
  }
  StatusOr<GraphLayout> layout = LayoutDot(dot, engine, note);
  if (!layout.ok()) {
    std::string message = layout.status().message();
    std::fprintf(stderr, "%s\n", message.c_str());
    return message.find("could not lay the graph out") != std::string::npos ? 3 : 1;
  }
  QByteArray bytes = SerializeLayout(*layout);
  const char* data = bytes.constData();
  size_t left = static_cast<size_t>(bytes.size());
  while (left > 0) {
    ssize_t n = ::write(1, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 2;
    data += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

QByteArray SerializeLayout(const GraphLayout& layout) {
  QByteArray bytes;
  QDataStream out(&bytes, QIODevice::WriteOnly);
  out.setVersion(QDataStream::Qt_6_0);
  out << QByteArray(kMagic) << layout.bounds << layout.engine << layout.note;
  out << static_cast<quint32>(layout.nodes.size());
  for (const GraphNode& n : layout.nodes) {
    out << n.id << n.name << n.opcode << n.label << n.box << n.fill << n.stroke << n.text
        << static_cast<qint32>(n.shape) << n.dashed << n.tooltip << n.op_names << n.cluster;
  }
  out << static_cast<quint32>(layout.edges.size());
  for (const GraphEdge& e : layout.edges) {
    out << e.from << e.to << e.path << e.has_arrow << e.arrow_base << e.arrow_tip << e.dashed;
  }
  out << static_cast<quint32>(layout.clusters.size());
  for (const GraphCluster& c : layout.clusters) {
    out << c.id << c.title << c.box << c.fill << c.stroke << c.rounded << static_cast<qint32>(c.depth);
  }
  return bytes;
}

StatusOr<GraphLayout> DeserializeLayout(const QByteArray& bytes) {
  QDataStream in(bytes);
  in.setVersion(QDataStream::Qt_6_0);
  QByteArray magic;
  in >> magic;
  if (in.status() != QDataStream::Ok || magic != kMagic) return Error("the layout process answered something else");
  GraphLayout layout;
  in >> layout.bounds >> layout.engine >> layout.note;
  // Every element takes some bytes: a count past what is left is a damaged answer.
  auto count = [&](quint32& n) {
    in >> n;
    return in.status() == QDataStream::Ok && n <= static_cast<quint32>(bytes.size());
  };
  quint32 n = 0;
  if (!count(n)) return Error("the layout process's answer is damaged");
  layout.nodes.resize(n);
  for (GraphNode& node : layout.nodes) {
    qint32 shape = 0;
    in >> node.id >> node.name >> node.opcode >> node.label >> node.box >> node.fill >> node.stroke >> node.text >>
        shape >> node.dashed >> node.tooltip >> node.op_names >> node.cluster;
    node.shape = shape >= 0 && shape <= static_cast<qint32>(NodeShape::kDiamond) ? static_cast<NodeShape>(shape)
                                                                                : NodeShape::kBox;
  }
  if (!count(n)) return Error("the layout process's answer is damaged");
  layout.edges.resize(n);
  for (GraphEdge& edge : layout.edges) {
    in >> edge.from >> edge.to >> edge.path >> edge.has_arrow >> edge.arrow_base >> edge.arrow_tip >> edge.dashed;
  }
  if (!count(n)) return Error("the layout process's answer is damaged");
  layout.clusters.resize(n);
  for (GraphCluster& cluster : layout.clusters) {
    qint32 depth = 0;
    in >> cluster.id >> cluster.title >> cluster.box >> cluster.fill >> cluster.stroke >> cluster.rounded >> depth;
    cluster.depth = depth;
  }
  if (in.status() != QDataStream::Ok) return Error("the layout process's answer is damaged");
  return layout;
}

}  // namespace xlens::viewer

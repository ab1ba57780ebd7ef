#include "compiler/support/removed_on_signal.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

namespace xlens {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

struct Registry {
  std::mutex mutex;
  std::map<int64_t, std::string> paths;
  int64_t next_id = 1;
  pid_t installed_for = 0;  // the process whose handler and thread are in place
};

// Never destroyed: the thread may need it while the process is running its exit handlers.
Registry& TheRegistry() {
  static Registry* registry = new Registry;
  return *registry;
}

// What the handler reads. Lock-free atomics are safe to use in a signal handler.
std::atomic<int> g_write_fd{-1};
std::atomic<pid_t> g_owner{0};
std::atomic<int> g_pending{0};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<pid_t>::is_always_lock_free);

extern "C" void OnSignal(int signal_number) {
  const int saved_errno = errno;
  if (::getpid() != g_owner.load() || g_pending.exchange(signal_number) != 0) {
    // A forked child (its parent's paths are not its to remove), or a second signal while the
    // first is being acted on: end now, by the signal. It is blocked while this handler runs, so
    // it is delivered, with its default action, as the handler returns.
    ::signal(signal_number, SIG_DFL);
    ::raise(signal_number);
    errno = saved_errno;
    return;
  }
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] ssize_t ignored = ::write(g_write_fd.load(), &byte, 1);
  errno = saved_errno;
}

void RemoveAllLocked(Registry& registry) {
  for (const auto& [id, path] : registry.paths) {
    // A file being written inside while we remove can make one pass fail: try again.
    for (int attempt = 0; attempt < 3; ++attempt) {
      std::error_code error;
      std::filesystem::remove_all(path, error);
      if (!error) break;
    }
  }
}

void ActOnSignals(int read_fd) {
  sigset_t ours;
  sigemptyset(&ours);
  for (int s : kSignals) sigaddset(&ours, s);
  pthread_sigmask(SIG_UNBLOCK, &ours, nullptr);
  unsigned char byte = 0;
  while (true) {
    const ssize_t n = ::read(read_fd, &byte, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return;  // the pipe is gone: nothing more to act on
  }
  Registry& registry = TheRegistry();
  // Held until the process ends: nothing is registered after the removal.
  registry.mutex.lock();
  RemoveAllLocked(registry);
  ::signal(byte, SIG_DFL);
  ::raise(byte);  // unblocked in this thread: the default action ends the process
  ::_exit(128 + byte);
}

void InstallLocked(Registry& registry) {
  const pid_t pid = ::getpid();
  if (registry.installed_for == pid) return;
  // Registered by the parent before a fork: not this process's to remove.
  registry.paths.clear();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;  // signals end the process as they would without us
  try {
    std::thread(ActOnSignals, fds[0]).detach();
  } catch (const std::system_error&) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  g_write_fd.store(fds[1]);
  g_pending.store(0);
  g_owner.store(pid);
  for (int s : kSignals) {
    struct sigaction old {};
    if (::sigaction(s, nullptr, &old) != 0) continue;
    const bool ours = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == OnSignal;
    const bool default_action = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
    // Ignored (nohup) stays ignored; another handler is its owner's business.
    if (!ours && !default_action) continue;
    struct sigaction action {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    for (int other : kSignals) sigaddset(&action.sa_mask, other);
    action.sa_flags = SA_RESTART;
    ::sigaction(s, &action, nullptr);
  }
  registry.installed_for = pid;
}

}  // namespace

StatusOr<RemovedOnSignal> RemovedOnSignal::Create(
    const std::function<StatusOr<std::string>()>& create) {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  InstallLocked(registry);
  StatusOr<std::string> path = create();
  if (!path.ok()) return path.status();
  const int64_t id = registry.next_id++;
  registry.paths.emplace(id, *std::move(path));
  return RemovedOnSignal(id);
}

RemovedOnSignal::RemovedOnSignal(RemovedOnSignal&& other) noexcept : id_(other.id_) {
  other.id_ = 0;
}

RemovedOnSignal& RemovedOnSignal::operator=(RemovedOnSignal&& other) noexcept {
  if (this != &other) {
    RemovedOnSignal gone(std::move(*this));
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

RemovedOnSignal::~RemovedOnSignal() {
  if (id_ == 0) return;
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  registry.paths.erase(id_);
}

void RemoveRegisteredPathsNow() {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  RemoveAllLocked(registry);
}

int64_t RegisteredPathCount() {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  return static_cast<int64_t>(registry.paths.size());
}

}  // namespace xlens

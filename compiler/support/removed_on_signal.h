// Paths removed when the process is ended by SIGINT, SIGTERM or SIGHUP (Ctrl-C, `kill`, a closed
// terminal) or stopped by the watchdog, so that an interrupted command leaves no private directory
// behind (TemporaryDirectory registers every one it makes).
//
// How: the first registration installs a handler for the three signals, unless the signal is
// ignored (nohup) or already has a handler of someone else's, which are left alone. The handler
// does only what is safe in a signal handler: it writes the signal's number to a pipe. A thread
// that waits on the pipe takes the registry's lock, removes every registered path (links inside
// are removed, not followed), and, still holding the lock so that nothing new is registered,
// puts the signal's default action back and raises it: the process ends by the signal, as it
// would have without us, and its parent sees that. A second signal while the paths are being
// removed ends the process at once. A child forked without exec does not act for its parent:
// its handler just ends it; one that registers paths of its own gets its own handler thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "compiler/support/status.h"

namespace xlens {

// A registration: while it lives, its path is removed if a signal ends the process. Move-only;
// letting it go unregisters the path (and leaves it where it is).
class RemovedOnSignal {
 public:
  RemovedOnSignal() = default;
  // Calls `create`, which makes something and returns its path, and registers the path, both
  // under the registry's lock: a signal that arrives meanwhile is acted on after the
  // registration, so what `create` made is removed too.
  static StatusOr<RemovedOnSignal> Create(const std::function<StatusOr<std::string>()>& create);
  RemovedOnSignal(RemovedOnSignal&& other) noexcept;
  RemovedOnSignal& operator=(RemovedOnSignal&& other) noexcept;
  RemovedOnSignal(const RemovedOnSignal&) = delete;
  RemovedOnSignal& operator=(const RemovedOnSignal&) = delete;
  ~RemovedOnSignal();

 private:
  explicit RemovedOnSignal(int64_t id) : id_(id) {}
  int64_t id_ = 0;  // 0: nothing registered
};

// Removes every registered path now. For code that is about to end the process without running
// destructors (the watchdog's _exit); the registrations stay, so calling it twice is harmless.
void RemoveRegisteredPathsNow();

// How many paths are registered (for tests).
int64_t RegisteredPathCount();

}  // namespace xlens

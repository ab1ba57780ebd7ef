#include "compiler/support/watchdog.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "compiler/support/removed_on_signal.h"

namespace xlens {

Watchdog::Watchdog(double seconds, std::string command, std::chrono::milliseconds grace)
    : seconds_(seconds), command_(std::move(command)), grace_(grace) {
  if (seconds_ > 0) thread_ = std::thread([this] { Watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  done_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::SetActivity(std::string activity) {
  std::lock_guard<std::mutex> lock(mutex_);
  activity_ = std::move(activity);
}

void Watchdog::SetFinalWork(std::function<std::string(const std::string&)> work) {
  std::lock_guard<std::mutex> lock(mutex_);
  final_work_ = std::move(work);
}

std::string Watchdog::StopMessage() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fmt::format("stopped by --timeout after {:g} s, while {}", seconds_, activity_);
}

void Watchdog::Watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto limit = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds_));
  if (done_cv_.wait_for(lock, limit, [this] { return done_; })) return;
  cancel_.store(true, std::memory_order_relaxed);
  if (done_cv_.wait_for(lock, grace_, [this] { return done_; })) return;
  // The work did not stop when asked: it never polls. Say what it was and leave; exit handlers
  // and destructors of the other thread's objects must not run under its feet, hence _exit.
  const std::string stop = fmt::format("stopped by --timeout after {:g} s, while {}", seconds_, activity_);
  // The lock stays held: the stopped work cannot change the activity or end the watchdog under it.
  const std::string saved = final_work_ ? final_work_(stop) : "";
  std::string line = fmt::format("xlens {}: {}{}\n", command_, stop, saved);
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  // No destructor runs after _exit: the private directories go now (an unpacked bundle, the
  // candidates of a reduction).
  RemoveRegisteredPathsNow();
  ::_exit(1);
}

}  // namespace xlens

#include "compiler/support/activity.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <new>

#include <fmt/format.h>

#include "compiler/support/terminal_text.h"

namespace xlens {
namespace {

thread_local ActivityScope* t_innermost = nullptr;

// The activity at the last failure. Written from the new-handler, where nothing may allocate:
// a fixed buffer under a spin lock (held for one copy).
constexpr size_t kMaxRecordedBytes = 511;
char g_failed[kMaxRecordedBytes + 1];
bool g_failed_set = false;
std::atomic_flag g_failed_lock = ATOMIC_FLAG_INIT;

class SlotLock {
 public:
  SlotLock() {
    while (g_failed_lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~SlotLock() { g_failed_lock.clear(std::memory_order_release); }
};

// Copies `label` into the slot, cut at a character boundary.
void Record(const std::string& label) {
  size_t size = std::min(label.size(), kMaxRecordedBytes);
  while (size > 0 && size < label.size() && (static_cast<unsigned char>(label[size]) & 0xC0) == 0x80) --size;
  std::memcpy(g_failed, label.data(), size);
  g_failed[size] = '\0';
  g_failed_set = true;
}

void OnAllocationFailure() {
  if (const ActivityScope* scope = t_innermost) {
    SlotLock lock;
    Record(scope->label());
  }
  throw std::bad_alloc();
}

}  // namespace

ActivityScope::ActivityScope(std::string label)
    : label_(std::move(label)), outer_(t_innermost), uncaught_at_start_(std::uncaught_exceptions()) {
  t_innermost = this;
  SlotLock lock;
  g_failed_set = false;
}

ActivityScope::~ActivityScope() {
  t_innermost = outer_;
  // Left by an exception: the innermost scope it leaves records itself, unless the new-handler
  // (or a scope further in) already did.
  if (std::uncaught_exceptions() > uncaught_at_start_) {
    SlotLock lock;
    if (!g_failed_set) Record(label_);
  }
}

std::string CurrentActivity() { return t_innermost != nullptr ? t_innermost->label() : std::string(); }

void RememberActivityOnAllocationFailure() { std::set_new_handler(OnAllocationFailure); }

std::string ActivityAtFailure() {
  char copy[kMaxRecordedBytes + 1] = "";
  {
    SlotLock lock;  // the string is built after: an allocation under the lock could fail into it
    if (g_failed_set) std::memcpy(copy, g_failed, sizeof(copy));
  }
  return copy;
}

std::string OutOfMemoryMessage(std::string_view activity, std::string_view fallback) {
  if (activity.empty()) return fmt::format("out of memory: {}", fallback);
  return fmt::format("out of memory while {}", EscapeForTerminal(TruncateUtf8(activity, 500)));
}

}  // namespace xlens

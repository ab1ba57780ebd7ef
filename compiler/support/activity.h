// What the process is reading or building, so that running out of memory can say so.
//
// A reader or builder names its work with a scope at its entry point:
//
//   ActivityScope activity("reading GraphDef " + path);
//
// Scopes nest per thread. When an allocation fails, the new-handler installed by
// RememberActivityOnAllocationFailure copies the failing thread's innermost activity aside
// (without allocating) before std::bad_alloc is thrown; a scope left by any other exception
// (std::length_error, a bad_alloc thrown by hand or rethrown from elsewhere) records itself
// when nothing more precise was recorded. The scopes are gone by the time main catches the
// exception, so main asks ActivityAtFailure() what was being done and prints one line:
//
//   xlens: out of memory while reading GraphDef g.pbtxt
//
// Labels are plain text (file names as given); the printer escapes them for the terminal.
#pragma once

#include <string>
#include <string_view>

namespace xlens {

class ActivityScope {
 public:
  explicit ActivityScope(std::string label);
  ~ActivityScope();
  ActivityScope(const ActivityScope&) = delete;
  ActivityScope& operator=(const ActivityScope&) = delete;

  const std::string& label() const { return label_; }

 private:
  std::string label_;
  ActivityScope* outer_;
  int uncaught_at_start_;
};

// The calling thread's innermost activity; empty when it has none.
std::string CurrentActivity();

// Installs the new-handler that remembers what the failing thread was doing (then throws
// std::bad_alloc as the default would). Call once, early in main.
void RememberActivityOnAllocationFailure();

// What was being done when the last allocation failed or an exception last left a scope; empty
// when no scope was open then. A new scope forgets it (that failure was handled).
std::string ActivityAtFailure();

// The one line (without "xlens: ") for an allocation that failed: "out of memory while
// ACTIVITY" (escaped, cut at 500 bytes), or `fallback` after "out of memory: " when nothing was
// being named.
std::string OutOfMemoryMessage(std::string_view activity, std::string_view fallback);

}  // namespace xlens

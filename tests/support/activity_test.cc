#include "compiler/support/activity.h"

#include <cstdint>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace xlens {
namespace {

// Restores the default new-handler after a test that installed ours.
struct NewHandlerGuard {
  ~NewHandlerGuard() { std::set_new_handler(nullptr); }
};

// AddressSanitizer's allocator reports an impossible size instead of returning null.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAllocationsFailQuietly = false;
#else
constexpr bool kAllocationsFailQuietly = true;
#endif

TEST(Activity, ScopesNestAndUnwind) {
  EXPECT_EQ(CurrentActivity(), "");
  {
    ActivityScope outer("reading bundle b.tar.gz");
    EXPECT_EQ(CurrentActivity(), "reading bundle b.tar.gz");
    {
      ActivityScope inner("reading module m.hlo");
      EXPECT_EQ(CurrentActivity(), "reading module m.hlo");
    }
    EXPECT_EQ(CurrentActivity(), "reading bundle b.tar.gz");
  }
  EXPECT_EQ(CurrentActivity(), "");
}

TEST(Activity, EachThreadHasItsOwn) {
  ActivityScope main_scope("running GraphDef g.pbtxt");
  std::string seen = "unset";
  std::thread([&] { seen = CurrentActivity(); }).join();
  EXPECT_EQ(seen, "");
  EXPECT_EQ(CurrentActivity(), "running GraphDef g.pbtxt");
}

// The new-handler records the innermost activity of the thread whose allocation failed, before
// the scopes unwind; main reads it after.
TEST(Activity, AFailedAllocationRecordsTheInnermostActivity) {
  if (!kAllocationsFailQuietly) GTEST_SKIP() << "AddressSanitizer";
  NewHandlerGuard guard;
  RememberActivityOnAllocationFailure();
  try {
    ActivityScope outer("replaying bundle b.tar.gz");
    ActivityScope inner("reading GraphDef g.pbtxt");
    volatile size_t huge = size_t{1} << 62;  // more than any address space
    void* p = ::operator new(huge);
    ::operator delete(p);
    FAIL() << "allocated 2^62 bytes";
  } catch (const std::bad_alloc&) {
  }
  EXPECT_EQ(ActivityAtFailure(), "reading GraphDef g.pbtxt");
  EXPECT_EQ(CurrentActivity(), "");
}

// std::length_error never reaches the new-handler: the innermost scope it leaves records itself,
// and the outer ones keep that record.
TEST(Activity, AnotherExceptionRecordsTheInnermostScopeItLeaves) {
  try {
    ActivityScope outer("reading bundle b.tar.gz");
    ActivityScope inner("loading compile cache entry c/ab12");
    std::vector<int64_t> v;
    v.reserve(v.max_size() + 1);
  } catch (const std::length_error&) {
  }
  EXPECT_EQ(ActivityAtFailure(), "loading compile cache entry c/ab12");
}

TEST(Activity, ANewScopeForgetsAHandledFailure) {
  try {
    ActivityScope scope("reading module a.hlo");
    throw std::bad_alloc();
  } catch (const std::bad_alloc&) {
  }
  EXPECT_EQ(ActivityAtFailure(), "reading module a.hlo");
  ActivityScope next("reading module b.hlo");
  EXPECT_EQ(ActivityAtFailure(), "");
}

TEST(Activity, NoScopeNoActivity) {
  if (!kAllocationsFailQuietly) GTEST_SKIP() << "AddressSanitizer";
  { ActivityScope scope("reading module a.hlo"); }  // forgets any earlier failure
  NewHandlerGuard guard;
  RememberActivityOnAllocationFailure();
  try {
    volatile size_t huge = size_t{1} << 62;
    void* p = ::operator new(huge);
    ::operator delete(p);
  } catch (const std::bad_alloc&) {
  }
  EXPECT_EQ(ActivityAtFailure(), "");
}

TEST(Activity, RecordedLabelsAreCutAtACharacterBoundary) {
  std::string label = std::string(510, 'a') + "\xc3\xa9\xc3\xa9";  // é straddles byte 511
  try {
    ActivityScope scope(label);
    throw std::length_error("x");
  } catch (const std::length_error&) {
  }
  EXPECT_EQ(ActivityAtFailure(), std::string(510, 'a'));
}

TEST(Activity, OutOfMemoryMessageNamesTheActivityEscaped) {
  EXPECT_EQ(OutOfMemoryMessage("reading GraphDef g.pbtxt", "unused"), "out of memory while reading GraphDef g.pbtxt");
  EXPECT_EQ(OutOfMemoryMessage("", "what was asked for does not fit in this machine"),
            "out of memory: what was asked for does not fit in this machine");
  std::string message = OutOfMemoryMessage("reading bundle \x1b[31mred\n.tar.gz", "unused");
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

}  // namespace
}  // namespace xlens

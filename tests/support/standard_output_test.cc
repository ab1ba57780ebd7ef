#include "compiler/support/standard_output.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace xlens {
namespace {

TEST(StandardOutput, AWritableStreamIsFine) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  std::fputs("hello\n", file);
  EXPECT_TRUE(FlushStandardOutput(file).ok());
  std::fclose(file);
}

// A short output stays in the buffer until the flush, whose error names the reason.
TEST(StandardOutput, AFullDeviceIsAnErrorWithItsReason) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  std::FILE* full = std::fopen("/dev/full", "w");
  ASSERT_NE(full, nullptr);
  std::fputs("out0: f32[] 1\n", full);
  Status status = FlushStandardOutput(full);
  std::fclose(full);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "cannot write to standard output: No space left on device");
}

// A large output fails while it is written, long before the flush: the stream's error flag is
// what tells, and the reason is asked again.
TEST(StandardOutput, AWriteThatFailedEarlierIsCaught) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  std::FILE* full = std::fopen("/dev/full", "w");
  ASSERT_NE(full, nullptr);
  std::string big(1 << 20, 'x');
  std::fputs(big.c_str(), full);
  Status status = FlushStandardOutput(full);
  std::fclose(full);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "cannot write to standard output: No space left on device");
}

}  // namespace
}  // namespace xlens

#include "compiler/support/subprocess.h"

#include <chrono>
#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens {
namespace {

using ::testing::HasSubstr;

TEST(SubprocessTest, ExitCodeAndOutput) {
  auto outcome = RunCommand({"/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"}, 10);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->exit_code, 3);
  EXPECT_FALSE(outcome->timed_out);
  EXPECT_THAT(outcome->output, HasSubstr("hello"));
  EXPECT_THAT(outcome->output, HasSubstr("oops"));
  EXPECT_EQ(outcome->Describe(10), "exit 3");
}

TEST(SubprocessTest, ASignalIsReported) {
  auto outcome = RunCommand({"/bin/sh", "-c", "kill -SEGV $$"}, 10);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->signal, 11);
  EXPECT_THAT(outcome->Describe(10), HasSubstr("signal 11"));
}

TEST(SubprocessTest, TheTimeoutKillsTheCommandAndWhatItStarted) {
  const auto start = std::chrono::steady_clock::now();
  auto outcome = RunCommand({"/bin/sh", "-c", "sleep 30 & sleep 30"}, 0.3);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->timed_out);
  EXPECT_LT(seconds, 5);
  EXPECT_THAT(outcome->Describe(0.3), HasSubstr("timed out after 0.3 s"));
}

TEST(SubprocessTest, AMissingProgramExits127) {
  auto outcome = RunCommand({"/nonexistent/program"}, 10);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->exit_code, 127);
}

TEST(SubprocessTest, ShellQuoteSurvivesQuotes) {
  auto outcome = RunCommand({"/bin/sh", "-c", "printf %s " + ShellQuote("it's a $HOME")}, 10);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->output, "it's a $HOME");
}

// The captured output lives under $TMPDIR (unlinked at once), never in a fixed /tmp: a TMPDIR
// that does not exist is the one message.
TEST(SubprocessTest, OutputFileHonoursTmpdir) {
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", "/nonexistent/xlens-no-tmp", 1);
  auto outcome = RunCommand({"/bin/true"}, 10);
  if (old) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), HasSubstr("/nonexistent/xlens-no-tmp"));
}

// Only the last `max_output_bytes` are kept.
TEST(SubprocessTest, KeepsTheTailOfTheOutput) {
  auto outcome = RunCommand({"/bin/sh", "-c", "printf 0123456789"}, 10, 4);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->output, "6789");
}

}  // namespace
}  // namespace xlens

// A private directory goes when a signal or the watchdog ends the process. Each case runs in a
// forked child, which makes a TemporaryDirectory, tells the parent its path and is then ended.
#include "compiler/support/removed_on_signal.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "compiler/support/temporary_directory.h"
#include "compiler/support/watchdog.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;

struct ChildResult {
  std::string path;  // the child's private directory
  int status = 0;    // from waitpid
};

// Runs `body` in a child given the path of a fresh TemporaryDirectory (with a file inside); the
// child sends the path, then runs `body`, which should end it.
ChildResult RunChild(const std::function<void(const std::string&)>& body,
                     const std::function<void()>& before = [] {}) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    before();
    auto dir = TemporaryDirectory::Create("signal-test");
    if (!dir.ok()) ::_exit(90);
    std::ofstream(dir->path() + "/inside.txt") << "data";
    const std::string line = dir->path() + "\n";
    if (::write(fds[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) ::_exit(91);
    ::close(fds[1]);
    body(dir->path());
    ::_exit(92);  // body did not end the process
  }
  ::close(fds[1]);
  ChildResult result;
  char c;
  while (::read(fds[0], &c, 1) == 1 && c != '\n') result.path += c;
  ::close(fds[0]);
  EXPECT_EQ(::waitpid(pid, &result.status, 0), pid);
  return result;
}

TEST(RemovedOnSignalTest, EachSignalRemovesThePrivateDirectoryAndStillEndsTheProcessByIt) {
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
    ChildResult r = RunChild([&](const std::string&) {
      ::kill(::getpid(), signal_number);
      for (int i = 0; i < 500; ++i) ::usleep(10000);  // the handler's thread acts meanwhile
    });
    ASSERT_FALSE(r.path.empty()) << "signal " << signal_number;
    EXPECT_TRUE(WIFSIGNALED(r.status)) << "signal " << signal_number << ": status " << r.status;
    if (WIFSIGNALED(r.status)) {
      EXPECT_EQ(WTERMSIG(r.status), signal_number);
    }
    EXPECT_FALSE(fs::exists(r.path)) << "left behind by signal " << signal_number;
    fs::remove_all(r.path);
  }
}

TEST(RemovedOnSignalTest, ASignalThatWasIgnoredStaysIgnored) {
  ChildResult r = RunChild(
      [](const std::string&) {
        ::kill(::getpid(), SIGHUP);
        ::usleep(200000);
        ::_exit(7);  // still here: the signal was ignored, as nohup asked
      },
      [] { ::signal(SIGHUP, SIG_IGN); });
  ASSERT_TRUE(WIFEXITED(r.status)) << r.status;
  EXPECT_EQ(WEXITSTATUS(r.status), 7);
  EXPECT_TRUE(fs::exists(r.path)) << "nothing was removed: the process was not ended";
  fs::remove_all(r.path);
}

TEST(RemovedOnSignalTest, TheWatchdogRemovesThemBeforeItEndsTheProcess) {
  ChildResult r = RunChild([](const std::string&) {
    Watchdog watchdog(0.05, "test", std::chrono::milliseconds(50));
    while (true) ::usleep(1000);  // work that never polls the cancel flag
  });
  ASSERT_TRUE(WIFEXITED(r.status)) << r.status;
  EXPECT_EQ(WEXITSTATUS(r.status), 1);
  EXPECT_FALSE(fs::exists(r.path));
  fs::remove_all(r.path);
}

TEST(RemovedOnSignalTest, ARegistrationGoesWithItsOwnerAndMovesWithIt) {
  const int64_t before = RegisteredPathCount();
  std::string path;
  {
    auto dir = TemporaryDirectory::Create("signal-test");
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    path = dir->path();
    EXPECT_EQ(RegisteredPathCount(), before + 1);
    TemporaryDirectory moved = std::move(dir).value();
    EXPECT_EQ(RegisteredPathCount(), before + 1);
    auto other = TemporaryDirectory::Create("signal-test");
    ASSERT_TRUE(other.ok());
    EXPECT_EQ(RegisteredPathCount(), before + 2);
    moved = std::move(other).value();  // the first directory goes, with its registration
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(RegisteredPathCount(), before + 1);
  }
  EXPECT_EQ(RegisteredPathCount(), before);
  // A failed creation registers nothing.
  auto failed = RemovedOnSignal::Create([]() -> StatusOr<std::string> { return Error("no"); });
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(RegisteredPathCount(), before);
}

}  // namespace
}  // namespace xlens

// Several processes writing one dump directory at once, as compilations in separate programs do:
// what the manifest and dump tests check module numbers and the manifest against.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <vector>

#include <gtest/gtest.h>

namespace xlens::testing {

// Runs `body(p)` for p = 0 .. count-1, each in a forked process, and expects every one to return
// true. With `start_together`, the children wait on one pipe until all are forked, so that their
// work overlaps. They end with _exit: nothing of the test process (its atexit handlers, its
// temporary folders' removal) runs in them.
inline void RunInProcessesAtOnce(int count, const std::function<bool(int)>& body,
                                 bool start_together = true) {
  int gate[2] = {-1, -1};
  if (start_together) ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < count; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (start_together) {
        ::close(gate[1]);
        char c;
        (void)!::read(gate[0], &c, 1);  // returns when the parent closes its end
      }
      ::_exit(body(p) ? 0 : 1);
    }
    children.push_back(pid);
  }
  if (start_together) {
    ::close(gate[0]);
    ::close(gate[1]);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "process " << pid;
  }
}

}  // namespace xlens::testing

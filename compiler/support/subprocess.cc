#include "compiler/support/subprocess.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "compiler/support/temporary_directory.h"

namespace xlens {

std::string CommandOutcome::Describe(double timeout_seconds) const {
  if (timed_out) return fmt::format("timed out after {:g} s", timeout_seconds);
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
  return fmt::format("exit {}", exit_code);
}

std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

StatusOr<CommandOutcome> RunCommand(const std::vector<std::string>& argv, double timeout_seconds,
                                    size_t max_output_bytes) {
  if (argv.empty()) return Error("no command to run");
  // The output goes to a file (no pipe to drain while waiting) under $TMPDIR, unlinked at once.
  std::string output_name = TemporaryDirectoryBase() + "/xlens-command-output-XXXXXX";
  const int output = mkstemp(output_name.data());
  if (output < 0) {
    return Error(fmt::format("cannot create a temporary file in {}: {}", TemporaryDirectoryBase(),
                             std::strerror(errno)));
  }
  unlink(output_name.c_str());
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(output);
    return Error(fmt::format("cannot start '{}': {}", argv[0], std::strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    const int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, 0);
    dup2(output, 1);
    dup2(output, 2);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  CommandOutcome outcome;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_seconds > 0 ? timeout_seconds : 1e9);
  int status = 0;
  auto wait_step = std::chrono::microseconds(200);
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      outcome.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(wait_step);
    wait_step = std::min(wait_step * 2, std::chrono::microseconds(20000));
  }
  // Whatever it left running in its group (a background job) goes with it.
  kill(-pid, SIGKILL);
  if (!outcome.timed_out) {
    if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
    if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  }
  const off_t kTail = static_cast<off_t>(max_output_bytes);
  const off_t size = lseek(output, 0, SEEK_END);
  const off_t from = size > kTail ? size - kTail : 0;
  outcome.output.resize(static_cast<size_t>(size - from));
  if (size > 0 && pread(output, outcome.output.data(), outcome.output.size(), from) < 0) {
    outcome.output.clear();
  }
  close(output);
  return outcome;
}

}  // namespace xlens

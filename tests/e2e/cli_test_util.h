// Running the `xlens` binary from tests, as a user would, in a scratch directory per test.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace xlens {

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, collecting its stdout and stderr (append "2>&1" for the latter) and
// its exit code (128 + the signal when a signal ended it).
inline RunResult RunShellCommand(const std::string& command) {
  RunResult result{-1, ""};
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

inline RunResult RunXlens(const std::string& args) {
  return RunShellCommand(std::string(XLENS_BINARY_DIR) + "/compiler/cli/xlens " + args + " 2>&1");
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("xlens_cli_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  std::filesystem::path dir_;
};

}  // namespace xlens

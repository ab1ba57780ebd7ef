// `xlens bundle` and `xlens replay`: a bug report in one file, and its replay anywhere.
#pragma once

#include <string>
#include <vector>

namespace xlens::cli {

inline constexpr const char* kXlensVersion = "0.1";

struct BundleArgs {
  std::string dump_dir;
  std::string output;    // -o; empty: DIR.bundle.tar.gz here
  std::string trace;     // --trace FILE
  std::string graphs;    // --graphs DIR
  std::string max_size;  // --max-size SIZE; empty: no limit
  bool strip_constants = false;
};
// Writes the bundle, prints what it holds, what was left out and the command that replays it.
int RunBundle(const BundleArgs& args, const std::vector<std::string>& command_line);

// A replay runs a module someone else recorded: it may never end, so it is bounded by default.
inline constexpr double kReplayDefaultTimeoutSeconds = 600;

struct ReplayArgs {
  std::string bundle;
  std::string backend;  // empty: the recorded one (cpu when none was recorded)
  int iterations = 1;
  double tolerance = 1e-3;
  bool tolerance_given = false;  // --tolerance on the command line: no type widens it
  double timeout_seconds = kReplayDefaultTimeoutSeconds;  // --timeout; 0: none
  double max_work = 1e12;  // --max-work (kDefaultMaxWork); 0: none
};
// Replays a bundle: 0 when the recorded failure is reproduced, 2 when it is not, 1 on an error.
int RunReplay(const ReplayArgs& args);

}  // namespace xlens::cli

// `xlens bundle`: one .tar.gz of a dump directory for a bug report (dump/bug_bundle.h). This file
// adds what only the command line can know: the machine (CPU, LLVM, a CUDA device) and xlens
// itself; the dump layer gathers the files.
#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/TargetParser/Host.h>

#include "compiler/cli/bug_report_commands.h"
#include "compiler/cli/cli_util.h"
#include "compiler/runtime/cuda_driver.h"
#include "compiler/runtime/gpu_device.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/bug_bundle.h"
#include "xlens_git_commit.h"

namespace xlens::cli {
namespace {

// The "model name" line of /proc/cpuinfo (empty where there is none).
std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "";
}

std::vector<std::pair<std::string, std::string>> HostFacts() {
  std::vector<std::pair<std::string, std::string>> host;
  struct utsname name {};
  if (::uname(&name) == 0) {
    host.emplace_back("os", fmt::format("{} {} {}", name.sysname, name.release, name.machine));
  }
  host.emplace_back("cpu_model", CpuModel());
  host.emplace_back("cpu_name", llvm::sys::getHostCPUName().str());
  std::vector<std::string> features;
  for (const auto& feature : llvm::sys::getHostCPUFeatures()) {
    if (feature.getValue()) features.push_back(feature.getKey().str());
  }
  std::sort(features.begin(), features.end());
  host.emplace_back("cpu_features", fmt::format("{}", fmt::join(features, ",")));
  host.emplace_back("llvm_version", LLVM_VERSION_STRING);
  if (Status cuda = runtime::CheckCudaDevice(); cuda.ok()) {
    auto device = runtime::OpenCudaDevice();
    host.emplace_back("cuda_driver", "present");
    host.emplace_back("gpu", device.ok() ? (*device)->arch() : device.status().message());
  } else {
    host.emplace_back("cuda_driver", cuda.message());
  }
  return host;
}

}  // namespace

int RunBundle(const BundleArgs& args, const std::vector<std::string>& command_line) {
  BundleOptions options;
  options.dump_dir = args.dump_dir;
  options.trace = args.trace;
  options.graphs_dir = args.graphs;
  options.strip_constants = args.strip_constants;
  options.command_line = command_line;
  if (!args.max_size.empty()) {
    auto bytes = ParseByteSize(args.max_size);
    if (!bytes.ok()) return Fail(bytes.status().WithContext("--max-size"));
    options.max_bytes = *bytes;
  }
  options.xlens = {{"version", kXlensVersion}, {"commit", XLENS_GIT_COMMIT}};
  options.host = HostFacts();
  std::string output = args.output;
  if (output.empty()) {
    std::string base = std::filesystem::path(args.dump_dir).lexically_normal().filename().string();
    if (base.empty() || base == "." || base == "..") base = "xlens";
    output = base + ".bundle.tar.gz";
  }
  options.output = output;
  // Written as it is made: the files are read and compressed straight into the output.
  auto bundle = MakeBundle(options);
  if (!bundle.ok()) return Fail(bundle.status());
  std::printf("%s: %zu files, %s\n", DisplayPath(output).c_str(), bundle->entries.size(),
              FormatBytes(bundle->size).c_str());
  for (const BundleEntry& entry : bundle->entries) {
    std::printf("  %10s  %s\n", FormatBytes(entry.bytes).c_str(), DisplayPath(entry.name).c_str());
  }
  for (const std::string& line : bundle->dropped) {
    std::printf("left out: %s\n", line.c_str());
  }
  std::printf("replay it with: xlens replay %s\n", DisplayPath(output).c_str());
  return 0;
}

}  // namespace xlens::cli

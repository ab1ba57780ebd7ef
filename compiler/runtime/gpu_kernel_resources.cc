#include "compiler/runtime/gpu_kernel_resources.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "compiler/support/file_io.h"
#include "compiler/support/subprocess.h"
#include "compiler/support/temporary_directory.h"

namespace xlens::runtime {

StatusOr<ModuleResources> ParsePtxasReport(const std::string& report) {
  static const std::regex kEntry(R"(Compiling entry function '([^']+)')");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  static const std::regex kSpill(R"((\d+) bytes spill stores)");
  ModuleResources out;
  std::istringstream in(report);
  std::string line;
  KernelResources* current = nullptr;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kEntry)) {
      current = &out.kernels[m[1].str()];
      continue;
    }
    if (current == nullptr) continue;
    if (std::regex_search(line, m, kUsed)) {
      current->registers = std::stoi(m[1].str());
      if (std::regex_search(line, m, kSmem)) current->shared_bytes = std::stoll(m[1].str());
    } else if (std::regex_search(line, m, kSpill)) {
      current->spill_bytes = std::stoll(m[1].str());
    }
  }
  if (out.kernels.empty() && report.find("error") != std::string::npos) {
    return Error(fmt::format("ptxas failed: {}", report.substr(0, 500)));
  }
  out.source = "ptxas -v";
  return out;
}

ModuleResources EstimateFromPtx(const std::string& ptx) {
  static const std::regex kShared(R"(\.shared\s+(?:\.align\s+\d+\s+)?\.(?:b|u|s|f)(\d+)\s+([A-Za-z_$][\w$]*)\s*\[(\d+)\])");
  static const std::regex kReg(R"(\.reg\s+\.(b|u|s|f|pred)(\d*)\s+%\w+<(\d+)>)");
  static const std::regex kEntry(R"(\.entry\s+([A-Za-z_$][\w$]*))");
  ModuleResources out;
  out.source = "PTX declarations (upper bound: ptxas not found)";
  // Module-scope shared arrays, by name.
  std::map<std::string, int64_t> module_shared;
  std::vector<std::pair<size_t, std::string>> entries;
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), kEntry); it != std::sregex_iterator(); ++it) {
    entries.emplace_back(static_cast<size_t>(it->position()), (*it)[1].str());
  }
  const size_t first_entry = entries.empty() ? ptx.size() : entries.front().first;
  const std::string preamble = ptx.substr(0, first_entry);
  for (auto it = std::sregex_iterator(preamble.begin(), preamble.end(), kShared);
       it != std::sregex_iterator(); ++it) {
    module_shared[(*it)[2].str()] = std::stoll((*it)[1].str()) / 8 * std::stoll((*it)[3].str());
  }
  for (size_t e = 0; e < entries.size(); ++e) {
    const size_t end = e + 1 < entries.size() ? entries[e + 1].first : ptx.size();
    const std::string body = ptx.substr(entries[e].first, end - entries[e].first);
    KernelResources r;
    int64_t registers = 0;
    for (auto it = std::sregex_iterator(body.begin(), body.end(), kReg); it != std::sregex_iterator(); ++it) {
      if ((*it)[1].str() == "pred") continue;
      const int bits = (*it)[2].str().empty() ? 32 : std::stoi((*it)[2].str());
      registers += std::stoll((*it)[3].str()) * std::max(1, bits / 32);
    }
    r.registers = static_cast<int>(std::min<int64_t>(registers, 255));
    for (auto it = std::sregex_iterator(body.begin(), body.end(), kShared); it != std::sregex_iterator(); ++it) {
      r.shared_bytes += std::stoll((*it)[1].str()) / 8 * std::stoll((*it)[3].str());
    }
    for (const auto& [name, bytes] : module_shared) {
      if (std::regex_search(body, std::regex("\\b" + std::regex_replace(name, std::regex(R"([$])"), R"(\$)") + "\\b"))) {
        r.shared_bytes += bytes;
      }
    }
    out.kernels[entries[e].second] = r;
  }
  return out;
}

std::string FindPtxas() {
  std::vector<std::string> candidates;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    candidates.push_back(std::string(home) + "/bin/ptxas");
  }
  candidates.push_back("/usr/local/cuda/bin/ptxas");
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::istringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (!dir.empty()) candidates.push_back(dir + "/ptxas");
    }
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

StatusOr<ModuleResources> KernelResourcesOf(const std::string& ptx, const std::string& arch) {
  const std::string ptxas = FindPtxas();
  if (ptxas.empty()) return EstimateFromPtx(ptx);
  if (arch.empty() || arch.find_first_not_of("smcompute_0123456789a") != std::string::npos) {
    return Error(fmt::format("unexpected GPU architecture '{}'", arch));
  }
  // The PTX goes to ptxas as a file in a private directory under $TMPDIR, removed afterwards.
  auto directory = TemporaryDirectory::Create("ptxas");
  if (!directory.ok()) return EstimateFromPtx(ptx);
  const std::string path = directory->path() + "/module.ptx";
  const bool written = WriteFile(path, ptx).ok();
  // ptxas runs in a process group of its own with a time limit, so an assembler that hangs on
  // one module costs a minute and a message, not the compile.
  constexpr double kPtxasTimeoutSeconds = 60;
  constexpr size_t kWholeReport = size_t{16} << 20;  // one line per kernel: keep them all
  StatusOr<CommandOutcome> outcome = Error("the PTX could not be written to a temporary file");
  if (written) {
    outcome = RunCommand({ptxas, "-v", "-arch=" + arch, path, "-o", "/dev/null"}, kPtxasTimeoutSeconds,
                         kWholeReport);
  }
  if (!outcome.ok()) return Error(fmt::format("ptxas -v failed: {}", outcome.status().message()));
  if (outcome->timed_out || outcome->signal != 0 || outcome->exit_code != 0) {
    return Error(fmt::format("ptxas -v failed ({}): {}", outcome->Describe(kPtxasTimeoutSeconds),
                             outcome->output.substr(0, 500)));
  }
  const std::string& report = outcome->output;
  ASSIGN_OR_RETURN(ModuleResources out, ParsePtxasReport(report));
  out.source = fmt::format("ptxas -v ({})", ptxas);
  return out;
}

}  // namespace xlens::runtime

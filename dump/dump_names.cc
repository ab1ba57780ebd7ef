#include "dump/dump_names.h"

#include <fmt/format.h>

#include <cctype>

namespace xlens {

std::string DumpFileName(int64_t module_id, std::string_view module_name, std::string_view prefix,
                         std::string_view suffix) {
  std::string name;
  if (!prefix.empty()) name = fmt::format("{}.", prefix);
  name += fmt::format("module_{:04d}", module_id);
  if (!module_name.empty()) name += fmt::format(".{}", module_name);
  name += fmt::format(".{}", suffix);
  if (!module_name.empty() && name.size() > kMaxDumpFileNameLength) {
    return DumpFileName(module_id, "", prefix, suffix);
  }
  return SanitizeFileName(std::move(name));
}

std::string SanitizeFileName(std::string name) {
  for (char& c : name) {
    if (c == '/' || c == '\\' || c == '[' || c == ']' || c == ' ') c = '_';
  }
  return name;
}

std::string CpuAfterOptimizationsName() { return fmt::format("cpu_{}", kAfterOptimizations); }

std::string GpuAfterOptimizationsName(int major, int minor) {
  return fmt::format("sm_{}.{}_gpu_{}", major, minor, kAfterOptimizations);
}

std::string PassBoundaryName(int64_t step, std::string_view pipeline, std::string_view after_pass,
                             std::string_view before_pass) {
  return fmt::format("{:04d}.{}.after_{}.before_{}", step, pipeline, after_pass, before_pass);
}

std::string BufferAssignmentSuffix(std::string_view dump_name) {
  return fmt::format("{}-buffer-assignment.txt", dump_name);
}

std::string LlvmIrSuffix(bool optimized, std::string_view kernel) {
  std::string suffix = optimized ? "ir-with-opt" : "ir-no-opt";
  if (!kernel.empty()) suffix += fmt::format(".{}", kernel);
  return suffix + ".ll";
}

std::string TimestampPrefix(int64_t micros_since_epoch) {
  return std::to_string(micros_since_epoch);
}

int64_t ModuleIdFromFileName(std::string_view file_name) {
  constexpr std::string_view kModule = "module_";
  size_t at = 0;
  if (!file_name.starts_with(kModule)) {
    // Only a timestamp may come before "module_".
    size_t dot = file_name.find('.');
    if (dot == std::string_view::npos || dot == 0) return -1;
    for (size_t i = 0; i < dot; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(file_name[i]))) return -1;
    }
    at = dot + 1;
    if (file_name.substr(at, kModule.size()) != kModule) return -1;
  }
  at += kModule.size();
  size_t end = at;
  while (end < file_name.size() && std::isdigit(static_cast<unsigned char>(file_name[end]))) ++end;
  // XLA pads to four digits; larger ids are longer.
  if (end - at < 4 || end - at > 18 || end == file_name.size() || file_name[end] != '.') return -1;
  return std::stoll(std::string(file_name.substr(at, end - at)));
}

}  // namespace xlens

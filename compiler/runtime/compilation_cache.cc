#include "compiler/runtime/compilation_cache.h"

#include <cstdio>
#include <functional>

#include <fmt/format.h>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"

namespace xlens::runtime {

std::string ArgumentShapes(const HloModule& module) {
  std::vector<std::string> shapes;
  for (const HloInstruction* p : module.entry_computation()->parameter_instructions()) {
    shapes.push_back(p->shape().ToString(false));
  }
  return fmt::format("({})", fmt::join(shapes, ", "));
}

CompilationCache::CompilationCache(std::function<void(const std::string&)> log)
    : log_(std::move(log)) {
  if (!log_) log_ = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
}

StatusOr<std::shared_ptr<Executable>> CompilationCache::GetOrCompile(const HloModule& module,
                                                                     const CompileOptions& options) {
  const std::string text = PrintModule(module);
  const std::string shapes = ArgumentShapes(module);
  const auto& filter = options.optimize.filter;
  // The devices are part of what was compiled: a module checked and compiled for 4 devices (its
  // collectives' groups fitted to them) is not the program for 2.
  const std::string flags = fmt::format(
      "O{} devices={}x{} disabled={} only={} planted={}/{}", options.opt_level,
      options.topology.num_replicas, options.topology.num_partitions,
      fmt::join(filter.disabled.begin(), filter.disabled.end(), ","),
      fmt::join(filter.enabled_only.begin(), filter.enabled_only.end(), ","),
      options.optimize.planted.miscompile_after_pass, options.optimize.planted.miscompile_kernel);
  const std::string key = fmt::format("{:016x}|{}|{}", std::hash<std::string>()(text), shapes, flags);
  if (auto it = executables_.find(key); it != executables_.end()) {
    ++hits_;
    return it->second;
  }
  if (auto it = last_shapes_.find(module.name()); it != last_shapes_.end() && it->second != shapes) {
    log_(fmt::format("recompiling {}: argument shapes changed from {} to {}", module.name(),
                     it->second, shapes));
  }
  last_shapes_[module.name()] = shapes;
  ++misses_;
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> copy, ParseHloModule(text, ParseOptions{.verify = true}));
  ASSIGN_OR_RETURN(std::unique_ptr<Executable> executable, CompileForCpu(std::move(copy), options));
  std::shared_ptr<Executable> shared = std::move(executable);
  executables_[key] = shared;
  return shared;
}

}  // namespace xlens::runtime

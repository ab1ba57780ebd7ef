#include "compiler/tools/dump_trace_links.h"

#include <map>
#include <utility>
#include <variant>

#include "profiler/chrome_trace_reader.h"

namespace xlens {
namespace {

// Counts a trace's events and links kernel events to the dump's kernels by name: an event's
// hlo_op argument when it has one (XLA's and jax.profiler's), else its name; its hlo_module
// argument, when present, picks the module.
bool IsCompileCategory(const std::string& category) {
  namespace category_names = profiler::category;
  return category == category_names::kCompile || category == category_names::kPipeline ||
         category == category_names::kPass || category == category_names::kCodegen ||
         category == category_names::kClustering || category == category_names::kExecute;
}

class LinkingVisitor : public profiler::ChromeTraceVisitor {
 public:
  explicit LinkingVisitor(const DumpDirectory& dump) {
    for (const ManifestModule& module : dump.manifest.modules) {
      for (const ManifestKernel& kernel : module.kernels) {
        // Several modules may hold a kernel of the same name (recompilations): the last wins,
        // as the viewer's FindModuleByName does.
        by_name_[kernel.name] = {module.id, kernel.name};
        by_module_[{module.name, kernel.name}] = {module.id, kernel.name};
        if (!kernel.hlo_instruction.empty()) by_name_.emplace(kernel.hlo_instruction, std::make_pair(module.id, kernel.name));
      }
    }
  }
  bool WantsFlows() const override { return false; }
  void OnEvent(profiler::TraceEvent& event) override {
    ++links.events;
    // The compiler's own spans are named for passes and pipelines ("fusion"), never kernels.
    if (IsCompileCategory(event.category)) return;
    std::string op = event.name;
    std::string module;
    const profiler::TraceArg* hlo_op = profiler::FindArg(event, "hlo_op");
    if (hlo_op != nullptr) {
      if (auto* text = std::get_if<std::string>(&hlo_op->value)) op = *text;
    }
    if (const profiler::TraceArg* arg = profiler::FindArg(event, "hlo_module")) {
      if (auto* text = std::get_if<std::string>(&arg->value)) module = *text;
    }
    const std::pair<int64_t, std::string>* kernel = nullptr;
    if (!module.empty()) {
      auto it = by_module_.find({module, op});
      if (it != by_module_.end()) kernel = &it->second;
    }
    if (kernel == nullptr) {
      auto it = by_name_.find(op);
      if (it != by_name_.end()) kernel = &it->second;
    }
    bool is_kernel = profiler::IsKernelCategory(event.category) || !module.empty() ||
                     hlo_op != nullptr || kernel != nullptr;
    if (!is_kernel) return;
    ++links.kernel_events;
    if (kernel == nullptr) return;
    ++links.linked_events;
    DumpTraceLinks::KernelTime& time = links.times[*kernel];
    ++time.events;
    time.total_ns += event.duration_ns;
  }

  DumpTraceLinks links;

 private:
  std::map<std::string, std::pair<int64_t, std::string>> by_name_;
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, std::string>> by_module_;
};

}  // namespace

StatusOr<DumpTraceLinks> LinkTraceToDump(const DumpDirectory& dump, const std::string& trace_path) {
  LinkingVisitor visitor(dump);
  visitor.links.file = trace_path;
  RETURN_IF_ERROR(profiler::StreamChromeTrace(trace_path, visitor).status());
  return std::move(visitor.links);
}

}  // namespace xlens

#include "compiler/codegen/cpu/perf_map.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>
#include <llvm/ExecutionEngine/JITLink/JITLink.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>

namespace xlens::codegen {
namespace {

// Appends "START SIZE NAME" for each function of a linked graph once its addresses are final.
class PerfMapPlugin : public llvm::orc::ObjectLinkingLayer::Plugin {
 public:
  explicit PerfMapPlugin(std::string path) : path_(std::move(path)) {}

  void modifyPassConfig(llvm::orc::MaterializationResponsibility&, llvm::jitlink::LinkGraph&,
                        llvm::jitlink::PassConfiguration& config) override {
    config.PostFixupPasses.push_back([this](llvm::jitlink::LinkGraph& graph) {
      std::string lines;
      for (const llvm::jitlink::Symbol* symbol : graph.defined_symbols()) {
        if (!symbol->hasName() || !symbol->isCallable() || symbol->getSize() == 0) continue;
        lines += fmt::format("{:x} {:x} {}\n", symbol->getAddress().getValue(), symbol->getSize(),
                             symbol->getName().str());
      }
      Append(lines);
      return llvm::Error::success();
    });
  }
  llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility&) override {
    return llvm::Error::success();
  }
  llvm::Error notifyRemovingResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey) override {
    return llvm::Error::success();
  }
  void notifyTransferringResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey,
                                   llvm::orc::ResourceKey) override {}

 private:
  // Partitions link on several threads, and every JIT of the process appends to one map.
  void Append(const std::string& lines) {
    static std::mutex mutex;
    if (lines.empty()) return;
    std::lock_guard<std::mutex> lock(mutex);
    // A profiling aid: a map that cannot be written leaves the profile unnamed, nothing else.
    if (FILE* file = std::fopen(path_.c_str(), "a")) {
      std::fwrite(lines.data(), 1, lines.size(), file);
      std::fclose(file);
    }
  }

  std::string path_;
};

}  // namespace

std::string PerfMapPathFromEnvironment() {
  const char* value = std::getenv("XLENS_PERF_MAP");
  if (value == nullptr || *value == '\0' || std::string(value) == "0") return "";
  return fmt::format("/tmp/perf-{}.map", static_cast<long>(getpid()));
}

bool WritePerfMap(llvm::orc::LLJIT& jit, const std::string& path) {
  auto* layer = llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(&jit.getObjLinkingLayer());
  if (layer == nullptr) return false;
  layer->addPlugin(std::make_unique<PerfMapPlugin>(path));
  return true;
}

}  // namespace xlens::codegen

#include "compiler/codegen/cpu/perf_map.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
    // The map's name is a convention in a shared directory (/tmp), so what stands there is not
    // trusted: a symbolic link is refused, never followed, and only a regular file of this user
    // is appended to. O_NONBLOCK: a FIFO there would block the open until someone read it.
    const int fd = open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
      for (size_t done = 0; done < lines.size();) {
        const ssize_t n = write(fd, lines.data() + done, lines.size() - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
    }
    close(fd);
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

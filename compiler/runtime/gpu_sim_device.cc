#include "compiler/runtime/gpu_sim_device.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/SourceMgr.h>

#include "compiler/codegen/cpu/cpu_jit.h"
#include "compiler/codegen/gpu/nvvm_host_retarget.h"
#include "compiler/runtime/gpu_sim_race_check.h"
#include "compiler/runtime/gpu_sim_scheduler.h"
#include "compiler/support/thread_pool.h"

namespace xlens::runtime {
namespace {

// What the hardware allows (an H100): threads per block and shared memory per block.
constexpr int64_t kMaxThreadsPerBlock = 1024;
constexpr int64_t kMaxSharedBytes = 227 * 1024;

// Forwards to two observers (the user's and the race check).
class TeeObserver : public GpuSimObserver {
 public:
  TeeObserver(GpuSimObserver* a, GpuSimObserver* b) : a_(a), b_(b) {}
  bool concurrent_blocks() const override { return a_->concurrent_blocks() && b_->concurrent_blocks(); }
  void KernelBegin(const GpuKernelLaunchInfo& l, int w) override { a_->KernelBegin(l, w); b_->KernelBegin(l, w); }
  void BlockBegin(int w, int64_t b) override { a_->BlockBegin(w, b); b_->BlockBegin(w, b); }
  void Access(int w, int64_t b, const GpuMemoryAccess& x) override { a_->Access(w, b, x); b_->Access(w, b, x); }
  void Barrier(int w, int64_t b) override { a_->Barrier(w, b); b_->Barrier(w, b); }
  void BlockEnd(int w, int64_t b) override { a_->BlockEnd(w, b); b_->BlockEnd(w, b); }
  void KernelEnd() override { a_->KernelEnd(); b_->KernelEnd(); }

 private:
  GpuSimObserver* a_;
  GpuSimObserver* b_;
};

class SimDevice : public GpuSimDevice {
 public:
  SimDevice(const GpuSimOptions& options, std::unique_ptr<codegen::CpuJit> jit)
      : options_(options), jit_(std::move(jit)) {}
  ~SimDevice() override {
    for (auto& [address, bytes] : allocations_) std::free(reinterpret_cast<void*>(address));
  }

  std::string arch() const override { return options_.arch; }
  bool needs_ptx() const override { return options_.want_ptx; }
  bool needs_llvm_ir() const override { return true; }

  StatusOr<DevicePointer> Allocate(int64_t bytes) override {
    if (bytes < 0) return Error("cannot allocate a negative size");
    const size_t size = (static_cast<size_t>(std::max<int64_t>(bytes, 1)) + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, size);
    if (p == nullptr) return Error(fmt::format("out of host memory allocating {} bytes of simulated device memory", bytes));
    std::lock_guard<std::mutex> lock(mu_);
    allocations_[reinterpret_cast<uintptr_t>(p)] = bytes;
    return reinterpret_cast<DevicePointer>(p);
  }
  Status Free(DevicePointer pointer) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.find(pointer);
    if (it == allocations_.end()) return Error(fmt::format("free of {:#x}, which was never allocated", pointer));
    std::free(reinterpret_cast<void*>(pointer));
    allocations_.erase(it);
    return OkStatus();
  }
  Status CopyToDevice(DevicePointer destination, const void* source, int64_t bytes) override {
    if (bytes == 0) return OkStatus();
    RETURN_IF_ERROR(CheckRange(destination, bytes, "copy to the device"));
    std::memcpy(reinterpret_cast<void*>(destination), source, bytes);
    return OkStatus();
  }
  Status CopyFromDevice(void* destination, DevicePointer source, int64_t bytes) override {
    if (bytes == 0) return OkStatus();
    RETURN_IF_ERROR(CheckRange(source, bytes, "copy from the device"));
    std::memcpy(destination, reinterpret_cast<const void*>(source), bytes);
    return OkStatus();
  }

  StatusOr<GpuModuleHandle> LoadModule(const GpuModuleImage& image) override {
    if (image.llvm_ir.empty()) {
      return Error("the GPU simulator runs the kernels' LLVM IR, and the module image has none (only PTX)");
    }
    std::lock_guard<std::mutex> lock(mu_);
    const GpuModuleHandle handle = static_cast<GpuModuleHandle>(modules_.size());
    LoadedModule module;
    module.ir = image.llvm_ir;
    RETURN_IF_ERROR(Compile(handle, module, /*observe=*/false));
    modules_.push_back(std::move(module));
    return handle;
  }

  Status Launch(GpuModuleHandle handle, const std::string& name, const LaunchDimensions& dims,
                const std::vector<DevicePointer>& arguments) override;
  Status Synchronize() override { return OkStatus(); }

  void SetObserver(GpuSimObserver* observer) override { observer_ = observer; }
  GpuSimStats stats() const override { return stats_; }

 private:
  struct LoadedKernel {
    codegen::SimKernel info;
    SimKernelEntry entry = nullptr;
    SimKernelEntry observed = nullptr;
  };
  struct LoadedModule {
    std::string ir;
    std::map<std::string, LoadedKernel> kernels;
    bool observed_compiled = false;
    std::vector<GpuAccessSite> sites;
  };

  Status CheckRange(DevicePointer p, int64_t bytes, const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.upper_bound(p);
    if (it == allocations_.begin() || bytes < 0) return Error(fmt::format("{}: {:#x} is not device memory", what, p));
    --it;
    if (p + bytes > it->first + static_cast<uint64_t>(it->second)) {
      return Error(fmt::format("{}: {} bytes at {:#x} run past the end of its allocation", what, bytes, p));
    }
    return OkStatus();
  }

  // Retargets and JIT-compiles the module's kernels, plain or instrumented.
  Status Compile(GpuModuleHandle handle, LoadedModule& loaded, bool observe) {
    auto context = std::make_unique<llvm::LLVMContext>();
    llvm::SMDiagnostic diagnostic;
    std::unique_ptr<llvm::Module> module =
        llvm::parseIR(llvm::MemoryBufferRef(loaded.ir, "gpu module"), diagnostic, *context);
    if (module == nullptr) {
      return Error(fmt::format("the GPU module's LLVM IR does not parse: {}:{}: {}", diagnostic.getLineNo(),
                               diagnostic.getColumnNo(), diagnostic.getMessage().str()));
    }
    codegen::HostRetargetOptions options;
    options.symbol_prefix = fmt::format("xlsim{}{}_", handle, observe ? "o" : "");
    options.observe_memory = observe;
    ASSIGN_OR_RETURN(codegen::HostRetargetResult retargeted, codegen::RetargetNvvmForHost(*module, options));
    // Internal globals (constant tables the optimizer made) get names of this module's own: the
    // JIT exports them under names numbered per module, which the device's next module with one
    // would define again.
    int global_index = 0;
    for (llvm::GlobalVariable& g : module->globals()) {
      if (!g.hasLocalLinkage()) continue;
      g.setName(fmt::format("{}global{}", options.symbol_prefix, global_index++));
      g.setLinkage(llvm::GlobalValue::ExternalLinkage);
    }
    ASSIGN_OR_RETURN(codegen::CompiledIr ir, jit_->AddModule(std::move(module), std::move(context), false));
    (void)ir;
    for (const codegen::SimKernel& k : retargeted.kernels) {
      ASSIGN_OR_RETURN(void* address, jit_->Lookup(k.entry_symbol));
      LoadedKernel& kernel = loaded.kernels[k.name];
      kernel.info = k;
      (observe ? kernel.observed : kernel.entry) = reinterpret_cast<SimKernelEntry>(address);
    }
    if (observe) {
      loaded.observed_compiled = true;
      for (size_t i = 0; i < retargeted.sites.size(); ++i) {
        const codegen::SimAccessSite& s = retargeted.sites[i];
        GpuAccessSite site;
        site.id = static_cast<int32_t>(i);
        site.instruction = s.instruction;
        site.declared_space = s.address_space == 3 ? GpuMemorySpace::kShared : GpuMemorySpace::kGlobal;
        site.bytes = s.bytes;
        site.store = s.store;
        site.atomic = s.atomic;
        loaded.sites.push_back(std::move(site));
      }
    }
    return OkStatus();
  }

  GpuSimOptions options_;
  std::unique_ptr<codegen::CpuJit> jit_;
  std::mutex mu_;
  std::map<uintptr_t, int64_t> allocations_;
  std::deque<LoadedModule> modules_;  // a deque: a launch's reference survives a later load
  GpuSimObserver* observer_ = nullptr;
  GpuSimStats stats_;
};

Status SimDevice::Launch(GpuModuleHandle handle, const std::string& name, const LaunchDimensions& dims,
                         const std::vector<DevicePointer>& arguments) {
  if (handle < 0 || handle >= static_cast<GpuModuleHandle>(modules_.size())) {
    return Error(fmt::format("kernel {}: module {} was never loaded", name, handle));
  }
  LoadedModule& module = modules_[handle];
  auto found = module.kernels.find(name);
  if (found == module.kernels.end()) return Error(fmt::format("kernel {} is not in its executable's module", name));
  if (dims.threads_per_block < 1 || dims.threads_per_block > kMaxThreadsPerBlock) {
    return Error(fmt::format("kernel {}: {} threads per block (a GPU runs 1 to {})", name, dims.threads_per_block,
                             kMaxThreadsPerBlock));
  }
  if (dims.blocks < 0 || dims.blocks > (int64_t{1} << 31) - 1) {
    return Error(fmt::format("kernel {}: {} blocks (a GPU runs 0 to 2^31-1)", name, dims.blocks));
  }
  if (dims.blocks == 0) return OkStatus();
  LoadedKernel& kernel = found->second;
  if (static_cast<int64_t>(arguments.size()) != kernel.info.parameters) {
    return Error(fmt::format("kernel {} takes {} arguments, the launch passes {}", name, kernel.info.parameters,
                             arguments.size()));
  }
  const int64_t shared_bytes = kernel.info.static_shared_bytes + std::max<int64_t>(dims.shared_memory_bytes, 0);
  if (shared_bytes > kMaxSharedBytes) {
    return Error(fmt::format("kernel {}: {} bytes of shared memory per block (a GPU has at most {})", name,
                             shared_bytes, kMaxSharedBytes));
  }
  std::unique_ptr<SimRaceChecker> race_checker;
  std::unique_ptr<TeeObserver> tee;
  GpuSimObserver* observer = observer_;
  if (options_.race_check) {
    race_checker = std::make_unique<SimRaceChecker>();
    if (observer != nullptr) {
      tee = std::make_unique<TeeObserver>(observer, race_checker.get());
      observer = tee.get();
    } else {
      observer = race_checker.get();
    }
  }
  if (observer != nullptr && !module.observed_compiled) {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(Compile(handle, module, /*observe=*/true));
  }
  SimLaunch launch;
  launch.kernel = name;
  launch.entry = observer != nullptr ? kernel.observed : kernel.entry;
  launch.synchronizes = kernel.info.synchronizes;
  launch.blocks = dims.blocks;
  launch.threads_per_block = dims.threads_per_block;
  launch.shared_memory_bytes = shared_bytes;
  std::vector<uint64_t> values(arguments.begin(), arguments.end());
  values.push_back(0);  // never read: keeps data() valid for a kernel without parameters
  launch.arguments = values.data();
  launch.observer = observer;
  ++stats_.launches;
  if (kernel.info.synchronizes) ++stats_.fiber_launches;
  stats_.threads += dims.blocks * dims.threads_per_block;

  ThreadPool& pool = ThreadPool::Default();
  const bool parallel = observer == nullptr || observer->concurrent_blocks();
  const int workers = parallel ? pool.parallelism() : 1;
  if (observer != nullptr) {
    GpuKernelLaunchInfo info;
    info.kernel = name;
    info.blocks = dims.blocks;
    info.threads_per_block = dims.threads_per_block;
    info.shared_memory_bytes = shared_bytes;
    info.sites = &module.sites;
    observer->KernelBegin(info, workers);
  }
  std::atomic<bool> stop{false};
  Status status = OkStatus();
  if (!parallel) {
    status = RunSimBlocks(launch, 0, dims.blocks, 0, stop);
  } else {
    std::mutex mu;
    std::map<std::thread::id, int> worker_of;
    // Enough threads per chunk that a chunk is worth handing to another thread.
    const int64_t grain = std::max<int64_t>(1, 8192 / dims.threads_per_block);
    pool.ParallelFor(dims.blocks, grain, [&](int64_t begin, int64_t end) {
      int worker;
      {
        std::lock_guard<std::mutex> lock(mu);
        auto [it, inserted] = worker_of.emplace(std::this_thread::get_id(), static_cast<int>(worker_of.size()));
        worker = it->second;
      }
      Status s = RunSimBlocks(launch, begin, end, worker, stop);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (status.ok()) status = s;
      }
    });
  }
  if (observer != nullptr) observer->KernelEnd();
  RETURN_IF_ERROR(status);
  if (race_checker != nullptr && !race_checker->race().empty()) return Error(race_checker->race());
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<GpuSimDevice>> OpenSimulatedGpuDevice(const GpuSimOptions& options) {
  if (!SimFibersAvailable()) {
    return Error("the GPU simulator is unavailable: this build has no Boost.Context (install "
                 "libboost-context-dev, as scripts/setup.sh does, and reconfigure)");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<codegen::CpuJit> jit, codegen::CpuJit::Create({.opt_level = options.opt_level}));
  RETURN_IF_ERROR(jit->DefineSymbols(SimCallbackSymbols()));
  return std::unique_ptr<GpuSimDevice>(new SimDevice(options, std::move(jit)));
}

}  // namespace xlens::runtime

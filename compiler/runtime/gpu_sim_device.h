// The GPU simulator: a GpuDevice that runs the GPU backend's kernels on the host, exactly as
// a GPU would run them (threads, warps, blocks, barriers, shuffles, shared memory). It loads the
// kernels' LLVM IR before target lowering (GpuModuleImage::llvm_ir), retargets it to the host
// (codegen/gpu/nvvm_host_retarget.h), compiles it with the ORC JIT and runs every launch's
// blocks in parallel on the thread pool, the threads of a block with the SIMT scheduler
// (gpu_sim_scheduler.h). Device memory is host memory: a device pointer is a host address.
#pragma once

#include <memory>
#include <string>

#include "compiler/runtime/gpu_device.h"
#include "compiler/runtime/gpu_sim_observer.h"

namespace xlens::runtime {

struct GpuSimOptions {
  std::string arch = "sm_90";  // what the compiler targets (and PTX, when asked for, is built for)
  int opt_level = 2;           // the host optimization of the retargeted kernels
  // Report a data race (two threads of a block touching the same byte of shared or global
  // memory between two barriers, one of them writing, not both atomically) as the launch's
  // error. Slow: every access is checked.
  bool race_check = false;
  // Also produce PTX (needs the CUDA toolkit's libdevice): off, the simulator needs no toolkit.
  bool want_ptx = false;
};

// What the simulator did, since it was opened.
struct GpuSimStats {
  int64_t launches = 0;
  int64_t fiber_launches = 0;  // launches whose kernel synchronises (threads as fibers)
  int64_t threads = 0;         // simulated GPU threads
};

class GpuSimDevice : public GpuDevice {
 public:
  // Every launch after this reports its memory accesses to `observer` (not owned; nullptr
  // detaches). The instrumented kernels are compiled on the first observed launch.
  virtual void SetObserver(GpuSimObserver* observer) = 0;
  virtual GpuSimStats stats() const = 0;
};

// The simulator, or why it cannot run here (built without Boost.Context).
StatusOr<std::unique_ptr<GpuSimDevice>> OpenSimulatedGpuDevice(const GpuSimOptions& options = {});

}  // namespace xlens::runtime

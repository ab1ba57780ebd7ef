// The GPU simulator's SIMT scheduler: runs the blocks of one launch of a retargeted kernel
// (nvvm_host_retarget.h) on the calling host thread. A kernel without synchronisation points
// runs its threads one after the other (a plain loop, no context switch); any other kernel runs
// each thread of a block as a fiber (Boost.Context) that yields at barriers and warp
// collectives, so code that relies on barriers and on the lanes of a warp meeting at a shuffle
// behaves as on the hardware. A block whose threads can no longer all make progress (a barrier
// or shuffle some threads never reach) fails with a message saying who waits for what.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compiler/codegen/gpu/nvvm_host_retarget.h"
#include "compiler/runtime/gpu_sim_observer.h"
#include "compiler/support/status.h"

namespace xlens::runtime {

using SimKernelEntry = void (*)(codegen::SimThreadContext* context, const uint64_t* arguments);

struct SimLaunch {
  std::string kernel;
  SimKernelEntry entry = nullptr;
  bool synchronizes = false;
  int64_t blocks = 0;
  int64_t threads_per_block = 0;
  int64_t shared_memory_bytes = 0;  // static plus dynamic, per block
  const uint64_t* arguments = nullptr;
  GpuSimObserver* observer = nullptr;  // null: the kernel is not instrumented
};

// Whether fibers are available (the build found Boost.Context); without them only kernels
// without synchronisation run.
bool SimFibersAvailable();

// The callbacks retargeted kernels call, by name, for the JIT.
std::vector<std::pair<std::string, void*>> SimCallbackSymbols();

// Runs blocks [begin, end) of `launch` on this thread as `worker`; stops early once `stop` is
// set (by this or another worker) and sets it when a block fails. The first failure is returned.
Status RunSimBlocks(const SimLaunch& launch, int64_t begin, int64_t end, int worker,
                    std::atomic<bool>& stop);

}  // namespace xlens::runtime

// Retargets the GPU kernels' LLVM IR (NVVM: what the NVPTX back end compiles, before target
// lowering) to the host CPU, for the GPU simulator. Every function gains a first parameter, the
// simulated thread's context (SimThreadContext); the NVVM special registers read it; barriers,
// shuffles, votes and warp reductions become calls into the simulator's SIMT scheduler; shared
// memory (address space 3) becomes an offset into the block's shared buffer; libdevice calls
// become the host's math functions. Every kernel gets an entry point
//     void PREFIX + name(SimThreadContext* context, const uint64_t* arguments)
// that the simulator calls once per GPU thread. What the simulator does not model (an NVVM
// intrinsic, a call into unknown code) is refused with one message naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/support/status.h"

namespace llvm {
class Module;
}

namespace xlens::codegen {

// The simulated thread's state as the retargeted code reads it; the offsets are part of the
// contract between this file and the simulator (static_asserts below keep them).
struct SimThreadContext {
  uint32_t tid[3];     // %tid.x/y/z
  uint32_t ntid[3];    // %ntid
  uint32_t ctaid[3];   // %ctaid
  uint32_t nctaid[3];  // %nctaid
  uint32_t laneid;
  uint32_t warpid;
  uint32_t nwarpid;
  uint32_t padding;
  char* shared;        // this block's shared memory
  void* runtime;       // the simulator's per-thread state, passed back to its callbacks
};
static_assert(offsetof(SimThreadContext, laneid) == 48);
static_assert(offsetof(SimThreadContext, shared) == 64);
static_assert(offsetof(SimThreadContext, runtime) == 72);

// The simulator's callbacks, called by the retargeted code (C ABI; `context` first):
//   void __xlsim_barrier(ctx, i32 expected_threads /* -1: the whole block */)
//   i32  __xlsim_barrier_reduce(ctx, i32 op /* SimBarrierOp */, i32 predicate)
//   i64  __xlsim_shuffle(ctx, i32 mode /* SimShuffleMode */, i32 mask, i32 value, i32 b, i32 c)
//        (the value in bits 0..31, whether the source lane was in range in bit 32)
//   i32  __xlsim_vote(ctx, i32 mode /* SimVoteMode */, i32 mask, i32 predicate)
//   i32  __xlsim_warp_reduce(ctx, i32 op /* SimWarpReduceOp */, i32 mask, i32 value)
//   void __xlsim_warp_sync(ctx, i32 mask)
//   i32  __xlsim_active_mask(ctx)
//   void __xlsim_observe(ctx, i32 site, ptr address, i32 bytes, i32 flags /* SimAccessFlags */)
//   void __xlsim_trap(ctx)
enum class SimShuffleMode : int32_t { kIdx = 0, kUp = 1, kDown = 2, kBfly = 3 };
enum class SimVoteMode : int32_t { kAll = 0, kAny = 1, kUni = 2, kBallot = 3 };
enum class SimBarrierOp : int32_t { kAnd = 0, kOr = 1, kPopc = 2 };
enum class SimWarpReduceOp : int32_t { kAdd = 0, kMin, kMax, kUmin, kUmax, kAnd, kOr, kXor };
// __xlsim_observe's flags: bit 0 store, bit 1 atomic, bits 8..15 the pointer's address space.
constexpr int32_t kSimAccessStore = 1;
constexpr int32_t kSimAccessAtomic = 2;

// One instrumented load, store or atomic.
struct SimAccessSite {
  std::string kernel;
  std::string instruction;  // the IR instruction, one line
  int32_t address_space = 0;
  int32_t bytes = 0;
  bool store = false;
  bool atomic = false;
};

struct SimKernel {
  std::string name;          // the kernel's name in the NVVM module
  std::string entry_symbol;  // its host entry point
  // Whether it reaches a barrier, shuffle, vote or warp reduction: the simulator runs such a
  // kernel's threads as fibers, and every other kernel's threads one after the other.
  bool synchronizes = false;
  int64_t static_shared_bytes = 0;  // where its dynamic shared memory begins
  int64_t parameters = 0;           // what the launch passes (64-bit values each)
};

struct HostRetargetOptions {
  std::string symbol_prefix;  // prepended to every entry point's name (unique per module)
  bool observe_memory = false;  // call __xlsim_observe before every global/shared access
};

struct HostRetargetResult {
  std::vector<SimKernel> kernels;
  std::vector<SimAccessSite> sites;  // indexed by the site id passed to __xlsim_observe
};

// Rewrites `module` in place (see above). Kernels are the functions nvvm.annotations marks.
StatusOr<HostRetargetResult> RetargetNvvmForHost(llvm::Module& module,
                                                 const HostRetargetOptions& options);

}  // namespace xlens::codegen

#include "compiler/runtime/gpu_sim_scheduler.h"

#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <csetjmp>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#if XLENS_HAVE_BOOST_CONTEXT
#include <boost/context/detail/fcontext.hpp>
#endif

namespace xlens::runtime {
namespace {

using codegen::SimThreadContext;

#if XLENS_HAVE_BOOST_CONTEXT
using boost::context::detail::fcontext_t;
using boost::context::detail::jump_fcontext;
using boost::context::detail::make_fcontext;
using boost::context::detail::transfer_t;
#else
using fcontext_t = void*;
#endif

constexpr int kWarpSize = 32;
// Each fiber's stack; a guard page below it turns an overflow into a fault, not corruption.
constexpr size_t kStackBytes = 256 * 1024;

enum class Wait : uint8_t { kNone, kBarrier, kWarp, kWarpIdle };
enum class Collective : uint8_t { kShuffle, kVote, kReduce, kSync };

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kShuffle: return "a shuffle";
    case Collective::kVote: return "a vote";
    case Collective::kReduce: return "a warp reduction";
    case Collective::kSync: return "__syncwarp";
  }
  return "?";
}

struct BlockState;

struct ThreadSlot {
  SimThreadContext context;
  BlockState* block = nullptr;
  fcontext_t fiber = nullptr;      // the suspended fiber
  fcontext_t scheduler = nullptr;  // where the fiber yields to
  Wait wait = Wait::kNone;
  uint32_t wait_generation = 0;
  bool finished = false;
};

struct WarpState {
  uint32_t live = 0;      // lanes present and not exited
  uint32_t arrived = 0;   // lanes at the collective being formed
  uint32_t expected = 0;  // lanes it waits for
  int pending = 0;        // lanes yet to read the last collective's result
  uint32_t generation = 0;
  Collective kind = Collective::kSync;
  int32_t mode = 0;
  uint32_t in[kWarpSize], b[kWarpSize], c[kWarpSize], out[kWarpSize];
  bool in_range[kWarpSize];
};

struct BlockState {
  const SimLaunch* launch = nullptr;
  int64_t block = 0;
  int worker = 0;
  int64_t threads = 0;
  char* shared = nullptr;
  std::vector<ThreadSlot>* slots = nullptr;
  std::vector<WarpState> warps;
  int64_t live = 0;
  int64_t arrived = 0;
  uint32_t generation = 0;
  int32_t reduce_and = 1, reduce_or = 0, reduce_popc = 0;
  int32_t reduce_results[2][3] = {};
  bool failed = false;
  std::string error;
  std::jmp_buf* trap = nullptr;  // the plain loop's way out of a trapping thread
};

// Per host thread: buffers reused from block to block.
struct Runner {
  std::vector<ThreadSlot> slots;
  std::vector<char> shared;
  std::vector<char*> stacks;  // the usable top of each, below it kStackBytes, then a guard page
  ~Runner() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (char* top : stacks) munmap(top - kStackBytes - page, kStackBytes + page);
  }
  bool EnsureStacks(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    while (stacks.size() < n) {
      void* p = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) return false;
      mprotect(p, page, PROT_NONE);
      stacks.push_back(static_cast<char*>(p) + page + kStackBytes);
    }
    return true;
  }
};

thread_local Runner t_runner;

ThreadSlot* SlotOf(SimThreadContext* context) { return static_cast<ThreadSlot*>(context->runtime); }

void InitContext(SimThreadContext& c, const SimLaunch& launch, int64_t block, int64_t thread, char* shared) {
  c.tid[0] = static_cast<uint32_t>(thread);
  c.tid[1] = c.tid[2] = 0;
  c.ntid[0] = static_cast<uint32_t>(launch.threads_per_block);
  c.ntid[1] = c.ntid[2] = 1;
  c.ctaid[0] = static_cast<uint32_t>(block);
  c.ctaid[1] = c.ctaid[2] = 0;
  c.nctaid[0] = static_cast<uint32_t>(launch.blocks);
  c.nctaid[1] = c.nctaid[2] = 1;
  c.laneid = static_cast<uint32_t>(thread % kWarpSize);
  c.warpid = static_cast<uint32_t>(thread / kWarpSize);
  c.nwarpid = static_cast<uint32_t>((launch.threads_per_block + kWarpSize - 1) / kWarpSize);
  c.padding = 0;
  c.shared = shared;
}

#if XLENS_HAVE_BOOST_CONTEXT

void Yield(ThreadSlot* s) {
  transfer_t t = jump_fcontext(s->scheduler, nullptr);
  s->scheduler = t.fctx;
}

// Ends the block with `error`, abandoning the fiber (its stack is reused as is).
[[noreturn]] void FailThread(ThreadSlot* s) {
  s->block->failed = true;
  s->finished = true;
  jump_fcontext(s->scheduler, nullptr);
  __builtin_unreachable();
}

void ReleaseBarrier(BlockState& b) {
  b.reduce_results[b.generation & 1][0] = b.reduce_and;
  b.reduce_results[b.generation & 1][1] = b.reduce_or;
  b.reduce_results[b.generation & 1][2] = b.reduce_popc;
  b.reduce_and = 1;
  b.reduce_or = b.reduce_popc = 0;
  b.arrived = 0;
  ++b.generation;
  if (b.launch->observer != nullptr) b.launch->observer->Barrier(b.worker, b.block);
}

void CompleteCollective(WarpState& w) {
  const uint32_t lanes = w.arrived;
  uint32_t all = 1, any = 0, ballot = 0, first = 0;
  bool uniform = true, have_first = false;
  int64_t sum = 0;
  int32_t smin = INT32_MAX, smax = INT32_MIN;
  uint32_t umin = UINT32_MAX, umax = 0, band = UINT32_MAX, bor = 0, bxor = 0;
  for (int l = 0; l < kWarpSize; ++l) {
    if (!(lanes >> l & 1)) continue;
    const uint32_t v = w.in[l];
    all &= v != 0;
    any |= v != 0;
    if (v != 0) ballot |= 1u << l;
    if (!have_first) first = v != 0, have_first = true;
    else if ((v != 0) != (first != 0)) uniform = false;
    sum += v;
    smin = std::min(smin, static_cast<int32_t>(v));
    smax = std::max(smax, static_cast<int32_t>(v));
    umin = std::min(umin, v);
    umax = std::max(umax, v);
    band &= v;
    bor |= v;
    bxor ^= v;
  }
  for (int l = 0; l < kWarpSize; ++l) {
    if (!(lanes >> l & 1)) continue;
    switch (w.kind) {
      case Collective::kShuffle: {
        // PTX's shfl.sync: c packs the segment mask (bits 8..12) and the clamp (bits 0..4).
        const int32_t bval = static_cast<int32_t>(w.b[l]);
        const int32_t segment = (w.c[l] >> 8) & 0x1f;
        const int32_t clamp = w.c[l] & 0x1f;
        const int32_t min_lane = l & segment;
        const int32_t max_lane = min_lane | (clamp & ~segment);
        int32_t j = l;
        bool in_range = false;
        switch (static_cast<codegen::SimShuffleMode>(w.mode)) {
          case codegen::SimShuffleMode::kUp: j = l - bval; in_range = j >= max_lane; break;
          case codegen::SimShuffleMode::kDown: j = l + bval; in_range = j <= max_lane; break;
          case codegen::SimShuffleMode::kBfly: j = l ^ bval; in_range = j <= max_lane; break;
          case codegen::SimShuffleMode::kIdx: j = min_lane | (bval & ~segment); in_range = j <= max_lane; break;
        }
        if (!in_range || j < 0 || j >= kWarpSize) j = l;
        // A source lane outside the collective gives an undefined value on the hardware; here
        // its own value.
        w.out[l] = (lanes >> j & 1) ? w.in[j] : w.in[l];
        w.in_range[l] = in_range;
        break;
      }
      case Collective::kVote:
        switch (static_cast<codegen::SimVoteMode>(w.mode)) {
          case codegen::SimVoteMode::kAll: w.out[l] = all; break;
          case codegen::SimVoteMode::kAny: w.out[l] = any; break;
          case codegen::SimVoteMode::kUni: w.out[l] = uniform; break;
          case codegen::SimVoteMode::kBallot: w.out[l] = ballot; break;
        }
        break;
      case Collective::kReduce:
        switch (static_cast<codegen::SimWarpReduceOp>(w.mode)) {
          case codegen::SimWarpReduceOp::kAdd: w.out[l] = static_cast<uint32_t>(sum); break;
          case codegen::SimWarpReduceOp::kMin: w.out[l] = static_cast<uint32_t>(smin); break;
          case codegen::SimWarpReduceOp::kMax: w.out[l] = static_cast<uint32_t>(smax); break;
          case codegen::SimWarpReduceOp::kUmin: w.out[l] = umin; break;
          case codegen::SimWarpReduceOp::kUmax: w.out[l] = umax; break;
          case codegen::SimWarpReduceOp::kAnd: w.out[l] = band; break;
          case codegen::SimWarpReduceOp::kOr: w.out[l] = bor; break;
          case codegen::SimWarpReduceOp::kXor: w.out[l] = bxor; break;
        }
        break;
      case Collective::kSync:
        w.out[l] = 0;
        break;
    }
  }
  w.pending = std::popcount(lanes);
  w.arrived = 0;
  ++w.generation;
}

// One lane's part in a warp collective: waits until every lane the mask names (and that has
// not exited) has arrived, then returns this lane's result.
uint32_t WarpCollective(SimThreadContext* context, Collective kind, int32_t mode, uint32_t mask, uint32_t value,
                        uint32_t b, uint32_t c, bool* in_range) {
  ThreadSlot* s = SlotOf(context);
  BlockState& block = *s->block;
  WarpState& w = block.warps[context->warpid];
  const int lane = static_cast<int>(context->laneid);
  const uint32_t bit = 1u << lane;
  if (!(mask & bit)) {
    block.error = fmt::format("thread {} (lane {} of warp {}) takes part in {} whose mask {:#010x} leaves it out",
                              context->tid[0], lane, context->warpid, CollectiveName(kind), mask);
    FailThread(s);
  }
  // The warp's previous collective must be read by all its lanes, and a collective of other
  // lanes (another mask) must be over, before this one forms.
  while (w.pending > 0 || (w.arrived != 0 && !(w.expected & bit))) {
    s->wait = Wait::kWarpIdle;
    Yield(s);
  }
  s->wait = Wait::kNone;
  if (w.arrived == 0) {
    w.kind = kind;
    w.mode = mode;
    w.expected = mask & w.live;
  } else if (w.kind != kind || w.mode != mode) {
    block.error = fmt::format("the lanes of warp {} meet at different collectives ({} and {}): divergent code "
                              "reaches a warp collective", context->warpid, CollectiveName(w.kind), CollectiveName(kind));
    FailThread(s);
  }
  w.in[lane] = value;
  w.b[lane] = b;
  w.c[lane] = c;
  w.arrived |= bit;
  if ((w.arrived & w.expected) == w.expected) {
    CompleteCollective(w);
  } else {
    s->wait = Wait::kWarp;
    s->wait_generation = w.generation;
    Yield(s);
    s->wait = Wait::kNone;
  }
  --w.pending;
  if (in_range != nullptr) *in_range = w.in_range[lane];
  return w.out[lane];
}

void BarrierArrive(ThreadSlot* s, int32_t expected, int32_t predicate, int32_t* results) {
  BlockState& b = *s->block;
  if (expected >= 0 && expected != b.threads) {
    b.error = fmt::format("thread {} waits at a barrier for {} threads, but the block has {} (partial barriers "
                          "are not modelled)", s->context.tid[0], expected, b.threads);
    FailThread(s);
  }
  b.reduce_and &= predicate != 0;
  b.reduce_or |= predicate != 0;
  b.reduce_popc += predicate != 0;
  const uint32_t generation = b.generation;
  if (++b.arrived == b.live) {
    ReleaseBarrier(b);
  } else {
    s->wait = Wait::kBarrier;
    s->wait_generation = generation;
    Yield(s);
    s->wait = Wait::kNone;
  }
  if (results != nullptr) std::memcpy(results, b.reduce_results[generation & 1], sizeof(int32_t) * 3);
}

void ThreadExited(ThreadSlot* s) {
  BlockState& b = *s->block;
  --b.live;
  if (b.arrived > 0 && b.arrived == b.live) ReleaseBarrier(b);
  WarpState& w = b.warps[s->context.warpid];
  w.live &= ~(1u << s->context.laneid);
  w.expected &= w.live;
  if (w.arrived != 0 && (w.arrived & w.expected) == w.expected) CompleteCollective(w);
}

void FiberMain(transfer_t t) {
  ThreadSlot* s = static_cast<ThreadSlot*>(t.data);
  s->scheduler = t.fctx;
  s->block->launch->entry(&s->context, s->block->launch->arguments);
  s->finished = true;
  ThreadExited(s);
  jump_fcontext(s->scheduler, nullptr);
  __builtin_unreachable();
}

bool Ready(const BlockState& b, const ThreadSlot& s) {
  switch (s.wait) {
    case Wait::kNone: return true;
    case Wait::kBarrier: return b.generation != s.wait_generation;
    case Wait::kWarp: return b.warps[s.context.warpid].generation != s.wait_generation;
    case Wait::kWarpIdle: {
      const WarpState& w = b.warps[s.context.warpid];
      return w.pending == 0 && (w.arrived == 0 || (w.expected >> s.context.laneid & 1));
    }
  }
  return true;
}

// Who waits for what, for the message of a block that cannot go on.
std::string DescribeWaits(const BlockState& b) {
  int64_t at_barrier = 0, at_warp = 0, first_warp = -1;
  for (const ThreadSlot& s : *b.slots) {
    if (s.finished) continue;
    if (s.wait == Wait::kBarrier) ++at_barrier;
    if (s.wait == Wait::kWarp || s.wait == Wait::kWarpIdle) {
      ++at_warp;
      if (first_warp < 0) first_warp = s.context.warpid;
    }
  }
  std::string text = fmt::format("{} of {} threads wait at a barrier that the other {} never reach", at_barrier,
                                 b.threads, b.threads - at_barrier);
  if (at_warp > 0) {
    text = fmt::format("{} threads wait at a warp collective (warp {} first) that lanes of their warp never "
                       "reach; {} wait at a barrier", at_warp, first_warp, at_barrier);
  }
  return text;
}

Status RunBlockAsFibers(BlockState& b, Runner& runner) {
  if (!runner.EnsureStacks(static_cast<size_t>(b.threads))) {
    return Error("cannot allocate the stacks of the simulated threads (out of memory)");
  }
  std::vector<ThreadSlot>& slots = *b.slots;
  for (int64_t t = 0; t < b.threads; ++t) {
    ThreadSlot& s = slots[t];
    s.block = &b;
    s.wait = Wait::kNone;
    s.finished = false;
    s.fiber = make_fcontext(runner.stacks[t], kStackBytes, FiberMain);
  }
  b.warps.assign((b.threads + kWarpSize - 1) / kWarpSize, WarpState{});
  for (size_t w = 0; w < b.warps.size(); ++w) {
    const int64_t lanes = std::min<int64_t>(kWarpSize, b.threads - static_cast<int64_t>(w) * kWarpSize);
    b.warps[w].live = lanes == kWarpSize ? 0xffffffffu : (1u << lanes) - 1;
  }
  b.live = b.threads;
  while (b.live > 0) {
    bool progress = false;
    for (int64_t t = 0; t < b.threads && !b.failed; ++t) {
      ThreadSlot& s = slots[t];
      if (s.finished || !Ready(b, s)) continue;
      progress = true;
      transfer_t r = jump_fcontext(s.fiber, &s);
      s.fiber = r.fctx;
    }
    if (b.failed) return Error(b.error);
    if (!progress) return Error(fmt::format("block {} cannot go on: {}", b.block, DescribeWaits(b)));
  }
  return OkStatus();
}

#endif  // XLENS_HAVE_BOOST_CONTEXT

Status RunBlockAsLoop(BlockState& b) {
  ThreadSlot& s = (*b.slots)[0];
  s.block = &b;
  std::jmp_buf trap;
  b.trap = &trap;
  int64_t t = 0;
  if (setjmp(trap) != 0) {
    return Error(fmt::format("thread {} of block {} trapped (llvm.trap)", s.context.tid[0], b.block));
  }
  for (; t < b.threads; ++t) {
    s.context.tid[0] = static_cast<uint32_t>(t);
    s.context.laneid = static_cast<uint32_t>(t % kWarpSize);
    s.context.warpid = static_cast<uint32_t>(t / kWarpSize);
    b.launch->entry(&s.context, b.launch->arguments);
  }
  return OkStatus();
}

}  // namespace

bool SimFibersAvailable() { return XLENS_HAVE_BOOST_CONTEXT != 0; }

Status RunSimBlocks(const SimLaunch& launch, int64_t begin, int64_t end, int worker, std::atomic<bool>& stop) {
  Runner& runner = t_runner;
  const bool fibers = launch.synchronizes;
  if (fibers && !SimFibersAvailable()) {
    return Error(fmt::format("kernel {} synchronises its threads, and the GPU simulator was built without "
                             "Boost.Context (install libboost-context-dev: scripts/setup.sh)", launch.kernel));
  }
  runner.slots.resize(fibers ? launch.threads_per_block : 1);
  runner.shared.resize(std::max<int64_t>(launch.shared_memory_bytes, 1));
  for (int64_t block = begin; block < end; ++block) {
    if (stop.load(std::memory_order_relaxed)) return OkStatus();
    // Shared memory starts zeroed in every block, so no block sees another's values.
    std::memset(runner.shared.data(), 0, launch.shared_memory_bytes);
    BlockState b;
    b.launch = &launch;
    b.block = block;
    b.worker = worker;
    b.threads = launch.threads_per_block;
    b.shared = runner.shared.data();
    b.slots = &runner.slots;
    for (int64_t t = 0; t < static_cast<int64_t>(runner.slots.size()); ++t) {
      InitContext(runner.slots[t].context, launch, block, t, b.shared);
      runner.slots[t].context.runtime = &runner.slots[t];
    }
    if (launch.observer != nullptr) launch.observer->BlockBegin(worker, block);
    Status status = OkStatus();
#if XLENS_HAVE_BOOST_CONTEXT
    status = fibers ? RunBlockAsFibers(b, runner) : RunBlockAsLoop(b);
#else
    status = RunBlockAsLoop(b);
#endif
    if (launch.observer != nullptr) launch.observer->BlockEnd(worker, block);
    if (!status.ok()) {
      stop.store(true);
      return status.WithContext(fmt::format("kernel {}, block {}", launch.kernel, block));
    }
  }
  return OkStatus();
}

}  // namespace xlens::runtime

// The callbacks the retargeted kernels call (nvvm_host_retarget.h).
using xlens::codegen::SimThreadContext;
using xlens::runtime::Collective;

extern "C" {

void __xlsim_barrier(SimThreadContext* context, int32_t expected) {
#if XLENS_HAVE_BOOST_CONTEXT
  xlens::runtime::BarrierArrive(xlens::runtime::SlotOf(context), expected, 0, nullptr);
#endif
}

int32_t __xlsim_barrier_reduce(SimThreadContext* context, int32_t op, int32_t predicate) {
  int32_t results[3] = {};
#if XLENS_HAVE_BOOST_CONTEXT
  xlens::runtime::BarrierArrive(xlens::runtime::SlotOf(context), -1, predicate, results);
#endif
  return results[op < 0 || op > 2 ? 0 : op];
}

int64_t __xlsim_shuffle(SimThreadContext* context, int32_t mode, int32_t mask, int32_t value, int32_t b, int32_t c) {
#if XLENS_HAVE_BOOST_CONTEXT
  bool in_range = false;
  const uint32_t r = xlens::runtime::WarpCollective(context, Collective::kShuffle, mode, mask, value, b, c, &in_range);
  return static_cast<int64_t>(r) | (static_cast<int64_t>(in_range) << 32);
#else
  return value;
#endif
}

int32_t __xlsim_vote(SimThreadContext* context, int32_t mode, int32_t mask, int32_t predicate) {
#if XLENS_HAVE_BOOST_CONTEXT
  return xlens::runtime::WarpCollective(context, Collective::kVote, mode, mask, predicate, 0, 0, nullptr);
#else
  return predicate;
#endif
}

int32_t __xlsim_warp_reduce(SimThreadContext* context, int32_t op, int32_t mask, int32_t value) {
#if XLENS_HAVE_BOOST_CONTEXT
  return xlens::runtime::WarpCollective(context, Collective::kReduce, op, mask, value, 0, 0, nullptr);
#else
  return value;
#endif
}

void __xlsim_warp_sync(SimThreadContext* context, int32_t mask) {
#if XLENS_HAVE_BOOST_CONTEXT
  xlens::runtime::WarpCollective(context, Collective::kSync, 0, mask, 0, 0, 0, nullptr);
#endif
}

int32_t __xlsim_active_mask(SimThreadContext* context) {
  xlens::runtime::ThreadSlot* s = xlens::runtime::SlotOf(context);
  if (s->block->warps.empty()) return static_cast<int32_t>(1u << context->laneid);
  return static_cast<int32_t>(s->block->warps[context->warpid].live);
}

void __xlsim_observe(SimThreadContext* context, int32_t site, void* address, int32_t bytes, int32_t flags) {
  xlens::runtime::ThreadSlot* s = xlens::runtime::SlotOf(context);
  xlens::runtime::BlockState& b = *s->block;
  xlens::runtime::GpuMemoryAccess access;
  access.site = site;
  access.thread = static_cast<int32_t>(context->tid[0]);
  access.bytes = bytes;
  access.store = (flags & xlens::codegen::kSimAccessStore) != 0;
  access.atomic = (flags & xlens::codegen::kSimAccessAtomic) != 0;
  const int space = flags >> 8;
  const auto p = reinterpret_cast<uintptr_t>(address);
  const auto shared = reinterpret_cast<uintptr_t>(b.shared);
  const bool in_shared = p >= shared && p < shared + static_cast<uintptr_t>(b.launch->shared_memory_bytes);
  if (space == 3 || (space == 0 && in_shared)) {
    access.space = xlens::runtime::GpuMemorySpace::kShared;
    access.address = p - shared;
  } else {
    access.space = xlens::runtime::GpuMemorySpace::kGlobal;
    access.address = p;
  }
  b.launch->observer->Access(b.worker, b.block, access);
}

void __xlsim_trap(SimThreadContext* context) {
  xlens::runtime::ThreadSlot* s = xlens::runtime::SlotOf(context);
  xlens::runtime::BlockState& b = *s->block;
  if (b.trap != nullptr) std::longjmp(*b.trap, 1);
#if XLENS_HAVE_BOOST_CONTEXT
  b.error = fmt::format("thread {} of block {} trapped (llvm.trap)", context->tid[0], b.block);
  xlens::runtime::FailThread(s);
#endif
}

}  // extern "C"

namespace xlens::runtime {

std::vector<std::pair<std::string, void*>> SimCallbackSymbols() {
  return {{"__xlsim_barrier", reinterpret_cast<void*>(&__xlsim_barrier)},
          {"__xlsim_barrier_reduce", reinterpret_cast<void*>(&__xlsim_barrier_reduce)},
          {"__xlsim_shuffle", reinterpret_cast<void*>(&__xlsim_shuffle)},
          {"__xlsim_vote", reinterpret_cast<void*>(&__xlsim_vote)},
          {"__xlsim_warp_reduce", reinterpret_cast<void*>(&__xlsim_warp_reduce)},
          {"__xlsim_warp_sync", reinterpret_cast<void*>(&__xlsim_warp_sync)},
          {"__xlsim_active_mask", reinterpret_cast<void*>(&__xlsim_active_mask)},
          {"__xlsim_observe", reinterpret_cast<void*>(&__xlsim_observe)},
          {"__xlsim_trap", reinterpret_cast<void*>(&__xlsim_trap)}};
}

}  // namespace xlens::runtime

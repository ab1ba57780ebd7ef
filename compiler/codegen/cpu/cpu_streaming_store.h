// Streaming (non-temporal) stores for CPU loops whose outputs do not fit in the last-level cache.
//
// A plain store to a line that is not in cache first reads the line from memory (write-allocate),
// so an elementwise loop over arrays larger than the cache moves its output twice: b + s * c on
// 64 MiB arrays moves 256 MiB for 192 MiB of arguments and results. A non-temporal store writes
// whole lines straight to memory. x86 has it only for aligned vectors (a misaligned one is
// split, on AMD into one scalar store per element), and LLVM's loop vectorizer widens a scalar
// store at the scalar's alignment, so the loop cannot be left to it: the kernel computes a
// stretch of its outputs into a small stack buffer (the body vectorizes as before, the buffer
// stays in L1), and EmitStreamingCopy writes the buffer out with plain stores up to the first
// 64-byte boundary, 64-byte aligned non-temporal stores from there, and plain stores for what
// is left.
//
// Non-temporal stores are weakly ordered: a phase that made them ends with an sfence, so that
// the next phase (possibly on another thread, after the pool's release of the chunk) sees them.
#pragma once

#include <cstdint>

#include <llvm/IR/IRBuilder.h>

#include "compiler/hlo/instruction.h"
#include "compiler/passes/buffer_assignment.h"

namespace xlens::codegen::cpu {

// The bytes of each output a loop computes before it writes them out (a stretch): eight lines.
// Shorter stretches interleave the loads and the streaming stores more finely, which the memory
// system serves faster: on a 2-core EPYC, b + 3c over 64 MiB took 6.5 ms a run with 512-byte
// stretches and 7.5 ms with 4 KiB ones (9.5 ms with plain stores), an Adam update of 16 MiB
// arrays 3.5 and 5.2 ms (4.2 plain), best of 6-8 runs. A loop that reads through a transpose
// takes 4 KiB: its strided loads want the longer inner loop (f32[2048,4096] transposed: 2.4 ms
// a run with 4 KiB, 2.8 with 512 bytes, median of 6).
constexpr int64_t kStreamingStretchBytes = 512;
constexpr int64_t kStridedStreamingStretchBytes = 4096;

// How far ahead of the stretch being computed a streamed loop prefetches the operands it reads in
// place, into L2 (prefetcht2), a line at a time: bytes of each operand. Without it the loads of
// a loop are in flight only as far as the out-of-order window reaches, which a long body (more
// instructions per line read) shortens, and the hardware's L2 streamer stops at every 4 KiB page.
// On a 2-CPU Sapphire Rapids VM the eight-op chain over two f32[16777216] (chain8 of
// tests/bench/codegen_vs_xla.py: the same bytes as b + 3c) ran at 77% of b + 3c's rate without;
// xlens run, 10 alternating rounds of 10 runs at load 4: best 5.23 -> 4.06 ms, lowest median
// 5.66 -> 4.52, and b + 3c itself 3.77 -> 3.63 and 3.98 -> 3.86. The kernels' own IR compiled
// into a two-thread C driver (12-20 alternating rounds, bests): 4 KiB and 8 KiB ahead alike
// (16 KiB no better), into L2 (prefetcht1/t2) 3.78-3.85 ms against 4.12-4.43 into L1
// (prefetcht0), whose lines push out what the body is reading, and 8.7-10.5 non-temporal.
constexpr int64_t kStreamPrefetchBytes = 8192;

// The most operands a streamed loop prefetches: one that reads more in place prefetches none.
// With more streams the hardware's own prefetchers keep enough lines in flight, and the
// prefetches (one a line, each holding a fill buffer beside the streaming stores' write-combining
// ones) only cost. xlens run, 10-20 alternating rounds of 10 runs at load 1-3, best and lowest
// median without -> with: a * b + c over f32[16777216] 5.85 -> 5.58 and 6.04 -> 5.94 ms; a + b
// and a - b, two outputs, 4.76 -> 4.65 and 4.99 -> 4.87; Adam over four f32[4194304] (three
// outputs, already at b + 3c's rate without) 2.14 -> 2.28 and 2.25 -> 2.39, and the same with
// its divisions and square root made multiplications 2.05 -> 2.11 and 2.11 -> 2.22.
constexpr int64_t kMaxPrefetchedStreams = 3;

// The cache counted is at most profiler::kMaxCacheBytesPerCpu for each CPU sharing it
// (profiler/machine_limits.h). Where that binds, on a 2-CPU Xeon VM shown its host's 480 MiB L3,
// it sets this threshold, and it was fitted there (xlens run of tests/bench/codegen_vs_xla.py's
// modules, alternating pairs of 300 runs against plain stores): working sets of 32 MiB keep their
// bytes in the cache and lose streamed (layer norm over f32[4096,1024], 4 pairs at load 7: best
// 0.556-0.572 ms plain, 0.596-0.652 streamed; the sigmoid chain and the bias-GELU likewise), and
// from 49 MiB they win: batch norm in training over f32[32,28,28,128] (y and dx 25.7 MB,
// returned) median 12.1-15.9 -> 8.1-10.1 ms and best 2.15-2.94 -> 1.44-1.64 (6 pairs at load
// 9-10), Adam over 4M elements best 3.8-4.2 -> 2.3-2.6, chain8 and triad likewise. 20 MiB a CPU
// puts that VM's line (the cache counted: 40 MiB, the threshold 20) between.
// Outputs of a loop at least this large (bytes, all output leaves of the loop together) are
// written with streaming stores: half of this machine's last-level cache (the largest data or
// unified cache cpu0 reports, counted as profiler::LastLevelCacheBytes counts it), at least
// 1 MiB; 0 (never) where the target has no such store.
int64_t DefaultStreamingStoreBytes();

// The threshold for the kernel of `hlo` (KernelOptions::cpu_streaming_store_bytes), given the
// entry's buffer assignment:
//  - 0 (never) where an output shares a buffer with an operand: written in place, its lines were
//    just read into the cache, so a plain store costs no read, and a streaming store would evict
//    them (an unfused chain over 64 MiB in one buffer: 15% slower); 0 too where the assignment
//    does not know the instruction (one of a nested computation);
//  - 0 where the kernel's operands and results together fit in the last-level cache: they can
//    stay in it from one run to the next;
//  - DefaultStreamingStoreBytes() for what the module returns;
//  - twice that, the whole cache, for a value a later kernel reads: one that fits beside its
//    operands is read back from the cache (an unfused chain over 16 MiB: 20-40% slower streamed).
int64_t StreamingStoreBytesFor(const HloInstruction& hlo, const BufferAssignment* assignment);

// Copies `elements` elements of `element_bytes` bytes (1, 2, 4, 8 or 16) from `source` (any
// alignment that of the elements) to `destination` (aligned to its element size), the 64-byte
// aligned whole lines of the destination with non-temporal vector stores. Where `prefetch_bytes`
// is positive (a source read from memory, not a stack buffer), each line's source that many
// bytes ahead is prefetched as it is copied (EmitL2Prefetch).
void EmitStreamingCopy(llvm::IRBuilder<>& b, llvm::Value* destination, llvm::Value* source,
                       llvm::Value* elements, int64_t element_bytes, int64_t prefetch_bytes = 0);

// Prefetches the line holding `address` into L2 (prefetcht2), as a stream read from memory does
// kStreamPrefetchBytes ahead of its loads. A prefetch never faults: past an array's end it is
// dropped.
void EmitL2Prefetch(llvm::IRBuilder<>& b, llvm::Value* address);

// Makes `store` (an aligned vector store of whole lines) non-temporal: it writes the lines without
// reading them first.
void MarkNonTemporal(llvm::StoreInst* store);

// Orders the non-temporal stores made so far before any later store (x86's sfence).
void EmitStreamingFence(llvm::IRBuilder<>& b);

// Whether this build can emit streaming stores for the JIT's target (x86-64 hosts).
bool HasStreamingStores();

}  // namespace xlens::codegen::cpu

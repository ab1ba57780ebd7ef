// Memory for large buffers (a compiled module's arena of arguments, results and temporaries),
// backed by 2 MiB transparent huge pages where the kernel lends them.
//
// With 4 KiB pages a loop streaming 64 MiB walks 16384 pages: more than the TLBs hold, so every
// page costs a table walk, and the hardware's stream prefetchers stop at each page's end and
// start again on the next. Linux backs an anonymous range with huge pages when it is aligned to
// them and madvise(MADV_HUGEPAGE) asks for it (the default "madvise" setting of
// /sys/kernel/mm/transparent_hugepage/enabled). With the arena so backed, memory-bound modules
// ran 18-29% faster beside other work on a 2-core EPYC (medians of 8-10 alternating runs: layer
// norm over f32[4096,1024] 1.12 -> 0.90 ms, b + 3c over 64 MiB 7.6 -> 5.0, an Adam update 3.3 ->
// 2.7, f32[2048,4096] transposed 1.79 -> 1.39; an RMS norm with its residual 3% faster).
#pragma once

#include <cstddef>

namespace xlens {

// Buffers at least this large are aligned to it and asked to be backed by huge pages.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` (0 counts as 1) aligned to 64 bytes, or for kHugePageBytes and more to kHugePageBytes
// with huge pages asked for; nullptr when the allocation fails. Release it with std::free.
void* AllocateLarge(size_t bytes);

// The heap keeps up to this much free memory at its top before it returns any to the kernel.
inline constexpr size_t kRetainedHeapTopBytes = size_t{256} << 20;

// Has the process's allocator keep freed blocks for reuse instead of returning them to the
// kernel: every block comes from the heap (glibc otherwise maps each block above a threshold,
// 128 KiB and raised as blocks are freed up to 32 MiB, on its own, and unmaps it when freed).
// A module's results are copied into fresh literals on every call (Executable::Execute, the
// Python binding's jit), tens of megabytes each for a memory-bound module, so every call
// faulted its results' pages in again, each zeroed by the kernel. On a 2-core EPYC virtual
// machine beside other work (each figure the median of 20 calls, in alternating runs): batch
// norm's two f32[32,28,28,128] results, 6241 faults a call, 22-44 -> 8.8-20 ms a call (best
// calls 21-23 -> 7.7-8.9; the run alone 2.7); Adam's three f32[4194304], 12258 faults, 45-79 ->
// 26-28 ms; and results over 32 MiB, which glibc maps whatever its threshold: triad's
// f32[16777216], 16385 faults, 112-118 -> 39-45 ms; a transposed f32[4096,2048], 8193 faults,
// 83-84 -> 49-56 ms. The price: the resident size stays near its peak (the heap returns only a
// top beyond kRetainedHeapTopBytes; the CPU corpus test's peak was 3.13 GB before, 3.10 after).
// This is a setting of the whole process (the Python package's host included), so it is left
// alone where the process already tunes glibc's allocator (ProcessTunesItsAllocator): setting
// any of glibc's malloc variables, e.g. MALLOC_MMAP_MAX_=65536 (glibc's default), keeps glibc's
// own behaviour. Called by the runtime before it builds a CPU executable; calling it again
// changes nothing.
void RetainFreedLargeBlocks();

// Whether the environment sets any of glibc's malloc tunables (MALLOC_MMAP_MAX_,
// MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_, MALLOC_ARENA_MAX, or a
// glibc.malloc.* entry of GLIBC_TUNABLES).
bool ProcessTunesItsAllocator();

}  // namespace xlens

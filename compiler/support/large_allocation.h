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

// Asks that [p, p + bytes), inside a block from AllocateLarge and before its first touch, keep
// 4 KiB pages (the range widened to whole 4 KiB pages). For a matrix read in narrow column blocks
// whose rows lie a multiple of 4 KiB apart: in one physically contiguous 2 MiB page its rows
// fall into the same few sets of a physically indexed cache, where 4 KiB pages placed at random
// spread them (the callers say what they measured).
void KeepOnSmallPages(void* p, size_t bytes);

// Blocks up to this size come from the heap and go back to it when freed (glibc's largest mmap
// threshold); larger ones are mapped and unmapped each time.
inline constexpr size_t kRetainedBlockBytes = size_t{32} << 20;
// The heap keeps up to this much free memory at its top before it returns any to the kernel.
inline constexpr size_t kRetainedHeapTopBytes = size_t{256} << 20;

// Has the process's allocator keep freed blocks of up to kRetainedBlockBytes for reuse, so that
// results copied into fresh literals on every call (Executable::Execute, the Python binding's
// jit) do not fault their pages in again each time. A setting of the whole process, left alone
// where the environment tunes glibc's allocator (ProcessTunesItsAllocator). Called by the
// runtime before it builds a CPU executable; calling it again changes nothing.
void RetainFreedLargeBlocks();

// Whether the environment sets glibc's mmap or trim tunables (MALLOC_MMAP_MAX_,
// MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_, or their glibc.malloc.*
// entries of GLIBC_TUNABLES).
bool ProcessTunesItsAllocator();

}  // namespace xlens

#include "compiler/support/large_allocation.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace xlens {

void* AllocateLarge(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  const size_t alignment = bytes >= kHugePageBytes ? kHugePageBytes : 64;
  // aligned_alloc wants a multiple of the alignment.
  const size_t size = (bytes + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, size);
#if defined(MADV_HUGEPAGE)
  if (p != nullptr && alignment == kHugePageBytes) {
    // A block the heap hands back (RetainFreedLargeBlocks) may already be backed by small pages
    // from an earlier use: dropping them lets the first touch fault in huge ones. On a fresh
    // mapping there is nothing to drop.
    (void)madvise(p, size, MADV_DONTNEED);
    // Only a request: where huge pages are off or none is free, the range keeps its small pages.
    (void)madvise(p, size, MADV_HUGEPAGE);
  }
#endif
  return p;
}

bool ProcessTunesItsAllocator() {
  // glibc's own environment settings: a process (or its user) that chose them keeps them.
  for (const char* name : {"MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                           "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr;
}

void RetainFreedLargeBlocks() {
#if defined(__GLIBC__)
  if (ProcessTunesItsAllocator()) return;
  // No block is mapped on its own: glibc maps blocks above its mmap threshold (32 MiB at most)
  // and unmaps them when freed. A fixed trim threshold also turns off glibc's adjustment of it,
  // which trims the heap's top beyond twice the largest block freed so far: two 12.8 MB results
  // freed together went back to the kernel, and came back as fresh pages on the next call.
  (void)mallopt(M_MMAP_MAX, 0);
  (void)mallopt(M_TRIM_THRESHOLD, static_cast<int>(kRetainedHeapTopBytes));
#endif
}

}  // namespace xlens

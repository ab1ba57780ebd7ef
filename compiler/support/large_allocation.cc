#include "compiler/support/large_allocation.h"

#include <algorithm>
#include <cstdint>
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

void KeepOnSmallPages(void* p, size_t bytes) {
#if defined(MADV_NOHUGEPAGE)
  constexpr uintptr_t kPage = 4096;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / kPage * kPage;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + kPage - 1) / kPage * kPage;
  if (bytes > 0) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_NOHUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

bool ProcessTunesItsAllocator() {
  // glibc's own settings of what RetainFreedLargeBlocks sets: a process (or its user) that chose
  // them keeps them.
  for (const char* name :
       {"MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables == nullptr) return false;
  for (const char* name : {"glibc.malloc.mmap_max", "glibc.malloc.mmap_threshold",
                           "glibc.malloc.trim_threshold", "glibc.malloc.top_pad"}) {
    if (std::strstr(tunables, name) != nullptr) return true;
  }
  return false;
}

void RetainFreedLargeBlocks() {
#if defined(__GLIBC__)
  if (ProcessTunesItsAllocator()) return;
  // A module's results are copied into fresh literals on every call, tens of megabytes each for a
  // memory-bound module. glibc maps a block above its mmap threshold on its own and unmaps it
  // when freed, so every call faulted its results' pages in again, each zeroed by the kernel:
  // medians of 20 Execute calls on a 2-core EPYC virtual machine beside other work, batch norm's
  // two f32[32,28,28,128] results 6241 faults and 22-44 ms a call, 0 faults and 8.8-20 ms with
  // this setting; Adam's three f32[4194304] 12258 faults, 45-79 ms, against 0 and 26-28 ms.
  // glibc raises its threshold this far by itself only after such blocks are freed, and then
  // trims the heap's top beyond twice the largest block freed: two 12.8 MB results freed together
  // went back to the kernel. So both are fixed, which also ends glibc's adjusting of them.
  // Blocks over 32 MiB (glibc's largest threshold) are still mapped each call: keeping those in
  // the heap too (M_MMAP_MAX 0) held any large block the host freed below a live one, a 512 MiB
  // numpy array for one, for the rest of the process.
  (void)mallopt(M_MMAP_THRESHOLD, static_cast<int>(kRetainedBlockBytes));
  (void)mallopt(M_TRIM_THRESHOLD, static_cast<int>(kRetainedHeapTopBytes));
#endif
}

}  // namespace xlens

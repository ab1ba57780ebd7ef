#include "compiler/support/large_allocation.h"

#include <algorithm>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace xlens {

void* AllocateLarge(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  const size_t alignment = bytes >= kHugePageBytes ? kHugePageBytes : 64;
  // aligned_alloc wants a multiple of the alignment.
  const size_t size = (bytes + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, size);
#if defined(MADV_HUGEPAGE)
  // Only a request: where huge pages are off or none is free, the range keeps its small pages.
  if (p != nullptr && alignment == kHugePageBytes) (void)madvise(p, size, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace xlens

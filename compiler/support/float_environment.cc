#include "compiler/support/float_environment.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define XLENS_HAVE_MXCSR 1
#endif

namespace xlens {

#ifdef XLENS_HAVE_MXCSR
namespace {
constexpr uint32_t kFlushToZero = 0x8000;      // FTZ: subnormal results become 0
constexpr uint32_t kDenormalsAreZero = 0x0040;  // DAZ: subnormal inputs read as 0
}  // namespace

uint32_t GetFloatControl() { return _mm_getcsr(); }
void SetFloatControl(uint32_t control) {
  // Only the control bits travel; the sticky exception flags stay the thread's own.
  _mm_setcsr((control & ~uint32_t{0x3f}) | (_mm_getcsr() & 0x3f));
}
ScopedFlushDenormal::ScopedFlushDenormal() : saved_(GetFloatControl()) {
  SetFloatControl(saved_ | kFlushToZero | kDenormalsAreZero);
}
ScopedFlushDenormal::~ScopedFlushDenormal() { SetFloatControl(saved_); }
#else
uint32_t GetFloatControl() { return 0; }
void SetFloatControl(uint32_t) {}
ScopedFlushDenormal::ScopedFlushDenormal() : saved_(0) {}
ScopedFlushDenormal::~ScopedFlushDenormal() = default;
#endif

}  // namespace xlens

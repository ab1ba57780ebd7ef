#include "compiler/support/cpu_features.h"

namespace xlens {

bool CpuHasAvx512F() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
#else
  return false;
#endif
}

bool CpuHasAvx2Fma() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

}  // namespace xlens

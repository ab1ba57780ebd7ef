#pragma once

// What the CPU running this process can execute, for code that picks a kernel at run time:
// each answer is read once (cpuid, through GCC's __builtin_cpu_supports) and false off x86.
namespace xlens {

// AVX-512 Foundation: 16-float vectors and masked loads and stores.
bool CpuHasAvx512F();
// AVX2 together with FMA3: the 8-float kernels use both.
bool CpuHasAvx2Fma();

}  // namespace xlens

#include "compiler/runtime/cuda_driver.h"

#include <dlfcn.h>

#include <fmt/format.h>

namespace xlens::runtime {

Status CheckCudaDevice() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    const char* why = dlerror();
    return Error(fmt::format("no CUDA driver found ({})", why ? why : "libcuda.so.1 not loadable"));
  }
  using CuInit = int (*)(unsigned);
  using CuDeviceGetCount = int (*)(int*);
  auto init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
  auto count_fn = reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
  if (init == nullptr || count_fn == nullptr) return Error("no CUDA driver found (libcuda.so.1 lacks cuInit)");
  if (int rc = init(0); rc != 0) return Error(fmt::format("the CUDA driver failed to start (cuInit error {})", rc));
  int count = 0;
  if (count_fn(&count) != 0 || count == 0) return Error("the CUDA driver found no GPU");
  return OkStatus();
}

}  // namespace xlens::runtime

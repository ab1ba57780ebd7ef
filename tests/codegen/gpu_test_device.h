// The GPU device the GPU emitter tests run their kernels on: a real GPU through the CUDA driver
// when one is present; an error (the tests skip with it) otherwise.
#pragma once

#include <memory>

#include "compiler/runtime/gpu_device.h"

namespace xlens::testing {

inline StatusOr<std::unique_ptr<runtime::GpuDevice>> OpenTestGpuDevice() {
  return runtime::OpenCudaDevice();
}

}  // namespace xlens::testing

// The CUDA driver, opened with dlopen so that every binary runs on a machine without a GPU.
#pragma once

#include <memory>
#include <string>

#include "compiler/runtime/gpu_device.h"
#include "compiler/support/status.h"

namespace xlens::runtime {

// OK when libcuda.so.1 loads and cuInit finds a device; otherwise "no CUDA driver found (...)"
// or what the driver said.
Status CheckCudaDevice();

// How many GPUs the CUDA driver sees; "no CUDA driver found (...)" without one.
StatusOr<int> CountCudaDevices();

// CUDA device `ordinal` (OpenCudaDevice() is device 0). Every call on it makes its context
// current first, so that devices driven from threads of their own each use their own GPU.
StatusOr<std::unique_ptr<GpuDevice>> OpenCudaDevice(int ordinal);

}  // namespace xlens::runtime

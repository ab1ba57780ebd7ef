// GpuDevice: what the GPU runtime needs of a device, behind an interface so that the logic
// around it (buffer planning, launch order, argument marshalling) is tested without a GPU. The
// CUDA implementation (cuda_driver.cc) opens libcuda.so.1 with dlopen.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::runtime {

using DevicePointer = uint64_t;
// A module loaded into a device (LoadModule); valid for the device's lifetime.
using GpuModuleHandle = int64_t;

struct LaunchDimensions {
  int64_t blocks = 1;
  int64_t threads_per_block = 1;
};

class GpuDevice {
 public:
  virtual ~GpuDevice() = default;
  // "sm_90": what PTX is compiled for.
  virtual std::string arch() const = 0;
  virtual StatusOr<DevicePointer> Allocate(int64_t bytes) = 0;
  virtual Status Free(DevicePointer pointer) = 0;
  virtual Status CopyToDevice(DevicePointer destination, const void* source, int64_t bytes) = 0;
  virtual Status CopyFromDevice(void* destination, DevicePointer source, int64_t bytes) = 0;
  // Loads PTX text and returns its handle. Kernels are found by name within one module only:
  // every executable names its kernels alike ("fusion", "fusion_1", ...), so a lookup across the
  // modules of a device would launch another executable's kernel.
  virtual StatusOr<GpuModuleHandle> LoadModule(const std::string& ptx) = 0;
  // Launches kernel `name` of `module` with one pointer argument per entry of `arguments`.
  virtual Status Launch(GpuModuleHandle module, const std::string& name, const LaunchDimensions& dims,
                        const std::vector<DevicePointer>& arguments) = 0;
  virtual Status Synchronize() = 0;
};

// The first CUDA device through the driver API; "no CUDA driver found (...)" without one.
StatusOr<std::unique_ptr<GpuDevice>> OpenCudaDevice();

}  // namespace xlens::runtime

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
  // Dynamic shared memory of each block (an `extern` address space 3 array), bytes.
  int64_t shared_memory_bytes = 0;
};

// What a device loads: PTX for a real GPU, the kernels' LLVM IR before target lowering (NVVM,
// libdevice calls unresolved) for the simulator. A device reads what it needs (needs_ptx,
// needs_llvm_ir) and the compiler fills only that.
struct GpuModuleImage {
  std::string ptx;
  std::string llvm_ir;
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
  // What LoadModule reads of a GpuModuleImage.
  virtual bool needs_ptx() const { return true; }
  virtual bool needs_llvm_ir() const { return false; }
  // Loads a module image and returns its handle. Kernels are found by name within one module only:
  // every executable names its kernels alike ("fusion", "fusion_1", ...), so a lookup across the
  // modules of a device would launch another executable's kernel.
  virtual StatusOr<GpuModuleHandle> LoadModule(const GpuModuleImage& image) = 0;
  // Launches kernel `name` of `module` with one pointer argument per entry of `arguments`.
  virtual Status Launch(GpuModuleHandle module, const std::string& name, const LaunchDimensions& dims,
                        const std::vector<DevicePointer>& arguments) = 0;
  virtual Status Synchronize() = 0;
  // Whether CUDA libraries (cuBLAS) can run on this device's pointers in the current context and
  // stream order: a real CUDA device, not the simulator.
  virtual bool runs_cuda_libraries() const { return false; }
};

// The first CUDA device through the driver API; "no CUDA driver found (...)" without one.
StatusOr<std::unique_ptr<GpuDevice>> OpenCudaDevice();

}  // namespace xlens::runtime

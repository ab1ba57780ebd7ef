// The GPU device the GPU emitter tests run their kernels on: the GPU simulator (exact SIMT
// semantics on the host, with its race check: two threads of a block touching the same byte
// between barriers, one writing, fail the launch), or a real GPU through the CUDA driver where
// the simulator is not built; an error (the tests skip with it) when neither is there.
#pragma once

#include <memory>

#include "compiler/runtime/gpu_device.h"
#include "compiler/runtime/gpu_sim_device.h"

namespace xlens::testing {

inline StatusOr<std::unique_ptr<runtime::GpuDevice>> OpenTestGpuDevice() {
  runtime::GpuSimOptions options;
  options.race_check = true;
  auto simulator = runtime::OpenSimulatedGpuDevice(options);
  if (simulator.ok()) return std::unique_ptr<runtime::GpuDevice>(std::move(*simulator));
  auto cuda = runtime::OpenCudaDevice();
  if (cuda.ok()) return cuda;
  return Error(simulator.status().message() + "; " + cuda.status().message());
}

}  // namespace xlens::testing

// The CUDA driver, opened with dlopen so that every binary runs on a machine without a GPU.
#pragma once

#include <string>

#include "compiler/support/status.h"

namespace xlens::runtime {

// OK when libcuda.so.1 loads and cuInit finds a device; otherwise "no CUDA driver found (...)"
// or what the driver said.
Status CheckCudaDevice();

}  // namespace xlens::runtime

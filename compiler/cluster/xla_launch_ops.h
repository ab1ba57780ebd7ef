// The kernels of TensorFlow's XLA launch ops, as build_xla_ops leaves them in a graph:
//   _XlaCompile(constants, args, resources) -> (key, compilation_successful)
//     compiles the cluster's function for this launch's signature through the session's
//     XlaDeviceCompiler (or declines, under TensorFlow's lazy rule: then `compilation_successful`
//     is false and the graph runs the op-by-op fallback);
//   _XlaRun(args, resources, key) -> results
//     runs the compiled executable on the arguments and the variables' current values, writes
//     the updated variables back, and returns the cluster's results. The run is one span of the
//     trace named after the cluster, its kernels nested inside.
// (_XlaMerge is a Merge to the executor.)
#pragma once

#include <memory>

#include "compiler/cluster/xla_device_compiler.h"
#include "compiler/graph/resource_mgr.h"

namespace xlens::cluster {

// The session resource the launch kernels find their compiler under.
inline constexpr char kXlaDeviceCompilerResource[] = "xla_device_compiler";

// Attaches the kernels to the global op registry (once; later calls do nothing).
void RegisterXlaLaunchKernels();

}  // namespace xlens::cluster

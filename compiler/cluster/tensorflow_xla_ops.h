// The ops TensorFlow's XLA bridge compiles on the CPU (the XLA_CPU_JIT kernels of TensorFlow
// 2.21, listed in tensorflow_xla_ops.inc by tests/cluster/tensorflow_xla_ops.py, which CTest
// also runs to check the list against the installed TensorFlow). They tell an op xlens cannot
// lower yet, which TensorFlow would have compiled, from one TensorFlow cannot compile either.
#pragma once

#include <string_view>

namespace xlens::cluster {

bool TensorFlowCompilesForXlaCpu(std::string_view op);

}  // namespace xlens::cluster

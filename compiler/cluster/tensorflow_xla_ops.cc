#include "compiler/cluster/tensorflow_xla_ops.h"

#include <algorithm>
#include <iterator>

namespace xlens::cluster {
namespace {

constexpr std::string_view kTensorFlowXlaCpuOps[] = {
#include "compiler/cluster/tensorflow_xla_ops.inc"
};

}  // namespace

bool TensorFlowCompilesForXlaCpu(std::string_view op) {
  return std::binary_search(std::begin(kTensorFlowXlaCpuOps), std::end(kTensorFlowXlaCpuOps), op);
}

}  // namespace xlens::cluster

// Attaches every op's gradient function to its registration (called by OpRegistry::Global()
// once the ops are registered).
#include "compiler/graph/grads/grad_util.h"
#include "compiler/graph/ops/register_ops.h"

namespace xlens::graph {

void RegisterGradients(OpRegistry& registry) {
  grad::RegisterMathGradients(registry);
  grad::RegisterArrayGradients(registry);
  grad::RegisterNnGradients(registry);
  grad::RegisterModelGradients(registry);
  grad::RegisterListGradients(registry);
  grad::RegisterWhileGradients(registry);
}

}  // namespace xlens::graph

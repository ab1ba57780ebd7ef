// The remapper: rewrites a convolution or product and the per-channel ops after it into one
// fused node before the graph runs op by op, as grappler's remapper (with its constant folding's
// MulConvPushDown) does before TensorFlow's executor runs:
//
//   Conv2D -> BiasAdd / per-channel Add, Mul, Sub -> [Add of a side input] -> [activation]
//     => _FusedConv2D(input, filter', bias', [side]), fused_ops [BiasAdd, (Add), (activation)]
//   MatMul -> BiasAdd / per-channel Add -> [activation]
//     => _FusedMatMul(a, b, bias'), fused_ops [BiasAdd, (activation)]
//
// A per-channel Mul by a constant (an inference batch norm's scale, as Keras writes it) is
// folded into a constant filter (filter' = filter * scale, bias' = bias * scale); the per-channel
// adds and subtractions add up into bias'. filter' and bias' are new nodes of constants, which
// the executor computes once. A chain is fused only where TensorFlow's would be: f32, one device,
// every op of the chain but the last with exactly one consumer (so neither fetched nor a control
// input of anything); the fused node takes the last op's name, so consumers and fetches of the
// chain's result (and traces) still find it.
#pragma once

#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::graph {

struct RemapperStats {
  int fused_conv = 0;    // _FusedConv2D nodes written
  int fused_matmul = 0;  // _FusedMatMul nodes written
  int folded_scales = 0; // per-channel Muls folded into a filter
};

// Rewrites `graph` in place. Leaves a graph whose shapes cannot be inferred as it is.
StatusOr<RemapperStats> RemapGraph(Graph* graph);

// Whether `node` computes the same value on every run: a Const, or a stateless kernel (no
// function, no handle, list or reference outputs) whose inputs, data and control, all do. What
// the executor folds once (as grappler's constant folding would) and kernels may prepare once.
bool ComputesConstant(const Node& node);

}  // namespace xlens::graph

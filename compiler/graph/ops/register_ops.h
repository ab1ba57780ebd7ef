// The op library, one registration function per family (TensorFlow's array_ops, math_ops, ...);
// OpRegistry::Global() calls every one of them once.
#pragma once

namespace xlens::graph {

class OpRegistry;

void RegisterArrayOps(OpRegistry& registry);
void RegisterMathOps(OpRegistry& registry);
// Segment reductions (segment_ops.cc), registered by RegisterMathOps.
void RegisterSegmentOps(OpRegistry& registry);
void RegisterNnOps(OpRegistry& registry);
void RegisterStateOps(OpRegistry& registry);
void RegisterRandomOps(OpRegistry& registry);
void RegisterStringOps(OpRegistry& registry);
void RegisterControlFlowOps(OpRegistry& registry);
void RegisterFunctionOps(OpRegistry& registry);
void RegisterTrainingOps(OpRegistry& registry);
// _XlaCompile, _XlaRun, _XlaMerge: what build_xla_ops launches a cluster with.
void RegisterXlaOps(OpRegistry& registry);
// Gradients are attached after every op is registered.
void RegisterGradients(OpRegistry& registry);

}  // namespace xlens::graph

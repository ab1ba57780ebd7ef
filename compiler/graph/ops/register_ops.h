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
// DepthwiseConv2dNative and its backprops (depthwise_conv_ops.cc); Conv3D and its backprops
// (conv3d_ops.cc); the 3-D poolings and their gradients (pooling3d_ops.cc).
void RegisterDepthwiseConvOps(OpRegistry& registry);
void RegisterConv3DOps(OpRegistry& registry);
void RegisterPooling3DOps(OpRegistry& registry);
void RegisterStateOps(OpRegistry& registry);
void RegisterRandomOps(OpRegistry& registry);
void RegisterStringOps(OpRegistry& registry);
void RegisterControlFlowOps(OpRegistry& registry);
void RegisterFunctionOps(OpRegistry& registry);
void RegisterTrainingOps(OpRegistry& registry);
// Erfc, Erfinv, Ndtri, Lgamma, Digamma, Zeta, Polygamma (special_math_ops.cc).
void RegisterSpecialMathOps(OpRegistry& registry);
// ConcatOffset and VariableShape (shape_helper_ops.cc).
void RegisterShapeHelperOps(OpRegistry& registry);
// Einsum (einsum_op.cc).
void RegisterEinsumOps(OpRegistry& registry);
// ResizeBilinear, ResizeNearestNeighbor and their gradients (image_ops.cc).
void RegisterImageOps(OpRegistry& registry);
// Grappler's fused ops: _FusedConv2D, _FusedMatMul, _FusedBatchNormEx (fused_ops.cc).
void RegisterFusedOps(OpRegistry& registry);
// FusedBatchNorm, V2, V3, their gradients and _FusedBatchNormEx (batch_norm_ops.cc), registered
// by RegisterFusedOps.
void RegisterBatchNormOps(OpRegistry& registry);
// _XlaCompile, _XlaRun, _XlaMerge: what build_xla_ops launches a cluster with.
void RegisterXlaOps(OpRegistry& registry);
// TensorList (list_ops.cc) and the v1 TensorArray (tensor_array_ops.cc); after the array and
// math ops, whose ZerosLike and AddN learn lists.
void RegisterListOps(OpRegistry& registry);
void RegisterTensorArrayOps(OpRegistry& registry);
// Gradients are attached after every op is registered.
void RegisterGradients(OpRegistry& registry);

}  // namespace xlens::graph

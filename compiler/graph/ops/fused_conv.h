// A forward 2-D convolution with its epilogue (a bias, a side input added, an activation) done
// by the one oneDNN call that computes it, as TensorFlow's oneDNN kernel runs _FusedConv2D:
// fused_ops.cc calls it, nn_ops.cc (which reads Conv2D's attrs and geometry) defines it.
#pragma once

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/ops/onednn_kernels.h"
#include "compiler/support/status.h"

namespace xlens::graph {

// Convolves inputs 0 (NHWC) and 1 (HWIO) of ctx's node with Conv2D's attrs, adds input `bias`
// ([out_depth]; -1: none) and, with post.sum, input `side` (the output's shape; its buffer is
// the output where nothing else holds it), then post's activation, into output 0. False, with
// nothing done, where oneDNN does not apply (another type or layout, a bias of another shape).
StatusOr<bool> FusedConv2DOneDnn(OpKernelContext& ctx, int bias, int side,
                                 const onednn::PostOps& post);

}  // namespace xlens::graph

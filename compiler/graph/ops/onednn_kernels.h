// oneDNN for the op-by-op kernels: f32 2-D convolutions (forward with a fused bias and ReLU,
// backward data, backward weights) and matrix products, as TensorFlow's CPU kernels run them.
// oneDNN picks its kernels for the CPU it runs on (AVX-512, AVX2, ...), which the rest of the
// front end, compiled for generic x86-64, cannot. Primitives are made once per geometry and kept
// for the process (a model's few dozen shapes). A call is split into parts that the intra-op
// thread pool runs (blocks of images, of output rows for one image, of rows or columns of a
// product), each part a oneDNN call on one thread: Debian builds oneDNN on OpenMP, whose
// spinning team would fight the pool and other processes for the cores, where the pool's
// threads take parts as they come free.
//
// The graph front end sits below the runtime (DESIGN.md's dependency rules), so it does not call
// the compiler's oneDNN thunks (compiler/runtime/onednn_thunks.h); this file is the front end's
// own, graph-private, and links oneDNN the same way. Without oneDNN in the build Available() is
// false and the kernels keep their Eigen paths.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {
class ThreadPool;
}

namespace xlens::graph::onednn {

// Whether this build runs oneDNN calls.
bool Available();

// One NHWC convolution with an HWIO filter, TensorFlow's geometry (dilations >= 1, the padding
// already resolved to rows/columns before and after). With `groups` > 1 the convolution is
// grouped as TensorFlow's Conv2D is when the input depth is a multiple of the filter's: the
// filter is [k_rows, k_cols, in_depth / groups, out_depth], group g reading input channels
// [g * in_depth / groups, ...) and writing output channels [g * out_depth / groups, ...).
struct ConvGeometry {
  int64_t batch = 0, in_rows = 0, in_cols = 0, in_depth = 0;  // in_depth: the input's, all groups
  int64_t out_rows = 0, out_cols = 0, out_depth = 0;
  int64_t k_rows = 0, k_cols = 0;
  int64_t stride_rows = 1, stride_cols = 1, dil_rows = 1, dil_cols = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t groups = 1;
};

// A filter reordered into the layout a forward or backward-data primitive reads, kept by a
// kernel across runs when its filter is a constant (a frozen graph's weights): TensorFlow's
// oneDNN kernels cache a constant filter the same way.
struct PackedFilter {
  // One copy per layout the parts of the calls read, by an opaque key of the layout.
  std::vector<std::pair<std::shared_ptr<const void>, std::shared_ptr<void>>> layouts;
};

// The activations a convolution's epilogue may end with (oneDNN's eltwise post-ops).
enum class Eltwise { kNone, kRelu, kRelu6, kElu, kLeakyRelu, kTanh, kSigmoid };

// What a convolution does to its output in the same pass, after the bias (oneDNN post-ops, as
// TensorFlow's _FusedConv2D runs them): add what y holds on entry (a residual connection's side
// input), then an activation.
struct PostOps {
  bool sum = false;
  Eltwise eltwise = Eltwise::kNone;
  float alpha = 0;  // LeakyRelu's slope
};

// y = act(conv(x, w) + bias? + y?): x [batch, in_rows, in_cols, in_depth], w HWIO, bias
// [out_depth] or null, y [batch, out_rows, out_cols, out_depth] (read first with post.sum).
// `packed`: null when the filter may change between calls; else the filter is packed into it
// on the first call and read from it afterwards.
Status Conv2DForward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                     const PostOps& post, float* y, ThreadPool* pool, PackedFilter* packed);
// The same with only a ReLU (or nothing) after the bias.
Status Conv2DForward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                     bool relu, float* y, ThreadPool* pool, PackedFilter* packed);

// dx = the gradient of the convolution with respect to its input, from dy and w (HWIO).
Status Conv2DBackwardData(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                          ThreadPool* pool, PackedFilter* packed);

// dw (HWIO) = the gradient of the convolution with respect to its filter, from x and dy.
Status Conv2DBackwardWeights(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                             ThreadPool* pool);

// out[m, n] = op(a) * op(b), row-major, a stored [m, k] ([k, m] when ta), b [k, n] ([n, k] when
// tb); `bias` [n] added to every row when non-null.
Status MatMul(const float* a, bool ta, const float* b, bool tb, int64_t m, int64_t k, int64_t n,
              const float* bias, float* out, ThreadPool* pool);

}  // namespace xlens::graph::onednn

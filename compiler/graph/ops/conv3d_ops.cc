// TensorFlow's 3-D convolution (Conv3D) and its two backprops (Conv3DBackpropInputV2,
// Conv3DBackpropFilterV2). Each runs as matrix products over patches (im2col): the output
// positions of all images are cut into blocks, each block's patches gathered into a matrix and
// multiplied by the filter as one Eigen product, the blocks spread over the session's threads.
// NCDHW is transposed to NDHWC around the kernel; dilations run (TensorFlow's oneDNN build runs
// both); input depth must equal the filter's, as TensorFlow's CPU kernel requires.
#include <mutex>
#include <type_traits>

#include <Eigen/Dense>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/conv_io.h"
#include "compiler/graph/ops/onednn_kernels.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

using conv::Pass;
using conv::WindowGeometry;

template <typename C>
using Matrix = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Output positions per block: enough rows for an efficient product, a bounded patch matrix.
int64_t BlockRows(int64_t patch) {
  return std::clamp<int64_t>((int64_t{1} << 18) / std::max<int64_t>(patch, 1), 16, 1024);
}

// The input position of window element `k` of output position `o` along dimension d, or -1
// when it falls in the padding.
inline int64_t InputIndex(const WindowGeometry& g, int d, int64_t o, int64_t k) {
  const int64_t i = o * g.stride[d] + k * g.dilation[d] - g.pad_before[d];
  return i < 0 || i >= g.in[d] ? -1 : i;
}

// Rows [begin, end) of the patch matrix over all images (row = n * positions + position,
// column = (kd, kh, kw, c)); zero where the window is in the padding.
template <typename C>
void Im2Col(const WindowGeometry& g, const C* x, int64_t begin, int64_t end, C* cols) {
  const int64_t P = g.out_positions(), depth = g.in_depth;
  const int64_t patch = g.window_size() * depth;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / P, p = r % P;
    const int64_t od = p / (g.out[1] * g.out[2]), oh = p / g.out[2] % g.out[1], ow = p % g.out[2];
    C* row = cols + (r - begin) * patch;
    for (int64_t kd = 0; kd < g.k[0]; ++kd) {
      const int64_t id = InputIndex(g, 0, od, kd);
      for (int64_t kh = 0; kh < g.k[1]; ++kh) {
        const int64_t ih = InputIndex(g, 1, oh, kh);
        for (int64_t kw = 0; kw < g.k[2]; ++kw, row += depth) {
          const int64_t iw = InputIndex(g, 2, ow, kw);
          if (id < 0 || ih < 0 || iw < 0) {
            std::fill(row, row + depth, C(0));
          } else {
            std::copy_n(x + (((n * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw) * depth, depth,
                        row);
          }
        }
      }
    }
  }
}

// Adds rows [begin, end) of a patch matrix back onto the input positions they came from.
template <typename C>
void Col2ImAdd(const WindowGeometry& g, const C* cols, int64_t begin, int64_t end, C* dx) {
  const int64_t P = g.out_positions(), depth = g.in_depth;
  const int64_t patch = g.window_size() * depth;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / P, p = r % P;
    const int64_t od = p / (g.out[1] * g.out[2]), oh = p / g.out[2] % g.out[1], ow = p % g.out[2];
    const C* row = cols + (r - begin) * patch;
    for (int64_t kd = 0; kd < g.k[0]; ++kd) {
      const int64_t id = InputIndex(g, 0, od, kd);
      for (int64_t kh = 0; kh < g.k[1]; ++kh) {
        const int64_t ih = InputIndex(g, 1, oh, kh);
        for (int64_t kw = 0; kw < g.k[2]; ++kw, row += depth) {
          const int64_t iw = InputIndex(g, 2, ow, kw);
          if (id < 0 || ih < 0 || iw < 0) continue;
          C* dst = dx + (((n * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw) * depth;
          for (int64_t c = 0; c < depth; ++c) dst[c] += row[c];
        }
      }
    }
  }
}

// out [rows, n] (+)= op(a) * op(b) for one block: oneDNN's product for float where the build has
// it (the kernels for the CPU's widest vectors, single-threaded: the blocks are the
// parallelism), else Eigen's. `accumulate` adds to out instead of overwriting it.
template <typename C>
void BlockProduct(const C* a, bool ta, const C* b, bool tb, int64_t m, int64_t k, int64_t n,
                  C* out, bool accumulate, std::vector<C>& scratch) {
  if constexpr (std::is_same_v<C, float>) {
    if (onednn::Available()) {
      C* dst = out;
      if (accumulate) {
        scratch.resize(m * n);
        dst = scratch.data();
      }
      if (onednn::MatMul(a, ta, b, tb, m, k, n, nullptr, dst, nullptr).ok()) {
        if (accumulate)
          for (int64_t i = 0; i < m * n; ++i) out[i] += dst[i];
        return;
      }
    }
  }
  using Map = Eigen::Map<const Matrix<C>>;
  Map am(a, ta ? k : m, ta ? m : k), bm(b, tb ? n : k, tb ? k : n);
  Eigen::Map<Matrix<C>> om(out, m, n);
  if (ta && !tb) {
    if (accumulate) om.noalias() += am.transpose() * bm;
    else om.noalias() = am.transpose() * bm;
  } else if (!ta && tb) {
    if (accumulate) om.noalias() += am * bm.transpose();
    else om.noalias() = am * bm.transpose();
  } else {
    if (accumulate) om.noalias() += am * bm;
    else om.noalias() = am * bm;
  }
}

// Runs one pass on channels-last data: x [N, D, H, W, Cin], f [KD, KH, KW, Cin, Cout],
// dy [N, OD, OH, OW, Cout]; writes y, dx or df (fully).
template <Pass kPass, typename C>
void Conv3DPass(const WindowGeometry& g, const C* x, const C* f, const C* dy, C* result,
                ThreadPool* pool) {
  const int64_t patch = g.window_size() * g.in_depth, od = g.out_depth;
  const int64_t rows = g.batch * g.out_positions();
  const int64_t block = BlockRows(patch);
  const int64_t blocks = (rows + block - 1) / block;
  std::mutex mu;
  if constexpr (kPass == Pass::kBackpropFilter) std::fill(result, result + patch * od, C(0));
  if constexpr (kPass == Pass::kBackpropInput) {
    std::fill(result, result + g.batch * g.in_positions() * g.in_depth, C(0));
  }
  conv::ParallelTasks(pool, blocks, block * patch * od, [&](int64_t b0, int64_t b1) {
    std::vector<C> cols(block * patch), scratch;
    std::vector<C> local;
    if constexpr (kPass == Pass::kBackpropFilter) local.assign(patch * od, C(0));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * block, end = std::min(rows, begin + block), n = end - begin;
      if constexpr (kPass == Pass::kForward) {
        Im2Col(g, x, begin, end, cols.data());
        BlockProduct(cols.data(), false, f, false, n, patch, od, result + begin * od, false,
                     scratch);
      } else if constexpr (kPass == Pass::kBackpropFilter) {
        Im2Col(g, x, begin, end, cols.data());
        BlockProduct(cols.data(), true, dy + begin * od, false, patch, n, od, local.data(), true,
                     scratch);
      } else {
        BlockProduct(dy + begin * od, false, f, true, n, od, patch, cols.data(), false, scratch);
        // Blocks overlap on the input they scatter to: one at a time.
        std::lock_guard<std::mutex> lock(mu);
        Col2ImAdd(g, cols.data(), begin, end, result);
      }
    }
    if constexpr (kPass == Pass::kBackpropFilter) {
      std::lock_guard<std::mutex> lock(mu);
      for (int64_t i = 0; i < patch * od; ++i) result[i] += local[i];
    }
  });
}

template <Pass kPass>
Status Conv3DKernel(OpKernelContext& ctx) {
  ASSIGN_OR_RETURN(conv::ConvOperands ops,
                   conv::GetConvOperands(ctx, kPass, /*spatial=*/3, /*depthwise=*/false));
  const WindowGeometry& g = ops.g;
  // The patch matrix holds window * depth elements per output position.
  const double patch = double(g.k[0]) * double(g.k[1]) * double(g.k[2]) * double(g.in_depth);
  if (patch > double(int64_t{1} << 26)) {
    return ctx.Error("a window of " + DimsToString({g.k[0], g.k[1], g.k[2]}) + " over " +
                     std::to_string(g.in_depth) +
                     " channels is more than this kernel takes (2^26 elements per patch)");
  }
  return conv::RunConvPass<kPass>(ctx, ops, [&](const auto* x, const auto* f, const auto* dy,
                                                  auto* result) {
    Conv3DPass<kPass>(g, x, f, dy, result, ctx.pool());
  });
}

// The attrs of the three Conv3D ops, in TensorFlow's order.
OpRegistrationBuilder& WithConv3DAttrs(OpRegistrationBuilder& op) {
  return op
      .Attr("T: {half, bfloat16, float, double}")
      .Attr("strides: list(int) >= 5")
      .Attr("padding: {'SAME', 'VALID'}")
      .Attr("data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'")
      .Attr("dilations: list(int) = [1, 1, 1, 1, 1]");
}

}  // namespace

void RegisterConv3DOps(OpRegistry& r) {
  WithConv3DAttrs(REGISTER_OP(r, "Conv3D")
      .Input("input: T")
      .Input("filter: T")
      .Output("output: T"))
      .SetShapeFn([](InferenceContext& c) { return conv::ConvShape(c, 3, /*depthwise=*/false); })
      .SetKernel(Conv3DKernel<Pass::kForward>);
  WithConv3DAttrs(REGISTER_OP(r, "Conv3DBackpropInputV2")
      .Input("input_sizes: Tshape")
      .Input("filter: T")
      .Input("out_backprop: T")
      .Output("output: T"))
      .Attr("Tshape: {int32, int64} = DT_INT32")
      .SetShapeFn([](InferenceContext& c) { return conv::ShapeFromSizesInput(c, 0); })
      .SetKernel(Conv3DKernel<Pass::kBackpropInput>)
      .CompileTimeConstInput("input_sizes");
  WithConv3DAttrs(REGISTER_OP(r, "Conv3DBackpropFilterV2")
      .Input("input: T")
      .Input("filter_sizes: int32")
      .Input("out_backprop: T")
      .Output("output: T"))
      .SetShapeFn([](InferenceContext& c) { return conv::ShapeFromSizesInput(c, 1); })
      .SetKernel(Conv3DKernel<Pass::kBackpropFilter>)
      .CompileTimeConstInput("filter_sizes");
}

}  // namespace xlens::graph

// TensorFlow's depthwise convolution (DepthwiseConv2dNative) and its two backprops. Each input
// channel c is convolved with its own `multiplier` filters [kh, kw, c, q], giving output channel
// c * multiplier + q. The kernels are memory bound: they walk the tensors channels last once,
// the innermost loop over contiguous channels (vectorized), output rows split over the session's
// threads. NCHW runs too (transposed around the kernel, as TensorFlow's oneDNN build accepts it),
// and so do dilations and EXPLICIT padding.
#include <mutex>
#include <vector>
#include <type_traits>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/conv_io.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

using conv::Pass;
using conv::WindowGeometry;

// The loops below are memory bound and vectorize over the contiguous channels: their float
// instances are compiled for AVX-512 and AVX2 besides the generic x86-64 the rest of the front
// end targets, the best one picked when the process starts (TensorFlow's kernels use the widest
// vectors the CPU has too).
#define XLENS_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define XLENS_INLINE __attribute__((always_inline)) inline

// The window taps [k0, k1) of output position `o` that fall inside the input of `in` elements
// (o * stride + k * dilation - pad in [0, in)): the loops visit only those, however large a
// filter a graph names.
XLENS_INLINE void InputTaps(int64_t o, int64_t stride, int64_t dilation, int64_t pad, int64_t in,
                            int64_t k, int64_t* k0, int64_t* k1) {
  const int64_t start = o * stride - pad;  // input position of tap 0
  *k0 = start >= 0 ? 0 : (-start + dilation - 1) / dilation;
  *k1 = start >= in ? 0 : std::min(k, (in - 1 - start) / dilation + 1);
  if (*k1 < *k0) *k1 = *k0;
}

// For each input position i along one dimension, the (tap, output position) pairs whose window
// element lands on it (o * stride + k * dilation - pad == i), made once per call: the gather of
// the input backprop then does no division per tap.
struct Tap {
  int64_t k, o;
};
struct TapTable {
  std::vector<int64_t> start;  // taps of position i: taps[start[i], start[i + 1])
  std::vector<Tap> taps;
};

TapTable MakeTapTable(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dilation,
                      int64_t pad) {
  std::vector<std::vector<Tap>> by_position(in);
  for (int64_t o = 0; o < out; ++o) {
    int64_t k0, k1;
    InputTaps(o, stride, dilation, pad, in, k, &k0, &k1);
    for (int64_t t = k0; t < k1; ++t) by_position[o * stride + t * dilation - pad].push_back({t, o});
  }
  TapTable table;
  table.start.push_back(0);
  for (const auto& p : by_position) {
    table.taps.insert(table.taps.end(), p.begin(), p.end());
    table.start.push_back(static_cast<int64_t>(table.taps.size()));
  }
  return table;
}

// out[n, oy, ox, c*m + q] = sum over the window of x[n, iy, ix, c] * f[ky, kx, c, q], for output
// rows (n, oy) [begin, end).
template <typename C>
XLENS_INLINE void ForwardRows(const WindowGeometry& g, const C* __restrict x,
                              const C* __restrict f, C* __restrict out, int64_t begin,
                              int64_t end) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KH = g.k[1], KW = g.k[2], depth = g.in_depth, od = g.out_depth;
  const int64_t m = depth == 0 ? 0 : od / depth;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / OH, oy = r % OH;
    int64_t ky0, ky1;
    InputTaps(oy, g.stride[1], g.dilation[1], g.pad_before[1], H, KH, &ky0, &ky1);
    for (int64_t ox = 0; ox < OW; ++ox) {
      C* __restrict o = out + (r * OW + ox) * od;
      int64_t kx0, kx1;
      InputTaps(ox, g.stride[2], g.dilation[2], g.pad_before[2], W, KW, &kx0, &kx1);
      if (m == 1) {
        // Blocks of channels summed over the taps in registers, stored once.
        constexpr int64_t kBlock = 64;
        int64_t c0 = 0;
        for (; c0 + kBlock <= depth; c0 += kBlock) {
          C acc[kBlock] = {};
          for (int64_t ky = ky0; ky < ky1; ++ky) {
            const int64_t iy = oy * g.stride[1] + ky * g.dilation[1] - g.pad_before[1];
            for (int64_t kx = kx0; kx < kx1; ++kx) {
              const int64_t ix = ox * g.stride[2] + kx * g.dilation[2] - g.pad_before[2];
              const C* __restrict xi = x + ((n * H + iy) * W + ix) * depth + c0;
              const C* __restrict fk = f + (ky * KW + kx) * od + c0;
              for (int64_t c = 0; c < kBlock; ++c) acc[c] += xi[c] * fk[c];
            }
          }
          for (int64_t c = 0; c < kBlock; ++c) o[c0 + c] = acc[c];
        }
        if (c0 == depth) continue;
        for (int64_t c = c0; c < depth; ++c) o[c] = C(0);
        for (int64_t ky = ky0; ky < ky1; ++ky) {
          const int64_t iy = oy * g.stride[1] + ky * g.dilation[1] - g.pad_before[1];
          for (int64_t kx = kx0; kx < kx1; ++kx) {
            const int64_t ix = ox * g.stride[2] + kx * g.dilation[2] - g.pad_before[2];
            const C* __restrict xi = x + ((n * H + iy) * W + ix) * depth;
            const C* __restrict fk = f + (ky * KW + kx) * od;
            for (int64_t c = c0; c < depth; ++c) o[c] += xi[c] * fk[c];
          }
        }
        continue;
      }
      for (int64_t k = 0; k < od; ++k) o[k] = C(0);
      for (int64_t ky = ky0; ky < ky1; ++ky) {
        const int64_t iy = oy * g.stride[1] + ky * g.dilation[1] - g.pad_before[1];
        for (int64_t kx = kx0; kx < kx1; ++kx) {
          const int64_t ix = ox * g.stride[2] + kx * g.dilation[2] - g.pad_before[2];
          const C* __restrict xi = x + ((n * H + iy) * W + ix) * depth;
          const C* __restrict fk = f + (ky * KW + kx) * od;
          if (m == 1) {
            for (int64_t c = 0; c < depth; ++c) o[c] += xi[c] * fk[c];
          } else {
            for (int64_t c = 0; c < depth; ++c)
              for (int64_t q = 0; q < m; ++q) o[c * m + q] += xi[c] * fk[c * m + q];
          }
        }
      }
    }
  }
}

// dx[n, iy, ix, c] = sum over the outputs whose window holds (iy, ix) of
// sum_q dy[n, oy, ox, c*m + q] * f[ky, kx, c, q], for input rows (n, iy) [begin, end): a gather,
// so rows are independent.
template <typename C>
XLENS_INLINE void BackpropInputRows(const WindowGeometry& g, const TapTable& rows_taps,
                                    const TapTable& cols_taps, const C* __restrict f,
                                    const C* __restrict dy, C* __restrict dx, int64_t begin,
                                    int64_t end) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KW = g.k[2], depth = g.in_depth, od = g.out_depth;
  const int64_t m = depth == 0 ? 0 : od / depth;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / H, iy = r % H;
    const int64_t ty0 = rows_taps.start[iy], ty1 = rows_taps.start[iy + 1];
    for (int64_t ix = 0; ix < W; ++ix) {
      C* __restrict o = dx + (r * W + ix) * depth;
      const int64_t tx0 = cols_taps.start[ix], tx1 = cols_taps.start[ix + 1];
      int64_t c0 = 0;
      if (m == 1) {
        // Blocks of channels summed over the taps in registers, stored once.
        constexpr int64_t kBlock = 64;
        for (; c0 + kBlock <= depth; c0 += kBlock) {
          C acc[kBlock] = {};
          for (int64_t ty = ty0; ty < ty1; ++ty) {
            const Tap ry = rows_taps.taps[ty];
            for (int64_t tx = tx0; tx < tx1; ++tx) {
              const Tap rx = cols_taps.taps[tx];
              const C* __restrict gi = dy + ((n * OH + ry.o) * OW + rx.o) * od + c0;
              const C* __restrict fk = f + (ry.k * KW + rx.k) * od + c0;
              for (int64_t c = 0; c < kBlock; ++c) acc[c] += gi[c] * fk[c];
            }
          }
          for (int64_t c = 0; c < kBlock; ++c) o[c0 + c] = acc[c];
        }
        if (c0 == depth) continue;
      }
      for (int64_t c = c0; c < depth; ++c) o[c] = C(0);
      for (int64_t ty = ty0; ty < ty1; ++ty) {
        const Tap ry = rows_taps.taps[ty];
        for (int64_t tx = cols_taps.start[ix]; tx < cols_taps.start[ix + 1]; ++tx) {
          const Tap rx = cols_taps.taps[tx];
          const C* __restrict gi = dy + ((n * OH + ry.o) * OW + rx.o) * od;
          const C* __restrict fk = f + (ry.k * KW + rx.k) * od;
          if (m == 1) {
            for (int64_t c = c0; c < depth; ++c) o[c] += gi[c] * fk[c];
          } else {
            for (int64_t c = 0; c < depth; ++c) {
              C sum = C(0);
              for (int64_t q = 0; q < m; ++q) sum += gi[c * m + q] * fk[c * m + q];
              o[c] += sum;
            }
          }
        }
      }
    }
  }
}

// df[ky, kx, c, q] += x[n, iy, ix, c] * dy[n, oy, ox, c*m + q] over output rows [begin, end).
template <typename C>
XLENS_INLINE void BackpropFilterRows(const WindowGeometry& g, const C* __restrict x,
                                     const C* __restrict dy, C* __restrict df, int64_t begin,
                                     int64_t end) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KH = g.k[1], KW = g.k[2], depth = g.in_depth, od = g.out_depth;
  const int64_t m = depth == 0 ? 0 : od / depth;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / OH, oy = r % OH;
    for (int64_t ox = 0; ox < OW; ++ox) {
      const C* __restrict gi = dy + (r * OW + ox) * od;
      int64_t ky0, ky1, kx0, kx1;
      InputTaps(oy, g.stride[1], g.dilation[1], g.pad_before[1], H, KH, &ky0, &ky1);
      InputTaps(ox, g.stride[2], g.dilation[2], g.pad_before[2], W, KW, &kx0, &kx1);
      for (int64_t ky = ky0; ky < ky1; ++ky) {
        const int64_t iy = oy * g.stride[1] + ky * g.dilation[1] - g.pad_before[1];
        for (int64_t kx = kx0; kx < kx1; ++kx) {
          const int64_t ix = ox * g.stride[2] + kx * g.dilation[2] - g.pad_before[2];
          const C* __restrict xi = x + ((n * H + iy) * W + ix) * depth;
          C* __restrict fk = df + (ky * KW + kx) * od;
          if (m == 1) {
            for (int64_t c = 0; c < depth; ++c) fk[c] += xi[c] * gi[c];
          } else {
            for (int64_t c = 0; c < depth; ++c)
              for (int64_t q = 0; q < m; ++q) fk[c * m + q] += xi[c] * gi[c * m + q];
          }
        }
      }
    }
  }
}

// The float instances, one per vector width.
XLENS_VECTOR_CLONES void ForwardRowsF32(const WindowGeometry& g, const float* x, const float* f,
                                        float* out, int64_t begin, int64_t end) {
  ForwardRows<float>(g, x, f, out, begin, end);
}
XLENS_VECTOR_CLONES void BackpropInputRowsF32(const WindowGeometry& g, const TapTable& rows,
                                              const TapTable& cols, const float* f,
                                              const float* dy, float* dx, int64_t begin,
                                              int64_t end) {
  BackpropInputRows<float>(g, rows, cols, f, dy, dx, begin, end);
}
XLENS_VECTOR_CLONES void BackpropFilterRowsF32(const WindowGeometry& g, const float* x,
                                               const float* dy, float* df, int64_t begin,
                                               int64_t end) {
  BackpropFilterRows<float>(g, x, dy, df, begin, end);
}

template <typename C>
void DepthwiseForward(const WindowGeometry& g, const C* x, const C* f, C* out, ThreadPool* pool) {
  conv::ParallelTasks(pool, g.batch * g.out[1], g.out[2] * g.window_size() * g.out_depth,
                      [&](int64_t begin, int64_t end) {
                        if constexpr (std::is_same_v<C, float>) {
                          ForwardRowsF32(g, x, f, out, begin, end);
                        } else {
                          ForwardRows<C>(g, x, f, out, begin, end);
                        }
                      });
}

template <typename C>
void DepthwiseBackpropInput(const WindowGeometry& g, const C* f, const C* dy, C* dx,
                            ThreadPool* pool) {
  const TapTable rows =
      MakeTapTable(g.in[1], g.out[1], g.k[1], g.stride[1], g.dilation[1], g.pad_before[1]);
  const TapTable cols =
      MakeTapTable(g.in[2], g.out[2], g.k[2], g.stride[2], g.dilation[2], g.pad_before[2]);
  conv::ParallelTasks(pool, g.batch * g.in[1], g.in[2] * g.window_size() * g.out_depth,
                      [&](int64_t begin, int64_t end) {
                        if constexpr (std::is_same_v<C, float>) {
                          BackpropInputRowsF32(g, rows, cols, f, dy, dx, begin, end);
                        } else {
                          BackpropInputRows<C>(g, rows, cols, f, dy, dx, begin, end);
                        }
                      });
}

// Each chunk of output rows sums into its own filter, the chunks' filters added at the end.
template <typename C>
void DepthwiseBackpropFilter(const WindowGeometry& g, const C* x, const C* dy, C* df,
                             ThreadPool* pool) {
  const int64_t filter_size = g.window_size() * g.out_depth;
  std::fill(df, df + filter_size, C(0));
  std::mutex mu;
  // A filter larger than the input (a graph may name any filter_sizes) is summed in place by one
  // thread rather than copied per chunk.
  if (filter_size > g.batch * g.in_positions() * g.in_depth + (int64_t{1} << 16)) pool = nullptr;
  if (pool == nullptr) {
    if constexpr (std::is_same_v<C, float>) {
      BackpropFilterRowsF32(g, x, dy, df, 0, g.batch * g.out[1]);
    } else {
      BackpropFilterRows<C>(g, x, dy, df, 0, g.batch * g.out[1]);
    }
    return;
  }
  conv::ParallelTasks(pool, g.batch * g.out[1], g.out[2] * filter_size,
                      [&](int64_t begin, int64_t end) {
                        std::vector<C> local(filter_size, C(0));
                        if constexpr (std::is_same_v<C, float>) {
                          BackpropFilterRowsF32(g, x, dy, local.data(), begin, end);
                        } else {
                          BackpropFilterRows<C>(g, x, dy, local.data(), begin, end);
                        }
                        std::lock_guard<std::mutex> lock(mu);
                        for (int64_t i = 0; i < filter_size; ++i) df[i] += local[i];
                      });
}

template <Pass kPass>
Status DepthwiseKernel(OpKernelContext& ctx) {
  ASSIGN_OR_RETURN(conv::ConvOperands ops,
                   conv::GetConvOperands(ctx, kPass, /*spatial=*/2, /*depthwise=*/true));
  const WindowGeometry& g = ops.g;
  return conv::RunConvPass<kPass>(ctx, ops, [&](const auto* x, const auto* f, const auto* dy,
                                                  auto* result) {
    if constexpr (kPass == Pass::kForward) {
      DepthwiseForward(g, x, f, result, ctx.pool());
    } else if constexpr (kPass == Pass::kBackpropInput) {
      DepthwiseBackpropInput(g, f, dy, result, ctx.pool());
    } else {
      DepthwiseBackpropFilter(g, x, dy, result, ctx.pool());
    }
  });
}

// The attrs of the three depthwise ops, in TensorFlow's order.
OpRegistrationBuilder& WithDepthwiseAttrs(OpRegistrationBuilder& op) {
  return op
      .Attr("T: {half, bfloat16, float, double}")
      .Attr("strides: list(int)")
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
      .Attr("explicit_paddings: list(int) = []")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .Attr("dilations: list(int) = [1, 1, 1, 1]");
}

}  // namespace

void RegisterDepthwiseConvOps(OpRegistry& r) {
  WithDepthwiseAttrs(REGISTER_OP(r, "DepthwiseConv2dNative")
      .Input("input: T")
      .Input("filter: T")
      .Output("output: T"))
      .SetShapeFn([](InferenceContext& c) { return conv::ConvShape(c, 2, /*depthwise=*/true); })
      .SetKernel(DepthwiseKernel<Pass::kForward>);
  WithDepthwiseAttrs(REGISTER_OP(r, "DepthwiseConv2dNativeBackpropInput")
      .Input("input_sizes: int32")
      .Input("filter: T")
      .Input("out_backprop: T")
      .Output("output: T"))
      .SetShapeFn([](InferenceContext& c) { return conv::ShapeFromSizesInput(c, 0); })
      .SetKernel(DepthwiseKernel<Pass::kBackpropInput>)
      .CompileTimeConstInput("input_sizes");
  WithDepthwiseAttrs(REGISTER_OP(r, "DepthwiseConv2dNativeBackpropFilter")
      .Input("input: T")
      .Input("filter_sizes: int32")
      .Input("out_backprop: T")
      .Output("output: T"))
      .SetShapeFn([](InferenceContext& c) { return conv::ShapeFromSizesInput(c, 1); })
      .SetKernel(DepthwiseKernel<Pass::kBackpropFilter>)
      .CompileTimeConstInput("filter_sizes");
}

}  // namespace xlens::graph

// TensorFlow's 3-D pooling: MaxPool3D, AvgPool3D and their gradients (MaxPool3DGrad,
// AvgPool3DGrad, MaxPool3DGradGrad), computed as TensorFlow's CPU kernels define them. Windows
// are clipped to the input: padding is never a candidate maximum and never counted in an
// average. MaxPool3D skips NaNs as Eigen's max does; MaxPool3DGrad gives the gradient to every
// element equal to its window's maximum (TensorFlow's equality mask), and MaxPool3DGradGrad
// takes the largest gradient among them. Channels last, the innermost loop over contiguous
// channels; NCDHW is transposed around the kernel.
#include <limits>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/conv_io.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

using conv::WindowAttrs;
using conv::WindowGeometry;

// One window of output position (od, oh, ow), clipped to the input: [lo, hi) per dimension.
struct Clip {
  int64_t lo[3], hi[3];
  int64_t count() const { return (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]); }
};

inline Clip WindowOf(const WindowGeometry& g, const int64_t o[3]) {
  Clip c;
  for (int d = 0; d < 3; ++d) {
    const int64_t start = o[d] * g.stride[d] - g.pad_before[d];
    c.lo[d] = std::max<int64_t>(start, 0);
    c.hi[d] = std::min(start + g.k[d], g.in[d]);
  }
  return c;
}

// Calls fn(n, o[3], out_offset, clip) for every output position of images [n0, n1) or of output
// rows (n, od, oh) [r0, r1) when `by_rows`.
template <typename Fn>
void ForEachWindow(const WindowGeometry& g, int64_t r0, int64_t r1, bool by_rows, Fn&& fn) {
  const int64_t rows_per_image = g.out[0] * g.out[1];
  const int64_t begin = by_rows ? r0 : r0 * rows_per_image;
  const int64_t end = by_rows ? r1 : r1 * rows_per_image;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / rows_per_image;
    int64_t o[3] = {r / g.out[1] % g.out[0], r % g.out[1], 0};
    for (o[2] = 0; o[2] < g.out[2]; ++o[2]) fn(n, o, (r * g.out[2] + o[2]) * g.in_depth,
                                               WindowOf(g, o));
  }
}

// The offset of input position (n, d, h, w) in a channels-last tensor.
inline int64_t InputOffset(const WindowGeometry& g, int64_t n, int64_t d, int64_t h, int64_t w) {
  return (((n * g.in[0] + d) * g.in[1] + h) * g.in[2] + w) * g.in_depth;
}

template <typename Fn>
void ForEachInWindow(const WindowGeometry& g, int64_t n, const Clip& c, Fn&& fn) {
  for (int64_t d = c.lo[0]; d < c.hi[0]; ++d)
    for (int64_t h = c.lo[1]; h < c.hi[1]; ++h)
      for (int64_t w = c.lo[2]; w < c.hi[2]; ++w) fn(InputOffset(g, n, d, h, w));
}

template <typename C>
C Lowest() {
  return std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                              : std::numeric_limits<C>::lowest();
}

enum class Kind { kMax, kAvg, kMaxGrad, kAvgGrad, kMaxGradGrad };

template <Kind kKind, typename C>
void Pool3D(const WindowGeometry& g, const C* x, const C* y, const C* grad, C* out,
            ThreadPool* pool) {
  const int64_t depth = g.in_depth;
  const int64_t rows = g.batch * g.out[0] * g.out[1];
  const int64_t window_cost = static_cast<int64_t>(
      std::min(1e15, double(g.out[2]) * double(g.k[0]) * double(g.k[1]) * double(g.k[2]) * double(depth)));
  if constexpr (kKind == Kind::kMax || kKind == Kind::kAvg || kKind == Kind::kMaxGradGrad) {
    // Each output row is written by one task.
    conv::ParallelTasks(pool, rows, window_cost, [&](int64_t r0, int64_t r1) {
      ForEachWindow(g, r0, r1, true, [&](int64_t n, const int64_t*, int64_t off, const Clip& c) {
        C* o = out + off;
        if constexpr (kKind == Kind::kMax) {
          std::fill(o, o + depth, Lowest<C>());
          ForEachInWindow(g, n, c, [&](int64_t in) {
            for (int64_t k = 0; k < depth; ++k) o[k] = x[in + k] > o[k] ? x[in + k] : o[k];
          });
        } else if constexpr (kKind == Kind::kAvg) {
          std::fill(o, o + depth, C(0));
          ForEachInWindow(g, n, c, [&](int64_t in) {
            for (int64_t k = 0; k < depth; ++k) o[k] += x[in + k];
          });
          const C count = C(c.count());
          for (int64_t k = 0; k < depth; ++k) o[k] /= count;
        } else {
          std::fill(o, o + depth, Lowest<C>());
          ForEachInWindow(g, n, c, [&](int64_t in) {
            for (int64_t k = 0; k < depth; ++k)
              if (x[in + k] == y[off + k] && grad[in + k] > o[k]) o[k] = grad[in + k];
          });
        }
      });
    });
  } else {
    // Windows overlap on the input they scatter to: images run in parallel, windows in order.
    std::fill(out, out + g.batch * g.in_positions() * depth, C(0));
    conv::ParallelTasks(pool, g.batch, window_cost,
                        [&](int64_t n0, int64_t n1) {
      ForEachWindow(g, n0, n1, false, [&](int64_t n, const int64_t*, int64_t off, const Clip& c) {
        const C* dy = grad + off;
        if constexpr (kKind == Kind::kAvgGrad) {
          const C count = C(c.count());
          ForEachInWindow(g, n, c, [&](int64_t in) {
            for (int64_t k = 0; k < depth; ++k) out[in + k] += dy[k] / count;
          });
        } else {
          ForEachInWindow(g, n, c, [&](int64_t in) {
            for (int64_t k = 0; k < depth; ++k)
              if (x[in + k] == y[off + k]) out[in + k] += dy[k];
          });
        }
      });
    });
  }
}

template <Kind kKind>
Status Pool3DKernel(OpKernelContext& ctx) {
  auto attrs = conv::GetWindowAttrs(ctx.attrs(), ctx.name(), 3, /*pooling=*/true);
  if (!attrs.ok()) return ctx.Error(attrs.status().message());
  std::vector<int64_t> in_dims;
  if constexpr (kKind == Kind::kAvgGrad) {
    if (ctx.input(0).rank() != 1 || ctx.input(0).num_elements() != 5) {
      return ctx.Error("orig_input_shape must be a vector of 5 elements, got " +
                       DimsToString(ctx.input(0).dims()));
    }
    in_dims = ctx.input(0).AsInt64Vector();
  } else {
    in_dims = ctx.input(0).dims();
  }
  if (in_dims.size() != 5) return ctx.Error("input must be 5-dimensional " + DimsToString(in_dims));
  const int64_t depth = in_dims[attrs->channels_first ? 1 : 4];
  auto geometry = conv::ComputeGeometry(*attrs, in_dims,
                                        {attrs->ksize[0], attrs->ksize[1], attrs->ksize[2]}, depth);
  if (!geometry.ok()) return ctx.Error(geometry.status().message());
  const WindowGeometry& g = *geometry;
  const std::vector<int64_t> out_dims = conv::OutputDims(*attrs, g);
  // The inputs that must have the output's shape, and the one that must have the input's.
  auto expect = [&](int i, const std::vector<int64_t>& dims, const char* what) -> Status {
    if (ctx.input(i).dims() == dims) return OkStatus();
    return ctx.Error(std::string(what) + " has shape " + DimsToString(ctx.input(i).dims()) +
                     ", expected " + DimsToString(dims));
  };
  if constexpr (kKind == Kind::kAvgGrad) RETURN_IF_ERROR(expect(1, out_dims, "grad"));
  if constexpr (kKind == Kind::kMaxGrad) {
    RETURN_IF_ERROR(expect(1, out_dims, "orig_output"));
    RETURN_IF_ERROR(expect(2, out_dims, "grad"));
  }
  if constexpr (kKind == Kind::kMaxGradGrad) {
    RETURN_IF_ERROR(expect(1, out_dims, "orig_output"));
    RETURN_IF_ERROR(expect(2, in_dims, "grad"));
  }
  constexpr unsigned kTypes = kKind == Kind::kMaxGradGrad ? cwise::kReal : cwise::kFloating;
  const DataType dtype = ctx.input(kKind == Kind::kAvgGrad ? 1 : 0).dtype();
  if (kKind == Kind::kMaxGrad && ctx.input(2).dtype() != dtype) {
    return ctx.Error("orig_input and grad must have the same type here, got " +
                     DataTypeName(dtype) + " and " + DataTypeName(ctx.input(2).dtype()));
  }
  return cwise::Dispatch<kTypes>(ctx, dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = cwise::ComputeType<T>;
    const bool cf = attrs->channels_first;
    const bool to_input = kKind == Kind::kAvgGrad || kKind == Kind::kMaxGrad;
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, to_input ? in_dims : out_dims));
    conv::OutputView<C, T> result(*out, cf);
    if constexpr (kKind == Kind::kMax || kKind == Kind::kAvg) {
      conv::InputView<C, T> x(ctx.input(0), cf);
      Pool3D<kKind, C>(g, x.data(), nullptr, nullptr, result.data(), ctx.pool());
    } else if constexpr (kKind == Kind::kAvgGrad) {
      conv::InputView<C, T> grad(ctx.input(1), cf);
      Pool3D<kKind, C>(g, nullptr, nullptr, grad.data(), result.data(), ctx.pool());
    } else {
      conv::InputView<C, T> x(ctx.input(0), cf), y(ctx.input(1), cf), grad(ctx.input(2), cf);
      Pool3D<kKind, C>(g, x.data(), y.data(), grad.data(), result.data(), ctx.pool());
    }
    result.Finish();
    return OkStatus();
  });
}

Status Pool3DShape(InferenceContext& c) {
  PartialShape in;
  RETURN_IF_ERROR(c.WithRank(0, 5, &in));
  auto attrs = conv::GetWindowAttrs(c.attrs(), c.node_name(), 3, /*pooling=*/true);
  if (!attrs.ok()) return c.Error(attrs.status().message());
  auto g = conv::ComputeGeometry(*attrs, in.dims(),
                                 {attrs->ksize[0], attrs->ksize[1], attrs->ksize[2]},
                                 in.dim(attrs->channels_first ? 1 : 4));
  if (!g.ok()) return c.Error(g.status().message());
  c.set_output(0, PartialShape(conv::OutputDims(*attrs, *g)));
  return OkStatus();
}

Status MaxPool3DGradShape(InferenceContext& c) {
  PartialShape in;
  RETURN_IF_ERROR(c.WithRank(0, 5, &in));
  c.set_output(0, in);
  return OkStatus();
}

// The window attrs of the 3-D poolings, in TensorFlow's order (T follows, op by op).
OpRegistrationBuilder& WithPool3DWindowAttrs(OpRegistrationBuilder& op) {
  return op
      .Attr("ksize: list(int) >= 5")
      .Attr("strides: list(int) >= 5")
      .Attr("padding: {'SAME', 'VALID'}")
      .Attr("data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'");
}

}  // namespace

void RegisterPooling3DOps(OpRegistry& r) {
  WithPool3DWindowAttrs(REGISTER_OP(r, "AvgPool3D")
      .Input("input: T")
      .Output("output: T"))
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(Pool3DShape)
      .SetKernel(Pool3DKernel<Kind::kAvg>);
  WithPool3DWindowAttrs(REGISTER_OP(r, "AvgPool3DGrad")
      .Input("orig_input_shape: int32")
      .Input("grad: T")
      .Output("output: T"))
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn([](InferenceContext& c) { return conv::ShapeFromSizesInput(c, 0); })
      .SetKernel(Pool3DKernel<Kind::kAvgGrad>)
      .CompileTimeConstInput("orig_input_shape");
  WithPool3DWindowAttrs(REGISTER_OP(r, "MaxPool3D")
      .Input("input: T")
      .Output("output: T"))
      .Attr("T: {half, bfloat16, float}")
      .SetShapeFn(Pool3DShape)
      .SetKernel(Pool3DKernel<Kind::kMax>);
  WithPool3DWindowAttrs(REGISTER_OP(r, "MaxPool3DGrad")
      .Input("orig_input: TInput")
      .Input("orig_output: TInput")
      .Input("grad: T")
      .Output("output: T"))
      .Attr("T: {half, bfloat16, float} = DT_FLOAT")
      .Attr("TInput: {half, bfloat16, float} = DT_FLOAT")
      .SetShapeFn(MaxPool3DGradShape)
      .SetKernel(Pool3DKernel<Kind::kMaxGrad>);
  WithPool3DWindowAttrs(REGISTER_OP(r, "MaxPool3DGradGrad")
      .Input("orig_input: T")
      .Input("orig_output: T")
      .Input("grad: T")
      .Output("output: T"))
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}")
      .SetShapeFn(Pool3DShape)
      .SetKernel(Pool3DKernel<Kind::kMaxGradGrad>);
}

}  // namespace xlens::graph

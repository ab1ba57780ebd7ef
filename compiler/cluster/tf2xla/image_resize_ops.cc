// ResizeBilinear, ResizeBilinearGrad and ResizeNearestNeighbor (TensorFlow's XLA kernels take
// these three; ResizeNearestNeighborGrad has none). The pixels and weights are the CPU kernels'
// (compiler/graph/ops/image_resize.h), fixed at compile time by the constant size: a bilinear
// resize is two dot_generals with constant interpolation matrices, one per spatial axis (rows
// [out, in], two non-zero weights each), its gradient the same dots with the matrices'
// transposes, and a nearest resize two gathers of constant indices.
#include <fmt/format.h>

#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/graph/ops/image_resize.h"

namespace xlens::cluster {

namespace {

struct ResizeAttrs {
  bool align_corners = false;
  bool half_pixel_centers = false;
};

StatusOr<ResizeAttrs> ReadAttrs(const XlaOpKernelContext& ctx) {
  ResizeAttrs a;
  ASSIGN_OR_RETURN(a.align_corners, ctx.GetBoolAttr("align_corners"));
  ASSIGN_OR_RETURN(a.half_pixel_centers, ctx.GetBoolAttr("half_pixel_centers"));
  if (a.align_corners && a.half_pixel_centers) {
    return ctx.Error("If half_pixel_centers is True, align_corners must be False.");
  }
  return a;
}

// The [out, in] matrix of bilinear weights along one axis.
graph::Tensor BilinearMatrix(int64_t out, int64_t in, const ResizeAttrs& a) {
  graph::Tensor m(graph::DT_FLOAT, {out, in});
  auto f = m.flat<float>();
  std::fill(f.begin(), f.end(), 0.f);
  const auto taps = graph::resize::BilinearTaps(
      out, in, graph::resize::Scale(in, out, a.align_corners), a.half_pixel_centers);
  for (int64_t o = 0; o < out; ++o) {
    f[o * in + taps[o].lower] += 1.f - taps[o].lerp;
    f[o * in + taps[o].upper] += taps[o].lerp;
  }
  return m;
}

StatusOr<std::pair<int64_t, int64_t>> ConstantSize(const XlaOpKernelContext& ctx, int input) {
  ASSIGN_OR_RETURN(std::vector<int64_t> size, ctx.ConstantInputAsIntVector(input));
  if (size.size() != 2 || size[0] <= 0 || size[1] <= 0) {
    return ctx.Error("size must hold two positive sizes, got " + fmt::format("{}", size.size()) +
                     " values");
  }
  // The interpolation matrices are dense [out, in]: sizes past 2^26 entries are refused.
  const std::vector<int64_t> in = ctx.InputShape(0);
  if (in.size() == 4 && (size[0] * in[1] > (int64_t{1} << 26) ||
                         size[1] * in[2] > (int64_t{1} << 26))) {
    return ctx.Error(fmt::format("resize to {}x{} is too large to compile", size[0], size[1]));
  }
  return std::make_pair(size[0], size[1]);
}

// y[n, o, p, c] = sum_ij rows[o or i, ...] cols[...] x[n, i, j, c]; `transposed` contracts the
// matrices' first axis (the gradient) instead of their second.
StatusOr<HloInstruction*> ApplyMatrices(XlaOpKernelContext& ctx, HloInstruction* x,
                                        const graph::Tensor& rows, const graph::Tensor& cols,
                                        bool transposed) {
  HloBuilder& b = ctx.builder();
  const int64_t k = transposed ? 0 : 1;
  LOWER_OR_RETURN(HloInstruction * r, ctx, ConstantToHlo(b, rows));
  LOWER_OR_RETURN(HloInstruction * c, ctx, ConstantToHlo(b, cols));
  DotDimensionNumbers along_rows;
  along_rows.lhs_contracting_dimensions = {k};
  along_rows.rhs_contracting_dimensions = {1};
  LOWER_OR_RETURN(HloInstruction * t, ctx, b.Dot(r, x, along_rows));  // [h', n, w, c]
  DotDimensionNumbers along_cols;
  along_cols.lhs_contracting_dimensions = {k};
  along_cols.rhs_contracting_dimensions = {2};
  LOWER_OR_RETURN(HloInstruction * u, ctx, b.Dot(c, t, along_cols));  // [w', h', n, c]
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Transpose(u, {2, 1, 0, 3}));
  return y;
}

Status LowerResizeBilinear(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ResizeAttrs attrs, ReadAttrs(ctx));
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  if (x->shape().rank() != 4) return ctx.Error("input must be 4-dimensional");
  ASSIGN_OR_RETURN(auto size, ConstantSize(ctx, 1));
  const int64_t in_h = x->shape().dimensions(1), in_w = x->shape().dimensions(2);
  if (in_h == 0 || in_w == 0) return ctx.Error("input image must be of non-zero size");
  LOWER_OR_RETURN(x, ctx, ctx.builder().Convert(x, PrimitiveType::F32));
  ASSIGN_OR_RETURN(HloInstruction * y,
                   ApplyMatrices(ctx, x, BilinearMatrix(size.first, in_h, attrs),
                                 BilinearMatrix(size.second, in_w, attrs), false));
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerResizeBilinearGrad(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ResizeAttrs attrs, ReadAttrs(ctx));
  ASSIGN_OR_RETURN(HloInstruction * g, ctx.Input(0));
  const std::vector<int64_t> original = ctx.InputShape(1);
  if (g->shape().rank() != 4 || original.size() != 4) {
    return ctx.Error("grads and original_image must be 4-dimensional");
  }
  const int64_t out_h = g->shape().dimensions(1), out_w = g->shape().dimensions(2);
  ASSIGN_OR_RETURN(HloInstruction * dx,
                   ApplyMatrices(ctx, g, BilinearMatrix(out_h, original[1], attrs),
                                 BilinearMatrix(out_w, original[2], attrs), true));
  ASSIGN_OR_RETURN(PrimitiveType type, XlaType(ctx, ctx.input_type(1)));
  LOWER_OR_RETURN(dx, ctx, ctx.builder().Convert(dx, type));
  ctx.SetOutput(0, dx);
  return OkStatus();
}

Status LowerResizeNearest(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ResizeAttrs attrs, ReadAttrs(ctx));
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  if (x->shape().rank() != 4) return ctx.Error("input must be 4-dimensional");
  ASSIGN_OR_RETURN(auto size, ConstantSize(ctx, 1));
  HloBuilder& b = ctx.builder();
  const std::pair<int64_t, int64_t> axes[] = {{1, size.first}, {2, size.second}};
  for (const auto& [axis, out] : axes) {
    const int64_t in = x->shape().dimensions(axis);
    if (in == 0) return ctx.Error("input image must be of non-zero size");
    const auto taps = graph::resize::NearestTaps(
        out, in, graph::resize::Scale(in, out, attrs.align_corners), attrs.align_corners,
        attrs.half_pixel_centers);
    LOWER_OR_RETURN(HloInstruction * indices, ctx,
                    ConstantToHlo(b, graph::Tensor::Vector<int32_t>(
                                         graph::DT_INT32,
                                         std::vector<int32_t>(taps.begin(), taps.end()))));
    LOWER_OR_RETURN(x, ctx, GatherAlongAxis(b, x, indices, axis));
  }
  ctx.SetOutput(0, x);
  return OkStatus();
}

}  // namespace

void RegisterImageResizeXlaOps(XlaOpRegistry& registry) {
  registry.Register("ResizeBilinear", LowerResizeBilinear);
  registry.Register("ResizeBilinearGrad", LowerResizeBilinearGrad);
  registry.Register("ResizeNearestNeighbor", LowerResizeNearest);
}

}  // namespace xlens::cluster

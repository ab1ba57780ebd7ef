// Image resizing (tensorflow/core/kernels/image/resize_bilinear_op.cc,
// resize_nearest_neighbor_op.cc): ResizeBilinear, ResizeNearestNeighbor and their gradients, on
// NHWC images, with align_corners and half_pixel_centers. The source coordinates are computed in
// float exactly as TensorFlow's CPU kernels compute them (image_resizer_state.h), so both pick
// the same pixels and weights.
#include "compiler/graph/ops/image_resize.h"

#include <algorithm>
#include <cmath>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/cwise.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {

namespace resize {

float Scale(int64_t in_size, int64_t out_size, bool align_corners) {
  return (align_corners && out_size > 1) ? static_cast<float>(in_size - 1) / (out_size - 1)
                                         : static_cast<float>(in_size) / out_size;
}

std::vector<BilinearTap> BilinearTaps(int64_t out_size, int64_t in_size, float scale,
                                      bool half_pixel_centers) {
  std::vector<BilinearTap> taps(out_size);
  for (int64_t i = 0; i < out_size; ++i) {
    const float in = half_pixel_centers ? (static_cast<float>(i) + 0.5f) * scale - 0.5f
                                        : static_cast<float>(i) * scale;
    const float in_f = std::floor(in);
    taps[i].lower = std::max(static_cast<int64_t>(in_f), int64_t{0});
    taps[i].upper = std::min(static_cast<int64_t>(std::ceil(in)), in_size - 1);
    taps[i].lerp = in - in_f;
  }
  return taps;
}

std::vector<int64_t> NearestTaps(int64_t out_size, int64_t in_size, float scale,
                                 bool align_corners, bool half_pixel_centers) {
  std::vector<int64_t> taps(out_size);
  for (int64_t i = 0; i < out_size; ++i) {
    // HalfPixelScalerForNN: (x + 0.5) * scale, no -0.5.
    const float in = half_pixel_centers ? (static_cast<float>(i) + 0.5f) * scale
                                        : static_cast<float>(i) * scale;
    int64_t v = std::min(align_corners ? static_cast<int64_t>(std::round(in))
                                       : static_cast<int64_t>(std::floor(in)),
                         in_size - 1);
    if (half_pixel_centers) v = std::max(int64_t{0}, v);
    taps[i] = v;
  }
  return taps;
}

}  // namespace resize

namespace {

using cwise::Data;
using cwise::Dispatch;
using cwise::MutableData;

struct ResizeAttrs {
  bool align_corners = false;
  bool half_pixel_centers = false;
};

StatusOr<ResizeAttrs> ReadAttrs(const OpKernelContext& ctx) {
  ResizeAttrs a;
  ASSIGN_OR_RETURN(a.align_corners, ctx.GetAttr<bool>("align_corners"));
  ASSIGN_OR_RETURN(a.half_pixel_centers, ctx.GetAttr<bool>("half_pixel_centers"));
  if (a.align_corners && a.half_pixel_centers) {
    return ctx.Error("If half_pixel_centers is True, align_corners must be False.");
  }
  return a;
}

// The size input: two positive int32s (TensorFlow's ImageResizerState::ValidateAndCalculate).
StatusOr<std::pair<int64_t, int64_t>> ReadSize(const OpKernelContext& ctx, int input) {
  const Tensor& size = ctx.input(input);
  if (size.rank() != 1 || size.num_elements() != 2) {
    return ctx.Error("shape_t must be 1-dimensional and have exactly 2 elements, got " +
                     DimsToString(size.dims()));
  }
  const int64_t h = size.GetAsInt64(0), w = size.GetAsInt64(1);
  if (h <= 0 || w <= 0) return ctx.Error("output dimensions must be positive");
  // Each output row and column gets a tap: a size past the tensor limit is refused before any.
  if (h > ctx.max_tensor_bytes() / w) {
    return ctx.Error("output size " + std::to_string(h) + "x" + std::to_string(w) +
                     " is past the executor's tensor limit");
  }
  return std::make_pair(h, w);
}

Status CheckImage(const OpKernelContext& ctx, const Tensor& t, const char* what) {
  if (t.rank() != 4) {
    return ctx.Error(std::string(what) + " must be 4-dimensional, got " + DimsToString(t.dims()));
  }
  return OkStatus();
}

Status ResizeBilinearKernel(OpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ResizeAttrs attrs, ReadAttrs(ctx));
  const Tensor& images = ctx.input(0);
  RETURN_IF_ERROR(CheckImage(ctx, images, "input"));
  ASSIGN_OR_RETURN(auto size, ReadSize(ctx, 1));
  const int64_t batch = images.dim(0), in_h = images.dim(1), in_w = images.dim(2),
                depth = images.dim(3);
  const auto [out_h, out_w] = size;
  if (in_h == 0 || in_w == 0) return ctx.Error("input image must be of non-zero size");
  const auto ys = resize::BilinearTaps(out_h, in_h, resize::Scale(in_h, out_h, attrs.align_corners),
                                       attrs.half_pixel_centers);
  const auto xs = resize::BilinearTaps(out_w, in_w, resize::Scale(in_w, out_w, attrs.align_corners),
                                       attrs.half_pixel_centers);
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, {batch, out_h, out_w, depth}));
  float* o = MutableData<float>(*out);
  return Dispatch<cwise::kReal>(ctx, images.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* in = Data<T>(images);
    auto at = [&](int64_t b, int64_t y, int64_t x, int64_t c) {
      return static_cast<float>(in[((b * in_h + y) * in_w + x) * depth + c]);
    };
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t y = 0; y < out_h; ++y)
        for (int64_t x = 0; x < out_w; ++x)
          for (int64_t c = 0; c < depth; ++c) {
            const auto& ty = ys[y];
            const auto& tx = xs[x];
            const float tl = at(b, ty.lower, tx.lower, c), tr = at(b, ty.lower, tx.upper, c);
            const float bl = at(b, ty.upper, tx.lower, c), br = at(b, ty.upper, tx.upper, c);
            const float top = tl + (tr - tl) * tx.lerp;
            const float bottom = bl + (br - bl) * tx.lerp;
            *o++ = top + (bottom - top) * ty.lerp;
          }
    return OkStatus();
  });
}

Status ResizeBilinearGradKernel(OpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ResizeAttrs attrs, ReadAttrs(ctx));
  const Tensor& grads = ctx.input(0);
  const Tensor& original = ctx.input(1);
  RETURN_IF_ERROR(CheckImage(ctx, grads, "input_grad"));
  RETURN_IF_ERROR(CheckImage(ctx, original, "original_image"));
  const int64_t batch = grads.dim(0), out_h = grads.dim(1), out_w = grads.dim(2),
                depth = grads.dim(3);
  const int64_t in_h = original.dim(1), in_w = original.dim(2);
  if (original.dim(0) != batch || original.dim(3) != depth) {
    return ctx.Error("original_image " + DimsToString(original.dims()) +
                     " and input_grad " + DimsToString(grads.dims()) +
                     " must agree in batch and depth");
  }
  const auto ys = resize::BilinearTaps(out_h, in_h, resize::Scale(in_h, out_h, attrs.align_corners),
                                       attrs.half_pixel_centers);
  const auto xs = resize::BilinearTaps(out_w, in_w, resize::Scale(in_w, out_w, attrs.align_corners),
                                       attrs.half_pixel_centers);
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, original.dims()));
  return Dispatch<cwise::kFloating>(ctx, original.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = cwise::ComputeType<T>;
    std::vector<C> acc(out->num_elements(), C(0));
    const float* g = Data<float>(grads);
    auto at = [&](int64_t b, int64_t y, int64_t x, int64_t c) -> C& {
      return acc[((b * in_h + y) * in_w + x) * depth + c];
    };
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t y = 0; y < out_h; ++y)
        for (int64_t x = 0; x < out_w; ++x)
          for (int64_t c = 0; c < depth; ++c) {
            const float v = *g++;
            const auto& ty = ys[y];
            const auto& tx = xs[x];
            const float iy = 1.0f - ty.lerp, ix = 1.0f - tx.lerp;
            at(b, ty.lower, tx.lower, c) += C(v * iy * ix);
            at(b, ty.lower, tx.upper, c) += C(v * iy * tx.lerp);
            at(b, ty.upper, tx.lower, c) += C(v * ty.lerp * ix);
            at(b, ty.upper, tx.upper, c) += C(v * ty.lerp * tx.lerp);
          }
    cwise::StoreAs<T>(acc, *out);
    return OkStatus();
  });
}

template <bool kGrad>
Status ResizeNearestKernel(OpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ResizeAttrs attrs, ReadAttrs(ctx));
  const Tensor& src = ctx.input(0);
  RETURN_IF_ERROR(CheckImage(ctx, src, kGrad ? "input_grad" : "input"));
  ASSIGN_OR_RETURN(auto size, ReadSize(ctx, 1));
  const int64_t batch = src.dim(0), src_h = src.dim(1), src_w = src.dim(2), depth = src.dim(3);
  const auto [dst_h, dst_w] = size;
  if (!kGrad && (src_h == 0 || src_w == 0)) {
    return ctx.Error("input image must be of non-zero size");
  }
  // Forward: each output pixel reads input pixel tap[y]; the gradient: each incoming gradient
  // pixel adds into original pixel tap[y], the scale taken original -> resized.
  const int64_t taps_h = kGrad ? src_h : dst_h, taps_w = kGrad ? src_w : dst_w;
  const int64_t image_h = kGrad ? dst_h : src_h, image_w = kGrad ? dst_w : src_w;
  const auto ys = resize::NearestTaps(taps_h, image_h,
                                      resize::Scale(image_h, taps_h, attrs.align_corners),
                                      attrs.align_corners, attrs.half_pixel_centers);
  const auto xs = resize::NearestTaps(taps_w, image_w,
                                      resize::Scale(image_w, taps_w, attrs.align_corners),
                                      attrs.align_corners, attrs.half_pixel_centers);
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, {batch, dst_h, dst_w, depth}));
  return Dispatch<cwise::kReal>(ctx, src.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* in = Data<T>(src);
    T* o = MutableData<T>(*out);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t y = 0; y < taps_h; ++y)
        for (int64_t x = 0; x < taps_w; ++x) {
          if constexpr (kGrad) {
            const T* g = in + ((b * src_h + y) * src_w + x) * depth;
            T* dst = o + ((b * dst_h + ys[y]) * dst_w + xs[x]) * depth;
            for (int64_t c = 0; c < depth; ++c) dst[c] = T(dst[c] + g[c]);
          } else {
            const T* s = in + ((b * src_h + ys[y]) * src_w + xs[x]) * depth;
            T* dst = o + ((b * dst_h + y) * dst_w + x) * depth;
            std::copy(s, s + depth, dst);
          }
        }
    return OkStatus();
  });
}

// [batch, size[0], size[1], depth] with the size input's value where it is known.
Status ResizeShape(InferenceContext& c) {
  PartialShape images;
  RETURN_IF_ERROR(c.WithRank(0, 4, &images));
  PartialShape size;
  RETURN_IF_ERROR(c.WithRank(1, 1, &size));
  int64_t h = -1, w = -1;
  if (const Tensor* t = c.input_tensor(1); t != nullptr) {
    if (t->num_elements() != 2) return c.Error("size must have two elements");
    h = t->GetAsInt64(0);
    w = t->GetAsInt64(1);
  }
  c.set_output(0, PartialShape({images.dim(0), h, w, images.dim(3)}));
  return OkStatus();
}

Status ResizeBilinearGradShape(InferenceContext& c) {
  PartialShape original;
  RETURN_IF_ERROR(c.WithRank(1, 4, &original));
  c.set_output(0, original);
  return OkStatus();
}

}  // namespace

void RegisterImageOps(OpRegistry& r) {
  REGISTER_OP(r, "ResizeBilinear")
      .Input("images: T")
      .Input("size: int32")
      .Output("resized_images: float")
      .Attr("T: {int8, uint8, int16, uint16, int32, int64, bfloat16, half, float, double, bfloat16}")
      .Attr("align_corners: bool = false")
      .Attr("half_pixel_centers: bool = false")
      .SetShapeFn(ResizeShape)
      .SetKernel(ResizeBilinearKernel)
      .CompileTimeConstInput("size");
  REGISTER_OP(r, "ResizeBilinearGrad")
      .Input("grads: float")
      .Input("original_image: T")
      .Output("output: T")
      .Attr("T: {float, bfloat16, half, double}")
      .Attr("align_corners: bool = false")
      .Attr("half_pixel_centers: bool = false")
      .SetShapeFn(ResizeBilinearGradShape)
      .SetKernel(ResizeBilinearGradKernel);
  REGISTER_OP(r, "ResizeNearestNeighbor")
      .Input("images: T")
      .Input("size: int32")
      .Output("resized_images: T")
      .Attr("T: {int8, uint8, int16, uint16, int32, int64, half, float, double, bfloat16}")
      .Attr("align_corners: bool = false")
      .Attr("half_pixel_centers: bool = false")
      .SetShapeFn(ResizeShape)
      .SetKernel(ResizeNearestKernel<false>)
      .CompileTimeConstInput("size");
  REGISTER_OP(r, "ResizeNearestNeighborGrad")
      .Input("grads: T")
      .Input("size: int32")
      .Output("output: T")
      .Attr("T: {uint8, int8, int32, half, float, double, bfloat16}")
      .Attr("align_corners: bool = false")
      .Attr("half_pixel_centers: bool = false")
      .SetShapeFn(ResizeShape)
      .SetKernel(ResizeNearestKernel<true>)
      .NoXlaKernel();
}

}  // namespace xlens::graph

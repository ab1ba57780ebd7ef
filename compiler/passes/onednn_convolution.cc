#include "compiler/passes/onednn_convolution.h"

#include <algorithm>
#include <numeric>

namespace xlens {
namespace {

bool IsRowMajorF32(const Shape& s) {
  return s.IsArray() && s.element_type() == PrimitiveType::F32 && s.is_static() &&
         (!s.has_layout() || s.layout().minor_to_major == shape_util::DefaultMinorToMajor(s.rank()));
}

std::vector<int64_t> RowMajorStrides(const Shape& s) {
  std::vector<int64_t> strides(s.rank(), 1);
  for (int64_t d = s.rank() - 2; d >= 0; --d) strides[d] = strides[d + 1] * s.dimensions(d + 1);
  return strides;
}

// An operand read through a view: its dimensions' sizes and element strides in its base.
struct Strided {
  std::vector<int64_t> sizes, strides;
  std::vector<bool> reversed;
};

Strided Of(const HloInstruction& operand, const OneDnnOperandView& view) {
  Strided s;
  const std::vector<int64_t> base = RowMajorStrides(view.base->shape());
  for (int64_t d = 0; d < operand.shape().rank(); ++d) {
    s.sizes.push_back(operand.shape().dimensions(d));
    s.strides.push_back(base[view.to_base[d]]);
    s.reversed.push_back(view.reversed[d] && s.sizes.back() > 1);
  }
  return s;
}

// Whether the dimensions `order` of `s` lie as a dense row-major array in that order (the
// strides of dimensions of size 1 do not matter): channels-last when `order` is batch,
// spatial..., feature.
bool DenseInOrder(const Strided& s, const std::vector<int64_t>& order) {
  int64_t expected = 1;
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    if (s.sizes[*d] > 1 && s.strides[*d] != expected) return false;
    if (s.reversed[*d]) return false;
    expected *= s.sizes[*d];
  }
  return true;
}

std::vector<int64_t> Order(int64_t first, const std::vector<int64_t>& spatial, int64_t last) {
  std::vector<int64_t> order{first};
  order.insert(order.end(), spatial.begin(), spatial.end());
  order.push_back(last);
  return order;
}

std::vector<int64_t> Pick(const std::vector<int64_t>& values, const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(values[d]);
  return out;
}

// oneDNN's own check that the sizes agree: (src - extent + low + high) / stride + 1 == dst.
bool Consistent(const OneDnnConvolution& c) {
  for (size_t i = 0; i < c.strides.size(); ++i) {
    const int64_t extent = (c.kernel_spatial[i] - 1) * (c.dilations[i] + 1) + 1;
    // A negative high padding (a remainder the stride skips, cropped) down to 1 - stride.
    if (c.padding_low[i] < 0 || c.padding_high[i] + c.strides[i] <= 0 || c.strides[i] < 1 ||
        c.dilations[i] < 0) {
      return false;
    }
    const int64_t span = c.src_spatial[i] - extent + c.padding_low[i] + c.padding_high[i];
    if (span < 0 || span / c.strides[i] + 1 != c.dst_spatial[i]) return false;
  }
  return true;
}

}  // namespace

OneDnnOperandView DirectView(const HloInstruction& operand) {
  OneDnnOperandView view;
  view.base = &operand;
  view.to_base.resize(operand.shape().IsArray() ? operand.shape().rank() : 0);
  std::iota(view.to_base.begin(), view.to_base.end(), 0);
  view.reversed.assign(view.to_base.size(), false);
  return view;
}

OneDnnOperandView ViewThrough(const HloInstruction& operand, bool allow_reverse) {
  OneDnnOperandView view = DirectView(operand);
  while (true) {
    const HloInstruction* b = view.base;
    if (b->opcode() == HloOpcode::kTranspose && b->operand_count() == 1 &&
        b->dimensions().size() == view.to_base.size()) {
      // Dimension j of the transpose is dimension dimensions(j) of its operand.
      for (int64_t& d : view.to_base) d = b->dimensions(d);
    } else if (allow_reverse && b->opcode() == HloOpcode::kReverse && b->operand_count() == 1) {
      for (size_t d = 0; d < view.to_base.size(); ++d) {
        const std::vector<int64_t>& r = b->dimensions();
        if (std::find(r.begin(), r.end(), view.to_base[d]) != r.end()) view.reversed[d] = !view.reversed[d];
      }
    } else {
      return view;
    }
    view.absorbed.push_back(b);
    view.base = b->operand(0);
  }
}

std::string OneDnnConvolution::ToString() const {
  const std::string grouped = groups > 1 ? "[" + std::to_string(groups) + " groups]" : "";
  switch (kind) {
    case Kind::kForward: return "convolution" + grouped;
    case Kind::kBackwardData: return "convolution_backward_data" + grouped;
    case Kind::kBackwardWeights: return "convolution_backward_weights" + grouped;
  }
  return "";
}

std::optional<OneDnnConvolution> DescribeOneDnnConvolution(const HloInstruction& conv,
                                                           const OneDnnOperandView& lhs_view,
                                                           const OneDnnOperandView& rhs_view,
                                                           std::string* why) {
  auto refuse = [&](std::string reason) -> std::optional<OneDnnConvolution> {
    *why = std::move(reason);
    return std::nullopt;
  };
  const HloInstruction& lhs_operand = *conv.operand(0);
  const HloInstruction& rhs_operand = *conv.operand(1);
  if (!IsRowMajorF32(lhs_view.base->shape()) || !IsRowMajorF32(rhs_view.base->shape()) ||
      !IsRowMajorF32(conv.shape()) || !lhs_operand.shape().IsArray() || !rhs_operand.shape().IsArray()) {
    return refuse("oneDNN calls take f32 row-major arrays only");
  }
  if (!conv.convolution_dimension_numbers || !conv.window) return refuse("no dimension numbers");
  // XLA writes a grouped convolution's kernel gradient with batch_group_count G instead: its
  // input's batch (the forward's features) is split into G groups, output feature group g
  // reading batch group g, which is oneDNN's grouped backward weights.
  const int64_t groups = conv.feature_group_count(), batch_groups = conv.batch_group_count();
  if (groups < 1 || batch_groups < 1) return refuse("malformed group counts");
  if (groups > 1 && batch_groups > 1) return refuse("feature and batch groups together");
  const ConvolutionDimensionNumbers& dn = *conv.convolution_dimension_numbers;
  const int64_t n = static_cast<int64_t>(dn.input_spatial_dimensions.size());
  if (n < 1 || n > 3) return refuse("oneDNN takes 1 to 3 spatial dimensions");
  if (lhs_operand.shape().rank() != n + 2 || rhs_operand.shape().rank() != n + 2 ||
      conv.shape().rank() != n + 2 || static_cast<int64_t>(conv.window->dimensions.size()) != n ||
      static_cast<int64_t>(dn.kernel_spatial_dimensions.size()) != n ||
      static_cast<int64_t>(dn.output_spatial_dimensions.size()) != n) {
    return refuse("malformed convolution");
  }
  if (conv.shape().num_elements() == 0 || lhs_operand.shape().num_elements() == 0 ||
      rhs_operand.shape().num_elements() == 0) {
    return refuse("empty arrays");
  }
  const Strided in = Of(lhs_operand, lhs_view), kernel = Of(rhs_operand, rhs_view);
  const Strided out = Of(conv, DirectView(conv));
  // Only the kernel's spatial dimensions may be read reversed.
  for (int64_t d = 0; d < n + 2; ++d) {
    if (in.reversed[d]) return refuse("a reversed input oneDNN cannot read");
  }
  if (kernel.reversed[dn.kernel_input_feature_dimension] || kernel.reversed[dn.kernel_output_feature_dimension]) {
    return refuse("a kernel reversed in a feature dimension");
  }
  bool any_base_dilation = false, any_reversed = false, all_reversed = true, unit_strides = true;
  std::vector<bool> reversed;
  int64_t window_elements = 1, output_elements = 1;
  for (int64_t i = 0; i < n; ++i) {
    const WindowDimension& w = conv.window->dimensions[i];
    if (w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1 || w.size < 1) {
      return refuse("malformed window");
    }
    // A reversed window of one element is the same window.
    const bool r = (w.window_reversal != kernel.reversed[dn.kernel_spatial_dimensions[i]]) && w.size > 1;
    any_base_dilation |= w.base_dilation > 1;
    any_reversed |= r;
    all_reversed &= r || w.size == 1;
    unit_strides &= w.stride == 1;
    window_elements *= w.size;
    output_elements *= out.sizes[dn.output_spatial_dimensions[i]];
  }
  const std::vector<int64_t>& is = dn.input_spatial_dimensions;
  const std::vector<int64_t>& ks = dn.kernel_spatial_dimensions;
  const std::vector<int64_t>& os = dn.output_spatial_dimensions;
  const int64_t ib = dn.input_batch_dimension, ifeat = dn.input_feature_dimension;
  const int64_t ki = dn.kernel_input_feature_dimension, ko = dn.kernel_output_feature_dimension;
  const int64_t ob = dn.output_batch_dimension, of = dn.output_feature_dimension;
  const char* kLayout = "the activations do not lie channels-last (batch, spatial..., feature)";

  auto forward = [&]() -> std::optional<OneDnnConvolution> {
    if (batch_groups > 1) return refuse("a batch-grouped convolution that is no kernel's gradient");
    if (!DenseInOrder(in, Order(ib, is, ifeat)) || !DenseInOrder(out, Order(ob, os, of))) {
      return refuse(kLayout);
    }
    OneDnnConvolution c;
    c.kind = OneDnnConvolution::Kind::kForward;
    c.images = in.sizes[ib];
    c.input_channels = in.sizes[ifeat];
    c.output_channels = kernel.sizes[ko];
    c.src_spatial = Pick(in.sizes, is);
    c.dst_spatial = Pick(out.sizes, os);
    c.kernel_spatial = Pick(kernel.sizes, ks);
    for (const WindowDimension& w : conv.window->dimensions) {
      c.strides.push_back(w.stride);
      c.dilations.push_back(w.window_dilation - 1);
      c.padding_low.push_back(w.padding_low);
      c.padding_high.push_back(w.padding_high);
    }
    c.weights_strides = Pick(kernel.strides, Order(ko, {}, ki));
    for (int64_t d : ks) c.weights_strides.push_back(kernel.strides[d]);
    // Group g reads input features [g*I/G, (g+1)*I/G) and writes the kernel's output features
    // [g*O/G, (g+1)*O/G): the kernel's output feature dimension is (group, output in group).
    if (groups > 1) {
      if (c.input_channels % groups != 0 || kernel.sizes[ki] * groups != c.input_channels ||
          c.output_channels % groups != 0) {
        return refuse("malformed feature groups");
      }
      c.groups = groups;
      c.group_stride = c.output_channels / groups * kernel.strides[ko];
    }
    if (!Consistent(c)) return refuse("negative padding");
    return c;
  };

  // The forward convolution's gradient with respect to its kernel: the HLO input is the forward
  // src with batch and feature swapped, the HLO kernel the forward output's gradient, the HLO
  // window the forward output; the HLO stride is the forward dilation and the other way round.
  auto backward_weights = [&]() -> std::optional<OneDnnConvolution> {
    if (groups > 1) return refuse("a feature-grouped convolution read as a kernel's gradient");
    if (!DenseInOrder(in, Order(ifeat, is, ib)) || !DenseInOrder(kernel, Order(ki, ks, ko))) {
      return refuse(kLayout);
    }
    OneDnnConvolution c;
    c.kind = OneDnnConvolution::Kind::kBackwardWeights;
    c.images = in.sizes[ifeat];
    c.input_channels = in.sizes[ib];
    c.output_channels = kernel.sizes[ko];
    c.src_spatial = Pick(in.sizes, is);
    c.dst_spatial = Pick(kernel.sizes, ks);
    c.kernel_spatial = Pick(out.sizes, os);
    for (int64_t i = 0; i < n; ++i) {
      const WindowDimension& w = conv.window->dimensions[i];
      c.strides.push_back(w.window_dilation);
      c.dilations.push_back(w.stride - 1);
      c.padding_low.push_back(w.padding_low);
      // The high padding that makes the forward output exactly the window (the HLO's own may
      // be larger by what its stride skips).
      c.padding_high.push_back((c.dst_spatial[i] - 1) * c.strides[i] +
                               (c.kernel_spatial[i] - 1) * w.stride + 1 - c.src_spatial[i] -
                               w.padding_low);
    }
    c.weights_strides = {out.strides[of], out.strides[ob]};
    for (int64_t d : os) c.weights_strides.push_back(out.strides[d]);
    // Batch-grouped: the HLO's output (the forward kernel, input features C/G by outputs O) at
    // (i, g*O/G + o) is group g's gradient at (o, i), from forward inputs g*C/G + i.
    if (batch_groups > 1) {
      if (c.input_channels % batch_groups != 0 || out.sizes[ob] * batch_groups != c.input_channels ||
          c.output_channels % batch_groups != 0) {
        return refuse("malformed batch groups");
      }
      c.groups = batch_groups;
      c.group_stride = c.output_channels / batch_groups * out.strides[of];
    }
    if (!Consistent(c)) return refuse("padding oneDNN's backward weights cannot express");
    return c;
  };

  // The forward convolution's gradient with respect to its input: the HLO dilates the forward
  // output's gradient by the forward stride and slides the reversed kernel, features swapped.
  auto backward_data = [&]() -> std::optional<OneDnnConvolution> {
    if (batch_groups > 1) return refuse("a batch-grouped convolution that is no kernel's gradient");
    if (!DenseInOrder(in, Order(ib, is, ifeat)) || !DenseInOrder(out, Order(ob, os, of))) {
      return refuse(kLayout);
    }
    OneDnnConvolution c;
    c.kind = OneDnnConvolution::Kind::kBackwardData;
    c.images = in.sizes[ib];
    c.input_channels = out.sizes[of];
    c.output_channels = in.sizes[ifeat];
    c.src_spatial = Pick(out.sizes, os);
    c.dst_spatial = Pick(in.sizes, is);
    c.kernel_spatial = Pick(kernel.sizes, ks);
    for (int64_t i = 0; i < n; ++i) {
      const WindowDimension& w = conv.window->dimensions[i];
      const int64_t extent = (w.size - 1) * w.window_dilation;
      c.strides.push_back(w.base_dilation);
      c.dilations.push_back(w.window_dilation - 1);
      c.padding_low.push_back(extent - w.padding_low);
      c.padding_high.push_back(extent - w.padding_high);
    }
    // The forward weights are the HLO kernel with its features swapped, read unreversed: the
    // reversal is the backward pass's own.
    c.weights_strides = {kernel.strides[ki], kernel.strides[ko]};
    for (int64_t d : ks) c.weights_strides.push_back(kernel.strides[d]);
    // Grouped (JAX's input gradient of a grouped convolution): the HLO reads its input features
    // (the forward outputs) in G groups against the kernel's input features, and writes its
    // output features (the forward inputs) as the kernel's output feature dimension, (group,
    // forward input in group): oneDNN's weights (group, output, input) are the HLO kernel at
    // (input feature o, output feature g*I/G + i).
    if (groups > 1) {
      if (c.output_channels % groups != 0 || kernel.sizes[ki] * groups != c.output_channels ||
          c.input_channels % groups != 0) {
        return refuse("malformed feature groups");
      }
      c.groups = groups;
      c.group_stride = c.input_channels / groups * kernel.strides[ko];
    }
    if (!Consistent(c)) return refuse("padding beyond the kernel's extent in a backward-data convolution");
    return c;
  };

  if (!any_base_dilation && !any_reversed) {
    // Either pass computes it; a window larger than the output is a kernel's gradient.
    const bool weights_first = window_elements >= output_elements;
    std::string first_why;
    std::optional<OneDnnConvolution> c = weights_first ? backward_weights() : forward();
    if (c) return c;
    first_why = *why;
    c = weights_first ? forward() : backward_weights();
    if (c) return c;
    return refuse(first_why);
  }
  if (!unit_strides) return refuse("base dilation or a reversed kernel together with a stride");
  if (!all_reversed) return refuse("base dilation without a kernel reversed in every spatial dimension");
  return backward_data();
}

}  // namespace xlens

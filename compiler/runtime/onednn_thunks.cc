#include "compiler/runtime/onednn_thunks.h"

#include <fmt/format.h>

#include "compiler/passes/onednn_rewriter.h"

#ifdef XLENS_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace xlens::runtime {

#ifndef XLENS_HAVE_ONEDNN

bool OneDnnAvailable() { return false; }
bool IsOneDnnFusion(const HloInstruction&) { return false; }
struct OneDnnThunk::Impl {};
OneDnnThunk::OneDnnThunk(std::string hlo_name) : Thunk(std::move(hlo_name)) {}
OneDnnThunk::~OneDnnThunk() = default;
StatusOr<std::unique_ptr<OneDnnThunk>> OneDnnThunk::Create(std::string hlo_name,
                                                           const HloInstruction&,
                                                           std::vector<int64_t>, int64_t) {
  return Error(hlo_name + ": this build has no oneDNN");
}
Status OneDnnThunk::Execute(char**, ExecuteContext&) const { return Error("no oneDNN"); }
std::string OneDnnThunk::ToString(int) const { return ""; }

#else

namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

dims RowMajorStrides(const dims& d) {
  dims s(d.size(), 1);
  for (int64_t i = static_cast<int64_t>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

dnnl::memory::format_tag ChannelsLast(size_t rank) {
  using tag = dnnl::memory::format_tag;
  return rank == 3 ? tag::nwc : rank == 4 ? tag::nhwc : tag::ndhwc;
}

dnnl::memory::format_tag KernelChannelsLast(size_t rank) {
  using tag = dnnl::memory::format_tag;
  return rank == 3 ? tag::wio : rank == 4 ? tag::hwio : tag::dhwio;
}

}  // namespace

bool OneDnnAvailable() { return true; }

bool IsOneDnnFusion(const HloInstruction& fusion) { return MatchOneDnnCall(fusion).has_value(); }

struct OneDnnThunk::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  mutable dnnl::stream stream{engine};
  dnnl::primitive primitive;
  dnnl::memory::desc src_md, weights_md, dst_md;
  // Convolution weights come as 01io; oneDNN may want them blocked: reordered on each call into
  // a buffer made with the thunk (the weights may change between calls).
  bool reorder_weights = false;
  dnnl::memory::desc user_weights_md;
  mutable dnnl::memory weights_buffer;
  int64_t lhs_slot = -1, rhs_slot = -1, output_slot = -1;
  struct Addend {
    int post_op = 0;
    int64_t slot = -1;
    dnnl::memory::desc md;
  };
  std::vector<Addend> addends;
};

OneDnnThunk::OneDnnThunk(std::string hlo_name) : Thunk(std::move(hlo_name)) {}
OneDnnThunk::~OneDnnThunk() = default;

StatusOr<std::unique_ptr<OneDnnThunk>> OneDnnThunk::Create(std::string hlo_name,
                                                           const HloInstruction& fusion,
                                                           std::vector<int64_t> operand_slots,
                                                           int64_t output_slot) {
  std::optional<OneDnnCall> call = MatchOneDnnCall(fusion);
  if (!call) return Error(hlo_name + ": not a oneDNN fusion");
  std::unique_ptr<OneDnnThunk> thunk(new OneDnnThunk(std::move(hlo_name)));
  thunk->impl_ = std::make_unique<Impl>();
  Impl& impl = *thunk->impl_;
  impl.lhs_slot = operand_slots.at(call->lhs_parameter);
  impl.rhs_slot = operand_slots.at(call->rhs_parameter);
  impl.output_slot = output_slot;
  const HloInstruction& core = *call->core;
  const Shape& out = core.shape();
  dims dst_dims, addend_last, addend_scalar;
  try {
    if (!call->is_convolution) {
      const Shape& lhs = core.operand(0)->shape();  // [batch..., m, k] as the dot reads it
      const Shape& rhs = core.operand(1)->shape();  // [batch..., k, n]
      const int64_t rank = lhs.rank();
      int64_t batch = 1;
      for (int64_t i = 0; i < rank - 2; ++i) batch *= lhs.dimensions(i);
      const int64_t m = lhs.dimensions(rank - 2), k = lhs.dimensions(rank - 1);
      const int64_t n = rhs.dimensions(rank - 1);
      const bool batched = batch > 1;
      auto with_batch = [&](dims d) {
        if (batched) d.insert(d.begin(), batch);
        return d;
      };
      // A transposed operand is stored [.., k, m] (or [.., n, k]): the same logical matrix with
      // swapped strides.
      dims src_strides = call->lhs_transposed ? with_batch({1, m}) : with_batch({k, 1});
      dims weights_strides = call->rhs_transposed ? with_batch({1, k}) : with_batch({n, 1});
      if (batched) {
        src_strides[0] = m * k;
        weights_strides[0] = k * n;
      }
      impl.src_md = dnnl::memory::desc(with_batch({m, k}), dt::f32, src_strides);
      impl.weights_md = dnnl::memory::desc(with_batch({k, n}), dt::f32, weights_strides);
      dst_dims = with_batch({m, n});
      impl.dst_md = dnnl::memory::desc(dst_dims, dt::f32, RowMajorStrides(dst_dims));
      addend_last = with_batch({1, n});
      addend_scalar = with_batch({1, 1});
    } else {
      const Shape& in = core.operand(0)->shape();
      const Shape& kernel = core.operand(1)->shape();
      const int64_t spatial = in.rank() - 2;
      dims src{in.dimensions(0), in.dimensions(spatial + 1)};
      dims weights{kernel.dimensions(spatial + 1), kernel.dimensions(spatial)};
      dst_dims = {out.dimensions(0), out.dimensions(spatial + 1)};
      for (int64_t i = 0; i < spatial; ++i) {
        src.push_back(in.dimensions(i + 1));
        weights.push_back(kernel.dimensions(i));
        dst_dims.push_back(out.dimensions(i + 1));
      }
      impl.src_md = dnnl::memory::desc(src, dt::f32, ChannelsLast(src.size()));
      impl.user_weights_md = dnnl::memory::desc(weights, dt::f32, KernelChannelsLast(weights.size()));
      impl.weights_md = dnnl::memory::desc(weights, dt::f32, dnnl::memory::format_tag::any);
      impl.dst_md = dnnl::memory::desc(dst_dims, dt::f32, ChannelsLast(dst_dims.size()));
      addend_last = dims(dst_dims.size(), 1);
      addend_last[1] = dst_dims[1];
      addend_scalar = dims(dst_dims.size(), 1);
    }
    dnnl::post_ops post_ops;
    int index = 0;
    for (const OneDnnPostOp& op : call->post_ops) {
      switch (op.kind) {
        case OneDnnPostOp::Kind::kAdd: {
          dnnl::memory::desc md;
          if (op.addend == OneDnnPostOp::Addend::kFull) {
            md = call->is_convolution ? dnnl::memory::desc(dst_dims, dt::f32, ChannelsLast(dst_dims.size()))
                                      : dnnl::memory::desc(dst_dims, dt::f32, RowMajorStrides(dst_dims));
          } else {
            const dims& d = op.addend == OneDnnPostOp::Addend::kLastDimension ? addend_last : addend_scalar;
            md = dnnl::memory::desc(d, dt::f32, RowMajorStrides(d));
          }
          post_ops.append_binary(dnnl::algorithm::binary_add, md);
          impl.addends.push_back({index, operand_slots.at(op.parameter), md});
          break;
        }
        case OneDnnPostOp::Kind::kRelu:
          post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
          break;
        case OneDnnPostOp::Kind::kGeluTanh:
          post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
          break;
        case OneDnnPostOp::Kind::kGeluErf:
          post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
          break;
        case OneDnnPostOp::Kind::kLinear:
          post_ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, static_cast<float>(op.alpha),
                                  static_cast<float>(op.beta));
          break;
      }
      ++index;
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(post_ops);
    if (!call->is_convolution) {
      dnnl::matmul::desc desc(impl.src_md, impl.weights_md, impl.dst_md);
      dnnl::matmul::primitive_desc pd(desc, attr, impl.engine);
      impl.primitive = dnnl::matmul(pd);
      thunk->implementation_ = pd.impl_info_str();
    } else {
      const int64_t spatial = static_cast<int64_t>(dst_dims.size()) - 2;
      dims strides, dilates, padding_l, padding_r;
      for (int64_t i = 0; i < spatial; ++i) {
        const WindowDimension& w = core.window->dimensions[i];
        strides.push_back(w.stride);
        dilates.push_back(w.window_dilation - 1);
        padding_l.push_back(w.padding_low);
        padding_r.push_back(w.padding_high);
      }
      dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                           dnnl::algorithm::convolution_direct, impl.src_md,
                                           impl.weights_md, impl.dst_md, strides, dilates,
                                           padding_l, padding_r);
      dnnl::convolution_forward::primitive_desc pd(desc, attr, impl.engine);
      impl.primitive = dnnl::convolution_forward(pd);
      impl.weights_md = pd.weights_desc();
      impl.reorder_weights = impl.weights_md != impl.user_weights_md;
      if (impl.reorder_weights) impl.weights_buffer = dnnl::memory(impl.weights_md, impl.engine);
      thunk->implementation_ = pd.impl_info_str();
    }
  } catch (const dnnl::error& e) {
    return Error(fmt::format("{}: oneDNN refused {}: {}", thunk->hlo_name(), call->ToString(), e.what()));
  }
  thunk->description_ = call->ToString();
  return thunk;
}

Status OneDnnThunk::Execute(char** frame, ExecuteContext&) const {
  const Impl& impl = *impl_;
  try {
    std::unordered_map<int, dnnl::memory> args;
    args[DNNL_ARG_SRC] = dnnl::memory(impl.src_md, impl.engine, frame[impl.lhs_slot]);
    if (impl.reorder_weights) {
      dnnl::memory user(impl.user_weights_md, impl.engine, frame[impl.rhs_slot]);
      dnnl::reorder(user, impl.weights_buffer).execute(impl.stream, user, impl.weights_buffer);
      args[DNNL_ARG_WEIGHTS] = impl.weights_buffer;
    } else {
      args[DNNL_ARG_WEIGHTS] = dnnl::memory(impl.weights_md, impl.engine, frame[impl.rhs_slot]);
    }
    args[DNNL_ARG_DST] = dnnl::memory(impl.dst_md, impl.engine, frame[impl.output_slot]);
    for (const Impl::Addend& a : impl.addends) {
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(a.post_op) | DNNL_ARG_SRC_1] =
          dnnl::memory(a.md, impl.engine, frame[a.slot]);
    }
    impl.primitive.execute(impl.stream, args);
    impl.stream.wait();
  } catch (const dnnl::error& e) {
    return Error(fmt::format("{}: oneDNN: {}", hlo_name(), e.what()));
  }
  return OkStatus();
}

std::string OneDnnThunk::ToString(int indent) const {
  return fmt::format("{:{}}library-call {} (oneDNN {}; kernel {})\n", "", indent, hlo_name(),
                     description_, implementation_);
}

#endif

}  // namespace xlens::runtime

#include "compiler/runtime/onednn_thunks.h"

#include <fmt/format.h>

#include "compiler/passes/onednn_rewriter.h"
#include "compiler/runtime/small_product.h"

#ifdef XLENS_HAVE_ONEDNN
#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif

#include "compiler/support/thread_pool.h"
#endif

namespace xlens::runtime {

#ifndef XLENS_HAVE_ONEDNN

bool OneDnnAvailable() { return false; }
bool IsOneDnnFusion(const HloInstruction&) { return false; }
int64_t SmallProductLimit() { return 0; }
void SetSmallProductLimit(int64_t) {}
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
int64_t OneDnnThunk::Parts() const { return 0; }

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

const dnnl::engine& CpuEngine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// Each thread of the runtime's pool runs its part of a call on its own stream, and oneDNN stays
// on that thread: Debian builds oneDNN with OpenMP, whose own team would compete with the pool
// for the same cores (its spinning waits cost a scheduler tick per call on a busy machine).
dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream = [] {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
    omp_set_num_threads(1);
#endif
    return dnnl::stream(CpuEngine());
  }();
  return stream;
}

// oneDNN sizes a primitive's parallel loops for the threads OpenMP offers when the primitive is
// created, and opens an OpenMP team of that size on every execution even where the executing
// thread allows one: a primitive made on a thread that allows two then runs each part with a
// second, spinning OpenMP thread that competes with the pool for the cores (measured: a matmul
// part 2x slower, and the kernels after it slower while the team spins down). Primitives are
// therefore made with OpenMP held to one thread, as they run.
class SingleThreadedCreation {
 public:
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  SingleThreadedCreation() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~SingleThreadedCreation() { omp_set_num_threads(saved_); }

 private:
  int saved_;
#endif
};

// Runs the parts [0, tasks) of one call over the pool (inline without one, or for one part). For
// each part, `bind(t, args, stream)` fills the part's arguments and returns the part (its
// primitive and scratchpad size); the part then runs on its thread's stream with that thread's
// scratchpad. The first oneDNN error, if any, is the call's.
template <typename BindPart>
Status ExecutePartsOnPool(ThreadPool* pool, int64_t tasks, const std::string& name, BindPart bind) {
  std::atomic<bool> failed{false};
  std::string failure;
  std::mutex failure_mu;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      try {
        std::unordered_map<int, dnnl::memory> args;
        dnnl::stream& stream = ThreadStream();
        const auto& part = bind(t, args, stream);
        thread_local std::vector<char> scratchpad;
        if (scratchpad.size() < part.scratchpad.get_size()) scratchpad.resize(part.scratchpad.get_size());
        args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(part.scratchpad, CpuEngine(), scratchpad.data());
        part.primitive.execute(stream, args);
        stream.wait();
      } catch (const dnnl::error& e) {
        std::lock_guard<std::mutex> lock(failure_mu);
        failed = true;
        failure = e.what();
      }
    }
  };
  if (pool == nullptr || tasks == 1) {
    run(0, tasks);
  } else {
    pool->ParallelFor(tasks, 1, run);
  }
  if (failed) return Error(fmt::format("{}: oneDNN: {}", name, failure));
  return OkStatus();
}

// A forward convolution with a 1x1 window, unit strides and no padding over channels-last images
// is the product [images x pixels, in] x [in, out]. Its weights, unless they are constants
// (reordered once and kept), would be reordered into oneDNN's blocked layout on every call, or
// read as they lie by its im2col kernel (gemm:jit); as a matmul, brgemm reads them as they lie
// (any order of the two channel dimensions) and the rows are split over the pool as any
// product's are. Measured in ResNet50 at batch 1 (64x64 images), the 23 such layers that went to
// gemm:jit took 16.4 ms of a step there and 5.1 ms as matmuls.
struct PointwiseProduct {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool lhs_transposed = false, rhs_transposed = false;

  static std::optional<PointwiseProduct> Of(const OneDnnCall& call, bool constant_weights) {
    const OneDnnConvolution& c = call.convolution;
    if (!call.is_convolution || constant_weights || c.kind != OneDnnConvolution::Kind::kForward || c.groups > 1) {
      return std::nullopt;
    }
    auto all = [](const std::vector<int64_t>& v, int64_t x) {
      return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
    };
    if (!all(c.kernel_spatial, 1) || !all(c.strides, 1) || !all(c.padding_low, 0) || !all(c.padding_high, 0) ||
        c.src_spatial != c.dst_spatial || c.weights_strides.size() < 2) {
      return std::nullopt;
    }
    PointwiseProduct p;
    p.m = c.images;
    for (int64_t d : c.src_spatial) p.m *= d;
    p.k = c.input_channels;
    p.n = c.output_channels;
    const int64_t out_stride = c.weights_strides[0], in_stride = c.weights_strides[1];
    if (in_stride == p.n && out_stride == 1) {
      p.rhs_transposed = false;  // [in, out] row-major (HWIO, IOHW)
    } else if (out_stride == p.k && in_stride == 1) {
      p.rhs_transposed = true;  // [out, in] row-major (OIHW, OHWI)
    } else {
      return std::nullopt;
    }
    return p;
  }
};

}  // namespace

bool OneDnnAvailable() { return true; }

namespace {
// About the size at which a oneDNN call's fixed cost (1.5 us) is its brgemm kernel's time for the
// product: measured on the LSTM and attention products of the model corpus.
std::atomic<int64_t> small_product_limit{int64_t{1} << 15};
}  // namespace

int64_t SmallProductLimit() { return small_product_limit.load(); }
void SetSmallProductLimit(int64_t multiply_adds) { small_product_limit.store(multiply_adds); }

bool IsOneDnnFusion(const HloInstruction& fusion) { return MatchOneDnnCall(fusion).has_value(); }

// The call is split into parts that the pool runs in parallel: blocks of rows of each batch
// element for a matmul, blocks of images for a convolution. Parts of the same size share one
// primitive (at most two sizes: the block and the remainder).
struct OneDnnThunk::Impl {
  struct Part {
    dnnl::primitive primitive;
    dnnl::memory::desc src, weights, dst, scratchpad;
    std::vector<dnnl::memory::desc> addends;  // one per kAdd post-op
    // A transposed lhs split into blocks of rows is strided in both dimensions, which oneDNN's
    // fast matmul (brgemm) refuses and its fallback (gemm:jit) runs with a 30-40 ms code
    // generation at its first call: the block is packed into a row-major buffer first.
    bool pack_src = false;
    dnnl::reorder pack;
    dnnl::memory::desc strided_src;
  };
  bool is_convolution = false;
  // A product under SmallProductLimit: computed by SmallProduct, then its post-ops, no oneDNN.
  bool small = false;
  SmallProductShape small_shape;
  std::vector<OneDnnPostOp> post_ops;
  std::map<int64_t, Part> parts;  // by rows (matmul) or images (convolution)
  int64_t lhs_slot = -1, rhs_slot = -1, output_slot = -1;
  std::vector<int> addend_post_ops;      // the post-op index of each addend
  std::vector<int64_t> addend_slots;
  std::vector<OneDnnPostOp::Addend> addend_kinds;
  // Matmul: batch x blocks of `block` rows out of m (or columns out of n); element offsets per
  // batch element, row and column.
  // Convolution: blocks of `block` images out of `total`.
  int64_t batch = 1, total = 0, block = 0, blocks = 1;
  bool split_rows = true;  // matmul: parts are blocks of rows (else of columns)
  int64_t src_step = 0, src_row_step = 0, weights_step = 0, weights_column_step = 0;
  int64_t dst_step = 0, dst_row_step = 0;
  // Convolution weights lie in any order of their dimensions; oneDNN may want them blocked:
  // reordered once per call into a buffer made with the thunk (the weights may change between
  // calls). For backward weights the other way: the parts' partial sums, in oneDNN's layout,
  // are added up and reordered into the result.
  OneDnnConvolution::Kind convolution_kind = OneDnnConvolution::Kind::kForward;
  bool reorder_weights = false;
  // Weights that are constants of the program are reordered once, at the first call, and kept.
  bool constant_weights = false;
  mutable std::mutex weights_mutex;
  mutable bool weights_ready = false;
  dnnl::memory::desc user_weights_md;
  mutable dnnl::memory weights_buffer;
  mutable std::vector<dnnl::memory> partial_weights;  // backward weights: one per part
  // A forward convolution of one image split into bands of output rows (its first spatial
  // dimension), each band its own primitive over the input rows it reads (the top and bottom
  // bands keep the padding); empty when the call runs in parts of images.
  struct Band {
    Part part;
    int64_t src_offset = 0, dst_offset = 0;  // elements
  };
  std::vector<Band> bands;
  std::string implementation;

  Status BuildConvolution(const OneDnnCall& call, const std::string& name, int64_t parallelism,
                          const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes);
  Status ExecuteConvolution(char** frame, ExecuteContext& context, const std::string& name) const;
  void BuildBands(const OneDnnConvolution& c, int64_t count, const dnnl::memory::desc& weights_md,
                  const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes);
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
  impl.constant_weights = fusion.operand(call->rhs_parameter)->opcode() == HloOpcode::kConstant;
  const std::optional<PointwiseProduct> pointwise = PointwiseProduct::Of(*call, impl.constant_weights);
  impl.is_convolution = call->is_convolution && !pointwise;
  impl.lhs_slot = operand_slots.at(call->lhs_parameter);
  impl.rhs_slot = operand_slots.at(call->rhs_parameter);
  impl.output_slot = output_slot;
  const HloInstruction& core = *call->core;
  const int64_t parallelism = ThreadPool::Default().parallelism();

  dnnl::post_ops post_ops;
  for (size_t i = 0; i < call->post_ops.size(); ++i) {
    const OneDnnPostOp& op = call->post_ops[i];
    switch (op.kind) {
      case OneDnnPostOp::Kind::kAdd:
        impl.addend_post_ops.push_back(static_cast<int>(i));
        impl.addend_slots.push_back(operand_slots.at(op.parameter));
        impl.addend_kinds.push_back(op.addend);
        break;
      case OneDnnPostOp::Kind::kRelu:
      case OneDnnPostOp::Kind::kGeluTanh:
      case OneDnnPostOp::Kind::kGeluErf:
      case OneDnnPostOp::Kind::kLinear:
      case OneDnnPostOp::Kind::kLogistic:
        break;
    }
  }
  // The post-ops for a part whose addends are `addends` (in post-op order).
  auto attributes = [&](const std::vector<dnnl::memory::desc>& addends) -> dnnl::primitive_attr {
    dnnl::post_ops po;
    size_t next = 0;
    for (const OneDnnPostOp& op : call->post_ops) {
      switch (op.kind) {
        case OneDnnPostOp::Kind::kAdd:
          po.append_binary(dnnl::algorithm::binary_add, addends[next++]);
          break;
        case OneDnnPostOp::Kind::kRelu:
          po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
          break;
        case OneDnnPostOp::Kind::kGeluTanh:
          po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
          break;
        case OneDnnPostOp::Kind::kGeluErf:
          po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
          break;
        case OneDnnPostOp::Kind::kLinear:
          po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, static_cast<float>(op.alpha),
                            static_cast<float>(op.beta));
          break;
        case OneDnnPostOp::Kind::kLogistic:
          po.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
          break;
      }
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    // Parts run at once on several threads; oneDNN's own scratchpad is one global buffer unless
    // built for concurrent execution, so each thread passes its own.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
  };
  try {
    SingleThreadedCreation single_threaded;
    if (!impl.is_convolution) {
      PointwiseProduct product;
      if (pointwise) {
        product = *pointwise;
      } else {
        const Shape& lhs = core.operand(0)->shape();  // [batch..., m, k] as the dot reads it
        const Shape& rhs = core.operand(1)->shape();  // [batch..., k, n]
        const int64_t rank = lhs.rank();
        for (int64_t i = 0; i < rank - 2; ++i) product.batch *= lhs.dimensions(i);
        product.m = lhs.dimensions(rank - 2);
        product.k = lhs.dimensions(rank - 1);
        product.n = rhs.dimensions(rank - 1);
        product.lhs_transposed = call->lhs_transposed;
        product.rhs_transposed = call->rhs_transposed;
      }
      impl.batch = product.batch;
      const int64_t m = product.m, k = product.k, n = product.n;
      const bool lhs_transposed = product.lhs_transposed, rhs_transposed = product.rhs_transposed;
      impl.small = impl.batch * m * n * k <= SmallProductLimit();
      if (impl.small) {
        impl.small_shape = {impl.batch, m, k, n, lhs_transposed, rhs_transposed};
        impl.post_ops = call->post_ops;
        impl.implementation = std::string("small-product:") + SmallProductIsa();
      }
      // Enough parts for every thread, split along rows where there are enough of them: a block
      // of rows keeps every operand dense, which oneDNN's brgemm kernels need (a column block is
      // a strided matrix they refuse, leaving it to gemm:jit, slower to start and to run). A
      // column split is the fallback for products with few rows.
      auto build = [&](bool split_rows, int64_t max_parts) {
        impl.parts.clear();
        impl.split_rows = split_rows;
        const int64_t extent = split_rows ? m : n;
        // Parts of at least 16 rows or columns and 2^16 multiply-adds: a small product is not
        // worth waking a thread for.
        const int64_t worth = std::max<int64_t>(1, impl.batch * m * n * k / (int64_t{1} << 16));
        const int64_t per_batch = std::clamp<int64_t>(
            (std::min({parallelism, worth, max_parts}) + impl.batch - 1) / impl.batch, 1,
            std::max<int64_t>(1, extent / 16));
        impl.total = extent;
        impl.block = (extent + per_batch - 1) / per_batch;
        impl.blocks = (extent + impl.block - 1) / impl.block;
        bool reference = false;
        for (int64_t count : {impl.block, extent - (impl.blocks - 1) * impl.block}) {
          if (impl.parts.count(count)) continue;
          const int64_t rows = split_rows ? count : m, cols = split_rows ? n : count;
          Impl::Part part;
          // A transposed operand is stored [.., k, m] (or [.., n, k]): the same logical matrix
          // with swapped strides; a part keeps the full matrices' leading dimensions.
          part.src = dnnl::memory::desc({rows, k}, dt::f32, lhs_transposed ? dims{1, m} : dims{k, 1});
          if (lhs_transposed && rows < m) {
            part.pack_src = true;
            part.strided_src = part.src;
            part.src = dnnl::memory::desc({rows, k}, dt::f32, dims{k, 1});
            part.pack = dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), part.strided_src,
                                                                    CpuEngine(), part.src));
          }
          part.weights = dnnl::memory::desc({k, cols}, dt::f32, rhs_transposed ? dims{1, k} : dims{n, 1});
          part.dst = dnnl::memory::desc({rows, cols}, dt::f32, dims{n, 1});
          for (OneDnnPostOp::Addend a : impl.addend_kinds) {
            if (a == OneDnnPostOp::Addend::kFull) {
              part.addends.push_back(dnnl::memory::desc({rows, cols}, dt::f32, dims{n, 1}));
            } else if (a == OneDnnPostOp::Addend::kLastDimension) {
              part.addends.push_back(dnnl::memory::desc({1, cols}, dt::f32, dims{cols, 1}));
            } else {
              part.addends.push_back(dnnl::memory::desc({1, 1}, dt::f32, dims{1, 1}));
            }
          }
          dnnl::matmul::desc desc(part.src, part.weights, part.dst);
          dnnl::matmul::primitive_desc pd(desc, attributes(part.addends), CpuEngine());
          part.primitive = dnnl::matmul(pd);
          part.scratchpad = pd.scratchpad_desc();
          impl.implementation = pd.impl_info_str();
          reference |= impl.implementation.rfind("ref", 0) == 0;
          impl.parts.emplace(count, std::move(part));
        }
        return !reference;
      };
      // With too few rows to share, a product small enough to run in tens of microseconds stays
      // whole on one thread rather than going to gemm:jit in column blocks.
      // A pointwise convolution's weights split in columns would go to gemm:jit as well (measured:
      // DenseNet121's 1024-to-512 one on 4x4 images 3x slower on two threads than brgemm on one).
      const bool rows_suffice = m >= 16 * std::min<int64_t>(parallelism, 2) || m >= n || pointwise;
      const bool small = impl.batch * m * n * k < (int64_t{1} << 22);
      const int64_t unlimited = std::numeric_limits<int64_t>::max();
      if (impl.small) {
        impl.blocks = 1;
      } else if (!build(rows_suffice || small, rows_suffice || !small ? unlimited : 1)) {
        build(true, unlimited);
      }
      impl.src_step = m * k;
      impl.src_row_step = lhs_transposed ? 1 : k;
      impl.weights_step = k * n;
      impl.weights_column_step = rhs_transposed ? k : 1;
      impl.dst_step = m * n;
      impl.dst_row_step = n;
    } else {
      RETURN_IF_ERROR(impl.BuildConvolution(*call, thunk->hlo_name(), parallelism, attributes));
    }
  } catch (const dnnl::error& e) {
    return Error(fmt::format("{}: oneDNN refused {}: {}", thunk->hlo_name(), call->ToString(), e.what()));
  }
  thunk->description_ = call->ToString() + (pointwise ? " as matmul" : "");
  thunk->implementation_ = impl.implementation;
  return thunk;
}

Status OneDnnThunk::Impl::BuildConvolution(
    const OneDnnCall& call, const std::string& name, int64_t parallelism,
    const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes) {
  using Kind = OneDnnConvolution::Kind;
  const OneDnnConvolution& c = call.convolution;
  convolution_kind = c.kind;
  // Made under Create's SingleThreadedCreation: backward weights, too, fixes its OpenMP team
  // when the primitive is made.
  // The activations are channels-last arrays of `count` images; a part starts at an image.
  auto activation = [](int64_t count, int64_t channels, const std::vector<int64_t>& spatial) {
    dims d{count, channels};
    d.insert(d.end(), spatial.begin(), spatial.end());
    return dnnl::memory::desc(d, dt::f32, ChannelsLast(d.size()));
  };
  dims weights{c.output_channels, c.input_channels};
  dims weights_strides(c.weights_strides.begin(), c.weights_strides.end());
  if (c.groups > 1) {  // oneDNN's grouped weights: (group, output in group, input in group, spatial...)
    weights = {c.groups, c.output_channels / c.groups, c.input_channels / c.groups};
    weights_strides.insert(weights_strides.begin(), c.group_stride);
  }
  weights.insert(weights.end(), c.kernel_spatial.begin(), c.kernel_spatial.end());
  user_weights_md = dnnl::memory::desc(weights, dt::f32, weights_strides);
  src_step = c.input_channels;
  for (int64_t d : c.src_spatial) src_step *= d;
  dst_step = c.output_channels;
  for (int64_t d : c.dst_spatial) dst_step *= d;
  const dims strides(c.strides.begin(), c.strides.end()), dilates(c.dilations.begin(), c.dilations.end());
  const dims padding_l(c.padding_low.begin(), c.padding_low.end());
  const dims padding_r(c.padding_high.begin(), c.padding_high.end());
  total = c.images;
  block = (total + parallelism - 1) / parallelism;
  blocks = (total + block - 1) / block;
  const dnnl::memory::desc any_weights(weights, dt::f32, dnnl::memory::format_tag::any);
  // The parts' primitives for weights in `weights_md` (oneDNN's choice when it is `any`).
  auto build = [&](const dnnl::memory::desc& weights_md) {
    parts.clear();
    for (int64_t count : {block, total - (blocks - 1) * block}) {
      if (parts.count(count)) continue;
      Part part;
      part.src = activation(count, c.input_channels, c.src_spatial);
      part.dst = activation(count, c.output_channels, c.dst_spatial);
      for (OneDnnPostOp::Addend a : addend_kinds) {
        dims d(part.dst.dims().size(), 1);
        if (a == OneDnnPostOp::Addend::kFull) d = part.dst.dims();
        if (a == OneDnnPostOp::Addend::kLastDimension) d[1] = c.output_channels;
        part.addends.push_back(dnnl::memory::desc(d, dt::f32, ChannelsLast(d.size())));
      }
      const dnnl::primitive_attr attr = attributes(part.addends);
      auto forward = [&](dnnl::prop_kind prop) {
        return dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, part.src,
                                               weights_md, part.dst, strides, dilates, padding_l, padding_r);
      };
      if (c.kind == Kind::kForward) {
        dnnl::convolution_forward::primitive_desc pd(forward(dnnl::prop_kind::forward_inference), attr, CpuEngine());
        part.primitive = dnnl::convolution_forward(pd);
        part.scratchpad = pd.scratchpad_desc();
        part.weights = pd.weights_desc();
        implementation = pd.impl_info_str();
      } else {
        // A backward primitive is chosen to match a forward one (its hint).
        const dnnl::convolution_forward::primitive_desc hint(forward(dnnl::prop_kind::forward_training), CpuEngine());
        if (c.kind == Kind::kBackwardData) {
          dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, part.src, weights_md,
                                                     part.dst, strides, dilates, padding_l, padding_r);
          dnnl::convolution_backward_data::primitive_desc pd(desc, attr, CpuEngine(), hint);
          part.primitive = dnnl::convolution_backward_data(pd);
          part.scratchpad = pd.scratchpad_desc();
          part.weights = pd.weights_desc();
          implementation = pd.impl_info_str();
        } else {
          dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, part.src, weights_md,
                                                        part.dst, strides, dilates, padding_l, padding_r);
          dnnl::convolution_backward_weights::primitive_desc pd(desc, attr, CpuEngine(), hint);
          part.primitive = dnnl::convolution_backward_weights(pd);
          part.scratchpad = pd.scratchpad_desc();
          part.weights = pd.diff_weights_desc();
          implementation = pd.impl_info_str();
        }
      }
      parts.emplace(count, std::move(part));
    }
  };
  build(any_weights);
  // A forward convolution whose weights outweigh its activations (the late layers of a network
  // at batch 1: 9 MB of 3x3x512x512 weights against 2x2 images) is bound by reading them. When
  // they change between calls (variables), reordering them into oneDNN's blocked layout every
  // call reads and writes them once more than the convolution itself: it runs on the weights as
  // they lie where oneDNN has a direct kernel for them, or where they outweigh the images so far
  // that the product is a few rows against the whole kernel and oneDNN's im2col kernel (gemm:jit)
  // is a matrix-vector pass over it. Between the two, gemm:jit is the slower: measured on
  // ResNet50's layers at batch 1 (64x64 images), it ran 8x8 and 4x4 images with 18-30x their
  // bytes in weights at 6-25 GFLOP/s, a third to a fifth of the reorder and brgconv together,
  // and only the 2x2 images of the last stage (weights 500x the images) faster, by 2x.
  if (c.kind == Kind::kForward && !constant_weights && parts.begin()->second.weights != user_weights_md) {
    const int64_t weight_bytes = static_cast<int64_t>(user_weights_md.get_size());
    const int64_t image_bytes = total * (src_step + dst_step) * static_cast<int64_t>(sizeof(float));
    if (weight_bytes >= image_bytes) {
      try {
        build(user_weights_md);
        const bool im2col = implementation.find("gemm") != std::string::npos;
        if (implementation.rfind("ref", 0) == 0 || (im2col && weight_bytes < 64 * image_bytes)) {
          build(any_weights);
        }
      } catch (const dnnl::error&) {
        build(any_weights);
      }
    }
  }
  // Every part must agree on the weights' layout, as they share one reordered copy (or add up
  // their partial sums element by element).
  const dnnl::memory::desc& chosen = parts.begin()->second.weights;
  for (const auto& [count, part] : parts) {
    if (part.weights != chosen) return Error(name + ": oneDNN parts disagree on the weights' layout");
  }
  reorder_weights = chosen != user_weights_md;
  // One image is one part on one thread: where it has rows enough and 2^20 multiply-adds per
  // band (a band's call then outlasts waking a thread), it runs in bands over the pool instead,
  // on the same weights (one reorder serves them all). Each band reads all the weights: not for
  // weights past a core's L2 (ResNet50's last stage, 9 MB each, ran 25% slower in two bands),
  // nor on the im2col kernel such weights get. Bands that oneDNN would run on another weights
  // layout or its reference kernel leave the call whole.
  const bool bands_reread_little = user_weights_md.get_size() <= (size_t{1} << 20) &&
                                   implementation.find("gemm") == std::string::npos;
  if (c.kind == Kind::kForward && total == 1 && parallelism > 1 && !c.dst_spatial.empty() && bands_reread_little) {
    int64_t macs = dst_step * c.input_channels;
    for (int64_t k : c.kernel_spatial) macs *= k;
    const int64_t count = std::min({parallelism, c.dst_spatial[0], macs >> 20});
    if (count >= 2) {
      try {
        BuildBands(c, count, chosen, attributes);
      } catch (const dnnl::error&) {
        bands.clear();
      }
    }
  }
  if (c.kind != Kind::kBackwardWeights) {
    if (reorder_weights) weights_buffer = dnnl::memory(chosen, CpuEngine());
  } else if (blocks > 1 || reorder_weights) {
    for (int64_t t = 0; t < blocks; ++t) partial_weights.push_back(dnnl::memory(chosen, CpuEngine()));
  }
  return OkStatus();
}

void OneDnnThunk::Impl::BuildBands(
    const OneDnnConvolution& c, int64_t count, const dnnl::memory::desc& weights_md,
    const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes) {
  bands.clear();
  const int64_t rows = c.dst_spatial[0], height = c.src_spatial[0];
  const int64_t src_row = src_step / height, dst_row = dst_step / rows;
  // The input rows a window spans: (kernel - 1) * (dilation + 1) + 1 (oneDNN's dilation 0 is dense).
  const int64_t extent = (c.kernel_spatial[0] - 1) * (c.dilations[0] + 1) + 1;
  for (int64_t t = 0; t < count; ++t) {
    const int64_t first = t * rows / count, last = (t + 1) * rows / count;  // output rows [first, last)
    // The input rows [low, high) the band's windows cover, padding included, and the part of them
    // that is the input; what lies outside is the band's own padding.
    const int64_t low = first * c.strides[0] - c.padding_low[0];
    const int64_t high = (last - 1) * c.strides[0] - c.padding_low[0] + extent;
    const int64_t in_low = std::max<int64_t>(0, low), in_high = std::min(height, high);
    if (in_high <= in_low) {  // a band of padding only: not worth a case of its own
      bands.clear();
      return;
    }
    dims src{1, c.input_channels, in_high - in_low}, dst{1, c.output_channels, last - first};
    src.insert(src.end(), c.src_spatial.begin() + 1, c.src_spatial.end());
    dst.insert(dst.end(), c.dst_spatial.begin() + 1, c.dst_spatial.end());
    dims padding_l(c.padding_low.begin(), c.padding_low.end()), padding_r(c.padding_high.begin(), c.padding_high.end());
    padding_l[0] = in_low - low;
    padding_r[0] = high - in_high;
    Band band;
    band.part.src = dnnl::memory::desc(src, dt::f32, ChannelsLast(src.size()));
    band.part.dst = dnnl::memory::desc(dst, dt::f32, ChannelsLast(dst.size()));
    for (OneDnnPostOp::Addend a : addend_kinds) {
      dims d(dst.size(), 1);
      if (a == OneDnnPostOp::Addend::kFull) d = dst;
      if (a == OneDnnPostOp::Addend::kLastDimension) d[1] = c.output_channels;
      band.part.addends.push_back(dnnl::memory::desc(d, dt::f32, ChannelsLast(d.size())));
    }
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                         band.part.src, weights_md, band.part.dst,
                                         dims(c.strides.begin(), c.strides.end()),
                                         dims(c.dilations.begin(), c.dilations.end()), padding_l, padding_r);
    dnnl::convolution_forward::primitive_desc pd(desc, attributes(band.part.addends), CpuEngine());
    if (pd.weights_desc() != weights_md || std::string(pd.impl_info_str()).rfind("ref", 0) == 0) {
      bands.clear();
      return;
    }
    band.part.primitive = dnnl::convolution_forward(pd);
    band.part.scratchpad = pd.scratchpad_desc();
    band.part.weights = weights_md;
    band.src_offset = in_low * src_row;
    band.dst_offset = first * dst_row;
    bands.push_back(std::move(band));
  }
}

Status OneDnnThunk::Impl::ExecuteConvolution(char** frame, ExecuteContext& context,
                                             const std::string& name) const {
  using Kind = OneDnnConvolution::Kind;
  float* lhs = reinterpret_cast<float*>(frame[lhs_slot]);
  float* rhs = reinterpret_cast<float*>(frame[rhs_slot]);
  float* output = reinterpret_cast<float*>(frame[output_slot]);
  float* weights = rhs;
  try {
    if (convolution_kind != Kind::kBackwardWeights && reorder_weights) {
      std::unique_lock<std::mutex> lock(weights_mutex, std::defer_lock);
      if (constant_weights) lock.lock();
      if (!constant_weights || !weights_ready) {
        dnnl::memory user(user_weights_md, CpuEngine(), rhs);
        dnnl::reorder(user, weights_buffer).execute(ThreadStream(), user, weights_buffer);
        ThreadStream().wait();
        weights_ready = constant_weights;
      }
      weights = static_cast<float*>(weights_buffer.get_data_handle());
    }
  } catch (const dnnl::error& e) {
    return Error(fmt::format("{}: oneDNN: {}", name, e.what()));
  }
  auto bind_part = [&](int64_t t, std::unordered_map<int, dnnl::memory>& args,
                       dnnl::stream&) -> const Part& {
    auto bind = [&](int arg, const dnnl::memory::desc& md, void* data) {
      args[arg] = dnnl::memory(md, CpuEngine(), data);
    };
    if (!bands.empty()) {
      const Band& band = bands[t];
      bind(DNNL_ARG_SRC, band.part.src, lhs + band.src_offset);
      bind(DNNL_ARG_WEIGHTS, band.part.weights, weights);
      bind(DNNL_ARG_DST, band.part.dst, output + band.dst_offset);
      for (size_t a = 0; a < addend_slots.size(); ++a) {
        float* addend = reinterpret_cast<float*>(frame[addend_slots[a]]);
        if (addend_kinds[a] == OneDnnPostOp::Addend::kFull) addend += band.dst_offset;
        bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(addend_post_ops[a]) | DNNL_ARG_SRC_1, band.part.addends[a], addend);
      }
      return band.part;
    }
    const int64_t first = t * block;
    const Part& part = parts.at(std::min(block, total - first));
    float* src = lhs + first * src_step;
    switch (convolution_kind) {
      case Kind::kForward:
        bind(DNNL_ARG_SRC, part.src, src);
        bind(DNNL_ARG_WEIGHTS, part.weights, weights);
        bind(DNNL_ARG_DST, part.dst, output + first * dst_step);
        for (size_t a = 0; a < addend_slots.size(); ++a) {
          float* addend = reinterpret_cast<float*>(frame[addend_slots[a]]);
          if (addend_kinds[a] == OneDnnPostOp::Addend::kFull) addend += first * dst_step;
          bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(addend_post_ops[a]) | DNNL_ARG_SRC_1, part.addends[a], addend);
        }
        break;
      case Kind::kBackwardData:
        bind(DNNL_ARG_DIFF_DST, part.dst, lhs + first * dst_step);
        bind(DNNL_ARG_WEIGHTS, part.weights, weights);
        bind(DNNL_ARG_DIFF_SRC, part.src, output + first * src_step);
        break;
      case Kind::kBackwardWeights:
        bind(DNNL_ARG_SRC, part.src, src);
        bind(DNNL_ARG_DIFF_DST, part.dst, rhs + first * dst_step);
        bind(DNNL_ARG_DIFF_WEIGHTS, part.weights,
             partial_weights.empty() ? output : partial_weights[t].get_data_handle());
        break;
    }
    return part;
  };
  const int64_t tasks = bands.empty() ? blocks : static_cast<int64_t>(bands.size());
  RETURN_IF_ERROR(ExecutePartsOnPool(context.pool, tasks, name, bind_part));
  if (partial_weights.empty()) return OkStatus();
  // Backward weights in parts: each part summed its images; the kernel's gradient is the sum.
  float* sum = static_cast<float*>(partial_weights[0].get_data_handle());
  const size_t elements = partial_weights[0].get_desc().get_size() / sizeof(float);
  for (size_t p = 1; p < partial_weights.size(); ++p) {
    const float* part = static_cast<const float*>(partial_weights[p].get_data_handle());
    for (size_t e = 0; e < elements; ++e) sum[e] += part[e];
  }
  try {
    if (reorder_weights) {
      dnnl::memory user(user_weights_md, CpuEngine(), output);
      dnnl::reorder(partial_weights[0], user).execute(ThreadStream(), partial_weights[0], user);
      ThreadStream().wait();
    } else {
      std::memcpy(output, sum, elements * sizeof(float));
    }
  } catch (const dnnl::error& e) {
    return Error(fmt::format("{}: oneDNN: {}", name, e.what()));
  }
  return OkStatus();
}

Status OneDnnThunk::Execute(char** frame, ExecuteContext& context) const {
  const Impl& impl = *impl_;
  if (impl.is_convolution) return impl.ExecuteConvolution(frame, context, hlo_name());
  if (impl.small) {
    const SmallProductShape& s = impl.small_shape;
    float* output = reinterpret_cast<float*>(frame[impl.output_slot]);
    const int64_t size = s.batch * s.m * s.n;
    // An output that shares its buffer with an operand (a residual added in place) is computed
    // aside first: the loops write outputs before the post-ops read the addends.
    std::vector<const float*> addends;
    for (int64_t slot : impl.addend_slots) addends.push_back(reinterpret_cast<const float*>(frame[slot]));
    bool shared = frame[impl.lhs_slot] == frame[impl.output_slot] || frame[impl.rhs_slot] == frame[impl.output_slot];
    for (const float* a : addends) shared |= a == output;
    thread_local std::vector<float> aside;
    float* result = output;
    if (shared) {
      if (static_cast<int64_t>(aside.size()) < size) aside.resize(size);
      result = aside.data();
    }
    SmallProduct(s, reinterpret_cast<const float*>(frame[impl.lhs_slot]),
                 reinterpret_cast<const float*>(frame[impl.rhs_slot]), result);
    ApplySmallProductPostOps(impl.post_ops, addends, s.batch * s.m, s.n, result);
    if (shared) std::memcpy(output, result, size * sizeof(float));
    return OkStatus();
  }
  const int64_t tasks = impl.batch * impl.blocks;
  float* lhs = reinterpret_cast<float*>(frame[impl.lhs_slot]);
  float* rhs = reinterpret_cast<float*>(frame[impl.rhs_slot]);
  float* output = reinterpret_cast<float*>(frame[impl.output_slot]);
  auto bind_part = [&](int64_t t, std::unordered_map<int, dnnl::memory>& args,
                       dnnl::stream& stream) -> const Impl::Part& {
    int64_t src_offset, weights_offset = 0, dst_offset, count, bias_offset = 0;
    {
      const int64_t b = t / impl.blocks, first = (t % impl.blocks) * impl.block;
      count = std::min(impl.block, impl.total - first);
      const int64_t r0 = impl.split_rows ? first : 0, c0 = impl.split_rows ? 0 : first;
      src_offset = b * impl.src_step + r0 * impl.src_row_step;
      weights_offset = b * impl.weights_step + c0 * impl.weights_column_step;
      dst_offset = b * impl.dst_step + r0 * impl.dst_row_step + c0;
      bias_offset = c0;
    }
    const Impl::Part& part = impl.parts.at(count);
    if (part.pack_src) {
      thread_local std::vector<float> packed;
      const size_t size = part.src.get_size() / sizeof(float);
      if (packed.size() < size) packed.resize(size);
      dnnl::memory from(part.strided_src, CpuEngine(), lhs + src_offset);
      dnnl::memory to(part.src, CpuEngine(), packed.data());
      part.pack.execute(stream, from, to);
      args[DNNL_ARG_SRC] = to;
    } else {
      args[DNNL_ARG_SRC] = dnnl::memory(part.src, CpuEngine(), lhs + src_offset);
    }
    args[DNNL_ARG_WEIGHTS] = dnnl::memory(part.weights, CpuEngine(), rhs + weights_offset);
    args[DNNL_ARG_DST] = dnnl::memory(part.dst, CpuEngine(), output + dst_offset);
    for (size_t a = 0; a < impl.addend_slots.size(); ++a) {
      float* addend = reinterpret_cast<float*>(frame[impl.addend_slots[a]]);
      if (impl.addend_kinds[a] == OneDnnPostOp::Addend::kFull) addend += dst_offset;
      if (impl.addend_kinds[a] == OneDnnPostOp::Addend::kLastDimension) addend += bias_offset;
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(impl.addend_post_ops[a]) | DNNL_ARG_SRC_1] =
          dnnl::memory(part.addends[a], CpuEngine(), addend);
    }
    return part;
  };
  return ExecutePartsOnPool(context.pool, tasks, hlo_name(), bind_part);
}

int64_t OneDnnThunk::Parts() const {
  if (impl_->small) return 1;
  if (!impl_->bands.empty()) return static_cast<int64_t>(impl_->bands.size());
  return impl_->is_convolution ? impl_->blocks : impl_->batch * impl_->blocks;
}

std::string OneDnnThunk::ToString(int indent) const {
  return fmt::format("{:{}}library-call {} (oneDNN {}; kernel {}; {} part{} on the pool)\n", "",
                     indent, hlo_name(), description_, implementation_,
                     Parts(), Parts() == 1 ? "" : "s");
}

#endif

}  // namespace xlens::runtime

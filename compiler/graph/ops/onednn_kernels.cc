#include "compiler/graph/ops/onednn_kernels.h"

#ifdef XLENS_HAVE_ONEDNN
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "compiler/support/single_openmp_thread.h"
#include "compiler/support/thread_pool.h"
#endif

namespace xlens::graph::onednn {

#ifndef XLENS_HAVE_ONEDNN

bool Available() { return false; }
Status Conv2DForward(const ConvGeometry&, const float*, const float*, const float*, const PostOps&,
                     float*, ThreadPool*, PackedFilter*) {
  return Status::Error("this build has no oneDNN");
}
Status Conv2DForward(const ConvGeometry&, const float*, const float*, const float*, bool, float*,
                     ThreadPool*, PackedFilter*) {
  return Status::Error("this build has no oneDNN");
}
Status Conv2DBackwardData(const ConvGeometry&, const float*, const float*, float*, ThreadPool*,
                          PackedFilter*) {
  return Status::Error("this build has no oneDNN");
}
Status Conv2DBackwardWeights(const ConvGeometry&, const float*, const float*, float*, ThreadPool*) {
  return Status::Error("this build has no oneDNN");
}
Status MatMul(const float*, bool, const float*, bool, int64_t, int64_t, int64_t, const float*,
              float*, ThreadPool*) {
  return Status::Error("this build has no oneDNN");
}

#else

namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using Args = std::unordered_map<int, dnnl::memory>;

const dnnl::engine& Engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& Stream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

void* Scratch(size_t bytes, int slot) {
  thread_local std::vector<char> buffers[2];
  if (buffers[slot].size() < bytes) buffers[slot].resize(bytes);
  return buffers[slot].data();
}

template <typename T, typename Make>
std::shared_ptr<const T> Cached(const std::vector<int64_t>& key, Make make) {
  static std::mutex mu;
  static auto* cache = new std::map<std::vector<int64_t>, std::shared_ptr<const T>>();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  std::shared_ptr<const T> made = make();
  std::lock_guard<std::mutex> lock(mu);
  return cache->emplace(key, std::move(made)).first->second;
}

// A primitive and the layout of the weights (or diff weights) it reads (writes).
struct Primitive {
  dnnl::primitive primitive;
  dnnl::memory::desc weights, scratchpad;
};

// A layout of the filter that parts read, with the reorder into it from HWIO (or out of it, for
// backward weights).
struct Layout {
  dnnl::memory::desc desc;
  dnnl::memory::desc user;  // the HWIO filter, or the block of its output channels a part reads
  int64_t user_offset = 0;  // elements
  bool is_user = true;
  dnnl::reorder reorder;
};

// One part of a call: a primitive over a block of the operands, which start at these offsets (in
// elements) from the call's pointers.
struct Part {
  std::shared_ptr<const Primitive> primitive;
  dnnl::memory::desc src, dst, weights, bias;
  int64_t src_offset = 0, dst_offset = 0, weights_offset = 0, bias_offset = 0;
  int layout = 0;
  // A block of output channels: computed densely into scratch, then copied to its channels.
  int64_t channels = 0;
  // A block of the reduction (a product of few rows): a partial product, added up after.
  bool partial = false;
};

struct Plan {
  std::vector<Part> parts;
  std::vector<std::shared_ptr<const Layout>> layouts;
  dnnl::memory::desc user_weights;
};

int Parallelism(ThreadPool* pool) { return pool != nullptr ? pool->parallelism() : 1; }

// How many parts a call of `work` multiply-adds over `extent` blocks gets: enough that every
// thread has several to take (a thread slowed by another process holds back only its part), none
// so small that waking a thread costs more than it saves. (Two per thread of 2^18 measured no
// faster on ResNet50 and used more CPU on the CNN training step.)
int64_t PartCount(int64_t work, int64_t extent, int parallelism) {
  if (parallelism <= 1) return 1;
  return std::clamp<int64_t>(work / (int64_t{1} << 17), 1, std::min<int64_t>(extent, 4 * parallelism));
}

// Runs fn(part) for every part over the pool; the first oneDNN error is the call's.
template <typename Fn>
Status RunParts(ThreadPool* pool, int64_t parts, const char* what, Fn fn) {
  std::mutex mu;
  std::string failure;
  auto run = [&](int64_t begin, int64_t end) {
    SingleOpenMpThread single;  // the parts of a call are the parallelism (see the header)
    for (int64_t t = begin; t < end; ++t) {
      try {
        fn(t);
      } catch (const dnnl::error& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (failure.empty()) failure = e.what();
      }
    }
  };
  if (pool == nullptr || parts <= 1) {
    run(0, parts);
  } else {
    pool->ParallelFor(parts, 1, run);
  }
  if (!failure.empty()) return Status::Error(std::string("oneDNN ") + what + ": " + failure);
  return OkStatus();
}

void Execute(const Part& part, Args& args) {
  const Primitive& p = *part.primitive;
  args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(p.scratchpad, Engine(), Scratch(p.scratchpad.get_size(), 0));
  p.primitive.execute(Stream(), args);
  Stream().wait();
}

dnnl::memory Mem(const dnnl::memory::desc& md, const float* base, int64_t offset) {
  return dnnl::memory(md, Engine(), const_cast<float*>(base) + offset);
}

enum Kind : int64_t { kForward = 1, kBackwardData, kBackwardWeights, kMatMul };

std::vector<int64_t> ConvKey(int64_t kind, const ConvGeometry& g, int64_t extra) {
  return {kind, extra, g.batch, g.in_rows, g.in_cols, g.in_depth, g.out_rows, g.out_cols,
          g.out_depth, g.k_rows, g.k_cols, g.stride_rows, g.stride_cols, g.dil_rows, g.dil_cols,
          g.pad_top, g.pad_bottom, g.pad_left, g.pad_right, g.groups};
}

dnnl::memory::desc Activations(int64_t n, int64_t c, int64_t h, int64_t w) {
  return dnnl::memory::desc({n, c, h, w}, dt::f32, tag::nhwc);
}
dnnl::memory::desc SrcOf(const ConvGeometry& g) { return Activations(g.batch, g.in_depth, g.in_rows, g.in_cols); }
dnnl::memory::desc DstOf(const ConvGeometry& g) { return Activations(g.batch, g.out_depth, g.out_rows, g.out_cols); }
// The weights as a primitive reads them: OIHW, or GOIHW (oneDNN's grouped form) with groups.
dnnl::memory::desc WeightsOf(const ConvGeometry& g, tag t) {
  if (g.groups > 1) {
    return dnnl::memory::desc({g.groups, g.out_depth / g.groups, g.in_depth / g.groups, g.k_rows, g.k_cols},
                              dt::f32, t);
  }
  return dnnl::memory::desc({g.out_depth, g.in_depth, g.k_rows, g.k_cols}, dt::f32, t);
}
// The user's HWIO filter in those dimensions. Grouped, HWIO's output channels are the groups'
// blocks one after another (TensorFlow's grouping), so G and O are one dimension split in two.
dnnl::memory::desc UserWeightsOf(const ConvGeometry& g) {
  if (g.groups <= 1) return WeightsOf(g, tag::hwio);
  const int64_t og = g.out_depth / g.groups, ig = g.in_depth / g.groups;
  return dnnl::memory::desc({g.groups, og, ig, g.k_rows, g.k_cols}, dt::f32,
                            dims{og, 1, g.out_depth, g.k_cols * ig * g.out_depth, ig * g.out_depth});
}

// A key of the post-ops for the caches: the sum, the activation and its slope's bits.
int64_t PostKey(const PostOps& post) {
  uint32_t alpha_bits;
  std::memcpy(&alpha_bits, &post.alpha, sizeof alpha_bits);
  return (static_cast<int64_t>(alpha_bits) << 8) | (static_cast<int64_t>(post.eltwise) << 1) | post.sum;
}

// oneDNN's eltwise_relu gives 0 for a NaN (vmaxps(x, 0)), where XLA's maximum keeps it (the
// compiler's oneDNN thunks apply their ReLU themselves); these kernels keep oneDNN's, as it is what
// TensorFlow's own _FusedConv2D and _FusedMatMul give on its default oneDNN path (TF 2.21: a NaN
// through Conv2D + BiasAdd + Relu is 0, through LeakyRelu NaN; with TF_ENABLE_ONEDNN_OPTS=0 its
// Eigen epilogue keeps the NaN in both).
dnnl::primitive_attr Attr(const PostOps& post) {
  dnnl::primitive_attr attr;
  dnnl::post_ops po;
  if (post.sum) po.append_sum(1.f);
  switch (post.eltwise) {
    case Eltwise::kNone: break;
    case Eltwise::kRelu: po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f); break;
    case Eltwise::kRelu6: po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, 6.f); break;
    case Eltwise::kElu: po.append_eltwise(1.f, dnnl::algorithm::eltwise_elu, 1.f, 0.f); break;
    case Eltwise::kLeakyRelu:
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, post.alpha, 0.f);
      break;
    case Eltwise::kTanh: po.append_eltwise(1.f, dnnl::algorithm::eltwise_tanh, 0.f, 0.f); break;
    case Eltwise::kSigmoid: po.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f); break;
  }
  if (po.len() > 0) attr.set_post_ops(po);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::convolution_forward::primitive_desc ForwardPd(const ConvGeometry& g, bool bias,
                                                    const PostOps& post, dnnl::prop_kind prop) {
  const dims strides{g.stride_rows, g.stride_cols}, dilates{g.dil_rows - 1, g.dil_cols - 1};
  const dims pad_l{g.pad_top, g.pad_left}, pad_r{g.pad_bottom, g.pad_right};
  const auto algo = dnnl::algorithm::convolution_direct;
  auto desc = bias ? dnnl::convolution_forward::desc(
                         prop, algo, SrcOf(g), WeightsOf(g, tag::any),
                         dnnl::memory::desc({g.out_depth}, dt::f32, tag::x), DstOf(g), strides,
                         dilates, pad_l, pad_r)
                   : dnnl::convolution_forward::desc(prop, algo, SrcOf(g), WeightsOf(g, tag::any),
                                                     DstOf(g), strides, dilates, pad_l, pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, Attr(post), Engine());
}

// The primitive of one part's geometry, made single-threaded.
std::shared_ptr<const Primitive> ConvPrimitive(Kind kind, const ConvGeometry& g, bool bias,
                                               const PostOps& post) {
  return Cached<Primitive>(ConvKey(kind, g, PostKey(post) * 2 + bias), [&] {
    SingleOpenMpThread single;
    const dims strides{g.stride_rows, g.stride_cols}, dilates{g.dil_rows - 1, g.dil_cols - 1};
    const dims pad_l{g.pad_top, g.pad_left}, pad_r{g.pad_bottom, g.pad_right};
    const auto algo = dnnl::algorithm::convolution_direct;
    auto made = std::make_shared<Primitive>();
    if (kind == kForward) {
      auto pd = ForwardPd(g, bias, post, dnnl::prop_kind::forward_inference);
      made->primitive = dnnl::convolution_forward(pd);
      made->weights = pd.weights_desc();
      made->scratchpad = pd.scratchpad_desc();
    } else if (kind == kBackwardData) {
      // A backward primitive is chosen to match a forward one (its hint).
      auto hint = ForwardPd(g, false, PostOps{}, dnnl::prop_kind::forward_training);
      dnnl::convolution_backward_data::desc desc(algo, SrcOf(g), WeightsOf(g, tag::any), DstOf(g),
                                                 strides, dilates, pad_l, pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(desc, Attr(PostOps{}), Engine(), hint);
      made->primitive = dnnl::convolution_backward_data(pd);
      made->weights = pd.weights_desc();
      made->scratchpad = pd.scratchpad_desc();
    } else {
      auto hint = ForwardPd(g, false, PostOps{}, dnnl::prop_kind::forward_training);
      dnnl::convolution_backward_weights::desc desc(algo, SrcOf(g), WeightsOf(g, tag::any),
                                                    DstOf(g), strides, dilates, pad_l, pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(desc, Attr(PostOps{}), Engine(), hint);
      made->primitive = dnnl::convolution_backward_weights(pd);
      made->weights = pd.diff_weights_desc();
      made->scratchpad = pd.scratchpad_desc();
    }
    return std::shared_ptr<const Primitive>(std::move(made));
  });
}

// Adds `part` to `plan`, sharing the layout of its filter with earlier parts where they agree.
// `user`/`user_offset`: the part of the HWIO filter it reads (the whole filter by default).
void AddPart(Plan& plan, Part part, bool to_user, const dnnl::memory::desc* user = nullptr,
             int64_t user_offset = 0) {
  const dnnl::memory::desc& chosen = part.primitive->weights;
  const dnnl::memory::desc& from = user ? *user : plan.user_weights;
  part.layout = -1;
  for (size_t i = 0; i < plan.layouts.size(); ++i) {
    const Layout& l = *plan.layouts[i];
    if (l.desc == chosen && l.user == from && l.user_offset == user_offset) part.layout = static_cast<int>(i);
  }
  if (part.layout < 0) {
    auto layout = std::make_shared<Layout>();
    layout->desc = chosen;
    layout->user = from;
    layout->user_offset = user_offset;
    layout->is_user = chosen == from;
    if (!layout->is_user) {
      SingleOpenMpThread single;
      layout->reorder =
          to_user ? dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), chosen, Engine(), from))
                  : dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), from, Engine(), chosen));
    }
    part.layout = static_cast<int>(plan.layouts.size());
    plan.layouts.push_back(std::move(layout));
  }
  plan.parts.push_back(std::move(part));
}

// Splits a convolution into parts: blocks of images, or for one image blocks of output rows
// (forward only: each block reads the input rows its windows cover, with its own padding).
std::shared_ptr<const Plan> ConvPlan(Kind kind, const ConvGeometry& g, bool bias, const PostOps& post,
                                     int parallelism) {
  return Cached<Plan>(ConvKey(kind, g, (PostKey(post) * 2 + bias) * 1024 + parallelism), [&] {
    auto plan = std::make_shared<Plan>();
    plan->user_weights = UserWeightsOf(g);
    const bool to_user = kind == kBackwardWeights;
    const int64_t work = g.batch * g.out_rows * g.out_cols * g.out_depth * g.k_rows * g.k_cols * g.in_depth / g.groups;
    const int64_t in_image = g.in_rows * g.in_cols * g.in_depth;
    const int64_t out_image = g.out_rows * g.out_cols * g.out_depth;
    // Backward weights sums its parts' partial filters: two parts per thread at most.
    const int64_t by_images = kind == kBackwardWeights ? std::min<int64_t>(PartCount(work, g.batch, parallelism), parallelism)
                                                       : PartCount(work, g.batch, parallelism);
    // One image with few output positions and many output channels (the late layers of a CNN):
    // blocks of output channels, so that each part reads only its share of the (large) filter
    // where blocks of rows would each read all of it. Not when grouped: a block would cut groups.
    const int64_t by_channels =
        kind == kForward && g.groups == 1 && g.batch == 1 && g.out_rows * g.out_cols <= 64
            ? PartCount(work, g.out_depth / 32, parallelism)
            : 1;
    if (by_channels > 1) {
      const int64_t block = (g.out_depth / by_channels + 15) / 16 * 16;
      for (int64_t o0 = 0; o0 < g.out_depth; o0 += block) {
        ConvGeometry pg = g;
        pg.out_depth = std::min(block, g.out_depth - o0);
        Part part;
        part.primitive = ConvPrimitive(kind, pg, bias, post);
        part.src = SrcOf(pg);
        part.dst = DstOf(pg);
        part.bias = dnnl::memory::desc({pg.out_depth}, dt::f32, tag::x);
        part.weights_offset = part.bias_offset = part.dst_offset = o0;
        part.channels = pg.out_depth;
        // HWIO: output channels are the innermost dimension, the others keep their strides.
        const dnnl::memory::desc slice({pg.out_depth, g.in_depth, g.k_rows, g.k_cols}, dt::f32,
                                       dims{1, g.out_depth, g.k_cols * g.in_depth * g.out_depth,
                                            g.in_depth * g.out_depth});
        AddPart(*plan, std::move(part), to_user, &slice, o0);
      }
      return std::shared_ptr<const Plan>(std::move(plan));
    }
    const int64_t by_rows = kind == kForward && g.batch == 1 ? PartCount(work, g.out_rows, parallelism) : 1;
    if (by_rows > 1) {
      const int64_t rows = (g.out_rows + by_rows - 1) / by_rows;
      const int64_t effective = (g.k_rows - 1) * g.dil_rows + 1;
      bool fits = true;
      std::vector<Part> parts;
      for (int64_t r0 = 0; r0 < g.out_rows && fits; r0 += rows) {
        const int64_t r1 = std::min(g.out_rows, r0 + rows);
        const int64_t start = r0 * g.stride_rows - g.pad_top;
        const int64_t end = (r1 - 1) * g.stride_rows - g.pad_top + effective;
        const int64_t first = std::max<int64_t>(0, start), last = std::min(g.in_rows, end);
        fits = last > first;
        ConvGeometry pg = g;
        pg.in_rows = last - first;
        pg.out_rows = r1 - r0;
        pg.pad_top = first - start;
        pg.pad_bottom = end - last;
        Part part;
        part.primitive = ConvPrimitive(kind, pg, bias, post);
        part.src = SrcOf(pg);
        part.dst = DstOf(pg);
        part.src_offset = first * g.in_cols * g.in_depth;
        part.dst_offset = r0 * g.out_cols * g.out_depth;
        parts.push_back(std::move(part));
      }
      if (fits) {
        for (Part& part : parts) AddPart(*plan, std::move(part), to_user);
        return std::shared_ptr<const Plan>(std::move(plan));
      }
    }
    const int64_t images = (g.batch + by_images - 1) / by_images;
    for (int64_t n0 = 0; n0 < g.batch; n0 += images) {
      ConvGeometry pg = g;
      pg.batch = std::min(images, g.batch - n0);
      Part part;
      part.primitive = ConvPrimitive(kind, pg, bias, post);
      part.src = SrcOf(pg);
      part.dst = DstOf(pg);
      part.src_offset = n0 * in_image;
      part.dst_offset = n0 * out_image;
      AddPart(*plan, std::move(part), to_user);
    }
    return std::shared_ptr<const Plan>(std::move(plan));
  });
}

// The filter in each layout the plan's parts read: the user's, reordered once into `packed` for
// a constant, or reordered for this call into `scratch`.
std::vector<const void*> FilterLayouts(const Plan& plan, const float* w, PackedFilter* packed,
                                       std::vector<std::vector<char>>& scratch) {
  std::vector<const void*> out;
  scratch.resize(plan.layouts.size());
  for (size_t i = 0; i < plan.layouts.size(); ++i) {
    const std::shared_ptr<const Layout>& layout = plan.layouts[i];
    if (layout->is_user) {
      out.push_back(w + layout->user_offset);
      continue;
    }
    void* data = nullptr;
    if (packed != nullptr) {
      for (const auto& [key, buffer] : packed->layouts) {
        if (key == layout) data = buffer.get();
      }
      if (data != nullptr) {
        out.push_back(data);
        continue;
      }
      std::shared_ptr<void> buffer(::operator new(layout->desc.get_size()), [](void* q) { ::operator delete(q); });
      data = buffer.get();
      packed->layouts.emplace_back(layout, std::move(buffer));
    } else {
      scratch[i].resize(layout->desc.get_size());
      data = scratch[i].data();
    }
    SingleOpenMpThread single;
    dnnl::memory from(layout->user, Engine(), const_cast<float*>(w) + layout->user_offset);
    dnnl::memory to(layout->desc, Engine(), data);
    layout->reorder.execute(Stream(), from, to);
    Stream().wait();
    out.push_back(data);
  }
  return out;
}

template <typename Fn>
Status Guard(const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const dnnl::error& e) {
    return Status::Error(std::string("oneDNN ") + what + ": " + e.what());
  }
}

}  // namespace

bool Available() { return true; }

namespace {

// The parts of one forward convolution.
class ConvJob {
 public:
  std::shared_ptr<const Plan> plan;
  ConvGeometry g;
  PostOps post;
  const float* x = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
  std::vector<const void*> filters;
  std::vector<std::vector<char>> reordered;  // filters reordered for this call

  void RunInPlace(int64_t t) const {
    const Part& part = plan->parts[t];
    if (part.channels == 0) return Run(part, y + part.dst_offset);
    // A block of channels is computed densely beside the output (starting from the side input's
    // channels, for the sum) and copied to its channels.
    float* block = static_cast<float*>(Scratch(part.dst.get_size(), 1));
    const int64_t positions = g.batch * g.out_rows * g.out_cols;
    if (post.sum) {
      for (int64_t q = 0; q < positions; ++q) {
        std::copy_n(y + q * g.out_depth + part.dst_offset, part.channels, block + q * part.channels);
      }
    }
    Run(part, block);
    for (int64_t q = 0; q < positions; ++q) {
      std::copy_n(block + q * part.channels, part.channels, y + q * g.out_depth + part.dst_offset);
    }
  }

 private:
  void Run(const Part& part, float* dst) const {
    Args args;
    args[DNNL_ARG_SRC] = Mem(part.src, x, part.src_offset);
    args[DNNL_ARG_WEIGHTS] = dnnl::memory(part.primitive->weights, Engine(), const_cast<void*>(filters[part.layout]));
    if (bias) {
      args[DNNL_ARG_BIAS] = part.channels ? Mem(part.bias, bias, part.bias_offset)
                                          : Mem(dnnl::memory::desc({g.out_depth}, dt::f32, tag::x), bias, 0);
    }
    args[DNNL_ARG_DST] = dnnl::memory(part.dst, Engine(), dst);
    Execute(part, args);
  }
};

}  // namespace

Status Conv2DForward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                     const PostOps& post, float* y, ThreadPool* pool, PackedFilter* packed) {
  return Guard("convolution", [&]() -> Status {
    ConvJob job;
    job.plan = ConvPlan(kForward, g, bias != nullptr, post, Parallelism(pool));
    job.g = g;
    job.post = post;
    job.x = x;
    job.bias = bias;
    job.y = y;
    job.filters = FilterLayouts(*job.plan, w, packed, job.reordered);
    return RunParts(pool, job.plan->parts.size(), "convolution", [&](int64_t t) { job.RunInPlace(t); });
  });
}

Status Conv2DForward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                     bool relu, float* y, ThreadPool* pool, PackedFilter* packed) {
  PostOps post;
  if (relu) post.eltwise = Eltwise::kRelu;
  return Conv2DForward(g, x, w, bias, post, y, pool, packed);
}

Status Conv2DBackwardData(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                          ThreadPool* pool, PackedFilter* packed) {
  return Guard("convolution backward data", [&]() -> Status {
    auto plan = ConvPlan(kBackwardData, g, false, PostOps{}, Parallelism(pool));
    std::vector<std::vector<char>> scratch;
    const std::vector<const void*> filters = FilterLayouts(*plan, w, packed, scratch);
    return RunParts(pool, plan->parts.size(), "convolution backward data", [&](int64_t t) {
      const Part& part = plan->parts[t];
      Args args;
      args[DNNL_ARG_DIFF_DST] = Mem(part.dst, dy, part.dst_offset);
      args[DNNL_ARG_WEIGHTS] = dnnl::memory(part.primitive->weights, Engine(), const_cast<void*>(filters[part.layout]));
      args[DNNL_ARG_DIFF_SRC] = Mem(part.src, dx, part.src_offset);
      Execute(part, args);
    });
  });
}

Status Conv2DBackwardWeights(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                             ThreadPool* pool) {
  return Guard("convolution backward weights", [&]() -> Status {
    auto plan = ConvPlan(kBackwardWeights, g, false, PostOps{}, Parallelism(pool));
    const int64_t elements = g.k_rows * g.k_cols * g.in_depth / g.groups * g.out_depth;
    // Each part's partial filter in HWIO: the first into dw, the others beside it, summed after.
    std::vector<std::vector<float>> partial(plan->parts.size() - 1, std::vector<float>(elements));
    RETURN_IF_ERROR(RunParts(pool, plan->parts.size(), "convolution backward weights", [&](int64_t t) {
      const Part& part = plan->parts[t];
      const Layout& layout = *plan->layouts[part.layout];
      float* user = t == 0 ? dw : partial[t - 1].data();
      void* out = layout.is_user ? user : Scratch(layout.desc.get_size(), 1);
      Args args;
      args[DNNL_ARG_SRC] = Mem(part.src, x, part.src_offset);
      args[DNNL_ARG_DIFF_DST] = Mem(part.dst, dy, part.dst_offset);
      args[DNNL_ARG_DIFF_WEIGHTS] = dnnl::memory(layout.desc, Engine(), out);
      Execute(part, args);
      if (!layout.is_user) {
        dnnl::memory from(layout.desc, Engine(), out);
        dnnl::memory to(plan->user_weights, Engine(), user);
        layout.reorder.execute(Stream(), from, to);
        Stream().wait();
      }
    }));
    for (const std::vector<float>& p : partial) {
      for (int64_t e = 0; e < elements; ++e) dw[e] += p[e];
    }
    return OkStatus();
  });
}

Status MatMul(const float* a, bool ta, const float* b, bool tb, int64_t m, int64_t k, int64_t n,
              const float* bias, float* out, ThreadPool* pool) {
  return Guard("matmul", [&]() -> Status {
    // A transposed lhs is copied row-major first: split into blocks of rows it would be strided
    // in both dimensions, which oneDNN's fast kernels (brgemm) refuse, leaving it to gemm:jit,
    // whose code generation takes tens of milliseconds at its first call and which runs slower.
    std::vector<float> transposed;
    if (ta && m > 1) {
      transposed.resize(m * k);
      for (int64_t q = 0; q < k; ++q)
        for (int64_t i = 0; i < m; ++i) transposed[i * k + q] = a[q * m + i];
      a = transposed.data();
      ta = false;
    }
    const int parallelism = Parallelism(pool);
    auto plan = Cached<Plan>({kMatMul, parallelism, m, k, n, ta, tb, bias != nullptr}, [&] {
      auto plan = std::make_shared<Plan>();
      const int64_t work = m * n * k;
      // Blocks of rows keep every operand dense (oneDNN's fastest kernels need that); a product
      // of few rows (a batch-1 dense layer) is split into blocks of columns instead.
      const bool rows = m >= 32 && !ta;
      if (!rows && !ta && k >= 512) {
        // Few rows and a long reduction (a batch-1 dense layer): blocks of the reduction, each a
        // dense block of rows of b, added up after; the product reads b once, in order.
        const int64_t count = PartCount(work, k / 128, parallelism);
        const int64_t block = (k + count - 1) / count;
        for (int64_t k0 = 0; k0 < k; k0 += block) {
          const int64_t pk = std::min(block, k - k0);
          const bool with_bias = bias != nullptr && k0 == 0;
          Part part;
          part.src = dnnl::memory::desc({m, pk}, dt::f32, dims{k, 1});
          part.weights = dnnl::memory::desc({pk, n}, dt::f32, tb ? dims{1, k} : dims{n, 1});
          part.dst = dnnl::memory::desc({m, n}, dt::f32, dims{n, 1});
          part.bias = dnnl::memory::desc({1, n}, dt::f32, dims{n, 1});
          part.src_offset = k0;
          part.weights_offset = tb ? k0 : k0 * n;
          part.partial = k0 > 0;
          part.primitive = Cached<Primitive>({kMatMul, 1, m, pk, n, ta, tb, with_bias, k}, [&] {
            SingleOpenMpThread single;
            auto desc = with_bias ? dnnl::matmul::desc(part.src, part.weights, part.bias, part.dst)
                                  : dnnl::matmul::desc(part.src, part.weights, part.dst);
            dnnl::matmul::primitive_desc pd(desc, Attr(PostOps{}), Engine());
            auto made = std::make_shared<Primitive>();
            made->primitive = dnnl::matmul(pd);
            made->scratchpad = pd.scratchpad_desc();
            return std::shared_ptr<const Primitive>(std::move(made));
          });
          plan->parts.push_back(std::move(part));
        }
        return std::shared_ptr<const Plan>(std::move(plan));
      }
      const int64_t count = rows ? PartCount(work, m / 16, parallelism)
                                 : (n >= 128 ? PartCount(work, n / 64, parallelism) : 1);
      const int64_t extent = rows ? m : n;
      const int64_t block = (extent + count - 1) / count;
      for (int64_t first = 0; first < extent; first += block) {
        const int64_t size = std::min(block, extent - first);
        const int64_t pm = rows ? size : m, pn = rows ? n : size;
        Part part;
        part.src = dnnl::memory::desc({pm, k}, dt::f32, ta ? dims{1, m} : dims{k, 1});
        part.weights = dnnl::memory::desc({k, pn}, dt::f32, tb ? dims{1, k} : dims{n, 1});
        part.dst = dnnl::memory::desc({pm, pn}, dt::f32, dims{n, 1});
        part.bias = dnnl::memory::desc({1, pn}, dt::f32, dims{pn, 1});
        part.src_offset = rows ? first * k : 0;
        part.weights_offset = rows ? 0 : (tb ? first * k : first);
        part.dst_offset = rows ? first * n : first;
        part.bias_offset = rows ? 0 : first;
        part.primitive = Cached<Primitive>({kMatMul, 0, pm, k, pn, ta, tb, bias != nullptr, m, n}, [&] {
          SingleOpenMpThread single;
          auto desc = bias ? dnnl::matmul::desc(part.src, part.weights, part.bias, part.dst)
                           : dnnl::matmul::desc(part.src, part.weights, part.dst);
          dnnl::matmul::primitive_desc pd(desc, Attr(PostOps{}), Engine());
          auto made = std::make_shared<Primitive>();
          made->primitive = dnnl::matmul(pd);
          made->scratchpad = pd.scratchpad_desc();
          return std::shared_ptr<const Primitive>(std::move(made));
        });
        plan->parts.push_back(std::move(part));
      }
      return std::shared_ptr<const Plan>(std::move(plan));
    });
    // Partial products (blocks of the reduction after the first) go beside the output.
    int64_t partials = 0;
    for (const Part& part : plan->parts) partials += part.partial;
    std::vector<float> sums(partials * m * n);
    RETURN_IF_ERROR(RunParts(pool, plan->parts.size(), "matmul", [&](int64_t t) {
      const Part& part = plan->parts[t];
      Args args;
      args[DNNL_ARG_SRC] = Mem(part.src, a, part.src_offset);
      args[DNNL_ARG_WEIGHTS] = Mem(part.weights, b, part.weights_offset);
      if (bias && !part.partial) args[DNNL_ARG_BIAS] = Mem(part.bias, bias, part.bias_offset);
      args[DNNL_ARG_DST] = part.partial ? Mem(part.dst, sums.data(), (t - (static_cast<int64_t>(plan->parts.size()) - partials)) * m * n)
                                        : Mem(part.dst, out, part.dst_offset);
      Execute(part, args);
    }));
    for (int64_t p = 0; p < partials; ++p) {
      const float* partial = sums.data() + p * m * n;
      for (int64_t e = 0; e < m * n; ++e) out[e] += partial[e];
    }
    return OkStatus();
  });
}

#endif

}  // namespace xlens::graph::onednn

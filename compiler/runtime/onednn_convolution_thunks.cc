// The convolution half of OneDnnThunk (onednn_thunks.h): oneDNN's forward, backward-data and
// backward-weights primitives over channels-last images, split over the pool in blocks of images
// or, for one image, in bands of output rows; a forward convolution of few output positions with
// variable weights as a product in the thunk's own loops instead (few_position_convolution.h), and
// a large forward depthwise one as a stencil over its channels (depthwise_convolution.h).
#ifdef XLENS_HAVE_ONEDNN
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/ranges.h>

#include "compiler/runtime/measured_choice.h"
#include "compiler/runtime/onednn_thunk_parts.h"

namespace xlens::runtime {

using namespace onednn_detail;

namespace {

// The post-ops as a choice's key names them: kind, alpha and beta each.
std::string PostOpsKey(const std::vector<OneDnnPostOp>& post_ops) {
  std::string key;
  for (const OneDnnPostOp& op : post_ops) {
    key += fmt::format("{}:{}:{};", static_cast<int>(op.kind), op.alpha, op.beta);
  }
  return key.empty() ? "none" : key;
}

// How many blocks of images a call runs in. One per thread leaves the call to its slowest
// thread: a worker woken late or descheduled on a busy machine holds back half the call, which
// the caller, done with its own half, waits for (the pool takes back only parts not yet
// started), and the pool's history may then run the loop inline for a while. With up
// to kPartsPerThread parts per thread a late thread holds back one part, and the others take the
// rest of its share. Each part costs a few microseconds of its own (oneDNN's setup of an
// execution, its arguments) and a small convolution's kernel loses speed on fewer images, so a
// part has 2^22 multiply-adds or 2 MiB of images or more (some 100 us either way): a CNN
// training step's convolutions of 32 images of 28x28x8 (1.8-7.2M multiply-adds) keep a part per
// thread, and the 8 images of a 3x3 depthwise layer on 56x56x128 (3.2 MB each) run in 8 parts.
// A backward-weights call sums one gradient per part after the parts: more parts only where
// those sums read little against the images.
constexpr int64_t kPartsPerThread = 4;

int64_t ConvolutionParts(const OneDnnConvolution& c, int64_t parallelism) {
  if (parallelism <= 1 || c.images <= 1) return 1;
  int64_t macs = c.images * c.output_channels * (c.input_channels / c.groups);
  for (int64_t d : c.dst_spatial) macs *= d;
  for (int64_t k : c.kernel_spatial) macs *= k;
  int64_t src = c.input_channels, dst = c.output_channels;
  for (int64_t d : c.src_spatial) src *= d;
  for (int64_t d : c.dst_spatial) dst *= d;
  const int64_t image_bytes = (src + dst) * c.images * static_cast<int64_t>(sizeof(float));
  int64_t parts = std::clamp<int64_t>(std::max(macs >> 22, image_bytes >> 21), parallelism,
                                      parallelism * kPartsPerThread);
  if (c.kind == OneDnnConvolution::Kind::kBackwardWeights) {
    int64_t weights = c.output_channels * (c.input_channels / c.groups);
    for (int64_t k : c.kernel_spatial) weights *= k;
    if (weights * parts > (src + dst) * c.images / 8) parts = parallelism;
  }
  return std::min(parts, c.images);
}

// Whether a buffer of dense weights in `user` is already laid out as `chosen`: every element at
// the same offset, so that a reorder between the two only copies. A depthwise kernel in HWIO
// (the group innermost) is oneDNN's hwioG16g or hwioG8g wherever the groups fill whole blocks:
// reordering its 3x3x512 weights on every call took some 2.5 us of a 17 us call on one 14x14
// image (two parts on two threads). Found by reordering the elements' own offsets, at build, for
// weights of at most 1 MiB (a reorder of some 0.1 ms; larger weights, where a reorder per call
// weighs less against the call, are not examined).
bool SameLayout(const dnnl::memory::desc& user, const dnnl::memory::desc& chosen) {
  const size_t elements = user.get_size() / sizeof(float);
  if (chosen.get_size() != user.get_size() || user.get_size() > (size_t{1} << 20)) return false;
  std::vector<float> offsets(elements), reordered(elements, -1.0f);
  for (size_t i = 0; i < elements; ++i) offsets[i] = static_cast<float>(i);
  dnnl::memory from(user, CpuEngine(), offsets.data()), to(chosen, CpuEngine(), reordered.data());
  SingleOpenMpThread single_openmp_thread;
  dnnl::reorder(from, to).execute(ThreadStream(), from, to);
  ThreadStream().wait();
  return offsets == reordered;
}

}  // namespace

Status OneDnnThunk::Impl::BuildConvolution(
    const OneDnnCall& call, const std::string& name, int64_t parallelism,
    const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes) {
  const OneDnnConvolution& c = call.convolution;
  convolution_kind = c.kind;
  if (!constant_weights) {
    if (std::optional<FewPositionConvolution> f = FewPositionConvolutionOf(c)) {
      few_positions = true;
      few = *f;
      post_ops = call.post_ops;
      // Parts where each has 2^19 multiply-adds (some 5 us on one core, past what waking a
      // thread costs); a product of a few positions otherwise stays on the calling thread. A
      // part is a block of columns (FewPositionColumnBlock), or with fewer blocks than parts, a
      // share of the rows of one (each share then reads the block's weights).
      const int64_t width = FewPositionColumnBlock(few);
      const int64_t columns = (few.output_channels / few.groups + width - 1) / width * few.groups;
      const int64_t parts = std::clamp<int64_t>(std::min<int64_t>(parallelism, few.MultiplyAdds() >> 19), 1,
                                                columns * ((few.Positions() + 7) / 8));
      few_row_parts = std::max<int64_t>(1, (parts + columns - 1) / columns);
      total = columns * few_row_parts;
      block = (total + parts - 1) / parts;
      blocks = (total + block - 1) / block;
      implementation = std::string("few-positions:") + (FewPositionProductHasAvx512() ? "avx512" : "scalar");
      return OkStatus();
    }
  }
  // A bias and a ReLU or ReLU6 after it (MobileNet's epilogue) are applied in the loops' registers.
  // Which of the loops and oneDNN's kernel is faster depends on the machine as much as on the
  // shape: on a 2-core EPYC (Zen 4) the loops took 0.76 of brdgmm_dw's time on 8x56x56x128
  // (depthwise_convolution.h), on a 2-CPU Sapphire Rapids VM 1.6 times it (0.73-0.75 ms against
  // 0.455-0.459 in the benchmark's quiet runs; its 25.7 MB stay in that LLC, which the loops'
  // streaming stores bypass), while with a bias and ReLU6 the loops still win there (8x28x28x192
  // 0.78 -> 0.46 ms). Both are timed for the shape, then (measured_choice.h), unless the fixed
  // rule is asked for (tests, --xla_cpu_xlens_measure_kernel_choice=false): the loops wherever
  // DepthwiseConvolutionOf takes the convolution.
  if (std::optional<DepthwiseConvolution> d = DepthwiseConvolutionOf(c, call.post_ops)) {
    if (GetKernelChoiceMode() == KernelChoiceMode::kRule) {
      UseDepthwise(*d, parallelism);
      return OkStatus();
    }
    Status built = OkStatus();
    try {
      built = BuildOneDnnConvolution(call, name, parallelism, attributes);
    } catch (const dnnl::error& e) {
      built = Error(e.what());
    }
    if (built.ok()) {
      ChooseDepthwiseOrOneDnn(*d, parallelism, name);
    } else {
      UseDepthwise(*d, parallelism);
    }
    return OkStatus();
  }
  return BuildOneDnnConvolution(call, name, parallelism, attributes,
                                GetKernelChoiceMode() == KernelChoiceMode::kMeasured);
}

void OneDnnThunk::Impl::UseDepthwise(const DepthwiseConvolution& d, int64_t parallelism) {
  // Bands of rows enough for kPartsPerThread parts a thread: the 8 images of a 56x56x128
  // layer are 8 parts, one image 8 bands.
  depthwise = d;
  depthwise_bands = std::clamp<int64_t>((parallelism * kPartsPerThread + d.images - 1) / d.images, 1, d.out_height);
  total = d.images * depthwise_bands;
  block = 1;
  blocks = parallelism > 1 ? total : 1;
  implementation = std::string("depthwise:avx512") + (blocks > 1 ? "" : ", whole");
}

void OneDnnThunk::Impl::ChooseDepthwiseOrOneDnn(const DepthwiseConvolution& d, int64_t parallelism,
                                                const std::string& name) {
  // The key names everything the two times depend on, oneDNN's kernel included.
  const std::string key = fmt::format(
      "depthwise {}x{}x{}x{} -> {}x{} kernel {}x3 strides {}x{} pads {},{} weights {},{} bias {} activation {} "
      "stream {} parallelism {} onednn {} constant weights {} reordered {}",
      d.images, d.height, d.width, d.channels, d.out_height, d.out_width, d.kernel_height, d.stride_height,
      d.stride_width, d.pad_top, d.pad_left, d.weights_row_stride, d.weights_tap_stride, d.bias,
      static_cast<int>(d.activation), d.stream, parallelism, implementation, constant_weights, reorder_weights);
  const std::string onednn_implementation = implementation;
  const int64_t onednn_total = total, onednn_block = block, onednn_blocks = blocks;
  auto use_onednn = [&] {
    depthwise.reset();
    total = onednn_total;
    block = onednn_block;
    blocks = onednn_blocks;
    implementation = onednn_implementation;
  };
  // The loops first: they are the fixed rule's pick, which oneDNN's kernel must beat by the margin.
  const std::vector<std::string> names = {"depthwise:avx512", onednn_implementation};
  // What the listing says of the choice: the winner's time, then the other's, and whether it was
  // timed now or taken from the cache or a loaded file.
  auto apply = [&](const MeasuredChoice& choice, bool onednn_failed) {
    const bool loops = choice.winner == 0 || onednn_failed;
    weights_ready = false;  // constant weights are reordered from the module's constant, not the scratch
    if (loops) {
      UseDepthwise(d, parallelism);
      parts.clear();
      bands.clear();
      reorder_weights = false;
    } else {
      use_onednn();
    }
    implementation += ", " + choice.Summary();
  };
  // One run reads the input and the weights and writes the output; the trial's budget
  // (measured_choice.h) keeps the loops untimed where the trial's runs of both would outgrow it.
  const double estimated_run_ms = EstimatedStreamingRunMs(
      static_cast<double>(sizeof(float)) *
      static_cast<double>(d.images * d.height * d.width * d.channels + d.OutputElements() +
                          static_cast<int64_t>(user_weights_md.get_size() / sizeof(float)) + d.channels));
  // Chosen before (this process, the persistent cache, a loaded file) or over the bound: no
  // scratch, no trial.
  if (std::optional<MeasuredChoice> known = FindKernelChoice(key, names, estimated_run_ms)) {
    apply(*known, false);
    return;
  }
  // Scratch buffers of the call's sizes, 64-byte aligned as the executable's buffers are (the
  // loops stream only to an aligned output). The operands are written (pages of zeros never
  // written would all be one page, in L1); the outputs are first written by the warm-up runs.
  using Buffer = std::unique_ptr<float, void (*)(void*)>;
  auto scratch = [](int64_t elements, bool fill) {
    const size_t bytes = (static_cast<size_t>(elements) * sizeof(float) + 63) / 64 * 64;
    Buffer buffer(static_cast<float*>(std::aligned_alloc(64, bytes)), std::free);
    if (fill && buffer) std::fill(buffer.get(), buffer.get() + elements, 0.5f);
    return buffer;
  };
  Buffer input = scratch(d.images * d.height * d.width * d.channels, true);
  Buffer weights = scratch(static_cast<int64_t>(user_weights_md.get_size() / sizeof(float)), true);
  Buffer bias = scratch(d.channels, true);
  // An output each: streaming stores leave the lines they write out of the cache, where the
  // other kernel's plain stores would first read them back from memory (one output shared timed
  // oneDNN's kernel at twice its time in a loop of its own, and chose the loops).
  Buffer loops_output = scratch(d.OutputElements(), false), onednn_output = scratch(d.OutputElements(), false);
  if (!input || !weights || !bias || !loops_output || !onednn_output) {  // no memory for a trial: the rule
    UseDepthwise(d, parallelism);
    return;
  }
  int64_t slots = std::max({lhs_slot, rhs_slot, output_slot}) + 1;
  for (int64_t slot : addend_slots) slots = std::max(slots, slot + 1);
  std::vector<char*> frame(slots, nullptr);
  frame[lhs_slot] = reinterpret_cast<char*>(input.get());
  frame[rhs_slot] = reinterpret_cast<char*>(weights.get());
  for (int64_t slot : addend_slots) frame[slot] = reinterpret_cast<char*>(bias.get());
  // Each on the calling thread, all its parts in turn (ChooseByMeasuring times that thread's
  // CPU time). One thread ranks them as the pool's threads do: on 8x56x56x128, one thread each
  // (xlens run under taskset, best of 50, 5 alternating rounds at load 4.7) the loops took
  // 1.34 ms, oneDNN's kernel 0.94; on two (8 rounds at load 6.3) 0.65 and 0.51.
  ExecuteContext context;
  bool onednn_failed = false;
  const MeasuredChoice choice = ChooseByMeasuring(
      key, {{names[0],
             [&] {
               UseDepthwise(d, parallelism);
               frame[output_slot] = reinterpret_cast<char*>(loops_output.get());
               (void)ExecuteDepthwise(frame.data(), context);
             }},
            {names[1], [&] {
               use_onednn();
               frame[output_slot] = reinterpret_cast<char*>(onednn_output.get());
               onednn_failed |= !ExecuteConvolution(frame.data(), context, name).ok();
             }}},
      estimated_run_ms);
  apply(choice, onednn_failed);
}

Status OneDnnThunk::Impl::BuildOneDnnConvolution(
    const OneDnnCall& call, const std::string& name, int64_t parallelism,
    const std::function<dnnl::primitive_attr(const std::vector<dnnl::memory::desc>&)>& attributes,
    bool choose_kernel) {
  using Kind = OneDnnConvolution::Kind;
  const OneDnnConvolution& c = call.convolution;
  // Made under Create's SingleOpenMpThread: backward weights, too, fixes its OpenMP team
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
  const int64_t image_blocks = ConvolutionParts(c, parallelism);
  block = (total + image_blocks - 1) / image_blocks;
  blocks = (total + block - 1) / block;
  const dnnl::memory::desc any_weights(weights, dt::f32, dnnl::memory::format_tag::any);
  // The implementation a part's descriptor takes: oneDNN's first, or `preferred` (a name
  // impl_info_str() gives, ChooseOneDnnKernel's pick) where the descriptor has it.
  std::string preferred;
  std::vector<std::string> available;  // the part's implementations, in oneDNN's order
  auto pick = [&](auto make) {
    auto pd = make();
    if (available.empty()) {
      auto all = make();
      do {
        available.push_back(all.impl_info_str());
      } while (all.next_impl());
    }
    if (!preferred.empty()) {
      while (preferred != pd.impl_info_str() && pd.next_impl()) {
      }
      if (preferred != pd.impl_info_str()) pd = make();
    }
    return pd;
  };
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
        // Named: oneDNN's iterator over implementations reads the descriptor on each next_impl().
        const dnnl::convolution_forward::desc desc = forward(dnnl::prop_kind::forward_inference);
        auto pd = pick([&] { return dnnl::convolution_forward::primitive_desc(desc, attr, CpuEngine()); });
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
          auto pd = pick([&] { return dnnl::convolution_backward_data::primitive_desc(desc, attr, CpuEngine(), hint); });
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
  // "<kernel>, timed ... against ...": said where the parts keep that kernel after the rules below.
  std::string choice;
  if (choose_kernel) {
    choice = ChooseOneDnnKernel(call, parallelism, available, [&](const std::string& implementation_name) {
      preferred = implementation_name;
      build(any_weights);
    });
  }
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
  reorder_weights = chosen != user_weights_md && !SameLayout(user_weights_md, chosen);
  if (!choice.empty() && choice.rfind(implementation + ", ", 0) == 0) implementation = choice;
  // One image is one part on one thread: where it has rows enough and 2^20 multiply-adds per
  // band (a band's call then outlasts waking a thread), it runs in bands over the pool instead,
  // on the same weights (one reorder serves them all). Each band reads all the weights: not for
  // weights past a core's L2 (ResNet50's last stage, 9 MB each, ran 25% slower in two bands),
  // nor on the im2col kernel such weights get. Bands that oneDNN would run on another weights
  // layout or its reference kernel leave the call whole.
  const bool bands_reread_little = user_weights_md.get_size() <= (size_t{1} << 20) &&
                                   implementation.find("gemm") == std::string::npos;
  if (c.kind == Kind::kForward && total == 1 && parallelism > 1 && !c.dst_spatial.empty() && bands_reread_little) {
    // Multiply-adds counted over all input channels, not a group's: a depthwise layer's call
    // runs far below the FMA rate (its bytes bind it), so its bands outlast waking a thread at a
    // fraction of the dense count. Counted by group, 7x7x1024 and 14x14x512 at one image went
    // whole on one thread and ran 0.013 -> 0.020 and 0.014 -> 0.027 ms (xlens run, best of 300,
    // 5 alternating pairs); 56x56x128 and eight images (parts of images) were unchanged.
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
    if (reorder_weights) {
      weights_buffer = dnnl::memory(chosen, CpuEngine());
      weights_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), user_weights_md, CpuEngine(), chosen));
      if (!constant_weights) BuildWeightsGather();
    }
  } else if (blocks > 1 || reorder_weights) {
    for (int64_t t = 0; t < blocks; ++t) partial_weights.push_back(dnnl::memory(chosen, CpuEngine()));
    if (reorder_weights) {
      weights_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), chosen, CpuEngine(), user_weights_md));
      BuildWeightsGather();
    }
  }
  return OkStatus();
}

namespace {
// The most elements (in either layout) weights are gathered for rather than reordered by oneDNN:
// a reorder's call took 1.4-3.8 us on the caller, before a call's parts or after them for
// backward weights, for the convolution step's 72 and 1152 floats (144 and 2304 blocked), four
// calls a step. Gathered, that caller's time was 0.9 against 3.0 and 5.1 us before the parts, and
// 1.5 and 2.8 against 4.0 and 4.6 after them (medians of 1500 traced runs). Larger weights keep
// oneDNN's vector loops.
constexpr size_t kGatheredWeightsMaxElements = size_t{1} << 12;
// oneDNN's buffers start on a cache line; so do the gathered copies.
constexpr size_t kGatheredWeightsAlignment = 64;
}  // namespace

void OneDnnThunk::Impl::BuildWeightsGather() {
  const bool backward = convolution_kind == OneDnnConvolution::Kind::kBackwardWeights;
  const dnnl::memory::desc chosen = backward ? partial_weights.at(0).get_desc() : weights_buffer.get_desc();
  const size_t user_elements = user_weights_md.get_size() / sizeof(float);
  const size_t chosen_elements = chosen.get_size() / sizeof(float);
  if (std::max(user_elements, chosen_elements) > kGatheredWeightsMaxElements) return;
  size_t logical = 1;
  for (dnnl::memory::dim d : user_weights_md.dims()) logical *= static_cast<size_t>(d);
  dnnl::memory user(user_weights_md, CpuEngine());
  dnnl::memory blocked(chosen, CpuEngine());
  float* u = static_cast<float*>(user.get_data_handle());
  float* b = static_cast<float*>(blocked.get_data_handle());
  // Index i is stored as i + 1, so that a zero is a place the reorder wrote no element to.
  const size_t from_elements = backward ? chosen_elements : user_elements;
  const size_t to_elements = backward ? user_elements : chosen_elements;
  float* from = backward ? b : u;
  float* to = backward ? u : b;
  for (size_t i = 0; i < from_elements; ++i) from[i] = static_cast<float>(i + 1);
  std::fill(to, to + to_elements, 0.f);
  try {
    SingleOpenMpThread single_openmp_thread;
    weights_reorder.execute(ThreadStream(), backward ? blocked : user, backward ? user : blocked);
    ThreadStream().wait();
  } catch (const dnnl::error&) {
    return;
  }
  std::vector<int32_t> gather(to_elements, -1);
  std::vector<bool> taken(from_elements, false);
  size_t placed = 0;
  for (size_t e = 0; e < to_elements; ++e) {
    if (to[e] == 0.f) continue;
    const size_t i = static_cast<size_t>(to[e]) - 1;
    if (to[e] != static_cast<float>(i + 1) || i >= from_elements || (!backward && taken[i])) return;
    taken[i] = true;
    gather[e] = static_cast<int32_t>(i);
    ++placed;
  }
  // Forward, every weight goes to one place; backward, every weight comes from one.
  if (placed != logical) return;
  weights_gather = std::move(gather);
}

float* OneDnnThunk::Impl::GatherWeights(const float* user) const {
  thread_local std::vector<float> buffer;
  float* blocked = AlignedFloats(buffer, weights_gather.size(), kGatheredWeightsAlignment);
  for (size_t e = 0; e < weights_gather.size(); ++e) blocked[e] = weights_gather[e] >= 0 ? user[weights_gather[e]] : 0.f;
  return blocked;
}

// oneDNN's first implementation for a convolution's descriptors is not always its fastest on
// this machine: for the convolution step's parts of 16 channels-last 28x28 images (one thread,
// best of 300 runs, load 4), brgconv:avx512_core takes 50.7 us where jit:avx512_core takes 22.3
// for 1 input channel to 8 outputs, 90.9 against 61.2 for 3 to 16, 50.5 against 39.2 for the
// stride-2 8 to 16; at 16 input channels and more brgconv is as fast or faster (16 to 32: 604
// against 633). So a forward or backward-data call with more than one implementation times the
// first few on its part's shape (measured_choice.h: the first is the rule's pick, another must
// beat it by the margin) and keeps the fastest for every part. Each candidate runs its parts in
// turn on the calling thread, as the pool's threads run them, on scratch operands, the weights
// reordered into its layout on each run as a call does where they are not constant. Calls with
// addends (a bias, a residual) and single images (bands) keep oneDNN's first.
std::string OneDnnThunk::Impl::ChooseOneDnnKernel(const OneDnnCall& call, int64_t parallelism,
                                                  const std::vector<std::string>& available,
                                                  const std::function<void(const std::string&)>& build) {
  using Kind = OneDnnConvolution::Kind;
  const OneDnnConvolution& c = call.convolution;
  constexpr size_t kMaxCandidates = 3;
  if (c.kind == Kind::kBackwardWeights || !addend_kinds.empty() || total < 2 || blocks < 1) return "";
  // The candidates: oneDNN's first (the rule's pick), then the next ones in its order but its
  // reference kernels.
  std::vector<std::string> names = {implementation};
  for (const std::string& n : available) {
    if (names.size() >= kMaxCandidates) break;
    if (n.rfind("ref", 0) == 0 || std::find(names.begin(), names.end(), n) != names.end()) continue;
    names.push_back(n);
  }
  if (names.size() < 2) return "";
  const int64_t images = blocks * block;
  const std::string key = fmt::format(
      "convolution kind {} images {} channels {} x {} -> {} x {} groups {} kernel {} strides {} pads {},{} "
      "dilations {} post-ops {} parallelism {} parts {}x{} constant weights {}",
      static_cast<int>(c.kind), total, c.input_channels, fmt::join(c.src_spatial, "x"), c.output_channels,
      fmt::join(c.dst_spatial, "x"), c.groups, fmt::join(c.kernel_spatial, "x"), fmt::join(c.strides, "x"),
      fmt::join(c.padding_low, "x"), fmt::join(c.padding_high, "x"), fmt::join(c.dilations, "x"),
      PostOpsKey(call.post_ops), parallelism, blocks, block, constant_weights);
  // One run reads the images and writes the result, and makes their multiply-adds on one
  // thread: at 100 GFLOP/s, about half what brgconv reached on 8x32x32x64 through 3x3x64x64
  // (3.3 ms a run of all parts, 183 GFLOP/s), so that such calls, whose trial took some 100 ms
  // of compilation and kept brgconv, stay within the trial's budget or keep the rule's pick.
  double flops = 2.0 * static_cast<double>(images) * static_cast<double>(c.output_channels) *
                 static_cast<double>(c.input_channels / c.groups);
  for (int64_t d : c.dst_spatial) flops *= static_cast<double>(d);
  for (int64_t d : c.kernel_spatial) flops *= static_cast<double>(d);
  constexpr double kOneThreadFlopsPerMs = 1e8;
  const double estimated_run_ms = std::max(
      EstimatedStreamingRunMs(static_cast<double>(images) * static_cast<double>((src_step + dst_step) * sizeof(float))),
      flops / kOneThreadFlopsPerMs);
  // Chosen before (this process, the persistent cache, a loaded file) or over the budget: no
  // candidates built, no trial.
  if (std::optional<MeasuredChoice> known = FindKernelChoice(key, names, estimated_run_ms)) {
    const std::string& chosen = names[known->winner];
    build(known->winner == 0 ? std::string() : chosen);
    return implementation == chosen ? chosen + ", " + known->Summary() : "";
  }
  // Each candidate's part of `block` images, built as the call would build it.
  struct Candidate {
    Part part;
    dnnl::memory weights, src, dst;
    std::optional<dnnl::reorder> reorder;
    dnnl::memory user_weights;
    std::vector<char> scratchpad;
    std::vector<std::unordered_map<int, dnnl::memory>> args;  // each part's, made once
  };
  std::vector<Candidate> candidates;
  std::vector<std::string> timed_names;
  for (const std::string& n : names) {
    try {
      build(n);
      if (implementation != n || parts.count(block) == 0) continue;  // not made for its part: no candidate
      Candidate k;
      k.part = parts.at(block);
      // A part's images, `blocks` times over: the part runs on its slice of them.
      const bool forward = c.kind == Kind::kForward;
      const dnnl::memory::desc& in = forward ? k.part.src : k.part.dst;
      const dnnl::memory::desc& out = forward ? k.part.dst : k.part.src;
      k.src = dnnl::memory(dnnl::memory::desc({static_cast<int64_t>(in.get_size() / sizeof(float)) * blocks}, dt::f32,
                                              dnnl::memory::format_tag::a),
                           CpuEngine());
      k.dst = dnnl::memory(dnnl::memory::desc({static_cast<int64_t>(out.get_size() / sizeof(float)) * blocks}, dt::f32,
                                              dnnl::memory::format_tag::a),
                           CpuEngine());
      float* src = static_cast<float*>(k.src.get_data_handle());
      std::fill(src, src + in.get_size() / sizeof(float) * blocks, 0.5f);
      k.weights = dnnl::memory(k.part.weights, CpuEngine());
      k.user_weights = dnnl::memory(user_weights_md, CpuEngine());
      float* user = static_cast<float*>(k.user_weights.get_data_handle());
      std::fill(user, user + user_weights_md.get_size() / sizeof(float), 0.5f);
      if (k.part.weights != user_weights_md && !SameLayout(user_weights_md, k.part.weights)) {
        k.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), user_weights_md, CpuEngine(), k.part.weights));
        // Written once whatever the weights: constant weights are reordered once, not every run.
        SingleOpenMpThread single_openmp_thread;
        k.reorder->execute(ThreadStream(), k.user_weights, k.weights);
        ThreadStream().wait();
        if (constant_weights) k.reorder.reset();
      } else {
        k.weights = k.user_weights;
      }
      k.scratchpad.resize(k.part.scratchpad.get_size() + 64);
      for (int64_t t = 0; t < blocks; ++t) {
        char* part_in = static_cast<char*>(k.src.get_data_handle()) + t * in.get_size();
        char* part_out = static_cast<char*>(k.dst.get_data_handle()) + t * out.get_size();
        std::unordered_map<int, dnnl::memory>& args = k.args.emplace_back();
        args[forward ? DNNL_ARG_SRC : DNNL_ARG_DIFF_DST] = dnnl::memory(in, CpuEngine(), part_in);
        args[forward ? DNNL_ARG_DST : DNNL_ARG_DIFF_SRC] = dnnl::memory(out, CpuEngine(), part_out);
        args[DNNL_ARG_WEIGHTS] = k.weights;
        args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(k.part.scratchpad, CpuEngine(), k.scratchpad.data());
      }
      candidates.push_back(std::move(k));
      timed_names.push_back(n);
    } catch (const dnnl::error&) {
    }
  }
  if (timed_names.size() >= 2 && timed_names[0] == names[0]) {
    std::vector<KernelCandidate> runs;
    for (size_t i = 0; i < candidates.size(); ++i) {
      runs.push_back({timed_names[i], [&, i] {
                        Candidate& k = candidates[i];
                        SingleOpenMpThread single_openmp_thread;
                        dnnl::stream& stream = ThreadStream();
                        if (k.reorder) k.reorder->execute(stream, k.user_weights, k.weights);
                        for (const auto& args : k.args) k.part.primitive.execute(stream, args);
                        stream.wait();
                      }});
    }
    const MeasuredChoice choice = ChooseByMeasuring(key, runs, estimated_run_ms);
    const std::string& chosen = timed_names[choice.winner];
    build(chosen == names[0] ? std::string() : chosen);
    return chosen + ", " + choice.Summary();
  }
  build(std::string());
  return "";
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

Status OneDnnThunk::Impl::ExecuteFewPositions(char** frame, ExecuteContext& context) const {
  const float* lhs = reinterpret_cast<const float*>(frame[lhs_slot]);
  const float* rhs = reinterpret_cast<const float*>(frame[rhs_slot]);
  float* output = reinterpret_cast<float*>(frame[output_slot]);
  const int64_t rows = few.Positions(), n = few.output_channels;
  const int64_t width = FewPositionColumnBlock(few);
  const int64_t outputs = n / few.groups, group_blocks = (outputs + width - 1) / width;
  thread_local std::vector<float> padded, aside;
  // The windows read a copy of the input with its padding around it where they reach past its
  // edges, or where the input is the output, which the product writes while it reads.
  const float* input = lhs;
  if (few.NeedsPadding() || lhs == output) {
    if (static_cast<int64_t>(padded.size()) < few.PaddedSize()) padded.resize(few.PaddedSize());
    PadInput(few, lhs, padded.data());
    input = padded.data();
  }
  // An addend or the weights in the output's buffer (a residual updated in place) are read after
  // the product is written: the product goes aside first.
  std::vector<const float*> addends;
  for (int64_t slot : addend_slots) addends.push_back(reinterpret_cast<const float*>(frame[slot]));
  bool shared = rhs == output;
  for (const float* addend : addends) shared |= addend == output;
  float* result = output;
  if (shared) {
    if (static_cast<int64_t>(aside.size()) < rows * n) aside.resize(rows * n);
    result = aside.data();
  }
  // Task t is share t % few_row_parts of the rows (whole groups of 8) of column block
  // (t / few_row_parts) % group_blocks of group t / (few_row_parts * group_blocks).
  const int64_t share = (rows + 8 * few_row_parts - 1) / (8 * few_row_parts) * 8;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t column = t / few_row_parts, first_row = (t % few_row_parts) * share;
      const int64_t g = column / group_blocks, first = (column % group_blocks) * width;
      if (first_row >= rows) continue;
      FewPositionProduct(few, input, rhs, result, g, first_row, std::min(rows, first_row + share), first,
                         std::min(outputs, first + width));
    }
  };
  if (context.pool != nullptr && blocks > 1) {
    context.pool->ParallelFor(total, block, run);
  } else {
    run(0, total);
  }
  ApplySmallProductPostOps(post_ops, addends, rows, n, result);
  if (shared) std::memcpy(output, result, rows * n * sizeof(float));
  return OkStatus();
}

Status OneDnnThunk::Impl::ExecuteDepthwise(char** frame, ExecuteContext& context) const {
  const DepthwiseConvolution& d = *depthwise;
  const float* input = reinterpret_cast<const float*>(frame[lhs_slot]);
  const float* weights = reinterpret_cast<const float*>(frame[rhs_slot]);
  const float* bias = d.bias ? reinterpret_cast<const float*>(frame[addend_slots.at(0)]) : nullptr;
  float* output = reinterpret_cast<float*>(frame[output_slot]);
  // The loops write rows that later rows' windows still read: an input, weights or bias in the
  // output's buffer are read from a copy.
  thread_local std::vector<float> copy, bias_copy;
  if (bias == output) {
    bias_copy.assign(bias, bias + d.channels);
    bias = bias_copy.data();
  }
  const int64_t input_elements = d.images * d.height * d.width * d.channels;
  if (input == output) {
    copy.assign(input, input + input_elements);
    input = copy.data();
  } else if (weights == output) {
    const int64_t extent = (d.kernel_height - 1) * d.weights_row_stride + 2 * d.weights_tap_stride + d.channels;
    copy.assign(weights, weights + extent);
    weights = copy.data();
  }
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t image = t / depthwise_bands, band = t % depthwise_bands;
      DepthwiseConvolutionRows(d, input, weights, bias, output, image, band * d.out_height / depthwise_bands,
                               (band + 1) * d.out_height / depthwise_bands);
    }
  };
  if (context.pool != nullptr && blocks > 1) {
    context.pool->ParallelFor(total, block, run);
  } else {
    run(0, total);
  }
  return OkStatus();
}

Status OneDnnThunk::Impl::ExecuteConvolution(char** frame, ExecuteContext& context,
                                             const std::string& name) const {
  using Kind = OneDnnConvolution::Kind;
  if (few_positions) return ExecuteFewPositions(frame, context);
  if (depthwise) return ExecuteDepthwise(frame, context);
  float* lhs = reinterpret_cast<float*>(frame[lhs_slot]);
  float* rhs = reinterpret_cast<float*>(frame[rhs_slot]);
  float* output = reinterpret_cast<float*>(frame[output_slot]);
  float* weights = rhs;
  try {
    if (convolution_kind != Kind::kBackwardWeights && reorder_weights) {
      std::unique_lock<std::mutex> lock(weights_mutex, std::defer_lock);
      if (constant_weights) lock.lock();
      if (!weights_gather.empty()) {
        weights = nullptr;  // each part gathers its own copy (bind_part)
      } else if (!constant_weights || !weights_ready) {
        dnnl::memory user(user_weights_md, CpuEngine(), rhs);
        SingleOpenMpThread single_openmp_thread;
        weights_reorder.execute(ThreadStream(), user, weights_buffer);
        ThreadStream().wait();
        weights_ready = constant_weights;
      }
      if (weights != nullptr) weights = static_cast<float*>(weights_buffer.get_data_handle());
    }
  } catch (const dnnl::error& e) {
    return Error(fmt::format("{}: oneDNN: {}", name, e.what()));
  }
  auto bind_part = [&](int64_t t, std::unordered_map<int, dnnl::memory>& args,
                       dnnl::stream&) -> const Part& {
    auto bind = [&](int arg, const dnnl::memory::desc& md, void* data) {
      BindArgument(args, arg, md, data);
    };
    // Gathered weights are gathered here, on the part's thread, into a buffer of its own: written
    // on the caller before the parts, the buffer's lines were in the core of the part that read
    // them last, and the caller's 2304 floats took 3.2 us to write.
    float* part_weights =
        convolution_kind == Kind::kBackwardWeights || weights_gather.empty() ? weights : GatherWeights(rhs);
    if (!bands.empty()) {
      const Band& band = bands[t];
      bind(DNNL_ARG_SRC, band.part.src, lhs + band.src_offset);
      bind(DNNL_ARG_WEIGHTS, band.part.weights, part_weights);
      bind(DNNL_ARG_DST, band.part.dst, output + band.dst_offset);
      for (size_t a = 0; a < own_addends_from; ++a) {
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
        bind(DNNL_ARG_WEIGHTS, part.weights, part_weights);
        bind(DNNL_ARG_DST, part.dst, output + first * dst_step);
        for (size_t a = 0; a < own_addends_from; ++a) {
          float* addend = reinterpret_cast<float*>(frame[addend_slots[a]]);
          if (addend_kinds[a] == OneDnnPostOp::Addend::kFull) addend += first * dst_step;
          bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(addend_post_ops[a]) | DNNL_ARG_SRC_1, part.addends[a], addend);
        }
        break;
      case Kind::kBackwardData:
        bind(DNNL_ARG_DIFF_DST, part.dst, lhs + first * dst_step);
        bind(DNNL_ARG_WEIGHTS, part.weights, part_weights);
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
  // The epilogue per part where the frame's buffers allow it, else whole after the parts.
  const bool epilogue_per_part = epilogue != nullptr && epilogue->Applies(frame);
  // A forward call's ReLU and what follows it, on the images or rows the part wrote (channels
  // last: rows of the output's channels), still in its core's cache; then the epilogue.
  auto own = [&](int64_t t) {
    if (!own_post_ops.empty()) {
      const dims d =
          bands.empty() ? parts.at(std::min(block, total - t * block)).dst.dims() : bands[t].part.dst.dims();
      const int64_t offset = bands.empty() ? t * block * dst_step : bands[t].dst_offset;
      int64_t elements = 1;
      for (int64_t e : d) elements *= e;
      ApplyOwnPostOps(frame, output + offset, elements / d[1], d[1], d[1], offset, 0);
    }
    if (epilogue_per_part) epilogue->RunImages(frame, context.scratch, t * block, std::min(block, total - t * block));
  };
  const int64_t tasks = bands.empty() ? blocks : static_cast<int64_t>(bands.size());
  RETURN_IF_ERROR(ExecutePartsOnPool(context.pool, tasks, name, bind_part, own));
  if (epilogue != nullptr && !epilogue_per_part) RETURN_IF_ERROR(epilogue->RunWhole(frame, context));
  if (partial_weights.empty()) return OkStatus();
  // Backward weights in parts: each part summed its images; the kernel's gradient is the sum.
  float* sum = static_cast<float*>(partial_weights[0].get_data_handle());
  const size_t elements = partial_weights[0].get_desc().get_size() / sizeof(float);
  for (size_t p = 1; p < partial_weights.size(); ++p) {
    const float* part = static_cast<const float*>(partial_weights[p].get_data_handle());
    for (size_t e = 0; e < elements; ++e) sum[e] += part[e];
  }
  // The sum in order (the other parts' partial sums come from their cores' caches: read in
  // order, the hardware's prefetchers fetch them ahead), then gathered into the user's layout.
  if (!weights_gather.empty()) {
    for (size_t i = 0; i < weights_gather.size(); ++i) {
      if (weights_gather[i] >= 0) output[i] = sum[weights_gather[i]];
    }
    return OkStatus();
  }
  try {
    if (reorder_weights) {
      dnnl::memory user(user_weights_md, CpuEngine(), output);
      SingleOpenMpThread single_openmp_thread;
      weights_reorder.execute(ThreadStream(), partial_weights[0], user);
      ThreadStream().wait();
    } else {
      std::memcpy(output, sum, elements * sizeof(float));
    }
  } catch (const dnnl::error& e) {
    return Error(fmt::format("{}: oneDNN: {}", name, e.what()));
  }
  return OkStatus();
}

bool OneDnnThunk::TakeEpilogue(const HloInstruction& call, const std::vector<int64_t>& operand_slots,
                               int64_t output_slot, const HloInstruction& kernel_hlo,
                               std::unique_ptr<KernelThunk>& kernel) {
  using Kind = OneDnnConvolution::Kind;
  Impl& impl = *impl_;
  // A product split in k: the loop that sums its partial products runs the kernel on the rows it
  // summed (ExecuteSplitK), rows being the epilogue's images.
  if (impl.split_k && !impl.is_convolution && !impl.small && !impl.narrow && impl.batch == 1 &&
      impl.epilogue == nullptr && output_slot == impl.output_slot) {
    const dnnl::memory::dims d = impl.parts.at(impl.block).dst.dims();
    impl.epilogue = PartEpilogue::Make(call, operand_slots, output_slot, d[0], d[1], kernel_hlo, kernel);
    if (impl.epilogue == nullptr) return false;
    implementation_ += ", " + impl.epilogue->Description();
    return true;
  }
  if (!impl.is_convolution || impl.convolution_kind == Kind::kBackwardWeights || !impl.bands.empty() ||
      impl.few_positions || impl.depthwise || impl.epilogue != nullptr || impl.blocks < 2 ||
      output_slot != impl.output_slot) {
    return false;
  }
  const int64_t image_elements = impl.convolution_kind == Kind::kForward ? impl.dst_step : impl.src_step;
  impl.epilogue = PartEpilogue::Make(call, operand_slots, output_slot, impl.total, image_elements, kernel_hlo, kernel);
  if (impl.epilogue == nullptr) return false;
  implementation_ += ", " + impl.epilogue->Description();
  return true;
}

const KernelThunk* OneDnnThunk::EpilogueKernel() const {
  return impl_->epilogue != nullptr ? &impl_->epilogue->kernel() : nullptr;
}

}  // namespace xlens::runtime

#else  // XLENS_HAVE_ONEDNN

#include "compiler/runtime/onednn_thunks.h"

namespace xlens::runtime {

bool OneDnnThunk::TakeEpilogue(const HloInstruction&, const std::vector<int64_t>&, int64_t, const HloInstruction&,
                               std::unique_ptr<KernelThunk>&) {
  return false;
}

const KernelThunk* OneDnnThunk::EpilogueKernel() const { return nullptr; }

}  // namespace xlens::runtime

#endif  // XLENS_HAVE_ONEDNN

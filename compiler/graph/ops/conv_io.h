// Tensors as the window kernels (depthwise, 3-D convolution, 3-D pooling) compute on them:
// channels last, in the compute type C (float for the 16-bit floats). When a tensor is already
// both, the kernel reads and writes its buffer in place; otherwise the conversion or the
// transposition happens once, here. Internal to the op library (it uses cwise.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "compiler/graph/ops/conv_geometry.h"
#include "compiler/graph/ops/cwise.h"
#include "compiler/support/thread_pool.h"

namespace xlens::graph::conv {

// [batch, channels, spatial...] as (outer, channels, inner) for the layout transposes.
inline void ChannelsFirstExtents(const std::vector<int64_t>& dims, int64_t* outer,
                                 int64_t* channels, int64_t* inner) {
  *outer = dims.empty() ? 1 : dims[0];
  *channels = dims.size() > 1 ? dims[1] : 1;
  *inner = 1;
  for (size_t i = 2; i < dims.size(); ++i) *inner *= dims[i];
}

// Runs fn(begin, end) over [0, tasks) on `pool` (inline without one), in chunks of at least
// enough tasks for ~64k multiply-adds, `cost` being one task's.
template <typename Fn>
void ParallelTasks(ThreadPool* pool, int64_t tasks, int64_t cost, Fn&& fn) {
  if (tasks <= 0) return;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(cost, 1));
  if (pool == nullptr || tasks <= grain) {
    fn(int64_t{0}, tasks);
    return;
  }
  pool->ParallelFor(tasks, grain, [&](int64_t begin, int64_t end) { fn(begin, end); });
}

// A read-only view of `t` in C, channels last.
template <typename C, typename T>
class InputView {
 public:
  InputView(const Tensor& t, bool channels_first) {
    const T* src = cwise::Data<T>(t);
    const int64_t n = t.num_elements();
    if constexpr (std::is_same_v<C, T>) {
      if (!channels_first) {
        data_ = src;
        return;
      }
    }
    std::vector<C> converted(n);
    for (int64_t i = 0; i < n; ++i) converted[i] = static_cast<C>(src[i]);
    if (channels_first && t.rank() >= 3) {
      int64_t outer, channels, inner;
      ChannelsFirstExtents(t.dims(), &outer, &channels, &inner);
      storage_.resize(n);
      ChannelsToLast(converted.data(), storage_.data(), outer, channels, inner);
    } else {
      storage_ = std::move(converted);
    }
    data_ = storage_.data();
  }
  const C* data() const { return data_; }

 private:
  std::vector<C> storage_;
  const C* data_ = nullptr;
};

// Where a kernel writes output `t` (allocated in the op's layout, zeroed) in C, channels last;
// Finish() moves the result into `t` when it was computed elsewhere.
template <typename C, typename T>
class OutputView {
 public:
  OutputView(Tensor& t, bool channels_first) : t_(t), channels_first_(channels_first) {
    if constexpr (std::is_same_v<C, T>) {
      if (!channels_first) {
        data_ = cwise::MutableData<T>(t);
        return;
      }
    }
    storage_.assign(t.num_elements(), C(0));
    data_ = storage_.data();
  }
  C* data() { return data_; }
  void Finish() {
    if (storage_.empty()) return;
    T* dst = cwise::MutableData<T>(t_);
    if (channels_first_ && t_.rank() >= 3) {
      int64_t outer, channels, inner;
      ChannelsFirstExtents(t_.dims(), &outer, &channels, &inner);
      std::vector<C> moved(storage_.size());
      ChannelsToFirst(storage_.data(), moved.data(), outer, channels, inner);
      storage_.swap(moved);
    }
    for (size_t i = 0; i < storage_.size(); ++i) dst[i] = T(storage_[i]);
  }

 private:
  Tensor& t_;
  bool channels_first_;
  std::vector<C> storage_;
  C* data_ = nullptr;
};

// Runs one pass of a convolution kernel over its operands (GetConvOperands) in the compute type:
// fn(x, f, dy, result) gets channels-last views of the operands the pass reads (x, f for the
// forward pass; f, dy for the input's gradient; x, dy for the filter's), nullptr for the one it
// does not, and writes the whole result (y, dx or df).
template <Pass kPass, typename Fn>
Status RunConvPass(OpKernelContext& ctx, const ConvOperands& ops, Fn&& fn) {
  const DataType dtype = ctx.input(kPass == Pass::kBackpropInput ? 1 : 0).dtype();
  return cwise::Dispatch<cwise::kFloating>(ctx, dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = cwise::ComputeType<T>;
    const bool cf = ops.attrs.channels_first;
    std::optional<InputView<C, T>> x, f, dy;
    if constexpr (kPass != Pass::kBackpropInput) x.emplace(ctx.input(0), cf);
    if constexpr (kPass != Pass::kBackpropFilter) f.emplace(ctx.input(1), false);
    if constexpr (kPass != Pass::kForward) dy.emplace(ctx.input(2), cf);
    const std::vector<int64_t>& dims = kPass == Pass::kForward         ? ops.out_dims
                                       : kPass == Pass::kBackpropInput ? ops.input_dims
                                                                       : ops.filter_dims;
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dims));
    // The filter's gradient is in the filter's layout, whatever the data format.
    OutputView<C, T> result(*out, kPass != Pass::kBackpropFilter && cf);
    fn(x ? x->data() : nullptr, f ? f->data() : nullptr, dy ? dy->data() : nullptr,
       result.data());
    result.Finish();
    return OkStatus();
  });
}

}  // namespace xlens::graph::conv

#include "compiler/graph/ops/strided_copy.h"

#include <cstring>

namespace xlens::graph {
namespace {

struct Bytes16 {
  uint64_t lo, hi;
};

// Walks every index of the (already merged) view, calling `run(src_pos, dst_pos)` once per
// innermost run.
template <typename RunFn>
void ForEachRun(std::span<const int64_t> dims, std::span<const int64_t> ss,
                std::span<const int64_t> ds, int64_t src_offset, int64_t dst_offset, RunFn run) {
  const int outer = static_cast<int>(dims.size()) - 1;
  std::vector<int64_t> index(outer, 0);
  int64_t sp = src_offset, dp = dst_offset;
  while (true) {
    run(sp, dp);
    int d = outer - 1;
    for (; d >= 0; --d) {
      if (++index[d] < dims[d]) {
        sp += ss[d];
        dp += ds[d];
        break;
      }
      sp -= ss[d] * (dims[d] - 1);
      dp -= ds[d] * (dims[d] - 1);
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

template <typename T>
void CopyTyped(const T* src, T* dst, std::span<const int64_t> dims, std::span<const int64_t> ss,
               std::span<const int64_t> ds, int64_t src_offset, int64_t dst_offset) {
  const int64_t n = dims.back(), si = ss.back(), di = ds.back();
  ForEachRun(dims, ss, ds, src_offset, dst_offset, [&](int64_t sp, int64_t dp) {
    if constexpr (std::is_trivially_copyable_v<T>) {
      if (si == 1 && di == 1) {
        std::memcpy(dst + dp, src + sp, static_cast<size_t>(n) * sizeof(T));
        return;
      }
    }
    for (int64_t k = 0; k < n; ++k) dst[dp + k * di] = src[sp + k * si];
  });
}

}  // namespace

std::vector<int64_t> RowMajorStrides(std::span<const int64_t> dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims[i];
  }
  return strides;
}

void StridedCopy(const Tensor& src, int64_t src_offset, std::span<const int64_t> src_strides,
                 Tensor& dst, int64_t dst_offset, std::span<const int64_t> dst_strides,
                 std::span<const int64_t> dims) {
  // Drop unit dimensions and merge neighbours that are contiguous in both views.
  std::vector<int64_t> d, ss, ds;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) return;
    if (dims[i] == 1) continue;
    if (!d.empty() && ss.back() == src_strides[i] * dims[i] &&
        ds.back() == dst_strides[i] * dims[i]) {
      d.back() *= dims[i];
      ss.back() = src_strides[i];
      ds.back() = dst_strides[i];
    } else {
      d.push_back(dims[i]);
      ss.push_back(src_strides[i]);
      ds.push_back(dst_strides[i]);
    }
  }
  if (d.empty()) {
    d = {1};
    ss = {1};
    ds = {1};
  }
  const DataType type = src.dtype();
  if (type == DT_STRING) {
    CopyTyped(src.strings().data(), dst.strings().data(), d, ss, ds, src_offset, dst_offset);
    return;
  }
  if (type == DT_RESOURCE) {
    CopyTyped(src.handles().data(), dst.handles().data(), d, ss, ds, src_offset, dst_offset);
    return;
  }
  const void* s = src.raw_data();
  void* t = dst.raw_data();
  switch (DataTypeSize(type)) {
    case 1:
      CopyTyped(static_cast<const uint8_t*>(s), static_cast<uint8_t*>(t), d, ss, ds, src_offset,
                dst_offset);
      break;
    case 2:
      CopyTyped(static_cast<const uint16_t*>(s), static_cast<uint16_t*>(t), d, ss, ds, src_offset,
                dst_offset);
      break;
    case 4:
      CopyTyped(static_cast<const uint32_t*>(s), static_cast<uint32_t*>(t), d, ss, ds, src_offset,
                dst_offset);
      break;
    case 8:
      CopyTyped(static_cast<const uint64_t*>(s), static_cast<uint64_t*>(t), d, ss, ds, src_offset,
                dst_offset);
      break;
    case 16:
      CopyTyped(static_cast<const Bytes16*>(s), static_cast<Bytes16*>(t), d, ss, ds, src_offset,
                dst_offset);
      break;
    default:
      break;  // types without elements (variant) have nothing to copy
  }
}

void CopyIntoBox(const Tensor& src, Tensor& dst, std::span<const int64_t> dst_start) {
  const std::vector<int64_t> ss = RowMajorStrides(src.dims());
  const std::vector<int64_t> ds = RowMajorStrides(dst.dims());
  int64_t offset = 0;
  for (size_t i = 0; i < ds.size(); ++i) offset += dst_start[i] * ds[i];
  StridedCopy(src, 0, ss, dst, offset, ds, src.dims());
}

void CopyFromBox(const Tensor& src, std::span<const int64_t> src_start, Tensor& dst) {
  const std::vector<int64_t> ss = RowMajorStrides(src.dims());
  const std::vector<int64_t> ds = RowMajorStrides(dst.dims());
  int64_t offset = 0;
  for (size_t i = 0; i < ss.size(); ++i) offset += src_start[i] * ss[i];
  StridedCopy(src, offset, ss, dst, 0, ds, dst.dims());
}

}  // namespace xlens::graph

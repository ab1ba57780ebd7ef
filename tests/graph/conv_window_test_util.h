// Helpers of the depthwise, 3-D convolution and 3-D pooling kernel tests: random float tensors,
// list attrs, the inner product that checks a backprop against its forward op (a backprop is the
// adjoint of the forward linear map: <conv(x, f), dy> = <x, backprop_input(f, dy)> =
// <f, backprop_filter(x, dy)>), and channels-last <-> channels-first copies.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/graph/attr_value.h"
#include "compiler/graph/tensor.h"

namespace xlens::graph::testing {

inline Tensor RandomFloats(const std::vector<int64_t>& dims, uint32_t seed) {
  Tensor t(DT_FLOAT, dims);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto f = t.flat<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) f[i] = u(gen);
  return t;
}

inline AttrValue Ints(std::vector<int64_t> values) {
  AttrListValue l;
  l.i = std::move(values);
  return AttrValue::List(l);
}

inline double Dot(const Tensor& a, const Tensor& b) {
  double sum = 0;
  auto fa = a.flat<float>();
  auto fb = b.flat<float>();
  for (int64_t i = 0; i < a.num_elements(); ++i) sum += double(fa[i]) * double(fb[i]);
  return sum;
}

inline Tensor Int32Vector(const std::vector<int64_t>& dims) {
  std::vector<int32_t> v(dims.begin(), dims.end());
  return Tensor::Vector<int32_t>(DT_INT32, v);
}

// [n, spatial..., c] -> [n, c, spatial...] (float).
inline Tensor ToChannelsFirst(const Tensor& t) {
  std::vector<int64_t> d = t.dims();
  std::vector<int64_t> out = {d[0], d.back()};
  out.insert(out.end(), d.begin() + 1, d.end() - 1);
  Tensor r(DT_FLOAT, out);
  const int64_t c = d.back(), inner = t.num_elements() / d[0] / c;
  auto src = t.flat<float>();
  auto dst = r.flat<float>();
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t i = 0; i < inner; ++i)
      for (int64_t k = 0; k < c; ++k) dst[(n * c + k) * inner + i] = src[(n * inner + i) * c + k];
  return r;
}

inline float MaxAbsDiff(const Tensor& a, const Tensor& b) {
  float m = 0;
  auto fa = a.flat<float>();
  auto fb = b.flat<float>();
  for (int64_t i = 0; i < a.num_elements(); ++i) m = std::max(m, std::abs(fa[i] - fb[i]));
  return m;
}

}  // namespace xlens::graph::testing

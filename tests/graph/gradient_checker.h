// The finite-difference gradient check the gradient tests share: for y = f(x1, ..., xn) and a
// random cotangent dy, each op's symbolic gradient (AddSymbolicGradients) against central
// differences of sum(y * dy) with respect to each element of each xi, both run by the Session.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/gradients.h"
#include "compiler/graph/session.h"

namespace xlens::graph::testing {

using Build = std::function<Output(const Scope&, const std::vector<Output>&)>;

struct Arg {
  std::vector<int64_t> dims;
  double lo = -2, hi = 2;
  // The placeholder's declared shape; unset: the dims (a fully known static shape).
  std::optional<PartialShape> declared;
};

// One gradient check: the inputs' shapes and value ranges, and y = build(inputs).
struct Case {
  std::string name;
  std::vector<Arg> args;
  Build build;
  DataType dtype = DT_DOUBLE;
};

// A deterministic spread of values in [lo, hi] (distinct, so Max and Maximum have no ties).
inline Tensor Values(DataType dtype, const Arg& arg, uint64_t seed) {
  Tensor t(dtype, arg.dims);
  uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    double u = static_cast<double>(state >> 11) / static_cast<double>(1ULL << 53);
    t.SetFromDouble(i, arg.lo + (arg.hi - arg.lo) * u);
  }
  return t;
}

inline double Dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) s += a.GetAsDouble(i) * b.GetAsDouble(i);
  return s;
}

inline void CheckGradient(const Case& c) {
  SCOPED_TRACE(c.name);
  Scope root = Scope::NewRootScope();
  std::vector<Output> xs;
  for (size_t i = 0; i < c.args.size(); ++i) {
    PartialShape shape = c.args[i].declared ? *c.args[i].declared : PartialShape(c.args[i].dims);
    xs.push_back(ops::Placeholder(root.WithOpName("x" + std::to_string(i)), c.dtype, shape));
  }
  Output y = c.build(root, xs);
  ASSERT_TRUE(root.ok()) << root.status().message();
  Output dy = ops::Placeholder(root.WithOpName("dy"), y.type());
  std::vector<Output> grads;
  Status st = AddSymbolicGradients(root, {y}, xs, {dy}, &grads);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(grads.size(), xs.size());
  auto session = Session::Create(root.graph()->ToGraphDef());
  ASSERT_TRUE(session.ok()) << session.status().message();

  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < xs.size(); ++i) {
    feeds.push_back({xs[i].name(), Values(c.dtype, c.args[i], i + 1)});
  }
  auto y0 = (*session)->Run(feeds, {y.name()});
  ASSERT_TRUE(y0.ok()) << y0.status().message();
  Arg dy_arg{(*y0)[0].dims(), -1, 1};
  Tensor dy_value = Values((*y0)[0].dtype(), dy_arg, 99);
  auto f = [&](const std::vector<std::pair<std::string, Tensor>>& fd) {
    auto with_dy = fd;
    auto out = (*session)->Run(with_dy, {y.name()});
    EXPECT_TRUE(out.ok()) << out.status().message();
    return out.ok() ? Dot((*out)[0], dy_value) : NAN;
  };
  std::vector<std::string> fetches;
  for (const Output& g : grads) {
    ASSERT_TRUE(g.valid()) << "no gradient for an input";
    fetches.push_back(g.name());
  }
  auto all = feeds;
  all.push_back({dy.name(), dy_value});
  auto symbolic = (*session)->Run(all, fetches);
  ASSERT_TRUE(symbolic.ok()) << symbolic.status().message();

  const bool is_double = c.dtype == DT_DOUBLE;
  const double h = is_double ? 1e-6 : 1e-2;
  const double tol = is_double ? 1e-6 : 2e-2;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& g = (*symbolic)[i];
    ASSERT_EQ(g.dims(), feeds[i].second.dims()) << "gradient " << i << " has the wrong shape";
    for (int64_t k = 0; k < g.num_elements(); ++k) {
      auto plus = feeds, minus = feeds;
      plus[i].second = feeds[i].second.Clone();
      minus[i].second = feeds[i].second.Clone();
      const double v = feeds[i].second.GetAsDouble(k);
      plus[i].second.SetFromDouble(k, v + h);
      minus[i].second.SetFromDouble(k, v - h);
      const double numeric = (f(plus) - f(minus)) / (2 * h);
      const double got = g.GetAsDouble(k);
      EXPECT_NEAR(got, numeric, tol * std::max(1.0, std::abs(numeric)))
          << "d/d x" << i << "[" << k << "]";
    }
  }
}

}  // namespace xlens::graph::testing

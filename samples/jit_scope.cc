// jit_scope: the tutorial's manual clustering, tf.xla.experimental.jit_scope in a TF1 graph.
//
//   with jit_scope():                  y = x + x          (scope jit_scope_0, compiled)
//   outside any scope:                 sin, mul, add, cos, sub
//   with jit_scope():                  b = exp(a) + 1     (scope jit_scope_1, compiled)
//   with jit_scope(compile_ops=False): c = b * 2          (never compiled)
//   out = c + y
//
// In a default session (auto-jit off) only the scoped nodes are compiled, each scope its own
// cluster; with auto-clustering the unscoped nodes join too. The sample prints, for every node,
// the cluster it was compiled in or the clustering's reason for leaving it out. The graph and
// its node names are TensorFlow's (../shared/corpus/tf/jit_scope), so the clusters can be
// compared with TensorFlow's own.
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/scope.h"
#include "samples/sample_options.h"

namespace xlens::samples {
namespace {

using graph::Tensor;
namespace ops = graph::ops;

constexpr int64_t kN = 8;

StatusOr<graph::GraphDef> BuildGraph() {
  graph::Scope root = graph::Scope::NewRootScope();
  auto x = ops::Placeholder(root.WithOpName("x"), graph::DT_FLOAT, graph::PartialShape({kN}));
  graph::Scope scope0 = root.WithXlaScope(true, "jit_scope_0");
  auto y = ops::Add(scope0.WithOpName("add"), x, x);
  auto a = ops::Sin(root.WithOpName("a_outside"), y);
  auto m = ops::Mul(root.WithOpName("mul"), a, ops::Input::Like(2.0));
  auto a1 = ops::Add(root.WithOpName("add_1"), m, ops::Input::Like(1.0));
  auto c1 = ops::Cos(root.WithOpName("a_outside_cos"), a1);
  auto s = ops::Sub(root.WithOpName("sub"), c1, ops::Input::Like(0.5));
  graph::Scope scope1 = root.WithXlaScope(true, "jit_scope_1");
  auto e = ops::Exp(scope1.WithOpName("b_exp"), s);
  auto b = ops::Add(scope1.WithOpName("add_2"), e, ops::Input::Like(1.0));
  graph::Scope scope2 = root.WithXlaScope(false, "jit_scope_2");
  auto c = ops::Mul(scope2.WithOpName("c_nocompile"), b, ops::Input::Like(2.0));
  ops::Add(root.WithOpName("out"), c, y);
  RETURN_IF_ERROR(root.status());
  return root.graph()->ToGraphDef();
}

int Main(int argc, char** argv) {
  SampleOptions options = ParseSampleOptions(
      argc, argv, "jit_scope",
      "The tutorial's jit_scope: y = x + x compiled in its scope, the rest not; prints which ops\n"
      "were compiled and why the others were not.",
      JitMode::kDefault);
  auto def = BuildGraph();
  if (!def.ok()) return Fail(options, def.status());
  if (Status s = MaybeWriteGraph(options, *def); !s.ok()) return Fail(options, s);
  if (options.jit == JitMode::kOn) {
    return Fail(options, Error("--jit=on compiles the whole graph and ignores the scopes; use "
                               "--jit=default (the scopes alone) or --jit=auto"));
  }
  Tensor x(graph::DT_FLOAT, {kN});
  for (int64_t i = 0; i < kN; ++i) x.flat<float>()[i] = 0.25f * static_cast<float>(i) - 1.0f;

  auto s = SampleSession::Create(options, *def, options.jit, "");
  if (!s.ok()) return Fail(options, s.status());
  if (!options.trace.empty()) {
    if (Status st = StartTrace(); !st.ok()) return Fail(options, st);
  }
  auto out = (*s)->session().Run({{"x", x}}, {"out"});
  if (!options.trace.empty()) {
    if (Status st = MaybeWriteTrace(options, StopTrace()); !st.ok()) return Fail(options, st);
  }
  if (!out.ok()) return Fail(options, out.status());

  // The same in float64, op by op as the graph says, to show the compiled result agrees.
  double worst = 0;
  for (int64_t i = 0; i < kN; ++i) {
    double xv = x.flat<float>()[i], y = xv + xv;
    double b = std::exp(std::cos(std::sin(y) * 2 + 1) - 0.5) + 1;
    worst = std::max(worst, std::fabs((*out)[0].GetAsDouble(i) - (b * 2 + y)));
  }
  std::printf("jit_scope (--jit=%s): out = %s\n", std::string(JitModeName(options.jit)).c_str(),
              (*out)[0].DebugString(kN).c_str());
  std::printf("  largest difference from float64: %.3g\n", worst);
  if ((*s)->jit() == nullptr) {
    std::printf("no JIT: every op ran op by op, the scopes were ignored\n");
    return 0;
  }
  PrintClustering((*s)->jit()->record());
  std::printf("%lld compilation%s\n", static_cast<long long>((*s)->compilations()),
              (*s)->compilations() == 1 ? "" : "s");
  return 0;
}

}  // namespace
}  // namespace xlens::samples

int main(int argc, char** argv) { return xlens::samples::Main(argc, argv); }

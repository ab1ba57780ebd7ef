// not_compilable: a function XLA cannot compile whole.
//
//   f(x) = unique(abs(x * 3 + 1) - 2)     x: int32[8]
//
// Unique's output shape depends on the values (how many distinct elements there are), and XLA
// must know every dimension when it compiles. As a must-compile function (--jit=on, TensorFlow's
// jit_compile=True) the compilation fails with TensorFlow's error, naming the op and the reason.
// Without must-compile (--jit=auto), auto-clustering compiles the arithmetic and leaves Unique to
// TensorFlow's executor, saying why. --op=UniqueWithCounts uses the op TensorFlow 2.21 itself
// refuses under jit_compile (it compiles tf.unique with a bounded dynamic shape; xlens does not).
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

StatusOr<graph::GraphDef> BuildGraph(const std::string& unique_op) {
  graph::Scope root = graph::Scope::NewRootScope();
  auto x = ops::Placeholder(root.WithOpName("x"), graph::DT_INT32, graph::PartialShape({kN}));
  auto mul = ops::Mul(root.WithOpName("mul"), x, ops::Input::Like(3));
  auto add = ops::Add(root.WithOpName("add"), mul, ops::Input::Like(1));
  auto abs = ops::Abs(root.WithOpName("Abs"), add);
  auto sub = ops::Sub(root.WithOpName("sub"), abs, ops::Input::Like(2));
  graph::Node* unique = root.WithOpName(unique_op).AddNode(
      unique_op, {sub}, {{"out_idx", graph::AttrValue::Type(graph::DT_INT32)}});
  if (unique != nullptr) {
    ops::Identity(root.WithOpName("Identity"), graph::Output(unique, 0));
    ops::Identity(root.WithOpName("Identity_1"), graph::Output(unique, 1));
  }
  RETURN_IF_ERROR(root.status());
  return root.graph()->ToGraphDef();
}

int Main(int argc, char** argv) {
  std::string op = "Unique";
  SampleOptions options = ParseSampleOptions(
      argc, argv, "not_compilable",
      "unique(abs(x*3 + 1) - 2): as a must-compile function it fails with TensorFlow's error;\n"
      "auto-clustered, Unique is left out of the cluster and the rest is compiled.",
      JitMode::kOn, {{"op", "Unique (default) or UniqueWithCounts", &op}});
  if (op != "Unique" && op != "UniqueWithCounts") {
    return Fail(options, Error(fmt::format("--op: '{}' is not Unique or UniqueWithCounts", op)));
  }
  auto def = BuildGraph(op);
  if (!def.ok()) return Fail(options, def.status());
  if (Status s = MaybeWriteGraph(options, *def); !s.ok()) return Fail(options, s);

  Tensor x(graph::DT_INT32, {kN});
  const int32_t values[kN] = {1, 2, 1, 3, 2, 5, 1, 7};
  for (int64_t i = 0; i < kN; ++i) x.flat<int32_t>()[i] = values[i];

  auto s = SampleSession::Create(options, *def, options.jit, "__inference_f");
  if (!s.ok()) return Fail(options, s.status());
  if (!options.trace.empty()) {
    if (Status st = StartTrace(); !st.ok()) return Fail(options, st);
  }
  auto out = (*s)->session().Run({{"x", x}}, {"Identity", "Identity_1"});
  if (!options.trace.empty()) {
    if (Status st = MaybeWriteTrace(options, StopTrace()); !st.ok()) return Fail(options, st);
  }
  // TensorFlow raises InvalidArgumentError with this text; the sample prints it and exits 1.
  if (!out.ok()) return Fail(options, out.status());

  std::printf("not_compilable (--jit=%s): %s(abs(x*3 + 1) - 2) of x = %s\n",
              std::string(JitModeName(options.jit)).c_str(), op.c_str(),
              x.DebugString(kN).c_str());
  std::printf("  y = %s\n  idx = %s\n", (*out)[0].DebugString(kN).c_str(),
              (*out)[1].DebugString(kN).c_str());
  if ((*s)->jit() != nullptr) {
    PrintClustering((*s)->jit()->record());
    for (const auto& g : (*s)->jit()->record().graphs) {
      if (g.result.unclustered.count(op) > 0) {
        std::printf("%s ran op by op in TensorFlow's executor, outside the cluster\n", op.c_str());
      }
    }
    std::printf("%lld compilation%s\n", static_cast<long long>((*s)->compilations()),
                (*s)->compilations() == 1 ? "" : "s");
  }
  return 0;
}

}  // namespace
}  // namespace xlens::samples

int main(int argc, char** argv) { return xlens::samples::Main(argc, argv); }

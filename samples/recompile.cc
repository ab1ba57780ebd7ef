// recompile: `a + b` launched with a and b of shape [1,10], then [1,100], then [1,10] again.
//
// XLA compiles for static shapes, so a new shape is a new compilation: the second launch
// recompiles and says why ("recompiling cluster_0: argument shapes changed from ... to ..."),
// the third finds its executable in the cache. Under auto-clustering (--jit=auto) TensorFlow is
// lazy: the first request for a new signature runs op by op and the second compiles, so the
// sample launches [1,100] twice there. The trace shows each compilation as a `compile` span.
#include <cstdio>

#include <fmt/format.h>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/scope.h"
#include "profiler/trace.h"
#include "samples/sample_options.h"

namespace xlens::samples {
namespace {

using graph::Tensor;
namespace ops = graph::ops;

// TensorFlow's graph of `tf.function(lambda a, b: a + b)` with input_signature [1, None].
StatusOr<graph::GraphDef> BuildGraph() {
  graph::Scope root = graph::Scope::NewRootScope();
  auto a = ops::Placeholder(root.WithOpName("a"), graph::DT_FLOAT, graph::PartialShape({1, -1}));
  auto b = ops::Placeholder(root.WithOpName("b"), graph::DT_FLOAT, graph::PartialShape({1, -1}));
  auto add = ops::Add(root.WithOpName("add"), a, b);
  ops::Identity(root.WithOpName("Identity"), add);
  RETURN_IF_ERROR(root.status());
  return root.graph()->ToGraphDef();
}

Tensor Row(int64_t n, float scale) {
  Tensor t(graph::DT_FLOAT, {1, n});
  for (int64_t i = 0; i < n; ++i) t.flat<float>()[i] = scale * static_cast<float>(i + 1);
  return t;
}

int Main(int argc, char** argv) {
  SampleOptions options = ParseSampleOptions(
      argc, argv, "recompile",
      "a + b with shapes [1,10], [1,100], [1,10]: a new shape compiles again, and the log and\n"
      "the trace say so.",
      JitMode::kOn);
  auto def = BuildGraph();
  if (!def.ok()) return Fail(options, def.status());
  if (Status s = MaybeWriteGraph(options, *def); !s.ok()) return Fail(options, s);
  auto s = SampleSession::Create(options, *def, options.jit, "__inference_f");
  if (!s.ok()) return Fail(options, s.status());
  // Auto-clustering of one AddV2 needs a minimum cluster size of 1, as TensorFlow's run did.
  if (options.jit == JitMode::kAuto && options.flags.tf_xla_min_cluster_size > 1) {
    std::printf("note: one AddV2 is below --tf_xla_min_cluster_size=%lld; add "
                "--tf_xla_min_cluster_size=1 to cluster it\n",
                static_cast<long long>(options.flags.tf_xla_min_cluster_size));
  }
  std::vector<int64_t> widths = {10, 100, 10};
  if (options.jit == JitMode::kAuto) widths = {10, 100, 100, 10};  // lazy compilation

  if (Status st = StartTrace(); !st.ok()) return Fail(options, st);
  Status failed = OkStatus();
  for (size_t call = 0; call < widths.size(); ++call) {
    const int64_t before = (*s)->compilations();
    const size_t log_before = (*s)->log().size();
    auto out = (*s)->session().Run({{"a", Row(widths[call], 1)}, {"b", Row(widths[call], 2)}},
                                   {"Identity"});
    if (!out.ok()) {
      failed = out.status();
      break;
    }
    const int64_t n = widths[call];
    const bool right = (*out)[0].dims() == std::vector<int64_t>{1, n} &&
                       (*out)[0].GetAsDouble(n - 1) == 3.0 * n;
    const int64_t compiled = (*s)->compilations() - before;
    bool lazy = false;
    for (size_t i = log_before; i < (*s)->log().size(); ++i) {
      lazy |= (*s)->log()[i].find("runs op by op") != std::string::npos;
    }
    std::string what;
    if ((*s)->jit() == nullptr) what = "op by op (no JIT)";
    else if (lazy) what = "run op by op (lazy compilation: compiled when seen again)";
    else if (compiled > 0) what = before > 0 ? "compiled again" : "compiled";
    else if (before > 0) what = "cached executable";
    else what = "op by op (nothing was clustered)";
    std::printf("call %zu: a, b f32[1,%lld]: %s; out[0,%lld] = %g (%s)\n", call + 1,
                static_cast<long long>(n), what.c_str(), static_cast<long long>(n - 1),
                (*out)[0].GetAsDouble(n - 1), right ? "right" : "WRONG");
  }
  profiler::Trace trace = StopTrace();
  if (Status st = MaybeWriteTrace(options, trace); !st.ok()) return Fail(options, st);
  if (!failed.ok()) return Fail(options, failed);
  int compile_spans = 0;
  for (const profiler::TraceEvent& e : trace.events) {
    // The compiler's spans ("compile MODULE"), and the JIT's markers beside them ("recompile
    // CLUSTER", "lazy fallback CLUSTER") that say why.
    if (e.category != profiler::category::kCompile) continue;
    const bool compilation = e.name.starts_with("compile ");
    compile_spans += compilation;
    if (compilation) {
      std::printf("trace: %s (%.1f ms)\n", e.name.c_str(), e.duration_ns / 1e6);
    } else {
      std::printf("trace: %s\n", e.name.c_str());
    }
  }
  std::printf("%lld compilation%s, %d compile span%s in the trace\n",
              static_cast<long long>((*s)->compilations()), (*s)->compilations() == 1 ? "" : "s",
              compile_spans, compile_spans == 1 ? "" : "s");
  return 0;
}

}  // namespace
}  // namespace xlens::samples

int main(int argc, char** argv) { return xlens::samples::Main(argc, argv); }

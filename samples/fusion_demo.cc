// fusion_demo: the XLA overview's example, reduce_sum(x + y*z) over three f32[1024] vectors.
//
// Without XLA TensorFlow runs it as three kernels (Mul, AddV2, Sum), each writing its result to
// memory for the next to read back. With XLA the three become one fused kernel that reads x, y
// and z once and writes one float. The sample runs the graph op by op, then with the JIT, counts
// the kernels each run launched (from the trace's kernel spans, not from the plan), and, with
// --xla_dump_to, says which pass made the fusion and in which dump file it first appears.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/scope.h"
#include "dump/manifest.h"
#include "samples/sample_options.h"

namespace xlens::samples {
namespace {

using graph::Tensor;
namespace ops = graph::ops;

constexpr int64_t kN = 1024;

// The graph tf.function builds for `tf.reduce_sum(x + y * z)`, with TensorFlow's node names.
StatusOr<graph::GraphDef> BuildGraph() {
  graph::Scope root = graph::Scope::NewRootScope();
  auto x = ops::Placeholder(root.WithOpName("x"), graph::DT_FLOAT, graph::PartialShape({kN}));
  auto y = ops::Placeholder(root.WithOpName("y"), graph::DT_FLOAT, graph::PartialShape({kN}));
  auto z = ops::Placeholder(root.WithOpName("z"), graph::DT_FLOAT, graph::PartialShape({kN}));
  auto mul = ops::Mul(root.WithOpName("mul"), y, z);
  auto add = ops::Add(root.WithOpName("add"), x, mul);
  auto axis = ops::Const(root.WithOpName("Const"), std::vector<int32_t>{0});
  auto sum = ops::Sum(root.WithOpName("Sum"), add, axis);
  ops::Identity(root.WithOpName("Identity"), sum);
  RETURN_IF_ERROR(root.status());
  return root.graph()->ToGraphDef();
}

Tensor Vector(double (*f)(int64_t)) {
  Tensor t(graph::DT_FLOAT, {kN});
  for (int64_t i = 0; i < kN; ++i) t.flat<float>()[i] = static_cast<float>(f(i));
  return t;
}

struct RunResult {
  double value = 0;
  KernelCount kernels;
  profiler::Trace trace;
  int64_t compilations = 0;
  std::unique_ptr<SampleSession> session;
};

StatusOr<RunResult> RunOnce(const SampleOptions& options, const graph::GraphDef& def, JitMode jit,
                            const std::vector<std::pair<std::string, Tensor>>& feeds) {
  RunResult r;
  ASSIGN_OR_RETURN(r.session, SampleSession::Create(options, def, jit, "__inference_model_fn"));
  RETURN_IF_ERROR(StartTrace());
  auto out = r.session->session().Run(feeds, {"Identity"});
  r.trace = StopTrace();
  if (!out.ok()) return out.status();
  r.value = (*out)[0].GetAsDouble(0);
  r.kernels = CountKernels(r.trace);
  r.compilations = r.session->compilations();
  return r;
}

std::string KernelLine(const KernelCount& k) {
  return fmt::format("{} kernel{}: {}", k.total(), k.total() == 1 ? "" : "s",
                     fmt::join(k.names, ", "));
}

// Where the fusion appears in the dump: the manifest's kernels name the pass that made each
// fusion, and that pass's stage names its per-pass file.
void PrintDumpStory(const SampleOptions& options) {
  const std::string dir = options.flags.xla_dump_to;
  auto manifest = ReadManifest((std::filesystem::path(dir) / "manifest.json").string());
  if (!manifest.ok()) {
    std::printf("no dump manifest in %s: %s\n", dir.c_str(), manifest.status().message().c_str());
    return;
  }
  for (const ManifestModule& module : manifest->modules) {
    std::printf("dump of module %s:\n", module.name.c_str());
    for (const ManifestKernel& kernel : module.kernels) {
      if (kernel.created_by_pass.empty()) {
        std::printf("  kernel %s (%s): not a fusion\n", kernel.name.c_str(),
                    kernel.hlo_instruction.c_str());
        continue;
      }
      std::printf("  kernel %s: %s fusion %s of ops {%s}, made by the pass '%s'\n",
                  kernel.name.c_str(), kernel.fusion_kind.c_str(), kernel.hlo_instruction.c_str(),
                  fmt::format("{}", fmt::join(kernel.op_names, ", ")).c_str(),
                  kernel.created_by_pass.c_str());
      bool shown = false;
      for (const ManifestStage& stage : module.stages) {
        if (stage.pass != kernel.created_by_pass || !stage.changed) continue;
        for (const std::string& file : stage.files) {
          if (!file.ends_with(".txt")) continue;
          std::printf("  it first appears in %s\n",
                      (std::filesystem::path(dir) / file).string().c_str());
          shown = true;
        }
        if (shown) break;
      }
      if (!shown) {
        std::printf("  (add --xla_dump_hlo_pass_re=.* for the file after each pass)\n");
      }
    }
    for (const std::string& file : module.files) {
      if (file.ends_with("after_optimizations.txt")) {
        std::printf("  optimized module: %s\n", (std::filesystem::path(dir) / file).string().c_str());
      }
    }
  }
}

int Main(int argc, char** argv) {
  SampleOptions options = ParseSampleOptions(
      argc, argv, "fusion_demo",
      "reduce_sum(x + y*z) over f32[1024]: three kernels op by op, one fused kernel with XLA.",
      JitMode::kOn);
  auto def = BuildGraph();
  if (!def.ok()) return Fail(options, def.status());
  if (Status s = MaybeWriteGraph(options, *def); !s.ok()) return Fail(options, s);

  const std::vector<std::pair<std::string, Tensor>> feeds = {
      {"x", Vector([](int64_t i) { return std::sin(0.1 * i); })},
      {"y", Vector([](int64_t i) { return std::cos(0.05 * i); })},
      {"z", Vector([](int64_t i) { return (i % 7 - 3) / 3.0; })}};
  double reference = 0;  // in float64, from the float32 inputs
  for (int64_t i = 0; i < kN; ++i) {
    reference += double(feeds[0].second.flat<float>()[i]) +
                 double(feeds[1].second.flat<float>()[i]) * double(feeds[2].second.flat<float>()[i]);
  }

  std::printf("fusion_demo: reduce_sum(x + y*z), x, y, z: f32[%lld]\n", static_cast<long long>(kN));
  auto op_by_op = RunOnce(options, *def, JitMode::kOff, feeds);
  if (!op_by_op.ok()) return Fail(options, op_by_op.status());
  std::printf("op by op (--jit=off): %s\n", KernelLine(op_by_op->kernels).c_str());
  std::printf("  result %.6f (float64 reference %.6f)\n", op_by_op->value, reference);
  const profiler::Trace* traced = &op_by_op->trace;

  StatusOr<RunResult> jitted = Error("not run");
  if (options.jit != JitMode::kOff) {
    jitted = RunOnce(options, *def, options.jit, feeds);
    if (!jitted.ok()) return Fail(options, jitted.status());
    traced = &jitted->trace;
    std::printf("with the JIT (--jit=%s): %s\n", std::string(JitModeName(options.jit)).c_str(),
                KernelLine(jitted->kernels).c_str());
    std::printf("  result %.6f, %lld compilation%s\n", jitted->value,
                static_cast<long long>(jitted->compilations), jitted->compilations == 1 ? "" : "s");
    if (jitted->compilations == 0 && jitted->session->jit() != nullptr) {
      // Auto-clustering may leave the graph alone: say why (TensorFlow's reasons).
      PrintClustering(jitted->session->jit()->record());
      std::printf("note: TensorFlow 2.21 leaves this graph alone too; --tf_xla_min_cluster_size=1 "
                  "clusters it\n");
    }
  }
  if (Status s = MaybeWriteTrace(options, *traced); !s.ok()) return Fail(options, s);
  if (jitted.ok() && !options.flags.xla_dump_to.empty()) PrintDumpStory(options);
  return 0;
}

}  // namespace
}  // namespace xlens::samples

int main(int argc, char** argv) { return xlens::samples::Main(argc, argv); }

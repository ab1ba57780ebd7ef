// TensorFlow's JIT end to end on TensorFlow's own TF1 programs (../shared/corpus/tf): the session
// clusters every Run signature, compiles the clusters and launches them; the training must
// reproduce TensorFlow's JIT numbers (its loss curve and final variables) and the graphs must
// carry the launch ops.
#include "compiler/cluster/xla_jit.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/cluster/xla_device_compiler.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/session.h"
#include "compiler/hlo/npy.h"
#include "dump/manifest.h"
#include "samples/data/mnist_batch.h"

namespace xlens::cluster {
namespace {

namespace fs = std::filesystem;
using graph::Tensor;
using ::testing::HasSubstr;

std::string CorpusDir() { return std::string(XLENS_SHARED_DIR) + "/corpus/tf"; }

#define SKIP_WITHOUT_CORPUS()                                                              \
  if (!fs::exists(CorpusDir())) GTEST_SKIP() << "the TF corpus is absent: " << CorpusDir()

Tensor LoadNpy(const std::string& path) {
  auto literal = ReadNpy(path);
  EXPECT_TRUE(literal.ok()) << literal.status().message();
  auto t = Tensor::FromLiteral(std::move(*literal));
  EXPECT_TRUE(t.ok()) << t.status().message();
  return *t;
}

Tensor ToFloat(const Tensor& t) {
  Tensor out(graph::DT_FLOAT, t.dims());
  for (int64_t i = 0; i < t.num_elements(); ++i) out.flat<float>()[i] = t.GetAsDouble(i);
  return out;
}

DebugOptions Flags(const std::string& tf_xla_flags) {
  FlagEnvironment env;
  env.tf_xla_flags = tf_xla_flags;
  auto flags = ParseDebugOptions(env);
  EXPECT_TRUE(flags.ok()) << flags.status().message();
  return *flags;
}

struct JitSession {
  std::unique_ptr<XlaJit> jit;
  std::unique_ptr<graph::Session> session;
  std::vector<std::string> log;
};

JitSession OpenJitSession(const std::string& graph_path, graph::GlobalJitLevel level,
                          const std::string& tf_xla_flags) {
  JitSession s;
  s.jit = std::make_unique<XlaJit>(Flags(tf_xla_flags),
                                   [log = &s.log](const std::string& line) { log->push_back(line); });
  auto def = graph::ReadGraphDef(graph_path);
  EXPECT_TRUE(def.ok()) << def.status().message();
  graph::SessionOptions options;
  options.global_jit_level = level;
  s.jit->Install(&options);
  auto session = graph::Session::Create(*def, options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (session.ok()) s.session = std::move(*session);
  return s;
}

void RunLinearRegressionWithJit(const std::string& variant, graph::GlobalJitLevel level,
                                const std::string& flags) {
  std::string dir = CorpusDir() + "/linreg_tf1/" + variant;
  JitSession s = OpenJitSession(dir + "/graph.pbtxt", level, flags);
  ASSERT_NE(s.session, nullptr);
  auto init = s.session->Run({}, {}, {"init"});
  ASSERT_TRUE(init.ok()) << init.status().message();
  Tensor x = ToFloat(LoadNpy(dir + "/inputs/x_observed.npy"));
  Tensor y = ToFloat(LoadNpy(dir + "/inputs/y_observed.npy"));
  Tensor curve = LoadNpy(dir + "/outputs/loss_curve.npy");
  for (int step = 0; step < curve.num_elements(); ++step) {
    auto out = s.session->Run({{"x_observed", x}, {"y_observed", y}}, {"Mean"}, {"GradientDescent"});
    ASSERT_TRUE(out.ok()) << out.status().message();
    double got = (*out)[0].GetAsDouble(0), want = curve.GetAsDouble(step);
    // TensorFlow's JIT and op-by-op curves differ by up to 9.5e-7; ours must stay as close.
    ASSERT_LE(std::fabs(got - want), 2e-6 * std::fabs(want) + 1e-6) << "step " << step + 1;
  }
  auto final_vars = s.session->Run({{"x_observed", x}, {"y_observed", y}},
                                   {"weights/Read/ReadVariableOp", "bias/Read/ReadVariableOp"});
  ASSERT_TRUE(final_vars.ok()) << final_vars.status().message();
  EXPECT_NEAR((*final_vars)[0].GetAsDouble(0), LoadNpy(dir + "/outputs/W_final.npy").GetAsDouble(0),
              1e-5);
  EXPECT_NEAR((*final_vars)[1].GetAsDouble(0), LoadNpy(dir + "/outputs/b_final.npy").GetAsDouble(0),
              1e-5);

  // The training step really ran compiled: its graph holds the launch ops, and, as in
  // TensorFlow, one cluster holds the whole forward and backward pass with both updates.
  XlaJitRecord record = s.jit->record();
  bool found_train_cluster = false;
  for (const auto& g : record.graphs) {
    for (const auto& [name, nodes] : g.result.clusters) {
      auto has = [&](const std::string& n) {
        return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
      };
      found_train_cluster |= has("Mean") && has("GradientDescent") &&
                             has("GradientDescent/update_weights/ResourceApplyGradientDescent") &&
                             has("GradientDescent/update_bias/ResourceApplyGradientDescent");
    }
  }
  EXPECT_TRUE(found_train_cluster);
  ASSERT_NE(s.jit->compiler(), nullptr);
  EXPECT_GE(s.jit->compiler()->compilations(), 2);
  bool has_launch = false;
  for (const auto& [key, g] : s.session->ExecutedGraphs()) {
    for (graph::Node* n : g->op_nodes()) has_launch |= n->type_string() == "_XlaRun";
  }
  EXPECT_TRUE(has_launch);
}

TEST(XlaJitTest, LinearRegressionWithSessionJitFollowsTensorFlowsJit) {
  SKIP_WITHOUT_CORPUS();
  RunLinearRegressionWithJit("jit", graph::GlobalJitLevel::kOn1,
                             "--tf_xla_cpu_global_jit");
}

TEST(XlaJitTest, LinearRegressionWithAutoJitFromTheFlagsFollowsTensorFlowsJit) {
  SKIP_WITHOUT_CORPUS();
  RunLinearRegressionWithJit("autojit_env", graph::GlobalJitLevel::kDefault,
                             "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit");
}

// With XLA's dump on, manifest.json holds the clustered graphs: their stages' files, each
// cluster's nodes and the HLO modules it compiled to, whose kernels name (op_names) nodes of that
// cluster: graph op -> cluster -> module -> kernel, followable both ways.
TEST(XlaJitTest, TheManifestChainsGraphOpsToClustersToModulesToKernels) {
  SKIP_WITHOUT_CORPUS();
  const fs::path tmp =
      fs::temp_directory_path() / ("xlens_jit_manifest_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  const std::string dir = CorpusDir() + "/linreg_tf1/jit";
  std::vector<std::string> log;
  DebugOptions flags = Flags("--tf_xla_cpu_global_jit --tf_xla_clustering_debug");
  flags.xla_dump_to = (tmp / "xla").string();
  flags.tf_dump_graph_prefix = (tmp / "tf").string();
  {
    XlaJit jit(flags, [&](const std::string& line) { log.push_back(line); });
    auto def = graph::ReadGraphDef(dir + "/graph.pbtxt");
    ASSERT_TRUE(def.ok());
    graph::SessionOptions options;
    options.global_jit_level = graph::GlobalJitLevel::kOn1;
    jit.Install(&options);
    auto session = graph::Session::Create(*def, options);
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE((*session)->Run({}, {}, {"init"}).ok());
    Tensor x = ToFloat(LoadNpy(dir + "/inputs/x_observed.npy"));
    Tensor y = ToFloat(LoadNpy(dir + "/inputs/y_observed.npy"));
    ASSERT_TRUE((*session)->Run({{"x_observed", x}, {"y_observed", y}}, {"Mean"}, {"GradientDescent"}).ok());
  }
  auto manifest = ReadManifest((tmp / "xla" / "manifest.json").string());
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  ASSERT_GE(manifest->graphs.size(), 2u);
  bool found_train = false;
  for (const ManifestGraph& g : manifest->graphs) {
    for (const ManifestGraphStage& stage : g.stages) {
      for (const std::string& f : stage.files) {
        fs::path p = fs::path(f).is_absolute() ? fs::path(f) : tmp / "xla" / f;
        EXPECT_TRUE(fs::exists(p)) << f;
      }
    }
    for (const ManifestCluster& c : g.clusters) {
      std::set<std::string> nodes(c.nodes.begin(), c.nodes.end());
      if (!nodes.count("GradientDescent/update_weights/ResourceApplyGradientDescent")) continue;
      found_train = true;
      EXPECT_EQ(c.declustered, std::vector<std::string>{"gradients/sub_grad/Shape_1"});
      ASSERT_EQ(c.modules.size(), 1u);
      const ManifestModule* module = nullptr;
      for (const ManifestModule& m : manifest->modules) {
        if (m.name == c.modules[0]) module = &m;
      }
      ASSERT_NE(module, nullptr) << c.modules[0];
      int kernels_with_ops = 0;
      for (const ManifestKernel& k : module->kernels) {
        for (const std::string& op : k.op_names) {
          EXPECT_TRUE(nodes.count(op)) << k.name << " names " << op << ", not of " << c.name;
        }
        kernels_with_ops += !k.op_names.empty();
      }
      EXPECT_GT(kernels_with_ops, 0);
    }
    EXPECT_FALSE(g.unclustered.empty());
  }
  EXPECT_TRUE(found_train);
  fs::remove_all(tmp);
}

TEST(XlaJitTest, WithoutTheCpuFlagNothingIsCompiled) {
  SKIP_WITHOUT_CORPUS();
  std::string dir = CorpusDir() + "/linreg_tf1/jit_no_cpu_flag";
  JitSession s = OpenJitSession(dir + "/graph.pbtxt", graph::GlobalJitLevel::kOn1, "");
  ASSERT_NE(s.session, nullptr);
  ASSERT_TRUE(s.session->Run({}, {}, {"init"}).ok());
  for (const auto& g : s.jit->record().graphs) EXPECT_TRUE(g.result.clusters.empty());
  EXPECT_EQ(s.jit->compiler()->compilations(), 0);
}

TEST(XlaJitTest, MnistSoftmaxTrainingWithTheJitFollowsTensorFlowsJit) {
  SKIP_WITHOUT_CORPUS();
  std::string dir = CorpusDir() + "/mnist_softmax_tf1/jit";
  JitSession s = OpenJitSession(dir + "/graph.pbtxt", graph::GlobalJitLevel::kOn1,
                                "--tf_xla_cpu_global_jit");
  ASSERT_NE(s.session, nullptr);
  ASSERT_TRUE(s.session->Run({}, {}, {"init"}).ok());
  Tensor images = LoadNpy(dir + "/inputs/images_u8.npy");
  Tensor labels = LoadNpy(dir + "/inputs/labels.npy");
  Tensor curve = LoadNpy(dir + "/outputs/loss_curve.npy");
  for (int step = 0; step < curve.num_elements(); ++step) {
    // x = images_u8 / 255 in float64 (NumPy), fed to a float32 placeholder.
    auto [x, y] = samples::MakeBatch(images, labels, 100 * step, 100);
    auto out = s.session->Run({{"x", x}, {"y_", y}}, {"sparse_softmax_cross_entropy_loss/value"},
                              {"GradientDescent"});
    ASSERT_TRUE(out.ok()) << out.status().message();
    double got = (*out)[0].GetAsDouble(0), want = curve.GetAsDouble(step);
    ASSERT_LE(std::fabs(got - want), 1e-5 * std::fabs(want)) << "step " << step + 1;
  }
  // One cluster holds the matmul, the loss, its gradient and both updates, as TensorFlow's.
  bool found = false;
  for (const auto& g : s.jit->record().graphs) {
    for (const auto& [name, nodes] : g.result.clusters) {
      auto has = [&](const std::string& n) {
        return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
      };
      found |= has("MatMul") && has("GradientDescent/update_w/ResourceApplyGradientDescent") &&
               has("GradientDescent/update_b/ResourceApplyGradientDescent");
    }
  }
  EXPECT_TRUE(found);
}

TEST(XlaJitTest, ANewShapeRunsOpByOpOnceThenRecompilesAndSaysWhyOnce) {
  SKIP_WITHOUT_CORPUS();
  // TensorFlow's recompile/autojit_dynamic_signature run (input_signature [1, None]): `a + b`
  // with [1,10], then [1,100] twice, then [1,10].
  std::string dir = CorpusDir() + "/recompile/autojit_dynamic_signature";
  JitSession s = OpenJitSession(dir + "/graph.pbtxt", graph::GlobalJitLevel::kDefault,
                                "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit "
                                "--tf_xla_min_cluster_size=1");
  ASSERT_NE(s.session, nullptr);
  auto ones = [](int64_t n) {
    Tensor t(graph::DT_FLOAT, {1, n});
    for (int64_t i = 0; i < n; ++i) t.flat<float>()[i] = 1.0f + i;
    return t;
  };
  auto run = [&](int64_t n) {
    auto out = s.session->Run({{"a", ones(n)}, {"b", ones(n)}}, {"Identity"});
    EXPECT_TRUE(out.ok()) << out.status().message();
    if (out.ok()) {
      EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{1, n}));
      EXPECT_EQ((*out)[0].GetAsDouble(n - 1), 2.0 * n);
    }
  };
  run(10);
  EXPECT_EQ(s.jit->compiler()->compilations(), 1);
  run(100);  // lazily not compiled: TensorFlow's fallback runs it op by op
  EXPECT_EQ(s.jit->compiler()->compilations(), 1);
  EXPECT_EQ(s.jit->compiler()->lazy_fallbacks(), 1);
  run(100);  // seen again: compiled
  EXPECT_EQ(s.jit->compiler()->compilations(), 2);
  run(10);   // cached
  EXPECT_EQ(s.jit->compiler()->compilations(), 2);
  int recompiles = 0;
  for (const std::string& line : s.log) {
    if (line.find("recompiling") == std::string::npos) continue;
    ++recompiles;
    EXPECT_THAT(line, HasSubstr("argument shapes changed from (f32[1,10], f32[1,10]) to "
                                "(f32[1,100], f32[1,100])"));
  }
  EXPECT_EQ(recompiles, 1);
}

TEST(XlaJitTest, ALaunchKeepsItsClusterAcrossStepsAndTakesTheNewOneOnANewShape) {
  SKIP_WITHOUT_CORPUS();
  // `a + b` auto-clustered: a step with the shapes of the last one runs the cluster the launch
  // ran then, without looking its key up in the cache; a new shape's cluster is looked up once.
  std::string dir = CorpusDir() + "/recompile/autojit_dynamic_signature";
  JitSession s = OpenJitSession(dir + "/graph.pbtxt", graph::GlobalJitLevel::kDefault,
                                "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit "
                                "--tf_xla_min_cluster_size=1");
  ASSERT_NE(s.session, nullptr);
  auto values = [](int64_t n, float scale) {
    Tensor t(graph::DT_FLOAT, {1, n});
    for (int64_t i = 0; i < n; ++i) t.flat<float>()[i] = scale * (1.0f + i);
    return t;
  };
  auto run = [&](int64_t n, float scale) {
    auto out = s.session->Run({{"a", values(n, scale)}, {"b", values(n, 1.0f)}}, {"Identity"});
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ((*out)[0].dims(), (std::vector<int64_t>{1, n}));
    // The values of this step, not a step before: the kept cluster reads the new arguments.
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ((*out)[0].GetAsDouble(i), (scale + 1.0) * (1.0 + i)) << "element " << i;
    }
  };
  for (int step = 0; step < 5; ++step) run(10, 1.0f + step);
  ASSERT_NE(s.jit->compiler(), nullptr);
  EXPECT_EQ(s.jit->compiler()->compilations(), 1);
  EXPECT_EQ(s.jit->compiler()->lookups(), 1);
  run(100, 2.0f);  // lazily op by op
  run(100, 3.0f);  // compiled
  run(100, 4.0f);  // kept
  EXPECT_EQ(s.jit->compiler()->compilations(), 2);
  EXPECT_EQ(s.jit->compiler()->lookups(), 2);
  run(10, 5.0f);  // back to the first signature: cached, looked up once more
  run(10, 6.0f);
  EXPECT_EQ(s.jit->compiler()->compilations(), 2);
  EXPECT_EQ(s.jit->compiler()->lookups(), 3);
}

TEST(XlaJitTest, JitScopesCompileWithAutoJitOffEachScopeItsOwnCluster) {
  SKIP_WITHOUT_CORPUS();
  // TensorFlow's jit_scope run with grappler's arithmetic optimizer off (the graph as Python
  // built it): scope 0 (`x + x`) and scope 1 (`exp(a) + 1`) are two clusters, the rest runs op by
  // op, and the result is TensorFlow's.
  std::string dir = CorpusDir() + "/jit_scope/autojit_off_no_arith_opt";
  JitSession s = OpenJitSession(dir + "/graph.pbtxt", graph::GlobalJitLevel::kDefault, "");
  ASSERT_NE(s.session, nullptr);
  Tensor x = LoadNpy(dir + "/inputs/x.npy");
  auto out = s.session->Run({{"x", x}}, {"out"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  Tensor want = LoadNpy(dir + "/outputs/out.npy");
  ASSERT_EQ((*out)[0].num_elements(), want.num_elements());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    EXPECT_NEAR((*out)[0].GetAsDouble(i), want.GetAsDouble(i), 1e-5 * std::fabs(want.GetAsDouble(i)) + 1e-6);
  }
  XlaJitRecord record = s.jit->record();
  ASSERT_EQ(record.graphs.size(), 1u);
  std::set<std::set<std::string>> partition;
  for (const auto& [name, nodes] : record.graphs[0].result.clusters) {
    partition.insert(std::set<std::string>(nodes.begin(), nodes.end()));
  }
  EXPECT_EQ(partition, (std::set<std::set<std::string>>{{"add"}, {"add_2/y", "b_exp", "add_2"}}));
  EXPECT_EQ(record.graphs[0].result.unclustered.at("c_nocompile"),
            "kXlaCompileAttr(_XlaCompile) is false.");
  EXPECT_EQ(s.jit->compiler()->compilations(), 2);
}

TEST(XlaJitTest, AMustCompileFunctionThatCannotCompileFailsWithTensorFlowsMessage) {
  SKIP_WITHOUT_CORPUS();
  std::string dir = CorpusDir() + "/not_compilable/jit_compile";
  for (const auto& [file, op] : std::vector<std::pair<std::string, std::string>>{
           {"graph_unique_with_counts.pbtxt", "UniqueWithCounts"},
           {"graph_as_string.pbtxt", "AsString"},
           {"graph_print.pbtxt", "StringFormat"}}) {
    auto def = graph::ReadGraphDef(dir + "/" + file);
    ASSERT_TRUE(def.ok()) << def.status().message();
    XlaJit jit(Flags(""));
    jit.set_must_compile_function("__inference_f");
    graph::SessionOptions options;
    jit.Install(&options);
    auto session = graph::Session::Create(*def, options);
    ASSERT_TRUE(session.ok());
    auto out = (*session)->Run({{"x", LoadNpy(dir + "/inputs/x.npy")}}, {"Identity"});
    ASSERT_FALSE(out.ok()) << file;
    // TensorFlow's words, up to the attrs it hashes (config_proto, executor_type).
    EXPECT_THAT(out.status().message(),
                HasSubstr("Detected unsupported operations when trying to compile graph "
                          "__inference_f[_XlaMustCompile=true"));
    EXPECT_THAT(out.status().message(),
                HasSubstr("on XLA_CPU_JIT: " + op + " (No registered '" + op +
                          "' OpKernel for XLA_CPU_JIT devices compatible with node {{node "));
  }
}

// Nodes calling functions of the library by op name, under auto-clustering: the call whose body
// compiles and the one whose body cannot (AsString) both give the body's answer, the second run
// op by op through the call's kernel.
TEST(XlaJitTest, FunctionCallNodesRunUnderAutoJit) {
  auto def = graph::ParseGraphDef(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "s" op: "sin_fn" input: "x" }
node { name: "t" op: "round_trip" input: "s" }
node { name: "y" op: "Mul" input: "t" input: "s" attr { key: "T" value { type: DT_FLOAT } } }
library {
  function {
    signature { name: "sin_fn" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "out" type: DT_FLOAT } }
    node_def { name: "s" op: "Sin" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "out" value: "s:y:0" }
  }
  function {
    signature { name: "round_trip" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "out" type: DT_FLOAT } }
    node_def { name: "t" op: "AsString" input: "a" attr { key: "T" value { type: DT_FLOAT } }
               attr { key: "precision" value { i: 2 } } }
    node_def { name: "n" op: "StringToNumber" input: "t:output:0"
               attr { key: "out_type" value { type: DT_FLOAT } } }
    ret { key: "out" value: "n:output:0" }
  }
}
)", graph::GraphDefFormat::kText, "calls.pbtxt");
  ASSERT_TRUE(def.ok()) << def.status().message();
  XlaJit jit(Flags("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=1"));
  graph::SessionOptions options;
  jit.Install(&options);
  auto session = graph::Session::Create(*def, options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto out = (*session)->Run({{"x", graph::Tensor::Scalar(graph::DT_FLOAT, 1.0f)}}, {"y"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  const float s = std::sin(1.0f);
  EXPECT_NEAR(out->at(0).flat<float>()[0], 0.84f * s, 1e-6);
}

}  // namespace
}  // namespace xlens::cluster

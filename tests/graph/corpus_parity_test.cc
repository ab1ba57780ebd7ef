// The op-by-op executor against TensorFlow 2.21's own numbers: every graph of the TF corpus
// (../shared/corpus/tf) is loaded as TensorFlow wrote it, run from the recorded inputs, and must
// give TensorFlow's recorded outputs; the TF1 training cases must follow TensorFlow's loss curve
// step by step and end at its variables.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/session.h"
#include "compiler/hlo/npy.h"
#include "samples/data/mnist_batch.h"

namespace xlens::graph {
namespace {

namespace fs = std::filesystem;

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

std::unique_ptr<Session> OpenSession(const std::string& graph_path) {
  auto def = ReadGraphDef(graph_path);
  EXPECT_TRUE(def.ok()) << def.status().message();
  if (!def.ok()) return nullptr;
  auto session = Session::Create(*def);
  EXPECT_TRUE(session.ok()) << session.status().message();
  return session.ok() ? std::move(*session) : nullptr;
}

// Elementwise |a - b| <= rtol * |b| + atol.
void ExpectClose(const Tensor& got, const Tensor& want, double rtol, double atol,
                 const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  ASSERT_EQ(got.num_elements(), want.num_elements()) << what;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    double g = got.GetAsDouble(i), w = want.GetAsDouble(i);
    ASSERT_LE(std::fabs(g - w), rtol * std::fabs(w) + atol)
        << what << " element " << i << ": got " << g << ", TensorFlow " << w;
  }
}

Tensor Cast(const Tensor& t, DataType dtype) {
  Tensor out(dtype, t.dims());
  for (int64_t i = 0; i < t.num_elements(); ++i) out.SetFromDouble(i, t.GetAsDouble(i));
  return out;
}

struct ForwardCase {
  std::string graph;  // relative to the corpus
  std::vector<std::pair<std::string, std::string>> feeds;   // placeholder -> inputs/X.npy
  std::vector<std::pair<std::string, std::string>> fetches;  // tensor -> outputs/Y.npy
  std::vector<std::pair<std::string, Tensor>> extra_feeds = {};
};

void RunForwardCase(const ForwardCase& c) {
  SCOPED_TRACE(c.graph);
  std::string dir = fs::path(CorpusDir() + "/" + c.graph).parent_path();
  auto session = OpenSession(CorpusDir() + "/" + c.graph);
  ASSERT_NE(session, nullptr);
  std::vector<std::pair<std::string, Tensor>> feeds = c.extra_feeds;
  for (const auto& [name, file] : c.feeds) feeds.emplace_back(name, LoadNpy(dir + "/inputs/" + file));
  std::vector<std::string> fetches;
  for (const auto& f : c.fetches) fetches.push_back(f.first);
  auto out = session->Run(feeds, fetches);
  ASSERT_TRUE(out.ok()) << out.status().message();
  for (size_t i = 0; i < c.fetches.size(); ++i) {
    Tensor want = LoadNpy(dir + "/outputs/" + c.fetches[i].second);
    const Tensor& got = (*out)[i];
    if (want.dtype() == DT_STRING || got.dtype() == DT_STRING) {
      ASSERT_EQ(got.dtype(), want.dtype()) << c.fetches[i].first;
      EXPECT_EQ(got.strings(), want.strings()) << c.fetches[i].first;
      continue;
    }
    ASSERT_EQ(got.dtype(), want.dtype()) << c.fetches[i].first;
    ExpectClose(got, want, 1e-5, 1e-6, c.fetches[i].first);
  }
}

TEST(CorpusParityTest, ForwardCasesGiveTensorFlowsOutputs) {
  SKIP_WITHOUT_CORPUS();
  std::vector<ForwardCase> cases = {
      {"fusion_demo/jit_compile/graph.pbtxt",
       {{"x", "x.npy"}, {"y", "y.npy"}, {"z", "z.npy"}},
       {{"Identity", "out.npy"}}},
      {"jit_scope/autojit_off/graph.pbtxt", {{"x", "x.npy"}}, {{"out", "out.npy"}}},
      {"min_cluster_size/default/graph.pbtxt",
       {{"x", "x.npy"}},
       {{"Identity_2", "c.npy"}, {"Identity_3", "d.npy"}}},
      {"not_compilable/autojit/graph.pbtxt",
       {{"x", "x.npy"}},
       {{"Identity", "unique_0.npy"}, {"Identity_1", "unique_1.npy"}}},
      {"not_compilable/autojit/graph_where.pbtxt", {{"x", "x.npy"}}, {{"Identity", "where_0.npy"}}},
      {"not_compilable/autojit/graph_boolean_mask.pbtxt",
       {{"x", "x.npy"}},
       {{"Identity", "boolean_mask_0.npy"}}},
      {"not_compilable/autojit/graph_unique_with_counts.pbtxt",
       {{"x", "x.npy"}},
       {{"Identity", "unique_with_counts_0.npy"},
        {"Identity_1", "unique_with_counts_1.npy"},
        {"Identity_2", "unique_with_counts_2.npy"}}},
      {"recompile/retrace/graph.pbtxt",
       {{"a", "call0_a.npy"}, {"b", "call0_b.npy"}},
       {{"Identity", "call0.npy"}}},
  };
  for (const ForwardCase& c : cases) RunForwardCase(c);
}

// The string output was saved as a NumPy object array (pickled), which .npy readers outside
// Python cannot read; result.json records the same strings.
TEST(CorpusParityTest, AsStringWritesTensorFlowsText) {
  SKIP_WITHOUT_CORPUS();
  std::string dir = CorpusDir() + "/not_compilable/autojit";
  auto session = OpenSession(dir + "/graph_as_string.pbtxt");
  ASSERT_NE(session, nullptr);
  auto out = session->Run({{"x", LoadNpy(dir + "/inputs/x.npy")}}, {"Identity"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::ifstream in(dir + "/result.json");
  nlohmann::json result = nlohmann::json::parse(in);
  std::vector<std::string> want = result["functions"]["as_string"]["outputs"][0];
  ASSERT_EQ((*out)[0].dtype(), DT_STRING);
  EXPECT_EQ((*out)[0].strings(), want);
}

TEST(CorpusParityTest, TF1ControlFlowTakesBothBranches) {
  SKIP_WITHOUT_CORPUS();
  for (bool pred : {false, true}) {
    ForwardCase c{"control_flow_tf1/jit/graph.pbtxt",
                  {{"x", "x.npy"}},
                  {{"out", pred ? "pred_True.npy" : "pred_False.npy"}},
                  {{"pred", Tensor::Scalar<bool>(DT_BOOL, pred)}}};
    RunForwardCase(c);
  }
}

// TF1 linear regression: init, then 50 steps of GradientDescent(0.025) fetching the loss.
void RunLinearRegression(const std::string& variant, const std::string& var_w,
                         const std::string& var_b) {
  SKIP_WITHOUT_CORPUS();
  std::string dir = CorpusDir() + "/linreg_tf1/" + variant;
  auto session = OpenSession(dir + "/graph.pbtxt");
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Run({}, {}, {"init"}).ok());
  // The initial values come from the seeded RandomUniform initialisers: TensorFlow's exactly.
  auto init = session->Run({}, {var_w, var_b});
  ASSERT_TRUE(init.ok()) << init.status().message();
  ExpectClose((*init)[0], LoadNpy(dir + "/outputs/W_init.npy"), 0, 0, "W_init");
  ExpectClose((*init)[1], LoadNpy(dir + "/outputs/b_init.npy"), 0, 0, "b_init");

  Tensor x = Cast(LoadNpy(dir + "/inputs/x_observed.npy"), DT_FLOAT);
  Tensor y = Cast(LoadNpy(dir + "/inputs/y_observed.npy"), DT_FLOAT);
  Tensor curve = LoadNpy(dir + "/outputs/loss_curve.npy");
  ASSERT_EQ(curve.num_elements(), 50);
  for (int step = 0; step < 50; ++step) {
    auto out = session->Run({{"x_observed", x}, {"y_observed", y}}, {"Mean"}, {"GradientDescent"});
    ASSERT_TRUE(out.ok()) << out.status().message();
    double got = (*out)[0].GetAsDouble(0), want = curve.GetAsDouble(step);
    ASSERT_LE(std::fabs(got - want), 1e-5 * std::fabs(want)) << "step " << step + 1;
  }
  auto final_vars = session->Run({{"x_observed", x}, {"y_observed", y}}, {var_w, var_b, "Mean"});
  ASSERT_TRUE(final_vars.ok()) << final_vars.status().message();
  ExpectClose((*final_vars)[0], LoadNpy(dir + "/outputs/W_final.npy"), 1e-5, 0, "W_final");
  ExpectClose((*final_vars)[1], LoadNpy(dir + "/outputs/b_final.npy"), 1e-5, 0, "b_final");
  ExpectClose((*final_vars)[2], LoadNpy(dir + "/outputs/final_loss.npy"), 1e-5, 0, "final_loss");
}

TEST(CorpusParityTest, LinearRegressionWithResourceVariablesFollowsTensorFlow) {
  RunLinearRegression("nojit", "weights/Read/ReadVariableOp", "bias/Read/ReadVariableOp");
}

TEST(CorpusParityTest, LinearRegressionWithRefVariablesFollowsTensorFlow) {
  RunLinearRegression("jit_refvars", "weights/read", "bias/read");
}

TEST(CorpusParityTest, MnistSoftmaxStepFollowsTensorFlow) {
  SKIP_WITHOUT_CORPUS();
  std::string dir = CorpusDir() + "/mnist_softmax_tf1/nojit";
  auto session = OpenSession(dir + "/graph.pbtxt");
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Run({}, {}, {"init"}).ok());
  Tensor images = LoadNpy(dir + "/inputs/images_u8.npy");
  Tensor labels = LoadNpy(dir + "/inputs/labels.npy");
  Tensor curve = LoadNpy(dir + "/outputs/loss_curve.npy");
  ASSERT_EQ(curve.num_elements(), 20);
  for (int step = 0; step < 20; ++step) {
    // x = images_u8 / 255 in float64 (NumPy), fed to a float32 placeholder.
    auto [x, y] = samples::MakeBatch(images, labels, 100 * step, 100);
    auto out = session->Run({{"x", x}, {"y_", y}}, {"sparse_softmax_cross_entropy_loss/value"},
                            {"GradientDescent"});
    ASSERT_TRUE(out.ok()) << out.status().message();
    double got = (*out)[0].GetAsDouble(0), want = curve.GetAsDouble(step);
    ASSERT_LE(std::fabs(got - want), 1e-5 * std::fabs(want)) << "step " << step + 1;
  }
  auto vars = session->Run({}, {"w/Read/ReadVariableOp", "b/Read/ReadVariableOp"});
  ASSERT_TRUE(vars.ok()) << vars.status().message();
  ExpectClose((*vars)[0], LoadNpy(dir + "/outputs/w_final.npy"), 1e-4, 1e-6, "w_final");
  ExpectClose((*vars)[1], LoadNpy(dir + "/outputs/b_final.npy"), 1e-4, 1e-6, "b_final");
}

}  // namespace
}  // namespace xlens::graph

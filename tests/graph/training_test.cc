// The linear regression of the corpus (linreg_tf1: loss = mean((W*x + b - y)^2) minimised by
// tf.compat.v1.train.GradientDescentOptimizer(0.025)) rebuilt with the builder: its gradient and
// update nodes must be the ones TensorFlow's Python wrote (graph.pbtxt), and 50 steps of
// training from TensorFlow's initial W and b must follow TensorFlow's loss curve and end at its
// W and b.
#include "compiler/graph/training.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/grads/grad_util.h"
#include "compiler/graph/session.h"
#include "compiler/hlo/npy.h"
#include "samples/data/mnist_batch.h"

namespace xlens::graph {
namespace {

const std::string kCase = std::string(XLENS_SHARED_DIR) + "/corpus/tf/linreg_tf1/nojit";

// (name, op) of the top-level nodes of a GraphDef text file: `node {` blocks whose `name:` and
// `op:` lines are indented by two spaces.
std::set<std::pair<std::string, std::string>> NodesOfPbtxt(const std::string& path) {
  std::ifstream in(path);
  std::set<std::pair<std::string, std::string>> nodes;
  std::string line, name;
  auto unquote = [](const std::string& s) {
    size_t a = s.find('"'), b = s.rfind('"');
    return a == std::string::npos || b <= a ? std::string() : s.substr(a + 1, b - a - 1);
  };
  while (std::getline(in, line)) {
    if (line.rfind("  name: ", 0) == 0) name = unquote(line);
    if (line.rfind("  op: ", 0) == 0) nodes.insert({name, unquote(line)});
  }
  return nodes;
}

std::set<std::pair<std::string, std::string>> UnderTraining(
    const std::set<std::pair<std::string, std::string>>& nodes) {
  std::set<std::pair<std::string, std::string>> out;
  for (const auto& [name, op] : nodes) {
    if (name.rfind("gradients/", 0) == 0 || name.rfind("GradientDescent", 0) == 0) {
      out.insert({name, op});
    }
  }
  return out;
}

struct Linreg {
  Scope root = Scope::NewRootScope();
  GraphVariable w, b;
  Output loss;
  Node* train = nullptr;
};

// The program of linreg_tf1, statement by statement, with the names Python gives each node.
Status BuildLinreg(Linreg* m) {
  Scope& root = m->root;
  ASSIGN_OR_RETURN(m->w, CreateVariable(root, "weights", DT_FLOAT, {}));
  ASSIGN_OR_RETURN(m->b, CreateVariable(root, "bias", DT_FLOAT, {}));
  Output x = ops::Placeholder(root.WithOpName("x_observed"), DT_FLOAT, PartialShape({-1}));
  // W * x reads W into "ReadVariableOp"; `+ b` reads b inside the add's name scope.
  Output w_read = ops::ReadVariableOp(root, m->w.handle, DT_FLOAT);
  Output mul = grad::MulOp(root, w_read, x);
  Scope add_inputs = root;
  Scope add = root.NewOpScope("add", &add_inputs);
  Output b_read = ops::ReadVariableOp(add_inputs, m->b.handle, DT_FLOAT);
  Output pred = ops::AsOutput(add.AddNode("AddV2", {mul, b_read}, {}));
  Output y = ops::Placeholder(root.WithOpName("y_observed"), DT_FLOAT, PartialShape({-1}));
  Output diff = grad::SubOp(root, pred, y);
  Output sq = ops::Square(root, diff);
  Output axes = ops::Const(root, std::vector<int32_t>{0});
  m->loss = ops::Mean(root, sq, axes);
  RETURN_IF_ERROR(root.status());
  GradientDescentOptimizer opt(0.025f);
  ASSIGN_OR_RETURN(m->train, opt.Minimize(root, m->loss, {m->w, m->b}));
  return root.status();
}

TEST(TrainingTest, LinregGradientGraphHasTensorFlowsNodes) {
  if (!std::filesystem::exists(kCase + "/graph.pbtxt")) GTEST_SKIP() << "no corpus at " << kCase;
  Linreg m;
  Status st = BuildLinreg(&m);
  ASSERT_TRUE(st.ok()) << st.message();
  std::set<std::pair<std::string, std::string>> ours;
  for (const NodeDef& n : m.root.graph()->ToGraphDef().node) ours.insert({n.name, n.op});
  auto expected_all = NodesOfPbtxt(kCase + "/graph.pbtxt");
  auto expected = UnderTraining(expected_all);
  auto got = UnderTraining(ours);
  ASSERT_GT(expected.size(), 50u);
  std::ostringstream diff;
  for (const auto& e : expected) {
    if (!got.count(e)) diff << "missing " << e.first << " (" << e.second << ")\n";
  }
  for (const auto& g : got) {
    if (!expected.count(g)) diff << "extra " << g.first << " (" << g.second << ")\n";
  }
  EXPECT_EQ(diff.str(), "");
  // The forward program and the variables too (every node but the "init" NoOp the Python
  // program adds itself).
  std::ostringstream rest;
  for (const auto& e : expected_all) {
    if (e.first != "init" && !ours.count(e)) rest << "missing " << e.first << " (" << e.second << ")\n";
  }
  EXPECT_EQ(rest.str(), "");
}

StatusOr<Tensor> Npy(const std::string& path) {
  ASSIGN_OR_RETURN(Literal lit, ReadNpy(path));
  return Tensor::FromLiteral(std::move(lit));
}

TEST(TrainingTest, LinregTrainsToTensorFlowsLossCurve) {
  if (!std::filesystem::exists(kCase + "/outputs/loss_curve.npy")) {
    GTEST_SKIP() << "no corpus at " << kCase;
  }
  Linreg m;
  Status st = BuildLinreg(&m);
  ASSERT_TRUE(st.ok()) << st.message();
  auto session = Session::Create(m.root.graph()->ToGraphDef());
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto load = [](const std::string& p) {
    auto t = Npy(kCase + p);
    EXPECT_TRUE(t.ok()) << p << ": " << t.status().message();
    return t.ok() ? *t : Tensor();
  };
  Tensor w_init = load("/outputs/W_init.npy"), b_init = load("/outputs/b_init.npy");
  Tensor x = load("/inputs/x_observed.npy"), y = load("/inputs/y_observed.npy");
  Tensor curve = load("/outputs/loss_curve.npy");
  Tensor w_final = load("/outputs/W_final.npy"), b_final = load("/outputs/b_final.npy");
  Tensor final_loss = load("/outputs/final_loss.npy");
  ASSERT_FALSE(HasFailure());
  // TensorFlow's initial values replace what the initializers would draw.
  auto init = (*session)->Run({{m.w.initial_value.name(), w_init}, {m.b.initial_value.name(), b_init}},
                              {}, {m.w.initializer->name(), m.b.initializer->name()});
  ASSERT_TRUE(init.ok()) << init.status().message();
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x_observed", x},
                                                             {"y_observed", y}};
  for (int64_t step = 0; step < curve.num_elements(); ++step) {
    auto out = (*session)->Run(feeds, {m.loss.name()}, {m.train->name()});
    ASSERT_TRUE(out.ok()) << "step " << step << ": " << out.status().message();
    const double want = curve.GetAsDouble(step);
    EXPECT_NEAR((*out)[0].GetAsDouble(0), want, 1e-5 * std::abs(want)) << "step " << step;
  }
  auto end = (*session)->Run(feeds, {m.w.read.name(), m.b.read.name(), m.loss.name()});
  ASSERT_TRUE(end.ok()) << end.status().message();
  EXPECT_NEAR((*end)[0].GetAsDouble(0), w_final.GetAsDouble(0), 1e-5 * std::abs(w_final.GetAsDouble(0)));
  EXPECT_NEAR((*end)[1].GetAsDouble(0), b_final.GetAsDouble(0), 1e-5 * std::abs(b_final.GetAsDouble(0)));
  EXPECT_NEAR((*end)[2].GetAsDouble(0), final_loss.GetAsDouble(0),
              1e-5 * std::abs(final_loss.GetAsDouble(0)));
}

// The softmax regression of the corpus (mnist_softmax_tf1): x [None, 784], W [784, 10] and
// b [10] resource variables initialised with zeros, logits = x @ W + b,
// tf.compat.v1.losses.sparse_softmax_cross_entropy(y_, logits) minimised by
// GradientDescentOptimizer(0.5).
const std::string kMnist = std::string(XLENS_SHARED_DIR) + "/corpus/tf/mnist_softmax_tf1/nojit";

struct Mnist {
  Scope root = Scope::NewRootScope();
  GraphVariable w, b;
  Output x, labels, loss;
  Node* train = nullptr;
};

Status BuildMnist(Mnist* m) {
  Scope& root = m->root;
  m->x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 784}));
  VariableOptions zeros;
  zeros.initial_value = Tensor(DT_FLOAT, {784, 10});
  ASSIGN_OR_RETURN(m->w, CreateVariable(root, "w", DT_FLOAT, {784, 10}, zeros));
  zeros.initial_value = Tensor(DT_FLOAT, {10});
  ASSIGN_OR_RETURN(m->b, CreateVariable(root, "b", DT_FLOAT, {10}, zeros));
  // x @ W and `+ b` read their variable inside their own name scope.
  Scope mm_inputs = root;
  Scope mm = root.NewOpScope("MatMul", &mm_inputs);
  Output w_read = ops::ReadVariableOp(mm_inputs, m->w.handle, DT_FLOAT);
  Output matmul = ops::AsOutput(mm.AddNode("MatMul", {m->x, w_read}, {}));
  Scope add_inputs = root;
  Scope add = root.NewOpScope("add", &add_inputs);
  Output b_read = ops::ReadVariableOp(add_inputs, m->b.handle, DT_FLOAT);
  Output logits = ops::AsOutput(add.AddNode("AddV2", {matmul, b_read}, {}));
  m->labels = ops::Placeholder(root.WithOpName("y_"), DT_INT64, PartialShape({-1}));
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(m->loss, SparseSoftmaxCrossEntropyLoss(root, m->labels, logits));
  GradientDescentOptimizer opt(0.5f);
  ASSIGN_OR_RETURN(m->train, opt.Minimize(root, m->loss, {m->w, m->b}));
  return root.status();
}

// Its loss, gradient and update nodes must be the ones TensorFlow's Python wrote.
TEST(TrainingTest, MnistSoftmaxGradientGraphHasTensorFlowsNodes) {
  if (!std::filesystem::exists(kMnist + "/graph.pbtxt")) GTEST_SKIP() << "no corpus at " << kMnist;
  Mnist m;
  Status st = BuildMnist(&m);
  ASSERT_TRUE(st.ok()) << st.message();
  Scope& root = m.root;
  const std::string& dir = kMnist;
  auto keep = [](const std::set<std::pair<std::string, std::string>>& nodes) {
    std::set<std::pair<std::string, std::string>> out;
    for (const auto& [name, op] : nodes) {
      if (name.rfind("gradients/", 0) == 0 || name.rfind("GradientDescent", 0) == 0 ||
          name.rfind("sparse_softmax_cross_entropy_loss/", 0) == 0) {
        out.insert({name, op});
      }
    }
    return out;
  };
  std::set<std::pair<std::string, std::string>> ours;
  for (const NodeDef& n : root.graph()->ToGraphDef().node) ours.insert({n.name, n.op});
  auto expected = keep(NodesOfPbtxt(dir + "/graph.pbtxt"));
  auto got = keep(ours);
  ASSERT_GT(expected.size(), 80u);
  std::ostringstream diff;
  for (const auto& e : expected) {
    if (!got.count(e)) diff << "missing " << e.first << " (" << e.second << ")\n";
  }
  for (const auto& g : got) {
    if (!expected.count(g)) diff << "extra " << g.first << " (" << g.second << ")\n";
  }
  EXPECT_EQ(diff.str(), "");
}

// 20 steps on batches of 100 (x = images_u8 / 255) follow TensorFlow's loss curve and end at
// its W and b.
TEST(TrainingTest, MnistSoftmaxTrainsToTensorFlowsLossCurve) {
  if (!std::filesystem::exists(kMnist + "/outputs/loss_curve.npy")) {
    GTEST_SKIP() << "no corpus at " << kMnist;
  }
  Mnist m;
  Status st = BuildMnist(&m);
  ASSERT_TRUE(st.ok()) << st.message();
  auto load = [](const std::string& p) {
    auto t = Npy(kMnist + p);
    EXPECT_TRUE(t.ok()) << p << ": " << t.status().message();
    return t.ok() ? *t : Tensor();
  };
  Tensor images = load("/inputs/images_u8.npy"), labels = load("/inputs/labels.npy");
  Tensor curve = load("/outputs/loss_curve.npy");
  Tensor w_final = load("/outputs/w_final.npy"), b_final = load("/outputs/b_final.npy");
  ASSERT_FALSE(HasFailure());
  auto session = Session::Create(m.root.graph()->ToGraphDef());
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto init = (*session)->Run({}, {}, {m.w.initializer->name(), m.b.initializer->name()});
  ASSERT_TRUE(init.ok()) << init.status().message();
  constexpr int64_t kBatch = 100;
  for (int64_t step = 0; step < curve.num_elements(); ++step) {
    auto [x, y] = samples::MakeBatch(images, labels, step * kBatch, kBatch);
    auto out = (*session)->Run({{"x", x}, {"y_", y}}, {m.loss.name()}, {m.train->name()});
    ASSERT_TRUE(out.ok()) << "step " << step << ": " << out.status().message();
    const double want = curve.GetAsDouble(step);
    EXPECT_NEAR((*out)[0].GetAsDouble(0), want, 1e-5 * std::abs(want)) << "step " << step;
  }
  auto end = (*session)->Run({}, {m.w.read.name(), m.b.read.name()});
  ASSERT_TRUE(end.ok()) << end.status().message();
  double w_err = 0, b_err = 0;
  for (int64_t i = 0; i < w_final.num_elements(); ++i) {
    w_err = std::max(w_err, std::abs((*end)[0].GetAsDouble(i) - w_final.GetAsDouble(i)));
  }
  for (int64_t i = 0; i < b_final.num_elements(); ++i) {
    b_err = std::max(b_err, std::abs((*end)[1].GetAsDouble(i) - b_final.GetAsDouble(i)));
  }
  EXPECT_LT(w_err, 1e-5);
  EXPECT_LT(b_err, 1e-5);
}

TEST(TrainingTest, ScopeNamesFollowPython) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, 1.0f);
  Output b = ops::Const(root, 2.0f);
  Output r = ops::Reshape(root, a, ops::Input({1}));
  Output r2 = ops::Reshape(root, b, ops::Input({1}));
  Scope sub = root.NewSubScope("Reshape");  // taken by the node: the scope becomes Reshape_2
  Output c = ops::Const(sub, 3.0f);
  ASSERT_TRUE(root.ok()) << root.status().message();
  EXPECT_EQ(a.node->name(), "Const");
  EXPECT_EQ(b.node->name(), "Const_1");
  EXPECT_EQ(r.node->name(), "Reshape");
  EXPECT_EQ(r.node->input_node(1).first->name(), "Reshape/shape");
  EXPECT_EQ(r2.node->name(), "Reshape_1");
  EXPECT_EQ(r2.node->input_node(1).first->name(), "Reshape_1/shape");
  EXPECT_EQ(c.node->name(), "Reshape_2/Const");
  Output x = ops::Const(root.WithXlaScope(true, "jit_scope_0"), 4.0f);
  const AttrValue* compile = FindAttr(x.node->attrs(), "_XlaCompile");
  ASSERT_NE(compile, nullptr);
  EXPECT_TRUE(compile->b());
  EXPECT_EQ(FindAttr(x.node->attrs(), "_XlaScope")->s(), "jit_scope_0");
}

}  // namespace
}  // namespace xlens::graph

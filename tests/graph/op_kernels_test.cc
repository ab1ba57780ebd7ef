// Replays TensorFlow's own results (testdata/ops/kernel_cases.txt, written by
// gen_kernel_cases.py with TensorFlow 2.21's CPU kernels) through our math, nn kernels: every
// output must agree within a few ulps (exactly for integers and booleans), and every case where
// TensorFlow fails must fail with the same message, naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "compiler/graph/ops/register_ops.h"
#include "op_family_test_util.h"

namespace xlens::graph {
namespace {

struct Case {
  std::string name, op;
  AttrMap attrs;
  std::vector<Tensor> inputs, outputs;
  std::string error;
};

std::vector<int64_t> ParseDims(const std::string& s) {
  std::vector<int64_t> dims;
  if (s == "-") return dims;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) dims.push_back(std::stoll(part));
  return dims;
}

Tensor ParseTensor(std::istringstream& in) {
  std::string type, dims;
  in >> type >> dims;
  std::optional<DataType> dtype = ParseDataTypeName(type);
  EXPECT_TRUE(dtype.has_value()) << type;
  Tensor t(*dtype, ParseDims(dims));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    std::string v;
    in >> v;
    if (*dtype == DT_FLOAT) {
      t.flat<float>()[i] = std::strtof(v.c_str(), nullptr);
    } else if (DataTypeIsFloating(*dtype)) {
      t.SetFromDouble(i, std::strtod(v.c_str(), nullptr));
    } else {
      t.SetFromInt64(i, std::stoll(v));
    }
  }
  return t;
}

std::vector<Case> LoadCases() {
  std::ifstream file(XLENS_TESTDATA_DIR "/ops/kernel_cases.txt");
  std::vector<Case> cases;
  std::string line;
  Case c;
  while (std::getline(file, line)) {
    std::istringstream in(line);
    std::string word;
    in >> word;
    if (word == "case") {
      c = Case();
      in >> c.name >> c.op;
    } else if (word == "attr") {
      std::string name, kind;
      in >> name >> kind;
      if (kind == "type") {
        std::string t;
        in >> t;
        c.attrs[name] = AttrValue::Type(*ParseDataTypeName(t));
      } else if (kind == "bool") {
        int b;
        in >> b;
        c.attrs[name] = AttrValue::Bool(b != 0);
      } else if (kind == "int") {
        int64_t i;
        in >> i;
        c.attrs[name] = AttrValue::Int(i);
      } else if (kind == "float") {
        double f;
        in >> f;
        c.attrs[name] = AttrValue::Float(static_cast<float>(f));
      } else if (kind == "string") {
        std::string s;
        in >> s;
        c.attrs[name] = AttrValue::String(s);
      } else {
        AttrListValue list;
        std::string v;
        while (in >> v) {
          if (kind == "ints") list.i.push_back(std::stoll(v));
          else list.s.push_back(v);
        }
        c.attrs[name] = AttrValue::List(list);
      }
    } else if (word == "in") {
      c.inputs.push_back(ParseTensor(in));
    } else if (word == "out") {
      c.outputs.push_back(ParseTensor(in));
    } else if (word == "error") {
      std::getline(in >> std::ws, c.error);
    } else if (word == "end") {
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// Within a few ulps of the type, relative to the value or, for values that come out of
// cancellation (a dot product near zero), to the largest value of the tensor: summing in another
// order moves a result by ulps of its partial sums. NaN matches NaN.
bool Close(double got, double want, double scale, DataType dtype) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  double rtol = 1e-5, atol = 1e-6;
  if (dtype == DT_DOUBLE) rtol = atol = 1e-12;
  if (dtype == DT_HALF || dtype == DT_BFLOAT16) rtol = atol = 2e-3;
  return std::abs(got - want) <= atol * std::max(1.0, scale) + rtol * std::abs(want);
}

TEST(OpKernelsTest, AgreeWithTensorFlow) {
  std::vector<Case> cases = LoadCases();
  ASSERT_GT(cases.size(), 150u) << "kernel_cases.txt missing or truncated";
  OpRegistry registry;
  RegisterMathOps(registry);
  RegisterNnOps(registry);
  testing::LocalKernelRunner runner(&registry);
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + c.name);
    auto node = runner.AddNode(c.op, c.attrs, c.name);
    ASSERT_TRUE(node.ok()) << node.status().message();
    auto result = runner.Run(**node, c.inputs);
    if (!c.error.empty()) {
      ASSERT_FALSE(result.ok()) << "expected: " << c.error;
      EXPECT_NE(result.status().message().find(c.error), std::string::npos)
          << result.status().message();
      EXPECT_EQ(result.status().message().rfind("node '" + c.name + "' (" + c.op + "): ", 0), 0u)
          << result.status().message();
      continue;
    }
    ASSERT_TRUE(result.ok()) << result.status().message();
    ASSERT_EQ(result->size(), c.outputs.size());
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      const Tensor& got = (*result)[k];
      const Tensor& want = c.outputs[k];
      ASSERT_EQ(got.dtype(), want.dtype()) << "output " << k;
      ASSERT_EQ(got.dims(), want.dims()) << "output " << k;
      double scale = 0;
      for (int64_t i = 0; i < want.num_elements(); ++i)
        if (std::isfinite(want.GetAsDouble(i))) scale = std::max(scale, std::abs(want.GetAsDouble(i)));
      int mismatches = 0;
      for (int64_t i = 0; i < want.num_elements() && mismatches < 5; ++i) {
        const bool ok = DataTypeIsFloating(want.dtype())
                            ? Close(got.GetAsDouble(i), want.GetAsDouble(i), scale, want.dtype())
                            : got.GetAsInt64(i) == want.GetAsInt64(i);
        if (!ok) {
          ++mismatches;
          ADD_FAILURE() << "output " << k << " element " << i << ": got " << got.GetAsDouble(i)
                        << ", TensorFlow " << want.GetAsDouble(i);
        }
      }
    }
  }
}

}  // namespace
}  // namespace xlens::graph

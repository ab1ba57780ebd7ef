// The math, nn and training ops have TensorFlow's signatures exactly: testdata/ops/
// op_signatures.txt is TensorFlow 2.21's OpDefs of these ops (gen_op_signatures.py), one line per
// op, and each registered OpDef, written the same way, must equal its line.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/register_ops.h"

namespace xlens::graph {
namespace {

std::string FloatText(float f) {
  // Python's repr of the float attr as a double: shortest round trip of the double.
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, static_cast<double>(f));
    if (std::strtod(buf, nullptr) == static_cast<double>(f)) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string ValueText(const AttrValue& v) {
  switch (v.kind()) {
    case AttrValue::Kind::kType: return DataTypeName(v.type());
    case AttrValue::Kind::kBool: return v.b() ? "true" : "false";
    case AttrValue::Kind::kInt: return std::to_string(v.i());
    case AttrValue::Kind::kFloat: return FloatText(v.f());
    case AttrValue::Kind::kString: return "'" + v.s() + "'";
    case AttrValue::Kind::kList: {
      const AttrListValue& l = v.list();
      std::string out;
      if (!l.type.empty()) {
        for (DataType t : l.type) out += (out.empty() ? "" : ",") + DataTypeName(t);
        return "{" + out + "}";
      }
      if (!l.s.empty()) {
        for (const std::string& s : l.s) out += (out.empty() ? "" : ",") + ("'" + s + "'");
        return "{" + out + "}";
      }
      for (int64_t i : l.i) out += (out.empty() ? "" : ",") + std::to_string(i);
      return "[" + out + "]";
    }
    default: return "?";
  }
}

std::string ArgText(const OpDef::ArgDef& a) {
  std::string t;
  if (!a.number_attr.empty()) {
    t = a.number_attr + "*" + (a.type_attr.empty() ? DataTypeName(a.type) : a.type_attr);
  } else if (!a.type_list_attr.empty()) {
    t = a.type_list_attr;
  } else if (!a.type_attr.empty()) {
    t = a.type_attr;
  } else {
    t = DataTypeName(a.type);
  }
  if (a.is_ref) t = "Ref(" + t + ")";
  return a.name + ":" + t;
}

// The line gen_op_signatures.py writes for an OpDef.
std::string SignatureLine(const OpDef& d) {
  std::string line = d.name + " (";
  for (size_t i = 0; i < d.input_arg.size(); ++i) line += (i ? "," : "") + ArgText(d.input_arg[i]);
  line += ") ->(";
  for (size_t i = 0; i < d.output_arg.size(); ++i)
    line += (i ? "," : "") + ArgText(d.output_arg[i]);
  line += ")";
  for (const OpDef::AttrDef& a : d.attr) {
    line += " " + a.name + ":" + a.type;
    if (a.allowed_values) line += " in " + ValueText(*a.allowed_values);
    if (a.has_minimum) line += " >=" + std::to_string(a.minimum);
    if (a.default_value) line += " =" + ValueText(*a.default_value);
  }
  std::vector<std::string> flags;
  if (d.is_commutative) flags.push_back("commutative");
  if (d.is_aggregate) flags.push_back("aggregate");
  if (d.is_stateful) flags.push_back("stateful");
  if (d.allows_uninitialized_input) flags.push_back("uninitialized");
  if (!flags.empty()) {
    line += " [";
    for (size_t i = 0; i < flags.size(); ++i) line += (i ? "," : "") + flags[i];
    line += "]";
  }
  return line;
}

TEST(MathNnSignaturesTest, MatchTensorFlow) {
  std::ifstream file(XLENS_TESTDATA_DIR "/ops/op_signatures.txt");
  ASSERT_TRUE(file) << "op_signatures.txt missing";
  OpRegistry registry;
  RegisterMathOps(registry);
  RegisterNnOps(registry);
  RegisterTrainingOps(registry);
  std::string line;
  int checked = 0;
  while (std::getline(file, line)) {
    const std::string op = line.substr(0, line.find(' '));
    const OpRegistration* reg = registry.Find(op);
    ASSERT_NE(reg, nullptr) << op << " is not registered";
    EXPECT_EQ(SignatureLine(reg->op_def), line);
    ++checked;
  }
  EXPECT_EQ(checked, 97);
  // Every op of these families is one TensorFlow has (the file lists them all).
  EXPECT_EQ(registry.OpNames().size(), 97u);
}

// The inputs XLA needs as constants, as TensorFlow's XLA kernels declare them.
TEST(MathNnSignaturesTest, CompileTimeConstantInputs) {
  OpRegistry registry;
  RegisterMathOps(registry);
  RegisterNnOps(registry);
  const std::map<std::string, std::string> expected = {
      {"Sum", "reduction_indices"}, {"Mean", "reduction_indices"}, {"Max", "reduction_indices"},
      {"ArgMax", "dimension"}, {"Conv2DBackpropInput", "input_sizes"},
      {"Conv2DBackpropFilter", "filter_sizes"}, {"AvgPoolGrad", "orig_input_shape"}};
  for (const auto& [op, input] : expected) {
    const OpRegistration* reg = registry.Find(op);
    ASSERT_NE(reg, nullptr) << op;
    EXPECT_EQ(reg->compile_time_const_inputs, std::vector<std::string>{input}) << op;
    EXPECT_TRUE(reg->has_xla_kernel) << op;
  }
  EXPECT_TRUE(registry.Find("MatMul")->compile_time_const_inputs.empty());
}

}  // namespace
}  // namespace xlens::graph

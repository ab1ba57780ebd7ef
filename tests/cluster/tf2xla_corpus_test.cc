// TensorFlow parity of the lowering: every cluster TensorFlow 2.21 compiled in the corpus
// (../shared/corpus/tf/CASE/VARIANT: the function it encapsulated, tf_dump/encapsulate_fdef_
// cluster_N.pbtxt, and the HLO it lowered it to, xla/module_*.cluster_N__*.before_optimizations
// .txt) is lowered again with the argument shapes TensorFlow used (read off its module's entry
// parameters). Our module must have TensorFlow's parameter and result shapes, in the same order,
// and compute the same values: both modules run on the reference evaluator with the same random
// inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "compiler/cluster/tf2xla/xla_compiler.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/runtime/cpu_compiler.h"

namespace xlens::cluster {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(XLENS_SHARED_DIR) / "corpus" / "tf";
const fs::path kTestData = fs::path(XLENS_TESTDATA_DIR) / "tf2xla";

// Ops the lowering leaves out on purpose (dynamic shapes); clusters with them are skipped.
const std::set<std::string> kUnsupportedOps = {"Where"};

struct CorpusModule {
  fs::path hlo;        // TensorFlow's before_optimizations.txt
  fs::path fdef;       // the encapsulated function
  std::string variant;  // CASE/VARIANT
  std::string cluster;  // cluster_N
  int num_constant_args = 0;
};

std::vector<CorpusModule> FindModules() {
  std::vector<CorpusModule> modules;
  const std::regex name(
      "module_\\d+\\.(cluster_[0-9_]+?)__XlaCompiledKernel_true__.*"
      "XlaNumConstantArgs_(\\d+)__.*\\.before_optimizations\\.txt");
  for (const auto& entry : fs::recursive_directory_iterator(kCorpus)) {
    if (!entry.is_regular_file()) continue;
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, name)) continue;
    const fs::path variant_dir = entry.path().parent_path().parent_path();
    CorpusModule module;
    module.hlo = entry.path();
    module.cluster = m[1];
    module.num_constant_args = std::stoi(m[2]);
    module.fdef = variant_dir / "tf_dump" / ("encapsulate_fdef_" + module.cluster + ".pbtxt");
    module.variant = fs::relative(variant_dir, kCorpus).string();
    if (fs::exists(module.fdef)) modules.push_back(module);
  }
  std::sort(modules.begin(), modules.end(),
            [](const CorpusModule& a, const CorpusModule& b) { return a.hlo < b.hlo; });
  return modules;
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Inputs every cluster of the corpus accepts: floats in [-1, 1), integers in [0, 8) (labels and
// indices stay in range), random booleans.
Literal RandomInput(const Shape& shape, std::mt19937_64& rng) {
  Literal literal(shape);
  std::uniform_real_distribution<double> real(-1, 1);
  std::uniform_int_distribution<int> small(0, 7);
  for (int64_t i = 0; i < literal.element_count(); ++i) {
    const PrimitiveType t = shape.element_type();
    if (IsFloatingPointType(t)) {
      literal.SetFromDouble(i, real(rng));
    } else if (t == PrimitiveType::PRED) {
      literal.SetFromInt64(i, small(rng) & 1);
    } else {
      literal.SetFromInt64(i, small(rng));
    }
  }
  return literal;
}

// Values of constant arguments, which TensorFlow's module does not show (they are folded in):
// testdata/tf2xla/corpus_constant_args.json, keyed "CASE/VARIANT/cluster_N".
StatusOr<graph::Tensor> ConstantArgument(const CorpusModule& m, int arg) {
  std::ifstream in(kTestData / "corpus_constant_args.json");
  nlohmann::json all = nlohmann::json::parse(in);
  const std::string key = m.variant + "/" + m.cluster;
  if (!all.contains(key) || !all[key].contains(std::to_string(arg))) {
    return Error("no value for constant argument " + std::to_string(arg) + " of " + key +
                 " in corpus_constant_args.json");
  }
  std::vector<int32_t> values = all[key][std::to_string(arg)].get<std::vector<int32_t>>();
  return graph::Tensor::Vector<int32_t>(graph::DT_INT32, values);
}

// The (op_type, op_name) pairs of the metadata of a module's entry instructions.
std::set<std::pair<std::string, std::string>> MetadataNames(const HloModule& module) {
  std::set<std::pair<std::string, std::string>> out;
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (!i->metadata.op_type.empty()) out.insert({i->metadata.op_type, i->metadata.op_name});
  }
  return out;
}

// Lowers one corpus cluster and compares it with TensorFlow's module; counts what it compared
// or skipped.
void CheckModule(const CorpusModule& m, int* compared, int* skipped) {
  {
    SCOPED_TRACE(m.hlo.string());
    auto fdef = graph::ReadFunctionDef(m.fdef.string());
    ASSERT_TRUE(fdef.ok()) << fdef.status().message();
    bool unsupported = false;
    for (const auto& node : fdef->node_def) unsupported |= kUnsupportedOps.count(node.op) > 0;
    if (unsupported) {
      ++*skipped;
      return;
    }
    ParseOptions parse_options;
    parse_options.filename = m.hlo.string();
    auto tf_module = ParseHloModule(ReadText(m.hlo), parse_options);
    ASSERT_TRUE(tf_module.ok()) << tf_module.status().message();
    const HloComputation* tf_entry = (*tf_module)->entry_computation();

    // Arguments as TensorFlow launched them: constants first, then the values and the
    // (initialized) variables, which are TensorFlow's entry parameters in order.
    const auto& inputs = fdef->signature.input_arg;
    int num_resources = 0;
    for (const auto& a : inputs) num_resources += a.type == graph::DT_RESOURCE;
    const int num_values = static_cast<int>(inputs.size()) - m.num_constant_args - num_resources;
    const int num_params = static_cast<int>(tf_entry->num_parameters());
    ASSERT_TRUE(num_params == num_values + num_resources || num_params == num_values)
        << num_params << " parameters for " << num_values << " values and " << num_resources
        << " variables";
    const bool variables_initialized = num_params == num_values + num_resources;
    std::vector<XlaArgument> args;
    int next_param = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      XlaArgument arg;
      if (static_cast<int>(i) < m.num_constant_args) {
        auto value = ConstantArgument(m, static_cast<int>(i));
        ASSERT_TRUE(value.ok()) << value.status().message();
        arg.kind = XlaArgument::Kind::kConstant;
        arg.dtype = value->dtype();
        arg.shape = value->dims();
        arg.constant_value = *value;
      } else if (inputs[i].type == graph::DT_RESOURCE) {
        arg.kind = XlaArgument::Kind::kResource;
        arg.initialized = variables_initialized;
        if (variables_initialized) {
          const Shape& s = tf_entry->parameter_instruction(next_param++)->shape();
          arg.dtype = *graph::FromPrimitiveType(s.element_type());
          arg.shape = s.dimensions();
        } else {
          arg.dtype = graph::DT_FLOAT;
        }
      } else {
        const Shape& s = tf_entry->parameter_instruction(next_param++)->shape();
        arg.dtype = inputs[i].type;
        EXPECT_EQ(graph::ToPrimitiveType(arg.dtype), s.element_type()) << "argument " << i;
        arg.shape = s.dimensions();
      }
      args.push_back(arg);
    }

    auto body = FunctionBodyForCompilation(*fdef);
    ASSERT_TRUE(body.ok()) << body.status().message();
    XlaCompileOptions options;
    options.module_name = (*tf_module)->name();
    auto ours = CompileGraphToHlo(*(*body)->graph, args, options);
    ASSERT_TRUE(ours.ok()) << ours.status().message();
    const HloComputation* entry = ours->module->entry_computation();

    // The interface: parameter and result shapes in TensorFlow's order.
    ASSERT_EQ(entry->num_parameters(), tf_entry->num_parameters());
    for (int64_t i = 0; i < entry->num_parameters(); ++i) {
      EXPECT_TRUE(shape_util::Compatible(entry->parameter_instruction(i)->shape(),
                                         tf_entry->parameter_instruction(i)->shape()))
          << "parameter " << i << ": " << entry->parameter_instruction(i)->shape().ToString()
          << " vs TensorFlow's " << tf_entry->parameter_instruction(i)->shape().ToString();
    }
    EXPECT_TRUE(shape_util::Compatible(entry->root_instruction()->shape(),
                                       tf_entry->root_instruction()->shape()))
        << "result " << entry->root_instruction()->shape().ToString() << " vs TensorFlow's "
        << tf_entry->root_instruction()->shape().ToString();
    EXPECT_EQ(ours->module->name(), (*tf_module)->name());
    // Every node our instructions name, TensorFlow's name too (it may name more: it keeps some
    // all-constant computations as HLO that we fold).
    const auto tf_names = MetadataNames(**tf_module);
    for (const auto& name : MetadataNames(*ours->module)) {
      EXPECT_TRUE(tf_names.count(name) > 0)
          << "our metadata names " << name.first << " '" << name.second
          << "', TensorFlow's does not";
    }

    // The values, on the same random inputs.
    std::mt19937_64 rng(2026);
    std::vector<Literal> params;
    for (int64_t i = 0; i < tf_entry->num_parameters(); ++i) {
      Shape s = tf_entry->parameter_instruction(i)->shape();
      s.ClearLayouts();
      params.push_back(RandomInput(s, rng));
    }
    auto want = EvaluateModule(**tf_module, params);
    ASSERT_TRUE(want.ok()) << want.status().message();
    auto got = EvaluateModule(*ours->module, params);
    ASSERT_TRUE(got.ok()) << got.status().message();
    Status same = ExpectLiteralNear(*want, *got, ErrorSpec{1e-5, 1e-4});
    EXPECT_TRUE(same.ok()) << same.message() << "\n" << ours->module->ToString();

    // The module is what the rest of the compiler takes: the CPU backend compiles and runs it.
    auto again = CompileGraphToHlo(*(*body)->graph, args, options);
    ASSERT_TRUE(again.ok());
    auto executable = runtime::CompileForCpu(std::move(again->module), {});
    ASSERT_TRUE(executable.ok()) << executable.status().message();
    auto ran = (*executable)->Execute(params);
    ASSERT_TRUE(ran.ok()) << ran.status().message();
    Status same_on_cpu = ExpectLiteralNear(*want, *ran, ErrorSpec{1e-5, 1e-4});
    EXPECT_TRUE(same_on_cpu.ok()) << "CPU backend: " << same_on_cpu.message();
    ++*compared;
  }
}

TEST(Tf2XlaCorpusTest, ClustersMatchTensorFlowsModules) {
  if (!fs::exists(kCorpus)) GTEST_SKIP() << "corpus not found at " << kCorpus;
  const std::vector<CorpusModule> modules = FindModules();
  ASSERT_FALSE(modules.empty());
  int compared = 0, skipped = 0;
  for (const CorpusModule& m : modules) CheckModule(m, &compared, &skipped);
  std::cout << compared << " cluster modules match TensorFlow's (evaluator and CPU backend); " << skipped
            << " skipped for ops left out on purpose (" << *kUnsupportedOps.begin() << ")\n";
  EXPECT_GE(compared, 30);
}

// The metadata of our instructions names the same TensorFlow nodes TensorFlow's does.
TEST(Tf2XlaCorpusTest, MetadataNamesTheSameNodes) {
  if (!fs::exists(kCorpus)) GTEST_SKIP() << "corpus not found at " << kCorpus;
  const fs::path dir = kCorpus / "min_cluster_size" / "default";
  if (!fs::exists(dir)) GTEST_SKIP() << "case min_cluster_size/default not in the corpus";
  CorpusModule m;
  for (const CorpusModule& candidate : FindModules()) {
    if (candidate.variant == "min_cluster_size/default") m = candidate;
  }
  ASSERT_FALSE(m.hlo.empty());
  auto fdef = graph::ReadFunctionDef(m.fdef.string());
  ASSERT_TRUE(fdef.ok());
  auto tf_module = ParseHloModule(ReadText(m.hlo));
  ASSERT_TRUE(tf_module.ok());
  std::vector<XlaArgument> args;
  for (const HloInstruction* p : (*tf_module)->entry_computation()->parameter_instructions()) {
    XlaArgument a;
    a.dtype = *graph::FromPrimitiveType(p->shape().element_type());
    a.shape = p->shape().dimensions();
    args.push_back(a);
  }
  auto body = FunctionBodyForCompilation(*fdef);
  ASSERT_TRUE(body.ok());
  auto ours = CompileGraphToHlo(*(*body)->graph, args, {});
  ASSERT_TRUE(ours.ok()) << ours.status().message();
  EXPECT_EQ(MetadataNames(*ours->module), MetadataNames(**tf_module));
}

}  // namespace
}  // namespace xlens::cluster

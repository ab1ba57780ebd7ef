// `xlens graph ops [OP...] [--json FILE]`: what xlens can do with each TensorFlow op, in the
// three places an op lives: the op-by-op executor's kernel, the XLA lowering (tf2xla) and the
// symbolic gradient; beside it, whether TensorFlow 2.21 compiles the op for XLA_CPU_JIT. It is
// how a user asks "does xlens run my model's ops?" before exporting anything, and what
// tests/models/op_coverage.py builds the README's table from.
#include <cstdio>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/cluster/tensorflow_xla_ops.h"
#include "compiler/cluster/tf2xla/function_call_ops.h"
#include "compiler/cluster/tf2xla/functional_ops.h"
#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/graph/op_registry.h"
#include "compiler/support/file_io.h"
#include "compiler/support/standard_output.h"
#include "compiler/support/terminal_text.h"

namespace xlens::cli {
namespace {

struct OpCoverage {
  std::string op;
  bool known = false;     // in xlens's op registry (loads and verifies)
  bool kernel = false;    // runs op by op
  bool lowering = false;  // xlens lowers it to HLO
  bool gradient = false;  // xlens builds its gradient
  bool tensorflow_xla = false;  // TensorFlow 2.21 compiles it for XLA_CPU_JIT
};

// TF1's control-flow primitives have no kernel: the executor itself moves their frames and
// dead tensors (executor.cc), as TensorFlow's does.
bool RunByTheExecutor(const std::string& op) {
  static const std::set<std::string> kPrimitives = {
      "Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit",
      "NextIteration", "RefNextIteration", "LoopCond", "ControlTrigger"};
  return kPrimitives.count(op) > 0;
}

OpCoverage CoverageOf(const std::string& op) {
  OpCoverage c;
  c.op = op;
  if (const graph::OpRegistration* r = graph::OpRegistry::Global().Find(op)) {
    c.known = true;
    c.kernel = static_cast<bool>(r->kernel) || RunByTheExecutor(op);
    c.gradient = static_cast<bool>(r->gradient);
  }
  // The functional control-flow ops and function calls are lowered by the compiler itself
  // (their bodies are functions it compiles), not by a registered lowering.
  c.lowering = cluster::XlaOpRegistry::Global().Find(op) != nullptr ||
               cluster::IsFunctionalWhile(op) || cluster::IsFunctionalIf(op) ||
               cluster::IsFunctionalCase(op) || cluster::IsFunctionCallOp(op);
  c.tensorflow_xla = cluster::TensorFlowCompilesForXlaCpu(op);
  return c;
}

const char* Mark(bool yes) { return yes ? "yes" : "-"; }

}  // namespace

int RunGraphOps(const GraphOpsArgs& args) {
  std::set<std::string> ops(args.ops.begin(), args.ops.end());
  if (ops.empty()) {
    for (const std::string& op : graph::OpRegistry::Global().OpNames()) ops.insert(op);
  }
  nlohmann::json rows = nlohmann::json::array();
  std::string text = fmt::format("{:<40} {:<8} {:<8} {:<8} {:<8}\n", "op", "kernel", "lowering",
                                 "gradient", "TF XLA");
  int unknown = 0;
  for (const std::string& op : ops) {
    const OpCoverage c = CoverageOf(op);
    if (!c.known) ++unknown;
    rows.push_back({{"op", c.op}, {"known", c.known}, {"kernel", c.kernel},
                    {"lowering", c.lowering}, {"gradient", c.gradient},
                    {"tensorflow_xla", c.tensorflow_xla}});
    text += fmt::format("{:<40} {:<8} {:<8} {:<8} {:<8}{}\n", EscapeForTerminal(c.op),
                        Mark(c.kernel), Mark(c.lowering), Mark(c.gradient),
                        Mark(c.tensorflow_xla), c.known ? "" : "  (unknown to xlens)");
  }
  if (!args.json.empty()) {
    Status written = WriteFileAtomic(args.json, rows.dump(1) + "\n");
    if (!written.ok()) return Fail(written.WithContext("--json"));
  } else {
    std::fputs(text.c_str(), stdout);
    std::printf("%zu ops, %d unknown to xlens\n", ops.size(), unknown);
  }
  Status flushed = FlushStandardOutput();
  return flushed.ok() ? 0 : Fail(flushed);
}

}  // namespace xlens::cli

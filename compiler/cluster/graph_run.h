// What every way of running a GraphDef through a Session shares (`xlens graph run` and the Python
// package's xlens.Session and xlens.tf.function): the graph built and shape-inferred for the
// checks, the names of feeds and fetches looked up, fed values checked against what the graph
// declares, variables given values, and TensorFlow's JIT installed from the session's jit level
// and the XLA flags. Messages are the command line's: they start with the graph as `shown` names
// it, quote names from the graph, and name the way the user gave the thing (`what`: "--feed" on
// the command line, "feed_dict" from Python), so both say the same one line for the same mistake.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/cluster/xla_jit.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/session.h"
#include "compiler/graph/tensor.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

// A name from the command line or the graph, as a message shows it: quoted, escaped, bounded.
std::string QuoteName(std::string_view name);
// "float[?,784]".
std::string TypeAndShape(graph::DataType type, const graph::PartialShape& shape);
// A message that does not start with `shown` yet gets it, so every failure names the graph.
Status InGraphFile(const Status& status, const std::string& shown);

// Builds `def` (unknown ops refused unless allowed) and infers its shapes; errors name `shown`.
StatusOr<std::unique_ptr<graph::Graph>> BuildGraphToRun(const graph::GraphDef& def,
                                                        const std::string& shown,
                                                        bool allow_unknown_ops = false,
                                                        bool infer_shapes = true);

// The node and output `name` ("node" or "node:1") names, or an error naming `what` and the graph.
StatusOr<std::pair<graph::Node*, int>> FindGraphTensor(const graph::Graph& g,
                                                       const std::string& shown,
                                                       std::string_view what,
                                                       const std::string& name,
                                                       bool output_required);

// A fed value must have the type of the output it replaces and fit a Placeholder's declared
// shape. `source` says where the value came from ("x.npy", "the fed value").
Status CheckFeed(const std::string& shown, const graph::Node& n, int index, const graph::Tensor& t,
                 const std::string& source);

// Gives the variable of node `name` the value `value` before a run (`what` is "--assign"):
// a VarHandleOp's or VariableV2's variable as its kernel opens it (container, shared_name), or,
// for a TF2 function graph's captured variable (a resource Placeholder), a session variable named
// as the Placeholder, which `feeds` then feeds a handle to every step, as a function's caller
// passes its variables' handles.
Status AssignVariable(const graph::Graph& g, const std::string& shown, std::string_view what,
                      graph::Session& session, const std::string& name, graph::Tensor value,
                      const std::string& source,
                      std::vector<std::pair<std::string, graph::Tensor>>* feeds);

// A TF2 function graph's captured variables that the run needs must all have a value: one line
// naming them, ending with `how` ("give --assign NAME=FILE.npy for each"), instead of the
// executor's "must feed" for the first.
Status CheckCapturesAssigned(const graph::Graph& g, const std::string& shown,
                             const std::vector<std::string>& fetches,
                             const std::vector<std::string>& targets,
                             const std::vector<std::pair<std::string, graph::Tensor>>& feeds,
                             std::string_view how);

// How a graph run uses TensorFlow's JIT.
struct GraphJitOptions {
  // off: op by op; auto: TensorFlow's JIT (the jit level and TF_XLA_FLAGS decide what is
  // clustered); compile: the whole graph as one must-compile function (jit_compile=True).
  std::string mode = "off";
  graph::GlobalJitLevel level = graph::GlobalJitLevel::kDefault;
  bool cpu_global_jit = false;
  std::string function_name;             // with compile
  // The XLA flags: XLA_FLAGS and TF_XLA_FLAGS, then the command line's (DebugOptionsFromEnvironment).
  DebugOptions flags;
};

// The JIT installed into `session_options` (null with mode off; keep it alive as long as the
// session). With compile,
// `def_to_run` receives the GraphDef the session must be created from (If, Case and While kept
// functional, as TensorFlow traces a jit_compile function: XLA compiles them whole).
StatusOr<std::unique_ptr<XlaJit>> InstallGraphJit(const GraphJitOptions& options,
                                                  const graph::GraphDef& def,
                                                  graph::SessionOptions* session_options,
                                                  std::optional<graph::GraphDef>* def_to_run);

}  // namespace xlens::cluster

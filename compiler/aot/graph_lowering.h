// A GraphDef and a tf2xla.Config -> one HLO module, as tfcompile lowers a graph: the graph pruned
// to what the fetches need from the feeds, the feeds the module's parameters in config order,
// then the variables (resources: read as parameters; the ones the graph writes, unless
// `readonly`, an extra result each), the fetches the results in config order. The body is
// lowered by the clustering's tf2xla (CompileGraphToHlo), the same lowering as a must-compile
// function of the JIT, so what the JIT compiles compiles here the same way.
//
// Errors are one line naming the graph file, the config entry (file:line:col) and the node:
// a node the graph lacks, an output index past the node's outputs, a feed whose type or shape is
// not the graph's, a feed of a resource, a fetch that needs a placeholder the config does not
// feed (it cannot be computed), a variable that is not one, a readonly variable the graph writes,
// and any node the lowering refuses.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/aot/header_writer.h"
#include "compiler/aot/tf2xla_config.h"
#include "compiler/graph/graph_def.h"
#include "compiler/graph/tensor.h"
#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens::aot {

struct LoweredGraph {
  std::unique_ptr<HloModule> module;
  // The header's buffers, named by the config (sizes from the graph's static shapes).
  std::vector<HeaderBuffer> args;       // the feeds
  std::vector<HeaderBuffer> results;    // the fetches
  std::vector<HeaderBuffer> variables;
  std::vector<int> variable_update_result;  // per variable: its result index, or -1
  std::vector<bool> variable_readonly;
};

// `shown` names the graph in messages; `module_name` names the HLO module (and its dumps).
// `frozen` gives values to resource variables the config does not list (a SavedModel's
// checkpoint): every read of one becomes a constant, its weights the object's read-only data.
StatusOr<LoweredGraph> LowerGraphForAot(const graph::GraphDef& def, const Tf2XlaConfig& config,
                                        const std::string& shown, const std::string& module_name,
                                        const std::map<std::string, graph::Tensor>& frozen = {});

}  // namespace xlens::aot

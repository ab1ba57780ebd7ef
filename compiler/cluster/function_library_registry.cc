#include "compiler/cluster/function_library_registry.h"

#include "compiler/graph/function_call_op.h"

namespace xlens::cluster {

using graph::GraphDef;
using graph::Node;
using graph::NodeDef;

std::shared_ptr<const graph::OpRegistry> RegistryWithFunctions(
    const graph::FunctionDefLibrary& library, const graph::OpRegistry& base) {
  auto registry = std::make_shared<graph::OpRegistry>();
  for (const std::string& name : base.OpNames()) registry->Register(*base.Find(name));
  for (const graph::FunctionDef& f : library.function) {
    if (base.Find(f.signature.name)) continue;  // a function never shadows an op
    // The call as the graph front end makes it: its signature, and the kernel that runs the
    // body (a call build_xla_ops leaves in place still runs op by op).
    registry->Register(std::move(*graph::MakeFunctionCallRegistration(f)));
  }
  return registry;
}

StatusOr<GraphWithFunctions> GraphFromGraphDefWithFunctions(const GraphDef& def) {
  GraphWithFunctions out;
  out.registry = RegistryWithFunctions(def.library);
  out.graph = std::make_unique<graph::Graph>(out.registry.get());
  graph::Graph& g = *out.graph;
  g.library() = def.library;
  g.versions() = def.versions;
  std::vector<Node*> nodes;
  for (const NodeDef& n : def.node) {
    NodeDef copy = n;
    copy.input.clear();
    ASSIGN_OR_RETURN(Node * node, g.AddNode(std::move(copy)));
    nodes.push_back(node);
  }
  for (size_t i = 0; i < def.node.size(); ++i) {
    const NodeDef& nd = def.node[i];
    Node* dst = nodes[i];
    int data_inputs = 0;
    for (const std::string& input : nd.input) {
      ASSIGN_OR_RETURN(graph::TensorId id, graph::ParseTensorName(input));
      Node* src = g.FindNode(id.node);
      if (!src) {
        return Status::Error("node '" + nd.name + "' (" + nd.op + "): input '" + input +
                             "' names a node that does not exist");
      }
      if (id.IsControl()) {
        g.AddControlEdge(src, dst);
        continue;
      }
      if (id.index >= src->num_outputs() || data_inputs >= dst->num_inputs()) {
        return Status::Error("node '" + nd.name + "' (" + nd.op + "): input '" + input +
                             "' does not fit the op's signature");
      }
      g.AddEdge(src, id.index, dst, data_inputs++);
    }
    if (data_inputs != dst->num_inputs()) {
      return Status::Error("node '" + nd.name + "' (" + nd.op + "): has " +
                           std::to_string(data_inputs) + " data inputs, the op takes " +
                           std::to_string(dst->num_inputs()));
    }
  }
  return out;
}

}  // namespace xlens::cluster

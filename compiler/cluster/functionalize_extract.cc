#include "compiler/cluster/functionalize_extract.h"

#include <map>

#include "compiler/graph/function.h"

namespace xlens::cluster::functionalize {

using graph::AttrValue;
using graph::Edge;
using graph::Graph;
using graph::Node;
using graph::NodeDef;

std::string FunctionNameFrom(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_';
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out = "f_" + out;
  return out;
}

namespace {

std::string UniqueFunctionName(const graph::FunctionDefLibrary& library, const std::string& base) {
  std::string name = FunctionNameFrom(base);
  if (library.Find(name) == nullptr) return name;
  for (int i = 1;; ++i) {
    std::string candidate = name + "_" + std::to_string(i);
    if (library.Find(candidate) == nullptr) return candidate;
  }
}

}  // namespace

StatusOr<std::string> ExtractFunction(const Graph& graph, const Extraction& e,
                                      graph::FunctionDefLibrary* library) {
  Graph body(&graph.registry());
  body.set_call_library(library);
  std::map<const Node*, Node*> copies;
  for (Node* n : e.nodes) {
    NodeDef def = n->def();
    def.input.clear();
    ASSIGN_OR_RETURN(Node * copy, body.AddNode(std::move(def)));
    copies[n] = copy;
  }
  std::vector<Node*> args;
  for (size_t i = 0; i < e.arg_types.size(); ++i) {
    NodeDef def;
    def.name = body.NewName("arg_" + std::to_string(i));
    def.op = "_Arg";
    def.attr["T"] = AttrValue::Type(e.arg_types[i]);
    def.attr["index"] = AttrValue::Int(static_cast<int64_t>(i));
    ASSIGN_OR_RETURN(Node * arg, body.AddNode(std::move(def)));
    args.push_back(arg);
  }
  for (Node* n : e.nodes) {
    Node* dst = copies[n];
    for (const Edge* edge : n->in_edges()) {
      if (!edge->src->IsOp()) continue;
      if (auto it = copies.find(edge->src); it != copies.end()) {
        if (edge->IsControlEdge()) {
          body.AddControlEdge(it->second, dst);
        } else {
          body.AddEdge(it->second, edge->src_output, dst, edge->dst_input);
        }
        continue;
      }
      ASSIGN_OR_RETURN(int arg, e.outside(*edge));
      if (arg < 0) continue;
      if (!edge->IsControlEdge()) body.AddEdge(args[arg], 0, dst, edge->dst_input);
    }
  }
  for (size_t i = 0; i < e.results.size(); ++i) {
    const ResultSource& r = e.results[i];
    Node* src = r.arg >= 0 ? args[r.arg] : copies.at(r.node);
    const int output = r.arg >= 0 ? 0 : r.output;
    NodeDef def;
    def.name = body.NewName("ret_" + std::to_string(i));
    def.op = "_Retval";
    def.attr["T"] = AttrValue::Type(src->output_type(output));
    def.attr["index"] = AttrValue::Int(static_cast<int64_t>(i));
    ASSIGN_OR_RETURN(Node * ret, body.AddNode(std::move(def)));
    body.AddEdge(src, output, ret, 0);
  }
  std::vector<std::string> control_outputs;
  for (const Node* n : e.control_outputs) control_outputs.push_back(copies.at(n)->name());
  RETURN_IF_ERROR(FunctionalizeConds(&body, library));
  const std::string name = UniqueFunctionName(*library, e.name);
  ASSIGN_OR_RETURN(graph::FunctionDef fdef, graph::GraphToFunctionDef(body, name, control_outputs));
  library->function.push_back(std::move(fdef));
  return name;
}

}  // namespace xlens::cluster::functionalize

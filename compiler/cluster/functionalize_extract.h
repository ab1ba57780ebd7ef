// The piece of FunctionalizeControlFlow both loops and conditionals share: copying a set of a
// graph's nodes into a function of their own (one _Arg per value read from outside, one _Retval
// per result), added to a library under a name no function there has yet.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster::functionalize {

// A result of an extracted function: output `output` of a copied node, or argument `arg`.
struct ResultSource {
  const graph::Node* node = nullptr;
  int output = 0;
  int arg = -1;
};

struct Extraction {
  std::string name;  // the function's name before it is made unique in the library
  std::vector<graph::DataType> arg_types;
  std::vector<graph::Node*> nodes;  // copied as they are
  // For an in-edge of a copied node whose source is not copied: the argument it reads (its
  // data), -1 to drop it (control edges only), or an error naming the node.
  std::function<StatusOr<int>(const graph::Edge&)> outside;
  std::vector<ResultSource> results;
  std::vector<const graph::Node*> control_outputs;  // copied nodes the function must run
};

// Builds the function `e` describes into `library` (conditionals inside it functionalized too)
// and returns its name.
StatusOr<std::string> ExtractFunction(const graph::Graph& graph, const Extraction& e,
                                      graph::FunctionDefLibrary* library);

// Rewrites the v1 conditionals of `graph` (one with no loops left) into If nodes, their branch
// functions added to `library`.
Status FunctionalizeConds(graph::Graph* graph, graph::FunctionDefLibrary* library);

// `name` with every character a function name may not hold replaced by '_'.
std::string FunctionNameFrom(const std::string& name);

}  // namespace xlens::cluster::functionalize

#include "compiler/cluster/cluster_graph_dot.h"

#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "compiler/graph/graph_dot.h"

namespace xlens::cluster {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

const char* FamilyColor(const std::string& family) {
  static const std::map<std::string, const char*> colors = {
      {"math", "#d0e4f5"},    {"matrix", "#c6dbef"}, {"reduction", "#c7e9c0"},
      {"array", "#fdd0a2"},   {"nn", "#dadaeb"},     {"state", "#fcbba1"},
      {"control", "#fdae6b"}, {"random", "#e5f5e0"}, {"const", "#eeeeee"},
      {"feed", "#ffffcc"},    {"variable", "#fcbba1"}, {"result", "#ffffcc"},
      {"noop", "#ffffff"}};
  auto it = colors.find(family);
  return it == colors.end() ? "#f7f7f7" : it->second;
}

const char* FamilyShape(const std::string& family) {
  if (family == "const") return "box";
  if (family == "feed") return "invhouse";
  if (family == "result") return "house";
  if (family == "variable") return "cylinder";
  if (family == "noop") return "octagon";
  return "ellipse";
}

// The box a node is drawn in: its `_XlaCluster`, its cluster in `result`, or the scope of the
// launch ops build_xla_ops made for a cluster ("cluster_0_1/xla_run" -> "cluster_0_1").
std::string BoxOf(const graph::NodeDef& n, const ClusteringResult* result,
                  const std::map<std::string, std::string>& member_of,
                  const std::set<std::string>& launch_scopes) {
  auto it = n.attr.find(kXlaClusterAttr);
  if (it != n.attr.end() && it->second.kind() == graph::AttrValue::Kind::kString) {
    return it->second.s();
  }
  if (result) {
    auto m = member_of.find(n.name);
    if (m != member_of.end()) return m->second;
  }
  size_t slash = n.name.find('/');
  if (slash != std::string::npos && launch_scopes.count(n.name.substr(0, slash))) {
    return n.name.substr(0, slash);
  }
  return "";
}

}  // namespace

std::string ClusterGraphToDot(const graph::GraphDef& def, const ClusteringResult* result,
                              const ClusterGraphDotOptions& options) {
  std::map<std::string, std::string> member_of;
  if (result) {
    for (const auto& [cluster, members] : result->clusters) {
      for (const std::string& m : members) member_of[m] = cluster;
    }
  }
  std::set<std::string> launch_scopes;
  std::set<std::string> functions;
  for (const auto& f : def.library.function) functions.insert(f.signature.name);
  for (const graph::NodeDef& n : def.node) {
    size_t slash = n.name.find('/');
    if (slash != std::string::npos && (n.op == "_XlaCompile" || n.op == "_XlaRun")) {
      launch_scopes.insert(n.name.substr(0, slash));
    }
  }

  std::map<std::string, int> id_of;
  for (size_t i = 0; i < def.node.size(); ++i) id_of[def.node[i].name] = static_cast<int>(i);
  // A node's DOT id is its name, so a reader of the .dot (the viewer, a script) finds a graph op
  // by the name its HLO op_name metadata carries.
  auto node_id = [&](size_t i) { return "\"" + Escape(def.node[i].name) + "\""; };

  std::ostringstream os;
  os << "digraph G {\n";
  os << "  graph [fontname=\"Helvetica\", fontsize=11, labelloc=t, rankdir=TB, "
        "compound=true, label=\""
     << Escape(options.title) << "\"];\n";
  os << "  node [fontname=\"Helvetica\", fontsize=10, style=filled];\n";
  os << "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];\n";

  std::map<std::string, std::vector<int>> boxes;
  std::vector<std::string> box_order;
  for (size_t i = 0; i < def.node.size(); ++i) {
    const graph::NodeDef& n = def.node[i];
    std::string box = BoxOf(n, result, member_of, launch_scopes);
    std::string family = graph::OpFamily(n.op);
    std::string label = n.name + "\n" + n.op;
    std::string tooltip = n.name + " (" + n.op + ")";
    std::string color = FamilyColor(family);
    std::string shape = FamilyShape(family);
    std::string extra;
    if (functions.count(n.op)) {
      // A call of a cluster's function: the cluster after encapsulate_subgraphs.
      shape = "box3d";
      color = "#bbdefb";
      tooltip += ": calls the function " + n.op + " of the library";
    } else if (box.empty() && result) {
      std::string reason = result->ReasonFor(n.name);
      if (!reason.empty()) {
        std::string shown = reason.size() > options.max_reason_chars
                                ? reason.substr(0, options.max_reason_chars) + "..."
                                : reason;
        label += "\nnot clustered: " + shown;
        tooltip += ": not clustered: " + reason;
        extra = ", color=\"#c62828\", fontcolor=\"#7f0000\"";
      }
    }
    os << "  " << node_id(i) << " [label=\"" << Escape(label) << "\", tooltip=\"" << Escape(tooltip)
       << "\", shape=" << shape << ", fillcolor=\"" << color << "\"" << extra << "];\n";
    if (!box.empty()) {
      if (!boxes.count(box)) box_order.push_back(box);
      boxes[box].push_back(static_cast<int>(i));
    }
  }
  for (const std::string& box : box_order) {
    os << "  subgraph \"cluster_" << Escape(box) << "\" {\n";
    os << "    label=\"" << Escape(box) << " (" << boxes[box].size() << " nodes)\";\n";
    os << "    style=\"rounded,filled\"; fillcolor=\"#f1f8ff\"; color=\"#1565c0\";\n";
    for (int i : boxes[box]) os << "    " << node_id(i) << ";\n";
    os << "  }\n";
  }
  for (size_t i = 0; i < def.node.size(); ++i) {
    for (const std::string& input : def.node[i].input) {
      auto id = graph::ParseTensorName(input);
      if (!id.ok()) continue;
      auto src = id_of.find(id->node);
      if (src == id_of.end()) continue;
      os << "  " << node_id(src->second) << " -> " << node_id(i);
      if (id->IsControl()) {
        os << " [style=dashed, color=\"#999999\"]";
      } else if (id->index > 0) {
        os << " [label=\":" << id->index << "\"]";
      }
      os << ";\n";
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace xlens::cluster

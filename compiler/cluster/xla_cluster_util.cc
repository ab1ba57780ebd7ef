#include "compiler/cluster/xla_cluster_util.h"

#include <deque>
#include <map>
#include <set>

#include <fmt/format.h>

namespace xlens::cluster {

using graph::Edge;
using graph::Graph;
using graph::Node;

StatusOr<std::vector<ControlFlowInfo>> BuildControlFlowInfo(const Graph& graph) {
  std::vector<ControlFlowInfo> info(graph.num_node_ids());
  std::vector<bool> seen(graph.num_node_ids(), false);
  std::map<std::string, std::string> parent_of;  // frame -> its parent frame
  std::deque<const Node*> ready;
  // Nodes without inputs run in the root frame (TensorFlow reaches them from _SOURCE).
  for (Node* node : graph.op_nodes()) {
    if (node->in_edges().empty()) {
      seen[node->id()] = true;
      ready.push_back(node);
    }
  }
  while (!ready.empty()) {
    const Node* src = ready.front();
    ready.pop_front();
    const ControlFlowInfo& src_info = info[src->id()];
    for (const Edge* e : src->out_edges()) {
      const Node* dst = e->dst;
      if (!dst->IsOp()) continue;
      ControlFlowInfo dst_info;
      if (dst->IsEnter()) {
        dst_info.frame_name = GetStringAttr(*dst, "frame_name");
        dst_info.parent_frame = src_info.frame_name;
        parent_of.emplace(dst_info.frame_name, dst_info.parent_frame);
      } else if (src->IsExit()) {
        auto it = parent_of.find(src_info.frame_name);
        dst_info.frame_name = src_info.parent_frame;
        dst_info.parent_frame =
            it != parent_of.end() && parent_of.count(src_info.parent_frame)
                ? parent_of[src_info.parent_frame]
                : "";
      } else {
        dst_info = src_info;
      }
      if (seen[dst->id()]) {
        // A node fed from two frames (other than a loop's Merge, fed by Enter and its
        // NextIteration in the same frame) is malformed control flow.
        if (info[dst->id()].frame_name != dst_info.frame_name && !dst->IsMerge()) {
          return Error(fmt::format(
              "node '{}' is reached from loop frame '{}' and from frame '{}'; a value must leave "
              "a loop through Exit",
              dst->name(), info[dst->id()].frame_name, dst_info.frame_name));
        }
        continue;
      }
      seen[dst->id()] = true;
      info[dst->id()] = dst_info;
      ready.push_back(dst);
    }
  }
  return info;
}

std::vector<SimpleEdge> EdgesWithSourceAndSink(const Graph& graph) {
  std::vector<SimpleEdge> edges;
  edges.reserve(graph.num_edge_ids() + graph.num_op_nodes());
  std::vector<const Edge*> by_id(graph.num_edge_ids(), nullptr);
  for (Node* node : graph.op_nodes()) {
    for (const Edge* e : node->out_edges()) by_id[e->id] = e;
  }
  for (const Edge* e : by_id) {
    if (e != nullptr) edges.push_back({e->src, e->src_output, e->dst, e->dst_input});
  }
  for (Node* node : graph.op_nodes()) {
    if (node->in_edges().empty()) {
      edges.push_back({graph.source_node(), graph::kControlSlot, node, graph::kControlSlot});
    }
  }
  for (Node* node : graph.op_nodes()) {
    if (node->out_edges().empty()) {
      edges.push_back({node, graph::kControlSlot, graph.sink_node(), graph::kControlSlot});
    }
  }
  return edges;
}

std::vector<SimpleEdge> InEdgesWithSource(const Node& node) {
  std::vector<SimpleEdge> edges;
  for (const Edge* e : node.in_edges()) {
    edges.push_back({e->src, e->src_output, e->dst, e->dst_input});
  }
  return edges;
}

Status CreateCycleDetectionGraph(const Graph& graph, const std::vector<ControlFlowInfo>& frames,
                                 GraphCycles* cycles) {
  for (int i = 0; i < graph.num_node_ids(); ++i) cycles->NewNode();
  std::map<std::string, int32_t> frame_nodes;
  auto frame_node = [&](const std::string& frame) {
    auto [it, inserted] = frame_nodes.emplace(frame, -1);
    if (inserted) it->second = cycles->NewNode();
    return it->second;
  };
  for (const SimpleEdge& edge : EdgesWithSourceAndSink(graph)) {
    int32_t src = edge.src->id(), dst = edge.dst->id();
    if (edge.dst->IsEnter() || edge.src->IsExit()) {
      // The loop stands in for its Enter and Exit nodes in the enclosing graph.
      if (edge.dst->IsEnter()) dst = frame_node(frames[edge.dst->id()].frame_name);
      if (edge.src->IsExit()) src = frame_node(frames[edge.src->id()].frame_name);
      if (!cycles->InsertEdge(src, dst)) {
        return Error(fmt::format("the graph has a cycle through the loop of '{}' and '{}'",
                                 edge.src->name(), edge.dst->name()));
      }
      continue;
    }
    if (edge.src->IsNextIteration()) continue;  // a loop's back edge
    if (!cycles->InsertEdge(src, dst)) {
      std::vector<int32_t> path = cycles->FindPath(dst, src);
      std::string names;
      for (int32_t id : path) {
        if (id < graph.num_node_ids() && graph.FindNodeId(id) != nullptr) {
          names += (names.empty() ? "" : " -> ") + graph.FindNodeId(id)->name();
        }
      }
      return Error(fmt::format(
          "the graph has a cycle that is not a while loop: {} -> {} (a cycle must go through "
          "NextIteration)",
          names, edge.dst->name()));
    }
  }
  return OkStatus();
}

bool IsIdentity(const Node& node) {
  return node.type_string() == "Identity" || node.type_string() == "RefIdentity";
}

bool IsConstant(const Node& node) {
  return node.type_string() == "Const" || node.type_string() == "HostConst";
}

bool IsShapeConsumerOp(const Node& node) {
  return node.type_string() == "Shape" || node.type_string() == "Rank" ||
         node.type_string() == "Size";
}

bool HasResourceInputOrOutput(const Node& node) {
  for (graph::DataType t : node.input_types()) {
    if (t == graph::DT_RESOURCE) return true;
  }
  for (graph::DataType t : node.output_types()) {
    if (t == graph::DT_RESOURCE) return true;
  }
  return false;
}

bool MayCallFunction(const Node& node, const Graph& graph) {
  if (graph.library().Find(node.type_string()) != nullptr) return true;
  for (const auto& [name, value] : node.attrs()) {
    if (value.kind() == graph::AttrValue::Kind::kFunc) return true;
    if (value.kind() == graph::AttrValue::Kind::kList && !value.list().func.empty()) return true;
  }
  return false;
}

std::optional<XlaResourceOpKind> ResourceOpKindFor(const std::string& op) {
  static const std::map<std::string, XlaResourceOpKind> kTable = [] {
    std::map<std::string, XlaResourceOpKind> table;
    for (const char* op : {"ReadVariableOp", "ResourceGather", "ResourceGatherNd",
                           "VariableShape", "VarIsInitializedOp"}) {
      table[op] = XlaResourceOpKind::kRead;
    }
    table["AssignVariableOp"] = XlaResourceOpKind::kWrite;
    for (const char* op :
         {"AssignAddVariableOp", "AssignSubVariableOp", "ResourceApplyGradientDescent",
          "ResourceApplyMomentum", "ResourceApplyKerasMomentum", "ResourceApplyAdam",
          "ResourceApplyAdagrad", "ResourceApplyAdagradV2", "ResourceApplyRMSProp",
          "ResourceApplyCenteredRMSProp", "ResourceApplyAdadelta", "ResourceApplyAdaMax",
          "ResourceApplyFtrl", "ResourceApplyFtrlV2", "ResourceApplyProximalAdagrad",
          "ResourceApplyProximalGradientDescent", "ResourceApplyAddSign",
          "ResourceApplyPowerSign", "ResourceScatterAdd", "ResourceScatterSub",
          "ResourceScatterMul", "ResourceScatterDiv", "ResourceScatterMin", "ResourceScatterMax",
          "ResourceScatterUpdate", "ResourceScatterNdAdd", "ResourceScatterNdSub",
          "ResourceScatterNdUpdate", "ResourceStridedSliceAssign"}) {
      table[op] = XlaResourceOpKind::kReadWrite;
    }
    return table;
  }();
  auto it = kTable.find(op);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> GetXlaClusterForNode(const Node& node) {
  const graph::AttrValue* value = graph::FindAttr(node.attrs(), "_XlaCluster");
  if (value == nullptr || value->kind() != graph::AttrValue::Kind::kString) return std::nullopt;
  return value->s();
}

void RemoveFromXlaCluster(Node* node) { node->mutable_attrs().erase("_XlaCluster"); }

bool GetBoolAttr(const Node& node, const std::string& name) {
  const graph::AttrValue* value = graph::FindAttr(node.attrs(), name);
  return value != nullptr && value->kind() == graph::AttrValue::Kind::kBool && value->b();
}

std::string GetStringAttr(const Node& node, const std::string& name) {
  const graph::AttrValue* value = graph::FindAttr(node.attrs(), name);
  if (value == nullptr || value->kind() != graph::AttrValue::Kind::kString) return "";
  return value->s();
}

}  // namespace xlens::cluster

#include "compiler/cluster/build_xla_ops_pass.h"

#include <map>
#include <set>

#include "compiler/cluster/clustering_result.h"

namespace xlens::cluster {

using graph::AttrListValue;
using graph::AttrValue;
using graph::DataType;
using graph::Edge;
using graph::GraphDef;
using graph::Node;
using graph::NodeDef;
using graph::TensorId;

namespace {

bool IsXlaCompiledKernel(const Node& n) {
  const AttrValue* a = graph::FindAttr(n.attrs(), kXlaCompiledKernelAttr);
  return a && a->kind() == AttrValue::Kind::kBool && a->b();
}

AttrValue TypeList(std::vector<DataType> types) {
  AttrListValue l;
  l.type = std::move(types);
  return AttrValue::List(std::move(l));
}

// What replaces one call node.
struct Launch {
  const Node* call = nullptr;
  std::string scope;
  bool has_control_outputs = false;
  std::vector<bool> output_used;

  std::string Name(const std::string& op_name) const { return scope + "/" + op_name; }
};

// Whether an int32 output lives in device memory on the CPU: everywhere but the outputs CPU
// kernels declare HostMemory, which for int32 are those of the shape ops.
bool Int32OutputInDeviceMemory(const Node& src) {
  const std::string& op = src.type_string();
  return !(op == "Shape" || op == "ShapeN" || op == "Size" || op == "Rank");
}

}  // namespace

StatusOr<GraphWithFunctions> BuildXlaOpsPass::Run(const graph::Graph& g) {
  dump_errors_.clear();
  const bool lazy = options_.lazy_compilation;

  // Name scopes: TensorFlow's Scope makes `<call>` unique among every name in the graph, and the
  // call itself still holds that name, so the first scope of `cluster_0` is `cluster_0_1`.
  std::set<std::string> names;
  for (Node* n : g.op_nodes()) names.insert(n->name());
  std::map<const Node*, Launch> launches;
  std::vector<const Node*> calls;
  for (Node* n : g.op_nodes()) {
    if (!IsXlaCompiledKernel(*n)) continue;
    Launch l;
    l.call = n;
    std::string scope = n->name();
    for (int k = 1; names.count(scope); ++k) scope = n->name() + "_" + std::to_string(k);
    names.insert(scope);
    l.scope = scope;
    l.output_used.assign(n->num_outputs(), false);
    for (const Edge* e : n->out_edges()) {
      if (e->IsControlEdge()) {
        if (e->dst->IsOp()) l.has_control_outputs = true;
      } else {
        l.output_used[e->src_output] = true;
      }
    }
    launches.emplace(n, std::move(l));
    calls.push_back(n);
  }

  auto output_image = [&](const Node* src, int out) -> std::string {
    auto it = launches.find(src);
    if (it == launches.end()) return TensorId{src->name(), out}.ToString();
    if (lazy) return it->second.Name("merge_oidx_" + std::to_string(out));
    return TensorId{it->second.Name("xla_run"), out}.ToString();
  };
  auto control_image = [&](const Node* src) -> std::string {
    auto it = launches.find(src);
    if (it == launches.end()) return "^" + src->name();
    return "^" + it->second.Name(lazy ? "data_as_ctrl" : "xla_run");
  };
  auto data_inputs = [&](const Node* n) {
    std::vector<std::string> in;
    for (int i = 0; i < n->num_inputs(); ++i) {
      auto [src, out] = n->input_node(i);
      if (src) in.push_back(output_image(src, out));
    }
    return in;
  };
  auto control_inputs = [&](const Node* n) {
    std::vector<std::string> in;
    std::set<std::string> seen;
    for (const Edge* e : n->in_edges()) {
      if (!e->IsControlEdge() || !e->src->IsOp()) continue;
      std::string c = control_image(e->src);
      if (seen.insert(c).second) in.push_back(c);
    }
    return in;
  };

  GraphDef def;
  def.versions = g.versions();
  def.library = g.library();
  for (Node* n : g.op_nodes()) {
    if (launches.count(n)) continue;
    NodeDef nd = n->def();
    nd.input = data_inputs(n);
    for (std::string& c : control_inputs(n)) nd.input.push_back(std::move(c));
    def.node.push_back(std::move(nd));
  }

  for (const Node* n : calls) {
    const Launch& l = launches.at(n);
    auto int_attr = [&](const char* name) -> StatusOr<int64_t> {
      return graph::GetIntAttr(n->attrs(), name, n->name());
    };
    ASSIGN_OR_RETURN(int64_t num_constants, int_attr(kXlaNumConstantArgsAttr));
    ASSIGN_OR_RETURN(int64_t num_resources, int_attr(kXlaNumResourceArgsAttr));
    const int num_inputs = n->num_inputs();
    if (num_constants < 0 || num_resources < 0 || num_constants + num_resources > num_inputs) {
      return Status::Error("node '" + n->name() + "' (" + n->type_string() + "): " +
                           std::to_string(num_constants) + " constant and " +
                           std::to_string(num_resources) + " resource arguments do not fit its " +
                           std::to_string(num_inputs) + " inputs");
    }
    std::vector<std::string> inputs = data_inputs(n);
    if (static_cast<int>(inputs.size()) != num_inputs) {
      return Status::Error("node '" + n->name() + "' (" + n->type_string() +
                           "): an input is not connected");
    }
    const int first_resource = num_inputs - static_cast<int>(num_resources);
    std::vector<DataType> const_types(n->input_types().begin(),
                                      n->input_types().begin() + num_constants);
    std::vector<DataType> arg_types(n->input_types().begin() + num_constants,
                                    n->input_types().begin() + first_resource);
    std::vector<DataType> run_types(n->input_types().begin() + num_constants,
                                    n->input_types().end());
    for (int i = first_resource; i < num_inputs; ++i) {
      if (n->input_type(i) != graph::DT_RESOURCE) {
        return Status::Error("node '" + n->name() + "' (" + n->type_string() + "): input " +
                             std::to_string(i) + " is counted as a resource but is " +
                             graph::DataTypeName(n->input_type(i)));
      }
    }
    graph::NameAttrList function;
    function.name = n->type_string();
    function.attr = std::make_shared<graph::AttrMap>(n->attrs());
    const std::string device = n->requested_device();
    auto node = [&](const std::string& name, const std::string& op) {
      NodeDef nd;
      nd.name = l.Name(name);
      nd.op = op;
      nd.device = device;
      return nd;
    };

    NodeDef compile = node("xla_compile", "_XlaCompile");
    compile.input = inputs;
    for (std::string& c : control_inputs(n)) compile.input.push_back(std::move(c));
    compile.attr["Tconstants"] = TypeList(const_types);
    compile.attr["Targs"] = TypeList(arg_types);
    compile.attr["Nresources"] = AttrValue::Int(num_resources);
    compile.attr["function"] = AttrValue::Func(function);
    compile.attr["must_compile"] = AttrValue::Bool(!lazy);
    if (const AttrValue* ref = graph::FindAttr(n->attrs(), kXlaHasReferenceVarsAttr)) {
      compile.attr[kXlaHasReferenceVarsAttr] = *ref;
    }
    def.node.push_back(compile);

    NodeDef run = node("xla_run", "_XlaRun");
    run.input.assign(inputs.begin() + num_constants, inputs.end());
    run.attr["Targs"] = TypeList(run_types);
    run.attr["Tresults"] = TypeList(n->output_types());
    if (!lazy) {
      run.input.push_back(l.Name("xla_compile"));
      def.node.push_back(run);
      continue;
    }

    NodeDef key = node("predicated_compilation_key", "Switch");
    key.input = {l.Name("xla_compile"), l.Name("xla_compile") + ":1"};
    key.attr["T"] = AttrValue::Type(graph::DT_STRING);
    def.node.push_back(key);
    run.input.push_back(l.Name("predicated_compilation_key") + ":1");
    def.node.push_back(run);

    // Control outputs: a control edge cannot be merged, so each side's completion becomes a
    // value, the values are merged, and the merge becomes control again.
    std::string fallback_trigger = "data_as_ctrl";
    if (l.has_control_outputs) {
      graph::Tensor empty(graph::DT_INT32, {0});
      for (const char* name : {"ctrl_as_data", "ctrl_as_data_1"}) {
        NodeDef c = node(name, "Const");
        c.attr["dtype"] = AttrValue::Type(graph::DT_INT32);
        c.attr["value"] = AttrValue::TensorValue(empty);
        c.input.push_back("^" + l.Name(name == std::string("ctrl_as_data")
                                           ? "stateful_partitioned_call"
                                           : "xla_run"));
        def.node.push_back(std::move(c));
      }
      NodeDef merge = node("ctrl_merge", "Merge");
      merge.input = {l.Name("ctrl_as_data"), l.Name("ctrl_as_data_1")};
      merge.attr["T"] = AttrValue::Type(graph::DT_INT32);
      merge.attr["N"] = AttrValue::Int(2);
      def.node.push_back(merge);
      NodeDef as_ctrl = node("data_as_ctrl", "Identity");
      as_ctrl.input = {l.Name("ctrl_merge")};
      as_ctrl.attr["T"] = AttrValue::Type(graph::DT_INT32);
      def.node.push_back(as_ctrl);
      fallback_trigger = "data_as_ctrl_1";
    }

    for (int i = 0; i < n->num_outputs(); ++i) {
      if (!l.output_used[i]) continue;
      NodeDef merge = node("merge_oidx_" + std::to_string(i), "_XlaMerge");
      merge.input = {TensorId{l.Name("stateful_partitioned_call"), i}.ToString(),
                     TensorId{l.Name("xla_run"), i}.ToString()};
      merge.attr["T"] = AttrValue::Type(n->output_type(i));
      def.node.push_back(std::move(merge));
    }

    NodeDef trigger = node(fallback_trigger, "Identity");
    trigger.input = {l.Name("predicated_compilation_key")};
    trigger.attr["T"] = AttrValue::Type(graph::DT_STRING);
    def.node.push_back(trigger);

    // TensorFlow's PredicateInt32Inputs: a PartitionedCall takes int32 arguments in host memory,
    // so one produced in device memory would be copied even when the fallback does not run;
    // an IdentityN that is dead exactly when the fallback is keeps that copy from happening.
    NodeDef int32_id_n = node("int32_id_n", "IdentityN");
    std::vector<DataType> int32_types;
    std::vector<std::string> fallback_inputs = inputs;
    for (int i = 0; i < num_inputs; ++i) {
      auto [src, out] = n->input_node(i);
      if (src->output_type(out) != graph::DT_INT32 || !Int32OutputInDeviceMemory(*src)) continue;
      fallback_inputs[i] =
          TensorId{int32_id_n.name, static_cast<int>(int32_types.size())}.ToString();
      int32_id_n.input.push_back(inputs[i]);
      int32_types.push_back(graph::DT_INT32);
    }

    NodeDef fallback = node("stateful_partitioned_call", "StatefulPartitionedCall");
    fallback.input = fallback_inputs;
    fallback.input.push_back("^" + l.Name(fallback_trigger));
    fallback.attr["Tin"] = TypeList(n->input_types());
    fallback.attr["Tout"] = TypeList(n->output_types());
    fallback.attr["f"] = AttrValue::Func(function);
    fallback.attr["config"] = AttrValue::String("");
    fallback.attr["config_proto"] = AttrValue::String(options_.config_proto);
    fallback.attr["executor_type"] = AttrValue::String("");
    def.node.push_back(std::move(fallback));
    if (!int32_types.empty()) {
      int32_id_n.input.push_back("^" + l.Name(fallback_trigger));
      int32_id_n.attr["T"] = TypeList(int32_types);
      def.node.push_back(std::move(int32_id_n));
    }
  }

  ASSIGN_OR_RETURN(GraphWithFunctions result, GraphFromGraphDefWithFunctions(def));
  if (dumper_) {
    auto written = dumper_->Dump("build_xla_ops", *result.graph);
    if (!written.ok()) dump_errors_.push_back(written.status().message());
  }
  return result;
}

}  // namespace xlens::cluster
